"""A suite's stress requirements (``gate: stress:``) run from pytest with ``--le-stress``: one
``suite.yaml::stress`` item sweeps the lengths the requirements name with the session's sampling
options, and fails when a requirement is not met; without ``--le-stress`` it is skipped, never
passed. The collapse is a recorded sweep, replayed through ``--le-model replay:``; the error rule
runs on a flaky server's test double."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.studies.test_stress import RECALL

pytest_plugins = ["pytester"]

REQUIREMENT = "\ngate:\n  stress:\n    - at: 2500\n      min: {score: 0.9}\n"


def _suite(where: Path) -> Path:
    shutil.copytree(RECALL.parent / "templates", where / "templates")
    path = where / "recall.yaml"
    path.write_text(RECALL.read_text(encoding="utf-8") + REQUIREMENT, encoding="utf-8")
    return path


def test_a_collapsed_sweep_fails_its_declared_floor_under_pytest(pytester: pytest.Pytester, local_backend: Any) -> None:
    from leader_eval.studies.stress import stress
    from tests.studies.test_stress import ScriptedBackend

    path = _suite(pytester.path)
    # the recording: a sweep of the requirement's length on a model that never answers (the
    # embedded tokenizer and template with a canned reply: a test double of the model, named so)
    recorded = pytester.path / "recorded"
    stress(
        path, backend=ScriptedBackend(local_backend, "I am not sure."), tokens=2500, steps=[2500], samples=2,
        seed=0, out=recorded, plot=False, progress=False, cache=False,
    )  # fmt: skip
    common = ["recall.yaml::stress", "-p", "no:cacheprovider", "--le-model", f"replay:{recorded}"]
    common += [f"--rootdir={pytester.path}"]

    skipped = pytester.runpytest_subprocess(*common, "-rs")
    assert skipped.ret == pytest.ExitCode.OK and "1 skipped" in skipped.stdout.str(), skipped.stdout.str()
    assert "run with --le-stress" in skipped.stdout.str()

    res = pytester.runpytest_subprocess(*common, "--le-stress")
    text = res.stdout.str() + res.stderr.str()
    assert res.ret == pytest.ExitCode.TESTS_FAILED, text
    assert "FAILED recall.yaml::stress" in text, text
    assert "FAIL: 1 of 1 stress requirement(s) not met" in text and "against the floor 0.9" in text
    assert "Traceback" not in text
    # the sweep judged exactly the length the requirement names, in the session's run directory
    (sweep,) = (pytester.path / "runs").glob("*__stress*/stress.json")
    judged = json.loads(sweep.read_text(encoding="utf-8"))
    assert judged["steps"] == [2500] and {v["n_scored"] for v in judged["variants"]} == {2}


#: a model that answers right, except that every sample but the first of a long prompt ends in a
#: sampler error (a test double of a flaky server, named as such)
FLAKY_CONFTEST = f"""
import sys
sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})
import leader_eval.pytest_plugin.items as items
from leader_eval.sampling.backends import resolve_backend
from leader_eval.sampling.backends.base import Completion
from tests.studies.test_stress import ScriptedBackend

ANSWER = '{{"tool": "send_message_to_chat", "arguments": {{"message": "The key is under the blue pot; use the north barn."}}}}'


class FlakyServerDouble(ScriptedBackend):
    async def sample(self, request):
        n = request.prompt.n_tokens or 0
        return [
            Completion("", [], None, error=ERROR) if n > 2000 and i > 0
            else Completion(self.answer, [1], "stop", prompt_tokens=n, completion_tokens=1)
            for i, _ in enumerate(request.seeds)
        ]


items.resolve_backend = lambda sampling: FlakyServerDouble(resolve_backend("local:smollm2"), ANSWER)
"""


@pytest.mark.parametrize(
    "error",
    [
        "HTTP 504: gateway timeout",
        # a rate limit that mentions tokens is a sampler error, not the context overflow a sweep measures
        "HTTP 429: too many tokens per minute",
    ],
)
def test_a_sweep_whose_samples_errored_fails_under_pytest_even_when_its_floor_holds(
    pytester: pytest.Pytester, error: str
) -> None:
    _suite(pytester.path)
    pytester.makeconftest(f"ERROR = {error!r}\n" + FLAKY_CONFTEST)
    res = pytester.runpytest_subprocess(
        "recall.yaml::stress", "-p", "no:cacheprovider", "--le-seed=0", "--le-samples=3", "--le-stress",
        f"--rootdir={pytester.path}",
    )  # fmt: skip
    text = res.stdout.str() + res.stderr.str()
    # the one scored sample at 2500 passes the floor: only the error rule can fail the sweep, as
    # `leader-eval stress` does
    assert res.ret == pytest.ExitCode.TESTS_FAILED, text
    assert "FAILED recall.yaml::stress" in text and "samples errored" in text and "--le-max-error-rate" in text, text
    assert "Traceback" not in text


def test_a_stress_case_that_overflows_at_its_own_length_is_an_error_in_a_plain_session(
    pytester: pytest.Pytester,
) -> None:
    """Only a sweep measures running out of context: a case marked ``stress:`` whose prompt does
    not fit in an ordinary session was never measured, an error as it is to the CLI's gate."""
    _suite(pytester.path)
    pytester.makeconftest(
        "ERROR = 'HTTP 400: This model\\'s maximum context length is 2048 tokens'\n"
        + FLAKY_CONFTEST.replace("if n > 2000 and i > 0", "if i > 0")
    )
    res = pytester.runpytest_subprocess(
        "recall.yaml", "-p", "no:cacheprovider", "--le-seed=0", "--le-samples=3", "--le-allow-missing-golden",
        f"--rootdir={pytester.path}",
    )  # fmt: skip
    text = res.stdout.str() + res.stderr.str()
    assert res.ret != pytest.ExitCode.OK, text
    assert "samples errored" in text and "maximum context length" in text, text
