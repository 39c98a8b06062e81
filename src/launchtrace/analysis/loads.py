"""Compile and load time kept apart: the ``warp.module.load`` scopes of a run as one line and per scope.

Warp compiles or loads a module on the first launch of any of its kernels; the capture records that as a
``warp.module.load`` scope (kind ``load``, ``launchtrace.capture.tapeload``) and starts the launch after it,
so no launch's time holds a compile. :func:`module_loads` sums those scopes, and says which outermost scope
each ran under (so a warm-up note blames the scope that paid for the compile).

Example::

    from launchtrace.analysis.loads import module_loads
    print(module_loads(traces).line())  # compile/load: 4.310 s, 2 modules (2 compiled, 0 cached; ...)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from launchtrace import conventions as C
from launchtrace.model import ScopeRecord, TraceData
from launchtrace.steps import step_family

__all__ = ["LOAD", "LoadTable", "Loads", "module_loads"]

LOAD = "load"  # the scope kind of a module load (launchtrace.model.ScopeKind.LOAD)


@dataclasses.dataclass(frozen=True, slots=True)
class Loads:
    """Every module load of a run: ``count`` loads of ``modules`` distinct (module, device) pairs,
    ``total_ns`` host time, ``compiled`` of them built now, ``failed`` of them ended in an error (the rest came
    from the kernel cache), and ``by_scope``: outermost scope name -> ns of load time under it (``""``: outside
    every scope)."""

    count: int = 0
    modules: int = 0
    total_ns: int = 0
    compiled: int = 0
    by_scope: tuple[tuple[str, int], ...] = ()
    failed: int = 0

    def line(self) -> str:
        """``compile/load: 4.310 s, 2 modules (2 compiled, 0 cached; not in any launch's time)``, or ``""`` when
        nothing was loaded. Always seconds and both counts: the line keeps its shape from a cold kernel cache
        to a warm one (documented output is compared by shape)."""
        if not self.count:
            return ""
        plural = "module" if self.modules == 1 else "modules"
        failed = f", {self.failed} failed" if self.failed else ""
        return (
            f"compile/load: {self.total_ns / 1e9:.3f} s, {self.modules} {plural} ({self.compiled} compiled, "
            f"{self.count - self.compiled - self.failed} cached{failed}; not in any launch's time)"
        )


def _outermost(trace: TraceData, scope: ScopeRecord) -> str:
    seen: set[int] = set()
    name, sid = "", scope.parent_id
    while sid is not None and sid in trace.scopes and sid not in seen:
        seen.add(sid)
        above = trace.scopes[sid]
        if not above.internal:
            name = above.name
        sid = above.parent_id
    return name


class LoadTable:
    """:func:`module_loads` fed one trace at a time; ``by_scope`` in first-seen order of the traces' ordinals
    (a stream gives traces as they end: the order is put right at the end). Holds a few numbers per module and
    per outermost scope name."""

    def __init__(self) -> None:
        self.count = self.total = self.compiled = self.failed = 0
        self.modules: set[tuple[str, str]] = set()
        self.by_scope: dict[str, int] = {}  # name -> ns
        self.seen: dict[str, list[tuple[int, int, int]]] = {}  # name -> (ordinal, place, ns) of each load: few

    def add(self, trace: TraceData, ordinal: int = 0) -> None:
        place = 0
        for scope in trace.scopes.values():
            if scope.kind != LOAD or scope.end_ns <= 0:
                continue
            attrs = dict(scope.attributes)
            self.count += 1
            self.total += scope.duration_ns
            self.compiled += attrs.get(C.LOAD_RESULT) == "compiled"
            self.failed += attrs.get(C.LOAD_RESULT) == "error"
            self.modules.add((str(attrs.get(C.LOAD_MODULE, "")), str(attrs.get(C.LOAD_DEVICE, ""))))
            top = step_family(_outermost(trace, scope))  # named as the step it ran in (frame 17 -> frame <n>)
            self.by_scope[top] = self.by_scope.get(top, 0) + scope.duration_ns
            self.seen.setdefault(top, []).append((ordinal, place, scope.duration_ns))
            place += 1

    def split(self, rank: Sequence[int], warmup_until: dict[str, int | None]) -> dict[str, tuple[int, int, int]]:
        """Per outermost scope name, its load time ``(in the warm-up, after it, loads after it)``: a load in a
        trace placed before the scope's first occurrence after its warm-up (or after its first occurrence when
        none looked like warm-up: ``warmup_until``, trace places as ``rank`` gives them; ``None``: there is no
        later occurrence) was paid by the start of the run. A module first used late in a run compiles there."""
        out = {}
        for name, loads in self.seen.items():
            until = warmup_until.get(name)  # None: outside every scope, or no later occurrence
            early = [ns for o, _, ns in loads if until is None or rank[o] < until]
            late = [ns for o, _, ns in loads if until is not None and rank[o] >= until]
            out[name] = (sum(early), sum(late), len(late))
        return out

    def loads(self, rank: Sequence[int] | None = None) -> Loads:
        """The :class:`Loads`; ``rank``: each ordinal's place in trace order (None: the ordinals are)."""
        items = list(self.by_scope.items())
        if rank is not None:  # first-seen in trace order
            items.sort(key=lambda item: min((rank[o], p) for o, p, _ in self.seen[item[0]]))
        by_scope = tuple(items)
        return Loads(self.count, len(self.modules), self.total, self.compiled, by_scope, self.failed)


def module_loads(traces: Sequence[TraceData]) -> Loads:
    """The :class:`Loads` of ``traces`` (empty when no ``warp.module.load`` span was recorded)."""
    table = LoadTable()
    for t, trace in enumerate(traces):
        table.add(trace, t)
    return table.loads()
