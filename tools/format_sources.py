#!/usr/bin/env python3
"""clang-format over every C++/CUDA source, keeping the wrong-variant patches applicable.

    python3 tools/format_sources.py           # make format
    python3 tools/format_sources.py --check   # make check-format: exit 1 naming unformatted files

A wrong variant is a diff against its solution (solutions/wrong/<day>/<id>__<bug>.patch), so
reformatting a solution would leave its patches pointing at lines that no longer exist. Each
patch is therefore applied to the solution as it is, the patched file is formatted like the
solution, and the patch is rewritten as the diff between the two formatted files (its prose
preamble kept). tools/check_skeletons.py then verifies that every patch still applies.
"""
import argparse
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import apply_patch  # noqa: E402

EXTENSIONS = ("*.cu", "*.cuh", "*.h", "*.cpp")


def sources():
    out = subprocess.run(["git", "ls-files", *EXTENSIONS], cwd=ROOT, capture_output=True, text=True, check=True)
    return [ROOT / f for f in out.stdout.splitlines() if (ROOT / f).is_file()]


def clang_format(text, like):
    """`text` formatted as the file `like` would be (its extension picks the language)."""
    r = subprocess.run(["clang-format", f"--assume-filename={like}", "--style=file"], input=text, cwd=ROOT,
                       capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"format: clang-format failed on {like}: {r.stderr.strip()}")
    return r.stdout


def unformatted(files):
    bad = []
    for f in files:
        text = f.read_text()
        if clang_format(text, f) != text:
            bad.append(f)
    return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    files = sources()
    if args.check:
        bad = unformatted(files)
        for f in bad:
            print(f"check-format: {f.relative_to(ROOT)} is not formatted as .clang-format says")
        if bad:
            print("check-format: run `make format` (it rewrites the wrong-variant patches too)")
            return 1
        print(f"check-format: {len(files)} files formatted as .clang-format says")
        return 0
    # 1. Every patch applied to today's solution, the result formatted.
    patched = []
    for p in sorted(ROOT.glob("solutions/wrong/day*/*.patch")):
        patch, src_path, result, _ = apply_patch.load_and_apply(p, ROOT)
        patched.append((patch, src_path, clang_format("\n".join(result), src_path)))
    # 2. The sources.
    changed = [f for f in unformatted(files)]
    for f in changed:
        f.write_text(clang_format(f.read_text(), f))
    # 3. Each patch rewritten against its formatted solution.
    rewritten = 0
    for patch, src_path, result in patched:
        new = apply_patch.refreshed_text(patch, src_path, result.split("\n"))
        if new != patch.path.read_text():
            patch.path.write_text(new)
            rewritten += 1
    print(f"format: {len(changed)} of {len(files)} files reformatted, {rewritten} wrong-variant patches rewritten")
    return 0


if __name__ == "__main__":
    sys.exit(main())
