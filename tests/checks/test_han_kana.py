"""Passages of Han and kana (``checks/han_kana.py``): what the character-level rules compare."""

from __future__ import annotations

from leader_eval.checks import han_kana


def test_a_passage_runs_across_short_gaps_not_across_an_english_clause() -> None:
    text = "计划：张伟 (前端) builds the login page; 河上的桥 <br> ①还是断的，请用 escalate 工具 3 次🙂完成"
    streams = [han_kana.stream(m.group()) for m in han_kana.passages(text)]
    assert streams == ["计划张伟前端", "河上的桥还是断的请用工具次完成"]
    assert len(list(han_kana.passages("木" + "a" * 17 + "木"))) == 2  # a gap of GAP + 1 ends it


def test_iteration_marks_half_width_katakana_and_extension_b_are_characters() -> None:
    assert han_kana.stream("人々は ﾌﾟﾛｼﾞｪｸﾄ、𠀀𠀁。") == "人々はﾌﾟﾛｼﾞｪｸﾄ𠀀𠀁"


def test_offsets_map_stream_characters_back_to_the_passage() -> None:
    passage = "你 好，世界。再见"
    st = han_kana.stream(passage)
    at = han_kana.offsets(passage, range(len(st)))
    assert [passage[i] for i in at] == list(st)
    assert han_kana.offsets(passage, [2]) == [passage.index("世")]
