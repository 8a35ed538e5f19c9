#!/usr/bin/env python3
"""The course as a rendered site, built from the same markdown files a learner reads on GitHub.

    tools/book.py build   # build/book/site: a strict mkdocs-material build (a broken link,
                          # anchor or nav entry fails it)
    tools/book.py check   # build, then headless Chromium opens every page: every image must
                          # load and every formula must render; screenshots of a day overview,
                          # the Hopper chapter's figure page and a page with math go to
                          # build/book/screenshots/
    tools/book.py serve   # build, then serve on http://127.0.0.1:8000

`make book` / `make book-check` run these inside build/book-venv (tools/book-requirements.txt).
Nothing is copied into the repository: build/book/src is a folder of symbolic links to the
repository's top-level folders, and mkdocs.yml is generated there with the navigation in reading
order (day → chapter → pages → hints), read from the files themselves. Math is rendered by KaTeX
from Debian's libjs-katex (copied into the site, so the site needs no network); without it the
build says what to install.
"""
import argparse
import functools
import http.server
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import threading

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import hint  # noqa: E402
import pages  # noqa: E402

OUT = ROOT / "build" / "book"
KATEX = pathlib.Path("/usr/share/javascript/katex")
# What `check` photographs: (name, page source, what must be on it).
SCREENSHOTS = [
    ("day06-overview", "day06-attention/README.md", {}),
    ("hopper-figures", "day10-optimizations/10_hopper_wgmma/05-swizzle-128b.md", {"images": 1}),
    ("math-online-softmax", "day06-attention/02_flash_attention/02-the-online-softmax.md", {"math": 1}),
    ("hint-reveal", "day06-attention/hints/02_flash_attention.md", {"details": 3}),
    ("zh-hopper-figures", "zh/day10-optimizations/10_hopper_wgmma/05-swizzle-128b.md", {"images": 1}),
]
REFERENCE_DOCS = ["docs/glossary.md", "docs/hardware.md", "docs/performance.md", "docs/troubleshooting.md",
                  "docs/colab.md", "docs/conventions.md", "docs/architecture.md", "bench/README.md",
                  "CONTRIBUTING.md", "CHANGELOG.md"]


def title(path):
    for line in path.read_text().splitlines():
        if line.startswith("# "):
            t = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", line[2:].strip())
            return t.replace("`", "")
    return path.stem


def nav():
    """(nav, zh section titles): home, each day (overview, chapters with their pages and hints),
    reference. Pages carry no title here: the site takes each page's own `# title`, so the
    Chinese site shows the Chinese titles; section titles are translated from the zh overviews."""
    rel = lambda p: str(p.relative_to(ROOT))
    zh_titles = {}

    def section(name, source, items):
        zh = source.with_name(source.name[:-3] + ".zh.md") if source else None
        if zh is not None and zh.is_file():
            zh_titles[name] = title(zh)
        return {name: items}

    out = ["README.md"]
    for day in sorted(p for p in ROOT.glob("day*") if p.is_dir()):
        overview = day / "README.md"
        items = [rel(overview)] if overview.is_file() else []
        for skeleton in sorted(day.glob("[0-9][0-9]_*.cu")):
            chapter = [rel(p) for p in hint.pages(skeleton) if p.is_file()]
            hints = hint.hints_path(skeleton)
            if hints.is_file():
                chapter.append(rel(hints))
            if chapter:
                items.append(section(title(ROOT / chapter[0]), ROOT / chapter[0], chapter))
        # A day's folders of given code with a README of their own (day 11's model/ and engine/).
        for given in sorted(d for d in day.iterdir() if d.is_dir() and (d / "README.md").is_file()
                            and not d.name[:2].isdigit() and d.name not in ("hints", "tests")):
            items.append(rel(given / "README.md"))
        out.append(section(title(overview) if overview.is_file() else day.name,
                           overview if overview.is_file() else None, items))
    out.append({"Reference": [rel(ROOT / d) for d in REFERENCE_DOCS if (ROOT / d).is_file()]})
    zh_titles["Reference"] = "参考"
    return out, zh_titles


def config(src, site):
    site_nav, zh_titles = nav()
    hooks = ROOT / "tools" / "book_site" / "hooks.py"
    return {
        "site_name": "LLM attention kernels in CUDA",
        "site_description": "From vector add to FlashAttention-3: a course in CUDA C++ with tests.",
        "docs_dir": str(src),
        "site_dir": str(site),
        "strict": True,
        "use_directory_urls": True,
        "exclude_docs": "build/\n*.patch\n",
        "theme": {"name": "material", "font": False, "language": "en",
                  "features": ["navigation.indexes", "navigation.footer", "navigation.top", "search.highlight",
                               "content.code.copy", "toc.follow"],
                  "palette": {"scheme": "default", "primary": "indigo", "accent": "deep orange"}},
        "plugins": ["search", {"i18n": {
            "docs_structure": "suffix", "fallback_to_default": True, "reconfigure_material": True,
            "reconfigure_search": True,
            "languages": [{"locale": "en", "default": True, "name": "English", "build": True},
                          {"locale": "zh", "name": "中文", "build": True, "site_name": "用 CUDA 手写 LLM 注意力算子",
                           "nav_translations": zh_titles}]}}],
        "hooks": [str(hooks)],
        "markdown_extensions": [
            "tables", "attr_list", "md_in_html", "admonition", "def_list", "footnotes",
            {"toc": {"permalink": True, "slugify": "!!python/name:hooks.gfm_slug"}},
            {"pymdownx.arithmatex": {"generic": True}},
            {"pymdownx.highlight": {"use_pygments": True}},
            "pymdownx.superfences", "pymdownx.details", "pymdownx.inlinehilite",
        ],
        "extra_javascript": ["_assets/katex/katex.min.js", "_assets/book.js"],
        "extra_css": ["_assets/katex/katex.min.css", "_assets/book.css"],
        "validation": {"nav": {"omitted_files": "info", "not_found": "warn"},
                       "links": {"not_found": "warn", "anchors": "warn", "unrecognized_links": "info",
                                 "absolute_links": "info"}},
        "nav": site_nav,
    }


def to_yaml(obj, indent=0):
    """The small YAML subset the config needs (keeps PyYAML out of the repository's tools)."""
    pad = "  " * indent
    if isinstance(obj, dict):
        lines = []
        for k, v in obj.items():
            if isinstance(v, (dict, list)) and v:
                lines.append(f"{pad}{json.dumps(k)}:")
                lines.append(to_yaml(v, indent + 1))
            else:
                lines.append(f"{pad}{json.dumps(k)}: {scalar(v)}")
        return "\n".join(lines)
    lines = []
    for item in obj:
        if isinstance(item, (dict, list)):
            body = to_yaml(item, indent + 1).lstrip()
            lines.append(f"{pad}- {body}")
        else:
            lines.append(f"{pad}- {scalar(item)}")
    return "\n".join(lines)


def scalar(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str) and v.startswith("!!python/name:"):
        return v
    if isinstance(v, str) and "\n" in v:
        return "|\n" + "".join(f"      {l}\n" for l in v.splitlines()).rstrip("\n")
    return json.dumps(v)


def stage():
    """build/book/src: links to the repository's folders and top-level files, plus the assets."""
    src = OUT / "src"
    if src.exists():
        shutil.rmtree(src)
    src.mkdir(parents=True)
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True).stdout.splitlines()
    tops = sorted({t.split("/")[0] for t in tracked} | {"docs"})
    for top in tops:
        if top.startswith(".") or top == "build" or not (ROOT / top).exists():
            continue
        (src / top).symlink_to(ROOT / top)
    assets = src / "_assets"
    assets.mkdir()
    for f in ("book.js", "book.css"):
        shutil.copy(ROOT / "tools" / "book_site" / f, assets / f)
    if not (KATEX / "katex.min.js").is_file():
        sys.exit("book: KaTeX not found at /usr/share/javascript/katex: install Debian's libjs-katex and "
                 "fonts-katex (apt-get install libjs-katex fonts-katex), which render the lessons' math offline")
    (assets / "katex").mkdir()
    for f in ("katex.min.js", "katex.min.css"):
        shutil.copy(KATEX / f, assets / "katex" / f)
    shutil.copytree(KATEX / "fonts", assets / "katex" / "fonts", symlinks=False)
    return src


def build():
    src = stage()
    site = OUT / "site"
    cfg = OUT / "mkdocs.yml"
    cfg.write_text(to_yaml(config(src, site)) + "\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT / "tools" / "book_site") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--clean", "-f", str(cfg)], env=env,
                       capture_output=True, text=True)
    log = r.stdout + r.stderr
    (OUT / "build.log").write_text(log)
    noise = re.compile(r"INFO|MkDocs 2\.0|^\s*$|^\s+[│├└]|mkdocs-material|Material for MkDocs|squidfunk|"
                       r"backward incompatible|plugin system|themes and|recommend|project|the team|─|^ *\*")
    shown = [l for l in log.splitlines() if not noise.search(l)]
    if shown:
        print("\n".join(shown))
    if r.returncode != 0:
        sys.exit(f"book: the strict build failed (full log: {OUT.relative_to(ROOT)}/build.log)")
    count = sum(1 for _ in site.rglob("index.html"))
    print(f"book: built {count} pages into {site.relative_to(ROOT)} (strict: every link, anchor and nav entry resolves)")
    return site


def page_url(source):
    """The site path of a source page (use_directory_urls): a/b/README.md -> a/b/, a/b/c.md -> a/b/c/."""
    p = pathlib.PurePosixPath(source)
    if p.name == "README.md":
        return str(p.parent) + "/" if str(p.parent) != "." else ""
    return str(p.with_suffix("")) + "/"


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def serve(site, port=0):
    handler = functools.partial(Quiet, directory=str(site))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd


PROBE = """
const imgs = Array.from(document.querySelectorAll('article img'));
const math = Array.from(document.querySelectorAll('article .arithmatex'));
return {
  images: imgs.length,
  broken: imgs.filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.getAttribute('src')),
  math: math.length,
  unrendered: math.filter(m => !m.querySelector('.katex')).map(m => m.textContent.slice(0, 60)),
  errors: Array.from(document.querySelectorAll('.katex-error')).map(e => e.getAttribute('title') || e.textContent),
  details: document.querySelectorAll('article details').length,
  title: document.title,
};
"""


def check():
    site = build()
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        sys.exit("book-check: selenium is missing (make book-check installs tools/book-requirements.txt)")
    driver_path = shutil.which("chromedriver") or "/usr/lib/chromium/chromedriver"
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if not browser or not os.path.exists(driver_path):
        sys.exit("book-check: needs Debian's chromium and chromium-driver (apt-get install chromium chromium-driver)")
    httpd = serve(site)
    base = f"http://127.0.0.1:{httpd.server_address[1]}/"
    opts = webdriver.ChromeOptions()
    opts.binary_location = browser
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,1600"):
        opts.add_argument(a)
    driver = webdriver.Chrome(service=Service(driver_path), options=opts)
    shots = OUT / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)
    problems, totals = [], {"pages": 0, "images": 0, "math": 0}
    try:
        sources = sorted(str(p.relative_to(site)) for p in site.rglob("index.html"))
        for html in sources:
            url = base + html[: -len("index.html")]
            driver.get(url)
            r = driver.execute_script(PROBE)
            totals["pages"] += 1
            totals["images"] += r["images"]
            totals["math"] += r["math"]
            where = html[: -len("index.html")] or "/"
            for b in r["broken"]:
                problems.append(f"{where}: image {b} did not load")
            for u in r["unrendered"]:
                problems.append(f"{where}: formula not rendered: {u!r}")
            for e in r["errors"]:
                problems.append(f"{where}: KaTeX error: {e[:100]}")
        for name, source, need in SCREENSHOTS:
            file = ROOT / source.removeprefix("zh/")
            if source.startswith("zh/"):
                file = file.with_name(file.name[:-3] + ".zh.md")
            if not file.is_file():
                problems.append(f"screenshot {name}: {source} does not exist")
                continue
            driver.get(base + page_url(source))
            r = driver.execute_script(PROBE)
            for key, least in need.items():
                if r[key] < least:
                    problems.append(f"screenshot {name}: {source} shows {r[key]} {key} (expected at least {least})")
            driver.save_screenshot(str(shots / f"{name}.png"))
    finally:
        driver.quit()
        httpd.shutdown()
    for p in problems:
        print(f"book-check: {p}")
    print(f"book-check: {totals['pages']} pages opened in Chromium, {totals['images']} images and "
          f"{totals['math']} formulas rendered; screenshots in {shots.relative_to(ROOT)}/: "
          + ", ".join(f"{n}.png" for n, _, _ in SCREENSHOTS))
    return 1 if problems else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("what", choices=["build", "check", "serve"])
    args = ap.parse_args()
    if args.what == "build":
        build()
        return 0
    if args.what == "check":
        return check()
    site = build()
    serve(site, 8000)
    print("book: serving on http://127.0.0.1:8000 (Ctrl-C stops)")
    threading.Event().wait()


if __name__ == "__main__":
    sys.exit(main())
