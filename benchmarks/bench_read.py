"""Reading OTLP JSON Lines: launchtrace's reader (file -> SpanData) versus ``google.protobuf.json_format``
parsing the same file into ``TracesData`` messages, in the same process.

Method (shared/notes/measuring.md): write one file of spans shaped like launchtrace's (kernel launch spans
with ~15 attributes: strings, ints, int and string arrays, bools; resource and scope shared per line, 512
spans per line as the sink batches them), warm up both sides once, then alternate ours / baseline for at
least 5 pairs. Prints spans/s of each side per pair and the median of the per-pair speed ratios (ours over
baseline) with min and max. The baseline only builds protobuf messages (it does not even produce SpanData),
so the comparison favours it. Target: >= 200,000 spans/s and faster than the baseline.

"launchtrace" is the reader as installed: the compiled reader (``launchtrace.otlp._jsonread``) where it is
built. The same pairs also read the file as without a C compiler (``LAUNCHTRACE_PURE_PYTHON=1``: every line
through ``orjson.loads`` and the general decoder, ``launchtrace.otlp.json_codec``; issue 26 removed the Python
copy of the compiled reader), so the two are compared in the same run.

For reference it also prints, from the same pairs, the floor of any reader that builds Python objects with
``orjson`` (``orjson.loads`` of every line and nothing else). Then a second file, the compiled reader's worst
case: the same keys and value types, but every attribute value (all but one boolean) differs from span to span,
so that the attribute caches never hit; it is read alternating with the no-compiler reading and that file's
``orjson.loads`` floor.

    python benchmarks/bench_read.py [--spans 100000] [--pairs 5]
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import statistics
import tempfile
import time

import orjson
from google.protobuf import json_format
from opentelemetry.proto.trace.v1.trace_pb2 import TracesData

from launchtrace.otlp.json_codec import encode_line
from launchtrace.otlp.json_fast import compiled_decoder
from launchtrace.sources.files import SpanFile
from launchtrace.spans import SpanData

BATCH = 512


def _launch_attributes(i: int) -> tuple:
    """A launch span's attributes as launchtrace writes them: most values repeat from span to span."""
    return (
        ("launchtrace.op", "launch"),
        ("launchtrace.kernel", f"sim.integrate_{i % 7}"),
        ("launchtrace.module", "sim"),
        ("launchtrace.module.hash", "9f2c41d0aa"),
        ("launchtrace.dim", (1024, i % 16 + 1)),
        ("launchtrace.device", "cuda:0"),
        ("launchtrace.api", "wp.launch"),
        ("launchtrace.adjoint", False),
        ("launchtrace.bytes", 4096 * (i % 9 + 1)),
        ("launchtrace.seq", i),
        ("launchtrace.array_keys", ("0", "1", "3.pos")),
        ("launchtrace.arg.0.ptr", 0x7F0000000000 + 256 * (i % 97)),
        ("launchtrace.arg.2", 0.01),
        ("code.filepath", "sim/step.py"),
        ("code.lineno", 120 + i % 5),
    )


def _unique_attributes(i: int) -> tuple:
    """The same keys and value types, every value (but the boolean's) different in every span."""
    return (
        ("launchtrace.op", f"launch-{i}"),
        ("launchtrace.kernel", f"sim.integrate_{i}"),
        ("launchtrace.module", f"sim{i}"),
        ("launchtrace.module.hash", f"{i:010x}"),
        ("launchtrace.dim", (1024 + i, i + 1)),
        ("launchtrace.device", f"cuda:{i}"),
        ("launchtrace.api", f"wp.launch.{i}"),
        ("launchtrace.adjoint", i % 2 == 0),
        ("launchtrace.bytes", 4096 * (i + 1)),
        ("launchtrace.seq", i),
        ("launchtrace.array_keys", (str(i), str(i + 1), f"{i}.pos")),
        ("launchtrace.arg.0.ptr", 0x7F0000000000 + 256 * i),
        ("launchtrace.arg.2", 0.01 * (i + 1)),
        ("code.filepath", f"sim/step_{i}.py"),
        ("code.lineno", 120 + i),
    )


def make_spans(n: int, attributes=_launch_attributes) -> list[SpanData]:
    resource = (("service.name", "sim"), ("host.name", "node-1"), ("process.pid", 4242))
    scope_attrs = (("launchtrace.version", "0.1.0"),)
    trace_id = bytes.fromhex("5b8efff798038103d269b633813fc700")
    spans = []
    for i in range(n):
        spans.append(
            SpanData(
                trace_id,
                (i + 1).to_bytes(8, "big"),
                (i // 64 + 1).to_bytes(8, "big") if i % 64 else None,
                f"sim.integrate_{i % 7}",
                1_700_000_000_000_000_000 + i * 1000,
                1_700_000_000_000_000_000 + i * 1000 + 700,
                attributes(i),
                resource=resource,
                scope_name="launchtrace",
                scope_version="0.1.0",
                scope_attributes=scope_attrs,
            )
        )
    return spans


def write_file(spans: list[SpanData]) -> str:
    fd, path = tempfile.mkstemp(suffix=".jsonl")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        for i in range(0, len(spans), BATCH):
            f.write(encode_line(spans[i : i + BATCH]) + "\n")
    return path


def ours(path: str) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds of this process, spans)."""
    t0, c0 = time.perf_counter(), time.process_time()
    with SpanFile(path) as f:
        n = sum(1 for _ in f)
    return time.perf_counter() - t0, time.process_time() - c0, n


def no_compiler(path: str) -> tuple[float, float, int]:
    """``ours`` as without a compiler: ``LAUNCHTRACE_PURE_PYTHON=1`` while the file is read."""
    saved = os.environ.get("LAUNCHTRACE_PURE_PYTHON")
    os.environ["LAUNCHTRACE_PURE_PYTHON"] = "1"
    try:
        return ours(path)
    finally:
        if saved is None:
            del os.environ["LAUNCHTRACE_PURE_PYTHON"]
        else:
            os.environ["LAUNCHTRACE_PURE_PYTHON"] = saved


def baseline(path: str) -> tuple[float, float, int]:
    t0, c0 = time.perf_counter(), time.process_time()
    n = 0
    with open(path, encoding="utf-8") as f:
        for line in f:
            msg = json_format.Parse(line, TracesData())
            n += sum(len(ss.spans) for rs in msg.resource_spans for ss in rs.scope_spans)
    return time.perf_counter() - t0, time.process_time() - c0, n


def orjson_floor(path: str) -> float:
    """Wall seconds for ``orjson.loads`` of every line and nothing else, the collector paused as ours pauses it."""
    t0 = time.perf_counter()
    gc.disable()
    try:
        with open(path, "rb") as f:
            for line in f:
                orjson.loads(line)
    finally:
        gc.enable()
    return time.perf_counter() - t0


def _summary(rates: list[float]) -> str:
    return f"median {statistics.median(rates):,.0f} spans/s (min {min(rates):,.0f}, max {max(rates):,.0f})"


def _ratios(ratios: list[float]) -> str:
    return f"median {statistics.median(ratios):.2f}x (min {min(ratios):.2f}x, max {max(ratios):.2f}x)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=100_000)
    parser.add_argument("--pairs", type=int, default=5)
    args = parser.parse_args()

    path = write_file(make_spans(args.spans))
    unique_path = write_file(make_spans(args.spans, _unique_attributes))
    size_mb, unique_mb = os.path.getsize(path) / 1e6, os.path.getsize(unique_path) / 1e6
    try:
        ours(path), no_compiler(path), baseline(path), orjson_floor(path)  # warm-up
        ratios, ours_rates, base_rates, ours_cpu_rates, floor_rates = [], [], [], [], []
        plain_rates, plain_ratios = [], []
        for _ in range(args.pairs):
            t_ours, c_ours, n_ours = ours(path)
            t_plain, _, n_plain = no_compiler(path)
            t_base, _, n_base = baseline(path)
            t_floor = orjson_floor(path)
            assert n_ours == n_plain == n_base == args.spans, (n_ours, n_plain, n_base)
            ours_rates.append(n_ours / t_ours)
            ours_cpu_rates.append(n_ours / c_ours)
            plain_rates.append(n_plain / t_plain)
            plain_ratios.append(t_plain / t_ours)
            base_rates.append(n_base / t_base)
            floor_rates.append(n_ours / t_floor)
            ratios.append(t_base / t_ours)
        ours(unique_path), no_compiler(unique_path)  # warm-up
        unique_rates, unique_plain_rates, unique_plain_ratios, unique_floor_rates = [], [], [], []
        for _ in range(args.pairs):
            t_ours, _, n_ours = ours(unique_path)
            t_plain, _, n_plain = no_compiler(unique_path)
            t_floor = orjson_floor(unique_path)
            assert n_ours == n_plain == args.spans, (n_ours, n_plain)
            unique_rates.append(n_ours / t_ours)
            unique_plain_rates.append(n_plain / t_plain)
            unique_plain_ratios.append(t_plain / t_ours)
            unique_floor_rates.append(n_ours / t_floor)
    finally:
        os.unlink(path)
        os.unlink(unique_path)

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} cpus, load {load:.1f}")
    print(f"file: {args.spans} spans, {size_mb:.1f} MB, {BATCH} spans per line")
    print(f"compiled reader: {'built, in use' if compiled_decoder() is not None else 'NOT built (no compiler)'}")
    for i, (a, p, b) in enumerate(zip(ours_rates, plain_rates, base_rates), 1):
        print(f"pair {i}: launchtrace {a:>10,.0f}   no compiler {p:>10,.0f}   json_format {b:>10,.0f} spans/s")
    print(f"launchtrace reader: {_summary(ours_rates)}")
    print(f"without a compiler (LAUNCHTRACE_PURE_PYTHON=1, orjson + the general decoder): {_summary(plain_rates)}")
    print(f"launchtrace / without a compiler: {_ratios(plain_ratios)}")
    print(f"launchtrace reader per CPU second of this process: median {statistics.median(ours_cpu_rates):,.0f}")
    print(f"json_format baseline: median {statistics.median(base_rates):,.0f} spans/s")
    print(
        f"speed ratio (launchtrace / json_format): median {statistics.median(ratios):.2f}x "
        f"(min {min(ratios):.2f}x, max {max(ratios):.2f}x)"
    )
    print(f"for reference, orjson.loads of each line and nothing else: {_summary(floor_rates)}")
    print(f"unique attributes file ({unique_mb:.1f} MB, every attribute value differs per span):")
    print(f"  launchtrace reader: {_summary(unique_rates)}")
    print(f"  without a compiler: {_summary(unique_plain_rates)}")
    print(f"  launchtrace / without a compiler: {_ratios(unique_plain_ratios)}")
    print(f"  orjson.loads of each line and nothing else: {_summary(unique_floor_rates)}")


if __name__ == "__main__":
    main()
