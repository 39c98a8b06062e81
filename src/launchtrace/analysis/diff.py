"""Aligned diff of two traces (or two sets of traces) with a timing comparison.

Records are cut into *segments*: each occurrence of a scope (``scope="step"``: every scope named ``step``,
outermost ones only; by default every top-level scope, Warp's own internal timers skipped), plus each run of
records outside any scope. Segments are matched by scope name and occurrence number, counted across the
whole set of traces in order; the records outside any scope are matched as one stream per thread, in chunks cut
by their content, so that where the exporter closed its step roots does not matter
(:mod:`launchtrace.analysis.unscoped`). Each matched pair is aligned with :func:`launchtrace.topology.diff_records`,
so one inserted launch is one ``inserted`` entry and a changed one names the fields (kernel, dims, a buffer by
owner label and offset, a scalar by parameter name, stream, site). A segment on one side only is wholly
inserted or removed.

Timing (:mod:`launchtrace.analysis.verdicts`) compares **per-step aggregates**, never launches: for each scope
occurrence (a step) the total host time of each kernel in it, of each scope nested in it (``step/simulate``: time
per ``wp.ScopedTimer``) and of the step itself. The unit of replication is the run (one process: traces are
grouped by file, and within a file by ``service.instance.id``, else host and pid), then the step. Leading
warm-up steps of each run (the first compiles kernels) are left out and listed in :attr:`TraceDiff.warmup`.
Folded positions enter as their recorded totals (count x mean), one value per step, never as copies of a mean
counted as samples.
With one run per side, a step that other threads' unscoped launches overlapped (a pool's tasks, a producer
thread: :mod:`launchtrace.analysis.contention`) gets no ``slower`` / ``faster`` / ``same``, only
``inconclusive`` asking for three runs a side (:func:`concurrent_verdict`): how threads share the machine holds
through a run, so the steps within one run cannot show how it differs between runs. A kernel's row in such a
step is judged by its own launches: inconclusive only where they waited for another thread's launch in
``1 - quantile`` of the steps.

Example::

    from launchtrace.analysis.diff import diff_traces
    result = diff_traces([before], [after], ignore_streams=True)
    print(result.equal, result.counts)
    for seg in result.segments:
        for entry in seg.entries:
            print(seg.name, seg.occurrence, entry.kind, entry.record.kernel)
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Mapping, Sequence

from launchtrace._lazy import lazy_module
from launchtrace.analysis import contention
from launchtrace.analysis.contention import CONCURRENT_SHARE, run_shares, side_shares
from launchtrace.analysis.drift import Drift, speed_factor
from launchtrace.analysis.segments import (
    NO_SCOPE,
    Segment,
    run_key,
    segments,
    split_runs,
    step_occurrences,
    top_scope,
    unowned_by_order,
)
from launchtrace.analysis.unscoped import LoopIterations, is_unscoped, keyed_segments
from launchtrace.analysis.verdicts import (
    ANSWERS,
    DEFAULT_ALPHA,
    DEFAULT_MIN_CHANGE,
    DEFAULT_MIN_RUNS,
    DEFAULT_MIN_STEPS,
    DEFAULT_QUANTILE,
    Verdict,
    compare_runs,
    warmup_steps,
)
from launchtrace.conventions import kernel_title
from launchtrace.folds import fold_share, record_total
from launchtrace.model import LaunchRecord, TraceData
from launchtrace.steps import family_path
from launchtrace.topology import ChangeKind, DiffEntry, diff_records

np = lazy_module("numpy")  # only some functions need it: importing this module stays cheap (baseline build)

__all__ = [
    "NO_SCOPE",
    "ONE_RUN_MIN_DELTA_NS",
    "DiffSettings",
    "RunDrift",
    "Segment",
    "SegmentDiff",
    "TimingChange",
    "TraceDiff",
    "WarmUp",
    "concurrent_verdict",
    "diff_traces",
    "fold_share",
    "inferred_segments",
    "run_key",
    "segment_diff",
    "segments",
    "series_of_runs",
    "split_runs",
    "step_series",
    "timing_of_series",
]

ONE_RUN_MIN_DELTA_NS = 50_000.0
"""With one run per side, a change of less than this many nanoseconds per step is never called: a small kernel
drifted by more than its own time per step between two runs of the same program in
``benchmarks/bench_verdicts.py`` (figures in ``docs/diff.md``) while its steps inside each run agreed closely
(cache and memory state differ between processes)."""


@dataclasses.dataclass(frozen=True, slots=True)
class SegmentDiff:
    """The diff of one matched pair of segments. ``entries`` index into each segment's records
    (``index_a`` / ``index_b``); ``count_a`` / ``count_b`` are the segments' record counts (0: absent).
    ``run``: with several runs per side, which pair of runs (:func:`pair_runs`: run k of A against run k of B
    unless they do different work; the side with fewer runs repeats its last); occurrences then count within the
    run."""

    name: str
    occurrence: int
    count_a: int
    count_b: int
    entries: tuple[DiffEntry, ...]
    run: int = 0


@dataclasses.dataclass(frozen=True, slots=True)
class TimingChange:
    """The timing verdict of one group: a kernel (``kind="kernel"``, its total time per step) or a scope
    (``kind="scope"``, its time per step; ``name`` a path such as ``step/simulate``), over the occurrences of
    the step scope ``scope``. ``median_a_ns`` / ``median_b_ns``: the median step over each side's runs (NaN
    when absent), ``low_a_ns`` / ``low_b_ns`` the ``quantile`` step the verdict compares (p10 by default);
    ``launches_*``: launches (kernels) or occurrences (scopes) behind them, of which
    ``folded_*`` were rebuilt from summary spans (their recorded totals are used); ``verdict``: what
    :func:`launchtrace.analysis.verdicts.compare_runs` concluded. For a step's own row (``name == scope``, a step
    with a clock: a scope or timer), ``in_launches_*_ns`` / ``outside_*_ns``: the median step's time in launches
    and between them, so a slower step says whether its kernels or the program around them took the time."""

    kind: str
    scope: str
    name: str
    median_a_ns: float
    median_b_ns: float
    low_a_ns: float
    low_b_ns: float
    quantile: float
    launches_a: int
    launches_b: int
    folded_a: int
    folded_b: int
    verdict: Verdict
    in_launches_a_ns: float = math.nan
    in_launches_b_ns: float = math.nan
    outside_a_ns: float = math.nan
    outside_b_ns: float = math.nan

    @property
    def group(self) -> str:
        """``"kernel m.k in step"`` or ``"scope step/simulate"``."""
        return f"kernel {self.name} in {self.scope}" if self.kind == "kernel" else f"scope {self.name}"


@dataclasses.dataclass(frozen=True, slots=True)
class WarmUp:
    """Leading steps of one run left out of the timing as warm-up: ``side`` ``"A"`` / ``"B"``, ``run`` (0-based
    index on that side), the step ``scope``, how many ``steps``, the first one's duration and the median of
    the rest (ns)."""

    side: str
    run: int
    scope: str
    steps: int
    first_ns: float
    median_ns: float


@dataclasses.dataclass(frozen=True, slots=True)
class RunDrift:
    """One run that ran slower or faster in every kernel at once (:mod:`launchtrace.analysis.drift`): ``side``
    ``"A"`` / ``"B"``, ``run`` (0-based index on that side), the ``drift`` against A's runs (their median per
    kernel), and whether its values were divided by the factor before the verdicts (``applied``: False with
    ``absolute=True``)."""

    side: str
    run: int
    drift: Drift
    applied: bool = True

    def describe(self) -> str:
        """``run B1 ran 1.42x slower in every kernel (...): environment, not a kernel change``."""
        text = self.drift.describe(f"run {self.side}{self.run + 1}") + ": environment, not a kernel change"
        return text if self.applied else text + " (not corrected: --absolute)"


@dataclasses.dataclass(frozen=True, slots=True)
class TraceDiff:
    """The result of :func:`diff_traces`: the topology ``segments``, one :class:`TimingChange` per kernel and
    scope group (``timing``), the warm-up left out, and how many runs each side held."""

    segments: tuple[SegmentDiff, ...]
    timing: tuple[TimingChange, ...]
    options: tuple[tuple[str, object], ...]
    warmup: tuple[WarmUp, ...] = ()
    runs_a: int = 0
    runs_b: int = 0
    drift: tuple[RunDrift, ...] = ()

    def verdict_counts(self) -> dict[str, int]:
        """How many timing rows gave each answer: ``{"slower": n, "faster": n, "same": n, "inconclusive": n}``."""
        out = dict.fromkeys(ANSWERS, 0)
        for t in self.timing:
            out[t.verdict.verdict] += 1
        return out

    @property
    def equal(self) -> bool:
        """Whether the topologies are the same (timing never makes two traces unequal)."""
        return not any(seg.entries for seg in self.segments)

    @property
    def counts(self) -> dict[str, int]:
        """``{"inserted": n, "removed": n, "changed": n, "moved": n}``: every kind, each a topology change."""
        out = {str(k): 0 for k in ChangeKind}
        for seg in self.segments:
            for e in seg.entries:
                out[str(e.kind)] += 1
        return out


_record_total = record_total  # the name this module used


GroupKey = tuple[str, str, str]  # (kind, step scope, name)


def step_series(
    traces: Sequence[TraceData],
    scope: str | None = None,
    segs: Sequence[Segment] | None = None,
    loops: LoopIterations | None = None,
) -> tuple[dict[str, list[float]], dict[GroupKey, dict[int, float]], dict[GroupKey, list[int]]]:
    """Per-step aggregates of one run: ``(step durations by step scope, {group: {occurrence: ns}},
    {group: [launches, folded]})``. A group is ``("kernel", step scope, kernel)`` (total time of that kernel in
    the step) or ``("scope", step scope, path)`` (the step itself, or a scope nested in it). Records with no
    end time are left out; unscoped records form ``<no scope>`` steps, one per iteration of the loop that
    issued them (:class:`~launchtrace.analysis.unscoped.LoopIterations`; each thread's its own), timed as the sum
    of their records. ``segs``: ``segments(traces, scope)`` when the caller has them already; ``loops``: the
    iteration state of the run so far, when the caller feeds the run in parts (a streamed diff)."""
    loops = LoopIterations() if loops is None else loops
    looped: set[str] = set()  # step names of unscoped iterations: their step durations come from their groups
    steps: dict[str, list[float]] = {}
    values: dict[GroupKey, dict[int, float]] = {}
    counts: dict[GroupKey, list[int]] = {}

    def add(key: GroupKey, occ: int, ns: float, launches: int, folded: int) -> None:
        per = values.setdefault(key, {})
        per[occ] = per.get(occ, 0.0) + ns
        c = counts.setdefault(key, [0, 0])
        c[0] += launches
        c[1] += folded

    nested: dict[tuple[int, int], list[tuple[str, float]]] = {}  # (trace, top scope) -> [(path, ns)]
    for t, trace in enumerate(traces):
        for sid, sc in trace.scopes.items():
            if sc.internal or sc.end_ns <= 0 or sc.kind == "load":  # a module load is no group of its own
                continue
            top = top_scope(trace, sid, scope)
            if top is None or top == sid:
                continue
            path = trace.scope_path(sid)
            inner = family_path(path[path.index(trace.scopes[top].name) :] if trace.scopes[top].name in path else path)
            nested.setdefault((t, top), []).append(("/".join(inner), float(sc.duration_ns)))
    for seg, occ, first in step_occurrences(traces, segments(traces, scope) if segs is None else segs):
        trace = traces[seg.trace]
        timed = [r for r in seg.records if r.end_ns > 0]
        if is_unscoped(seg):
            _add_iterations(timed, loops, values, counts, looped)
            continue
        # (not first: the rest of a scope cut in two, whose step time and scope groups are in already)
        if first and seg.scope_id is None and seg.scopes and seg.source is not None:  # an inferred step: its timers
            steps.setdefault(seg.name, []).append(float(seg.duration_ns))
            add(("scope", seg.name, seg.name), occ, float(seg.duration_ns), 1, 0)
            for sid in seg.scopes:
                sc = seg.source.scopes[sid]
                if not sc.internal and sc.end_ns > 0 and sc.kind != "load":
                    path = "/".join((seg.name, *seg.source.scope_path(sid)))
                    add(("scope", seg.name, path), occ, float(sc.duration_ns), 1, 0)
        elif first:
            if seg.scope_id is not None:
                step_ns = float(trace.scopes[seg.scope_id].duration_ns)
            else:
                step_ns = float(sum(_record_total(r)[0] for r in timed))
            steps.setdefault(seg.name, []).append(step_ns)
            add(("scope", seg.name, seg.name), occ, step_ns, 1, 0)
            for path, ns in nested.get((seg.trace, seg.scope_id), ()) if seg.scope_id is not None else ():
                add(("scope", seg.name, path), occ, ns, 1, 0)
        name = seg.name
        busy = 0.0  # the step's time in launches; the rest of a timed step is the program's own, between them
        for rec in timed:  # add(...) inline: this loop runs once per launch of every step
            if rec.fold is None and rec.repeat <= 1:  # _record_total of a measured launch
                ns, launches, folded = max(0, rec.end_ns - rec.start_ns), 1, 0
            else:
                ns, launches, folded = _record_total(rec)
            key = ("kernel", name, kernel_title(rec.kernel, rec.adjoint))
            per = values.get(key)
            if per is None:
                per = values[key] = {}
            per[occ] = per.get(occ, 0.0) + float(ns)
            busy += ns
            c = counts.get(key)
            if c is None:
                c = counts[key] = [0, 0]
            c[0] += launches
            c[1] += folded
        if seg.scope_id is not None or (seg.scopes and seg.source is not None):  # a step with a clock of its own
            add(("launches", name, name), occ, float(busy), 0, 0)
    for kind, step, name in list(values) if looped else ():  # in the order their groups came
        if kind == "scope" and step == name and step in looped:
            steps[step] = [ns for _, ns in sorted(values[(kind, step, name)].items())]
    return steps, values, counts


def _add_iterations(
    records: Sequence[LaunchRecord],
    loops: LoopIterations,
    values: dict[GroupKey, dict[int, float]],
    counts: dict[GroupKey, list[int]],
    looped: set[str],
) -> None:
    """:func:`step_series`' part for work outside every scope: each record's time added to its kernel's and
    its iteration's total, in the iteration :class:`LoopIterations` gives it (the step counted once)."""
    for rec, (name, it, begins) in zip(records, loops.root(records)):
        ns, launches, folded = _record_total(rec)
        step = ("scope", name, name)
        per = values.setdefault(step, {})
        c = counts.setdefault(step, [0, 0])
        c[0] += begins  # one step each
        per[it] = per.get(it, 0.0) + float(ns)
        looped.add(name)
        key = ("kernel", name, kernel_title(rec.kernel, rec.adjoint))
        per = values.setdefault(key, {})
        per[it] = per.get(it, 0.0) + float(ns)
        c = counts.setdefault(key, [0, 0])
        c[0] += launches
        c[1] += folded


def _segments(traces: Sequence[TraceData], scope: str | None, cache: dict) -> list[Segment]:
    """The steps of one run as the diff compares them, computed once per set of traces for the topology and the
    timing: ``segments(traces, scope)``, except that in a zero-code run (no ``scope`` asked for, top-level
    timers repeating) each repetition is one step, as ``summary``, ``report`` and ``check-static`` count them
    (:func:`launchtrace.steps.infer_steps`; issue 26)."""
    key = (tuple(id(t) for t in traces), scope)
    if key not in cache:
        cache[key] = inferred_segments(traces) if scope is None else None
        if cache[key] is None:
            cache[key] = segments(traces, scope)
    return cache[key]


def inferred_segments(traces: Sequence[TraceData]) -> list[Segment] | None:
    """The segments of one run whose top-level timers repeat: each repetition one step named after its unit
    (``simulate+render``), the occurrences outside the repetition as they are; None when nothing is inferred."""
    from launchtrace.steps import infer_steps, occurrences

    if len(split_runs(traces)) != 1:
        return None
    occs = occurrences(traces)
    inferred = infer_steps(occs)
    if inferred is None:
        return None
    covered = {id(o) for step in inferred.steps for o in step}
    kept = [o for o in occs if id(o) not in covered] + inferred.occurrences()
    return sorted((o for o in kept if o.records), key=lambda o: (o.start_ns, o.trace))


def _run_series(
    runs: Sequence[Sequence[TraceData]], side: str, scope: str | None, cache: dict
) -> tuple[list[dict[GroupKey, list[float]]], dict[GroupKey, list[int]], list[WarmUp]]:
    """Each run's per-step series by group with its warm-up steps left out, the launch counts, the warm-up."""
    return series_of_runs([step_series(run, scope, _segments(run, scope, cache)) for run in runs], side)


def series_of_runs(
    per_run: Sequence[tuple[dict[str, list[float]], dict[GroupKey, dict[int, float]], dict[GroupKey, list[int]]]],
    side: str,
) -> tuple[list[dict[GroupKey, list[float]]], dict[GroupKey, list[int]], list[WarmUp]]:
    """:func:`_run_series` from each run's :func:`step_series` answer (a streamed diff builds those trace by
    trace): the series with each run's warm-up steps left out, the launch counts, the warm-up."""
    out, totals, warm = [], {}, []
    for r, (steps, values, counts) in enumerate(per_run):
        skip = {}
        for name, durations in steps.items():
            k = warmup_steps(durations)
            skip[name] = k
            if k:
                rest = sorted(durations[k:])
                warm.append(WarmUp(side, r, name, k, durations[0], rest[len(rest) // 2] if rest else math.nan))
        series = {}
        for key, per in values.items():
            series[key] = [v for occ, v in sorted(per.items()) if occ >= skip.get(key[1], 0)]
        for key, (n, folded) in counts.items():
            c = totals.setdefault(key, [0, 0])
            c[0] += n
            c[1] += folded
        out.append(series)
    return out, totals, warm


def _pooled(runs: list[list[float]], q: float) -> float:
    """The ``q`` quantile of every run's steps together (NaN when none)."""
    pooled = [v for run in runs for v in run]
    return float(np.quantile(pooled, q)) if pooled else math.nan


def _levels(series: dict[GroupKey, list[float]], q: float) -> dict[str, float]:
    """A run's ``q`` step per kernel (over every step scope), the input of its speed factor."""
    return {
        f"{key[1]}\x00{key[2]}": float(np.quantile(values, q))
        for key, values in series.items()
        if key[0] == "kernel" and values
    }


def _drifts(
    series_a: list[dict[GroupKey, list[float]]], series_b: list[dict[GroupKey, list[float]]], q: float, absolute: bool
) -> list[RunDrift]:
    """Each run's speed factor against A's runs (the median of their levels, per kernel); unless ``absolute``,
    the values of each run whose factor applies are divided by it, in place."""
    levels_a = [_levels(s, q) for s in series_a]
    reference: dict[str, float] = {}
    for name in dict.fromkeys(k for lv in levels_a for k in lv):
        values = sorted(lv[name] for lv in levels_a if name in lv)
        mid = len(values) // 2
        reference[name] = values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2.0
    out = []
    for side, runs in (("A", series_a), ("B", series_b)):
        for r, series in enumerate(runs):
            drift = speed_factor(reference, _levels(series, q))
            if not drift.applies:
                continue
            out.append(RunDrift(side, r, drift, applied=not absolute))
            if not absolute:
                runs[r] = {key: [v / drift.factor for v in values] for key, values in series.items()}
    return out


def _timing(
    runs_a: Sequence[Sequence[TraceData]],
    runs_b: Sequence[Sequence[TraceData]],
    scope: str | None,
    opts: dict,
    cache: dict,
    absolute: bool = False,
) -> tuple[list[TimingChange], list[WarmUp], list[RunDrift]]:
    shares = tuple(
        side_shares([run_shares(run, _segments(run, scope, cache)) for run in runs]) for runs in (runs_a, runs_b)
    )
    return timing_of_series(
        _run_series(runs_a, "A", scope, cache), _run_series(runs_b, "B", scope, cache), opts, absolute, shares
    )


def concurrent_verdict(
    verdict: Verdict,
    step: str,
    shares: tuple[Mapping, ...],
    min_runs: int,
    kernel: str | None = None,
    quantile: float = DEFAULT_QUANTILE,
) -> Verdict:
    """``verdict`` unchanged, or, for a one-run verdict (``steps-one-run``) of a step that other threads' unscoped
    launches overlapped often (:data:`~launchtrace.analysis.contention.CONCURRENT_SHARE` of its steps, in either
    side), ``inconclusive``: how the threads shared the machine holds through a run, so one run's steps cannot
    show how it differs between runs (:mod:`launchtrace.analysis.contention`). A ``kernel``'s row in a timed step
    (with :data:`~launchtrace.analysis.contention.WAITED`) is judged by its own launches instead: inconclusive
    once they waited for another thread's launch in ``1 - quantile`` of its steps, in either side (then even its
    ``quantile`` step holds a wait)."""
    if verdict.basis != "steps-one-run":
        return verdict
    own = (step, kernel)
    if contention.WAITED and kernel is not None and any(own in s for s in shares):
        side, share = max(zip("AB", (s.get(own, 0.0) for s in shares)), key=lambda x: x[1])
        if share < 1.0 - quantile - 1e-9:
            return verdict
        what = (
            f"its launches waited for another thread's launch (held it whole) in {share:.0%} of these steps "
            f"(side {side}), so its p{quantile * 100:g} step holds a wait too"
        )
    else:
        side, share = max(zip("AB", (s.get(step, 0.0) for s in shares)), key=lambda x: x[1])
        if share < CONCURRENT_SHARE:
            return verdict
        what = f"other threads launched during {share:.0%} of these steps (side {side})"
    decide = f"{min_runs} runs per side: the run-level test sees how the threads' sharing varies between runs"
    reason = (
        f"{what}, and how threads share the cores holds through a run: one run's steps cannot tell a change, "
        f"compare {min_runs} runs a side (steps alone: {verdict.verdict}, {verdict.reason})"
    )
    return dataclasses.replace(
        verdict, significant=False, direction="none", reason=reason, verdict="inconclusive", decide=decide
    )


def timing_of_series(
    side_a: tuple, side_b: tuple, opts: dict, absolute: bool = False, shares: tuple = ({}, {})
) -> tuple[list, list, list]:
    """The timing rows, warm-up and drift from each side's :func:`series_of_runs` answer; ``shares``: each side's
    :func:`~launchtrace.analysis.contention.side_shares` (other threads beside its steps, see
    :func:`concurrent_verdict`)."""
    series_a, counts_a, warm_a = side_a
    series_b, counts_b, warm_b = side_b
    drifts = _drifts(series_a, series_b, opts["quantile"], absolute)
    keys = list(dict.fromkeys([k for s in series_a for k in s] + [k for s in series_b for k in s]))
    rows = []
    for key in keys:
        if key[0] == "launches":  # described with its step's row, not judged on its own
            continue
        a = [s.get(key, []) for s in series_a]
        b = [s.get(key, []) for s in series_b]
        verdict = concurrent_verdict(
            compare_runs(a, b, **opts),
            key[1],
            shares,
            int(opts["min_runs"]),
            key[2] if key[0] == "kernel" else None,
            float(opts["quantile"]),
        )
        split = _split(series_a, key), _split(series_b, key)
        ca, cb = counts_a.get(key, [0, 0]), counts_b.get(key, [0, 0])
        q = opts["quantile"]
        rows.append(
            TimingChange(
                kind=key[0],
                scope=key[1],
                name=key[2],
                median_a_ns=_pooled(a, 0.5),
                median_b_ns=_pooled(b, 0.5),
                low_a_ns=_pooled(a, q),
                low_b_ns=_pooled(b, q),
                quantile=q,
                launches_a=ca[0],
                launches_b=cb[0],
                folded_a=ca[1],
                folded_b=cb[1],
                verdict=verdict,
                in_launches_a_ns=split[0][0],
                in_launches_b_ns=split[1][0],
                outside_a_ns=split[0][1],
                outside_b_ns=split[1][1],
            )
        )
    return rows, warm_a + warm_b, drifts


def _split(series: list[dict[GroupKey, list[float]]], key: GroupKey) -> tuple[float, float]:
    """For a step's own row: its median step's time in launches and outside them (the program's own code,
    waits, transfers between launches), each the median over the side's steps; NaN for any other row."""
    if key[0] != "scope" or key[1] != key[2]:
        return math.nan, math.nan
    inside, outside = [], []
    for s in series:
        steps, busy = s.get(key, []), s.get(("launches", key[1], key[1]), [])
        if len(steps) == len(busy):
            inside.extend(busy)
            outside.extend(t - b for t, b in zip(steps, busy, strict=True))
    return (float(np.median(inside)), float(np.median(outside))) if inside else (math.nan, math.nan)


def _launch_counts(run: Sequence[TraceData]) -> Counter:
    return Counter((r.op, r.kernel) for t in run for r in t.records)


def pair_runs(
    runs_a: Sequence[Sequence[TraceData]], runs_b: Sequence[Sequence[TraceData]]
) -> list[tuple[Sequence[TraceData], Sequence[TraceData]]]:
    """Which run of A the topology diff holds against which run of B: run k against run k, the side with fewer
    repeating its last, unless the runs do different work. The processes of one program may (a pool whose
    workers each take one job), and the order their traces reach a file is not theirs to keep. So when run k of
    one side launches other kernels than run k of the other, each run is paired with a run of the other side
    that launches the same kernels (else the one whose launches, counted by op and kernel, overlap its own the
    most), one to one while both sides have runs left, and the runs past the shorter side with their best
    match; equal candidates keep the order."""
    count_a, count_b = [_launch_counts(r) for r in runs_a], [_launch_counts(r) for r in runs_b]
    n = max(len(runs_a), len(runs_b))
    by_index = [(min(k, len(runs_a) - 1), min(k, len(runs_b) - 1)) for k in range(n)]
    if all(count_a[i].keys() == count_b[j].keys() for i, j in by_index):
        return [(runs_a[i], runs_b[j]) for i, j in by_index]

    def rank(i: int, j: int) -> tuple:
        x, y = count_a[i], count_b[j]
        same_kernels = x.keys() == y.keys()
        return (not same_kernels, -sum((x & y).values()) / max(1, sum((x | y).values())), abs(i - j), i, j)

    order: list[tuple[int, int]] = []
    used_a: set[int] = set()
    used_b: set[int] = set()
    for i, j in sorted(((i, j) for i in range(len(runs_a)) for j in range(len(runs_b))), key=lambda ij: rank(*ij)):
        if i not in used_a and j not in used_b:
            order.append((i, j))
            used_a.add(i)
            used_b.add(j)
    order += [(i, min(range(len(runs_b)), key=lambda j: rank(i, j))) for i in range(len(runs_a)) if i not in used_a]
    order += [(min(range(len(runs_a)), key=lambda i: rank(i, j)), j) for j in range(len(runs_b)) if j not in used_b]
    order.sort(key=lambda ij: (max(ij), ij))
    return [(runs_a[i], runs_b[j]) for i, j in order]


def _topology(
    a: Sequence[TraceData],
    b: Sequence[TraceData],
    scope: str | None,
    run: int,
    *,
    scalars: bool,
    streams: bool,
    raw: bool,
    cache: dict,
) -> list[SegmentDiff]:
    """Segment-by-segment topology diff of one pair of trace sets (unscoped work in chunks by its content:
    :mod:`launchtrace.analysis.unscoped`)."""
    by_key_a = keyed_segments(_segments(a, scope, cache))
    by_key_b = keyed_segments(_segments(b, scope, cache))
    keys = list(dict.fromkeys([*by_key_a, *by_key_b]))
    return [
        segment_diff(key, by_key_a.get(key, ()), by_key_b.get(key, ()), run, scalars=scalars, streams=streams, raw=raw)
        for key in keys
    ]


def segment_diff(
    key: tuple[str, int], ra: Sequence, rb: Sequence, run: int, *, scalars: bool, streams: bool, raw: bool
) -> SegmentDiff:
    """The diff of one matched pair of segments' records (either may be empty: absent on that side)."""
    if not raw:
        ra, rb = unowned_by_order(ra), unowned_by_order(rb)
    entries = diff_records(ra, rb, scalars=scalars, streams=streams)
    return SegmentDiff(key[0], key[1], len(ra), len(rb), tuple(entries), run)


@dataclasses.dataclass(frozen=True)
class DiffSettings:
    """The options of one diff (:func:`diff_traces`' keywords), in the order the renderers print them: what both
    the list diff and the streamed one (:mod:`launchtrace.analysis.diff_stream`) derive their flags from."""

    scope: str | None = None
    ignore_scalars: bool = False
    ignore_streams: bool = False
    raw_pointers: bool = False
    alpha: float = DEFAULT_ALPHA
    min_change: float = DEFAULT_MIN_CHANGE
    min_runs: int = DEFAULT_MIN_RUNS
    min_steps: int = DEFAULT_MIN_STEPS
    quantile: float = DEFAULT_QUANTILE
    one_run_min_delta_ns: float = ONE_RUN_MIN_DELTA_NS
    absolute: bool = False

    def topology_flags(self) -> dict[str, bool]:
        """What :func:`segment_diff` compares."""
        return {"scalars": not self.ignore_scalars, "streams": not self.ignore_streams, "raw": self.raw_pointers}

    def verdict_options(self) -> dict[str, float]:
        """The verdicts' options (:mod:`launchtrace.analysis.verdicts`)."""
        return {
            "alpha": self.alpha,
            "min_change": self.min_change,
            "min_runs": self.min_runs,
            "min_steps": self.min_steps,
            "quantile": self.quantile,
            "min_abs_change": self.one_run_min_delta_ns,
        }

    def options(self) -> tuple[tuple[str, object], ...]:
        """:attr:`TraceDiff.options`."""
        return tuple((f.name, getattr(self, f.name)) for f in dataclasses.fields(self))


def diff_traces(
    a: Sequence[TraceData] | TraceData,
    b: Sequence[TraceData] | TraceData,
    *,
    scope: str | None = None,
    ignore_scalars: bool = False,
    ignore_streams: bool = False,
    alpha: float = DEFAULT_ALPHA,
    min_change: float = DEFAULT_MIN_CHANGE,
    min_runs: int = DEFAULT_MIN_RUNS,
    min_steps: int = DEFAULT_MIN_STEPS,
    quantile: float = DEFAULT_QUANTILE,
    one_run_min_delta_ns: float = ONE_RUN_MIN_DELTA_NS,
    raw_pointers: bool = False,
    timing: bool = True,
    absolute: bool = False,
) -> TraceDiff:
    """Diff trace set ``a`` (before) against ``b`` (after); see the module docstring.

    Each side may hold several runs (processes; :func:`split_runs` tells them apart): the topology is diffed
    run k of A against run k of B (:func:`pair_runs`: processes that do different work are paired by their
    work), the timing compares the runs of one side against the other's (see
    :mod:`launchtrace.analysis.verdicts` for ``alpha``, ``min_change``, ``min_runs``, ``min_steps`` and
    ``quantile``; ``one_run_min_delta_ns`` is its ``min_abs_change``). ``timing=False`` skips the timing.

    Run-level drift (:mod:`launchtrace.analysis.drift`): a run that ran slower or faster in every kernel at once
    is listed in :attr:`TraceDiff.drift`, and its per-step values are divided by its speed factor before the
    verdicts, so that kernels and scopes are judged relative to their run; ``absolute=True`` judges the raw
    times (the drift is still listed). The per-step values shown in the rows are the ones judged.

    Unowned buffers are compared by the order they first appear in in each segment (:func:`unowned_by_order`):
    two runs allocate at other addresses, so their raw pointers say nothing; ``raw_pointers=True`` compares the
    addresses themselves (two segments of one process).

    Example::

        result = diff_traces(before, after, scope="step", ignore_scalars=True)
        if not result.equal:
            print(result.counts)
        for row in result.timing:
            print(row.group, row.verdict.verdict, row.verdict.reason)
    """
    settings = DiffSettings(
        scope, ignore_scalars, ignore_streams, raw_pointers, alpha, min_change, min_runs, min_steps, quantile,
        one_run_min_delta_ns, absolute,
    )  # fmt: skip
    a = [a] if isinstance(a, TraceData) else list(a)
    b = [b] if isinstance(b, TraceData) else list(b)
    runs_a, runs_b = split_runs(a), split_runs(b)
    pairs = [(a, b)]
    if len(runs_a) > 1 or len(runs_b) > 1:
        pairs = pair_runs(runs_a, runs_b)
    out = []
    cache: dict = {}
    flags = settings.topology_flags()
    for run, (ta, tb) in enumerate(pairs):
        out += _topology(ta, tb, scope, run, **flags, cache=cache)
    opts = settings.verdict_options()
    rows, warm, drifts = _timing(runs_a, runs_b, scope, opts, cache, absolute) if timing else ([], [], [])
    return TraceDiff(
        segments=tuple(out),
        timing=tuple(rows),
        options=settings.options(),
        warmup=tuple(warm),
        runs_a=len(runs_a),
        runs_b=len(runs_b),
        drift=tuple(drifts),
    )
