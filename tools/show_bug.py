#!/usr/bin/env python3
"""Lists the wrong variants of an exercise, or prints one (make show-bug EX=<id> [BUG=<bug>]).

    python3 tools/show_bug.py 02_matmul                 # each bug with its one-line title
    python3 tools/show_bug.py 02_matmul no_k_tail       # that variant: explanation and diff

A wrong variant is solutions/wrong/<day>/<id>__<bug>.patch (see tools/apply_patch.py): reading
one after solving the exercise shows a mistake people really make and which test catches it.
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from apply_patch import Patch, PatchError  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent


def main():
    if len(sys.argv) not in (2, 3) or not sys.argv[1]:
        print("usage: make show-bug EX=<id> [BUG=<bug>]   (ids: make list)")
        return 2
    exercise = sys.argv[1]
    patches = sorted(ROOT.glob(f"solutions/wrong/day*/{exercise}__*.patch"))
    if not patches:
        known = sorted(p.stem for p in ROOT.glob("day*/[0-9][0-9]_*.cu"))
        print(f"no wrong variants for '{exercise}'. Exercises: {' '.join(known)}")
        return 2
    bugs = {p.stem.split("__", 1)[1]: p for p in patches}
    if len(sys.argv) == 2:
        width = max(len(b) for b in bugs)
        print(f"wrong variants of {exercise} (make show-bug EX={exercise} BUG=<bug> prints one):")
        for bug, path in bugs.items():
            try:
                title = Patch(path).title()
            except PatchError as e:
                title = f"(unreadable: {e})"
            print(f"  {bug:<{width}}  {title}")
        return 0
    bug = sys.argv[2]
    if bug not in bugs:
        print(f"{exercise} has no wrong variant '{bug}'. It has: {' '.join(bugs)}")
        return 2
    print(f"# {bugs[bug].relative_to(ROOT)}")
    print(bugs[bug].read_text(), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
