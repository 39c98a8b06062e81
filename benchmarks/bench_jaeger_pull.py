"""How fast ``launchtrace pull`` reads one big trace back from the real Jaeger v2, and how much memory it takes.

A real Warp program (one step of N launches of a one-thread kernel, folding off, span budget above N) runs under
``launchtrace run`` exporting over OTLP/gRPC into a Jaeger started here on loopback (tests/jaeger_live.py,
memory storage). Then ``launchtrace pull`` runs as its own process, three times each:

- from Jaeger, api_v3 search (one trace of N+1 spans), and api_v3 / classic by trace id;
- from the file the first pull wrote (the baseline in the same run: the same spans, no HTTP, no Jaeger).

Reported per reader: wall seconds (median of 3), spans/s, the child's peak RSS (``wait4``), and the ratio to the
file baseline. Also the time from the program's start to Jaeger holding every span.

    python benchmarks/bench_jaeger_pull.py --launches 50000

``--before SRC`` adds each Jaeger reader again as the ``src`` folder of another checkout runs it (for example
``git worktree add /tmp/before HEAD~1``, then ``--before /tmp/before/src``), alternating with this one, so a change
is measured before and after in the same run, against the same Jaeger.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from jaeger_live import Jaeger  # noqa: E402

PROGRAM = """
import warp as wp
import launchtrace

@wp.kernel
def scale(x: wp.array(dtype=float), y: wp.array(dtype=float), s: float):
    i = wp.tid()
    y[i] = x[i] * s

x = wp.zeros(1, dtype=float, device="cpu")
wp.launch(scale, dim=1, inputs=[x, x, 1.0], device="cpu")  # compile outside the step
with launchtrace.scope("step"):
    for _ in range({launches}):
        wp.launch(scale, dim=1, inputs=[x, x, 1.0], device="cpu")
"""


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "LAUNCHTRACE_"))}
    env.update(extra)
    return env


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, int, str]:
    """Wall seconds, peak RSS in MiB of the child, and its stderr."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}: {err}")
    return wall, usage.ru_maxrss // 1024, err


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--launches", type=int, default=50_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--before", metavar="SRC", help="also run the Jaeger readers from this src folder")
    args = parser.parse_args()
    py = [sys.executable, "-m", "launchtrace"]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        program = folder / "big_step.py"
        program.write_text(PROGRAM.format(launches=args.launches))
        with Jaeger(folder / "jaeger") as jaeger:
            env = clean_env(
                OTEL_EXPORTER_OTLP_ENDPOINT=jaeger.otlp_grpc,
                OTEL_EXPORTER_OTLP_PROTOCOL="grpc",
                OTEL_SERVICE_NAME="bench-big",
                LAUNCHTRACE_FOLD="off",
                LAUNCHTRACE_SPAN_BUDGET=str(args.launches + 10),
            )
            start = time.perf_counter()
            run_wall, run_rss, _ = timed([*py, "run", str(program)], env)
            spans = args.launches + 1
            jaeger.wait_for_spans(spans + 2, timeout=120)  # + the synthetic step of wp.zeros' fill
            stored = time.perf_counter() - start
            base = f"jaeger+{jaeger.query_url}"
            first = folder / "pulled.jsonl"
            search = [base, "--service", "bench-big", "--since", "1h", "--limit", "5", "--timeout", "300"]
            default_limit = subprocess.run(
                [*py, "pull", *search, "--out", str(first), "--quiet"], env=clean_env(), capture_output=True, text=True
            )
            limits = ["--timeout", "300", "--max-answer-bytes", "1G"]
            search += limits[2:]
            timed([*py, "pull", *search, "--out", str(first), "--quiet"], clean_env())
            trace_id = next(
                line.split('"traceId":"')[1][:32] for line in first.read_text().splitlines() if '"name":"step"' in line
            )
            readers = {
                "file (baseline)": [str(first)],
                "jaeger api_v3 search": search,
                "jaeger api_v3 by id": [base, "--trace-id", trace_id, *limits],
                "jaeger classic by id": [base, "--api", "classic", "--trace-id", trace_id, *limits],
            }
            envs = {"": clean_env()}
            if args.before:
                envs[" (before)"] = clean_env(PYTHONPATH=str(Path(args.before).resolve()))
            rows = []
            for name, source in readers.items():
                for label, env in envs.items() if name.startswith("jaeger") else [("", envs[""])]:
                    walls, rss = [], 0
                    for _ in range(args.repeat):
                        wall, peak, _ = timed([*py, "pull", *source, "--out", str(folder / "x.jsonl"), "--quiet"], env)
                        walls.append(wall)
                        rss = max(rss, peak)
                    rows.append((name + label, statistics.median(walls), rss))
    load = os.getloadavg()
    print(f"pull with the default --max-answer-bytes: exit {default_limit.returncode}: {default_limit.stderr.strip()}")
    print(f"launches {args.launches}, spans in the trace {spans}; load average {load[0]:.2f} {load[1]:.2f}")
    print(f"launchtrace run: {run_wall:.2f} s (peak {run_rss} MiB); every span stored in Jaeger after {stored:.2f} s")
    base_wall = rows[0][1]
    print(f"{'reader':<33} {'median s':>9} {'spans/s':>10} {'peak MiB':>9} {'x file':>7}")
    for name, wall, rss in rows:
        print(f"{name:<33} {wall:>9.2f} {spans / wall:>10,.0f} {rss:>9} {wall / base_wall:>7.2f}")


if __name__ == "__main__":
    main()
