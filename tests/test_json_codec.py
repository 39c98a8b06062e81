"""OTLP/JSON encode and decode of SpanData, checked against opentelemetry-proto messages and json_format."""

from __future__ import annotations

import base64
import dataclasses
import math
import sys

import orjson
import pytest
from google.protobuf import json_format
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.proto.trace.v1.trace_pb2 import TracesData

from launchtrace.otlp.json_codec import decode_traces_data, encode_line, encode_traces_data
from launchtrace.spans import SpanData
from strategies import json_spans as spans

T1 = bytes.fromhex("5b8efff798038103d269b633813fc700")
S1 = bytes.fromhex("eee19b7ec3c1b100")
S2 = bytes.fromhex("eee19b7ec3c1b101")


def _hex_ids_to_base64(obj):
    """What json_format expects: bytes fields (ids) in base64 instead of OTLP/JSON's hex."""
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            if k in ("traceId", "spanId", "parentSpanId") and isinstance(v, str):
                v = base64.b64encode(bytes.fromhex(v)).decode()
            out[k] = _hex_ids_to_base64(v)
        return out
    if isinstance(obj, list):
        return [_hex_ids_to_base64(x) for x in obj]
    return obj


# --------------------------------------------------------------------------------------------- round trips
@settings(max_examples=60, deadline=None)
@given(st.lists(spans, max_size=6))
def test_encode_then_decode_gives_equal_spans(batch):
    line = encode_line(batch)
    assert "\n" not in line
    decoded, problems = decode_traces_data(orjson.loads(line), where="t:1")
    assert problems == []
    # grouping by resource and scope may reorder spans of different groups; within a group order is kept
    assert sorted(decoded, key=repr) == sorted(batch, key=repr)


@settings(max_examples=30, deadline=None)
@given(st.lists(spans, min_size=1, max_size=4))
def test_encoder_output_is_what_the_proto_json_parser_reads(batch):
    """json_format (the protobuf library's own parser) accepts our output once ids are base64, and the
    message it builds holds the same spans, ints and enums."""
    obj = encode_traces_data(batch)
    msg = json_format.ParseDict(_hex_ids_to_base64(obj), TracesData())
    got = [sp for rs in msg.resource_spans for ss in rs.scope_spans for sp in ss.spans]
    assert sorted((s.span_id, s.start_time_unix_nano, s.kind, s.flags) for s in got) == sorted(
        (s.span_id, s.start_ns, s.kind, s.flags) for s in batch
    )
    # hypothesis may draw the same span id twice in one batch: compare (span, parent) pairs as multisets
    assert sorted((s.span_id, s.parent_span_id) for s in got) == sorted(
        (s.span_id, s.parent_span_id or b"") for s in batch
    )


def test_every_any_value_kind_is_encoded_as_the_spec_says():
    span = SpanData(
        T1,
        S1,
        S2,
        "k",
        attributes=(
            ("s", "x"),
            ("b", True),
            ("i", 2**63 - 1),
            ("d", 0.5),
            ("nan", math.nan),
            ("inf", -math.inf),
            ("bytes", b"\x00\x00\x30\x39"),
            ("arr", (1, ("nested", 2.0))),
            ("kv", {"inner": {"deep": False}}),
            ("none", None),
        ),
        kind=2,
        status_code=2,
    )
    obj = orjson.loads(encode_line([span]))
    sp = obj["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    assert sp["traceId"] == T1.hex() and sp["parentSpanId"] == S2.hex()
    assert sp["kind"] == 2 and sp["status"] == {"code": 2}
    assert sp["startTimeUnixNano"] == "0"
    got = {a["key"]: a["value"] for a in sp["attributes"]}
    assert got["i"] == {"intValue": "9223372036854775807"}
    assert got["b"] == {"boolValue": True}
    assert got["nan"] == {"doubleValue": "NaN"} and got["inf"] == {"doubleValue": "-Infinity"}
    assert got["bytes"] == {"bytesValue": "AAAwOQ=="}
    assert got["arr"] == {
        "arrayValue": {
            "values": [
                {"intValue": "1"},
                {"arrayValue": {"values": [{"stringValue": "nested"}, {"doubleValue": 2.0}]}},
            ]
        }
    }
    assert got["kv"] == {
        "kvlistValue": {
            "values": [
                {
                    "key": "inner",
                    "value": {"kvlistValue": {"values": [{"key": "deep", "value": {"boolValue": False}}]}},
                }
            ]
        }
    }
    assert got["none"] == {}
    back, problems = decode_traces_data(obj)
    assert not problems
    decoded = dict(back[0].attributes)
    assert math.isnan(decoded.pop("nan"))
    expected = dict(span.attributes)
    expected.pop("nan")
    assert decoded == expected


def test_numpy_scalars_and_unknown_objects_are_encoded_without_failing():
    np = __import__("numpy")
    span = SpanData(
        T1,
        S1,
        None,
        "n",
        attributes=(
            ("i", np.int64(3)),
            ("f", np.float32(0.5)),
            ("b", np.bool_(1)),
            ("o", object.__new__(type("Thing", (), {}))),
        ),
    )
    got = {
        a["key"]: a["value"]
        for a in encode_traces_data([span])["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["attributes"]
    }
    assert got["i"] == {"intValue": "3"} and got["f"] == {"doubleValue": 0.5} and got["b"] == {"boolValue": True}
    assert "Thing object" in got["o"]["stringValue"]


def test_spans_are_grouped_by_resource_and_scope():
    res_a, res_b = (("service.name", "a"),), (("service.name", "b"),)
    equal_to_a = (("service.name", "a"),)  # equal value, another object: same group
    batch = [
        SpanData(T1, S1, None, "1", resource=res_a, scope_name="x"),
        SpanData(T1, S2, None, "2", resource=res_b, scope_name="x"),
        SpanData(T1, bytes(7) + b"\x03", None, "3", resource=equal_to_a, scope_name="x"),
        SpanData(T1, bytes(7) + b"\x04", None, "4", resource=res_a, scope_name="y"),
    ]
    obj = encode_traces_data(batch)
    assert [len(rs["scopeSpans"]) for rs in obj["resourceSpans"]] == [2, 1]
    first = obj["resourceSpans"][0]["scopeSpans"]
    assert [[s["name"] for s in ss["spans"]] for ss in first] == [["1", "3"], ["4"]]
    assert first[0]["scope"] == {"name": "x"}


# ----------------------------------------------------------------------------------- what producers write
def test_decoder_accepts_tempo_style_base64_ids_enum_names_and_legacy_keys():
    obj = {
        "batches": [
            {
                "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "svc"}}]},
                "instrumentationLibrarySpans": [
                    {
                        "instrumentationLibrary": {"name": "lib", "version": "1"},
                        "spans": [
                            {
                                "traceId": base64.b64encode(T1).decode(),
                                "spanId": base64.b64encode(S1).decode(),
                                "parentSpanId": base64.b64encode(S2).decode(),
                                "name": "op",
                                "kind": "SPAN_KIND_CLIENT",
                                "startTimeUnixNano": 5,
                                "endTimeUnixNano": 7.0,
                                "status": {"code": "STATUS_CODE_ERROR", "message": "boom"},
                                "attributes": [{"key": "n", "value": {"intValue": 42}}],
                                "someFutureField": {"ignored": True},
                            }
                        ],
                    }
                ],
            }
        ],
        "unknownTopLevel": 1,
    }
    (span,), problems = decode_traces_data(obj)
    assert problems == []
    assert (span.trace_id, span.span_id, span.parent_span_id) == (T1, S1, S2)
    assert (span.kind, span.status_code, span.status_message) == (3, 2, "boom")
    assert (span.start_ns, span.end_ns, span.attributes) == (5, 7, (("n", 42),))
    assert (span.scope_name, span.scope_version, span.resource) == ("lib", "1", (("service.name", "svc"),))


def _one_span_doc(**fields):
    span = {"traceId": T1.hex(), "spanId": S1.hex(), "name": "op", **fields}
    return {"resourceSpans": [{"scopeSpans": [{"spans": [span, {"traceId": T1.hex(), "spanId": S2.hex()}]}]}]}


def _problems(**fields):
    spans, problems = decode_traces_data(_one_span_doc(**fields), where="f.jsonl:7")
    assert [s.span_id for s in spans] == [S2], "the valid sibling span is still read"
    assert len(problems) == 1 and problems[0].skipped == 1
    msg = str(problems[0])
    assert msg.startswith(f"f.jsonl:7: resourceSpans[0].scopeSpans[0].spans[0]: span '{S1.hex()}'")
    return msg


def test_bad_spans_are_skipped_with_a_problem_naming_place_and_span():
    assert "unknown span kind 'SPAN_KIND_BOGUS'" in _problems(kind="SPAN_KIND_BOGUS")
    assert "unknown span kind 9" in _problems(kind=9)
    assert "unknown status code 7" in _problems(status={"code": 7})
    assert "startTimeUnixNano 'soon' is not an integer" in _problems(startTimeUnixNano="soon")
    assert "attributes must be a list, got dict" in _problems(attributes={"a": 1})
    assert "attribute value must be an object" in _problems(attributes=[{"key": "a", "value": 3}])
    assert "name must be a string, got int" in _problems(name=3)
    assert "bytesValue must be base64" in _problems(attributes=[{"key": "a", "value": {"bytesValue": "!!"}}])
    assert "span id '!!' is neither hex nor base64" in _problems(parentSpanId="!!")


def test_digits_int_cannot_read_skip_the_span_instead_of_stopping_the_reader():
    # "²".isdigit() is true but int("²") fails: these used to escape as a bare ValueError
    assert "startTimeUnixNano '²' is not an integer" in _problems(startTimeUnixNano="²")
    assert "intValue '²' is not an integer" in _problems(
        attributes=[{"key": "a", "value": {"arrayValue": {"values": [{"intValue": "²"}]}}}]
    )
    assert "unknown span kind '²'" in _problems(kind="²")
    # other Unicode decimal digits are read as int() reads them, on the fast path as before
    spans, _ = decode_traces_data(_one_span_doc(startTimeUnixNano="\u0663"))
    assert spans[0].start_ns == 3


def test_an_id_text_remembered_for_one_id_size_is_not_reused_for_the_other():
    doc = {"resourceSpans": [{"scopeSpans": [{"spans": [
        {"traceId": T1.hex(), "spanId": S1.hex(), "parentSpanId": S2.hex(), "name": "a"},
        {"traceId": S2.hex(), "spanId": S2.hex(), "name": "b"},  # a span id's text where a trace id belongs
        {"traceId": T1.hex(), "spanId": S2.hex(), "parentSpanId": T1.hex(), "name": "c"},
        {"traceId": T1.hex(), "spanId": S2.hex(), "parentSpanId": S2.hex(), "name": "d"},
    ]}]}]}  # fmt: skip
    spans, problems = decode_traces_data(doc, where="f:1")
    assert [(s.name, s.trace_id, s.parent_span_id) for s in spans] == [("a", T1, S2), ("d", T1, S2)]
    assert ["trace id" in str(problems[0]), "span id" in str(problems[1])] == [True, True]


def test_hex_id_posing_as_base64_is_an_error_when_the_producer_writes_base64():
    obj = _one_span_doc()
    spans, problems = decode_traces_data(obj, id_encoding="base64")
    assert spans == [] and len(problems) == 2
    assert "read as base64 gives 24 bytes, expected 16 (a hex id where base64 was expected?)" in str(problems[0])


def test_empty_ids_from_the_spec_example_are_per_span_errors():
    obj = {"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "", "spanId": "", "name": "operationA"}]}]}]}
    spans, problems = decode_traces_data(obj, where="spec.jsonl:1")
    assert spans == [] and str(problems[0]) == (
        "spec.jsonl:1: resourceSpans[0].scopeSpans[0].spans[0]: span skipped: empty trace id"
    )


def test_bad_link_is_dropped_but_span_kept():
    spans, problems = decode_traces_data(_one_span_doc(links=[{"traceId": "", "spanId": ""}]))
    assert len(spans) == 2 and spans[0].links == ()
    assert "link 0 dropped: empty trace id" in str(problems[0]) and problems[0].skipped == 0


def test_wrong_top_level_shapes():
    assert str(decode_traces_data([1], where="x:1")[1][0]) == "x:1: expected a TracesData JSON object, got list"
    assert "'resourceSpans' must be a list, got str" in str(decode_traces_data({"resourceSpans": "x"})[1][0])
    assert "no 'resourceSpans'" in str(decode_traces_data({"data": []})[1][0])
    assert decode_traces_data({}) == ([], [])
    spans, problems = decode_traces_data({"resourceSpans": [{"resource": 3, "scopeSpans": [{"spans": [{}, {}]}]}]})
    assert spans == [] and problems[0].skipped == 2 and "resource must be an object, got int" in str(problems[0])


def test_values_json_cannot_carry_are_written_the_way_the_protobuf_encoder_writes_them():
    span = SpanData(T1, S1, None, "bad\udc80name", attributes=(("big", 2**70), ("s", "x\ud800y")))
    obj = orjson.loads(encode_line([span]))
    sp = obj["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    assert sp["name"] == "bad?name"
    assert sp["attributes"] == [
        {"key": "big", "value": {"stringValue": str(2**70)}},
        {"key": "s", "value": {"stringValue": "x?y"}},
    ]


@settings(max_examples=30, deadline=None)
@given(spans)
def test_fast_span_constructor_builds_what_the_dataclass_builds(span):
    from launchtrace.otlp.json_codec import _new_span

    values = [getattr(span, f.name) for f in dataclasses.fields(SpanData)]
    built = _new_span(*values)
    assert type(built) is SpanData and built == span and hash(built.span_id) == hash(span.span_id)
    with pytest.raises(TypeError):  # every field, in order: nothing left to a default
        _new_span(span.trace_id, span.span_id, None, "n")
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.name = "changed"


def test_values_nested_beyond_the_recursion_limit_skip_the_span_not_the_reader():
    """Deeper than the interpreter's recursion limit, whatever it is now (tinygrad raises it to 10,000 on import)."""
    value: dict = {"stringValue": "x"}
    for _ in range(sys.getrecursionlimit() + 100):
        value = {"arrayValue": {"values": [value]}}
    obj = _one_span_doc(attributes=[{"key": "deep", "value": value}])
    spans, problems = decode_traces_data(obj, where="f.jsonl:1")
    assert [s.span_id for s in spans] == [S2]
    assert str(problems[0]).endswith("skipped: attribute values nested too deeply") and problems[0].skipped == 1


# the fast paths of _dec_attrs against the one-attribute-at-a-time path they shortcut
_json_leaf = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(), st.text(max_size=6),
    st.sampled_from(["12", "-3", "²", "\u0663", " 7", "1_0", "NaN", "AQI="]),
)  # fmt: skip
_value_obj = st.dictionaries(
    st.sampled_from(["stringValue", "intValue", "boolValue", "doubleValue", "bytesValue", "arrayValue", "x"]),
    st.one_of(_json_leaf, st.builds(lambda vs: {"values": vs}, st.lists(st.dictionaries(
        st.sampled_from(["stringValue", "intValue", "boolValue", "x"]), _json_leaf, max_size=2), max_size=3))),
    max_size=2,
)  # fmt: skip
_attr_obj = st.one_of(
    st.builds(lambda k, v: {"key": k, "value": v}, st.one_of(st.text(max_size=3), st.integers()), _value_obj),
    st.builds(lambda k: {"key": k}, st.text(max_size=3)),
    _json_leaf,
)


def _outcome(fn, arg):
    try:
        return ("ok", fn(arg))
    except ValueError as exc:  # _Bad, or the bare ValueError a bug would let out
        return (type(exc).__name__, str(exc))


@settings(max_examples=400, deadline=None)
@given(st.lists(_attr_obj, max_size=4))
def test_attribute_fast_paths_decode_what_the_general_path_decodes(attrs):
    from launchtrace.otlp.json_codec import _dec_attr, _dec_attrs

    def one_by_one(items):
        return tuple(_dec_attr(kv) for kv in items)

    fast, general = _outcome(_dec_attrs, attrs), _outcome(one_by_one, attrs)
    assert fast[0] == general[0] and (fast[0] != "ok" or repr(fast[1]) == repr(general[1]))
    assert fast[0] in ("ok", "BadSpan")
