"""Fleet baselines and alerts over many traces: speed, and memory as the number of traces grows.

The input is made from one real run of ``tests/fleet_app.py`` (50 steps of 19 launches each, folding off, so
every launch is a span): its traces are copied with new trace ids into OTLP JSON Lines files of ``--traces``
traces, spread over ``--runs`` simulated runs (``process.pid``) on four hosts. A baseline's memory grows with
groups, scopes, kernels, topologies and runs, not with traces: the runs are fixed here so that the traces
alone grow.

1. ``launchtrace baseline build`` over 2,500 / 5,000 / 10,000 traces, each in a fresh process: spans per second
   (the target is 200,000), beside the reader alone and the reader plus
   :func:`launchtrace.sources.rebuild.rebuild` on the same file (the ceilings of any command that needs records),
   and peak resident memory (target: flat in the number of traces).
2. ``launchtrace alert`` of the 10,000-trace window against that baseline: seconds.

Run: ``python benchmarks/bench_baseline.py`` (a few minutes on a loaded 2-core machine). CPU-only figures.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
APP = ROOT / "tests" / "fleet_app.py"
_TRACE = re.compile(rb'"traceId":"([0-9a-f]{32})"')
_PID = re.compile(rb'("process\.pid","value":\{"intValue":")(\d+)(")')
_HOST = re.compile(rb'("host\.name","value":\{"stringValue":")([^"]*)(")')


def source_run(folder: Path) -> Path:
    out = folder / "source.jsonl"
    env = {**os.environ, "LAUNCHTRACE_FOLD": "0", "FLEET_SUBSTEPS": "16", "OTEL_SERVICE_NAME": "fleet-sim"}
    env["OTEL_RESOURCE_ATTRIBUTES"] = "host.name=b0,service.version=1.0"
    cmd = [sys.executable, str(APP), "clean", "50", str(out)]
    subprocess.run(cmd, env=env, check=True, capture_output=True, timeout=600)
    return out


def replicate(source: Path, traces: int, out: Path, runs: int = 20) -> int:
    """``traces`` copies of the source's traces (in blocks of 50) with new ids, over ``runs`` pids and four hosts;
    the spans written."""
    lines = [line for line in source.read_bytes().splitlines() if line.strip()]
    per_run = len({m for line in lines for m in _TRACE.findall(line)})
    spans = 0
    with out.open("wb") as f:
        for copy in range(max(1, traces // per_run)):
            salt, run = str(copy).encode(), copy % runs

            def new_id(m: re.Match, salt: bytes = salt) -> bytes:
                return b'"traceId":"' + hashlib.md5(m.group(1) + salt).hexdigest().encode() + b'"'

            for line in lines:
                line = _TRACE.sub(new_id, line)
                line = _PID.sub(lambda m, r=run: m.group(1) + str(100000 + r).encode() + m.group(3), line)
                line = _HOST.sub(lambda m, r=run: m.group(1) + f"b{r % 4}".encode() + m.group(3), line)
                spans += line.count(b'"spanId"')
                f.write(line + b"\n")
    return spans


def timed(argv: list[str]) -> tuple[float, float, str]:
    """Seconds and peak resident MiB of a ``launchtrace`` command in its own process."""
    code = (
        "import resource, sys, time; from launchtrace.cli import main; t = time.perf_counter(); "
        "rc = main(sys.argv[1:]); "
        "print('__', time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, rc, file=sys.stderr)"
    )
    proc = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, timeout=3600)
    tail = [line for line in proc.stderr.splitlines() if line.startswith("__ ")]
    if not tail:
        raise SystemExit(proc.stderr[-2000:])
    _, seconds, rss_kib, _rc = tail[-1].split()
    return float(seconds), int(rss_kib) / 1024, proc.stderr


def read_only(path: Path) -> float:
    """Seconds the reader alone takes to stream the file's spans (the ceiling of any command over it)."""
    from launchtrace.sources.files import SpanFile

    t = time.perf_counter()
    with SpanFile(path) as f:
        for _ in f.chunks():
            pass
    return time.perf_counter() - t


def read_and_rebuild(path: Path) -> float:
    """Seconds to read the file and rebuild its records, trace by trace (what every record-level command pays)."""
    from launchtrace.sources.stream import TraceStream

    t = time.perf_counter()
    for _ in TraceStream.from_paths([path]):
        pass
    return time.perf_counter() - t


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=int, nargs="+", default=[2500, 5000, 10000])
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; CPU only")
    with tempfile.TemporaryDirectory(prefix="bench_baseline_") as tmp:
        folder = Path(tmp)
        source = source_run(folder)
        last = None
        for n in args.traces:
            path = folder / f"fleet-{n}.jsonl"
            spans = replicate(source, n, path, args.runs)
            reader_s = read_only(path)
            rebuild_s = read_and_rebuild(path)
            base = folder / f"base-{n}.pb"
            seconds, rss, _ = timed(["baseline", "build", "--from", str(path), "--out", str(base), "--quiet"])
            print(
                f"1. baseline build, {n} traces ({spans} spans): {seconds:.2f} s, {spans / seconds:,.0f} spans/s "
                f"(reader alone {spans / reader_s:,.0f}, reader + rebuild {spans / rebuild_s:,.0f} spans/s), "
                f"peak RSS {rss:.0f} MiB, "
                f"baseline {base.stat().st_size:,} bytes"
            )
            last = (path, base, n)
        if last is not None:
            path, base, n = last
            seconds, rss, _ = timed(["alert", "--baseline", str(base), "--from", str(path), "--quiet"])
            print(f"2. alert over {n} traces against the baseline: {seconds:.2f} s, peak RSS {rss:.0f} MiB")
    print(f"(this process: peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB)")


if __name__ == "__main__":
    main()
