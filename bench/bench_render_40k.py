"""Render + tokenize a 40K-token stress scaffold (a script, not a test).

    python bench/bench_render_40k.py [--tokens 40000] [--repeat 7]

Builds the 40K-token variant of leader_core's ``assigns_owners`` (filler fitted with the embedded
SmolLM2 tokenizer, vocabulary only), then times what every run does per prompt: render the
scaffold (jinja2), apply the model's chat template and tokenize the result with llama.cpp's
tokenizer. Target: under 0.5 s. Also prints how long fitting a 40K prompt to the token takes
(it tokenizes the full prompt several times) and the share of the time spent tokenizing.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from leader_eval.sampling.backends.local import LocalBackend, embedded_model_path
from leader_eval.studies.stress import build_variants
from leader_eval.suite.load import load_suite
from leader_eval.suite.render import render_messages

TARGET_S = 0.5


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=40000)
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()

    root = Path(__file__).resolve().parents[1]
    suite = load_suite(root / "suites" / "leader_core.yaml")
    case = next(c for c in suite.cases if c.id == "assigns_owners")
    backend = LocalBackend(embedded_model_path(), "local:smollm2")

    t = time.perf_counter()
    (v,) = build_variants(suite, [case], backend, [args.tokens])
    fit_s = time.perf_counter() - t
    assert v.case is not None and v.prompt is not None
    tools = [tool.to_openai() for tool in suite.tools]

    render, template, tokenize, total = [], [], [], []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        messages = render_messages(suite, v.case)
        t1 = time.perf_counter()
        prompt = backend.apply_chat_template(messages, tools)  # chat template + tokenize
        t2 = time.perf_counter()
        backend.tokenize(prompt.text)
        t3 = time.perf_counter()
        render.append(t1 - t0)
        template.append(t2 - t1)
        tokenize.append(t3 - t2)
        total.append(t2 - t0)
        assert len(prompt.token_ids or []) == v.prompt_tokens

    med = statistics.median
    print(f"prompt: {v.prompt_tokens} tokens (target {args.tokens}), {len(v.prompt.text):,} chars, "
          f"{v.n_events} events ({v.n_filler} filler)")  # fmt: skip
    print(f"render scaffold (jinja2):             median {med(render) * 1000:7.1f} ms")
    print(f"chat template + tokenize (llama.cpp): median {med(template) * 1000:7.1f} ms")
    print(f"  of which tokenize alone:            median {med(tokenize) * 1000:7.1f} ms")
    print(f"render + tokenize, total:             median {med(total) * 1000:7.1f} ms  (min {min(total) * 1000:.1f} ms)")
    print(f"fit filler to {args.tokens} tokens exactly:   {fit_s:7.2f} s (one-off per variant)")
    ok = med(total) < TARGET_S
    print(f"{'PASS' if ok else 'FAIL'}: render + tokenize {med(total):.3f} s {'<' if ok else '>='} {TARGET_S} s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
