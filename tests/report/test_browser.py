"""The HTML report in a real headless Chromium (Debian's ``chromium``, driven by playwright).

Opens the report of two real recorded runs of the embedded model (tests/corpus/report_runs) from
``file://`` and checks what a reader relies on: the summary table, a leak highlighted in place,
a flipped case with both sides' raw outputs, filtering by failure reason, no request other than
``file:``/``data:``, no console error; and that a hostile output stays text (no script runs).
Without a browser the tests fail under LEADER_EVAL_CI=1 and are skipped (with the reason) elsewhere.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from leader_eval.report import write_report
from leader_eval.runs.evaluate import read_run
from tests.corpus.report_runs import HOSTILE_CASE, RUN_A, RUN_B, hostile_run, random_texts, run_with_texts

CHROMIUM = os.environ.get("LEADER_EVAL_CHROMIUM", "/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-background-networking", "--disable-component-update"]
SCREENSHOTS = Path(os.environ.get("LEADER_EVAL_SCREENSHOTS", tempfile.gettempdir()))


def _unavailable(why: str) -> None:
    if os.environ.get("LEADER_EVAL_CI") == "1":
        pytest.fail(f"browser test cannot run in CI: {why} (.ci/run installs chromium and playwright)")
    pytest.skip(why)


def expect(locator: Any) -> Any:
    from playwright.sync_api import expect as pw_expect

    return pw_expect(locator)


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("the playwright package is not installed (pip install -e '.[dev]')")
    if not (Path(CHROMIUM).is_file() or shutil.which(CHROMIUM)):
        _unavailable(f"no Chromium at {CHROMIUM} (apt-get install -y chromium)")
    profile = tmp_path_factory.mktemp("chromium-profile")
    with sync_playwright() as pw:
        # the Debian build, never a downloaded one; a throwaway profile
        ctx = pw.chromium.launch_persistent_context(
            str(profile), executable_path=CHROMIUM, headless=True, args=FLAGS, viewport={"width": 1280, "height": 900}
        )
        try:
            yield ctx
        finally:
            ctx.close()


class Page:
    """A page with every request and console error it produced recorded."""

    def __init__(self, ctx: Any, path: Path):
        self.requests: list[str] = []
        self.errors: list[str] = []
        self.page = ctx.new_page()
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.goto(path.resolve().as_uri())

    def visible_cases(self, run: int) -> list[str]:
        rows = self.page.locator(f'table.cases[data-run="{run}"] tr.case')
        return [rows.nth(i).get_attribute("data-id") for i in range(rows.count()) if rows.nth(i).is_visible()]

    def open_case(self, run: int, case_id: str) -> Any:
        self.page.locator(f'table.cases[data-run="{run}"] tr.case[data-id="{case_id}"] button.case-toggle').click()
        return self.page.locator(f'.samples[data-run="{run}"][data-case="{case_id}"]')

    def assert_offline_and_clean(self) -> None:
        assert self.requests, "request events were not observed"
        assert all(u.split(":", 1)[0] in ("file", "data") for u in self.requests), self.requests
        assert self.errors == []


def test_report_of_real_runs_in_chromium(browser: Any, tmp_path: Path) -> None:
    out = write_report([RUN_A, RUN_B], tmp_path / "report.html")
    run = read_run(RUN_A)
    p = Page(browser, out)
    page = p.page

    # the comparison's verdict and every run's summary metrics, without opening anything
    assert page.locator("#comparison p.verdict").first.is_visible()
    page.locator("#run-0 > summary").click()
    summary = page.locator("#run-0 table.summary")
    assert summary.is_visible()
    score = run.summary["overall"]["metrics"]["score"]
    assert f"{score['value']:.3f}" in summary.inner_text()

    # a leak the scorer found, highlighted in the raw output and named
    leaked = next(s for s in run.scores if any(f["where"] == "text" for c in s.checks for f in c["findings"]))
    reason = next(f["reason"] for c in leaked.checks for f in c["findings"] if f["where"] == "text")
    box = p.open_case(0, leaked.case_id)
    mark = box.locator("mark.leak").first
    assert mark.is_visible() and reason in mark.locator(".leak-name").inner_text()

    # a flipped case: both sides' raw outputs next to each other
    flip = page.locator("details.flip").first
    assert flip.is_visible()
    flip.locator("summary").click()
    sides = flip.locator(".sbs .side")
    expect(sides).to_have_count(2)  # the toggle event renders them a task later
    for i in range(2):
        assert sides.nth(i).locator("pre.raw").first.is_visible()
    a_box, b_box = sides.nth(0).bounding_box(), sides.nth(1).bounding_box()
    assert b_box["x"] > a_box["x"] + a_box["width"] / 2  # next to each other, not stacked

    # filtering by a failure reason shows exactly the cases that have it
    before = p.visible_cases(0)
    reason_counts = {r: sum(r in (c.get("reasons") or {}) for c in run.cases) for c in run.cases for r in c["reasons"]}
    chosen = min(reason_counts, key=lambda r: (reason_counts[r], r))
    page.locator('.filters[data-run="0"] select.f-reason').select_option(chosen)
    after = p.visible_cases(0)
    assert after != before
    assert sorted(after) == sorted(c["case_id"] for c in run.cases if chosen in (c.get("reasons") or {}))
    page.locator('.filters[data-run="0"] select.f-status').select_option("pass")
    assert all(c["n_passed"] == c["n_scored"] for c in run.cases if c["case_id"] in p.visible_cases(0))

    shot = SCREENSHOTS / "leader-eval-report-browser.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000
    p.assert_offline_and_clean()


def test_hostile_output_is_shown_as_text_and_runs_nothing(browser: Any, tmp_path: Path) -> None:
    out = write_report([hostile_run(tmp_path / "h")], tmp_path / "report.html")
    p = Page(browser, out)
    page = p.page
    raw = p.open_case(0, HOSTILE_CASE).locator(".sample").first.locator("pre.raw")
    text = raw.inner_text()
    # every hostile piece is there, as text
    for piece in ("</script><script>window.__pwned = 1</script>", '<img src=x onerror="window.__pwned = 1">',
                  "<svg onload=window.__pwned=1>", "&amp;", "<!-- ]]>", "⟨\\xff⟩⟨\\x80⟩", "⟨U+2028⟩", "⟨U+202E⟩"):  # fmt: skip
        assert piece in text, piece
    token = raw.locator("mark.leak .tok", has_text="<|im_start|>")
    assert token.is_visible()
    # nothing became an element, nothing ran (the label is hostile too)
    page.wait_for_timeout(200)
    assert page.evaluate("window.__pwned") is None
    assert page.locator("img:not(.plot), svg, main script, [onerror], [onload]").count() == 0
    assert '<img src=x onerror="window.__pwned=1">v1' in page.locator("#run-0 > summary").inner_text()
    page.screenshot(path=str(SCREENSHOTS / "leader-eval-report-hostile.png"))
    p.assert_offline_and_clean()


def test_without_javascript_the_summary_and_comparison_are_readable(browser: Any, tmp_path: Path) -> None:
    out = write_report([RUN_A, RUN_B], tmp_path / "report.html")
    page = browser.new_page()
    browser.new_cdp_session(page).send("Emulation.setScriptExecutionDisabled", {"value": True})
    page.goto(out.resolve().as_uri())
    assert page.evaluate("1") == 1 and "js" not in (page.locator("html").get_attribute("class") or "")
    assert page.locator("#comparison p.verdict").first.is_visible()
    assert page.locator("details.flip").first.is_visible()
    page.locator("#run-0 > summary").click()  # <details> opens without script
    assert page.locator("#run-0 table.summary").is_visible()
    assert page.locator("#run-0 table.cases tr.case").first.is_visible()
    assert page.locator("#run-0 noscript").count() == 1 and not page.locator("#run-0 .filters").is_visible()


#: what the page shows, read back from the DOM as (kind, text) pieces (leak names left out)
_READ_BACK = """pre => {
  const out = [];
  const walk = node => node.childNodes.forEach(n => {
    if (n.nodeType === Node.TEXT_NODE) { out.push(["", n.data]); return; }
    if (n.classList.contains("leak-name")) return;
    if (n.tagName === "MARK") { out.push(["leak", ""]); walk(n); return; }
    const kind = {tok: "tok", ws: "ws", ctl: "ctl", "bad-byte": "bad"}[n.className];
    out.push([kind || "?", n.textContent]);
  });
  walk(pre);
  return out;
}"""


def test_random_hostile_outputs_read_back_exactly_from_the_page(browser: Any, tmp_path: Path) -> None:
    from tests.report.test_html import flatten

    run_dir, placed = run_with_texts(tmp_path / "fuzz", random_texts(24, seed=13))
    out = write_report([run_dir], tmp_path / "report.html")
    p = Page(browser, out)
    n_leaks = 0
    for case_id in sorted({c for c, _ in placed}):
        box = p.open_case(0, case_id)
        for sample in box.locator(".sample").all():
            index = int(sample.locator(".shead b").inner_text().split("#")[1].split()[0])
            pieces = sample.locator("pre.raw").evaluate(_READ_BACK)
            n_leaks += sum(kind == "leak" for kind, _ in pieces)
            segs = [text if kind == "" else [kind, text] for kind, text in pieces if kind != "leak"]
            assert flatten(segs) == placed[(case_id, index)]
    assert n_leaks > 0  # the scorer found leaks in them and the page marked them
    assert p.page.evaluate("window.__pwned") is None
    assert p.page.locator("main img:not(.plot), main script, main style, [onerror]").count() == 0
    p.assert_offline_and_clean()


def test_history_page_over_five_runs_in_chromium(browser: Any, tmp_path: Path) -> None:
    """``report runs/ --history`` over 5 recorded runs: renders offline with no console error, its
    charts drawn, its links opening each run's own report."""
    from leader_eval.report.history import write_history
    from tests.corpus.report_runs import history_runs

    history_runs(tmp_path / "runs")
    out, history = write_history([tmp_path / "runs"], tmp_path / "runs" / "history.html")
    assert len(history.entries) == 5 and history.notes == []
    p = Page(browser, out)
    page = p.page
    rows = page.locator("table.history tbody tr")
    expect(rows).to_have_count(5)  # 2 judged against main, 3 never gated
    charts = page.locator("svg.chart")
    assert charts.count() >= 4 and charts.first.is_visible()
    box = charts.first.bounding_box()
    assert box["width"] > 200 and box["height"] > 100
    assert page.locator("svg.chart circle.point").count() >= 5
    assert "fail" in page.locator('section[data-baseline="main"] table.history').inner_text()
    p.assert_offline_and_clean()
    page.locator("table.history a").first.click()
    expect(page.locator("table.summary").first).to_be_attached()  # the run's own report opened
    assert page.url.endswith("/report.html")
    p.assert_offline_and_clean()  # the run's report too
    page.screenshot(path=str(SCREENSHOTS / "leader-eval-history.png"), full_page=True)
    page.close()
