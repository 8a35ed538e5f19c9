#!/usr/bin/env python3
"""The exercise contract, checked without a GPU.

For every skeleton <day>/NN_id.cu:
  * the header <day>/NN_id.h, the test <day>/tests/test_NN_id.cpp and the solution
    solutions/<day>/NN_id.cu exist, and at least one wrong variant
    solutions/wrong/<day>/NN_id__<bug>.cu does;
  * the skeleton has at least one TODO;
  * "solving only ever adds lines": every line of the skeleton that is not part of a TODO
    appears in the solution, in the same order (blank lines and indentation ignored). A line
    counts as part of a TODO if it contains "TODO", or if it is a // comment line directly
    following such a line (the rest of a multi-line TODO comment).
Every wrong variant must belong to an existing exercise and stay a small diff of its solution
(at most MAX_WRONG_DIFF changed lines): it is the solution with one planted bug, so when the
solution changes, its wrong variants must be updated with it, not drift into other programs.
Whether an untouched skeleton FAILS its tests is checked on a GPU by CTest (label: skeleton).
"""
import difflib
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import apply_patch  # noqa: E402
MAX_WRONG_DIFF = 40


def kept_lines(path):
    """(line number, stripped text) of the skeleton lines a solution must keep."""
    kept, in_todo = [], False
    for no, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.strip()
        if "TODO" in line:
            in_todo = True
            continue
        if in_todo and line.startswith("//"):
            continue
        in_todo = False
        if line:
            kept.append((no, line))
    return kept


def first_missing(skeleton, solution):
    """The first kept skeleton line that the solution lacks (in order), or None."""
    sol = [l.strip() for l in solution.read_text().splitlines() if l.strip()]
    pos = 0
    for no, line in kept_lines(skeleton):
        while pos < len(sol) and sol[pos] != line:
            pos += 1
        if pos == len(sol):
            return no, line
        pos += 1
    return None


def main():
    problems, checked = [], 0
    for skeleton in sorted(ROOT.glob("day*/[0-9][0-9]_*.cu")):
        checked += 1
        day, ex = skeleton.parent.name, skeleton.stem
        rel = skeleton.relative_to(ROOT)
        solution = ROOT / "solutions" / day / skeleton.name
        for need in (skeleton.with_suffix(".h"), skeleton.parent / "tests" / f"test_{ex}.cpp", solution):
            if not need.exists():
                problems.append(f"{rel}: missing {need.relative_to(ROOT)}")
        if not list((ROOT / "solutions" / "wrong" / day).glob(f"{ex}__*.patch")):
            problems.append(f"{rel}: no wrong variant solutions/wrong/{day}/{ex}__<bug>.patch")
        todos = skeleton.read_text().count("TODO")
        if todos == 0:
            problems.append(f"{rel}: no TODO left (is a solution sitting in the skeleton?)")
        if solution.exists():
            miss = first_missing(skeleton, solution)
            if miss:
                problems.append(f"{rel}:{miss[0]}: line not found (in order) in "
                                f"{solution.relative_to(ROOT)}: {miss[1]!r} -- a solution may only "
                                f"add lines or replace TODO lines")
        print(f"  {'ok ' if not any(p.startswith(str(rel)) for p in problems) else 'BAD'} {rel} ({todos} TODOs)")
    for wrong in sorted(ROOT.glob("solutions/wrong/day*/*.patch")):
        try:
            patch, _, _, _ = apply_patch.load_and_apply(wrong, ROOT)
        except apply_patch.PatchError as e:
            problems.append(str(e))
            continue
        if patch.changed_lines() > MAX_WRONG_DIFF:
            problems.append(f"{wrong.relative_to(ROOT)}: changes {patch.changed_lines()} lines (more "
                            f"than {MAX_WRONG_DIFF}): plant one bug, not a rewrite")
    for wrong in sorted(ROOT.glob("solutions/wrong/day*/*.cu")):
        problems.append(f"{wrong.relative_to(ROOT)}: wrong variants are patches now: "
                        "make it solutions/wrong/<day>/<id>__<bug>.patch (tools/apply_patch.py)")
    if problems:
        print("\nskeleton contract violated:")
        for p in problems:
            print("  - " + p)
        return 1
    wrongs = len(list(ROOT.glob("solutions/wrong/day*/*.patch")))
    print(f"skeleton contract: {checked} exercises ok, {wrongs} wrong variants each a small diff of its solution")
    return 0


if __name__ == "__main__":
    sys.exit(main())
