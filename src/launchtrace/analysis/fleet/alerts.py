"""Fleet alerts: which group (build, host) launches differently or runs slower, with the reason and evidence.

Two ways to ask:

- :func:`against_baseline`: each group and scope of the window against the baseline's group with the same
  values, or, for a group the baseline never saw (a new build, a new host), against all of the baseline's groups
  pooled. Reasons: ``topology_drift`` (a topology fingerprint the baseline does not hold, with the aligned diff
  of the window's representative step against the baseline's most common one: kernel, dims, buffers by owner,
  scalars by name, call site), ``new_foreign_buffers`` (a step touches more foreign buffers than any baseline
  step did: typically an allocation per call), ``launch_count_change`` (records per step differ), and
  ``latency_regression`` per kernel and per scope.
- :func:`among_peers` (no baseline): each group against the other groups of the same window. ``topology_drift``
  and friends when a strict majority of groups share a topology the group does not have; ``latency_regression``
  when the group is slower than the others pooled.

Latency verdicts come from :func:`launchtrace.analysis.verdicts.compare_runs` over runs' per-step values (warm-up
steps dropped with :func:`~launchtrace.analysis.verdicts.warmup_steps`); only "slower" fires. For each group:

1. **Host-wide drift first.** The group's speed factor across all its kernels
   (:func:`launchtrace.analysis.drift.speed_factor`): when every kernel ran slower by about the same factor (a
   busy machine, a lower CPU clock), the group's values are divided by the factor before its kernels and
   scopes are judged (``AlertOptions.absolute``: not divided), and from :data:`HOST_SLOWDOWN_ALERT` on it is
   one ``host_slowdown`` alert of severity ``info``, never a ``latency_regression``.
2. **The same floors as ``launchtrace diff``**: a change must exceed ``min_change`` (relative); judged from
   fewer than ``min_runs`` runs per side, the one-run bound (25 %, the steps' spread, and
   :data:`MIN_ABS_CHANGE_NS` per step); over runs, :data:`RUNS_MIN_ABS_CHANGE_NS` per step (a few
   microseconds on a tiny kernel are no page, and the time between a baseline and a window moves them).
3. **Benjamini-Hochberg over the group's comparisons** (false discovery rate ``alpha``): the p-values are sorted
   and the ``k`` smallest fire when the k-th is at most ``k / m * alpha``. Unlike dividing ``alpha`` among
   ``m`` tests, the strongest change always needs only ``alpha / m``, and the bootstrap's p-value extrapolates
   its tail past the resampling floor (:func:`~launchtrace.analysis.verdicts.compare_runs`), so no number of
   kernels can make an alert impossible.

Latency alerts need at least one run with ``min_steps`` steps after warm-up on each side; with fewer than
``min_runs`` runs on the host (or in the reference), the host is judged as one run and its alert says so (the
one-run bound: only large changes fire). Every alert's evidence names the hosts (and, where the grouping holds
them, the builds) its steps came from and those of its reference.

Everything is deterministic: same inputs, same alerts in the same order.

Example::

    from launchtrace.analysis.fleet.alerts import against_baseline
    for alert in against_baseline(baseline_builder, window_builder):
        print(alert.reason, alert.group_label, alert.scope, alert.kernel, alert.summary)
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Sequence
from typing import Any

from launchtrace.analysis.fleet.baseline import BaselineBuilder, GroupAcc, LatencyAcc, ScopeAcc, TopologyAcc
from launchtrace.analysis.fleet.records import records_from_proto
from launchtrace.analysis.segments import NO_SCOPE
from launchtrace.topology import ChangeKind, DiffEntry, diff_records, format_entry, topology_key

__all__ = [
    "DEFAULT_ALPHA",
    "DEFAULT_MIN_CHANGE",
    "DEFAULT_MIN_RUNS",
    "DEFAULT_MIN_STEPS",
    "HOST_SLOWDOWN_ALERT",
    "MIN_ABS_CHANGE_NS",
    "REASONS",
    "RUNS_MIN_ABS_CHANGE_NS",
    "SEVERITY",
    "Alert",
    "AlertOptions",
    "against_baseline",
    "among_peers",
    "peer_latency_from_series",
]

DEFAULT_ALPHA = 0.01
DEFAULT_MIN_CHANGE = 0.10
DEFAULT_MIN_RUNS = 3
DEFAULT_MIN_STEPS = 5
MIN_ABS_CHANGE_NS = 50_000.0
"""Judged as one run, a kernel or scope must slow by at least this much per step (``launchtrace diff``'s floor,
:data:`launchtrace.analysis.diff.ONE_RUN_MIN_DELTA_NS`): a 10 us kernel moves by more than its own time between
processes."""
RUNS_MIN_ABS_CHANGE_NS = 10_000.0
"""Judged over runs, a kernel or scope must still slow by at least this much per step: the runs' spread is
measured, the time between a baseline and a window is not, and it moves tiny kernels most (a 16 us kernel
+12 % over three runs per host fired in 1 of 3 runs of ``tests/test_fleet_alerts.py`` without it)."""
HOST_SLOWDOWN_ALERT = 0.25
"""A host-wide slowdown is its own ``host_slowdown`` alert from this factor on (1.25x); a smaller one (at least
``min_change``, every kernel together) is still divided out before the kernels are judged, and named in their
alerts' evidence, without an alert of its own (a 10 % busier machine is the weather, not news)."""
MAX_EVIDENCE = 12
MAX_HOSTS = 8
REASONS = ("topology_drift", "new_foreign_buffers", "launch_count_change", "latency_regression", "host_slowdown")
SEVERITY = {"host_slowdown": "info"}
"""Severity per reason (``warning`` when not listed): a host-wide slowdown is the environment, not the program."""


@dataclasses.dataclass(frozen=True)
class AlertOptions:
    """``alpha``: the false-alarm level of one group's latency comparisons together; ``min_change``: the
    smallest slowdown worth an alert (0.10: 10%); ``min_runs`` / ``min_steps``: see
    :func:`~launchtrace.analysis.verdicts.compare_runs`; ``scopes``: only these scopes (empty: all but records
    outside any scope); ``absolute``: judge raw times, not relative to a host-wide slowdown;
    ``min_abs_change_ns``: the one-run floor per step."""

    alpha: float = DEFAULT_ALPHA
    min_change: float = DEFAULT_MIN_CHANGE
    min_runs: int = DEFAULT_MIN_RUNS
    min_steps: int = DEFAULT_MIN_STEPS
    scopes: tuple[str, ...] = ()
    absolute: bool = False
    min_abs_change_ns: float = MIN_ABS_CHANGE_NS
    runs_min_abs_change_ns: float = RUNS_MIN_ABS_CHANGE_NS


@dataclasses.dataclass(frozen=True)
class Alert:
    """One finding. ``group``: the group's values in ``group_by`` order; ``kernel``: the kernel the finding is
    about ("" for a whole scope); ``evidence``: lines for people (diff entries, numbers); ``exemplars``: trace
    ids (hex) of the window's representative step, then the reference's; ``values``: numbers for machines."""

    reason: str
    service: str
    group_by: tuple[str, ...]
    group: tuple[str, ...]
    scope: str
    kernel: str
    summary: str
    evidence: tuple[str, ...]
    exemplars: tuple[str, ...]
    against: str  # "baseline group", "baseline (all groups)", "peers"
    values: tuple[tuple[str, object], ...] = ()

    @property
    def severity(self) -> str:
        """``warning``, or ``info`` for a host-wide slowdown (:data:`SEVERITY`)."""
        return SEVERITY.get(self.reason, "warning")

    @property
    def group_label(self) -> str:
        return ",".join(f"{k}={v}" for k, v in zip(self.group_by, self.group))

    def sort_key(self) -> tuple:
        return (self.group, self.scope, REASONS.index(self.reason) if self.reason in REASONS else 99, self.kernel)


# ---------------------------------------------------------------------------------------------------------
# Topology
# ---------------------------------------------------------------------------------------------------------


def _dominant(topologies: dict[str, TopologyAcc]) -> tuple[str, TopologyAcc]:
    return min(topologies.items(), key=lambda item: (-item[1].count, item[0]))


def _entry_kernel(entries: Sequence[DiffEntry]) -> str:
    return entries[0].record.kernel if entries else ""


def _topology_alerts(make: _AlertMaker, current: ScopeAcc, reference: ScopeAcc, *, peers: bool = False) -> list[Alert]:
    """Alerts for the current scope's topologies the reference does not hold."""
    out: list[Alert] = []
    if not reference.topologies:
        return out
    ref_foreign = max(t.foreign_buffers for t in reference.topologies.values())
    new = {fp: t for fp, t in current.topologies.items() if fp not in reference.topologies}
    if peers:  # a group's own minority topologies are not the question: only its dominant one
        fp, topo = _dominant(current.topologies)
        new = {fp: topo} if fp not in reference.topologies else {}
    references = _References(reference)
    found: dict[tuple, list] = {}  # what is said -> [summary maker, kernel, lines, exemplars, values, steps, n]
    for fp, topo in sorted(new.items()):
        records = records_from_proto(topo.representative)
        ref_fp, ref_topo, entries = references.nearest(records)
        lines = tuple(format_entry(e) for e in entries[:MAX_EVIDENCE])
        if len(entries) > MAX_EVIDENCE:
            lines += (f"... and {len(entries) - MAX_EVIDENCE} more differences",)
        exemplars = (topo.rep_key[0], ref_topo.rep_key[0])
        common = (("fingerprint", fp), ("reference_fingerprint", ref_fp))
        if topo.foreign_buffers > ref_foreign:
            foreign = [e for e in entries if _touches_foreign(e)]
            kernel = _entry_kernel(foreign) or _entry_kernel(entries)
            head = (
                f"{topo.foreign_buffers} foreign buffer(s) per step where the reference had at most {ref_foreign} "
                "(an allocation per call?)"
            )
            values = (*common, ("foreign_buffers", topo.foreign_buffers), ("reference_foreign_buffers", ref_foreign))
            _note(found, "new_foreign_buffers", kernel, lines, exemplars, values, topo.count, lambda n, h=head: h)
        elif entries:
            counts = {str(k): sum(1 for e in entries if e.kind == k) for k in ChangeKind}
            what = ", ".join(f"{n} {k}" for k, n in counts.items() if n)

            def drift(n: int, fp: str = fp, what: str = what, ref_fp: str = ref_fp) -> str:
                if n == 1:
                    return f"topology {fp[:12]} not in the reference ({what} against {ref_fp[:12]})"
                return f"{n} topologies not in the reference ({what}, each against its nearest)"

            values = (*common, *counts.items())
            _note(found, "topology_drift", _entry_kernel(entries), lines, exemplars, values, topo.count, drift)
        if topo.launches != ref_topo.launches:
            head = f"{topo.launches} launches per step where the reference has {ref_topo.launches}"
            values = (*common, ("launches", topo.launches), ("reference_launches", ref_topo.launches))
            _note(found, "launch_count_change", "", lines, exemplars, values, topo.count, lambda n, h=head: h)
    for (reason, kernel, lines, _what), (summary, exemplars, values, steps, n) in found.items():
        values = (*values, ("steps", steps)) + ((("topologies", n),) if n > 1 else ())
        text = f"{summary(n)}, {steps} of {current.steps} steps"
        out.append(make(reason, current.name, kernel, text, lines, exemplars, values))
    shared = {fp: t for fp, t in current.topologies.items() if fp in reference.topologies}
    if peers:
        fp, topo = _dominant(current.topologies)
        shared = {fp: topo} if fp in reference.topologies else {}
    for fp, topo in sorted(shared.items()):
        out += _beside_the_key(make, current, fp, topo, reference.topologies[fp])
    return out


BESIDE_THE_KEY = frozenset({"dtype", "raised"})
"""What :func:`launchtrace.topology.diff_records` compares beside the topology key (and fingerprints leave out)."""


def _beside_the_key(make: _AlertMaker, current: ScopeAcc, fp: str, topo: TopologyAcc, ref: TopologyAcc) -> list[Alert]:
    """A topology the reference holds whose calls still differ: an array of another dtype (a generic kernel runs
    another overload) or a call that raised on one side only. The fingerprint leaves both out (baselines made
    before stay valid), so the two representatives are aligned and compared beside it, as ``diff`` does."""
    entries = [
        e  # equal fingerprints align call for call (scalars or not); a fold cut elsewhere is no difference here
        for e in diff_records(
            records_from_proto(ref.representative), records_from_proto(topo.representative), scalars=False
        )
        if e.kind == ChangeKind.CHANGED and e.fields and all(c.field in BESIDE_THE_KEY for c in e.fields)
    ]
    if not entries:
        return []
    lines = tuple(format_entry(e) for e in entries[:MAX_EVIDENCE])
    if len(entries) > MAX_EVIDENCE:
        lines += (f"... and {len(entries) - MAX_EVIDENCE} more differences",)
    fields = sorted({c.field for e in entries for c in e.fields})
    summary = (
        f"topology {fp[:12]} as in the reference, but {len(entries)} call(s) differ beside it "
        f"({', '.join(fields)}), {topo.count} of {current.steps} steps"
    )
    values = (("fingerprint", fp), ("reference_fingerprint", fp), ("steps", topo.count), ("changed", len(entries)))
    exemplars = (topo.rep_key[0], ref.rep_key[0])
    return [make("topology_drift", current.name, _entry_kernel(entries), summary, lines, exemplars, values)]


NEAREST_OF = 4096
"""Reference topologies (the most common first) a new topology is compared with to explain it by the nearest."""


class _References:
    """The reference's topologies, ranked by count, each with its records and the set of its calls' topology keys
    (made once, on first use)."""

    def __init__(self, reference: ScopeAcc) -> None:
        ranked = sorted(reference.topologies.items(), key=lambda item: (-item[1].count, item[0]))[:NEAREST_OF]
        self.ranked = ranked
        self._made: dict[str, tuple[list, frozenset]] = {}

    def _of(self, fp: str, topo: TopologyAcc) -> tuple[list, frozenset]:
        made = self._made.get(fp)
        if made is None:
            records = records_from_proto(topo.representative)
            made = self._made[fp] = (records, _call_keys(records))
        return made

    def nearest(self, records: list) -> tuple[str, TopologyAcc, list]:
        """The reference topology with the most calls in common with ``records`` (the most common on a tie), and
        the differences: against the most common alone, a program whose steps differ by a step counter (``v =
        it``) explained one inserted launch with ``scalar v 2.0 -> 13.0`` beside it, step after step. One
        alignment only: the others are compared by their keys."""
        keys = _call_keys(records)
        best, score = self.ranked[0], -1
        for fp, topo in self.ranked:
            common = len(keys & self._of(fp, topo)[1])
            if common > score:
                best, score = (fp, topo), common
                if common == len(keys):
                    break
        fp, topo = best
        return fp, topo, diff_records(self._of(fp, topo)[0], records)


def _call_keys(records: list) -> frozenset:
    out = set()
    for r in records:
        try:
            out.add(hash(topology_key(r, raw=False)))  # pointers no allocation names: not compared
        except TypeError:  # an unhashable scalar: left out of the comparison
            continue
    return frozenset(out)


def _note(
    found: dict, reason: str, kernel: str, lines: tuple, exemplars: tuple, values: tuple, steps: int, summary: Any
) -> None:
    """One alert per thing said: new topologies explained by the same evidence (steps that differ only by what
    also differs in the reference, such as a step counter) are one alert with their steps summed, not one each
    (20 alerts, ``1 of 20 steps`` each, for one inserted launch)."""
    key = (reason, kernel, lines, summary(2))  # the text for several: no fingerprint in it
    hit = found.get(key)
    if hit is None:
        found[key] = [summary, exemplars, values, steps, 1]
    else:
        hit[3] += steps
        hit[4] += 1


def _touches_foreign(entry: DiffEntry) -> bool:
    rec = entry.record_b or entry.record
    return any(b.foreign for b in rec.buffers)


# ---------------------------------------------------------------------------------------------------------
# Latency
# ---------------------------------------------------------------------------------------------------------


def _runs(acc: LatencyAcc) -> list[list[float]]:
    from launchtrace.analysis.verdicts import warmup_steps

    out = []
    for values in acc.run_values().values():
        skip = warmup_steps(values)
        if len(values) - skip > 0:
            out.append([float(v) for v in values[skip:]])
    return out


@dataclasses.dataclass
class _Comparison:
    scope: str
    kernel: str  # "" for the scope itself
    a: list[list[float]]
    b: list[list[float]]
    exemplar: str
    make: _AlertMaker
    reference: str = ""  # the reference's hosts (and builds), for the evidence


def _latency_pairs(scope_now: ScopeAcc, reference: ScopeAcc) -> Iterable[tuple[str, LatencyAcc, LatencyAcc]]:
    yield "", reference.duration, scope_now.duration
    for key in sorted(scope_now.kernels):
        if key in reference.kernels:
            yield key[0], reference.kernels[key], scope_now.kernels[key]


def _ready(c: _Comparison, options: AlertOptions) -> bool:
    return bool(c.a and c.b) and sum(map(len, c.a)) >= options.min_steps and sum(map(len, c.b)) >= options.min_steps


def _level(runs: list[list[float]]) -> float:
    """The p10 step of runs pooled (what a speed factor compares)."""
    from launchtrace.analysis.verdicts import DEFAULT_QUANTILE

    values = sorted(v for r in runs for v in r)
    if not values:
        return math.nan
    pos = DEFAULT_QUANTILE * (len(values) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (pos - lo)


def _host_drift(family: list[_Comparison], options: AlertOptions) -> tuple[list[Alert], float]:
    """A group's host-wide slowdown: the ``host_slowdown`` alert (or none) and the factor its values are divided
    by (1 when none applies, or with ``absolute``). Only a slowdown: a host that ran faster in everything is no
    alarm, and dividing by its factor would make its unchanged kernels look slower."""
    from launchtrace.analysis.drift import speed_factor

    kernels = [c for c in family if c.kernel]
    ref = {f"{c.scope}\x00{c.kernel}": _level(c.a) for c in kernels}
    now = {f"{c.scope}\x00{c.kernel}": _level(c.b) for c in kernels}
    drift = speed_factor(ref, now, threshold=options.min_change)
    if not (drift.applies and drift.factor > 1.0):
        return [], 1.0
    used = 1.0 if options.absolute else drift.factor
    if drift.factor < 1.0 + HOST_SLOWDOWN_ALERT:
        return [], used
    c = family[0]
    summary = drift.describe("the host") + ": the environment (load, clocks), not a kernel change"
    judged = (
        "raw times (--absolute)"
        if options.absolute
        else f"its kernels and scopes judged relative to {drift.factor:.2f}x"
    )
    evidence = (
        f"median of {drift.kernels} kernels' p10 step against the reference: {drift.factor:.3f}x; {judged}",
        *_where(c),
    )
    values = (("factor", _num(drift.factor)), ("kernels", drift.kernels), ("agreeing", drift.agreeing))
    alert = c.make("host_slowdown", c.scope, "", summary, evidence, (c.exemplar,), values)
    return [alert], used


def _where(c: _Comparison) -> tuple[str, ...]:
    """The evidence line naming the reference's hosts (and builds); the group's own come with every alert."""
    return (f"reference: {c.reference or 'n/a'}",)


def _benjamini_hochberg(p_values: list[float], alpha: float) -> float:
    """The Benjamini-Hochberg threshold: the largest ``k / m * alpha`` that the k-th smallest p-value is under
    (0.0 when none is: nothing fires)."""
    m = len(p_values)
    threshold = 0.0
    for k, p in enumerate(sorted(p_values), start=1):
        if p <= k / m * alpha:
            threshold = k / m * alpha
    return threshold


def _judge(comparisons: list[_Comparison], options: AlertOptions) -> list[Alert]:
    """Per group: host-wide drift, then every comparison with enough data at the Benjamini-Hochberg threshold of
    the group's p-values; alerts for the slower ones (see the module docstring)."""
    families: dict[tuple[str, ...], list[_Comparison]] = {}
    for c in comparisons:
        if _ready(c, options):
            families.setdefault(c.make.group.values, []).append(c)
    out: list[Alert] = []
    for family in families.values():
        drift_alerts, factor = _host_drift(family, options)
        out.extend(drift_alerts)
        if factor != 1.0:
            family = [dataclasses.replace(c, b=[[v / factor for v in r] for r in c.b]) for c in family]
        first = [_compare(c, options.alpha, options) for c in family]
        threshold = _benjamini_hochberg([1.0 if v.p_value is None else v.p_value for v in first], options.alpha)
        for c, v in zip(family, first):
            if threshold == 0.0 or v.p_value is None or v.p_value > threshold:
                continue
            v = _compare(c, min(threshold * (1 + 1e-9), 0.999), options)  # the interval at the corrected level
            # an absolute floor over runs too: +2 us on a 16 us kernel is no page (one run: compare_runs' own floor)
            floor = options.min_abs_change_ns if v.basis == "steps-one-run" else options.runs_min_abs_change_ns
            if v.significant and v.direction == "slower" and v.effect * _level(c.a) >= floor:
                out.append(_latency_alert(c, v, threshold, len(family), factor, options))
    return out


def _compare(c: _Comparison, alpha: float, options: AlertOptions):
    from launchtrace.analysis.verdicts import compare_runs

    return compare_runs(
        c.a,
        c.b,
        alpha=alpha,
        min_change=options.min_change,
        min_runs=options.min_runs,
        min_steps=options.min_steps,
        min_abs_change=options.min_abs_change_ns,
    )


def _latency_alert(c: _Comparison, v, threshold: float, tests: int, factor: float, options: AlertOptions) -> Alert:
    what = c.kernel or f"scope {c.scope!r}"
    relative = f", relative to the host's {factor:.2f}x slowdown" if factor != 1.0 else ""
    one_run = ""
    if v.basis == "steps-one-run":
        one_run = (
            f"; {v.n_runs_b} run(s) here against {v.n_runs_a}: judged as one run, only a change beyond "
            f"{v.detectable_change:.0%} fires ({options.min_runs} runs per side would tell smaller ones)"
        )
    summary = (
        f"{what} {v.effect:+.0%} slower{relative} ({v.n_runs_b} runs against {v.n_runs_a}, basis {v.basis}){one_run}"
    )
    evidence = (
        v.reason,
        f"effect {v.effect:+.1%}, interval {v.ci_low:+.1%} .. {v.ci_high:+.1%} at level {1 - threshold:.4g}, "
        f"p={_p(v.p_value)} (Benjamini-Hochberg at false discovery rate {options.alpha} over the group's "
        f"{tests} comparisons: fires at p <= {threshold:.2g})",
        f"median step {_ms(_median(c.b))} vs {_ms(_median(c.a))} in the reference; "
        f"steps {v.n_steps_b} vs {v.n_steps_a}",
        *_where(c),
    )
    values = (
        ("effect", _num(v.effect)),
        ("ci_low", _num(v.ci_low)),
        ("ci_high", _num(v.ci_high)),
        ("p_value", _num(v.p_value)),
        ("threshold", _num(threshold)),
        ("basis", v.basis),
        ("runs", v.n_runs_b),
        ("reference_runs", v.n_runs_a),
        ("steps", v.n_steps_b),
        ("reference_steps", v.n_steps_a),
        ("host_factor", _num(factor)),
    )
    return c.make("latency_regression", c.scope, c.kernel, summary, evidence, (c.exemplar,), values)


def _median(runs: list[list[float]]) -> float:
    values = sorted(v for r in runs for v in r)
    if not values:
        return math.nan
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2


def _ms(ns: float) -> str:
    return f"{ns / 1e6:.3f} ms"


def _p(p: float | None) -> str:
    return "n/a" if p is None else f"{p:.2g}"


def _num(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else round(float(x), 6)


# ---------------------------------------------------------------------------------------------------------
# Drivers
# ---------------------------------------------------------------------------------------------------------


def _host_of(run: str) -> str:
    """The host in a run id (:func:`launchtrace.steps.run_id`: ``[<file>/]pid/<host>/<pid>``, else
    ``[<file>/]instance/<host>/<id>`` or ``[<file>/]instance/<id>``, else the file): the host, the instance, or
    the file's base name."""
    parts = run.split("/")
    for marker in ("pid", "instance"):
        if marker in parts[:-1]:
            i = len(parts) - 1 - parts[::-1].index(marker, 1)
            return parts[i + 1] or "?"
    return parts[-1] or "?"


def hosts_and_builds(group_by: tuple[str, ...], groups: Sequence[GroupAcc]) -> str:
    """``hosts h1 (2 runs), h2 (1 run); builds 1.1`` for evidence: hosts from the runs' keys
    (:func:`_host_of`), builds from the groups' ``service.version`` when the grouping holds it."""
    hosts: dict[str, int] = {}
    for g in groups:
        for run in sorted(g.runs):
            host = _host_of(run)
            hosts[host] = hosts.get(host, 0) + 1
    shown = ", ".join(f"{h} ({n} run{'s' if n != 1 else ''})" for h, n in sorted(hosts.items())[:MAX_HOSTS])
    shown += f" and {len(hosts) - MAX_HOSTS} more" if len(hosts) > MAX_HOSTS else ""
    text = f"hosts {shown or 'unknown'}"
    if "service.version" in group_by:
        i = group_by.index("service.version")
        builds = sorted({g.values[i] for g in groups} - {""})
        text += "; builds " + ", ".join(builds) if builds else "; builds not named (no service.version)"
    else:
        text += "; builds not recorded per run (group by service.version to name them)"
    return text


class _AlertMaker:
    def __init__(self, group_by: tuple[str, ...], group: GroupAcc, against: str) -> None:
        self.group_by, self.group, self.against = group_by, group, against

    def where(self) -> str:
        return hosts_and_builds(self.group_by, [self.group])

    def __call__(
        self,
        reason: str,
        scope: str,
        kernel: str,
        summary: str,
        evidence: tuple[str, ...],
        exemplars: tuple[str, ...],
        values: tuple[tuple[str, object], ...],
    ) -> Alert:
        return Alert(
            reason=reason,
            service=self.group.service,
            group_by=self.group_by,
            group=self.group.values,
            scope=scope,
            kernel=kernel,
            summary=summary,
            evidence=(*evidence, f"from {self.where()}"),
            exemplars=tuple(e for e in exemplars if e),
            against=self.against,
            values=values,
        )


def _wanted(name: str, options: AlertOptions) -> bool:
    """Whether ``name``'s steps are judged at all: the scopes asked for, else every one."""
    return name in options.scopes if options.scopes else True


def _topology_wanted(name: str, options: AlertOptions) -> bool:
    """Whether ``name``'s topology is judged: not that of work outside every scope unless it is asked for (its
    steps are the exporter's roots, cut by time: their fingerprints differ from run to run; its latency is
    judged per loop iteration, :func:`~launchtrace.analysis.fleet.occurrences.loop_iterations`)."""
    return name in options.scopes if options.scopes else name != NO_SCOPE


def _exemplar(scope: ScopeAcc) -> str:
    return _dominant(scope.topologies)[1].rep_key[0] if scope.topologies else ""


def _pooled(groups: Iterable[GroupAcc], name: str) -> ScopeAcc:
    pooled = ScopeAcc(name)
    for g in groups:
        if name in g.scopes:
            pooled.merge(_copy(g.scopes[name]))
    return pooled


def _copy(scope: ScopeAcc) -> ScopeAcc:
    from launchtrace.v1 import baseline_pb2 as pb

    return ScopeAcc.from_proto(scope.to_proto(), pb.Limits())


def against_baseline(
    baseline: BaselineBuilder, window: BaselineBuilder, options: AlertOptions | None = None
) -> list[Alert]:
    """Alerts for ``window``'s groups against ``baseline`` (both as builders); see the module docstring."""
    options = options or AlertOptions()
    if baseline.group_by != window.group_by:
        raise ValueError(
            f"the baseline groups by {','.join(baseline.group_by)}, the window by {','.join(window.group_by)}"
        )
    alerts: list[Alert] = []
    comparisons: list[_Comparison] = []
    for key in sorted(window.groups):
        group = window.groups[key]
        own = baseline.groups.get(key)
        against = "baseline group" if own is not None else "baseline (all groups)"
        make = _AlertMaker(window.group_by, group, against)
        for name in sorted(group.scopes):
            if not _wanted(name, options):
                continue
            now = group.scopes[name]
            ref = own.scopes.get(name) if own is not None else None
            if ref is None:
                ref = _pooled(baseline.groups.values(), name)
            topology = _topology_wanted(name, options)
            if not ref.steps:
                if topology:
                    summary = f"scope {name!r} ran {now.steps} steps; the baseline never saw it"
                    values = (("steps", now.steps),)
                    alerts.append(make("topology_drift", name, "", summary, (), (_exemplar(now),), values))
                continue
            if topology:
                alerts.extend(_topology_alerts(make, now, ref))
            where = hosts_and_builds(window.group_by, [own] if own is not None else list(baseline.groups.values()))
            for kernel, a, b in _latency_pairs(now, ref):
                comparisons.append(_Comparison(name, kernel, _runs(a), _runs(b), _exemplar(now), make, where))
    alerts.extend(_judge(comparisons, options))
    return sorted(alerts, key=Alert.sort_key)


def among_peers(window: BaselineBuilder, options: AlertOptions | None = None, *, latency: bool = True) -> list[Alert]:
    """Alerts for the groups of ``window`` that differ from their peers (no baseline); needs 3 groups or more
    sharing a scope. ``latency=False``: topology only (the latency then comes from elsewhere, e.g.
    :func:`peer_latency_from_series`)."""
    options = options or AlertOptions()
    alerts: list[Alert] = []
    comparisons: list[_Comparison] = []
    names = sorted({n for g in window.groups.values() for n in g.scopes if _wanted(n, options)})
    for name in names:
        members = [window.groups[k] for k in sorted(window.groups) if name in window.groups[k].scopes]
        if len(members) < 3:
            continue
        dominant = {g.values: _dominant(g.scopes[name].topologies)[0] for g in members if g.scopes[name].topologies}
        tally: dict[str, int] = {}
        for fp in dominant.values():
            tally[fp] = tally.get(fp, 0) + 1
        majority = next((fp for fp, n in sorted(tally.items()) if 2 * n > len(dominant)), None)
        for g in members:
            make = _AlertMaker(window.group_by, g, "peers")
            others = [o for o in members if o is not g]
            now = g.scopes[name]
            if majority is not None and dominant.get(g.values) != majority and _topology_wanted(name, options):
                ref = ScopeAcc(name)
                holder = next(o for o in others if dominant.get(o.values) == majority)
                ref.topologies = {majority: holder.scopes[name].topologies[majority]}
                ref.steps = holder.scopes[name].steps
                ref_all = _pooled([o for o in others if dominant.get(o.values) == majority], name)
                ref.topologies[majority] = dataclasses.replace(
                    ref.topologies[majority],
                    foreign_buffers=max(t.foreign_buffers for t in ref_all.topologies.values()),
                )
                alerts.extend(_topology_alerts(make, now, ref, peers=True))
            if not latency:
                continue
            pooled = _pooled(others, name)
            where = hosts_and_builds(window.group_by, others)
            for kernel, a, b in _latency_pairs(now, pooled):
                comparisons.append(_Comparison(name, kernel, _runs(a), _runs(b), _exemplar(now), make, where))
    alerts.extend(_judge(comparisons, options))
    return sorted(alerts, key=Alert.sort_key)


def peer_latency_from_series(
    series: Sequence[tuple[tuple[str, ...], str, str, Sequence[float]]],
    group_by: tuple[str, ...],
    options: AlertOptions | None = None,
) -> list[Alert]:
    """Latency outliers among peers from per-group time series (TraceQL metrics: one value per time step, e.g. a
    kernel's median launch duration): ``(group values, service, kernel, values)`` each. A group's series is one
    run of steps; each other group's series of the same kernel is one run of the reference."""
    options = options or AlertOptions()
    by_kernel: dict[str, list[tuple[tuple[str, ...], str, list[float]]]] = {}
    for group, service, kernel, values in series:
        clean = [float(v) for v in values if v == v and v > 0]
        if clean:
            by_kernel.setdefault(kernel, []).append((tuple(group), service, clean))
    comparisons = []
    for kernel in sorted(by_kernel):
        members = sorted(by_kernel[kernel])
        if len({g for g, _, _ in members}) < 3:
            continue
        for group, service, values in members:
            acc = GroupAcc(group, service)
            make = _AlertMaker(group_by, acc, "peers (TraceQL metrics)")
            others = [v for g, _, v in members if g != group]
            where = "peers " + ", ".join(",".join(g) for g, _, _ in members if g != group)
            comparisons.append(_Comparison("", kernel, others, [values], "", make, where))
    return sorted(_judge(comparisons, options), key=Alert.sort_key)
