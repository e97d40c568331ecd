"""An episode through the Tinker backend: each step's transcript is rendered by the base model's
own chat template (the renderer's job) and sent as token ids.

The sampling client is the test double of ``tests/sampling/backends/test_tinker.py`` (the Tinker API cannot
be reached from here); it answers with what the embedded SmolLM2 samples for the ids it is sent,
and records every request.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from leader_eval.runs.evaluate import run
from leader_eval.runs.options import RunOptions
from tests.support.episodes import EPISODE_SUITE, write_repo
from tests.support.tinker import (
    CHECKPOINT,
    FakeSamplingClientDouble,
    make_backend,
)

pytestmark = pytest.mark.model


def test_tinker_renders_each_step_with_its_template(smol_tokenizer_dir: Path, embedded_sampler, tmp_path: Path) -> None:
    # two steps whatever the model does: only a (never expected) UI click would end it early
    text = EPISODE_SUITE.replace("  max_steps: 3\n", "  max_steps: 2\n").replace(
        "      end: {on_no_call: false}\n",
        "      end: {on_no_call: false, terminal_tools: [click_ui]}\n      transcript: messages\n",
        1,
    )
    suite = write_repo(tmp_path, text)
    double = FakeSamplingClientDouble(embedded_sampler)
    backend = make_backend(smol_tokenizer_dir, double)
    out = tmp_path / "run"
    options = RunOptions(
        model=CHECKPOINT, case_ids=["announce"], samples=1, max_tokens=8, seed=3, out=out, cache=False, progress=False
    )
    run(suite, options, backend=backend)
    from leader_eval.store.run_store import read_steps

    steps = sorted((r for s in read_steps(out).values() for r in s), key=lambda r: r["step"])
    assert [s["step"] for s in steps] == [0, 1] and all(s["mode"] == "messages" for s in steps)
    first, second = steps
    sent = second["prompt"]["messages"]
    n_tool = len(first["calls"])
    assert sent[len(sent) - 1 - n_tool]["role"] == "assistant"
    assert [m["role"] for m in sent[len(sent) - n_tool :]] == ["tool"] * n_tool
    # what the service got for step 2: the template's rendering of exactly these messages, as ids
    expected = backend.apply_chat_template(sent, None)
    assert expected.text == second["prompt"]["text"]
    assert double.calls[-1].prompt.to_ints() == expected.token_ids
