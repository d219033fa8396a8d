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


_SCROLL_JS = """<script>window.addEventListener('load', () => {
  const wide = [...document.querySelectorAll('div.highlight pre')]
    .filter(p => p.scrollWidth > p.clientWidth + 1)
    .map(p => p.textContent.split('\\n')
      .sort((a, b) => b.length - a.length)[0].slice(0, 60));
  const out = document.createElement('pre');
  out.textContent = 'SCROLLCHECK' + JSON.stringify(wide) + 'END';
  document.body.appendChild(out);
});</script>"""


@pytest.mark.skipif(
    not shutil.which("chromium"), reason="needs chromium (apt-get install chromium)"
)
def test_no_code_block_scrolls_sideways_in_chromium(tmp_path):
    # what a reader sees at the default window width (1280 px): no code needs a
    # scrollbar
    wide = {}
    for p in sorted((Path(SITE) / "nbs").rglob("*.html")):
        probe = p.with_name(
            f".probe-{p.name}"
        )  # beside the page: same relative CSS paths
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
        m = re.search(r"SCROLLCHECK(\[.*?\])END", dom, re.S)
        assert m, f"{p.name}: the probe script did not run"
        if blocks := json.loads(html.unescape(m.group(1))):
            wide[p.name] = blocks
    assert not wide, wide
