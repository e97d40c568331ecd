"""Time and size of the HTML report of a run (a script, not a test).

    python bench/bench_report.py [--n 1000 5000 20000] [--chars 2048] [--repeat 3]

Builds a run directory of N samples of about ``--chars`` characters each over the 22 cases of the
frozen leader_core suite in tests/corpus/report_runs (the texts are the recorded outputs of the
embedded model, padded with chat-like sentences, some with a ``[NO CHAT]`` marker or a special
token so that leak spans are found), scores it with the real scorer (not timed), then times
``write_run_report`` (read the stored records + render + write; best of ``--repeat``) and reports
the file size. Wall time suffers from other jobs on the machine; CPU time (this process) less so.
Target (issue 13): 1,000 samples of 2 KB in <= 2 s and <= 10 MB; beyond ``html.MAX_SAMPLES`` the
size stops growing with N.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from leader_eval.report import html as report_html  # noqa: E402
from leader_eval.report import write_run_report  # noqa: E402
from leader_eval.runs.evaluate import score_run  # noqa: E402
from leader_eval.store.run_store import RunDir  # noqa: E402
from leader_eval.suite.load import load_suite  # noqa: E402

FIXTURE = ROOT / "tests" / "corpus" / "report_runs"
PAD = [
    " Ada: the planks are cut, who carries them?",
    " Bo: I can take the north path before the rain.",
    " [09:14] Cyd: the miller says the stone is free after lunch.",
    " Dee: let us meet by the river at four.\n",
    "\tnotes: 12 planks, 40 stones, 30 sacks of lime.",
]


def build_run(dst: Path, n: int, chars: int) -> Path:
    suite = load_suite(FIXTURE / "suite" / "leader_core.yaml")
    src = FIXTURE / "s101"
    manifest = json.loads((src / "manifest.json").read_text(encoding="utf-8"))
    recorded = manifest["identity"]["cases"]
    template = next(iter(recorded.values()))
    manifest["identity"]["cases"] = {c.id: recorded.get(c.id, template) for c in suite.cases}
    dst.mkdir(parents=True)
    (dst / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    shutil.copy(src / "prompts.jsonl", dst / "prompts.jsonl")
    texts = [json.loads(line)["text"] for line in (src / "samples.jsonl").read_text(encoding="utf-8").splitlines()]
    ids = [c.id for c in suite.cases]
    with (dst / "samples.jsonl").open("w", encoding="utf-8") as f:
        for k in range(n):
            cid, index = ids[k % len(ids)], k // len(ids)
            text = texts[k % len(texts)].removesuffix("<|im_end|>")
            if k % 7 == 0:
                text += " [NO CHAT]"
            if k % 11 == 0:
                text += " <|im_start|>assistant"
            i = 0
            while len(text) < chars - 10:
                text += PAD[(k + i) % len(PAD)]
                i += 1
            rec = {"slot": f"{cid}#{index}", "case_id": cid, "index": index, "seed": k, "key": f"k{k}",
                   "outcome": "ok", "text": text[: chars - 10] + "<|im_end|>", "stop_reason": "stop",
                   "prompt_tokens": 900, "completion_tokens": chars // 4}  # fmt: skip
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")
    score_run(RunDir(dst), suite)
    return dst


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, nargs="+", default=[1000, 5000, 20000])
    ap.add_argument("--chars", type=int, default=2048)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    print(f"samples of {args.chars} chars; MAX_SAMPLES {report_html.MAX_SAMPLES}; best of {args.repeat}")
    print(f"{'samples':>8}  {'records MB':>10}  {'report s':>8}  {'CPU s':>6}  {'report MB':>9}  {'embedded':>8}")
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.n:
            run = build_run(Path(tmp) / f"run{n}", n, args.chars)
            records = sum(p.stat().st_size for p in run.iterdir()) / 1e6
            best = cpu = float("inf")
            for _ in range(args.repeat):
                t, c = time.perf_counter(), time.process_time()
                path = write_run_report(run)
                best, cpu = min(best, time.perf_counter() - t), min(cpu, time.process_time() - c)
            size = path.stat().st_size / 1e6
            embedded = min(n, report_html.MAX_SAMPLES)
            print(f"{n:>8}  {records:>10.1f}  {best:>8.2f}  {cpu:>6.2f}  {size:>9.2f}  {embedded:>8}")


if __name__ == "__main__":
    main()
