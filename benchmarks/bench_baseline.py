"""Fleet baselines and alerts over many traces: speed, and memory as the number of traces grows.

The input is made from one real run of ``tests/fleet_app.py`` (50 steps of 19 launches each, folding off, so
every launch is a span): its traces are copied with new trace ids into OTLP JSON Lines files of ``--traces``
traces, spread over ``--runs`` simulated runs (``process.pid``) on four hosts. A baseline's memory grows with
groups, scopes, kernels, topologies and runs, not with traces: the runs are fixed here so that the traces
alone grow.

1. ``launchtrace baseline build`` over 2,500 / 5,000 / 10,000 traces, each in a fresh process timed from the
   interpreter's start (imports count) with the bytecode cached as for an installed package, and also without a
   cache where ``PYTHONDONTWRITEBYTECODE`` is set (every module compiled at each start): spans per second by
   the wall clock and of CPU (the target is 200,000),
   beside the reader alone on the same file (the ceiling) and, in this process (imports done, steady state, CPU),
   the fast path (:mod:`launchtrace.analysis.fleet.fast`: plain steps of a known signature read without
   rebuilding their records), the straightforward build (every trace rebuilt; the ratio is the fast path's gain)
   and the reader plus :func:`launchtrace.sources.rebuild.rebuild`; whether the two builds gave the same bytes;
   and peak resident memory (target: flat in the number of traces).
2. ``launchtrace alert`` of the largest window against that baseline: seconds.
3. Where the fast path's CPU time goes, per span: the reader, grouping spans into traces, reading a plain step
   (its root rebuilt, its signature and times), the lookup of its signature, the counts taken per step, the
   straightforward path (a signature's first step, a new representative), writing the message, and the rest.

On a loaded machine wall-clock figures move with the load: compare figures of one run, and the CPU ones.

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
    the ``"spanId"`` keys written (spans and their links)."""
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


def bytecode_env(cache: Path | None) -> dict[str, str]:
    """The environment of a timed command: with ``cache``, Python's bytecode read from and written to that folder
    (``PYTHONPYCACHEPREFIX``), as for an installed package, whose ``.pyc`` files pip writes at install time; without
    it, this process's environment as it is (where ``PYTHONDONTWRITEBYTECODE`` is set, as on this project's
    machines, every module is compiled from source at each start: ~70 ms of launchtrace's alone)."""
    env = dict(os.environ)
    if cache is not None:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(cache)
    return env


def timed(argv: list[str], cache: Path | None = None) -> tuple[float, float, float, str]:
    """Seconds (wall and CPU) and peak resident MiB of a ``launchtrace`` command in its own process, from the
    interpreter's start (its imports included: they count against a command's speed too); ``cache``: see
    :func:`bytecode_env`."""
    code = (
        "import resource, sys, time; t = time.perf_counter(); from launchtrace.cli import main; "
        "rc = main(sys.argv[1:]); u = resource.getrusage(resource.RUSAGE_SELF); "
        "print('__', time.perf_counter() - t, u.ru_utime + u.ru_stime, u.ru_maxrss, rc, file=sys.stderr)"
    )
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", code, *argv], capture_output=True, text=True, timeout=3600, env=bytecode_env(cache)
    )
    whole = time.perf_counter() - start
    tail = [line for line in proc.stderr.splitlines() if line.startswith("__ ")]
    if not tail:
        raise SystemExit(proc.stderr[-2000:])
    _, _seconds, cpu, rss_kib, _rc = tail[-1].split()
    return whole, float(cpu), int(rss_kib) / 1024, proc.stderr


def read_only(path: Path) -> tuple[float, float, int]:
    """Seconds (wall, CPU) the reader alone takes to stream the file's spans (the ceiling of any command over
    it), and the spans it read (counted by the reader: a ``"spanId"`` in the text may be a link's)."""
    from launchtrace.sources.files import SpanFile

    t, c = time.perf_counter(), time.process_time()
    spans = 0
    with SpanFile(path) as f:
        for _, chunk in f.chunks():
            spans += len(chunk)
    return time.perf_counter() - t, time.process_time() - c, spans


def read_and_rebuild(path: Path) -> float:
    """CPU seconds to read the file and rebuild its records, trace by trace (what every record-level command pays)."""
    from launchtrace.sources.stream import TraceStream

    c = time.process_time()
    for _ in TraceStream.from_paths([path]):
        pass
    return time.process_time() - c


def in_process(path: Path, *, fast: bool) -> tuple[float, bytes]:
    """CPU seconds to build the baseline in this process (imports done): with the fast path
    (:mod:`launchtrace.analysis.fleet.fast`) or with every trace rebuilt into records (``fast=False``: what
    ``baseline build`` did first); and the baseline's bytes."""
    from launchtrace.analysis.fleet.baseline import BaselineBuilder
    from launchtrace.sources.stream import TraceStream

    c = time.process_time()
    builder = BaselineBuilder(("service.version", "host.name"))
    builder.add_stream(TraceStream.from_paths([path]), fast=fast)
    data = builder.to_proto().SerializeToString(deterministic=True)
    return time.process_time() - c, data


def stages(path: Path) -> str:
    """Where the fast path's CPU time goes, microseconds per span by stage: one pass over ``path`` with a clock
    read around each stage (exclusive: a stage's time leaves out the stages it calls), reading and grouping
    spans into traces timed in passes of their own."""
    from launchtrace.analysis.fleet import baseline as B
    from launchtrace.analysis.fleet.fast import Signatures
    from launchtrace.sources import stream as S

    clock = time.process_time
    _, reading, spans = read_only(path)
    names = ("read plain step", "signature lookup", "counts", "straightforward", "to_proto")
    took = dict.fromkeys(("reader and grouping into traces", *names), 0.0)
    inner: list[float] = []

    def timed_lists(self):  # the reader's and the grouping's share of the very pass
        lists = plain_lists(self)
        while True:
            t = clock()
            inner.append(0.0)
            try:
                item = next(lists, None)
            finally:
                spent = clock() - t
                took["reader and grouping into traces"] += spent - inner.pop()
            if item is None:
                return
            yield item

    def timing(name: str, fn):
        def timed_call(*args, **kwargs):
            t = clock()
            inner.append(0.0)
            try:
                return fn(*args, **kwargs)
            finally:
                spent = clock() - t
                took[name] += spent - inner.pop()
                if inner:
                    inner[-1] += spent

        return timed_call

    plain_lists = S.TraceStream.span_lists
    S.TraceStream.span_lists = timed_lists
    saved = (B.read_step, Signatures.get, B.BaselineBuilder._add_known, B.BaselineBuilder.add, S.rebuild)
    B.read_step = timing(names[0], saved[0])
    Signatures.get = timing(names[1], saved[1])
    B.BaselineBuilder._add_known = timing(names[2], saved[2])
    B.BaselineBuilder.add = timing(names[3], saved[3])
    S.rebuild = timing(names[3], saved[4])
    try:
        builder = B.BaselineBuilder(("service.version", "host.name"))
        t = clock()
        builder.add_stream(S.TraceStream.from_paths([path]))
        whole = clock() - t
        t = clock()
        builder.to_proto().SerializeToString(deterministic=True)
        took["to_proto"] = clock() - t
    finally:
        B.read_step, Signatures.get, B.BaselineBuilder._add_known, B.BaselineBuilder.add, S.rebuild = saved
        S.TraceStream.span_lists = plain_lists
    accounted = sum(v for k, v in took.items() if k != "to_proto")
    parts = {**took, "the rest (the loop, buffering)": whole - accounted}
    total = sum(parts.values())
    text = ", ".join(f"{name} {seconds / spans * 1e6:.2f}" for name, seconds in parts.items())
    return (
        f"{text}; total {total / spans * 1e6:.2f} us/span ({spans / total:,.0f} spans/s of CPU); "
        f"the reader alone, in a pass of its own: {reading / spans * 1e6:.2f} us/span"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=int, nargs="+", default=[2500, 5000, 10000])
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; CPU only")
    with tempfile.TemporaryDirectory(prefix="bench_baseline_") as tmp:
        folder = Path(tmp)
        cache = folder / "pycache"
        source = source_run(folder)
        last = None
        for n in args.traces:
            path = folder / f"fleet-{n}.jsonl"
            replicate(source, n, path, args.runs)
            reader_wall, reader_cpu, spans = read_only(path)
            rebuild_s = read_and_rebuild(path)
            plain_s, plain = in_process(path, fast=False)
            fast_s, fast = in_process(path, fast=True)
            same = "the same baseline byte for byte" if fast == plain else "BASELINES DIFFER"
            base = folder / f"base-{n}.pb"
            command = ["baseline", "build", "--from", str(path), "--out", str(base), "--quiet"]
            if not cache.exists():  # the first run compiles and writes the bytecode, as pip does at install time
                timed(command, cache)
            wall, cpu, rss, _ = timed(command, cache)
            if os.environ.get("PYTHONDONTWRITEBYTECODE"):
                cold, cold_cpu, _, _ = timed(command)
                uncached = (
                    f"without a bytecode cache (PYTHONDONTWRITEBYTECODE is set here: every module compiled at "
                    f"start) {spans / cold:,.0f} spans/s ({cold:.2f} s wall), {spans / cold_cpu:,.0f} of CPU; "
                )
            else:
                uncached = ""
            print(
                f"1. baseline build, {n} traces ({spans} spans), the whole command in a fresh process, bytecode "
                f"cached as installed: {spans / wall:,.0f} spans/s ({wall:.2f} s wall), {spans / cpu:,.0f} spans/s "
                f"of CPU ({cpu:.2f} s); {uncached}"
                f"reader alone {spans / reader_wall:,.0f} spans/s wall, {spans / reader_cpu:,.0f} of CPU; "
                f"in this process (CPU, steady state): fast path {spans / fast_s:,.0f} spans/s, "
                f"straightforward build {spans / plain_s:,.0f} "
                f"(x{plain_s / fast_s:.1f}), reader + rebuild {spans / rebuild_s:,.0f}; "
                f"{same}; peak RSS {rss:.0f} MiB, baseline {base.stat().st_size:,} bytes"
            )
            last = (path, base, n)
        if last is not None:
            print(f"3. fast path by stage, {last[2]} traces, CPU us per span: {stages(last[0])}")
            path, base, n = last
            wall, cpu, rss, _ = timed(["alert", "--baseline", str(base), "--from", str(path), "--quiet"], cache)
            print(
                f"2. alert over {n} traces against the baseline: {wall:.2f} s ({cpu:.2f} s CPU), peak RSS {rss:.0f} MiB"
            )
    print(f"load average at the end {os.getloadavg()[0]:.1f}")
    print(f"(this process: peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB)")


if __name__ == "__main__":
    main()
