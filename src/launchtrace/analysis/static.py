"""Is a scope's launch topology the same every time it runs (could a CUDA graph capture it)?

Every occurrence of the scope is aligned against the first with :func:`launchtrace.topology.diff_records`
(streams compared, pointers as capture resolved them: owner label and offset when owned, else the raw
pointer). Each difference becomes a :class:`Finding` in the seed's terms:

- ``varying launches``: a launch inserted, removed, or a different kernel / op at a position;
- ``varying dims``, ``varying scalars`` (by parameter name), ``varying streams``, ``varying dtypes`` (an
  array of another element type: a generic kernel runs another overload);
- ``raised in some occurrences``: a launch that raised, and ran nothing, in some occurrences only;
- ``varying buffers``: an owned argument points at another buffer or offset;
- ``buffer allocated per call``: a pointer no owner covers that changes between occurrences (a temporary
  allocated inside the scope: the graph would replay a freed address). Where the capture saw the
  allocations (:mod:`launchtrace.allocations`), an unowned buffer is its allocation's identity, not its
  address: a temporary freed and allocated again by the same statement every time is the same buffer,
  wherever the allocator put it, and one that two calls alternate between (``tmp = wp.zeros(n)`` in a loop:
  the new one is allocated before the old one is dropped) is too; only a site that hands every occurrence an
  allocation never seen before (kept alive: the program holds one per call) is reported;
- ``foreign buffer``: a pointer no owner covers in a program that labels its buffers (shared through a
  module global or allocated elsewhere) -- a warning on its own, since it is stable, but two producers
  running side by side would share it;
- ``jit input``: a buffer that a JIT replay (tinygrad's ``TinyJit``, records whose ``api`` is
  ``tinygrad.TinyJit``) swaps in on every call: the jit's inputs, by design (the jit captured everything else).
  Not a per-call allocation, and it does not break (the jit itself is the replayed graph).

**Warm-up.** The first occurrences of a scope often differ by design: a tinygrad JIT runs its first call
eagerly and captures on the second; a Warp program may initialise on its first step. Up to :data:`MAX_WARMUP`
leading occurrences that are unlike all the later ones (which agree among themselves, at least two of them) are
skipped; :attr:`StaticReport.warmup` says how many, and :attr:`StaticReport.notes` says so in words. When even
the later occurrences differ, nothing is skipped: the findings cover every occurrence.

Example::

    from launchtrace.analysis.static import check_static
    report = check_static([trace], "step")
    print(report.static, [f.reason for f in report.findings])
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from launchtrace.analysis.segments import segments
from launchtrace.model import LaunchRecord, TextEnum, TraceData
from launchtrace.topology import AllocRef, ChangeKind, diff_records, format_value, slotless

__all__ = ["Finding", "Reason", "StaticReport", "check_static"]


class Reason(TextEnum):
    """Why a scope is not graph-capturable (or, for ``FOREIGN``, a warning)."""

    LAUNCHES = "varying launches"
    DIMS = "varying dims"
    SCALARS = "varying scalars"
    BUFFERS = "varying buffers"
    ALLOCATED = "buffer allocated per call"
    STREAMS = "varying streams"
    DTYPES = "varying dtypes"
    RAISED = "raised in some occurrences"
    FOREIGN = "foreign buffer"
    JIT_INPUT = "jit input"


@dataclasses.dataclass(frozen=True, slots=True)
class Finding:
    """One reason, at one launch position. Columns: ``reason``; ``position`` (index in the first occurrence,
    or in the later one for an insertion); ``kernel``; ``name`` (parameter, or ``""``); ``occurrences`` (how
    many occurrences differ from the first there); ``example`` (``"before -> after"`` of the first
    difference; a foreign buffer's name, :meth:`LaunchRecord.buffer_label`: its allocation,
    ``<host data> (prog.py:23)``, else its pointer); ``site``; ``breaks`` (False only for a warning)."""

    reason: Reason
    position: int
    kernel: str
    name: str
    occurrences: int
    example: str
    site: str
    breaks: bool = True


@dataclasses.dataclass(frozen=True, slots=True)
class StaticReport:
    """``scope``; ``occurrences`` (how many were found); ``static`` (same topology every time and at least
    two occurrences compared); ``findings``; ``warmup`` (leading occurrences skipped as warm-up, see the module
    docstring) and ``notes`` (sentences for people: what was skipped)."""

    scope: str
    occurrences: int
    static: bool
    findings: tuple[Finding, ...]
    warmup: int = 0
    notes: tuple[str, ...] = ()


MAX_WARMUP = 2
"""Leading occurrences that may be skipped as warm-up (a tinygrad JIT: the eager call and the capturing one)."""
JIT_API = "tinygrad.TinyJit"


_FIELD_REASON = {
    "dim": Reason.DIMS,
    "scalar": Reason.SCALARS,
    "stream": Reason.STREAMS,
    "kernel": Reason.LAUNCHES,
    "op": Reason.LAUNCHES,
    "dtype": Reason.DTYPES,  # a generic kernel runs another overload
    "raised": Reason.RAISED,  # a launch that raised ran nothing in that occurrence
}


def _buffer_reason(before: object, after: object) -> Reason:
    if type(before) is AllocRef and type(after) is AllocRef:
        return Reason.ALLOCATED if slotless(before.identity) == slotless(after.identity) else Reason.BUFFERS
    unowned = isinstance(before, (int, AllocRef)) and isinstance(after, (int, AllocRef))
    return Reason.ALLOCATED if unowned else Reason.BUFFERS


def _reallocated(before: object, after: object) -> bool:
    """Whether two values of one argument are two allocations of one statement (same site, other slot)."""
    return (
        type(before) is AllocRef
        and type(after) is AllocRef
        and before[1] == after[1]
        and slotless(before.identity) == slotless(after.identity)
    )


def _host_prefix(rec: LaunchRecord, name: str) -> str:
    """``"<host data> (prog.py:23) at "`` where argument ``name`` of ``rec`` is the program's NumPy memory
    (:meth:`LaunchRecord.host_data`): its addresses are what changed, but the reader needs to know whose they
    are; ``""`` otherwise."""
    for b in rec.buffers:
        if (b.name or rec.arg_name(b.key)) == name and rec.host_data(b):
            return f"{rec.buffer_label(b)} at "
    return ""


def _jit_replay(rec: LaunchRecord) -> bool:
    return rec.api == JIT_API


def _findings(occ: Sequence[Sequence[LaunchRecord]]) -> tuple[Finding, ...]:
    """Every later occurrence against the first of ``occ`` (see the module docstring)."""
    found: dict[tuple, list] = {}  # (reason, position, name) -> [finding fields..., count]

    def note(reason: Reason, pos: int, rec, name: str, example: str, breaks: bool = True) -> None:
        key = (reason, pos, name)
        if key in found:
            found[key][4] += 1
        else:
            found[key] = [reason, pos, rec.kernel, name, 1, example, str(rec.site), breaks]

    slots: dict[tuple, list] = {}  # (position, name) -> [record, example, identities of the later occurrences]
    for later in occ[1:]:
        for e in diff_records(occ[0], later, scalars=True, streams=True):
            if e.kind != ChangeKind.CHANGED:
                pos = e.index_a if e.index_a is not None else e.index_b
                moved = f" #{e.index_a}->#{e.index_b}" if e.kind == ChangeKind.MOVED else ""  # the order changed
                note(Reason.LAUNCHES, pos, e.record, "", f"{e.kind} {e.record.kernel}{moved}")
                continue
            jit = _jit_replay(e.record) and (e.record_b is None or _jit_replay(e.record_b))
            for f in e.fields:
                if f.field == "site":
                    continue
                example = f"{format_value(f.before)} -> {format_value(f.after)}"
                if f.field == "buffer":
                    example = _host_prefix(e.record, f.name) + example
                if f.field == "buffer" and jit:
                    note(Reason.JIT_INPUT, e.index_a, e.record, f.name, example, breaks=False)
                    continue
                if f.field == "buffer" and _reallocated(f.before, f.after):
                    held = slots.setdefault((e.index_a, f.name), [e.record, f"{format_value(f.before)} -> ", []])
                    held[2].append(f.after)
                    continue
                reason = _buffer_reason(f.before, f.after) if f.field == "buffer" else _FIELD_REASON[f.field]
                note(reason, e.index_a, e.record, f.name, example)
    for (pos, name), (rec, example, after) in slots.items():
        # A new allocation in every later occurrence, never one seen before: one per call, kept alive.
        if len(after) == len(occ) - 1 and len(set(after)) == len(after):
            found[(Reason.ALLOCATED, pos, name)] = [
                Reason.ALLOCATED, pos, rec.kernel, name, len(after), example + format_value(after[0]), str(rec.site),
                True,
            ]  # fmt: skip
    for records in occ:
        for pos, rec in enumerate(records):
            for b in rec.buffers:
                if b.foreign and b.owner is None:
                    name = b.name or rec.arg_name(b.key)
                    allocated = (Reason.ALLOCATED, pos, name) in found
                    # by its name (its allocation, the program's host data), the address only where none is known
                    note(Reason.FOREIGN, pos, rec, name, rec.buffer_label(b), breaks=allocated)
    return tuple(sorted((Finding(*v) for v in found.values()), key=lambda f: (f.position, f.reason.value)))


def _warmup(occ: Sequence[Sequence[LaunchRecord]]) -> tuple[int, tuple[Finding, ...]]:
    """``(occurrences skipped as warm-up, the findings over the rest)``: the fewest leading occurrences (at most
    :data:`MAX_WARMUP`, leaving two or more) after which the rest agree; none when they never do."""
    everything = _findings(occ)
    if not any(f.breaks for f in everything):
        return 0, everything
    for k in range(1, min(MAX_WARMUP, len(occ) - 2) + 1):
        rest = _findings(occ[k:])
        if not any(f.breaks for f in rest):
            return k, rest
    return 0, everything


def _warmup_note(occ: Sequence[Sequence[LaunchRecord]], k: int) -> str:
    jit = any(_jit_replay(r) for r in occ[k]) and not all(_jit_replay(r) for o in occ[:k] for r in o)
    calls = "eager first call" if k == 1 else "eager and capturing calls"
    why = f"a tinygrad JIT's {calls}" if jit else "unlike every later occurrence"
    sizes = ", ".join(f"#{i}: {len(o)} launches" for i, o in enumerate(occ[:k]))
    return (
        f"skipped the first {k} occurrence{'s' if k > 1 else ''} as warm-up ({why}; {sizes}, "
        f"then {len(occ[k])} launches every time)"
    )


def check_static(
    traces: Sequence[TraceData] | TraceData, scope: str, steps: Sequence[Sequence[LaunchRecord]] | None = None
) -> StaticReport:
    """Check every occurrence of ``scope`` in ``traces`` against the first after warm-up (see the module
    docstring). ``steps``: the records of each occurrence, when the caller cut them (an inferred step of a
    zero-code program, :func:`launchtrace.steps.infer_steps`); ``scope`` then only names them.

    Example::

        report = check_static([trace], "step")
        for f in report.findings:
            print(f.reason, f.kernel, f.name, f.example)
    """
    traces = [traces] if isinstance(traces, TraceData) else list(traces)
    occ = [s.records for s in segments(traces, scope)] if steps is None else [tuple(s) for s in steps]
    skipped, findings = _warmup(occ)
    notes = (_warmup_note(occ, skipped),) if skipped else ()
    static = len(occ) - skipped >= 2 and not any(f.breaks for f in findings)
    return StaticReport(scope, len(occ), static, findings, skipped, notes)
