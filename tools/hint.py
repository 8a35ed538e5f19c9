#!/usr/bin/env python3
"""Prints one hint of an exercise, read from its hints file, so hints live in one place.

    python3 tools/hint.py 02_flash_attention        # the first hint (a nudge)
    python3 tools/hint.py 02_flash_attention 3      # the third (near-solution)
    python3 tools/hint.py 02_flash_attention 3 zh   # the same from the Chinese edition (make hint LANG=zh)

Where an exercise's lesson is: the page folder <day>/<id>/ beside its skeleton, a chapter
README.md (the first page, named by the skeleton's line 2) and pages NN-slug.md in reading order.
Hints live apart from the lesson, in <day>/hints/<id>.md (rustlings' habit: a learner reading the
lesson top to bottom never meets a hint before asking for one); the lesson's "Hints" part links
there. They are the <details><summary>Hint n · …</summary> … </details> blocks of that file, in
order, so a browser keeps each behind a reveal too. A level that does not exist lists the ones that do and
exits 0: asking for hint 4 is a question, not an error. An unknown exercise exits 2.
tools/check_skeletons.py uses the same lookup to require exactly three hints per exercise.
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
HEADER_LESSON = re.compile(r'^// Lesson: (\S+?)(?:, section "([^"]+)")?\. Test: make test EX=(\S+)\s*$')
HINT_BLOCK = re.compile(r"<details>\s*<summary>\s*(Hint\b.*?)</summary>(.*?)</details>", re.S)


def headings(lines):
    """[(0-based line index, level, text)] of a markdown file's headings, code blocks skipped."""
    out, fence = [], None
    for i, line in enumerate(lines):
        f = FENCE.match(line)
        if f:
            if fence is None:
                fence = f.group(1)
            elif f.group(1)[0] == fence[0] and len(f.group(1)) >= len(fence):
                fence = None
            continue
        m = HEADING.match(line) if fence is None else None
        if m:
            out.append((i, len(m.group(1)), m.group(2)))
    return out


def heading_texts(path):
    """The set of heading texts (without the #s) of one markdown file; empty if it is missing."""
    return {t for _, _, t in headings(path.read_text().splitlines())} if path.is_file() else set()


def skeleton_of(exercise):
    found = sorted(ROOT.glob(f"day*/{exercise}.cu")) if re.fullmatch(r"\d\d_\w+", exercise) else []
    return found[0] if found else None


def lesson_path(skeleton):
    """The exercise's chapter: the first page of its page folder, <day>/<id>/README.md."""
    return skeleton.parent / skeleton.stem / "README.md"


def pages(skeleton):
    """The chapter README and its pages NN-slug.md, in reading order."""
    folder = skeleton.parent / skeleton.stem
    numbered = sorted(p for p in folder.glob("*.md") if re.match(r"\d\d-", p.name) and not p.name.endswith(".zh.md"))
    return [folder / "README.md"] + numbered


def lesson_files(skeleton):
    """Every file whose headings a `lesson: "…"` reference of this exercise may name: the
    exercise's pages and the day's overview."""
    return pages(skeleton) + [skeleton.parent / "README.md"]


def find_section(exercise):
    """(chapter path, lines of every page of the exercise's lesson) or (None, None)."""
    skeleton = skeleton_of(exercise)
    if skeleton is None or not lesson_path(skeleton).is_file():
        return None, None
    lines = []
    for page in pages(skeleton):
        if page.is_file():
            lines += page.read_text().splitlines()
    return lesson_path(skeleton), lines


def hints_path(skeleton, lang=""):
    """The exercise's hints file: <day>/hints/<id>.md, or its Chinese twin <id>.zh.md for a
    language starting with zh (make hint LANG=zh; a zh_CN locale in LANG picks it too)."""
    english = skeleton.parent / "hints" / f"{skeleton.stem}.md"
    chinese = english.with_name(f"{skeleton.stem}.zh.md")
    return chinese if lang.lower().startswith("zh") and chinese.is_file() else english


def hints(section):
    """[(title, body)] of the hint blocks of a lesson section, in order."""
    return [(m.group(1).strip(), m.group(2).strip()) for m in HINT_BLOCK.finditer("\n".join(section))]


def main():
    if len(sys.argv) not in (2, 3, 4) or not sys.argv[1]:
        print("usage: make hint EX=<id> [LEVEL=1|2|3] [LANG=zh]   (ids: make list)")
        return 2
    exercise, level_arg = sys.argv[1], (sys.argv[2] if len(sys.argv) >= 3 else "1")
    lang = sys.argv[3] if len(sys.argv) == 4 else ""
    if skeleton_of(exercise) is None:
        known = " ".join(sorted(p.stem for p in ROOT.glob("day*/[0-9][0-9]_*.cu")))
        print(f"unknown exercise '{exercise}'. Exercises: {known}")
        return 2
    lesson = hints_path(skeleton_of(exercise), lang)
    if not lesson.is_file():
        print(f"no hints file for {exercise} (expected {lesson.relative_to(ROOT)})")
        return 2
    found = hints(lesson.read_text().splitlines())
    if not found:
        print(f"{lesson.relative_to(ROOT)} has no hints for {exercise} yet")
        return 0
    levels = ", ".join(str(n) for n in range(1, len(found) + 1))
    if not level_arg.isdigit() or not 1 <= int(level_arg) <= len(found):
        print(f"{exercise} has hint levels {levels} (1 nudge, 2 approach, 3 near-solution); "
              f"LEVEL={level_arg} is not one of them.\n  make hint EX={exercise} LEVEL=1")
        return 0
    level = int(level_arg)
    title, body = found[level - 1]
    print(f"{exercise} · {re.sub(r'<[^>]+>', '', title)}   ({lesson.relative_to(ROOT)})\n")
    print(re.sub(r"^\s*<!--.*?-->\s*\n", "", body, flags=re.M))  # snippet markers are for tools
    if level < len(found):
        more = " LANG=zh" if lesson.name.endswith(".zh.md") else ""
        print(f"\nStill stuck?  make hint EX={exercise} LEVEL={level + 1}{more}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
