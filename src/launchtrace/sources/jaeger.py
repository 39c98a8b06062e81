"""Jaeger's query service over HTTP: api_v3 (trace by id, search) and the classic ``/api/traces/{id}``.

- ``GET /api/v3/traces/{trace_id}``: ``{"result": TracesData}`` in OTLP/JSON (hex ids, integer enums).
- ``GET /api/v3/traces?query.service_name=..&query.start_time_min=..&query.start_time_max=..`` (RFC 3339 with
  nanoseconds, both required) plus ``query.operation_name``, ``query.attributes`` (a JSON map) and the limit
  as ``query.search_depth`` (and ``query.num_traces`` for older releases). Several traces come merged in one
  ``TracesData``; :meth:`ReadResult.traces` splits them by trace id.
- 404 with ``{"error": {"message": "No traces found"}}`` is an empty result, not a failure.
- ``GET /api/traces/{id}``: classic JSON, see :mod:`launchtrace.sources.jaeger_classic`. Jaeger after v2.20
  dropped the classic search endpoints, so search uses api_v3 only.

Example::

    from launchtrace.sources.http import HttpClient, HttpOptions
    from launchtrace.sources.jaeger import JaegerSource
    jaeger = JaegerSource(HttpClient(HttpOptions("http://jaeger:16686")))
    result = jaeger.trace("5b8efff798038103d269b633813fc60c")
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable

import orjson

from launchtrace.errors import UserError
from launchtrace.otlp.json_fast import FastLineDecoder
from launchtrace.otlp.problems import Problem, Severity
from launchtrace.sources.documents import spans_from_document
from launchtrace.sources.http import HttpAnswer, HttpClient
from launchtrace.sources.query import SearchQuery, parse_trace_id, rfc3339_nano
from launchtrace.sources.report import ProblemLog, ReadResult, fetch_each
from launchtrace.spans import SpanData

__all__ = ["JaegerSource"]

_DEFAULT_WINDOW_NS = 3600 * 10**9


class JaegerSource:
    """Pulls spans from one Jaeger; ``api`` is ``"v3"`` (default) or ``"classic"`` for trace-by-id."""

    def __init__(self, client: HttpClient, *, api: str = "v3") -> None:
        if api not in ("v3", "classic"):
            raise UserError(f"Jaeger api must be v3 or classic, got {api!r}")
        self.client = client
        self.api = api

    # -- public: each returns a ReadResult with the whole-trace checks applied
    def trace(self, trace_id: str, *, strict: bool = False) -> ReadResult:
        """One trace by id (hex, leading zeros optional, or base64)."""
        return self.traces([trace_id], strict=strict)

    def traces(
        self, trace_ids: Iterable[str], *, strict: bool = False, progress: Callable[[int, int], None] | None = None
    ) -> ReadResult:
        """Several traces by id, fetched one by one; ``progress(done, total)`` after each."""
        log = ProblemLog(strict=strict)
        spans = fetch_each(trace_ids, self.fetch_trace, log, progress)
        return ReadResult.checked(spans, log, source=self.client.base_url, format="jaeger")

    def search(self, query: SearchQuery, *, strict: bool = False) -> ReadResult:
        log = ProblemLog(strict=strict)
        return ReadResult.checked(self.fetch_search(query, log), log, source=self.client.base_url, format="jaeger")

    # -- building blocks that add to a caller's ProblemLog
    def fetch_trace(self, trace_id: str, log: ProblemLog) -> list[SpanData]:
        hex_id = parse_trace_id(trace_id).hex()
        # raw: the trace as stored, without query-time adjusters (clock skew, ...), which on the memory store
        # would also change the stored trace (it hands out references)
        if self.api == "classic":
            answer = self.client.get(f"/api/traces/{hex_id}", params={"raw": "true"}, allow=frozenset({200, 404}))
        else:
            answer = self.client.get(
                f"/api/v3/traces/{hex_id}", params={"raw_traces": "true"}, allow=frozenset({200, 404})
            )
        if answer.status == 404:
            log.add(Problem(answer.url, f"trace {hex_id} not found: {_error_message(answer)}", Severity.WARNING))
            return []
        return _decode(answer, log)

    def fetch_search(self, query: SearchQuery, log: ProblemLog) -> list[SpanData]:
        if not query.service:
            raise UserError("a Jaeger search needs a service (--service)")
        end = query.end_ns if query.end_ns is not None else time.time_ns()
        start = query.start_ns if query.start_ns is not None else end - _DEFAULT_WINDOW_NS
        if start > end:
            raise UserError(f"the search window starts after it ends ({rfc3339_nano(start)} > {rfc3339_nano(end)})")
        params: dict[str, str | int] = {
            "query.service_name": query.service,
            "query.start_time_min": rfc3339_nano(start),
            "query.start_time_max": rfc3339_nano(end),
            "query.search_depth": query.limit,
            "query.num_traces": query.limit,
            "query.raw_traces": "true",
        }
        if query.operation:
            params["query.operation_name"] = query.operation
        if query.attributes:
            params["query.attributes"] = orjson.dumps(dict(query.attributes)).decode()
        answer = self.client.get("/api/v3/traces", params=params, allow=frozenset({200, 404}))
        if answer.status == 404:  # "No traces found": an empty result
            return []
        spans = _decode(answer, log)
        if query.attributes:  # Jaeger 2.12's HTTP API ignores query.attributes: filter here, whatever it did
            spans = _with_attributes(spans, query.attributes)
        return _first_traces(spans, query.limit)


def _with_attributes(spans: list[SpanData], wanted: tuple[tuple[str, str], ...]) -> list[SpanData]:
    """The spans of the traces where one span has every ``wanted`` attribute (span or resource; values compared as
    text, as typed on the command line)."""

    def matches(span: SpanData) -> bool:
        have = {k: v for k, v in span.resource}
        have.update(span.attributes)
        return all(k in have and _text(have[k]) == v for k, v in wanted)

    kept = {s.trace_id for s in spans if matches(s)}
    return [s for s in spans if s.trace_id in kept]


def _text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _first_traces(spans: list[SpanData], limit: int) -> list[SpanData]:
    """The spans of the first ``limit`` traces (in the answer's order): a search answers no more than asked."""
    kept: set[bytes] = set()
    out = []
    for span in spans:
        if span.trace_id not in kept:
            if len(kept) >= limit:
                continue
            kept.add(span.trace_id)
        out.append(span)
    return out


def _error_message(answer: HttpAnswer) -> str:
    try:
        body = orjson.loads(answer.body)
    except orjson.JSONDecodeError:
        return answer.snippet()
    if type(body) is dict:
        err = body.get("error")
        if type(err) is dict and err.get("message"):
            return str(err["message"])
        errors = body.get("errors")
        if type(errors) is list and errors and type(errors[0]) is dict:
            return str(errors[0].get("msg") or errors[0])
    return answer.snippet()


_RESULT_OPEN = re.compile(rb'\A\s*\{\s*"result"\s*:\s*')


def _decode(answer: HttpAnswer, log: ProblemLog) -> list[SpanData]:
    """The answer's spans: the ``result`` read in place by the fast reader where it can answer (no dictionary of
    the whole answer: 50,000 spans took 1.47 GB that way), else the general decoder, which says what is wrong."""
    spans = _fast_result(answer.body)
    if spans is not None:
        return spans
    spans, problems = spans_from_document(answer.json(), where=answer.url)
    log.extend(problems)
    return spans


def _fast_result(body: bytes) -> list[SpanData] | None:
    """The spans of ``{"result": TracesData}`` by :class:`FastLineDecoder`, or ``None`` (another shape, or an
    answer the fast reader leaves to the general decoder: a key given twice, escapes, odd values)."""
    head = _RESULT_OPEN.match(body)
    end = len(body.rstrip())
    if head is None or end < 2 or body[end - 1 : end] != b"}":
        return None
    inner = memoryview(body)[head.end() : end - 1]
    try:
        return FastLineDecoder().decode(inner)
    finally:
        inner.release()
