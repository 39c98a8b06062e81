"""Spans made fit to be written as OTLP JSON, with a warning for everything that had to change.

Readers keep what a file says, but OTLP JSON cannot say all of it: an ``intValue`` is a signed 64-bit integer
(the writer writes a larger one as a ``stringValue``), and orjson refuses to write nesting past its limit (an
attribute of 100 ``arrayValue`` levels, 3 KB of input, made ``pull`` end in ``TypeError: Recursion limit
reached`` with nothing written). :func:`writable` finds both before writing: values nested deeper than
:data:`MAX_VALUE_DEPTH` are cut there (the levels below become one JSON string), and each change is a warning
naming the span and the attribute, so nothing changes silently.

Example::

    spans, problems = writable(result.spans, where="spans.jsonl")
"""

from __future__ import annotations

import dataclasses
from typing import Any

import orjson

from launchtrace.otlp.problems import Problem, Severity
from launchtrace.spans import SpanData

__all__ = ["MAX_VALUE_DEPTH", "writable"]

MAX_VALUE_DEPTH = 32
"""Nesting of array / kvlist values kept as it is; each level is three JSON levels, orjson's limit is 254."""

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_CONTAINERS = (tuple, list, dict)


def _fits(value: Any, depth: int = 0) -> bool:
    t = type(value)
    if t is int:
        return _INT64_MIN <= value <= _INT64_MAX
    if t in (tuple, list):
        return depth < MAX_VALUE_DEPTH and all(_fits(v, depth + 1) for v in value)
    if t is dict:
        return depth < MAX_VALUE_DEPTH and all(_fits(v, depth + 1) for v in value.values())
    return True


def _jsonable(value: Any) -> Any:
    if type(value) is bytes:
        return value.hex()
    if type(value) in (tuple, list):
        return [_jsonable(v) for v in value]
    if type(value) is dict:
        return {str(k): _jsonable(v) for k, v in value.items()}
    return value


def _fix(value: Any, depth: int, notes: set[str]) -> Any:
    t = type(value)
    if t is int and not _INT64_MIN <= value <= _INT64_MAX:
        notes.add(f"integer {str(value)[:40]} is past 64 bits: written as a stringValue")
        return value  # the writer turns it into a string: said, not changed here
    if t in _CONTAINERS:
        if depth >= MAX_VALUE_DEPTH:
            notes.add(f"nested deeper than {MAX_VALUE_DEPTH} levels: the levels below written as one JSON string")
            try:
                return orjson.dumps(_jsonable(value)).decode()
            except (TypeError, orjson.JSONEncodeError):
                return repr(value)[:10_000]
        if t is dict:
            return {k: _fix(v, depth + 1, notes) for k, v in value.items()}
        return tuple(_fix(v, depth + 1, notes) for v in value)
    return value


def _attrs(attrs: tuple, what: str, problems: list[Problem], where: str, memo: dict[int, tuple]) -> tuple:
    known = memo.get(id(attrs))
    if known is not None:
        return known
    if all(_fits(v) for _, v in attrs):
        memo[id(attrs)] = attrs
        return attrs
    fixed = []
    for key, value in attrs:
        notes: set[str] = set()
        new = _fix(value, 0, notes)
        for note in sorted(notes):
            problems.append(Problem(where, f"{what}: attribute {key!r}: {note}", Severity.WARNING))
        fixed.append((key, new))
    out = tuple(fixed)
    memo[id(attrs)] = out
    return out


def writable(spans: list[SpanData], *, where: str = "") -> tuple[list[SpanData], list[Problem]]:
    """``spans`` ready for the OTLP JSON writer, and a warning for each value it cannot write as it is."""
    problems: list[Problem] = []
    memo: dict[int, tuple] = {}  # shared resource / scope tuples are looked at once
    keep = [memo, spans]  # the ids in memo stay valid while this call runs
    out = []
    for span in spans:
        what = f"span {span.span_id.hex()} of trace {span.trace_id.hex()}"
        changes: dict[str, Any] = {}
        for field, label in (("attributes", what), ("resource", f"{what} (resource)"),
                             ("scope_attributes", f"{what} (scope)")):  # fmt: skip
            old = getattr(span, field)
            new = _attrs(old, label, problems, where, memo)
            if new is not old:
                changes[field] = new
        for field, kind in (("events", "event"), ("links", "link")):
            items = getattr(span, field)
            fixed = []
            for i, item in enumerate(items):
                new = _attrs(item.attributes, f"{what} {kind} {i}", problems, where, memo)
                fixed.append(item if new is item.attributes else dataclasses.replace(item, attributes=new))
            if any(a is not b for a, b in zip(fixed, items, strict=True)):
                changes[field] = tuple(fixed)
        out.append(dataclasses.replace(span, **changes) if changes else span)
    del keep
    return out, problems
