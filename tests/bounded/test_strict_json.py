"""The one strict JSON decoder that model outputs, judge verdicts and data files are read with."""

from __future__ import annotations

import pytest

from leader_eval.bounded.strict_json import DECODER, STRICT_DECODER


@pytest.mark.parametrize("text", ['{"verdict": "pass", "verdict": "fail"}', '{"a": {"b": 1, "b": 1}}'])
def test_a_key_given_twice_is_not_read(text: str) -> None:
    with pytest.raises(ValueError, match="given twice"):
        STRICT_DECODER.decode(text)
    assert isinstance(DECODER.decode(text), dict)  # the lenient reading keeps the last


@pytest.mark.parametrize("text", ['{"score": NaN}', "[Infinity]", '{"x": -Infinity}'])
def test_nan_and_infinity_are_not_json(text: str) -> None:
    for decoder in (STRICT_DECODER, DECODER):
        with pytest.raises(ValueError, match="non-standard JSON constant"):
            decoder.decode(text)
