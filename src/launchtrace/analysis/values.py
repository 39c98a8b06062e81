"""Where values went bad: the launches whose written arrays held NaN or Inf (``--value-stats``).

- :func:`non_finite`: every (launch, array) whose value statistics hold NaN or Inf, in issue order, each with
  its kernel (adjoint marked), step, array and call site (:class:`BadValues`); the first one is where to look;
- :func:`step_clock`: the step a time belongs to, counted by the run's first outermost scope name (each of
  its occurrences opens a step: :attr:`StepClock.how` says so wherever a step number is shown).

Example::

    from launchtrace.analysis.values import non_finite
    bad = non_finite(traces)
    if bad:
        print(bad[0].line())  # NaN first written by __main__.blowup at step 3: array State.x#4 (springs.py:69) ...
"""

from __future__ import annotations

import bisect
import dataclasses
import math
from collections.abc import Sequence

from launchtrace import conventions as C
from launchtrace.model import LaunchRecord, TraceData, ValueStats

__all__ = [
    "BadValues",
    "StepClock",
    "became_non_finite",
    "became_non_finite_of",
    "non_finite",
    "step_clock",
    "trace_non_finite",
]


@dataclasses.dataclass(frozen=True, slots=True)
class StepClock:
    """Step boundaries of a run: the start times of every step (of the inferred steps, or of every occurrence
    of ``scope``, the first outermost scope name seen), ``how``: one sentence saying so."""

    scope: str | None
    starts: tuple[int, ...]
    inferred: str = ""  # the sentence of launchtrace.steps.infer_steps, when the steps were inferred

    @property
    def how(self) -> str:
        if self.inferred:
            return self.inferred
        if self.scope is None:
            return "no scopes: no steps"
        return f"steps counted by the occurrences of {self.scope!r}, the run's first outermost scope"

    def step(self, start_ns: int) -> int | None:
        """The 0-based step a time falls in (``None``: before the first step, or no steps)."""
        i = bisect.bisect_right(self.starts, start_ns) - 1
        return i if i >= 0 else None


def step_clock(traces: Sequence[TraceData]) -> StepClock:
    """The run's :class:`StepClock`: the steps :func:`launchtrace.steps.infer_steps` finds in a zero-code run
    (each repetition of its top-level timers; their sentence is :attr:`StepClock.how`), else the occurrences
    of the first outermost scope name seen (module loads and Warp's own timers are no steps)."""
    from launchtrace.steps import infer_steps, occurrences, split_runs

    occs = occurrences(traces)
    inferred = infer_steps(occs) if len(split_runs(traces)) == 1 else None
    if inferred is not None:
        return StepClock(inferred.name, tuple(step[0].start_ns for step in inferred.steps), inferred.how)
    tops = [o for o in occs if o.scope_id is not None]
    if not tops:
        return StepClock(None, ())
    first = min(tops, key=lambda o: o.start_ns).name
    return StepClock(first, tuple(sorted(o.start_ns for o in tops if o.name == first)))


@dataclasses.dataclass(frozen=True, slots=True)
class BadValues:
    """One launch whose written array held NaN or Inf right after it ran: ``kernel`` (adjoint marked),
    ``array`` (the owner's label where :func:`launchtrace.own` gave one, else the allocation's label, else the
    kernel parameter), ``param``, ``step`` (see
    :class:`StepClock`; ``None`` before the first step), ``scope`` (the record's scope path), ``site``
    (``file:line``), ``what`` (``NaN`` or ``Inf``) and the ``stats`` measured."""

    kernel: str
    array: str
    param: str
    step: int | None
    scope: str
    site: str
    what: str
    stats: ValueStats
    record: LaunchRecord

    def line(self) -> str:
        step = "outside any step" if self.step is None else f"at step {self.step}"
        where = f" in {self.scope}" if self.scope else ""
        array = self.array if self.array == self.param else f"{self.array} (parameter {self.param})"
        return f"{self.what} first written by {self.kernel} {step}{where}: array {array}, from {self.site}"


def _bad(stats: ValueStats) -> str:
    values = [v for v in (stats.mean, stats.min, stats.max) if isinstance(v, float)]
    if any(math.isnan(v) for v in values):
        return "NaN"
    if any(math.isinf(v) for v in values):
        return "Inf"
    return ""


def non_finite(traces: Sequence[TraceData]) -> list[BadValues]:
    """Every (launch, array) whose value statistics hold NaN or Inf, in issue order (empty without
    ``--value-stats`` or when every written value was finite)."""
    clock = step_clock(traces)
    found = [item for trace in traces for item in trace_non_finite(trace)]
    found.sort(key=lambda item: item[0])
    return [dataclasses.replace(bad, step=clock.step(bad.record.start_ns)) for _, bad in found]


def trace_non_finite(trace: TraceData) -> list[tuple[tuple[int, int], BadValues]]:
    """The :func:`non_finite` findings of one trace with their sort key ``(start, seq)``; ``step`` is left
    None: the step clock needs the whole run (:func:`non_finite` and the streamed ``summary`` set it)."""
    found: list[tuple[tuple[int, int], BadValues]] = []
    for rec in trace.records:
        for probe in rec.probes:
            if not isinstance(probe, ValueStats) or probe.skipped:
                continue
            what = _bad(probe)
            if not what:
                continue
            param = rec.arg_name(probe.key)
            buffer = rec.buffer(probe.key)
            named = (buffer.owner or buffer.alloc) if buffer is not None else None  # own() label, else allocation
            owner = named or param
            bad = BadValues(
                kernel=C.kernel_title(rec.kernel, rec.adjoint),
                array=owner,
                param=param,
                step=None,
                scope="/".join(trace.scope_path(rec.scope_id)) if rec.scope_id is not None else "",
                site=f"{rec.site.file}:{rec.site.line}",
                what=what,
                stats=probe,
                record=rec,
            )
            found.append(((rec.start_ns, rec.seq), bad))
    return found


def became_non_finite(a: Sequence[TraceData], b: Sequence[TraceData]) -> list[BadValues]:
    """The launches of ``b`` whose outputs held NaN/Inf where no launch of the same kernel and array did in
    ``a``: the first of each (kernel, parameter), in issue order. What ``launchtrace diff`` reports."""
    return became_non_finite_of(non_finite(a), non_finite(b))


def became_non_finite_of(bad_a: Sequence[BadValues], bad_b: Sequence[BadValues]) -> list[BadValues]:
    """:func:`became_non_finite` from each side's :func:`non_finite` findings (a streamed diff has those)."""
    before = {(x.kernel, x.param) for x in bad_a}
    seen: set[tuple[str, str]] = set()
    out = []
    for x in bad_b:
        key = (x.kernel, x.param)
        if key not in before and key not in seen:
            seen.add(key)
            out.append(x)
    return out
