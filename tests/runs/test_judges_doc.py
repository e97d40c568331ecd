"""docs/judges.md's examples run as written: the embedded model as leader and as judge."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import pytest

from leader_eval.runs import trusted

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "judges.md"


@pytest.mark.model  # one leader sample and its judgements on the embedded model
def test_the_judges_page_examples_run(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    assert len(blocks) >= 2 and "register_model_role(" in blocks[0] and "run(" in blocks[1]
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(trusted, "REGISTERED", trusted.Trusted())  # the page's registration stays here
    monkeypatch.setenv("LEADER_EVAL_CACHE_DIR", "off")
    namespace: dict[str, object] = {}
    for i, code in enumerate(blocks):
        exec(compile(code, f"{DOC}:block{i + 1}", "exec"), namespace)
    printed = capsys.readouterr().out.splitlines()
    # the page prints the metric's value, verdicts, judge errors and gated: the embedded judge
    # answers under its grammar, so its one reply is a verdict, not an error
    value, n_judged, n_errors, gated = printed[0].split()
    assert float(value) in (0.0, 1.0)  # one pass/fail verdict
    assert (n_judged, n_errors, gated) == ("1", "0", "False")
    assert "no calibration record" in printed[1]
