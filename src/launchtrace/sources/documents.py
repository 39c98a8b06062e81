"""One parsed JSON document from any producer -> spans: each known envelope goes to its handler.

| shape | producer |
| --- | --- |
| ``{"resourceSpans": [...]}`` / ``{"batches": [...]}`` | OTLP/JSON ``TracesData`` / export request, Tempo v1 |
| ``{"result": {"resourceSpans": [...]}}`` | Jaeger api_v3 ``/api/v3/traces`` |
| ``{"trace": {...}, "status": "PARTIAL"?}`` | Tempo ``/api/v2/traces/{id}`` (PARTIAL becomes a warning) |
| ``{"data": [Trace...]}`` / ``{"traceID", "spans", "processes"}`` | Jaeger classic JSON (``/api/traces``) |
| ``{"error": {"httpCode", "message"}}`` | Jaeger api_v3 error body |

Example::

    from launchtrace.sources.documents import spans_from_document
    spans, problems = spans_from_document(orjson.loads(body), where="trace.json")
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from launchtrace.otlp.json_codec import decode_traces_data
from launchtrace.otlp.jsonkeys import RESOURCE_SPANS
from launchtrace.otlp.problems import Problem, Severity
from launchtrace.sources.jaeger_classic import spans_from_jaeger_traces
from launchtrace.spans import SpanData

__all__ = ["spans_from_document"]

Result = tuple[list[SpanData], list[Problem]]


def _otlp(obj: dict, where: str, id_encoding: str) -> Result:
    return decode_traces_data(obj, where=where, id_encoding=id_encoding)


def _jaeger_v3(obj: dict, where: str, id_encoding: str) -> Result:
    return decode_traces_data(obj["result"], where=where, id_encoding=id_encoding)


def _tempo_v2(obj: dict, where: str, id_encoding: str) -> Result:
    spans, problems = decode_traces_data(obj["trace"] or {}, where=where, id_encoding=id_encoding)
    status = obj.get("status")
    if status and status != "COMPLETE":
        message = obj.get("message") or "the backend returned only part of the trace"
        problems.append(Problem(where, f"trace is {status}: {message}", Severity.WARNING))
    return spans, problems


def _jaeger_classic(obj: dict, where: str, id_encoding: str) -> Result:
    spans, problems = spans_from_jaeger_traces(obj["data"], where=where)
    errors = obj.get("errors")
    for err in errors if type(errors) is list else ([] if errors is None else [errors]):
        problems.append(Problem(where, f"Jaeger error: {err}"))
    return spans, problems


def _jaeger_classic_trace(obj: dict, where: str, id_encoding: str) -> Result:
    return spans_from_jaeger_traces([obj], where=where)


def _error(obj: dict, where: str, id_encoding: str) -> Result:
    return [], [Problem(where, f"backend error: {obj['error']}")]


_SHAPES: tuple[tuple[Callable[[dict], bool], Callable[[dict, str, str], Result]], ...] = (
    (lambda o: RESOURCE_SPANS in o or "batches" in o, _otlp),
    (lambda o: type(o.get("result")) is dict, _jaeger_v3),
    (lambda o: "trace" in o and (o["trace"] is None or type(o["trace"]) is dict), _tempo_v2),
    (lambda o: type(o.get("data")) is list, _jaeger_classic),
    (lambda o: "spans" in o and "traceID" in o, _jaeger_classic_trace),
    (lambda o: "error" in o, _error),
)


def spans_from_document(obj: Any, *, where: str = "", id_encoding: str = "auto") -> Result:
    """The spans of one JSON document in any of the shapes in the module docstring, and what was wrong."""
    if type(obj) is dict:
        if not obj:
            return [], []
        for matches, handler in _SHAPES:
            if matches(obj):
                return handler(obj, where, id_encoding)
        keys = ", ".join(sorted(obj)[:6])
        return [], [Problem(where, f"not a trace document: no {RESOURCE_SPANS}, result, trace or data (keys: {keys})")]
    return [], [Problem(where, f"not a trace document: expected a JSON object, got {type(obj).__name__}")]
