"""Peak memory of a 100-sample 40K-token stress run over the OpenAI-compatible backend (a script).

    python bench/bench_stress_memory.py [--tokens 40000] [--samples 100] [--latency-ms 50]

Starts the fixed-latency mock server (its own process: its memory is not ours), points the
OpenAI-compatible backend at it with the embedded SmolLM2 GGUF as tokenizer and chat template,
and runs ``leader_eval.studies.stress.stress`` for one case at one 40K-token length with 100 samples
(table, stress.json and stress.png included). Prints this process's peak RSS (target: under
500 MB) and checks that the run directory and the sample cache hold the 40K-token prompt once
(prompts.jsonl), never once per sample.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

TARGET_MB = 500.0


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KiB


def current_rss_mb() -> float:
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=40000)
    ap.add_argument("--samples", type=int, default=100)
    ap.add_argument("--latency-ms", type=float, default=50)
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="bench-stress-mem-"))
    os.environ["LEADER_EVAL_CACHE_DIR"] = str(tmp / "cache")  # a cache of our own, checked below

    from leader_eval.sampling.backends.local import embedded_model_path
    from leader_eval.sampling.backends.openai_compat import OpenAICompatBackend
    from leader_eval.studies.stress import format_stress_table, stress
    from tests.support.servers import start_mock_server

    root = Path(__file__).resolve().parents[1]
    answer = '{"tool": "send_message_to_chat", "arguments": {"message": "Ada takes planks, Bo nails, Cyd tests."}}'
    print(f"RSS after imports: {current_rss_mb():.0f} MB")
    with start_mock_server(latency_ms=args.latency_ms, content=answer) as server:
        backend = OpenAICompatBackend(
            server.base_url, "mock", gguf_path=embedded_model_path(), context_length=65536, max_concurrency=64
        )
        print(f"RSS with the tokenizer loaded: {current_rss_mb():.0f} MB")
        t = time.perf_counter()
        result = stress(
            root / "suites" / "leader_core.yaml",
            model=backend.model_id,
            tokens=args.tokens,
            steps=[args.tokens],
            case_ids=["assigns_owners"],
            samples=args.samples,
            seed=1,
            out=tmp / "run",
            depths=None,
            backend=backend,
            progress=False,
        )
        wall = time.perf_counter() - t
    print(format_stress_table(result))
    (v,) = result.variants
    run = result.out
    assert run is not None
    prompts = (run / "prompts.jsonl").read_text(encoding="utf-8").splitlines()
    samples = (run / "samples.jsonl").read_text(encoding="utf-8").splitlines()
    # a stretch of filler only the prompt holds, as it appears inside a JSON line
    probe = json.dumps(v.prompt.text[len(v.prompt.text) // 2 :][:300] if v.prompt else "")[1:-1]
    in_prompts = sum(probe in line for line in prompts)
    in_samples = sum(probe in line for line in samples)
    cache_files = list((tmp / "cache").glob("*.jsonl"))
    in_cache = sum(f.read_text(encoding="utf-8").count(probe) for f in cache_files)
    size = {p.name: p.stat().st_size for p in run.iterdir() if p.is_file()}
    peak = rss_mb()
    print(f"prompt {v.prompt_tokens} tokens, {args.samples} samples, {wall:.1f} s wall")
    print(f"run dir files (bytes): {size}")
    print(f"prompt stored: {in_prompts}x in prompts.jsonl ({len(prompts)} lines), {in_samples}x in samples.jsonl "
          f"({len(samples)} lines), {in_cache}x in the sample cache "
          f"({len(cache_files)} shards{'; evaluate.run wrote no cache' if not cache_files else ''})")  # fmt: skip
    ok_store = in_prompts == 1 and in_samples == 0 and in_cache == 0 and len(samples) == args.samples
    ok_rss = peak < TARGET_MB
    print(f"{'PASS' if ok_store else 'FAIL'}: the 40K-token prompt is stored once")
    print(f"{'PASS' if ok_rss else 'FAIL'}: peak RSS {peak:.0f} MB {'<' if ok_rss else '>='} {TARGET_MB:.0f} MB")
    return 0 if ok_store and ok_rss else 1


if __name__ == "__main__":
    sys.exit(main())
