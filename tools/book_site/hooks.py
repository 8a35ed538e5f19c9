"""MkDocs hooks of the course's site (tools/book.py writes the config that loads this file).

The markdown files are the ones a learner reads on GitHub and in a terminal, unchanged; these
hooks adapt them to the site at build time:
  * hint blocks `<details><summary>Hint n · …</summary> … </details>` keep their markdown inside
    (md_in_html needs `markdown="1"` on the block), so each hint stays behind its reveal;
  * heading anchors are GitHub's slugs (tools/pages.py), so a link that works on GitHub works
    on the site, and the link checker of make check-skeletons speaks for both;
  * a Chinese twin's `<a id="slug"></a>` line above a heading (tools/i18n.py) becomes that
    heading's own id (`# 标题 {#slug}`), so the page's title is its first element, as the site
    needs to name the page, and its anchors are the English page's;
  * a page's link to its own twin in the other language (the README's "中文版" sentence) points
    at that page on the other language's site, since the twin is not a page of this one.
"""
import pathlib
import posixpath
import re
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
from pages import gfm_slug  # noqa: E402,F401  (referenced by the generated mkdocs.yml)

DETAILS = re.compile(r"<details>(\s*<summary>)")
ANCHORED_HEADING = re.compile(r'^<a id="([^"]+)"></a>[ \t]*\n(#{1,6} [^\n]*?)[ \t]*$', re.M)


def other_language(page):
    """(the name of this page's twin as its markdown links it, the twin's site URL relative to
    this page)."""
    name = posixpath.basename(page.file.src_uri)
    url = page.url
    if url.startswith("zh/"):
        english = name[:-6] + ".md" if name.endswith(".zh.md") else name
        target = url[len("zh/"):]
        return english, posixpath.relpath("/" + target, "/" + url) + "/" if target != url else target
    return name[:-3] + ".zh.md", posixpath.relpath("/zh/" + url, "/" + (url or ".")) + "/"


def on_page_markdown(markdown, page, config, files):
    twin, url = other_language(page)
    markdown = markdown.replace(f"]({twin})", f"]({url})")
    markdown = ANCHORED_HEADING.sub(r"\2 {#\1}", markdown)
    return DETAILS.sub(r'<details markdown="1">\1', markdown)
