#!/usr/bin/env python3
"""The book's structural rules, shared by tools/check_skeletons.py and the site build (stdlib only).

  [pages]   every exercise's lesson is a page folder <day>/<id>/: README.md (the chapter) and
            pages NN-slug.md numbered 01, 02, … without gaps; every page starts with one `# ` title
            and holds at most MAX_PROSE lines of prose (non-blank lines outside code blocks and
            generated table blocks); the chapter README links each of its pages in order; the day
            README (the overview, also at most MAX_PROSE lines) links each chapter.
  [links]   every relative link and image of a markdown file resolves to a file of the repository,
            and an `#anchor` into a markdown file names one of its headings (GitHub's slugs, which
            the site uses too: tools/book_hooks.py).
  [process] no page, doc, comment or script speaks of the process that made it (which tracker
            item asked for it, which earlier measurement it beat): it states the criterion itself.

    python3 tools/pages.py     # these three rules alone; exit 1 on a violation
"""
import pathlib
import re
import sys
import unicodedata

ROOT = pathlib.Path(__file__).resolve().parent.parent
MAX_PROSE = 300
FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
ANCHOR = re.compile(r'^<a id="[^"]*"></a>\s*$')
HTML_ID = re.compile(r"""<a\s+(?:name|id)=["']([^"']+)["']""")
PAGE = re.compile(r"(\d\d)-[a-z0-9]+(?:-[a-z0-9]+)*\.md")
# Written in pieces so that this file does not match itself.
PROCESS = re.compile("|".join([r"\bissue" + "'s", r"\bissue " + r"\d+", r"\bthe issue (?:asks|says|wants|target)",
                               r"\bthis " + r"issue\b", r"\bthe run " + r"before it\b"]), re.I)


def gfm_slug(text, separator="-"):
    """GitHub's heading anchor: lowercase, markup and punctuation except '-' and '_' dropped,
    each space a hyphen (so "02 · The online softmax" -> "02--the-online-softmax")."""
    text = re.sub(r"<[^>]+>", "", text)
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = text.replace("`", "").strip().lower()
    out = []
    for ch in text:
        cat = unicodedata.category(ch)
        if ch in "-_" or cat[0] in "LN" or cat == "Mn":
            out.append(ch)
        elif ch == " ":
            out.append(separator)
    return "".join(out)


def prose(lines):
    """(line number, line) of the lines outside fenced code blocks (fence lines left out too):
    the one place that knows how a fence opens and closes (``` or ~~~, closed by one at least as
    long), shared by every rule here and by tools/i18n.py."""
    fence = None
    for no, line in enumerate(lines, 1):
        f = FENCE.match(line)
        if f:
            if fence is None:
                fence = f.group(1)
            elif f.group(1)[0] == fence[0] and len(f.group(1)) >= len(fence):
                fence = None
            continue
        if fence is None:
            yield no, line


def headings(path):
    """[(line number, level, text)] of a markdown file, code blocks skipped."""
    return [(no, len(m.group(1)), m.group(2)) for no, line in prose(path.read_text().splitlines())
            for m in [HEADING.match(line)] if m]


def heading_slugs(texts):
    """GitHub's anchors of a page's headings, in order: a repeated slug gets -1, -2, …"""
    seen, out = {}, []
    for text in texts:
        slug = gfm_slug(text)
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.append(slug if n == 0 else f"{slug}-{n}")
    return out


def anchors(path, _cache={}):
    """Every anchor a link may name in a page: its headings' slugs and its `<a id>`s."""
    if path not in _cache:
        ids = set(heading_slugs([text for _, _, text in headings(path)]))
        _cache[path] = ids | set(HTML_ID.findall(path.read_text()))
    return _cache[path]


def prose_lines(path):
    """Non-blank lines outside fenced code and generated table blocks."""
    count, table = 0, False
    for _, line in prose(path.read_text().splitlines()):
        if re.match(r"^<!--\s*table:", line):
            table = True
        elif re.match(r"^<!--\s*/table", line):
            table = False
        elif line.strip() and not table:
            count += 1
    return count


def links(path):
    """(line number, target) of every link and image outside code, inline code stripped."""
    return [(no, m.group(1)) for no, line in prose(path.read_text().splitlines())
            for m in LINK.finditer(re.sub(r"`[^`]*`", "", line))]


def markdown_files(root=ROOT):
    files = [p for p in root.glob("*.md")]
    for pattern in ("day*/**/*.md", "docs/**/*.md", "bench/**/*.md"):
        files += root.glob(pattern)
    return sorted(set(f for f in files if f.is_file() and "build" not in f.relative_to(root).parts[:1]))


def rel(p):
    return p.relative_to(ROOT)


def check_links(add, root=ROOT):
    for page in markdown_files(root):
        for no, target in links(page):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("//"):
                continue  # an absolute URL: not ours to check offline
            file_part, _, anchor = target.partition("#")
            dest = (page.parent / file_part).resolve() if file_part else page
            if file_part and (not dest.exists() or root.resolve() not in [dest, *dest.parents]):
                add("links", f"{rel(page)}:{no}: link to {target!r}: no such file")
                continue
            if anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                add("links", f"{rel(page)}:{no}: link to {target!r}: {rel(dest)} has no heading with the anchor "
                             f"#{anchor} (anchors are GitHub's heading slugs)")


def check_pages(add, root=ROOT):
    for skeleton in sorted(root.glob("day*/[0-9][0-9]_*.cu")):
        folder = skeleton.parent / skeleton.stem
        chapter = folder / "README.md"
        if not chapter.is_file():
            add("pages", f"{rel(skeleton)}: no chapter {rel(chapter)} (the lesson's first page)")
            continue
        pages = sorted(p for p in folder.glob("*.md") if p.name != "README.md" and not p.name.endswith(".zh.md"))
        numbers = [int(PAGE.fullmatch(p.name).group(1)) for p in pages if PAGE.fullmatch(p.name)]
        if numbers != list(range(1, len(numbers) + 1)):
            add("pages", f"{rel(folder)}/: pages are numbered {numbers}: number them 01, 02, … without gaps or repeats")
        linked = [(folder / t.partition("#")[0]).resolve() for _, t in links(chapter) if t.partition("#")[0]]
        positions = []
        for p in pages:
            if p.resolve() not in linked:
                add("pages", f"{rel(chapter)}: the page list does not link {p.name}")
            else:
                positions.append(linked.index(p.resolve()))
        if positions != sorted(positions):
            add("pages", f"{rel(chapter)}: the page list links the pages out of their reading order")
        day_readme = skeleton.parent / "README.md"
        if day_readme.is_file() and chapter.resolve() not in [(day_readme.parent / t.partition("#")[0]).resolve()
                                                              for _, t in links(day_readme)]:
            add("pages", f"{rel(day_readme)}: the day overview does not link the chapter {rel(chapter)}")
    lesson_pages = [p for p in root.glob("day*/**/*.md") if "hints" not in p.relative_to(root).parts]
    for page in sorted(lesson_pages):
        n = prose_lines(page)
        if n > MAX_PROSE:
            add("pages", f"{rel(page)}: {n} lines of prose (at most {MAX_PROSE}): split it into pages, one idea each")
        # A Chinese twin carries its English anchor on the line above each heading (tools/i18n.py).
        first = next((l for l in page.read_text().splitlines() if l.strip() and not ANCHOR.match(l)), "")
        if not first.startswith("# "):
            add("pages", f"{rel(page)}:1: a page starts with its `# title`")


def tracked_text_files(root=ROOT):
    import subprocess
    try:
        out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=root,
                             capture_output=True, text=True, check=True).stdout.splitlines()
    except (OSError, subprocess.CalledProcessError):
        out = [str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()]
    keep = re.compile(r"^(day[^/]*|docs|bench|tools|common|cmake|solutions)/.*\.(md|cpp|cu|cuh|h|py|sh|cmake|patch)$"
                      r"|^[^/]*\.md$")
    return [root / f for f in out if keep.match(f) and (root / f).is_file() and not f.startswith("CHANGELOG")]


def check_process_words(add, root=ROOT):
    for f in tracked_text_files(root):
        for no, line in enumerate(f.read_text(errors="replace").splitlines(), 1):
            m = PROCESS.search(line)
            if m:
                add("process", f"{rel(f)}:{no}: {m.group(0)!r} speaks of the process: state the criterion itself")


def main():
    problems = []
    add = lambda tag, msg: problems.append(f"[{tag}] {msg}")
    check_pages(add)
    check_links(add)
    check_process_words(add)
    print("\n".join(problems) if problems else "pages, links and wording: ok")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
