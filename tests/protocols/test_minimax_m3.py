"""``minimax_m3``: ``]<]minimax[>[``-separated calls whose objects and arrays are child elements,
leaves typed by the schema at their place."""

from __future__ import annotations

import time

import pytest

from leader_eval.protocols import NO_CALL_ERROR, NOT_ALONE_ERROR, parse_output

NS = "]<]minimax[>["
SCHEMA = {
    "post": {
        "type": "object",
        "properties": {
            "message": {"type": "string"},
            "n": {"type": "integer"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "meta": {"type": "object", "properties": {"id": {"type": "string"}}},
        },
    }
}


def _el(key: str, inner: str) -> str:
    return f"{NS}<{key}>{inner}{NS}</{key}>"


def _block(*invokes: str) -> str:
    return f"{NS}<tool_call>\n" + "".join(invokes) + f"{NS}</tool_call>"


def _invoke(name: str, *elements: str) -> str:
    return f'{NS}<invoke name="{name}">' + "".join(elements) + f"{NS}</invoke>\n"


CALL = _block(
    _invoke(
        "post",
        _el("message", "7"),
        _el("n", "7"),
        _el("tags", _el("item", "1") + _el("item", "x")),
        _el("meta", _el("id", "7") + _el("extra", "true")),
    )
)


def _parse(text: str):  # type: ignore[no-untyped-def]
    return parse_output(
        text, "minimax_m3", eot_tokens=("[e~[",), reasoning_tags=("<mm:think>", "</mm:think>"), tool_schemas=SCHEMA
    )


def test_nested_elements_are_typed_by_the_schema_at_their_place() -> None:
    r = _parse("</mm:think>" + CALL + "[e~[")
    assert r.strict_ok, r.error
    assert r.calls[0].arguments == {
        "message": "7",
        "n": 7,
        "tags": ["1", "x"],
        "meta": {"id": "7", "extra": True},  # no schema for "extra": JSON when it reads as JSON
    }
    assert r.visible_text == ""


def test_parallel_invokes_in_one_block() -> None:
    r = _parse(_block(_invoke("post", _el("n", "1")), _invoke("wait")))
    assert [(c.name, c.arguments) for c in r.calls] == [("post", {"n": 1}), ("wait", {})]


def test_an_empty_element_is_not_guessed_into_an_empty_object_or_array() -> None:
    # {} , [] and "" all render as nothing: the text stays text and the schema check reports it
    r = _parse(_block(_invoke("post", _el("n", ""), _el("tags", ""), _el("message", ""))))
    assert r.calls[0].arguments == {"n": "", "tags": "", "message": ""}


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("Sure. " + CALL, NOT_ALONE_ERROR),
        (CALL + " ok", "text after"),
        ("hi", NO_CALL_ERROR),
        (_block(), 'expected ]<]minimax[>[<invoke name="...">'),
        (_block(_invoke("post", _el("n", "1")[:-3])), "expected ]<]minimax[>[</n>"),
        (_block(_invoke("post", f"{NS}<n>1{NS}</m>")), "expected ]<]minimax[>[</n>"),
        (f'{NS}<tool_call>\n{NS}<invoke name="post">{NS}<n>1', "is not closed"),
        (_block(_invoke("post", _el("n", "1"), _el("n", "2"))), "given twice"),
        (_block(_invoke("post", _el("meta", _el("a", "1") + _el("a", "2")))), "element 'a' given twice"),
        (_block(_invoke("post", _el("n", "1") + "x")), "or ]<]minimax[>[</invoke>"),
        (_block(_invoke("post", _el("n", _el("a", "1") + "x"))), "expected ]<]minimax[>[</n>"),
        (_block(_invoke("p", "".join(f"{NS}<a>" for _ in range(40)) + "1")), "nested more than"),
    ],
)
def test_strict_refuses_what_is_not_exactly_the_format(text: str, reason: str) -> None:
    r = _parse(text)
    assert not r.strict_ok and not r.calls
    assert r.error is not None and reason in r.error


def test_lenient_finds_invokes_without_the_block() -> None:
    r = _parse("Ok " + _invoke("post", _el("n", "3")))
    assert [c.arguments for c in r.lenient_calls] == [{"n": 3}]


@pytest.mark.parametrize(
    "text",
    [
        f'{NS}<invoke name="a">' * 60_000,
        f'{NS}<invoke name="a">{NS}<b>' * 50_000,
        f'{NS}<tool_call>{NS}<invoke name="a">' + f"{NS}<b>" * 100_000,
        f'{NS}<tool_call>{NS}<invoke name="a">' + _el("b", "v") * 40_000,
        NS * 100_000,
    ],
)
def test_hostile_inputs_stay_fast(text: str) -> None:
    t = time.perf_counter()
    assert not _parse(text).strict_ok
    assert time.perf_counter() - t < 1.0
