"""Tempo readers against a loopback HTTP server serving real Tempo response bodies.

No Tempo can run here (no container engine); ``tests.loopback_http.Backend`` is a real HTTP server answering at
Tempo's real endpoint paths with the bodies from Tempo's repository (``pkg/tempopb/trace.json`` and, read from
``../shared`` only, the AGPL docs' curl outputs) and Tempo's status codes (404 not found, 422 too large).
Protobuf bodies are made by the protobuf library itself from Tempo's JSON (json_format reads base64 ids and
enum names natively), which is what Tempo does on the server side.
"""

from __future__ import annotations

import orjson
import pytest
from google.protobuf import json_format
from opentelemetry.proto.trace.v1.trace_pb2 import TracesData

from conftest import upstream_fixtures
from launchtrace.errors import UserError
from launchtrace.otlp.problems import Severity
from launchtrace.sources.http import HttpClient, HttpOptions
from launchtrace.sources.query import SearchQuery
from launchtrace.sources.tempo import TempoSource, traceql_for
from loopback_http import Answer, Backend

FIXTURES = upstream_fixtures()
TRACE_HEX = "5b8efff798038103d269b633813fc700"
V2_BODY = (FIXTURES / "tempo-agpl/tempo_v2_trace_by_id_response_docs.json").read_bytes()
SEARCH_BODY = (FIXTURES / "tempo-agpl/tempo_search_response_docs.json").read_bytes()
V1_BODY = (FIXTURES / "tempo_v1_batches_trace.json").read_bytes()


def tempo(b: Backend, **kw) -> TempoSource:
    return TempoSource(HttpClient(HttpOptions(b.url, retries=0, headers=(("X-Scope-OrgID", "team-a"),))), **kw)


def test_v2_trace_by_id_base64_ids_enum_names_and_tenant_header():
    with Backend() as b:
        b.routes[f"/api/v2/traces/{TRACE_HEX}"] = Answer(200, V2_BODY)
        r = tempo(b).trace(TRACE_HEX.upper())
    (s,) = r.spans
    assert (s.trace_id.hex(), s.span_id.hex(), s.kind, s.name) == (TRACE_HEX, "eee19b7ec3c1b100", 2, "I am a span!")
    assert s.resource == (("service.name", "my.service"),) and s.scope_name == "my.library"
    assert b.seen[0].headers["x-scope-orgid"] == "team-a" and not r.problems


def test_v2_partial_trace_is_read_with_a_warning():
    partial = orjson.loads(V2_BODY) | {"status": "PARTIAL", "message": "trace exceeds max size (max bytes: 5000000)"}
    with Backend() as b:
        b.routes[f"/api/v2/traces/{TRACE_HEX}"] = Answer(200, orjson.dumps(partial))
        r = tempo(b).trace(TRACE_HEX)
    assert len(r.spans) == 1 and r.errors == 0 and r.warnings == 1
    assert str(r.problems[0]) == (
        f"{b.url}/api/v2/traces/{TRACE_HEX}: trace is PARTIAL: trace exceeds max size (max bytes: 5000000)"
    )


def test_v1_json_batches_and_protobuf():
    v2_trace = orjson.loads(V2_BODY)["trace"]
    proto = json_format.ParseDict(v2_trace, TracesData()).SerializeToString()
    with Backend() as b:
        b.routes["/api/traces/5b8efff798038103d269b633813fc60c"] = Answer(200, V1_BODY)
        b.routes[f"/api/traces/{TRACE_HEX}"] = Answer(200, proto, "application/protobuf")
        v1 = tempo(b, api="v1").trace("5b8efff798038103d269b633813fc60c")
        pb = tempo(b, api="v1", protobuf=True).trace(TRACE_HEX)
    assert [s.span_id.hex() for s in v1.spans] == ["eee19b7ec3c1b174"]
    assert v1.spans[0].parent_span_id.hex() == "eee19b7ec3c1b173"
    assert b.seen[1].headers["accept"] == "application/protobuf"
    (s,) = pb.spans
    assert (s.trace_id.hex(), s.span_id.hex(), s.kind, s.start_ns) == (TRACE_HEX, "eee19b7ec3c1b100", 2,
                                                                       1689969302000000000)  # fmt: skip


def test_search_fetches_each_hit_with_ids_left_padded_and_progress():
    search = orjson.loads(SEARCH_BODY)
    short = dict(search["traces"][0], traceID="ff")  # Tempo strips leading zeros from trace ids
    search["traces"].append(short)
    ff_trace = orjson.loads(V2_BODY)
    for rs in ff_trace["trace"]["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for sp in ss["spans"]:
                sp["traceId"] = "AAAAAAAAAAAAAAAAAAAA/w=="  # base64 of 0x...ff
    progress: list[tuple[int, int]] = []
    with Backend() as b:
        b.routes["/api/search"] = Answer(200, orjson.dumps(search))
        b.routes[f"/api/v2/traces/{TRACE_HEX}"] = Answer(200, V2_BODY)
        b.routes["/api/v2/traces/000000000000000000000000000000ff"] = Answer(200, orjson.dumps(ff_trace))
        q = SearchQuery(service="my.service", start_ns=1694718000 * 10**9, end_ns=1694719000 * 10**9 + 1, limit=5)
        r = tempo(b).search(q, progress=lambda i, n: progress.append((i, n)))
    params = b.seen[0].query
    assert params["q"] == ['{ resource.service.name = "my.service" }']
    assert (params["start"], params["end"], params["limit"]) == (["1694718000"], ["1694719001"], ["5"])
    assert [s.path for s in b.seen[1:]] == [f"/api/v2/traces/{TRACE_HEX}", "/api/v2/traces/" + "0" * 30 + "ff"]
    assert [t.hex() for t in r.traces()] == [TRACE_HEX, "0" * 30 + "ff"]
    assert progress == [(1, 2), (2, 2)]


def test_not_found_too_large_and_bad_hits():
    search = {"traces": [{"traceID": "zz-not-hex"}, {"traceID": "1"}, {"traceID": "2"}]}
    with Backend() as b:
        b.routes["/api/search"] = Answer(200, orjson.dumps(search))
        b.routes["/api/v2/traces/" + "0" * 31 + "2"] = Answer(422, b"trace exceeds max size (max bytes: 5000000)")
        r = tempo(b).search(SearchQuery(traceql="{ status = error }"))
    assert b.seen[0].query["q"] == ["{ status = error }"]
    assert r.spans == [] and (r.errors, r.warnings) == (2, 1)
    text = [str(p) for p in r.problems]
    assert "search hit 0 skipped: trace id 'zz-not-hex' is not hex" in text[0]
    assert r.problems[1].severity is Severity.WARNING and text[1].endswith("trace " + "0" * 31 + "1 not found")
    assert "Tempo says it is too large: 'trace exceeds max size (max bytes: 5000000)'" in text[2]


def test_traceql_is_built_with_quoting_and_bad_options_are_user_errors():
    q = SearchQuery(service='a"b', operation="step", attributes=(("launchtrace.op", "launch"),))
    assert traceql_for(q) == '{ resource.service.name = "a\\"b" && name = "step" && .launchtrace.op = "launch" }'
    assert traceql_for(SearchQuery()) == "{}"
    with Backend() as b:
        with pytest.raises(UserError, match="protobuf bodies come from Tempo's v1 API"):
            tempo(b, protobuf=True)
        b.routes["/api/search"] = Answer(200, b"[]")
        assert tempo(b).search(SearchQuery()).spans == []
        b.routes["/api/search"] = Answer(200, b'{"traces": 3}')
        with pytest.raises(UserError, match="'traces' must be a list, got int"):
            tempo(b).search(SearchQuery())
