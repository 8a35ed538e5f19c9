#!/usr/bin/env python3
"""Applies one wrong-variant patch to its solution and writes the result (stdlib only).

    python3 tools/apply_patch.py solutions/wrong/DAY/ID__BUG.patch OUT.cu
    python3 tools/apply_patch.py PATCH OUT.cu --root DIR     # paths in the patch relative to DIR
    python3 tools/apply_patch.py PATCH --refresh             # rewrite PATCH's line numbers

A wrong variant is a prose preamble (Bug:, What people write:, Why it is wrong:, Caught by:)
followed by ONE unified diff against its solution, with repo-relative paths:

    --- a/solutions/day01-basics/02_matmul.cu
    +++ b/solutions/day01-basics/02_matmul.cu
    @@ -70,7 +70,7 @@
     context line
    -removed line
    +added line

Application is strict (no fuzz): every context and removed line must equal the solution's line
exactly, whitespace included. A hunk may land at another line than its header says (the solution
grew or shrank above it); that offset is reported on stderr and `--refresh` rewrites the numbers.
When a hunk matches nowhere, the solution changed under this wrong variant and the patch must be
re-derived from the current solution: the error names the patch, the hunk and the first line that
differs. We do not rely on `patch(1)`: CI images need not have it, and its fuzz would silently
turn a stale variant into a different program.
"""
import argparse
import difflib
import pathlib
import re
import sys

HUNK_RE = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
PREAMBLE_FIELDS = ("Bug:", "What people write:", "Why it is wrong:", "Caught by:")


class PatchError(Exception):
    pass


class Hunk:
    def __init__(self, header, old_start, lines, patch_line):
        self.header = header          # the "@@ ... @@" line, for messages
        self.old_start = old_start    # 1-based line of the solution where the hunk starts
        self.lines = lines            # (tag, text) with tag ' ', '-' or '+'
        self.patch_line = patch_line  # line of the header in the patch file

    def old(self):
        return [t for tag, t in self.lines if tag in " -"]

    def new(self):
        return [t for tag, t in self.lines if tag in " +"]


class Patch:
    def __init__(self, path):
        self.path = pathlib.Path(path)
        text = self.path.read_text()
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        start = next((i for i in range(len(lines) - 1)
                      if lines[i].startswith("--- ") and lines[i + 1].startswith("+++ ")), None)
        if start is None:
            raise PatchError(f"{self.path}: no '--- a/<path>' / '+++ b/<path>' header found")
        self.preamble = lines[:start]
        self.header = lines[start:start + 2]
        self.target = self._path_of(lines[start], "--- ", "a/")
        if self._path_of(lines[start + 1], "+++ ", "b/") != self.target:
            raise PatchError(f"{self.path}:{start + 2}: '---' and '+++' name different files")
        self.hunks = []
        i = start + 2
        while i < len(lines):
            m = HUNK_RE.match(lines[i])
            if not m:
                if lines[i].startswith("--- "):
                    raise PatchError(f"{self.path}:{i + 1}: a wrong variant patches ONE file")
                raise PatchError(f"{self.path}:{i + 1}: expected a hunk header '@@ -l,n +l,n @@', "
                                 f"found {lines[i]!r}")
            old_len = int(m.group(2)) if m.group(2) is not None else 1
            new_len = int(m.group(4)) if m.group(4) is not None else 1
            header_line, i = i + 1, i + 1
            body, seen_old, seen_new = [], 0, 0
            while i < len(lines) and (seen_old < old_len or seen_new < new_len):
                raw = lines[i]
                if raw.startswith("\\"):           # "\ No newline at end of file"
                    i += 1
                    continue
                tag, t = (raw[0], raw[1:]) if raw else (" ", "")  # an editor may strip "' '"
                if tag not in " -+":
                    raise PatchError(f"{self.path}:{i + 1}: hunk line starts with {tag!r}, "
                                     "not ' ', '-' or '+' (line counts in the @@ header wrong?)")
                body.append((tag, t))
                seen_old += tag in " -"
                seen_new += tag in " +"
                i += 1
            while i < len(lines) and lines[i].startswith("\\"):
                i += 1
            if seen_old != old_len or seen_new != new_len:
                raise PatchError(f"{self.path}:{header_line}: hunk {lines[header_line - 1]!r} "
                                 f"promises -{old_len} +{new_len} lines, has -{seen_old} +{seen_new}")
            self.hunks.append(Hunk(lines[header_line - 1], int(m.group(1)), body, header_line))
        if not self.hunks:
            raise PatchError(f"{self.path}: the diff has no hunks")

    def _path_of(self, line, prefix, ab):
        p = line[len(prefix):].split("\t")[0].strip()
        if not p.startswith(ab):
            raise PatchError(f"{self.path}: {line!r}: paths must be repo-relative and start "
                             f"with '{ab}' (diff -u --label {ab}solutions/...)")
        return p[len(ab):]

    def changed_lines(self):
        return sum(tag != " " for h in self.hunks for tag, _ in h.lines)

    def missing_fields(self):
        return [f for f in PREAMBLE_FIELDS
                if not any(l.startswith(f) and l[len(f):].strip() for l in self.preamble)]

    def title(self):
        return next((l[len("Bug:"):].strip() for l in self.preamble if l.startswith("Bug:")), "")


def _matches_at(src, old, pos):
    return pos >= 0 and pos + len(old) <= len(src) and src[pos:pos + len(old)] == old


def apply(patch, source_lines):
    """(result lines, [(hunk number, offset)] for hunks that did not land where their header says).

    Raises PatchError naming the hunk and the first mismatching line when a hunk matches nowhere.
    """
    out, cursor, delta, offsets = [], 0, 0, []
    for n, h in enumerate(patch.hunks, 1):
        old = h.old()
        # A pure insertion "@@ -L,0" inserts AFTER line L; otherwise the hunk starts AT line L.
        want = h.old_start - 1 + delta + (1 if not old else 0)
        if not old:
            pos = want
        else:
            # Nearest position at or after the previous hunk where all old lines match exactly.
            candidates = [p for p in range(cursor, len(source_lines) - len(old) + 1)
                          if _matches_at(source_lines, old, p)]
            if not candidates:
                raise PatchError(_mismatch(patch, n, h, source_lines, max(want, cursor)))
            pos = min(candidates, key=lambda p: (abs(p - want), p))
        if pos < cursor or pos > len(source_lines):
            raise PatchError(f"{patch.path}: hunk {n} ({h.header}) overlaps the previous hunk or "
                             "lies past the end of the solution: the solution changed under this "
                             "wrong variant: re-derive the patch")
        if pos != want:
            offsets.append((n, pos - want))
            delta += pos - want
        out.extend(source_lines[cursor:pos])
        out.extend(h.new())
        cursor = pos + len(old)
    out.extend(source_lines[cursor:])
    return out, offsets


def _mismatch(patch, n, h, src, pos):
    """The message for hunk n that matches nowhere: its first line that differs at `pos`."""
    old_no = 0
    for k, (tag, text) in enumerate(h.lines):
        if tag == "+":
            continue
        have = src[pos + old_no] if pos + old_no < len(src) else "<end of file>"
        if have != text:
            return (f"{patch.path}: hunk {n} ({h.header}, patch line {h.patch_line + 1 + k}) does not "
                    f"apply to {patch.target}:\n"
                    f"  at solution line {pos + old_no + 1} the patch expects {text!r}\n"
                    f"  {'':{len(str(pos + old_no + 1)) + 21}}the solution has {have!r}\n"
                    "the solution changed under this wrong variant: re-derive the patch "
                    "(briefing: copy the solution, plant the bug again, diff -u)")
        old_no += 1
    return f"{patch.path}: hunk {n} ({h.header}) does not apply to {patch.target}"


def load_and_apply(patch_path, root, source=None):
    """(Patch, source path, result lines, offsets); raises PatchError (also for a missing file)."""
    patch = Patch(patch_path)
    src_path = pathlib.Path(source) if source else pathlib.Path(root) / patch.target
    if not src_path.exists():
        raise PatchError(f"{patch.path}: patches {patch.target}, which does not exist")
    src = src_path.read_text().split("\n")
    result, offsets = apply(patch, src)
    return patch, src_path, result, offsets


def refreshed_text(patch, src_path, result):
    """The patch file's text rewritten against the current solution (preamble kept)."""
    def lines(text_lines):  # drop the empty string that split() leaves after a final newline
        return text_lines[:-1] if text_lines and text_lines[-1] == "" else text_lines
    src = lines(src_path.read_text().split("\n"))
    body = difflib.unified_diff(src, lines(result), f"a/{patch.target}", f"b/{patch.target}",
                                lineterm="", n=3)
    return "\n".join(patch.preamble + list(body)) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("patch")
    ap.add_argument("output", nargs="?", help="where to write the patched solution")
    ap.add_argument("--root", default=str(pathlib.Path(__file__).resolve().parent.parent),
                    help="directory the patch's a/ paths are relative to (default: the repo)")
    ap.add_argument("--source", help="apply to this file instead of the one the patch names")
    ap.add_argument("--refresh", action="store_true",
                    help="rewrite the patch's hunk line numbers after an offset (content unchanged)")
    args = ap.parse_args()
    if not args.output and not args.refresh:
        ap.error("give an output path or --refresh")
    try:
        patch, src_path, result, offsets = load_and_apply(args.patch, args.root, args.source)
    except PatchError as e:
        print(f"apply_patch: {e}", file=sys.stderr)
        return 1
    for n, off in offsets:
        print(f"apply_patch: {args.patch}: hunk {n} applied at offset {off:+d} lines "
              f"(refresh: python3 tools/apply_patch.py {args.patch} --refresh)", file=sys.stderr)
    if args.output:
        out = pathlib.Path(args.output)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text("\n".join(result))
    if args.refresh:
        pathlib.Path(args.patch).write_text(refreshed_text(patch, src_path, result))
        print(f"apply_patch: rewrote {args.patch}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
