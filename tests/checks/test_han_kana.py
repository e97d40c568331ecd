"""Passages of Han and kana (``checks/han_kana.py``): what the character-level rules compare."""

from __future__ import annotations

from leader_eval.checks import han_kana


def test_a_passage_runs_across_punctuation_digits_and_blanks_not_across_a_latin_word() -> None:
    text = "计划：张伟 (前端) builds it; 河上的桥还是断的，我已经没有木板了。第２步 3 个人"
    streams = [han_kana.stream(m.group()) for m in han_kana.passages(8).finditer(text)]
    # every run of 8 or more is a candidate; the caller keeps those whose stream is that long
    assert streams == ["计划张伟前端", "河上的桥还是断的我已经没有木板了第步个人"]
    assert list(han_kana.passages(8).finditer("木a " * 1000)) == []  # no object per piece of a mixed flood


def test_iteration_marks_half_width_katakana_and_extension_b_are_characters() -> None:
    assert han_kana.stream("人々は ﾌﾟﾛｼﾞｪｸﾄ、𠀀𠀁。") == "人々はﾌﾟﾛｼﾞｪｸﾄ𠀀𠀁"


def test_offsets_map_stream_characters_back_to_the_passage() -> None:
    passage = "你 好，世界。再见"
    st = han_kana.stream(passage)
    at = han_kana.offsets(passage, range(len(st)))
    assert [passage[i] for i in at] == list(st)
    assert han_kana.offsets(passage, [2]) == [passage.index("世")]
