"""Checks that need a whole trace: duplicate span ids, parents that are missing, parent cycles.

A reader that streams cannot see these; :func:`check_structure` runs over the spans of a finished read.

- A span id seen twice in one trace: the first copy is kept. An identical copy (Jaeger's fixtures and
  re-exported batches have them) is dropped with a warning; a different span under the same id is an error.
- Spans whose parents form a cycle are dropped (error): no tree can be built from them.
- A parent that is not in the trace is a warning: the span is kept as a root of an incomplete trace
  (sampling, a partial Tempo answer, a time window that cut the trace).

Example::

    from launchtrace.sources.structure import check_structure
    kept, problems = check_structure(spans, where=lambda i: f"spans.jsonl:{lines[i]}")
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from launchtrace.otlp.problems import Problem, Severity
from launchtrace.spans import SpanData

__all__ = ["check_structure"]


def _label(span: SpanData) -> str:
    return f"span {span.span_id.hex()} of trace {span.trace_id.hex()}"


def _cycle_members(parent_of: dict[bytes, bytes | None]) -> set[bytes]:
    """Span ids that lie on a parent cycle (each walk is memoised, so this is linear in the spans)."""
    state: dict[bytes, int] = {}  # 1: on the current walk, 2: done
    on_cycle: set[bytes] = set()
    for start in parent_of:
        if start in state:
            continue
        path: list[bytes] = []
        node: bytes | None = start
        while node is not None and node in parent_of and node not in state:
            state[node] = 1
            path.append(node)
            node = parent_of[node]
        if node is not None and state.get(node) == 1:  # walked into this walk's own path: a cycle
            on_cycle.update(path[path.index(node) :])
        for n in path:
            state[n] = 2
    return on_cycle


def check_structure(
    spans: Sequence[SpanData], where: Callable[[int], str] | None = None
) -> tuple[list[SpanData], list[Problem]]:
    """The spans that are safe to build trees from, and the problems found (see the module docstring).

    ``where(i)`` names the input place of ``spans[i]`` (``"file:line"``); without it problems name the span.
    """
    problems: list[Problem] = []
    first: dict[tuple[bytes, bytes], int] = {}
    unique: list[int] = []
    for i, s in enumerate(spans):
        key = (s.trace_id, s.span_id)
        j = first.get(key)
        if j is None:
            first[key] = i
            unique.append(i)
            continue
        here = where(i) if where else ""
        there = f" (first at {where(j)})" if where and where(j) != here else ""
        if spans[j] == s:
            problems.append(Problem(here, f"{_label(s)}: identical duplicate dropped{there}", Severity.WARNING))
        else:
            problems.append(Problem(here, f"{_label(s)}: duplicate span id, second copy skipped{there}", skipped=1))

    by_trace: dict[bytes, dict[bytes, bytes | None]] = {}
    for i in unique:
        s = spans[i]
        by_trace.setdefault(s.trace_id, {})[s.span_id] = s.parent_span_id
    bad: set[tuple[bytes, bytes]] = set()
    for trace_id, parent_of in by_trace.items():
        for span_id in _cycle_members(parent_of):
            bad.add((trace_id, span_id))
    kept: list[SpanData] = []
    for i in unique:
        s = spans[i]
        here = where(i) if where else ""
        if (s.trace_id, s.span_id) in bad:
            parent = s.parent_span_id.hex() if s.parent_span_id else ""
            problems.append(Problem(here, f"{_label(s)}: skipped, its parent {parent} leads back to it", skipped=1))
            continue
        kept.append(s)
        if s.parent_span_id is not None:
            parents = by_trace[s.trace_id]
            if s.parent_span_id not in parents or (s.trace_id, s.parent_span_id) in bad:
                problems.append(
                    Problem(
                        here,
                        f"{_label(s)}: parent {s.parent_span_id.hex()} is not in the trace; kept as a root",
                        Severity.WARNING,
                    )
                )
    return kept, problems
