"""Checks on the built course website (`make book`, then `make site-check`, which sets
IRBOOK_SITE)."""

import html
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

SITE = os.environ.get("IRBOOK_SITE")
pytestmark = pytest.mark.skipif(
    not SITE, reason="site checks run after `make book` via `make site-check`"
)
ROOT = Path(__file__).resolve().parents[1]


def _html(rel):
    p = Path(SITE) / rel
    assert p.is_file(), f"{p} was not built"
    return p.read_text(encoding="utf-8")


def _pages():
    return sorted(Path(SITE).rglob("*.html"))


def test_intro_and_chapters_built():
    landing = _html("nbs/index.html")
    assert "Quick start" in landing
    assert len(_pages()) >= 3


def test_chapter_has_executed_outputs_and_api_reference():
    page = _html("nbs/api/data.html")
    outputs = re.findall(r'class="cell_output', page)
    assert len(outputs) >= 5, "executed outputs missing"
    assert "191" in page  # the benchmark's question count, printed by an executed cell
    # show_doc output of fetch (API reference)
    assert "Verified local copy of source" in page


def test_figures_are_in_the_pages():
    # every metric chapter draws; a kernel with a non-inline matplotlib backend would
    # silently drop the figures
    for rel in [
        "nbs/02_set_metrics.html",
        "nbs/03_rank_metrics.html",
        "nbs/04_graded_metrics.html",
        "nbs/05_choosing_metrics.html",
    ]:
        imgs = re.findall(r'<img[^>]+src="([^"]+\.png)"', _html(rel))
        assert len(imgs) >= 3, f"{rel}: {len(imgs)} figures"
        for src in imgs:
            assert (Path(SITE) / rel).parent.joinpath(src).resolve().is_file(), (
                rel,
                src,
            )


def test_no_remote_scripts_or_styles():
    bad = []
    for p in _pages():
        html = p.read_text(encoding="utf-8")
        for tag in re.findall(r"<(?:script|link)\b[^>]*>", html):
            if re.search(r'(?:src|href)="(?:https?:)?//', tag) and (
                "stylesheet" in tag or "<script" in tag or "preload" in tag
            ):
                bad.append((p.name, tag[:120]))
    assert not bad, bad[:5]


def test_mathjax_is_local():
    with_math = 0
    for p in _pages():
        srcs = re.findall(
            r'<script[^>]*src="([^"]*mathjax[^"]*)"',
            p.read_text(encoding="utf-8"),
            flags=re.I,
        )
        if not srcs:
            continue
        with_math += 1
        assert all(not s.startswith(("http", "//")) for s in srcs), (p.name, srcs)
        for s in srcs:
            assert (p.parent / s.split("?")[0]).resolve().is_file(), (p.name, s)
    assert with_math >= 1, "no page loads MathJax: the metric chapters should"


def _cell_inputs(page):
    "Text of every rendered code-cell input on `page` (html), one string per cell."
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(page, "html.parser")
    return [div.get_text() for div in soup.select("div.cell_input")]


def test_no_nbdev_directives_or_show_doc_inputs():
    # `#| export`, `#| hide`, ... are nbdev's instructions, not lesson code; show_doc
    # cells show their output (the API reference) only
    bad = []
    for p in _pages():
        for code in _cell_inputs(p.read_text(encoding="utf-8")):
            for line in code.splitlines():
                if re.match(r"\s*#\s?\|", line) or "show_doc(" in line:
                    bad.append((p.name, line.strip()[:80]))
    assert not bad, bad[:10]


def test_code_fits_the_page():
    # the default page width shows 88 characters of code without a horizontal scrollbar
    wide = []
    for p in _pages():
        for code in _cell_inputs(p.read_text(encoding="utf-8")):
            wide += [
                (p.name, len(ln), ln[:60]) for ln in code.splitlines() if len(ln) > 88
            ]
    assert not wide, wide[:10]


# ------------------------------------------------------------------------------------
# The page standard (issue 26): what a reader sees on every page of the built site.

ARTICLE_WIDTH = 760  # px: the article column at a 1280 px window is ~690-735 px wide
COURSE = re.compile(r"^(\d\d)_")


def _soup(p):
    from bs4 import BeautifulSoup

    return BeautifulSoup(p.read_text(encoding="utf-8"), "html.parser")


def _article(p):
    soup = _soup(p)
    return soup.select_one("article.bd-article") or soup


def _content_pages():
    "Every page of the book: the landing page, chapters, reference pages, back matter."
    site = Path(SITE)
    pages = [*sorted((site / "nbs").rglob("*.html")), *sorted(site.glob("*.html"))]
    skip = {"genindex.html", "search.html", "index.html"}  # index.html: a redirect
    return [
        p
        for p in pages
        if not p.name.startswith(".") and not (p.parent == site and p.name in skip)
    ]


def _course_pages():
    return sorted(
        p for p in (Path(SITE) / "nbs").glob("*.html") if COURSE.match(p.name)
    )


def _png_width(path: Path) -> int:
    data = path.read_bytes()[:24]
    assert data[:8] == b"\x89PNG\r\n\x1a\n", path
    return int.from_bytes(data[16:20], "big")


def _images(p):
    for img in _article(p).select("img"):
        src = img.get("src", "")
        if src.startswith(("http", "data:")):
            continue
        yield img, (p.parent / src.split("?")[0]).resolve()


def test_every_image_exists_and_has_alt_text():
    missing, no_alt = [], []
    for p in _content_pages():
        for img, path in _images(p):
            if not path.is_file():
                missing.append((p.name, img.get("src")))
            alt = (img.get("alt") or "").strip()
            # a file name (what Sphinx falls back to) is not a description
            if not alt or re.search(r"\.(png|jpe?g|svg)$|^[0-9a-f]{16,}", alt):
                no_alt.append((p.name, img.get("src", "")[-40:]))
    assert not missing, missing[:10]
    assert not no_alt, f"{len(no_alt)} figures without alt text: {no_alt[:10]}"


def test_figures_fit_the_article_column():
    # a figure wider than the column is shrunk and its text becomes unreadable: keep
    # every PNG within the column (figsize width <= 7 in at the inline backend's
    # 100 dpi)
    wide = []
    for p in _content_pages():
        for img, path in _images(p):
            if path.suffix == ".png" and path.is_file() and not img.get("width"):
                w = _png_width(path)
                if w > ARTICLE_WIDTH:
                    wide.append((p.name, path.name[-20:], w))
    assert not wide, f"{len(wide)} figures wider than {ARTICLE_WIDTH} px: {wide[:10]}"


def _prose(node):
    "Text of `node` outside code, math and scripts."
    node = node.__copy__() if hasattr(node, "__copy__") else node
    for bad in node.select("pre, code, script, style, .math, mjx-container"):
        bad.decompose()
    return node.get_text(" ")


def test_no_raw_dollar_math():
    # MathJax typesets $...$ in markdown cells, not in generated (Markdown output) prose
    raw = []
    for p in _content_pages():
        text = _prose(_article(p))
        raw += [
            (p.name, m.group(0)[:60]) for m in re.finditer(r"\$[^$\n]{1,200}\$", text)
        ]
    assert not raw, f"{len(raw)} raw math spans: {raw[:10]}"


NOISE = re.compile(
    r"Warning:|warnings\.warn|/\.venv/|site-packages|/root/|/tmp/|/home/|"
    r"read from the cache|This chapter took|\btook \d+(\.\d+)? s\b"
)


def test_outputs_have_no_stderr_warnings_paths_or_bookkeeping():
    bad = []
    for p in _content_pages():
        art = _article(p)
        bad += [(p.name, "stderr", o.get_text()[:80]) for o in art.select(".stderr")]
        for out in art.select("div.cell_output"):
            m = NOISE.search(out.get_text(" "))
            # the benchmarks appendix reports timings: they are its subject there
            if m and not (p.name == "benchmarks.html" and "took" in m.group(0)):
                bad.append((p.name, "output", m.group(0)))
        if "application/vnd.jupyter.widget" in p.read_text(encoding="utf-8"):
            bad.append((p.name, "widget state", ""))
    assert not bad, f"{len(bad)} outputs: {bad[:10]}"


def test_internal_links_resolve():
    broken = []
    ids = {}
    for p in _content_pages():
        for a in _article(p).select("a[href]"):
            href = a["href"]
            if href.startswith(("http:", "https:", "mailto:", "javascript:", "#")):
                continue
            target, _, frag = href.partition("#")
            path = (p.parent / target).resolve()
            if not path.is_file():
                broken.append((p.name, href))
                continue
            if frag and path.suffix == ".html":
                if path not in ids:
                    ids[path] = {t.get("id") for t in _soup(path).select("[id]")}
                if frag not in ids[path]:
                    broken.append((p.name, href))
    assert not broken, f"{len(broken)} broken links: {broken[:10]}"


def test_chapters_are_numbered_as_their_files():
    # nbs/NN_x is chapter NN in the navigation, so "chapter NN" in prose means that page
    wrong = []
    pages = _course_pages()
    assert len(pages) >= 20, pages
    for p in pages:
        num = _soup(p).select_one("h1 .section-number")
        got = num.get_text().strip().rstrip(".") if num else None
        if got != str(int(p.name[:2])):
            wrong.append((p.name, got))
    assert not wrong, wrong


def test_chapter_links_point_at_that_chapter():
    # a link whose text is "N" right after "chapter(s)" goes to nbs/NN_*.html
    wrong = []
    for p in _content_pages():
        for a in _article(p).select("a[href]"):
            text = a.get_text().strip()
            prev = a.previous_sibling
            before = prev if isinstance(prev, str) else ""
            if text.isdigit() and re.search(
                r"[Cc]hapters?\s*$|–$|-$|,\s*$|and\s*$|to\s*$", before
            ):
                name = Path(a["href"].partition("#")[0]).name
                if not name.startswith(f"{int(text):02d}_"):
                    wrong.append((p.name, text, a["href"]))
    assert not wrong, wrong


def test_index_lists_the_api():
    entries = _soup(Path(SITE) / "genindex.html").select("table.indextable li a")
    assert len(entries) >= 150, f"genindex.html has {len(entries)} entries"


def test_every_chapter_ends_with_recap_questions_exercises():
    missing = []
    for p in _course_pages():
        heads = [h.get_text().strip().lower() for h in _article(p).select("h2")]
        heads = [re.sub(r"^[\d.]+\s*|#$", "", h).strip() for h in heads]
        for want in ("recap", "questions", "exercises"):
            if not any(h.startswith(want) for h in heads):
                missing.append((p.name, want))
    assert not missing, f"{len(missing)} missing: {missing[:12]}"


# visible code lines in the course part (landing page and chapters), today's budget; the
# reference pages hold the library's source and are not counted. A cell's lines are
# those the reader sees: its rendered text without the blank lines the HTML adds
# before and after it (about three per cell), blank lines inside the code included.
CODE_BUDGET = int(os.environ.get("IRBOOK_CODE_BUDGET", "5160"))


def _open_cell_inputs(page):
    "Code a reader sees without unfolding anything (not folded set-up or solutions)."
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(page, "html.parser")
    return [
        div.get_text()
        for div in soup.select("div.cell_input")
        if not div.find_parent(class_=["tag_hide-cell", "tag_hide-input"])
    ]


def test_course_code_line_budget():
    per = {}
    for p in [Path(SITE) / "nbs" / "index.html", *_course_pages()]:
        cells = _open_cell_inputs(p.read_text())
        per[p.name] = sum(len(c.strip("\n").splitlines()) for c in cells)
    total = sum(per.values())
    top = sorted(per.items(), key=lambda kv: -kv[1])[:5]
    assert total <= CODE_BUDGET, (
        f"{total} visible code lines (budget {CODE_BUDGET}); {top}"
    )


_SCROLL_JS = """<script>window.addEventListener('load', () => {
  const art = document.querySelector('article.bd-article') || document.body;
  const right = art.getBoundingClientRect().right + 1;
  const wide = [...document.querySelectorAll('div.highlight pre')]
    .filter(p => p.scrollWidth > p.clientWidth + 1)
    .map(p => p.textContent.split('\\n')
      .sort((a, b) => b.length - a.length)[0].slice(0, 60));
  const scrolls = el => {
    for (let e = el.parentElement; e && e !== art; e = e.parentElement) {
      const o = getComputedStyle(e).overflowX;
      const box = e.clientWidth < art.clientWidth + 2;
      if ((o === 'auto' || o === 'scroll') && box) return true;
    }
    return false;
  };
  const cut = [...art.querySelectorAll('table')]
    .filter(t => t.getBoundingClientRect().right > right && !scrolls(t))
    .map(t => t.textContent.trim().slice(0, 60));
  const shrunk = [...art.querySelectorAll('img')]
    .filter(i => i.naturalWidth && i.clientWidth < 0.85 * i.naturalWidth)
    .map(i => [i.getAttribute('src').slice(-30), i.naturalWidth, i.clientWidth]);
  const out = document.createElement('pre');
  out.textContent = 'SCROLLCHECK' + JSON.stringify({wide, cut, shrunk}) + 'END';
  document.body.appendChild(out);
});</script>"""


@pytest.mark.skipif(
    not shutil.which("chromium"), reason="needs chromium (apt-get install chromium)"
)
def test_pages_as_a_reader_sees_them_in_chromium(tmp_path):
    # at the default window width (1280 px): no code needs a scrollbar, no table is cut
    # off (a wide table sits in a box that scrolls), no figure is shrunk below 85%
    found = {}
    for p in _content_pages():
        probe = p.with_name(f".probe-{p.name}")  # beside the page: same relative paths
        probe.write_text(
            p.read_text(encoding="utf-8").replace("</body>", _SCROLL_JS + "</body>"),
            encoding="utf-8",
        )
        try:
            dom = subprocess.run(
                [
                    "chromium",
                    "--headless",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--no-first-run",
                    "--disable-background-networking",
                    "--disable-component-update",
                    "--disable-sync",
                    f"--user-data-dir={tmp_path / 'profile'}",
                    "--window-size=1280,1000",
                    "--virtual-time-budget=10000",
                    "--dump-dom",
                    probe.resolve().as_uri(),
                ],
                capture_output=True,
                text=True,
                timeout=120,
            ).stdout
        finally:
            probe.unlink()
        m = re.search(r"SCROLLCHECK(\{.*?\})END", dom, re.S)
        assert m, f"{p.name}: the probe script did not run"
        res = json.loads(html.unescape(m.group(1)))
        if any(res.values()):
            found[str(p.relative_to(SITE))] = {k: v for k, v in res.items() if v}
    assert not found, found


# ------------------------------------------------------------------------------------
# A course a learner can run anywhere and check themselves against (issue 35).


def _after_h2(p, head):
    "The elements of page `p`'s article after its h2 `head`, up to the next h2."

    def title(h):
        return re.sub(r"^[\d.]+\s*|#$", "", h.get_text().strip()).strip().lower()

    h = next(h for h in _article(p).select("h2") if title(h) == head)
    section = h.find_parent("section")
    return section if section is not None else h.parent


def test_every_chapter_shows_answers_and_folded_solutions():
    missing = []
    for p in _course_pages():
        questions = _after_h2(p, "questions")
        if not questions.select(".admonition.dropdown"):
            missing.append((p.name, "answers (a dropdown admonition)"))
        exercises = _after_h2(p, "exercises")
        folded = exercises.select("div.cell.tag_hide-cell")
        if not folded or not all(c.select("details") for c in folded):
            missing.append((p.name, "solutions folded behind a toggle"))
        elif "Solution to exercise 1" not in exercises.get_text(" "):
            missing.append((p.name, "a toggle that says 'Solution to exercise N'"))
    assert not missing, missing


def test_chapters_open_in_colab_and_binder_and_download_executed():
    bad = []
    for p in _course_pages():
        page = p.read_text(encoding="utf-8")
        stem = p.stem
        colab = f"colab.research.google.com/github/irbook/irbook/blob/main/nbs/{stem}"
        if colab not in page:
            bad.append((p.name, "no Open in Colab link"))
        if f"mybinder.org/v2/gh/irbook/irbook/main?urlpath=tree/nbs/{stem}" not in page:
            bad.append((p.name, "no Binder link"))
        dl = Path(SITE) / "_sources" / "nbs" / f"{stem}.ipynb"
        if f"_sources/nbs/{stem}.ipynb" not in page or not dl.is_file():
            bad.append((p.name, "no .ipynb download"))
            continue
        cells = json.loads(dl.read_text(encoding="utf-8"))["cells"]
        tags = [set(c.get("metadata", {}).get("tags", [])) for c in cells]
        if not any(c.get("outputs") for c in cells):
            bad.append((p.name, "the download has no outputs"))
        if any("remove-cell" in t for t in tags):
            bad.append((p.name, "the download holds the hidden checks"))
    assert not bad, bad[:10]


def test_landing_page_says_what_the_course_needs():
    text = _prose(_article(Path(SITE) / "nbs" / "index.html"))
    for want in ("What you need", "GPU", "minutes", "MB"):
        assert want in text, want
