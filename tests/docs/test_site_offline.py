"""The documentation site opened from disk (file://) in a headless Chromium with no network.

The static check in .ci/run reads the HTML; this one runs the pages, which is what a reader on
a train does: every request that is not a file is refused and fails the test, the search box
finds pages (Material's search worker runs through docs/javascripts/iframe-worker-shim.js), and
code blocks keep each line whole (they scroll sideways; no line wraps or is cut off).

Needs the docs extra, the playwright package (never ``playwright install``: it uses the system's
Chromium) and Chromium itself; ``nox -s docs_browser`` installs the first two, CI all three.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest

ROOT = Path(__file__).parent.parent.parent
SEARCH_PAGES = ("index.html", "environments/mpe.html")
"""A top-level page and a nested one: the shim and the index are found by relative URLs."""
CODE_PAGES = ("index.html", "tune.html", "pettingzoo.html", "runs.html")
"""Pages with code lines wider than the content column."""


def chromium() -> str | None:
    """The system's Chromium (HARL_CHROMIUM, else chromium or chromium-browser on PATH)."""
    return os.environ.get("HARL_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")


def skip_reason() -> str | None:
    """Why this machine cannot run the browser check, in one line naming what to install."""
    from importlib.util import find_spec

    if find_spec("mkdocs") is None or find_spec("material") is None:
        return 'needs the docs extra: pip install -e ".[docs]" (or nox -s docs_browser)'
    if find_spec("playwright") is None:
        return "needs playwright: pip install playwright, no `playwright install` (or nox -s docs_browser)"
    if chromium() is None:
        return "needs Chromium: apt-get install chromium (or set HARL_CHROMIUM to its path)"
    return None


pytestmark = pytest.mark.skipif(skip_reason() is not None, reason=skip_reason() or "")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site as CI builds it (HARL_DOCS_SITE names one already built, so it is not built twice)."""
    built = os.environ.get("HARL_DOCS_SITE")
    if built:
        return Path(built)
    out = tmp_path_factory.mktemp("site")
    subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", str(out)],
                   cwd=ROOT, check=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    return out


def local(url: str) -> bool:
    """A request that needs no network: a file of the site, or what the page made itself."""
    return url.startswith(("file:", "data:", "blob:", "about:"))


class Offline:
    """A browser context with no network: each request that is not file:// is refused and kept."""

    def __init__(self, browser: Any) -> None:  # playwright's Browser, imported only where it runs
        self.refused: list[str] = []
        self.errors: list[str] = []
        self.context = browser.new_context(offline=True)
        self.context.route("**/*", self.route)

    def route(self, route: Any) -> None:
        if local(route.request.url):
            route.continue_()
        else:
            self.refused.append(route.request.url)
            route.abort()

    def open(self, site: Path, page_name: str) -> Any:
        page = self.context.new_page()
        page.on("pageerror", lambda error: self.errors.append(f"{page_name}: {error}"))
        page.on("request", lambda request: None if local(request.url) else self.refused.append(request.url))
        page.set_default_timeout(15_000)
        page.goto((site / page_name).as_uri())
        return page


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=chromium())
        yield launched
        launched.close()


@pytest.fixture
def offline(browser: Any) -> Iterator[Offline]:
    """A fresh context per test, so a refused request is blamed on the test that made it."""
    session = Offline(browser)
    yield session
    session.context.close()


def sample(site: Path) -> list[str]:
    """index.html, 404.html and the first page of each folder: every page loads the same scripts,
    style sheets and fonts (.ci/run reads all pages' HTML), only their relative paths differ."""
    pages = sorted(site.rglob("*.html"))
    assert len(pages) > 20, f"the site at {site} has only {len(pages)} pages"
    first = {page.parent: page for page in reversed(pages)}
    return sorted({"index.html", "404.html", *(str(page.relative_to(site)) for page in first.values())})


def test_pages_load_without_the_network(site: Path, offline: Offline) -> None:
    """No page asks the internet for a script, a style sheet or a font, and no script fails."""
    for name in sample(site):
        page = offline.open(site, name)
        failed = page.evaluate("() => [...document.fonts].filter(f => f.status === 'error').map(f => f.family)")
        assert not failed, f"{name}: fonts that did not load: {failed}"
        page.close()
    assert not offline.refused, f"requests that needed the network: {sorted(set(offline.refused))[:5]}"
    assert not offline.errors, f"script errors: {offline.errors[:5]}"


@pytest.mark.parametrize("name", SEARCH_PAGES)
def test_the_search_box_finds_pages(site: Path, offline: Offline, name: str) -> None:
    """Typing a query lists matching pages, and the first result links to a page of the site."""
    page = offline.open(site, name)
    page.click("input.md-search__input")  # Material shows the box only once its search worker started
    page.keyboard.type("happo")  # Material searches on key events: fill() would not trigger it
    page.wait_for_selector(".md-search-result__item")
    meta = page.inner_text(".md-search-result__meta")
    assert "matching document" in meta and "No matching" not in meta, meta
    href = page.eval_on_selector(".md-search-result__link", "a => a.href")
    link = urlsplit(href)
    assert link.scheme == "file" and Path(unquote(link.path)).is_file(), href
    page.close()
    assert not offline.refused, f"requests that needed the network: {sorted(set(offline.refused))[:5]}"


LAYOUT = """() => [...document.querySelectorAll('pre > code')].map(code => {
  const style = getComputedStyle(code);
  const lines = code.textContent.replace(/\\n$/, '').split('\\n').length;
  const height = code.clientHeight - parseFloat(style.paddingTop) - parseFloat(style.paddingBottom);
  const wide = code.scrollWidth > code.clientWidth;
  code.scrollLeft = code.scrollWidth;
  return {first: code.textContent.split('\\n')[0].slice(0, 60), whiteSpace: style.whiteSpace,
          rows: height / parseFloat(style.lineHeight), lines, wide, scrolled: code.scrollLeft > 0,
          cut: code.scrollHeight > code.clientHeight + 1};
})"""


@pytest.mark.parametrize("name", CODE_PAGES)
def test_long_code_lines_scroll_instead_of_wrapping(site: Path, offline: Offline, name: str) -> None:
    """Each text line is one rendered row, a wide block scrolls sideways, and none is cut off below."""
    page = offline.open(site, name)
    blocks = page.evaluate(LAYOUT)
    page.close()
    assert blocks, f"{name} has no code block"
    for block in blocks:
        where = f"{name}, the block starting {block['first']!r}"
        assert block["whiteSpace"] == "pre", f"{where}: white-space is {block['whiteSpace']}, lines wrap"
        assert round(block["rows"]) == block["lines"], f"{where}: {block['lines']} lines shown as {block['rows']:.1f} rows"
        assert not block["wide"] or block["scrolled"], f"{where}: a line wider than the column does not scroll"
        assert not block["cut"], f"{where}: lines cut off below"
    assert any(block["wide"] for block in blocks), f"{name} has no line wider than the column: pick another page"
