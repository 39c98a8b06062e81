"""Reading span files: every upstream fixture, every container format, and malformed input.

The fixtures are real files copied from the Jaeger, Tempo, OpenTelemetry proto and specification repositories
(see ``../shared/fixtures/upstream/README.md``); they are read in place, never copied into this repository.
"""

from __future__ import annotations

import base64
import gzip
import struct
import tracemalloc
from pathlib import Path

import orjson
import pytest
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import TracesData

from conftest import upstream_fixtures
from launchtrace.errors import UserError
from launchtrace.otlp.json_codec import encode_line
from launchtrace.otlp.problems import Severity
from launchtrace.sources.files import SpanFile, read_spans
from launchtrace.spans import SpanData

FIXTURES = upstream_fixtures()
T = bytes.fromhex("5b8efff798038103d269b633813fc700")


def sid(n: int) -> bytes:
    return n.to_bytes(8, "big")


def tid(n: int) -> bytes:
    return n.to_bytes(16, "big")


def fixture(name: str) -> Path:
    path = FIXTURES / name
    assert path.exists(), f"upstream fixture missing: {path}"
    return path


def messages(result) -> list[str]:
    return [str(p) for p in result.problems]


# ------------------------------------------------------------------------------------------ upstream fixtures
def test_otlp_proto_example_uppercase_hex_ids_and_scope():
    r = read_spans(fixture("otlp_examples_trace.json"))
    (s,) = r.spans
    assert r.format == "otlp-json" and r.errors == 0
    assert s.trace_id.hex() == "5b8efff798038103d269b633813fc60c" and s.span_id.hex() == "eee19b7ec3c1b174"
    assert s.parent_span_id.hex() == "eee19b7ec3c1b173" and s.kind == 2
    assert (s.start_ns, s.end_ns) == (1544712660000000000, 1544712661000000000)
    assert s.resource == (("service.name", "my.service"),)
    assert (s.scope_name, s.scope_version) == ("my.library", "1.0.0")
    assert s.scope_attributes == (("my.scope.attribute", "some scope attribute"),)
    assert s.attributes == (("my.span.attr", "some value"),)
    # its parent is not in the file: kept, with a warning naming span and trace
    assert r.warnings == 1 and "parent eee19b7ec3c1b173 is not in the trace; kept as a root" in messages(r)[0]


def test_jaeger_rich_traces_every_field():
    r = read_spans(fixture("jaeger_otlp_rich_traces.json"))
    assert len(r.spans) == 4 and r.errors == 0
    assert [s.span_id.hex()[-1] for s in r.spans] == ["2", "3", "4", "5"]
    assert {s.trace_id.hex() for s in r.spans} == {
        "00000000000000010000000000000000",
        "00000000000000020000000000000000",
    }
    s = r.spans[0]
    assert (s.kind, s.trace_state, s.flags, s.status_code) == (2, "state.2", 1, 2)
    assert [s.kind for s in r.spans] == [2, 3, 4, 5]
    attrs = dict(s.attributes)
    assert attrs == {"peer.service": "service-y", "peer.ipv4": 23456, "blob": b"\x00\x00\x30\x39", "temperature": 72.5}
    assert type(attrs["peer.ipv4"]) is int and type(attrs["temperature"]) is float
    assert [e.name for e in s.events] == ["testing-event", ""]
    assert s.events[0].time_ns == 1485467191639875000 and s.events[1].attributes == (("x", "y"),)
    assert [(k.trace_id.hex(), k.span_id.hex()) for k in s.links] == [
        ("00000000000000010000000000000000", "0000000000000004"),
        ("00000000000000ff0000000000000000", "00000000000000ff"),
    ]
    assert s.links[0].attributes == (("opentracing.ref_type", "follows_from"),)
    assert [(x.scope_name, x.scope_version) for x in r.spans] == [("testing-library-2", "1.1.1")] * 2 + [
        ("testing-library-3", "1.1.2")
    ] * 2
    # span 4's parent is span ..11 (absent), span 3's parent ..10 (absent): all four parents are missing
    assert r.warnings == 4


def test_telemetrygen_duplicate_span_is_dropped_with_a_warning():
    r = read_spans(fixture("jaeger_otlp_telemetrygen.json"))
    (s,) = r.spans
    assert s.trace_id.hex() == "83a9efd15c1c98a977e0711cc93ee28b" and s.span_id.hex() == "e127af99e3b3e074"
    assert s.resource_schema_url == "https://opentelemetry.io/schemas/1.4.0" and s.status_code == 0
    assert r.errors == 0 and any("identical duplicate dropped" in m for m in messages(r))


def test_jaeger_apiv3_get_trace_envelope():
    r = read_spans(fixture("jaeger_apiv3_GetTrace.json"))
    (s,) = r.spans
    assert r.format == "jaeger-apiv3-json" and not r.problems
    assert (s.trace_id, s.span_id, s.name, s.kind, s.status_code) == (tid(1), sid(2), "foobar", 2, 2)
    assert (s.start_ns, s.end_ns, s.resource, s.scope_name) == (0, 0, (), "")


def test_jaeger_classic_envelope_from_otlp_matches_the_otlp_input():
    classic = read_spans(fixture("jaeger_v1_api_traces_envelope.json"))
    otlp = read_spans(fixture("jaeger_otlp_telemetrygen.json"))
    assert classic.format == "jaeger-classic-json"
    (c,), (o,) = classic.spans, otlp.spans
    # Jaeger's own transform of this OTLP input: the same span comes back (µs precision; same here)
    assert (c.trace_id, c.span_id, c.parent_span_id, c.name, c.kind) == (
        o.trace_id,
        o.span_id,
        o.parent_span_id,
        o.name,
        o.kind,
    )
    assert (c.start_ns, c.end_ns, c.attributes, c.scope_name) == (o.start_ns, o.end_ns, o.attributes, o.scope_name)
    assert c.resource == (("service.name", "telemetrygen"),)


def test_jaeger_classic_ui_model_tag_types_refs_logs_processes():
    r = read_spans(fixture("jaeger_v1_trace_ui_model.json"))
    by_name = {}
    for s in r.spans:
        by_name.setdefault(s.name, s)
    assert all(s.trace_id == tid(1) for s in r.spans), "16-hex trace id left-padded"
    assert [s.span_id for s in r.spans] == [sid(2), sid(3), sid(4), sid(5)]
    # the second span with id 2 differs from the first: an error, the second copy is skipped
    assert r.errors == 1 and r.skipped_spans == 1
    assert any("span 0000000000000002 of trace 00000000000000000000000000000001: duplicate" in m for m in messages(r))
    first = r.spans[0]
    assert [(e.name, e.time_ns, e.attributes) for e in first.events] == [
        ("some-event", 1485467191639875000, ()),
        ("", 1485467191639875000, (("x", "y"),)),
    ]
    assert (first.start_ns, first.end_ns) == (1485467191639875000, 1485467191639880000)
    assert first.resource == (("service.name", "service-x"),)
    ref = by_name["reference-test"]
    assert ref.parent_span_id == sid(2), "first CHILD_OF into the same trace"
    assert [(k.trace_id, k.span_id, k.attributes) for k in ref.links] == [
        (tid(0xFF), sid(0xFF), (("opentracing.ref_type", "child_of"),)),
        (tid(1), sid(2), (("opentracing.ref_type", "follows_from"),)),
    ]
    assert ref.resource == (("service.name", "service-y"),)
    assert by_name["preserveParentID-test"].parent_span_id == sid(4)
    warnings = [m for m, p in zip(messages(r), r.problems) if p.severity is Severity.WARNING]
    assert any("some trace warning" in m for m in warnings) and sum("some span warning" in m for m in warnings) == 2


def test_jaeger_classic_tag_types_on_the_skipped_duplicate():
    """The duplicate span in ui_01 carries every tag type; read it alone to check them."""
    from launchtrace.sources.jaeger_classic import spans_from_jaeger_traces

    trace = orjson.loads(fixture("jaeger_v1_trace_ui_model.json").read_bytes())
    trace["spans"] = [trace["spans"][1]]
    (s,), _ = spans_from_jaeger_traces([trace])
    attrs = dict(s.attributes)
    assert attrs["peer.ipv4"] == 23456 and attrs["temperature"] == 72.5 and attrs["blob"] == b"\x00\x00\x30\x39"
    assert attrs["javascript_limit"] == 9223372036854775222, "int64 beyond 2^53 sent as a string"
    assert "error" not in attrs and s.status_code == 2, "error=true means status ERROR"
    assert [type(attrs[k]) for k in ("peer.service", "peer.ipv4", "temperature", "blob")] == [str, int, float, bytes]


def test_file_exporter_spec_example_empty_ids_are_per_span_errors():
    r = read_spans(fixture("otlp_file_exporter_spec_traces.jsonl"))
    assert r.format == "otlp-jsonl" and r.spans == []
    assert (r.errors, r.skipped_spans) == (8, 8)
    assert messages(r)[0].endswith(
        "otlp_file_exporter_spec_traces.jsonl:1: resourceSpans[0].scopeSpans[0].spans[0]: span skipped: empty trace id"
    )
    assert messages(r)[7].endswith(":4: resourceSpans[0].scopeSpans[0].spans[1]: span skipped: empty trace id")


def test_tempo_v1_batches_with_hex_looking_ids():
    r = read_spans(fixture("tempo_v1_batches_trace.json"))
    (s,) = r.spans
    assert r.format == "tempo-v1-json"
    assert s.trace_id.hex() == "5b8efff798038103d269b633813fc60c", "32 hex digits are hex, not 24 bytes of base64"
    # a reader told that its producer writes base64 refuses them instead
    strict_b64 = read_spans(fixture("tempo_v1_batches_trace.json"), id_encoding="base64")
    assert strict_b64.spans == [] and "read as base64 gives 24 bytes, expected 16" in messages(strict_b64)[0]


def test_tempo_agpl_v2_trace_by_id_base64_ids_and_enum_names():
    r = read_spans(fixture("tempo-agpl/tempo_v2_trace_by_id_response_docs.json"))
    (s,) = r.spans
    assert r.format == "tempo-v2-json-lines" and not r.problems
    assert s.trace_id.hex() == "5b8efff798038103d269b633813fc700" and s.span_id.hex() == "eee19b7ec3c1b100"
    assert (s.kind, s.name, s.parent_span_id) == (2, "I am a span!", None)
    assert s.end_ns - s.start_ns == 698 * 10**9


@pytest.mark.parametrize(
    "name",
    [
        "jaeger_apiv3_FindTraceSummaries.json",
        "jaeger_apiv3_GetServices.json",
        "jaeger_apiv3_GetOperations.json",
        "tempo-agpl/tempo_search_response_docs.json",
    ],
)
def test_documents_that_hold_no_spans_are_named_as_such(name):
    r = read_spans(fixture(name))
    assert r.spans == [] and r.errors == 1
    assert f"{name.split('/')[-1]}" in messages(r)[0] and "not a trace document" in messages(r)[0]


# ------------------------------------------------------------------------------------------ containers
def _spans(n: int, trace: int = 1) -> list[SpanData]:
    res = (("service.name", "sim"),)
    return [
        SpanData(tid(trace), sid(i + 1), sid(i) if i else None, f"k{i}", i, i + 1, (("n", i),), resource=res)
        for i in range(n)
    ]


def _proto_bytes(spans: list[SpanData]) -> bytes:
    """Serialised by the protobuf library itself, from our OTLP/JSON (ids converted to base64)."""
    obj = orjson.loads(encode_line(spans))
    for rs in obj["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for sp in ss["spans"]:
                for k in ("traceId", "spanId", "parentSpanId"):
                    if k in sp:
                        sp[k] = base64.b64encode(bytes.fromhex(sp[k])).decode()
    return json_format.ParseDict(obj, ExportTraceServiceRequest()).SerializeToString()


def test_json_lines_plain_and_gzip_sniffed_not_by_extension(tmp_path):
    spans = _spans(5)
    body = (encode_line(spans[:2]) + "\n" + encode_line(spans[2:]) + "\n").encode()
    (tmp_path / "a.txt").write_bytes(body)
    (tmp_path / "b.json").write_bytes(gzip.compress(body))
    for name, fmt in (("a.txt", "otlp-jsonl"), ("b.json", "otlp-jsonl+gzip")):
        r = read_spans(tmp_path / name)
        assert (r.format, r.spans, r.problems) == (fmt, spans, ())


def test_length_prefixed_and_plain_protobuf(tmp_path):
    spans = _spans(4)
    msgs = [_proto_bytes(spans[:3]), _proto_bytes(spans[3:])]
    (tmp_path / "d.bin").write_bytes(b"".join(struct.pack(">I", len(m)) + m for m in msgs))
    (tmp_path / "p.bin").write_bytes(gzip.compress(_proto_bytes(spans)))
    r = read_spans(tmp_path / "d.bin")
    assert (r.format, r.spans, r.problems) == ("otlp-proto-delimited", spans, ())
    r = read_spans(tmp_path / "p.bin")
    assert (r.format, r.spans, r.problems) == ("otlp-proto+gzip", spans, ())
    assert TracesData.FromString(msgs[0]).resource_spans[0].scope_spans[0].spans[0].name == "k0"


def test_truncated_length_prefixed_file_keeps_whole_messages(tmp_path):
    m = _proto_bytes(_spans(3))
    data = struct.pack(">I", len(m)) + m
    (tmp_path / "t.bin").write_bytes(data + data[:-5])
    r = read_spans(tmp_path / "t.bin")
    assert len(r.spans) == 3 and r.errors == 1 and r.skipped_lines == 1
    assert messages(r)[0] == f"{tmp_path / 't.bin'}:byte {len(data)}: truncated message: {len(m) - 5} of {len(m)} bytes"


def _streaming_peak(path: Path) -> tuple[int, int]:
    tracemalloc.start()
    try:
        count = 0
        with SpanFile(path) as sf:
            for _ in sf:
                count += 1
        return count, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_streaming_keeps_memory_flat(tmp_path):
    """Four times the spans, the same peak: the streaming reader holds one line at a time, not the file."""
    line = encode_line(_spans(200)) + "\n"
    (tmp_path / "small.jsonl").write_text(line * 10)
    (tmp_path / "big.jsonl").write_text(line * 40)
    small_count, small_peak = _streaming_peak(tmp_path / "small.jsonl")
    big_count, big_peak = _streaming_peak(tmp_path / "big.jsonl")
    assert (small_count, big_count) == (2_000, 8_000)
    assert big_peak < 1.5 * small_peak, (small_peak, big_peak)
    tracemalloc.start()
    try:
        assert len(read_spans(tmp_path / "big.jsonl", check=False).spans) == 8_000
        collected_peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert big_peak * 3 < collected_peak, (big_peak, collected_peak)


# ------------------------------------------------------------------------------------------ malformed input
def _write_lines(tmp_path, *lines: str) -> Path:
    path = tmp_path / "in.jsonl"
    path.write_text("\n".join(lines))
    return path


def _span_json(span_id: str, parent: str | None = None, trace: str = T.hex(), **extra) -> dict:
    d = {"traceId": trace, "spanId": span_id, "name": "s", **extra}
    if parent:
        d["parentSpanId"] = parent
    return d


def _line(*spans: dict) -> str:
    return orjson.dumps({"resourceSpans": [{"scopeSpans": [{"spans": list(spans)}]}]}).decode()


def test_truncated_and_non_json_lines_are_named_and_the_rest_is_read(tmp_path):
    good = _line(_span_json("0000000000000001"))
    path = _write_lines(tmp_path, good, "not json at all", "", _line(_span_json("0000000000000002")), good[:40])
    r = read_spans(path)
    assert [s.span_id for s in r.spans] == [sid(1), sid(2)]
    assert (r.errors, r.skipped_lines) == (2, 2)
    assert messages(r)[0].startswith(f"{path}:2: not JSON: ")
    assert messages(r)[1].startswith(f"{path}:5: truncated line: ")


def test_wrong_json_types_unknown_enums_and_hex_posing_as_base64(tmp_path):
    path = _write_lines(
        tmp_path,
        _line(_span_json("0000000000000001", kind="SPAN_KIND_WRONG"), _span_json("0000000000000002")),
        _line(_span_json("0000000000000003", attributes="nope")),
        "[1, 2]",
        _line(_span_json("W47/95gDgQPSabYzgT/HAA==")),  # a trace-sized base64 id where a span id goes
    )
    r = read_spans(path)
    assert [s.span_id for s in r.spans] == [sid(2)]
    assert (r.errors, r.skipped_spans) == (4, 3)
    m = messages(r)
    assert f"{path}:1: " in m[0] and "span '0000000000000001'" in m[0] and "unknown span kind 'SPAN_KIND_WRONG'" in m[0]
    assert m[1].startswith(f"{path}:2: ") and "attributes must be a list, got str" in m[1]
    assert m[2] == f"{path}:3: not a trace document: expected a JSON object, got list"
    assert m[3].startswith(f"{path}:4: ") and "read as base64 gives 16 bytes, expected 8" in m[3]


def test_duplicates_cycles_and_missing_parents(tmp_path):
    path = _write_lines(
        tmp_path,
        _line(_span_json("0000000000000001")),
        _line(_span_json("0000000000000002", "0000000000000001"), _span_json("0000000000000002", "00000000000000aa")),
        _line(_span_json("0000000000000005", "0000000000000006"), _span_json("0000000000000006", "0000000000000005")),
        _line(_span_json("0000000000000007", "0000000000000007"), _span_json("0000000000000008", "0000000000000005")),
        _line(_span_json("0000000000000009", "00000000000000ff")),
    )
    r = read_spans(path)
    assert [s.span_id for s in r.spans] == [sid(1), sid(2), sid(8), sid(9)]
    assert (r.errors, r.skipped_spans, r.warnings) == (4, 4, 2)
    m = messages(r)
    assert m[0] == (f"{path}:2: span 0000000000000002 of trace {T.hex()}: duplicate span id, second copy skipped")
    assert (
        m[1]
        == f"{path}:3: span 0000000000000005 of trace {T.hex()}: skipped, its parent 0000000000000006 leads back to it"
    )
    assert m[2].startswith(f"{path}:3: span 0000000000000006") and m[3].startswith(f"{path}:4: span 0000000000000007")
    assert m[4] == (
        f"{path}:4: span 0000000000000008 of trace {T.hex()}: "
        "parent 0000000000000005 is not in the trace; kept as a root"
    )
    assert m[5].startswith(f"{path}:5: span 0000000000000009") and "parent 00000000000000ff is not in the trace" in m[5]


def test_strict_mode_raises_user_error_at_the_first_problem(tmp_path):
    path = _write_lines(tmp_path, _line(_span_json("0000000000000001")), '{"resourceSpans": [{')
    with pytest.raises(UserError, match=rf"^{path}:2: truncated line: "):
        read_spans(path, strict=True)


def test_missing_empty_and_damaged_files(tmp_path):
    with pytest.raises(UserError, match=r"nope\.jsonl: cannot open: No such file or directory"):
        read_spans(tmp_path / "nope.jsonl")
    (tmp_path / "empty").write_bytes(b"")
    r = read_spans(tmp_path / "empty")
    assert r.spans == [] and r.warnings == 1 and messages(r) == [f"{tmp_path / 'empty'}: file is empty"]
    body = gzip.compress((_line(_span_json("0000000000000001")) + "\n").encode() * 200)
    (tmp_path / "cut.gz").write_bytes(body[: len(body) // 2])
    r = read_spans(tmp_path / "cut.gz")
    assert r.errors == 1 and "gzip data is damaged" in messages(r)[-1]


def test_protobuf_that_starts_like_json_is_still_read(tmp_path):
    """A TracesData whose first ResourceSpans is 123 bytes long starts with b"\\n{": JSON sniffing must yield."""
    for n in range(1, 400):
        spans = [SpanData(T, sid(1), None, "x" * n)]
        data = _proto_bytes(spans)
        if data[:2] == b"\n{":
            break
    else:
        pytest.fail("no span name gives a 123-byte ResourceSpans")
    (tmp_path / "odd.bin").write_bytes(data)
    r = read_spans(tmp_path / "odd.bin")
    assert (r.format, r.spans, r.problems) == ("otlp-proto", spans, ())


def test_garbage_collector_is_left_as_found_and_on_while_the_caller_runs(tmp_path):
    """The reader pauses the collector while it parses a line, never while the caller holds a span."""
    import gc

    path = tmp_path / "s.jsonl"
    path.write_text((encode_line(_spans(3)) + "\n") * 3)
    assert gc.isenabled()
    with SpanFile(path) as f:
        for _ in f:
            assert gc.isenabled()
            break
    assert gc.isenabled()
    gc.disable()
    try:
        assert len(read_spans(path, check=False).spans) == 9
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_jaeger_errors_that_are_not_a_list_are_still_reported():
    from launchtrace.sources.documents import spans_from_document

    spans, problems = spans_from_document({"data": [], "errors": "storage timeout"}, where="j.json")
    assert spans == [] and [str(p) for p in problems] == ["j.json: Jaeger error: storage timeout"]
