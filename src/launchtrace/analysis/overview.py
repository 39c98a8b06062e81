"""The overview of a run the HTML report shows: facts, step durations, kernel time per scope, steps to draw.

One walk over the traces makes every table the report's sections need (as Warp's ``Tape.visualize`` makes its
graph and statistics from one traversal):

- :class:`Facts`: service, host, devices, versions, wall time, device operations (and how many of them were
  folded into summaries), spans, dropped spans;
- ``steps``: every occurrence of every outermost scope (one point each on the step-duration chart);
- ``kernels``: per outermost scope name (and ``"all"``), the per-kernel rows of
  :func:`launchtrace.analysis.stats.kernel_stats` with graph replays counted as what they ran, and each row's
  share of the scope's kernel time;
- ``representative``, ``median`` and ``slowest``: the steps the timeline and the graph show by default;
- ``loads``: compile/load time (:func:`launchtrace.analysis.loads.module_loads`), never in a kernel's row;
- ``values``: the launches whose outputs held NaN/Inf (:func:`launchtrace.analysis.values.non_finite`) and
  how their steps were counted.

Example::

    from launchtrace.analysis.overview import overview
    ov = overview(traces)
    print(ov.facts.launches, "device operations,", len(ov.steps), "steps; median step", ov.median.index)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from launchtrace import conventions as C
from launchtrace import folds as fold_rules
from launchtrace.analysis.failures import Failure, FailureTable
from launchtrace.analysis.loads import Loads, module_loads
from launchtrace.analysis.replays import with_replay_counts
from launchtrace.analysis.runs import Occurrence, common_scope, occurrences, pick
from launchtrace.analysis.stats import kernel_stats
from launchtrace.analysis.values import BadValues, non_finite, step_clock
from launchtrace.model import TraceData
from launchtrace.steps import infer_steps, split_runs

__all__ = ["ALL_SCOPES", "Facts", "KernelShare", "Overview", "overview"]

ALL_SCOPES = "all"


@dataclasses.dataclass(frozen=True, slots=True)
class Facts:
    """What the report's header says. Times in ns since the epoch; ``launches``: device operations (a fold's
    repetitions counted), ``folded``: how many of those came from summary spans (their times not measured one
    by one), ``spans``: the spans the traces were rebuilt from (records not from folds, summary spans, scopes,
    step roots), ``dropped``: spans the exporter's budget left out."""

    service: str
    host: str
    pids: tuple[str, ...]
    devices: tuple[str, ...]
    versions: tuple[tuple[str, str], ...]
    start_ns: int
    end_ns: int
    launches: int
    folded: int
    spans: int
    dropped: int
    traces: int
    threads: int


@dataclasses.dataclass(frozen=True, slots=True)
class KernelShare:
    """A per-kernel row of one scope: ``stats`` (a ``KernelStats``) and its ``share`` of the scope's time."""

    stats: Any
    share: float


@dataclasses.dataclass(frozen=True, slots=True)
class Overview:
    facts: Facts
    steps: tuple[Occurrence, ...]
    kernels: dict[str, tuple[KernelShare, ...]]
    representative: Occurrence | None
    median: Occurrence | None
    slowest: Occurrence | None
    chosen: tuple[Occurrence, ...] = ()  # steps the user chose (--scope / --trace / --occurrence), shown instead
    loads: Loads = dataclasses.field(default_factory=Loads)
    values: tuple[BadValues, ...] = ()
    values_steps: str = ""  # how the steps in ``values`` were counted
    failed: tuple[Failure, ...] = ()  # the calls that raised, one row per kernel (or scope), site and error
    failed_total: int = 0
    inferred: str = ""  # how the steps were inferred (a zero-code run's repeating timers), else ""


def _facts(traces: Sequence[TraceData]) -> Facts:
    attrs = traces[0].attributes if traces else {}
    records = [r for t in traces for r in t.records]
    folds = {r.fold.span_id for r in records if r.fold is not None}
    times = [r.start_ns for r in records if r.start_ns] + [
        s.start_ns for t in traces for s in t.scopes.values() if s.start_ns
    ]
    ends = [r.end_ns for r in records] + [s.end_ns for t in traces for s in t.scopes.values()]
    step_roots = sum(1 for t in traces if C.STEP_INDEX in t.attributes)
    versions = [
        ("launchtrace", attrs.get("launchtrace.version")),
        ("warp", attrs.get("launchtrace.warp.version")),
        (str(attrs.get("process.runtime.name") or "python"), attrs.get("process.runtime.version")),
    ]
    return Facts(
        service=str(attrs.get("service.name") or ""),
        host=str(attrs.get("host.name") or ""),
        pids=tuple(dict.fromkeys(str(t.attributes["process.pid"]) for t in traces if "process.pid" in t.attributes)),
        devices=tuple(sorted({r.device for r in records if r.device})),
        versions=tuple((k, str(v)) for k, v in versions if v not in (None, "")),
        start_ns=min(times, default=0),
        end_ns=max(ends, default=0),
        launches=sum(fold_rules.launches(r) for r in records),
        folded=sum(fold_rules.launches(r) for r in records if fold_rules.is_folded(r)),
        spans=sum(1 for r in records if r.fold is None) + len(folds) + sum(len(t.scopes) for t in traces) + step_roots,
        dropped=sum(int(t.attributes.get(C.DROPPED_SPANS, 0) or 0) for t in traces),
        traces=len(traces),
        threads=len({r.thread for r in records} | {s.thread for t in traces for s in t.scopes.values()}),
    )


def _shares(traces: Sequence[TraceData]) -> tuple[KernelShare, ...]:
    rows = with_replay_counts(kernel_stats(traces), traces)
    total = sum(r.total_ns for r in rows) or 1
    return tuple(KernelShare(r, r.total_ns / total) for r in rows)


def overview(traces: Sequence[TraceData], chosen: Sequence[Occurrence] = ()) -> Overview:
    """The :class:`Overview` of ``traces`` (one run, or several: then the facts list every pid); ``chosen``
    steps, when given, are the ones the timeline and the graph show (the first is then the representative)."""
    steps = occurrences(traces)
    inferred = infer_steps(steps) if len(split_runs(traces)) == 1 else None
    if inferred is not None:  # a zero-code run: each repetition of its top-level timers is one step
        covered = {id(o) for step in inferred.steps for o in step}
        steps = sorted([o for o in steps if id(o) not in covered] + inferred.occurrences(), key=lambda o: o.start_ns)
    kernels: dict[str, tuple[KernelShare, ...]] = {ALL_SCOPES: _shares(traces)}
    for name in dict.fromkeys(o.name for o in steps):
        kernels[name] = _shares([o.data for o in steps if o.name == name])
    name = common_scope(steps)
    common = [o for o in steps if o.name == name]
    median = pick(common, "median") if common else None
    failures = FailureTable()
    for trace in traces:
        failures.add(trace)
    return Overview(
        facts=_facts(traces),
        steps=tuple(steps),
        kernels=kernels,
        representative=chosen[0] if chosen else median,
        median=median,
        slowest=pick(common, "slowest") if common else None,
        chosen=tuple(chosen),
        loads=module_loads(traces),
        values=tuple(non_finite(traces)),
        values_steps=step_clock(traces).how,
        failed=tuple(failures.rows()),
        failed_total=failures.total,
        inferred=inferred.how if inferred is not None else "",
    )
