#!/usr/bin/env python3
"""The Chinese edition stays in step with the English pages (make check-i18n; stdlib only).

Every English page a learner reads has a Chinese twin beside it, `X.md` -> `X.zh.md` (the
suffix layout mkdocs-static-i18n serves with a language switch). A translation that drifts is
worse than none, so for each pair this checks what must not differ:

  headings   the same headings, levels and order; before each zh heading the English heading's
             anchor `<a id="<slug>"></a>`, so every link, TODO reference and hint that names an
             English anchor finds the same place in the zh page (`anchors` writes those lines)
  code       fenced code blocks byte-identical, and the snippet and table markers and blocks
  numbers    every number written in digits in the English page appears in the zh page, and the
             zh page has none the English page lacks (identifiers like fp16 or sm_90 are not numbers)
  math       the same $…$ and $$…$$ formulas
  figures    the same images in the same order
  links      the same targets; a link to an English page that has a twin points at the twin
  hints      as many `<summary>Hint n` blocks
  terms      where the English page uses a term of the glossary's "English ↔ 中文" table, the zh
             page uses its Chinese term

    python3 tools/i18n.py check [FILE…]     # every pair (or those of the files named); exit 1 on drift
    python3 tools/i18n.py anchors FILE.zh.md…   # insert / refresh the anchor line before each heading
    python3 tools/i18n.py stats             # pages and words per language
"""
import collections
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import pages  # noqa: E402

ANCHOR_LINE = re.compile(r'^<a id="([^"]*)"></a>\s*$')
FENCE = pages.FENCE
NUMBER = re.compile(r"(?<![A-Za-z0-9_.\-/#])\d+(?:\.\d+)?(?![A-Za-z0-9_])")
MATH = re.compile(r"\$\$.+?\$\$|(?<![\\$])\$[^$\n]+?\$", re.S)
IMAGE = re.compile(r"!\[[^\]]*\]\(\s*<?([^)\s>]+)")
HINT = re.compile(r"<summary>\s*Hint\s+\d")
DOCS = ["README.md", "docs/glossary.md", "docs/hardware.md", "docs/colab.md", "docs/troubleshooting.md",
        "docs/performance.md"]


def english_pages():
    """Every English page that must have a Chinese twin."""
    found = [ROOT / d for d in DOCS if (ROOT / d).is_file()]
    found += [p for p in ROOT.glob("day*/**/*.md") if not p.name.endswith(".zh.md")]
    return sorted(set(found))


def twin(en):
    return en.with_name(en.name[:-3] + ".zh.md")


def english_of(zh):
    return zh.with_name(zh.name[:-6] + ".md")


def rel(p):
    return str(p.relative_to(ROOT))


# ------------------------------------------------------------------ parsing one page
def split(text):
    """(prose lines, code blocks, marker blocks): code blocks are lists of lines with their
    fences; marker blocks the snippet/table comment lines and generated table bodies."""
    prose, code, markers, fence, cur, in_table = [], [], [], None, None, False
    for line in text.splitlines():
        f = FENCE.match(line)
        if f and fence is None:
            fence, cur = f.group(1), [line]
            continue
        if fence is not None:
            cur.append(line)
            if f and f.group(1)[0] == fence[0] and len(f.group(1)) >= len(fence):
                code.append(cur)
                fence = None
            continue
        if re.match(r"^\s*<!--\s*(snippet|table):", line):
            markers.append(line.strip())
            in_table = "table:" in line
            continue
        if re.match(r"^\s*<!--\s*/table", line):
            markers.append(line.strip())
            in_table = False
            continue
        if in_table:
            markers.append(line)
            continue
        prose.append(line)
    return prose, code, markers


def heading_list(text):
    """[(level, text, the anchor on the non-blank line right above it, or None)]"""
    lines = text.splitlines()
    out = []
    for no, line in pages.prose(lines):
        m = pages.HEADING.match(line)
        if m:
            above = next((l.strip() for l in reversed(lines[:no - 1]) if l.strip()), "")
            a = ANCHOR_LINE.match(above)
            out.append((len(m.group(1)), m.group(2), a.group(1) if a else None))
    return out


def slugs(en_text):
    return pages.heading_slugs([text for _, text, _ in heading_list(en_text)])


def strip_for_numbers(lines):
    text = "\n".join(lines)
    text = re.sub(r"<!--.*?-->", " ", text, flags=re.S)
    text = re.sub(r"<a id=\"[^\"]*\"></a>", " ", text)
    text = re.sub(r"\]\([^)]*\)", "]", text)           # link and image targets
    text = re.sub(r"<[^>]+>", " ", text)                 # html tags (<sub>, <details> …)
    return text


def numbers(prose):
    return collections.Counter(NUMBER.findall(strip_for_numbers(prose)))


def link_targets(text):
    out = []
    for line in split(text)[0]:
        for m in pages.LINK.finditer(re.sub(r"`[^`]*`", "", line)):
            if not m.group(0).startswith("!"):
                out.append(m.group(1))
    return out


def term_table():
    """[(english, chinese)] of the glossary's "English ↔ 中文" table."""
    g = ROOT / "docs" / "glossary.md"
    if not g.is_file():
        return []
    rows, inside = [], False
    for line in g.read_text().splitlines():
        if line.startswith("#"):
            inside = "中文" in line
            continue
        m = re.match(r"^\|\s*([^|]+?)\s*\|\s*([^|]+?)\s*\|\s*$", line) if inside else None
        if m and not set(m.group(1)) <= set("-: ") and m.group(1) != "English":
            rows.append((m.group(1), m.group(2)))
    return rows


# ------------------------------------------------------------------ the check
def check_pair(en, zh):
    """The first difference of each kind, as messages."""
    if not zh.is_file():
        return [f"{rel(en)}: no Chinese twin {rel(zh)}"]
    et, zt = en.read_text(), zh.read_text()
    out = []
    eh, zhh = heading_list(et), heading_list(zt)
    want = slugs(et)
    if [h[0] for h in eh] != [h[0] for h in zhh]:
        # The first heading whose level, or whose anchor line (naming the English heading it
        # translates), differs: a deleted or inserted heading shows where it happened.
        k = next((i for i, (a, b, s) in enumerate(zip(eh, zhh, want)) if a[0] != b[0] or (b[2] and b[2] != s)),
                 min(len(eh), len(zhh)))
        en_h = f"{'#' * eh[k][0]} {eh[k][1]}" if k < len(eh) else "(no more headings)"
        zh_h = f"{'#' * zhh[k][0]} {zhh[k][1]}" if k < len(zhh) else "(no more headings)"
        out.append(f"{rel(zh)}: headings differ at heading {k + 1}: English {en_h!r}, Chinese {zh_h!r} "
                   f"({len(eh)} vs {len(zhh)} headings)")
    else:
        for k, ((_, text, anchor), slug) in enumerate(zip(zhh, want)):
            if anchor != slug:
                out.append(f"{rel(zh)}: heading {k + 1} ({text!r}) needs the line <a id=\"{slug}\"></a> above it "
                           f"(python3 tools/i18n.py anchors {rel(zh)})")
                break
    ep, ec, em = split(et)
    zp, zc, zm = split(zt)
    if ec != zc:
        k = next((i for i, (a, b) in enumerate(zip(ec, zc)) if a != b), min(len(ec), len(zc)))
        if k < len(ec) and k < len(zc):
            line = next((j for j, (a, b) in enumerate(zip(ec[k], zc[k])) if a != b), min(len(ec[k]), len(zc[k])))
            got = zc[k][line] if line < len(zc[k]) else "(block ends)"
            exp = ec[k][line] if line < len(ec[k]) else "(block ends)"
            out.append(f"{rel(zh)}: code block {k + 1} differs from the English one at its line {line + 1}: "
                       f"{got!r} where English has {exp!r}")
        else:
            out.append(f"{rel(zh)}: {len(zc)} code blocks, the English page has {len(ec)}")
    if em != zm:
        k = next((i for i, (a, b) in enumerate(zip(em, zm)) if a != b), min(len(em), len(zm)))
        exp = em[k] if k < len(em) else "(none)"
        out.append(f"{rel(zh)}: snippet/table markers or table blocks differ: English has {exp[:80]!r} there")
    en_num, zh_num = numbers(ep), numbers(zp)
    missing = sorted(set(en_num) - set(zh_num), key=float)
    extra = sorted(set(zh_num) - set(en_num), key=float)
    if missing:
        out.append(f"{rel(zh)}: numbers of the English page missing here: {', '.join(missing[:8])}")
    if extra:
        out.append(f"{rel(zh)}: numbers the English page does not have: {', '.join(extra[:8])}")
    e_math = sorted(MATH.findall("\n".join(ep)))
    z_math = sorted(MATH.findall("\n".join(zp)))
    if e_math != z_math:
        diff = sorted((collections.Counter(e_math) - collections.Counter(z_math)).elements())
        more = sorted((collections.Counter(z_math) - collections.Counter(e_math)).elements())
        out.append(f"{rel(zh)}: formulas differ: "
                   + (f"English has {diff[0][:70]!r} " if diff else "")
                   + (f"Chinese has {more[0][:70]!r}" if more else ""))
    if IMAGE.findall("\n".join(ep)) != IMAGE.findall("\n".join(zp)):
        out.append(f"{rel(zh)}: figures differ: English {IMAGE.findall(chr(10).join(ep))}, "
                   f"Chinese {IMAGE.findall(chr(10).join(zp))}")
    # The language switch: the English page's link to its own twin and the twin's link back are
    # each other's counterpart, so neither is compared.
    el = [t for t in link_targets(et) if (en.parent / t.partition("#")[0]).resolve() != zh.resolve()]
    zl = [t for t in link_targets(zt) if (zh.parent / t.partition("#")[0]).resolve() != en.resolve()]

    def as_english(target, page):
        file_part, hash_, anchor = target.partition("#")
        if file_part.endswith(".zh.md"):
            return file_part[:-6] + ".md" + hash_ + anchor
        return target

    for t in zl:
        file_part = t.partition("#")[0]
        if file_part.endswith(".md") and not file_part.endswith(".zh.md") and not re.match(r"^[a-z]+:", t):
            dest = (zh.parent / file_part)
            if twin(dest).is_file() or dest.resolve() in {p.resolve() for p in english_pages()}:
                out.append(f"{rel(zh)}: links {t!r}: point at its Chinese twin {file_part[:-3]}.zh.md")
                break
    if collections.Counter(el) != collections.Counter(as_english(t, zh) for t in zl):
        missing = list((collections.Counter(el) - collections.Counter(as_english(t, zh) for t in zl)).elements())
        extra = list((collections.Counter(as_english(t, zh) for t in zl) - collections.Counter(el)).elements())
        out.append(f"{rel(zh)}: links differ: "
                   + (f"the English page links {missing[0]!r}, this one does not " if missing else "")
                   + (f"this one links {extra[0]!r}, the English page does not" if extra else ""))
    if len(HINT.findall(et)) != len(HINT.findall(zt)):
        out.append(f"{rel(zh)}: {len(HINT.findall(zt))} hint blocks, the English page has {len(HINT.findall(et))}")
    en_prose = re.sub(r"`[^`]*`|\]\([^)]*\)", " ", "\n".join(ep)).lower()
    zh_prose = "\n".join(zp)
    for term, zh_term in term_table():
        if term.lower() == zh_term.lower():
            continue
        forms = [f.strip() for f in term.split("/")]
        if any(re.search(rf"(?<![a-z]){re.escape(f.lower())}(?:s|es)?(?![a-z])", en_prose) for f in forms) \
                and zh_term not in zh_prose:
            out.append(f"{rel(zh)}: the English page says {term!r}; use the glossary's {zh_term!r} here")
    return out


def check(files):
    if files:
        pairs = []
        for f in files:
            p = (ROOT / f).resolve() if not pathlib.Path(f).is_absolute() else pathlib.Path(f)
            pairs.append((english_of(p), p) if p.name.endswith(".zh.md") else (p, twin(p)))
    else:
        pairs = [(en, twin(en)) for en in english_pages()]
        orphans = [p for p in ROOT.glob("**/*.zh.md") if "build" not in p.relative_to(ROOT).parts[:1]
                   and not english_of(p).is_file()]
        for o in orphans:
            print(f"{rel(o)}: a Chinese page without its English page {rel(english_of(o))}")
    problems = 0
    for en, zh in pairs:
        for msg in check_pair(en, zh):
            print(msg)
            problems += 1
    if problems or (not files and orphans):
        print(f"check-i18n: {problems} difference(s) between the English pages and their Chinese twins")
        return 1
    print(f"check-i18n: {len(pairs)} Chinese pages in step with their English twins (headings, anchors, code, "
          "numbers, formulas, figures, links, hints, glossary terms)")
    return 0


def anchors(files):
    for f in files:
        zh = (ROOT / f) if not pathlib.Path(f).is_absolute() else pathlib.Path(f)
        want = slugs(english_of(zh).read_text())
        lines = zh.read_text().splitlines()
        heading_lines = {no for no, line in pages.prose(lines) if pages.HEADING.match(line)}
        out, k = [], 0
        for no, line in enumerate(lines, 1):
            if no in heading_lines:
                while out and (ANCHOR_LINE.match(out[-1].strip())
                               or (not out[-1].strip() and len(out) > 1 and ANCHOR_LINE.match(out[-2].strip()))):
                    out.pop()
                if k < len(want):
                    out.append(f'<a id="{want[k]}"></a>')
                k += 1
            out.append(line)
        zh.write_text("\n".join(out) + "\n")
        if k != len(want):
            print(f"{rel(zh)}: {k} headings, the English page has {len(want)}: anchors set for the first "
                  f"{min(k, len(want))}")
    return 0


def stats():
    en = english_pages()
    zh = [twin(p) for p in en if twin(p).is_file()]
    words = sum(len(re.findall(r"[A-Za-z]+", p.read_text())) for p in en)
    chars = sum(len(re.findall(r"[\u4e00-\u9fff]", p.read_text())) for p in zh)
    print(f"English: {len(en)} pages, {words} words; Chinese: {len(zh)} pages, {chars} Chinese characters")
    return 0


def main():
    if len(sys.argv) < 2 or sys.argv[1] not in ("check", "anchors", "stats"):
        print(__doc__.split("\n\n")[-1])
        return 2
    if sys.argv[1] == "check":
        return check(sys.argv[2:])
    if sys.argv[1] == "anchors":
        return anchors(sys.argv[2:])
    return stats()


if __name__ == "__main__":
    sys.exit(main())
