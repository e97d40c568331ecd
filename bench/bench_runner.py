"""Harness overhead of leader-eval against a fixed-latency OpenAI-compatible server (a script, not a test).

    python bench/bench_runner.py                          # 2,000 cases x 1 sample, C=128, 200 ms, 3 reps
    python bench/bench_runner.py --cases 200 --samples 10 # the same 2,000 samples as 200 cases x 10
    python bench/bench_runner.py --floor /tmp/peer/baseline_client.py   # + the peers' aiohttp floor
    python bench/bench_runner.py --via api,cli            # also through `leader-eval run` (the CLI)
    python bench/bench_runner.py --port 8765              # a mock already running (e.g. the peers kit's)
    python bench/bench_runner.py --once --base-url http://127.0.0.1:8765/v1   # one run, one JSON line
    python bench/bench_runner.py --tree before=/tmp/main-copy --tree after=.   # two trees side by side

What is measured is what the peers kit (``../shared/peers``) measures for inspect-ai and
promptfoo: a whole harness process (interpreter start, imports, suite loading and validation,
rendering, sampling, scoring, recording, aggregation), run as a child. Its CPU time (user + sys)
and peak RSS come from ``wait4`` (what ``/usr/bin/time -v`` reports), its wall time from this
parent, and the server span (first request in to last response out) from the mock's
``GET /stats``. Ideal = samples / C x latency, as the peers count it (3.125 s for 2,000 at 128
and 200 ms; whole rounds would be 16 x 0.2 = 3.2 s). Configurations run interleaved, rep by
rep, so load drift on a shared machine hits them alike; the 1-minute load average before each
run is printed with it.

The suite is written once by this parent (as the peers generate their task / CSV once) and
loaded by the child: ``cases`` one-line user prompts ``Say hi. (sample i)``, each expecting a
reply that contains ``hi`` and no tool call, ``samples`` samples per case. 2,000 x 1 is the
like-for-like comparison (the peers send 2,000 distinct one-line samples); fewer cases with
more samples each is the usual shape of a leader-eval suite (k samples per case for pass^k and
confidence intervals) and costs less per sample (one render and one scorer per case).

``--tree LABEL=PATH`` (repeatable): measure the harness of each source tree (its own
``bench/bench_runner.py --once`` and CLI, ``PYTHONPATH`` and working directory the tree), every
configuration of every tree interleaved rep by rep in one run, against one mock and one floor:
a before/after comparison that load drift cannot bias. Without it, this tree alone. Each tree's
package is byte-compiled first (``compileall``; ``--no-compile`` skips it), as an installed
package is: where ``PYTHONDONTWRITEBYTECODE`` is set and a tree has no ``__pycache__``, every
child would otherwise compile the whole package from source (~0.15 s of CPU per run).

``--via api``: ``evaluate.run`` with an ``OpenAICompatBackend`` in chat mode (the peers also
POST ``/v1/chat/completions``), ``max_concurrency`` = C. ``--via cli``: ``leader-eval run SUITE
--model openai:URL#x --api-mode chat --concurrency C --no-cache``. The sample cache is off in
both (``--no-cache`` / ``RunOptions(cache=False)`` and ``LEADER_EVAL_CACHE_DIR=off``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def write_suite(path: Path, cases: int, samples: int) -> Path:
    """A suite of one-line cases whose right answer is a reply containing ``hi`` (no tool call)."""
    lines = [
        "name: bench_hi",
        "description: harness-overhead benchmark; one-line prompts, expected reply contains 'hi'",
        "protocol: openai",
        f"sampling: {{temperature: 0.0, max_tokens: 16, samples: {samples}, top_p: 1.0}}",
        "scaffold:",
        "  messages:",
        '    - {role: user, content: "Say hi. (sample {{ i }})"}',
        "tools: []",
        "hard_fail: []",
        "cases:",
    ]
    expect = "{no_call: true, require: ['hi']}"
    lines += [f"  - {{id: c{i:05d}, vars: {{i: {i}}}, expect: {expect}}}" for i in range(cases)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


# --- child: one harness run through the library API -------------------------------------------


def once(base_url: str, suite_path: Path, concurrency: int, out: Path) -> dict[str, Any]:
    os.environ["LEADER_EVAL_CACHE_DIR"] = "off"
    cpu0, t0 = _cpu(), time.perf_counter()
    from leader_eval.runs.evaluate import run
    from leader_eval.runs.options import RunOptions
    from leader_eval.sampling.backends.openai_compat import OpenAICompatBackend

    cpu1, t1 = _cpu(), time.perf_counter()
    backend = OpenAICompatBackend(base_url, "x", mode="chat", max_concurrency=concurrency, api_key_env="BENCH_NO_KEY")
    options = RunOptions(
        model=f"openai:{base_url}#x", seed=1, out=out, concurrency=concurrency, progress=False, cache=False
    )
    result = run(suite_path, options, backend=backend)
    cpu2, t2 = _cpu(), time.perf_counter()
    stats = result.stats
    return {
        "tool": "leader-eval",
        "samples": len(result.samples),
        "correct": sum(1 for s in result.scores if s.passed),
        "errors": stats.errors if stats else None,
        "sampling_wall_s": round(stats.wall_s, 3) if stats else None,  # first request task to last record
        "eval_wall_s": round(t2 - t1, 3),  # run(): load + render + sample + score + record + aggregate
        "import_s": round(t1 - t0, 3),
        "cpu_import_s": round(cpu1 - cpu0, 3),
        "cpu_run_s": round(cpu2 - cpu1, 3),
    }


def _cpu() -> float:
    t = os.times()
    return t.user + t.system


# --- parent: spawn, measure, compare ----------------------------------------------------------


def _http(url: str, method: str = "GET") -> Any:
    req = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None)
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())


def run_child(cmd: list[str], root_url: str, env: dict[str, str], cwd: Path = ROOT) -> dict[str, Any]:
    """Run ``cmd``; its own rusage via ``wait4`` (CPU, peak RSS), wall time, and the server's view."""
    _http(root_url + "/reset", "POST")
    srv_cpu0 = _http(root_url + "/stats")["cpu_s"]
    load = os.getloadavg()[0]
    with tempfile.TemporaryFile() as fo, tempfile.TemporaryFile() as fe:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=fo, stderr=fe, stdin=subprocess.DEVNULL, env=env, cwd=cwd)
        _, status, ru = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        fo.seek(0)
        fe.seek(0)
        out, err = fo.read().decode(), fe.read().decode()
    st = _http(root_url + "/stats")
    rec: dict[str, Any] = {
        "rc": proc.returncode,
        "wall_s": round(wall, 3),
        "cpu_s": round(ru.ru_utime + ru.ru_stime, 3),
        "user_s": round(ru.ru_utime, 3),
        "sys_s": round(ru.ru_stime, 3),
        "rss_mb": round(ru.ru_maxrss / 1024, 1),
        "server_requests": st["requests"],
        "server_max_inflight": st["max_inflight"],
        "server_span_s": st["span_s"],
        "server_cpu_s": round(st["cpu_s"] - srv_cpu0, 3),
        "load1_before": round(load, 2),
    }
    lines = [ln for ln in out.splitlines() if ln.startswith("{")]
    if lines:
        rec["tool"] = json.loads(lines[-1])
    if proc.returncode != 0:
        rec["stderr_tail"] = err[-2000:]
    return rec


def summarize(
    name: str, recs: list[dict[str, Any]], n: int, ideal: float, floor: list[dict[str, Any]] | None = None
) -> str:
    def med(key: str, rows: list[dict[str, Any]] = recs) -> float:
        return statistics.median(float(r[key]) for r in rows)

    wall, span, cpu, rss = med("wall_s"), med("server_span_s"), med("cpu_s"), med("rss_mb")
    walls = ", ".join(f"{r['wall_s'] / ideal:.2f}" for r in recs)
    reps = ", ".join(f"{r['server_span_s']:.2f}" for r in recs)
    cpus = ", ".join(f"{r['cpu_s'] / n * 1000:.2f}" for r in recs)
    loads = ", ".join(f"{r['load1_before']:.1f}" for r in recs)
    inflight = max(r["server_max_inflight"] for r in recs)
    # the acceptance reads against the floor of the same run: wall/ideal minus the
    # floor's, CPU per sample as a multiple of the floor's
    vs = f"{(wall - med('wall_s', floor)) / ideal:+.2f} | {cpu / med('cpu_s', floor):.2f}x" if floor else "- | -"
    return (
        f"| {name} | {wall:.2f} | {wall / ideal:.2f} | {span:.2f} | {span / ideal:.2f} | {cpu:.2f} | "
        f"{cpu / n * 1000:.2f} | {vs} | {rss:.0f} | {inflight} | {walls} | {reps} | {cpus} | {loads} |"
    )


def _trees(specs: list[str] | None) -> list[tuple[str, Path]]:
    """``LABEL=PATH`` specs as (label, tree); none: this tree, unlabelled."""
    if not specs:
        return [("", ROOT)]
    out = []
    for spec in specs:
        label, sep, path = spec.partition("=")
        tree = Path(path).resolve()
        if not sep or not label or not (tree / "leader_eval").is_dir():
            raise SystemExit(f"--tree {spec!r}: expected LABEL=PATH of a source tree holding leader_eval/")
        out.append((label, tree))
    return out


def _harness_cmd(via: str, tree: Path, suite: Path, out: Path, base_url: str, c: int) -> list[str]:
    """The child command for ``via`` in ``tree`` (its own ``--once`` and CLI, either layout)."""
    if via == "api":
        own = tree / "bench" / "bench_runner.py"
        script = own if own.is_file() else Path(__file__).resolve()
        return [sys.executable, str(script), "--once", "--base-url", base_url,
                "--suite", str(suite), "--out", str(out), "-c", str(c)]  # fmt: skip
    if via == "cli":
        cli = "leader_eval.cli.app" if (tree / "leader_eval" / "cli" / "app.py").is_file() else "leader_eval.cli"
        return [sys.executable, "-m", cli, "run", str(suite), "--model", f"openai:{base_url}#x",
                "--api-mode", "chat", "--api-key-env", "BENCH_NO_KEY", "--concurrency", str(c),
                "--no-cache", "-q", "--seed", "1", "--out", str(out)]  # fmt: skip
    raise SystemExit(f"--via: unknown {via!r} (api, cli)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", type=int, default=2000)
    ap.add_argument("--samples", type=int, default=1, help="samples per case")
    ap.add_argument("--concurrency", "-c", type=int, default=128)
    ap.add_argument("--latency-ms", type=float, default=200.0, help="latency of the mock (must match --port's)")
    ap.add_argument("--port", type=int, help="use a mock already listening on 127.0.0.1:PORT")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--via", default="api", help="comma-separated: api (evaluate.run), cli (leader-eval run)")
    ap.add_argument("--floor", help="the peers kit's baseline_client.py: also run its aiohttp floor")
    ap.add_argument("--tree", action="append", metavar="LABEL=PATH", help="a source tree to measure (repeatable)")
    ap.add_argument("--no-compile", action="store_true", help="do not byte-compile the trees first")
    ap.add_argument("--json", help="append every run as one JSON line to this file")
    ap.add_argument("--once", action="store_true", help="child mode: one run via the API, one JSON line")
    ap.add_argument("--base-url", help="(--once) the server's /v1 URL")
    ap.add_argument("--suite", help="(--once) suite file (default: written from --cases/--samples)")
    ap.add_argument("--out", help="(--once) run directory (default: a temporary one)")
    a = ap.parse_args()

    if a.once:
        if not a.base_url:
            ap.error("--once needs --base-url")
        with tempfile.TemporaryDirectory(prefix="bench-runner-") as tmp:
            suite = Path(a.suite) if a.suite else write_suite(Path(tmp) / "suite.yaml", a.cases, a.samples)
            out = Path(a.out) if a.out else Path(tmp) / "run"
            shutil.rmtree(out, ignore_errors=True)
            print(json.dumps(once(a.base_url, suite, a.concurrency, out)), flush=True)
        return 0

    sys.path.insert(0, str(ROOT))
    server = None
    if a.port:
        root_url = f"http://127.0.0.1:{a.port}"
    else:
        from tests.support.servers import start_mock_server

        server = start_mock_server(latency_ms=a.latency_ms)
        root_url = server.url
    base_url = root_url + "/v1"
    n, c = a.cases * a.samples, a.concurrency
    ideal = n / c * a.latency_ms / 1000.0
    trees = _trees(a.tree)
    if not a.no_compile:
        for _, tree in trees:
            subprocess.run([sys.executable, "-m", "compileall", "-q", str(tree / "leader_eval")], check=True)
    try:
        with tempfile.TemporaryDirectory(prefix="bench-runner-") as tmp:
            suite, out = write_suite(Path(tmp) / "suite.yaml", a.cases, a.samples), Path(tmp) / "run"
            # (name, command, working directory and PYTHONPATH)
            configs: list[tuple[str, list[str], Path]] = []
            floor_name = "baseline-aiohttp (peers' floor)"
            if a.floor:
                floor = [sys.executable, a.floor, "--lib", "aiohttp", "--base-url", base_url,
                         "-n", str(n), "-c", str(c)]  # fmt: skip
                configs.append((floor_name, floor, ROOT))
            for label, tree in trees:
                for via in a.via.split(","):
                    name = " ".join(x for x in ("leader-eval", label, via, f"{a.cases}x{a.samples}") if x)
                    configs.append((name, _harness_cmd(via, tree, suite, out, base_url, c), tree))
            print(
                f"N={n} C={c} latency={a.latency_ms:g} ms ideal={ideal:.3f} s; "
                f"load average {os.getloadavg()}; {os.cpu_count()} CPUs; "
                + "; ".join(f"{label or 'tree'} {tree}" for label, tree in trees),
                flush=True,
            )
            results: dict[str, list[dict[str, Any]]] = {name: [] for name, _, _ in configs}
            for rep in range(a.reps):
                for name, cmd, cwd in configs:
                    shutil.rmtree(out, ignore_errors=True)
                    env = dict(os.environ, LEADER_EVAL_CACHE_DIR="off", PYTHONPATH=str(cwd))
                    rec = run_child(cmd, root_url, env, cwd)
                    rec.update(name=name, rep=rep, n=n, c=c, lat_ms=a.latency_ms)
                    print(json.dumps(rec), flush=True)
                    if a.json:
                        with open(a.json, "a", encoding="utf-8") as f:
                            f.write(json.dumps(rec) + "\n")
                    if rec["rc"] != 0:
                        print(rec.get("stderr_tail", ""), file=sys.stderr)
                        return 1
                    results[name].append(rec)
            print(
                "| harness | wall s | wall/ideal | server span s | span/ideal | CPU s | CPU ms/sample "
                "| wall/ideal - floor's | CPU x floor's | peak RSS MB | max in-flight | wall/ideal per rep "
                "| span per rep | CPU ms/sample per rep | load1 before each rep |"
            )
            print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
            floor_recs = results.get(floor_name)
            for name, recs in results.items():
                print(summarize(name, recs, n, ideal, floor_recs if name != floor_name else None))
    finally:
        if server is not None:
            server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
