"""Jaeger readers against a loopback HTTP server serving the real Jaeger response bodies.

No Jaeger can run here (no container engine); ``tests.loopback_http.Backend`` is a real HTTP server that
answers at Jaeger's real endpoint paths with the bodies from Jaeger's own snapshot and fixture files and the
status codes Jaeger uses (404 + ``{"error": {...}}`` for no match).
"""

from __future__ import annotations

import orjson
import pytest

from conftest import upstream_fixtures
from launchtrace.errors import UserError
from launchtrace.otlp.problems import Severity
from launchtrace.sources.http import HttpClient, HttpOptions
from launchtrace.sources.jaeger import JaegerSource
from launchtrace.sources.query import SearchQuery, parse_time, rfc3339_nano
from loopback_http import Answer, Backend

FIXTURES = upstream_fixtures()
NOT_FOUND = b'{"error":{"httpCode":404,"message":"No traces found"}}'


def body(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def jaeger(b: Backend, **kw) -> JaegerSource:
    return JaegerSource(HttpClient(HttpOptions(b.url, retries=0)), **kw)


def test_api_v3_trace_by_id():
    with Backend() as b:
        b.routes["/api/v3/traces/00000000000000000000000000000001"] = Answer(200, body("jaeger_apiv3_GetTrace.json"))
        r = jaeger(b).trace("1")  # leading zeros optional
    (s,) = r.spans
    assert (s.trace_id.hex(), s.span_id.hex(), s.name, s.kind, s.status_code) == ("0" * 31 + "1", "0" * 15 + "2",
                                                                                   "foobar", 2, 2)  # fmt: skip
    assert not r.problems and b.seen[0].headers["accept"] == "application/json"


def test_api_v3_search_parameters_and_merged_traces_split_by_trace_id():
    rich = orjson.loads(body("jaeger_otlp_rich_traces.json"))
    start, end = parse_time("2017-01-26T21:46:00Z"), parse_time("2017-01-26T21:47:00.5Z")
    with Backend() as b:
        b.routes["/api/v3/traces"] = Answer(200, orjson.dumps({"result": rich}))
        q = SearchQuery(service="service-x", operation="op", attributes=(("peer.service", "service-y"),),
                        start_ns=start, end_ns=end, limit=7)  # fmt: skip
        r = jaeger(b).search(q)
    query = b.seen[0].query
    assert query["query.service_name"] == ["service-x"] and query["query.operation_name"] == ["op"]
    assert query["query.start_time_min"] == ["2017-01-26T21:46:00.000000000Z"]
    assert query["query.start_time_max"] == ["2017-01-26T21:47:00.500000000Z"]
    assert query["query.search_depth"] == ["7"] and query["query.num_traces"] == ["7"]
    assert orjson.loads(query["query.attributes"][0]) == {"peer.service": "service-y"}
    traces = r.traces()
    assert [t.hex() for t in traces] == ["00000000000000010000000000000000", "00000000000000020000000000000000"]
    assert [len(v) for v in traces.values()] == [2, 2]


def test_no_traces_found_is_an_empty_result_not_a_failure():
    with Backend() as b:
        b.routes["/api/v3/traces"] = Answer(404, NOT_FOUND)
        r = jaeger(b).search(SearchQuery(service="nobody"))
    assert r.spans == [] and r.problems == () and r.errors == 0
    assert "query.start_time_min" in b.seen[0].query, "the window is always sent (Jaeger requires it)"


def test_trace_by_id_not_found_is_a_warning_with_jaegers_message():
    with Backend() as b:
        r = jaeger(b).trace("abc")
    assert r.spans == [] and r.warnings == 1 and r.problems[0].severity is Severity.WARNING
    assert str(r.problems[0]) == (
        f"{b.url}/api/v3/traces/00000000000000000000000000000abc?raw_traces=true: "
        "trace 00000000000000000000000000000abc not found: No traces found"
    )


def test_classic_trace_by_id_envelope_and_ui_model():
    with Backend() as b:
        b.routes["/api/traces/83a9efd15c1c98a977e0711cc93ee28b"] = Answer(
            200, body("jaeger_v1_api_traces_envelope.json")
        )
        ui = orjson.loads(body("jaeger_v1_trace_ui_model.json"))
        b.routes["/api/traces/00000000000000000000000000000001"] = Answer(200, orjson.dumps({"data": [ui]}))
        b.routes["/api/traces/00000000000000000000000000000002"] = Answer(
            404, b'{"data":null,"total":0,"limit":0,"offset":0,"errors":[{"code":404,"msg":"trace not found"}]}'
        )
        src = jaeger(b, api="classic")
        env = src.trace("83a9efd15c1c98a977e0711cc93ee28b")
        r = src.traces(["0000000000000001", "2"])
    (s,) = env.spans
    assert s.name == "okey-dokey-0" and s.kind == 2 and s.resource == (("service.name", "telemetrygen"),)
    assert [x.span_id.hex()[-1] for x in r.spans] == ["2", "3", "4", "5"]
    assert r.errors == 1, "the differing duplicate of span 2"
    assert any("trace not found" in str(p) for p in r.problems)


def test_garbage_and_server_errors_name_the_url():
    with Backend() as b:
        b.routes["/api/v3/traces/00000000000000000000000000000001"] = Answer(200, b"{not json", "application/json")
        b.routes["/api/v3/traces"] = Answer(500, b'{"error":{"httpCode":500,"message":"storage down"}}')
        with pytest.raises(UserError, match=r"/api/v3/traces/0+1\?raw_traces=true: answer is not JSON"):
            jaeger(b).trace("1")
        with pytest.raises(UserError, match=r"/api/v3/traces\?query\.service_name=s.*: HTTP 500: .*storage down"):
            jaeger(b).search(SearchQuery(service="s"))
        with pytest.raises(UserError, match="needs a service"):
            jaeger(b).search(SearchQuery())
        with pytest.raises(UserError, match="bad trace id"):
            jaeger(b).trace("not-an-id!")


def test_rfc3339_nano_round_trip():
    ns = 1485467191639875123
    assert rfc3339_nano(ns) == "2017-01-26T21:46:31.639875123Z"
    assert parse_time("2017-01-26T21:46:31.639875Z") == ns - 123
    assert parse_time("1h", now_ns=7200 * 10**9) == 3600 * 10**9
    assert parse_time("1485467191") == 1485467191 * 10**9
    with pytest.raises(UserError, match="bad time 'yesterday'"):
        parse_time("yesterday")


@pytest.mark.parametrize("name", ["jaeger_apiv3_GetTrace.json", "jaeger_otlp_rich_traces.json",
                                  "jaeger_otlp_telemetrygen.json"])  # fmt: skip
def test_answers_read_in_place_equal_the_general_decoder(name, monkeypatch):
    """An api_v3 answer is read by the fast reader without a dictionary of the whole body (bounded memory on big
    answers); what it gives must be exactly what the general decoder gives, which is the oracle here."""
    from launchtrace.sources import jaeger as module
    from launchtrace.sources.documents import spans_from_document

    document = orjson.loads(body(name))
    answer = orjson.dumps(document if "result" in document else {"result": document})
    general, problems = spans_from_document(orjson.loads(answer))
    assert general and not problems
    fast = module._fast_result(answer)
    assert fast is not None, "the fast reader should answer a plain api_v3 body"
    assert fast == general

    def pulled() -> list:
        with Backend() as b:
            b.routes["/api/v3/traces/00000000000000000000000000000001"] = Answer(200, answer)
            return jaeger(b).trace("1").spans

    by_fast = pulled()
    monkeypatch.setattr(module, "_fast_result", lambda body: None)
    assert by_fast == pulled()


def test_an_answer_with_result_twice_goes_to_the_general_decoder():
    """The fast reader must not guess which of two ``result`` keys counts: the general decoder keeps the last."""
    from launchtrace.sources import jaeger as module

    one = orjson.loads(body("jaeger_apiv3_GetTrace.json"))["result"]
    two = orjson.loads(body("jaeger_otlp_rich_traces.json"))
    answer = b'{"result":' + orjson.dumps(one) + b',"result":' + orjson.dumps(two) + b"}"
    assert module._fast_result(answer) is None
    with Backend() as b:
        b.routes["/api/v3/traces/00000000000000000000000000000001"] = Answer(200, answer)
        spans = jaeger(b).trace("1").spans
    assert {s.trace_id.hex() for s in spans} == {"00000000000000010000000000000000", "00000000000000020000000000000000"}
