#!/usr/bin/env python3
"""The exercise contract, checked without a GPU (make check-skeletons; CI runs it).

Each rule below has a tag; a violation is printed as `[tag] path:line: what is wrong -- what to
do`. docs/conventions.md ("The exercise contract") gives the reason for each rule.

For every skeleton <day>/NN_id.cu:
  [files]     <day>/NN_id.h, <day>/tests/test_NN_id.cpp and solutions/<day>/NN_id.cu exist, and
              at least one wrong variant solutions/wrong/<day>/NN_id__<bug>.patch.
  [header]    line 1 is `// Day DD · Exercise NN · <title>` (DD and NN those of the folder and
              file names); line 2 is `// Lesson: <path>[, section "<heading>"]. Test: make test
              EX=<id>` where <path> is the exercise's lesson (day 10: the chapter
              <day>/NN_id.md; day 01/06: <day>/README.md, and then the section is required) and
              the section is a heading of that file.
  [todo]      the skeleton has TODO markers, written `// TODO(n) (≈ N lines): …` (a range
              `(≈ 4-6 lines)` is fine); n counts 1, 2, 3, … without gaps. A TODO(n) that appears
              again later (a second line of the same task) needs no second estimate.
  [lesson]    every `lesson: "<heading>"` in the skeleton, its header and its solution quotes a
              heading that exists in the exercise's lesson files (day 10: the chapter and the day's
              README.md; day 01/06: the day's README.md), exactly, without the #s. References
              may span comment lines; `lesson: "A" and "B"` checks both. Other spellings
              (`Lesson`, no colon, `"A" › "B"`) are reported so that one form remains.
  [adds-only] solving only ever adds lines: every skeleton line except TODO lines and TODO
              continuation lines appears in the solution, in the same order (blank lines and
              indentation ignored; comment lines count like code). Exactly these are exempt:
                - a TODO line: a line containing `TODO`;
                - a continuation line: a `//` comment line whose text is indented by at least
                  two spaces after the `//` (a hanging indent), directly below a TODO line or
                  below another continuation line.
              So a `// plain comment` right after a TODO must be kept by the solution.
  [hints]     the exercise's hints file <day>/hints/<id>.md has exactly three
              `<details><summary>Hint n …` blocks, 1, 2, 3; the exercise's lesson (day 10 the
              whole chapter, day 01/06 the README section) holds no hint block itself (a reader
              going top to bottom must reach "Your TODOs" before any hint) and links the file.
  [giveaway]  no lesson body shows a line the learner writes: a line of the solution that its
              skeleton lacks (ignoring comments, white space and lines under 12 characters) may
              not stand in a fenced code block of any lesson file (day*/**/*.md outside hints/,
              README.md, docs/*.md). Only the hints file (hint 3) shows the learner's code.
For every wrong variant solutions/wrong/<day>/<file>:
  [wrong]     it is `<id>__<bug>.patch` of an exercise of that day; it patches that exercise's
              solution and applies to it (tools/apply_patch.py, strict); its preamble has the four
              fields Bug / What people write / Why it is wrong / Caught by; "Caught by" names
              TEST_CASEs of the exercise's test exactly: either quoted ("name" (remark), "name"),
              where every quoted string outside parentheses must be a TEST_CASE name (quote
              failure messages inside parentheses), or unquoted, names separated by `;`, each
              with an optional (remark); it changes at most
              MAX_WRONG_DIFF lines (one planted bug, not a rewrite).
For every day folder:
  [stray]     only these files: NN_id.cu and NN_id.h (both, or neither), tests/test_NN_id.cpp and
              hints/NN_id.md of an exercise, README.md, exercises.cmake, the page folder NN_id/ of an
              exercise (README.md and NN-slug.md pages only),
              and shared headers *.cuh that a file of the day (or its solutions) #includes,
              and the folders of given code GIVEN_CODE_DIRS names (day 11's model/ and engine/),
              each with its CMakeLists.txt and README.md.
              solutions/<day>/ holds only NN_id.cu of exercises.
For every markdown lesson:
  [snippets]  tools/snippets.py --check passes: every `<!-- snippet: path#name -->` block equals
              its source lines (make snippets refreshes them).
  [tables]    tools/tables.py --check passes: every `<!-- table: name -->` block is what the
              committed CSVs in bench/results/reference/ give (make tables refreshes them).
  [figures]   tools/figures.py --check passes: docs/figures/*.svg are what the script draws.
  [pages]     the book's layout (tools/pages.py): a page folder <day>/<id>/ per exercise with
              README.md and pages NN-slug.md, numbered without gaps, each page titled and at most
              300 lines of prose, linked in order from the chapter, chapters from the day overview.
  [links]     every relative link and image resolves, anchors included (tools/pages.py).
  [process]   no file a learner or maintainer reads speaks of the process that made it.
  [i18n]      every English page has its Chinese twin X.zh.md in step (tools/i18n.py, make check-i18n).
Whether an untouched skeleton FAILS its tests is checked on a GPU by CTest (label: skeleton).
"""
import difflib
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import apply_patch  # noqa: E402
import hint  # noqa: E402
import i18n  # noqa: E402
import pages  # noqa: E402
import snippets  # noqa: E402
import tables  # noqa: E402

MAX_WRONG_DIFF = 40
HEADER_1 = re.compile(r"^// Day (\d\d) · Exercise (\d\d) · \S.*$")
TODO_MARKER = re.compile(r"//\s*TODO\b(\((\d+)\))?(\s*\(≈\s*\d+(?:\s*[-–]\s*\d+)?\s+lines?\))?\s*(:?)")
LESSON_REF = re.compile(r'\b(?P<kw>[Ll]esson)(?P<colon>:?)\s*(?P<refs>"[^"]*"(?:\s*(?:›|,|and)\s*"[^"]*")*)')
TEST_CASE = re.compile(r'\bTEST_CASE\s*\(\s*"((?:[^"\\]|\\.)*)"')
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)
PAGE_NAME = re.compile(r"(?:README|\d\d-[a-z0-9]+(?:-[a-z0-9]+)*)(?:\.zh)?\.md")
MAX_PAGE_PROSE = 300


class Report:
    """Violations as (tag, message, exercise id or None), in the order found."""

    def __init__(self):
        self.items, self.exercise = [], None

    def add(self, tag, msg):
        self.items.append((tag, msg, self.exercise))

    def bad(self, exercise):
        return any(ex == exercise for _, _, ex in self.items)


def rel(p):
    return p.relative_to(ROOT)


# ---------------------------------------------------------------- [adds-only]
def is_todo_line(line):
    return "TODO" in line


def is_continuation(line):
    s = line.strip()
    return s.startswith("//") and s[2:4] == "  "


def kept_lines(path):
    """(line number, stripped text) of the skeleton lines a solution must keep."""
    kept, in_todo = [], False
    for no, raw in enumerate(path.read_text().splitlines(), 1):
        if is_todo_line(raw):
            in_todo = True
            continue
        if in_todo and is_continuation(raw):
            continue
        in_todo = False
        if raw.strip():
            kept.append((no, raw.strip()))
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


# ---------------------------------------------------------------- [header]
def check_header(skeleton, r):
    lines = skeleton.read_text().splitlines() + ["", ""]
    day, ex = skeleton.parent.name, skeleton.stem
    dd, nn = re.match(r"day(\d\d)", day).group(1), ex[:2]
    lesson = hint.lesson_path(skeleton)
    want2 = f"// Lesson: {rel(lesson)}. Test: make test EX={ex}"
    m = HEADER_1.match(lines[0])
    if not m or m.groups() != (dd, nn):
        r.add("header", f"{rel(skeleton)}:1: line 1 must be `// Day {dd} · Exercise {nn} · <title>: <one line>`"
                        f" (found {lines[0][:70]!r})")
    m = hint.HEADER_LESSON.match(lines[1])
    if not m or m.group(2) is not None:
        r.add("header", f"{rel(skeleton)}:2: line 2 must be `{want2}` (found {lines[1][:70]!r})")
        return
    path, _, test_ex = m.groups()
    if test_ex != ex:
        r.add("header", f"{rel(skeleton)}:2: `make test EX={test_ex}` names another exercise: write EX={ex}")
    if path != str(rel(lesson)):
        r.add("header", f"{rel(skeleton)}:2: the lesson is {rel(lesson)}, not {path}: `{want2}`")
    elif not lesson.is_file():
        r.add("header", f"{rel(skeleton)}:2: {path} does not exist: write the chapter (docs/conventions.md, "
                        "\"Lessons as pages\")")


def did_you_mean(text, files):
    heads = set().union(*(hint.heading_texts(f) for f in files)) if files else set()
    close = difflib.get_close_matches(text, sorted(heads), n=1, cutoff=0.5)
    return f" (did you mean {close[0]!r}?)" if close else ""


# ---------------------------------------------------------------- [todo]
def check_todos(skeleton, r):
    estimated, seen = set(), []
    for no, line in enumerate(skeleton.read_text().splitlines(), 1):
        for m in TODO_MARKER.finditer(line):
            number, estimate, colon = m.group(2), m.group(3), m.group(4)
            if number is None:
                r.add("todo", f"{rel(skeleton)}:{no}: number it: `// TODO(n) (≈ N lines): …`")
                continue
            n = int(number)
            if n not in seen:
                seen.append(n)
                if not estimate:
                    r.add("todo", f"{rel(skeleton)}:{no}: TODO({n}) needs a size: "
                                  f"`// TODO({n}) (≈ N lines): …`")
                elif not colon:
                    r.add("todo", f"{rel(skeleton)}:{no}: write `TODO({n}) (≈ N lines): what to write`")
    if not seen:
        r.add("todo", f"{rel(skeleton)}: no TODO(n) marker (is a solution sitting in the skeleton?)")
    elif sorted(seen) != list(range(1, len(seen) + 1)):
        r.add("todo", f"{rel(skeleton)}: TODO numbers {sorted(seen)} should be 1..{len(seen)} without gaps")
    return len(seen)


# ---------------------------------------------------------------- [lesson]
def comment_runs(path):
    """[(first line number, joined text)] of comments: a line's // comment plus the pure
    comment lines directly below it, joined with spaces (a reference may wrap)."""
    runs, cur = [], None
    for no, raw in enumerate(path.read_text().splitlines(), 1):
        pos = raw.find("//")
        if pos < 0:
            cur = None
            continue
        text = raw[pos + 2:].strip()
        if cur is not None and raw.strip().startswith("//"):
            cur[1] += " " + text
        else:
            cur = [no, text]
            runs.append(cur)
    return runs


def check_lesson_refs(skeleton, files, r):
    lesson_files = [f for f in hint.lesson_files(skeleton) if f.is_file()]
    heads = set().union(*(hint.heading_texts(f) for f in lesson_files)) if lesson_files else set()
    where = " / ".join(str(rel(f)) for f in hint.lesson_files(skeleton))
    for path in files:
        if not path.is_file():
            continue
        for no, text in comment_runs(path):
            for m in LESSON_REF.finditer(text):
                quoted = re.findall(r'"([^"]*)"', m.group("refs"))
                if m.group("kw") != "lesson" or not m.group("colon") or "›" in m.group("refs"):
                    r.add("lesson", f"{rel(path)}:{no}: write references as `(lesson: \"<heading>\")`"
                                    f" (found `{m.group(0)[:60]}`; for a subsection quote only its heading)")
                for q in quoted:
                    if q not in heads:
                        r.add("lesson", f"{rel(path)}:{no}: lesson heading {q!r} does not exist in "
                                        f"{where}{did_you_mean(q, lesson_files)}: quote a heading exactly "
                                        "(without the #s) or add it")


# ---------------------------------------------------------------- [hints]
def check_hints(skeleton, r):
    ex = skeleton.stem
    path = hint.hints_path(skeleton)
    if not path.is_file():
        r.add("hints", f"{rel(skeleton)}: no hints file {rel(path)}: three `<details><summary>Hint n · …` "
                       "blocks (1 nudge, 2 approach, 3 near-solution), linked from the lesson")
    else:
        titles = [t for t, _ in hint.hints(path.read_text().splitlines())]
        numbers = [re.match(r"Hint\s+(\d+)", t) for t in titles]
        if len(titles) != 3 or [m and m.group(1) for m in numbers] != ["1", "2", "3"]:
            r.add("hints", f"{rel(path)}: {len(titles)} hint block(s) "
                           f"{[re.sub(r'<[^>]+>', '', t) for t in titles]}: it needs exactly three, "
                           "`<details><summary>Hint 1 · nudge</summary>`, Hint 2 · approach, Hint 3 · near-solution")
    lesson, section = hint.find_section(ex)
    if section is None:
        want = rel(hint.lesson_path(skeleton))
        r.add("hints", f"{rel(skeleton)}: no lesson found for {ex}: write {want} and its pages")
        return
    if hint.hints(section):
        r.add("hints", f"{rel(lesson.parent)}/: a page of {ex} holds hint blocks: move them to "
                       f"{rel(path)} (a reader must reach \"Your TODOs\" before any hint)")
    text = "\n".join(section)
    if f"hints/{ex}.md" not in text:
        r.add("hints", f"{rel(lesson.parent)}/: no page of {ex} links its hints: add "
                       f"[hints](../hints/{ex}.md) and `make hint EX={ex}` to its Your-TODOs page")


# ---------------------------------------------------------------- [giveaway]
def code_key(line):
    """A line as the giveaway rule compares it: no // comment, white space folded."""
    return re.sub(r"\s+", " ", line.split("//")[0].strip())


def is_trivial(key):
    return (len(key) < 12 or key.startswith("#pragma")
            or re.fullmatch(r"[{}();\s]*|\}?\s*else\s*\{?", key) is not None)


def learner_lines(skeleton, solution):
    """{code key: solution line number} of the lines a learner writes: solution lines that the
    skeleton does not hold (as many times as the solution has them), trivial ones left out."""
    have = {}
    for raw in skeleton.read_text().splitlines():
        k = code_key(raw)
        have[k] = have.get(k, 0) + 1
    out = {}
    for no, raw in enumerate(solution.read_text().splitlines(), 1):
        k = code_key(raw)
        if is_trivial(k):
            continue
        if have.get(k, 0) > 0:
            have[k] -= 1
            continue
        out.setdefault(k, no)
    return out


def lesson_files_for_giveaways():
    files = [ROOT / "README.md"] + sorted(ROOT.glob("docs/**/*.md"))
    files += sorted(p for p in ROOT.glob("day*/**/*.md") if "hints" not in p.relative_to(ROOT).parts)
    return [f for f in files if f.is_file()]


def fenced_lines(path):
    """(line number, text) of every line inside a fenced code block of a markdown file."""
    out, fence = [], None
    for no, line in enumerate(path.read_text().splitlines(), 1):
        f = hint.FENCE.match(line)
        if f:
            if fence is None:
                fence = f.group(1)
            elif f.group(1)[0] == fence[0] and len(f.group(1)) >= len(fence):
                fence = None
            continue
        if fence is not None:
            out.append((no, line))
    return out


def check_giveaways(skeletons, r):
    """Every exercise's learner lines against every lesson file's code blocks. Returns the count
    of learner lines looked for."""
    learner = {}
    for sk in skeletons:
        sol = ROOT / "solutions" / sk.parent.name / sk.name
        if sol.is_file():
            learner[sk] = learner_lines(sk, sol)
    given = {sk: {code_key(l) for l in sk.read_text().splitlines()} for sk in skeletons}
    for lesson in lesson_files_for_giveaways():
        # Code that a skeleton this lesson teaches already gives may be shown: it is not an answer.
        english = lesson.with_name(lesson.name[:-6] + ".md") if lesson.name.endswith(".zh.md") else lesson
        taught = [sk for sk in skeletons if english in hint.pages(sk)]
        shown_given = set().union(*(given[sk] for sk in taught)) if taught else set()
        for no, text in fenced_lines(lesson):
            k = code_key(text)
            if is_trivial(k):
                continue
            hits = [sk for sk, lines in learner.items() if k in lines and not (k in shown_given and sk not in taught)]
            if not hits:
                continue
            r.exercise = hits[0].stem
            where = ", ".join(f"{sk.stem} ({rel(ROOT / 'solutions' / sk.parent.name / sk.name)}:"
                              f"{learner[sk][k]})" for sk in hits)
            r.add("giveaway", f"{rel(lesson)}:{no}: shows {k!r}, a line the learner writes in {where} "
                              f"-- teach the idea (math, a picture, a worked example) and keep the code "
                              f"for hint 3 ({', '.join(str(rel(hint.hints_path(sk))) for sk in hits)})")
    r.exercise = None
    return sum(len(v) for v in learner.values())


# ---------------------------------------------------------------- [wrong]
def test_case_names(test):
    return {m.group(1).replace('\\"', '"') for m in TEST_CASE.finditer(test.read_text())} if test.is_file() else set()


def quoted_outside_parens(text):
    """Quoted strings of `text` not inside (...) (parentheses inside quotes do not count)."""
    out, depth, i = [], 0, 0
    while i < len(text):
        c = text[i]
        if c == '"':
            j = text.find('"', i + 1)
            if j < 0:
                break
            if depth == 0:
                out.append(text[i + 1:j])
            i = j + 1
            continue
        depth += c == "("
        depth -= c == ")" and depth > 0
        i += 1
    return out


def preamble_field(preamble, name):
    """The text of one preamble field, its continuation lines joined (up to a blank line or the
    next field)."""
    out, inside = [], False
    for line in preamble:
        if line.startswith(name):
            inside, out = True, [line[len(name):].strip()]
        elif inside and line.strip() and not any(line.startswith(f) for f in apply_patch.PREAMBLE_FIELDS):
            out.append(line.strip())
        else:
            inside = False
    return " ".join(out)


def check_wrong(wrong, exercises, r):
    day, name = wrong.parent.name, wrong.name
    if wrong.suffix == ".cu":
        r.add("wrong", f"{rel(wrong)}: wrong variants are patches now: make it "
                       f"solutions/wrong/{day}/<id>__<bug>.patch (docs/conventions.md)")
        return
    m = re.fullmatch(r"(\d\d_\w+?)__(\w+)\.patch", name)
    if not m:
        r.add("wrong", f"{rel(wrong)}: name it `<id>__<bug>.patch` (lowercase words, two underscores)")
        return
    if (day, m.group(1)) not in exercises:
        r.add("wrong", f"{rel(wrong)}: no exercise {m.group(1)} in {day} (no {day}/{m.group(1)}.cu "
                       "skeleton yet?): a wrong variant belongs to an existing exercise")
        return
    ex = r.exercise = m.group(1)
    try:
        patch, _, _, _ = apply_patch.load_and_apply(wrong, ROOT)
    except apply_patch.PatchError as e:
        r.add("wrong", str(e).replace(str(ROOT) + "/", ""))
        return
    want = f"solutions/{day}/{ex}.cu"
    if patch.target != want:
        r.add("wrong", f"{rel(wrong)}: patches {patch.target}; a wrong variant of {ex} patches {want}")
    for f in patch.missing_fields():
        r.add("wrong", f"{rel(wrong)}:1: the preamble lacks `{f} <prose>` (fields: "
                       + ", ".join(apply_patch.PREAMBLE_FIELDS) + ")")
    if patch.changed_lines() > MAX_WRONG_DIFF:
        r.add("wrong", f"{rel(wrong)}: changes {patch.changed_lines()} lines (more than "
                       f"{MAX_WRONG_DIFF}): plant one bug, not a rewrite")
    caught = preamble_field(patch.preamble, "Caught by:")
    if not caught:
        return
    test = ROOT / day / "tests" / f"test_{ex}.cpp"
    names = test_case_names(test)
    quoted = quoted_outside_parens(caught)
    line = next((i for i, l in enumerate(patch.preamble, 1) if l.startswith("Caught by:")), 1)
    if not quoted:  # the unquoted form: names separated by ';', remarks in parentheses
        quoted = [n if n in names else re.sub(r"\s*\([^()]*\)", "", n).strip()
                  for n in (piece.strip().rstrip(".") for piece in caught.split(";")) if n]
    unknown = [q for q in quoted if q not in names]
    for q in unknown:
        close = difflib.get_close_matches(q, sorted(names), n=1, cutoff=0.5)
        r.add("wrong", f"{rel(wrong)}:{line}: \"Caught by\" names {q!r}, which is no TEST_CASE of "
                       f"{rel(test)}" + (f" (did you mean {close[0]!r}?)" if close else "")
                       + "; quote test names exactly, anything else in parentheses")
    if not set(quoted) & names and not unknown:
        r.add("wrong", f"{rel(wrong)}:{line}: \"Caught by\" must quote the TEST_CASE name(s) that fail, "
                       f"e.g. \"{sorted(names)[0] if names else '<test name>'}\"")


# ---------------------------------------------------------------- [stray]
def listed_files(folder):
    """Files under `folder` that git would track (ignored build outputs skipped); all files
    when this is not a git checkout."""
    try:
        out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "--", str(folder)],
                             cwd=ROOT, capture_output=True, text=True, check=True).stdout
        return sorted({ROOT / l for l in out.splitlines() if (ROOT / l).is_file()})
    except (OSError, subprocess.CalledProcessError):
        return sorted(p for p in folder.rglob("*") if p.is_file())


# Folders of given code a day may hold beside its exercises: day 11's model (host C++: config,
# weights, tokenizer, the CPU reference forward) and the engine that serves it with the course's
# kernels. Each is a library with its own CMakeLists.txt, README.md (+ .zh.md) and tests.
GIVEN_CODE_DIRS = {"day11-serving": ("model", "engine")}


def check_stray(day_dir, r):
    ids = {p.stem for p in day_dir.glob("[0-9][0-9]_*.cu")} | {p.stem for p in day_dir.glob("[0-9][0-9]_*.h")}
    includes = set()
    for p in list(day_dir.glob("*.cu")) + list(day_dir.glob("*.h")) + list(day_dir.glob("*.cuh")) \
            + list((ROOT / "solutions" / day_dir.name).glob("*.cu")):
        includes |= {pathlib.Path(i).name for i in INCLUDE.findall(p.read_text())}
    for given in GIVEN_CODE_DIRS.get(day_dir.name, ()):
        for need in ("CMakeLists.txt", "README.md"):
            if not (day_dir / given / need).is_file():
                r.add("stray", f"{day_dir.name}/{given}/: a folder of given code needs its {need}")
    for f in listed_files(day_dir):
        name, sub = f.name, f.parent.relative_to(day_dir)
        if sub.parts and sub.parts[0] in GIVEN_CODE_DIRS.get(day_dir.name, ()):
            continue  # given code of the day (a library with its own CMakeLists.txt, README and tests)
        m = re.fullmatch(r"(\d\d_\w+)\.(cu|h|md)", name)
        if str(sub) == "." and m and m.group(2) in ("cu", "h"):
            other = f.with_suffix(".h" if m.group(2) == "cu" else ".cu")
            if not other.exists():
                r.add("stray", f"{rel(f)}: no {other.name} beside it: an exercise needs both (an "
                               "exercise in progress? create the skeleton .cu last, then nothing is stray)")
            continue
        if len(sub.parts) == 1 and str(sub) not in ("hints", "tests"):
            if str(sub) not in ids:
                r.add("stray", f"{rel(f)}: {sub}/ is the page folder of no exercise (no {day_dir.name}/{sub}.cu)")
            elif not PAGE_NAME.fullmatch(name):
                r.add("stray", f"{rel(f)}: a page folder holds README.md and pages NN-slug.md only "
                               "(figures go to docs/figures/, made by tools/figures.py)")
            continue
        if str(sub) == "." and name in ("README.md", "README.zh.md", "exercises.cmake"):
            continue
        if str(sub) == "." and name.endswith(".cuh"):
            if name not in includes:
                r.add("stray", f"{rel(f)}: a shared header nobody in {day_dir.name} or its solutions "
                               "#includes: include it or remove it")
            continue
        h = re.fullmatch(r"(\d\d_\w+?)(?:\.zh)?\.md", name)
        if str(sub) == "hints" and h:
            if h.group(1) not in ids:
                r.add("stray", f"{rel(f)}: the hints of no exercise (no {day_dir.name}/{h.group(1)}.cu)")
            continue
        t = re.fullmatch(r"test_(\d\d_\w+)\.cpp", name)
        if str(sub) == "tests" and t:
            if t.group(1) not in ids:
                r.add("stray", f"{rel(f)}: the test of no exercise (no {day_dir.name}/{t.group(1)}.cu)")
            continue
        r.add("stray", f"{rel(f)}: not part of an exercise. A day folder holds NN_id.cu, NN_id.h, "
                       "tests/test_NN_id.cpp, hints/NN_id.md, README.md, exercises.cmake"
                       ", the page folders NN_id/ and included *.cuh headers: "
                       "move it (common/ for shared code, docs/ for prose) or remove it")
    sol_dir = ROOT / "solutions" / day_dir.name
    for f in listed_files(sol_dir) if sol_dir.is_dir() else []:
        if f.parent != sol_dir or f.suffix != ".cu" or f.stem not in ids:
            r.add("stray", f"{rel(f)}: solutions/{day_dir.name}/ holds only NN_id.cu of the day's exercises")


# ---------------------------------------------------------------- [figures]
def check_figures(r):
    """tools/figures.py --check: the committed SVGs are what the script draws. Returns the count."""
    script = ROOT / "tools" / "figures.py"
    if not script.is_file():
        return 0
    out = subprocess.run([sys.executable, str(script), "--check"], cwd=ROOT, capture_output=True, text=True)
    if out.returncode != 0:
        for line in (out.stdout + out.stderr).strip().splitlines():
            r.add("figures", line)
    return len(list((ROOT / "docs" / "figures").glob("*.svg")))


# ---------------------------------------------------------------- main
def main():
    r, checked, todo_counts = Report(), 0, {}
    skeletons = sorted(ROOT.glob("day*/[0-9][0-9]_*.cu"))
    exercises = {(s.parent.name, s.stem) for s in skeletons}
    for skeleton in skeletons:
        checked += 1
        day, ex = skeleton.parent.name, skeleton.stem
        r.exercise = ex
        header = skeleton.with_suffix(".h")
        test = skeleton.parent / "tests" / f"test_{ex}.cpp"
        solution = ROOT / "solutions" / day / skeleton.name
        for need in (header, test, solution):
            if not need.exists():
                r.add("files", f"{rel(skeleton)}: missing {rel(need)}")
        if not list((ROOT / "solutions" / "wrong" / day).glob(f"{ex}__*.patch")):
            r.add("files", f"{rel(skeleton)}: no wrong variant solutions/wrong/{day}/{ex}__<bug>.patch")
        check_header(skeleton, r)
        todo_counts[skeleton] = check_todos(skeleton, r)
        check_lesson_refs(skeleton, [skeleton, header, solution], r)
        check_hints(skeleton, r)
        if solution.exists():
            miss = first_missing(skeleton, solution)
            if miss:
                r.add("adds-only", f"{rel(skeleton)}:{miss[0]}: line not found (in order) in "
                                   f"{rel(solution)}: {miss[1]!r} -- a solution may only add lines or "
                                   "replace TODO lines; keep it in the solution, or, if it continues the "
                                   "TODO above, indent it (`//   …`)")
    r.exercise = None
    for day_dir in sorted(p for p in ROOT.glob("day*") if p.is_dir()):
        check_stray(day_dir, r)
    wrongs = sorted(p for p in ROOT.glob("solutions/wrong/day*/*") if p.is_file())
    for wrong in wrongs:
        r.exercise = None
        check_wrong(wrong, exercises, r)
    r.exercise = None
    looked_for = check_giveaways(skeletons, r)
    snippet_problems, fresh, _ = snippets.run(ROOT, write=False)
    for p in snippet_problems:
        r.add("snippets", p)
    table_problems, table_count, stale = tables.run(ROOT, write=False)
    for p in table_problems:
        r.add("tables", p)
    for p in stale:
        r.add("tables", f"{rel(p)}: a table block differs from its CSV: run `make tables`")
    figure_count = check_figures(r)
    pages.check_pages(r.add)
    pages.check_links(r.add)
    pages.check_process_words(r.add)
    zh_pages = 0
    for en in i18n.english_pages():
        problems = i18n.check_pair(en, i18n.twin(en))
        zh_pages += not problems
        for p in problems:
            r.add("i18n", p)

    for skeleton in skeletons:
        print(f"  {'BAD' if r.bad(skeleton.stem) else 'ok '} {rel(skeleton)} ({todo_counts[skeleton]} TODOs)")
    if r.items:
        print(f"\nexercise contract violated ({len(r.items)}; tools/check_skeletons.py and "
              "docs/conventions.md explain each rule):")
        for tag in ("files", "header", "todo", "lesson", "adds-only", "hints", "giveaway", "wrong", "stray", "snippets",
                    "tables", "figures", "pages", "links", "process", "i18n"):
            for t, msg, _ in r.items:
                if t == tag:
                    print(f"  [{tag}] {msg}")
        return 1
    print(f"exercise contract: {checked} exercises ok (header, TODOs, lesson references, adds-only, "
          f"three hints kept out of the lessons), {len(wrongs)} wrong variants apply and explain "
          f"themselves, no lesson shows any of the {looked_for} lines learners write, "
          f"{fresh} snippets and {table_count} tables fresh, {figure_count} figures as tools/figures.py draws them, "
          f"every page short and linked, every link resolves, {zh_pages} Chinese twins in step, no stray files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
