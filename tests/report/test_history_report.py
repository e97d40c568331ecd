"""The history page (``report.history``): per suite and baseline, a table led by score, charts
with intervals drawn inline, relative links to each run's report, no script and nothing loaded
from anywhere. The same page in Chromium: tests/report/test_browser.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

from leader_eval.cli.app import main
from leader_eval.report.history import write_history
from tests.corpus.report_runs import HOSTILE_LABEL, history_runs


def _page(tmp_path: Path) -> tuple[Path, str]:
    history_runs(tmp_path / "runs")
    out, _ = write_history([tmp_path / "runs"], tmp_path / "runs" / "history.html")
    return out, out.read_text(encoding="utf-8")


def test_groups_by_suite_and_baseline_with_the_verdicts(tmp_path: Path) -> None:
    _, html = _page(tmp_path)
    groups = re.findall(r'<section class="group" data-suite="([^"]*)" data-baseline="([^"]*)"', html)
    assert groups == [("leader_core", "main"), ("leader_core", "not gated")]
    main_group = html.split('data-baseline="main"')[1].split("</section>")[0]
    assert "2 runs: 1 fail, 1 pass" in main_group and "(score)" in main_group


def test_every_table_leads_with_score(tmp_path: Path) -> None:
    _, html = _page(tmp_path)
    heads = re.findall(r'<table class="history"><thead><tr><th>([^<]*)</th>', html)
    assert heads == ["score [95% CI]", "score [95% CI]"]


def test_charts_over_time_and_checkpoints_are_inline_svg_with_intervals(tmp_path: Path) -> None:
    _, html = _page(tmp_path)
    group = html.split('data-baseline="not gated"')[1]
    assert "score over time" in group and "score over checkpoints" in group  # labels step100..step500
    svg = group.split("<svg")[1].split("</svg>")[0]
    assert svg.count('class="point"') == 3  # the three runs never gated
    assert svg.count('stroke-width="2"') == 3  # each with its interval bar
    assert "<script" not in html.split("</head>")[1]
    assert "script-src 'none'" in html and "http://" not in html.replace("http://www.w3.org/2000/svg", "")


def test_links_to_each_runs_report_are_relative_and_resolve(tmp_path: Path) -> None:
    out, html = _page(tmp_path)
    hrefs = re.findall(r'<a href="([^"]*)"', html)
    assert len(hrefs) == 5 and all(not h.startswith("/") and "://" not in h for h in hrefs)
    assert all((out.parent / h).is_file() for h in hrefs)


def test_a_hostile_label_is_text(tmp_path: Path) -> None:
    runs = history_runs(tmp_path / "runs", n=1)
    manifest = json.loads((runs[0] / "manifest.json").read_text())
    manifest["label"] = HOSTILE_LABEL
    (runs[0] / "manifest.json").write_text(json.dumps(manifest))
    out, _ = write_history([tmp_path / "runs"], tmp_path / "h.html")
    html = out.read_text()
    assert "<img src=x" not in html and "&lt;img src=x" in html


def test_the_command_writes_the_page_into_the_folder_and_notes_a_bad_run(
    tmp_path: Path, capsys: object, monkeypatch: object
) -> None:
    history_runs(tmp_path / "runs", n=2)
    (tmp_path / "runs" / "bad").mkdir()
    (tmp_path / "runs" / "bad" / "manifest.json").write_bytes(b"\xff\xfe")
    assert main(["report", str(tmp_path / "runs"), "--history"]) == 0
    out, err = capsys.readouterr()  # type: ignore[attr-defined]
    assert f"history: {tmp_path / 'runs' / 'history.html'} (2 runs)" in out
    (note,) = err.splitlines()
    assert note.startswith("note: ") and "bad" in note and "Traceback" not in err


def test_a_run_directory_named_like_a_url_links_as_a_relative_path(tmp_path: Path) -> None:
    runs = history_runs(tmp_path / "runs", n=1)
    odd = runs[0].rename(tmp_path / "runs" / "javascript:alert(1)#x?y")
    out, _ = write_history([tmp_path / "runs"], tmp_path / "runs" / "h.html")
    (href,) = re.findall(r'<a href="([^"]*)"', out.read_text())
    assert href == "./javascript%3Aalert%281%29%23x%3Fy/report.html"
    assert (odd / "report.html").is_file()
