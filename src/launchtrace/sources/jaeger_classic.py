"""Jaeger's classic JSON (``GET /api/traces/{id}``, the UI's "Download JSON") -> :class:`SpanData`.

The mapping is the inverse of Jaeger's OTLP -> Jaeger translation:

- ``traceID`` printed as 16 hex digits (a zero high half) is left-padded to 32;
- the first ``CHILD_OF`` reference into the same trace is the parent; every other reference (``FOLLOWS_FROM``,
  ``CHILD_OF`` into another trace) becomes a link with ``opentracing.ref_type`` = ``follows_from`` / ``child_of``;
- ``startTime`` / ``duration`` / log ``timestamp`` are microseconds; ``logs`` become events named by their
  ``event`` field;
- tag types ``string``, ``bool``, ``int64`` (a JSON string beyond 2^53), ``float64``, ``binary`` (base64);
- ``span.kind``, ``otel.status_code``, ``otel.status_description``, ``otel.scope.name`` / ``otel.scope.version``
  and ``w3c.tracestate`` tags go back to their span fields; ``error=true`` without a status code means ERROR;
- ``processes[processID]`` is the resource: ``service.name`` from ``serviceName`` plus the process tags.

Span and trace ``warnings`` become warning problems.

Example::

    from launchtrace.sources.jaeger_classic import spans_from_jaeger_traces
    spans, problems = spans_from_jaeger_traces(body["data"], where="http://jaeger:16686/api/traces/0001")
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterator
from typing import Any

from launchtrace.errors import BadSpan
from launchtrace.otlp.ids import IdError, padded_hex_trace_id, span_id_from_text
from launchtrace.otlp.problems import Problem, Severity
from launchtrace.spans import (
    KIND_CLIENT,
    KIND_CONSUMER,
    KIND_INTERNAL,
    KIND_PRODUCER,
    KIND_SERVER,
    KIND_UNSPECIFIED,
    STATUS_ERROR,
    STATUS_OK,
    STATUS_UNSET,
    SpanData,
    SpanEvent,
    SpanLink,
)

__all__ = ["spans_from_jaeger_traces"]

_KINDS = {
    "server": KIND_SERVER,
    "client": KIND_CLIENT,
    "producer": KIND_PRODUCER,
    "consumer": KIND_CONSUMER,
    "internal": KIND_INTERNAL,
    "": KIND_UNSPECIFIED,
}
_STATUS = {"OK": STATUS_OK, "ERROR": STATUS_ERROR, "UNSET": STATUS_UNSET}
_SPECIAL_TAGS = frozenset(
    {"span.kind", "otel.status_code", "otel.status_description", "otel.scope.name", "otel.scope.version",
     "w3c.tracestate", "error"}
)  # fmt: skip


def _warnings(obj: dict) -> list:
    """Jaeger's ``warnings``: a list of strings, or null; anything else is not warnings (and not iterated)."""
    w = obj.get("warnings")
    return w if type(w) is list else ([] if w is None else [repr(w)])


def _tag_value(tag: Any) -> tuple[str, Any]:
    if type(tag) is not dict or type(tag.get("key")) is not str:
        raise BadSpan(f"tag must be an object with a string key, got {tag!r}")
    kind, value = tag.get("type", "string"), tag.get("value")
    try:
        if kind == "string" and type(value) is str:
            return tag["key"], value
        if kind == "bool" and type(value) is bool:
            return tag["key"], value
        if kind == "int64" and type(value) in (int, str):
            return tag["key"], int(value)
        if kind == "float64" and type(value) in (int, float, str):
            return tag["key"], float(value)
        if kind == "binary" and type(value) is str:
            return tag["key"], base64.b64decode(value, validate=True)
    except (ValueError, binascii.Error):
        pass
    raise BadSpan(f"tag {tag['key']!r}: {kind!r} value {value!r} cannot be read")


def _tags(tags: Any) -> list[tuple[str, Any]]:
    if tags is None:
        return []
    if type(tags) is not list:
        raise BadSpan(f"tags must be a list, got {type(tags).__name__}")
    return [_tag_value(t) for t in tags]


def _micros(v: Any, what: str) -> int:
    if type(v) is int or (type(v) is str and v.isdigit()):
        return int(v) * 1000
    if type(v) is float and v.is_integer():
        return int(v) * 1000
    raise BadSpan(f"{what} must be an integer number of microseconds, got {v!r}")


def _resources(processes: Any) -> dict[str, tuple]:
    if processes is None:
        return {}
    if type(processes) is not dict:
        raise BadSpan(f"processes must be an object, got {type(processes).__name__}")
    out = {}
    for pid, proc in processes.items():
        if type(proc) is not dict:
            raise BadSpan(f"process {pid!r} must be an object")
        service = proc.get("serviceName", "")
        out[pid] = (("service.name", service), *(kv for kv in _tags(proc.get("tags")) if kv[0] != "service.name"))
    return out


def _objects(items: Any, plural: str, singular: str) -> Iterator[dict]:
    """The objects of list ``items`` (``None``: none) one by one, or :class:`BadSpan` naming what is wrong
    (a wrong item when it is reached, so the first problem in reading order is the one told)."""
    if items is not None and type(items) is not list:
        raise BadSpan(f"{plural} must be a list, got {type(items).__name__}")
    for item in items or ():
        if type(item) is not dict:
            raise BadSpan(f"{singular} must be an object, got {item!r}")
        yield item


def _links_and_parent(refs: Any, trace_id: bytes) -> tuple[bytes | None, tuple]:
    parent = None
    links = []
    for ref in _objects(refs, "references", "reference"):
        ref_trace = padded_hex_trace_id(ref.get("traceID", ""))
        ref_span = span_id_from_text(ref.get("spanID", ""), "hex")
        ref_type = ref.get("refType", "CHILD_OF")
        if ref_type == "CHILD_OF" and parent is None and ref_trace == trace_id:
            parent = ref_span
        elif ref_type in ("CHILD_OF", "FOLLOWS_FROM"):
            links.append(SpanLink(ref_trace, ref_span, (("opentracing.ref_type", ref_type.lower()),)))
        else:
            raise BadSpan(f"unknown refType {ref_type!r}")
    return parent, tuple(links)


def _events(logs: Any) -> tuple:
    events = []
    for log in _objects(logs, "logs", "log"):
        fields = _tags(log.get("fields"))
        name = next((v for k, v in fields if k == "event" and type(v) is str), "")
        attrs = tuple(kv for kv in fields if not (kv[0] == "event" and kv[1] == name and name))
        events.append(SpanEvent(name, _micros(log.get("timestamp", 0), "log timestamp"), attrs))
    return tuple(events)


def _span(d: Any, resources: dict[str, tuple]) -> SpanData:
    if type(d) is not dict:
        raise BadSpan(f"span must be an object, got {type(d).__name__}")
    trace_id = padded_hex_trace_id(d.get("traceID", ""))
    span_id = span_id_from_text(d.get("spanID", ""), "hex")
    parent, links = _links_and_parent(d.get("references"), trace_id)
    tags = _tags(d.get("tags"))
    special = {k: v for k, v in tags if k in _SPECIAL_TAGS}
    kind_name = special.get("span.kind", "")
    if kind_name not in _KINDS:
        raise BadSpan(f"unknown span.kind {kind_name!r}")
    status = _STATUS.get(str(special.get("otel.status_code", "UNSET")).upper())
    if status is None:
        raise BadSpan(f"unknown otel.status_code {special['otel.status_code']!r}")
    if status == STATUS_UNSET and special.get("error") is True:
        status = STATUS_ERROR
    name = d.get("operationName", "")
    if type(name) is not str:
        raise BadSpan(f"operationName must be a string, got {name!r}")
    pid = d.get("processID", "")
    if pid not in resources:
        raise BadSpan(f"processID {pid!r} is not in processes")
    start = _micros(d.get("startTime", 0), "startTime")
    return SpanData(
        trace_id,
        span_id,
        parent,
        name,
        start,
        start + _micros(d.get("duration", 0), "duration"),
        tuple(kv for kv in tags if kv[0] not in _SPECIAL_TAGS),
        _KINDS[kind_name],
        status,
        str(special.get("otel.status_description", "")),
        _events(d.get("logs")),
        links,
        str(special.get("w3c.tracestate", "")),
        resource=resources[pid],
        scope_name=str(special.get("otel.scope.name", "")),
        scope_version=str(special.get("otel.scope.version", "")),
    )


def spans_from_jaeger_traces(traces: Any, *, where: str = "") -> tuple[list[SpanData], list[Problem]]:
    """The spans of a list of Jaeger classic ``Trace`` objects (the ``data`` of ``/api/traces``)."""
    if type(traces) is not list:
        return [], [Problem(where, f"Jaeger 'data' must be a list of traces, got {type(traces).__name__}")]
    spans: list[SpanData] = []
    problems: list[Problem] = []
    for t, trace in enumerate(traces):
        if type(trace) is not dict:
            problems.append(Problem(where, f"data[{t}]: trace must be an object, got {type(trace).__name__}"))
            continue
        label = f"data[{t}] (trace {trace.get('traceID')!r})"
        try:
            resources = _resources(trace.get("processes"))
        except (BadSpan, TypeError, ValueError) as exc:
            raw = trace.get("spans")
            n = len(raw) if type(raw) is list else 0
            problems.append(Problem(where, f"{label}: {n} span(s) skipped: {exc}", skipped=n))
            continue
        for w in _warnings(trace):
            problems.append(Problem(where, f"{label}: Jaeger warning: {w}", Severity.WARNING))
        raw_spans = trace.get("spans") or []
        if type(raw_spans) is not list:
            problems.append(Problem(where, f"{label}: spans must be a list"))
            continue
        for i, d in enumerate(raw_spans):
            span_label = f"{label}.spans[{i}]"
            if type(d) is dict:
                span_label += f" span {d.get('spanID')!r}"
            try:
                spans.append(_span(d, resources))
            except (BadSpan, IdError, TypeError, ValueError) as exc:  # TypeError: e.g. an unhashable processID
                problems.append(Problem(where, f"{span_label} skipped: {exc}", skipped=1))
                continue
            for w in _warnings(d):
                problems.append(Problem(where, f"{span_label}: Jaeger warning: {w}", Severity.WARNING))
    return spans, problems
