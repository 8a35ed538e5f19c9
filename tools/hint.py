#!/usr/bin/env python3
"""Prints one hint of an exercise, read from its day's lesson, so hints live in one place.

    python3 tools/hint.py 02_flash_attention        # the first hint (a nudge)
    python3 tools/hint.py 02_flash_attention 3      # the third (near-solution)

The exercise's section is the first markdown heading in <day>/README.md (or README.part*.md)
that names the exercise: its id (`02_flash_attention`) or its number and name
("02 · flash attention"). Hints are the <details> blocks of that section, in order.
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent


def find_section(exercise):
    """(lesson path, lines of the exercise's section) or (None, None)."""
    number, _, name = exercise.partition("_")
    words = name.replace("_", " ")
    for skeleton in ROOT.glob(f"day*/{exercise}.cu"):
        for lesson in sorted(skeleton.parent.glob("README*.md")):
            lines = lesson.read_text().splitlines()
            for i, line in enumerate(lines):
                m = re.match(r"^(#+)\s", line)
                if not m:
                    continue
                text = line.lower()
                if exercise in text or (text.lstrip("# ").startswith(number) and words.split()[0] in text):
                    level = len(m.group(1))
                    end = next((j for j in range(i + 1, len(lines))
                                if re.match(r"^#{1,%d}\s" % level, lines[j])), len(lines))
                    return lesson, lines[i:end]
    return None, None


def hints(section):
    text = "\n".join(section)
    return [(m.group(1).strip(), m.group(2).strip())
            for m in re.finditer(r"<details>\s*<summary>(.*?)</summary>(.*?)</details>", text, re.S)]


def main():
    if len(sys.argv) < 2:
        print(__doc__.strip())
        return 2
    exercise, level = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 1
    lesson, section = find_section(exercise)
    if section is None:
        print(f"no lesson section found for '{exercise}'")
        return 1
    found = hints(section)
    if not found:
        print(f"{lesson.relative_to(ROOT)} has no hints for {exercise}")
        return 1
    if not 1 <= level <= len(found):
        print(f"{exercise} has hints 1..{len(found)}")
        return 1
    title, body = found[level - 1]
    print(f"{exercise} · {re.sub(r'<[^>]+>', '', title)}   ({lesson.relative_to(ROOT)})\n")
    print(body)
    if level < len(found):
        print(f"\nStill stuck?  make hint EX={exercise} LEVEL={level + 1}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
