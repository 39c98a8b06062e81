"""Grafana Tempo over HTTP: trace by id (JSON or protobuf, v1 or v2) and TraceQL search.

- ``GET /api/traces/{id}``: ``tempopb.Trace`` as JSON (``batches`` or ``resourceSpans``, base64 ids, enum
  names, defaults omitted), or with ``Accept: application/protobuf`` bytes wire-identical to OTLP
  ``TracesData``. 404: not found (a warning); 422: the trace is too large (an error naming the limit).
- ``GET /api/v2/traces/{id}``: ``{"trace": {...}, "status": "PARTIAL"?, "message": ...}``; a partial trace
  is read and the status surfaces as a warning.
- ``GET /api/search?q=<TraceQL>&start=&end=&limit=`` (unix seconds): ``{"traces": [{"traceID", ...}]}`` with
  leading zeros stripped from ``traceID`` (left-padded here); each hit is then fetched by id.

``X-Scope-OrgID`` (multi-tenancy) is an ordinary header of :class:`~launchtrace.sources.http.HttpOptions`.

Example::

    from launchtrace.sources.tempo import TempoSource
    tempo = TempoSource(HttpClient(HttpOptions("http://tempo:3200", headers=(("X-Scope-OrgID", "a"),))))
    result = tempo.search(SearchQuery(traceql='{ resource.service.name = "sim" }', limit=10))
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

import orjson

from launchtrace.errors import UserError
from launchtrace.otlp.ids import IdError, padded_hex_trace_id
from launchtrace.otlp.problems import Problem, Severity
from launchtrace.otlp.proto_decode import decode_traces_bytes
from launchtrace.sources.documents import spans_from_document
from launchtrace.sources.http import HttpAnswer, HttpClient
from launchtrace.sources.query import SearchQuery, parse_trace_id
from launchtrace.sources.report import ProblemLog, ReadResult, fetch_each
from launchtrace.spans import SpanData

__all__ = ["TempoSource", "traceql_for"]

_log = logging.getLogger(__name__)
Progress = Callable[[int, int], None]
_PROTOBUF = "application/protobuf"


def _quote(value: str) -> str:
    return orjson.dumps(value).decode()  # a TraceQL string literal: JSON escaping is what Tempo accepts


def traceql_for(query: SearchQuery) -> str:
    """The TraceQL of ``query``: its own ``traceql``, or one built from service, operation and attributes."""
    if query.traceql:
        return query.traceql
    conditions = []
    if query.service:
        conditions.append(f"resource.service.name = {_quote(query.service)}")
    if query.operation:
        conditions.append(f"name = {_quote(query.operation)}")
    for key, value in query.attributes:
        conditions.append(f".{key} = {_quote(value)}")
    return "{ " + " && ".join(conditions) + " }" if conditions else "{}"


class TempoSource:
    """Pulls spans from one Tempo. ``api`` is ``"v2"`` (default) or ``"v1"``; ``protobuf`` asks v1 for
    protobuf bodies instead of JSON."""

    def __init__(self, client: HttpClient, *, api: str = "v2", protobuf: bool = False) -> None:
        if api not in ("v1", "v2"):
            raise UserError(f"Tempo api must be v1 or v2, got {api!r}")
        if protobuf and api != "v1":
            raise UserError("protobuf bodies come from Tempo's v1 API: use api v1 with protobuf")
        self.client = client
        self.api = api
        self.protobuf = protobuf

    # -- public: each returns a ReadResult with the whole-trace checks applied
    def trace(self, trace_id: str, *, strict: bool = False) -> ReadResult:
        return self.traces([trace_id], strict=strict)

    def traces(self, trace_ids: Iterable[str], *, strict: bool = False, progress: Progress | None = None) -> ReadResult:
        log = ProblemLog(strict=strict)
        spans = fetch_each(trace_ids, self.fetch_trace, log, progress)
        return ReadResult.checked(spans, log, source=self.client.base_url, format="tempo")

    def search(self, query: SearchQuery, *, strict: bool = False, progress: Progress | None = None) -> ReadResult:
        log = ProblemLog(strict=strict)
        spans = fetch_each(self.search_ids(query, log), self.fetch_trace, log, progress)  # ids already distinct
        return ReadResult.checked(spans, log, source=self.client.base_url, format="tempo")

    # -- building blocks that add to a caller's ProblemLog
    def search_ids(self, query: SearchQuery, log: ProblemLog) -> list[str]:
        """The trace ids (32 hex digits) of a TraceQL search, in Tempo's order, each once, at most ``limit``.

        A Tempo (or something in its place) answering more hits than asked for, or one id many times, must
        not turn into thousands of fetches: the first ``limit`` distinct ids are kept.
        """
        params: dict[str, str | int] = {"q": traceql_for(query), "limit": query.limit}
        if query.start_ns is not None:
            params["start"] = query.start_ns // 10**9
        if query.end_ns is not None:
            params["end"] = -(-query.end_ns // 10**9)  # round up: the window must include the end
        answer = self.client.get("/api/search", params=params)
        body = answer.json()
        hits = body.get("traces") if type(body) is dict else None
        if hits is None:
            hits = []
        if type(hits) is not list:
            raise UserError(f"{answer.url}: 'traces' must be a list, got {type(hits).__name__}")
        ids: dict[str, None] = {}
        for i, hit in enumerate(hits):
            if len(ids) >= query.limit:
                _log.info(
                    "%s: %d hits for --limit %d; the first %d distinct kept",
                    answer.url,
                    len(hits),
                    query.limit,
                    query.limit,
                )
                break
            raw = hit.get("traceID") if type(hit) is dict else None
            try:
                ids.setdefault(padded_hex_trace_id(raw).hex())
            except IdError as exc:
                log.add(Problem(answer.url, f"search hit {i} skipped: {exc}"))
        return list(ids)

    def fetch_trace(self, trace_id: str, log: ProblemLog) -> list[SpanData]:
        hex_id = parse_trace_id(trace_id).hex()
        path = f"/api/v2/traces/{hex_id}" if self.api == "v2" else f"/api/traces/{hex_id}"
        accept = _PROTOBUF if self.protobuf else "application/json"
        answer = self.client.get(path, accept=accept, allow=frozenset({200, 404, 422}))
        if answer.status == 404:
            log.add(Problem(answer.url, f"trace {hex_id} not found", Severity.WARNING))
            return []
        if answer.status == 422:
            log.add(Problem(answer.url, f"trace {hex_id} skipped: Tempo says it is too large: {answer.snippet()}"))
            return []
        return _decode(answer, log)


def _decode(answer: HttpAnswer, log: ProblemLog) -> list[SpanData]:
    if "protobuf" in answer.content_type:
        spans, problems = decode_traces_bytes(answer.body, where=answer.url)
    else:
        spans, problems = spans_from_document(answer.json(), where=answer.url)
    log.extend(problems)
    return spans
