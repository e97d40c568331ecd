"""Seeds are derived, never drawn in sampling order: the same (run seed, case, index) gives the
same seed in any order, subset, shard or resumption."""

from __future__ import annotations

from leader_eval.sampling.keys import derive_seed


def test_seed_depends_only_on_run_seed_case_and_index() -> None:
    a = derive_seed(7, "case_a", 0)
    assert a == derive_seed(7, "case_a", 0)
    assert len({derive_seed(7, "case_a", i) for i in range(50)}) == 50
    assert a != derive_seed(8, "case_a", 0) and a != derive_seed(7, "case_b", 0)


def test_a_samples_key_keeps_each_parameters_type_and_value() -> None:
    """Keys are content addresses: parameters that json writes apart (1, 1.0, True; 0.0 and -0.0;
    a stop list or tuple alike) give the keys their own encoding gives, whatever was keyed before."""
    import hashlib
    import json

    from leader_eval.sampling.backends.base import SamplingParams
    from leader_eval.sampling.keys import key_prefix, seed_key
    from leader_eval.types import Prompt

    def by_hand(params: SamplingParams) -> str:
        h = hashlib.sha256(b"m\0text:say hi")
        h.update(b"\0" + json.dumps(params.to_dict(), sort_keys=True).encode() + b"\x007")
        return h.hexdigest()[:32]

    prompt = Prompt(text="say hi", token_ids=None, messages=[])
    cases = [
        SamplingParams(1.0, 16, 1.0, ()),
        SamplingParams(1, 16, 1.0, ()),
        SamplingParams(True, 16, 1, ("a",)),
        SamplingParams(1.0, 16, 1.0, ["<s>"]),  # type: ignore[arg-type]
        SamplingParams(1.0, 16, 1.0, ("<s>",)),
        SamplingParams(0.0, 16, 1.0, ()),
        SamplingParams(-0.0, 16, 1.0, ()),  # equal to 0.0, written "-0.0"
    ]
    keys = [seed_key(key_prefix("m", prompt, p), 7) for p in cases + cases[::-1]]
    assert keys == [by_hand(p) for p in cases + cases[::-1]]
    assert len(set(keys)) == 6  # the list and the tuple stop write alike; 1 and 1.0 do not, nor 0.0 and -0.0
