"""Per-record constructions of the export stages: launchtrace's makers (``fastinit``, ``_slots`` where built)
against ``msgspec.Struct(frozen=True, gc=False)`` classes of the same fields, each called as its stage would.

Why: issue 17 asks whether ``_slots.c`` and ``fastinit.py`` can give way to msgspec Structs. A Struct is built
by its own constructor (fields positional in declaration order, or by keyword) and copied by
``msgspec.structs.replace`` (keywords only), so each stage's call is timed both ways: the materializer's
template copy (5 fields changed, per repeated launch), its full record (a miss), the span builder's span (14 of
23 fields passed, in ``spanfactory.PASSED`` order), and a decoded span (every field, as ``json_codec`` makes it).
For the Struct the cheapest legal call is timed (positional where the declaration order allows it), and once
more with the span's passed fields declared first (a reordered ``SpanData``), so the figures are its best
case. Prints the median ns per construction of each (a lambda's call included on both sides), and the ratio
msgspec / ours.

Run: ``python benchmarks/bench_structs.py [--n 200000] [--runs 7]`` (a few seconds).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import msgspec

from launchtrace import native
from launchtrace.capture.materialize import LAUNCH_FIELDS, _copy_launch, make_launch_record
from launchtrace.export.spanfactory import PASSED, make_span
from launchtrace.fastinit import slot_constructor
from launchtrace.model import LaunchRecord, Site
from launchtrace.spans import SpanData


def struct_twin(cls: type, first: tuple[str, ...] = ()) -> type:
    """A ``msgspec.Struct(frozen=True, gc=False)`` with ``cls``'s fields and defaults, ``first`` moved to the front
    (so a call passing them can be positional), the others in ``cls``'s order."""
    fields = []
    by_name = {f.name: f for f in dataclasses.fields(cls)}
    for f in [by_name[name] for name in first] + [f for f in dataclasses.fields(cls) if f.name not in first]:
        fields.append((f.name, Any) if f.default is dataclasses.MISSING else (f.name, Any, f.default))
    return msgspec.defstruct(f"{cls.__name__}Struct", fields, frozen=True, gc=False)


def per_call_ns(fn: Callable[[], Any], n: int, runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter_ns()
        for _ in range(n):
            fn()
        times.append((time.perf_counter_ns() - t0) / n)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    RecordS, SpanS, SiteS = struct_twin(LaunchRecord), struct_twin(SpanData), struct_twin(Site)
    SpanFirst = struct_twin(SpanData, PASSED)  # what SpanData would have to become for a positional make_span
    replace = msgspec.structs.replace
    site, site_s = Site("f.py", 3, "step", "m"), SiteS("f.py", 3, "step", "m")
    rec_values = {
        "op": "launch", "kernel": "m.axpy", "dim": (1024,), "stream": None, "arrays": (("x", 1), ("y", 2)),
        "scalars": (("a", 2.0),), "site": site, "params": ("x", "y", "a"), "buffers": (), "block_dim": 256,
        "max_blocks": 0, "device": "cpu", "thread": 7, "thread_name": "MainThread", "start_ns": 10, "end_ns": 20,
        "scope_id": None, "graph_id": None, "captured": False, "adjoint": False, "api": "wp.launch",
        "internal": False, "error": None, "seq": 5, "template": None,
    }  # fmt: skip
    rec_values = {k: v for k, v in rec_values.items() if k in LAUNCH_FIELDS}
    ordered = tuple(rec_values[k] for k in LAUNCH_FIELDS)
    in_struct_order = [f.name for f in dataclasses.fields(LaunchRecord)]
    positional_ok = list(LAUNCH_FIELDS) == in_struct_order[: len(LAUNCH_FIELDS)]
    proto = make_launch_record(*ordered)
    proto_s = RecordS(**{**rec_values, "site": site_s})
    span_values = {
        "trace_id": b"t" * 16, "span_id": b"s" * 8, "parent_span_id": b"p" * 8, "name": "m.axpy", "start_ns": 10,
        "end_ns": 20, "attributes": (("a", 1),), "status_code": 0, "status_message": "", "events": (),
        "links": (), "resource": (("service.name", "x"),), "scope_name": "launchtrace", "scope_version": "0.1",
    }  # fmt: skip
    span_args = tuple(span_values[k] for k in PASSED)
    span_struct_order = [f.name for f in dataclasses.fields(SpanData)]
    span_positional_ok = list(PASSED) == span_struct_order[: len(PASSED)]
    full_span = make_span(*span_args)
    full_values = tuple(getattr(full_span, f.name) for f in dataclasses.fields(SpanData))
    new_span = slot_constructor(SpanData, tuple(f.name for f in dataclasses.fields(SpanData)))
    n, runs = args.n, args.runs
    cases = [
        (
            "materialise: template copy (5 changed)",
            lambda: _copy_launch(proto, 11, 21, None, 6, proto),
            lambda: replace(proto_s, start_ns=11, end_ns=21, scope_id=None, seq=6, template=proto_s),
        ),
        (
            f"materialise: new record ({len(LAUNCH_FIELDS)} fields)",
            lambda: make_launch_record(*ordered),
            (lambda: RecordS(*ordered)) if positional_ok else (lambda: RecordS(**rec_values)),
        ),
        (
            f"span builder: span ({len(PASSED)} of 23 fields)",
            lambda: make_span(*span_args),
            (lambda: SpanS(*span_args)) if span_positional_ok else (lambda: SpanS(**span_values)),
        ),
        (
            "span builder: span, fields reordered",
            lambda: make_span(*span_args),
            lambda: SpanFirst(*span_args),
        ),
        ("read: decoded span (23 fields)", lambda: new_span(*full_values), lambda: SpanS(*full_values)),
    ]
    compiled = native.load("launchtrace._slots") is not None
    print(
        f"msgspec {msgspec.__version__}; ours: {'_slots (compiled)' if compiled else 'dataclasses (no _slots)'}; "
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; median of {runs} runs of {n}"
    )
    for label, ours, theirs in cases:
        a, b = per_call_ns(ours, n, runs), per_call_ns(theirs, n, runs)
        print(f"{label:42s} ours {a:6.0f} ns   msgspec {b:6.0f} ns   msgspec/ours {b / a:5.2f}x")


if __name__ == "__main__":
    main()
