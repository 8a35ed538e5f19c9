#!/usr/bin/env python3
"""Code shown in lessons comes from the sources by anchors, so it cannot drift (stdlib only).

    python3 tools/snippets.py            # same as --check
    python3 tools/snippets.py --check    # exit 1 listing every stale or broken snippet
    python3 tools/snippets.py --write    # refresh every snippet block (make snippets)
    python3 tools/snippets.py --write day10-optimizations/05_fp16_mma.md   # only these files

In a source file, the lines to show are marked (`#` instead of `//` in Python files):

    // snippet-begin: causal-tile-range
    ...
    // snippet-end: causal-tile-range

In a markdown file, the line right before a fenced code block names the anchor, by a path
relative to the repository root:

    <!-- snippet: solutions/day10-optimizations/01_flash_tuned.cu#causal-tile-range -->
    ```cpp
    ```

The block's body must equal the source lines between the two markers: marker lines excluded
(also those of other snippets nested inside), common indentation removed (column-0 `#pragma` lines stay put), trailing blanks
stripped, blank lines at both ends dropped. `--write` rewrites the body (the fence lines are kept
as written, so the language tag is yours); `--check` prints file:line, what is wrong and a short
diff. An unknown path, an unknown or duplicated name, a begin without its end, or a marker not
followed by a fenced block is an error in both modes. Markers inside fenced blocks are examples,
not snippets (docs/conventions.md shows the syntax that way).

Markdown files scanned: README.md and README.zh.md, day*/**/*.md, docs/*.md.
"""
import argparse
import difflib
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
MD_MARKER = re.compile(r"^(\s*)<!--\s*snippet:\s*([^#\s]+)#(\S+)\s*-->\s*$")
SRC_MARKER = re.compile(r"^\s*(?://|#)\s*snippet-(begin|end):\s*(\S+)\s*$")
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})")
MAX_DIFF_LINES = 14


class SnippetError(Exception):
    pass


def markdown_files(root=ROOT):
    files = {p for p in (root / "README.md", root / "README.zh.md") if p.exists()}
    files.update(p for p in root.glob("day*/**/*.md"))
    files.update(p for p in root.glob("docs/*.md"))
    return sorted(files)


def source_snippet(root, rel_path, name, _cache={}):
    """The lines of snippet `name` in root/rel_path, dedented; raises SnippetError."""
    path = (root / rel_path).resolve()
    if not path.is_file() or root.resolve() not in path.parents:
        raise SnippetError(f"no file {rel_path} (paths are relative to the repository root)")
    key = (path, path.stat().st_mtime_ns)
    if key not in _cache:
        _cache[key] = _anchors(path, rel_path)
    anchors = _cache[key]
    if name not in anchors:
        known = ", ".join(sorted(anchors)) or "none"
        raise SnippetError(f"{rel_path} has no snippet '{name}' (it has: {known}); mark the lines "
                           f"with '// snippet-begin: {name}' and '// snippet-end: {name}'")
    return anchors[name]


def _anchors(path, rel_path):
    """{name: dedented lines} of every snippet in one source file; raises on malformed markers."""
    lines = path.read_text().split("\n")
    open_at, spans = {}, {}
    for no, line in enumerate(lines, 1):
        m = SRC_MARKER.match(line)
        if not m:
            continue
        kind, name = m.groups()
        if kind == "begin":
            if name in open_at or name in spans:
                raise SnippetError(f"{rel_path}:{no}: snippet '{name}' begins twice (names are unique per file)")
            open_at[name] = no
        else:
            if name not in open_at:
                raise SnippetError(f"{rel_path}:{no}: 'snippet-end: {name}' without a begin above it")
            spans[name] = (open_at.pop(name), no)
    if open_at:
        name, no = next(iter(open_at.items()))
        raise SnippetError(f"{rel_path}:{no}: 'snippet-begin: {name}' has no 'snippet-end: {name}'")
    return {name: _clean([l for l in lines[b:e - 1] if not SRC_MARKER.match(l)])
            for name, (b, e) in spans.items()}


def _clean(lines):
    lines = [l.rstrip() for l in lines]
    while lines and not lines[0]:
        lines.pop(0)
    while lines and not lines[-1]:
        lines.pop()
    # Preprocessor lines (#pragma unroll) sit in column 0 whatever the nesting: they neither
    # set the common indentation nor lose any.
    indent = min((len(l) - len(l.lstrip()) for l in lines if l and not l.startswith("#")), default=0)
    return [l if l.startswith("#") else l[indent:] for l in lines]


class Block:
    """One `<!-- snippet: ... -->` marker of a markdown file and the fenced block below it."""

    def __init__(self, md, marker_no, indent, path, name, body_start, body_end):
        self.md, self.marker_no, self.indent = md, marker_no, indent
        self.path, self.name = path, name
        self.body_start, self.body_end = body_start, body_end  # 0-based, body = lines[start:end]


def find_blocks(md, lines):
    """(blocks, errors) of one markdown file's lines."""
    blocks, errors, fence, i = [], [], None, 0
    while i < len(lines):
        line = lines[i]
        f = FENCE.match(line)
        if fence:  # inside a fenced block: only its closing fence matters
            if f and f.group(2)[0] == fence[0] and len(f.group(2)) >= len(fence) and not line.strip()[len(f.group(2)):]:
                fence = None
            i += 1
            continue
        if f:
            fence = f.group(2)
            i += 1
            continue
        m = MD_MARKER.match(line)
        if not m:
            i += 1
            continue
        indent, path, name = m.groups()
        opening = FENCE.match(lines[i + 1]) if i + 1 < len(lines) else None
        if not opening:
            errors.append(f"{md}:{i + 1}: snippet marker for {path}#{name} must be followed directly "
                          "by a fenced code block (```cpp on the next line)")
            i += 1
            continue
        tick = opening.group(2)
        end = next((k for k in range(i + 2, len(lines))
                    if (c := FENCE.match(lines[k])) and c.group(2)[0] == tick[0]
                    and len(c.group(2)) >= len(tick) and not lines[k].strip()[len(c.group(2)):]), None)
        if end is None:
            errors.append(f"{md}:{i + 2}: the code block of snippet {path}#{name} is never closed")
            break
        blocks.append(Block(md, i + 1, indent, path, name, i + 2, end))
        i = end + 1
    return blocks, errors


def run(root=ROOT, write=False, only=None):
    """(problems, fresh_count, written_files). Problems are one-line-first messages. `only`: a
    set of markdown paths to look at (all when None)."""
    problems, fresh, written = [], 0, []
    for md_path in markdown_files(root):
        if only is not None and md_path.resolve() not in only:
            continue
        rel_md = md_path.relative_to(root)
        lines = md_path.read_text().split("\n")
        blocks, errors = find_blocks(rel_md, lines)
        file_problems = [(int(e.split(":")[1]), e) for e in errors]
        changed = False
        for b in reversed(blocks):  # bottom-up, so earlier line numbers stay valid while writing
            try:
                want = source_snippet(root, b.path, b.name)
            except SnippetError as e:
                file_problems.append((b.marker_no, f"{rel_md}:{b.marker_no}: snippet {b.path}#{b.name}: {e}"))
                continue
            want = [(b.indent + l) if l else "" for l in want]
            have = lines[b.body_start:b.body_end]
            if have == want:
                fresh += 1
                continue
            if write:
                lines[b.body_start:b.body_end] = want
                changed = True
                continue
            what = "is empty" if not any(l.strip() for l in have) else "differs from the source"
            diff = list(difflib.unified_diff(have, want, "lesson", "source", lineterm="", n=1))[2:]
            shown = diff[:MAX_DIFF_LINES] + ([f"... ({len(diff) - MAX_DIFF_LINES} more diff lines)"]
                                             if len(diff) > MAX_DIFF_LINES else [])
            file_problems.append((b.marker_no, f"{rel_md}:{b.marker_no}: snippet {b.path}#{b.name} {what}: "
                                  "run `make snippets` (never edit the block by hand)\n"
                                  + "\n".join("      " + d for d in shown)))
        problems += [msg for _, msg in sorted(file_problems, key=lambda x: x[0])]
        if changed:
            md_path.write_text("\n".join(lines))
            written.append(rel_md)
    return problems, fresh, written


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="fail on a stale snippet (default)")
    mode.add_argument("--write", action="store_true", help="refresh every snippet block")
    ap.add_argument("files", nargs="*", help="only these markdown files (default: all)")
    args = ap.parse_args()
    only = {pathlib.Path(f).resolve() for f in args.files} or None
    problems, fresh, written = run(ROOT, write=args.write, only=only)
    for w in written:
        print(f"snippets: refreshed {w}")
    if problems:
        print(f"snippets: {len(problems)} problem(s):")
        for p in problems:
            print("  - " + p)
        return 1
    if args.write:
        print(f"snippets: {fresh} already fresh, {len(written)} file(s) rewritten")
    else:
        print(f"snippets: all {fresh} snippet blocks match their sources")
    return 0


if __name__ == "__main__":
    sys.exit(main())
