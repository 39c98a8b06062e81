"""The compiled OTLP JSON reader (``launchtrace.otlp._jsonread``) against the general decoder it stands in for.

Its contract is the fast path's: for any line, ``Decoder.decode(line)`` is ``None`` or exactly the spans
``decode_traces_data(orjson.loads(line))`` returns, and only for a line that decoder reads without a problem.
Every check here goes through :func:`check`, which asserts that and returns the compiled answer; where the
answer must not be ``None`` (lines our own encoder writes), the tests say so. Without the built module the
comparisons are skipped (there is nothing to compare); ``test_the_compiled_reader_is_used_when_built`` skips
only when the shared library genuinely is not there.
"""

from __future__ import annotations

import base64
import dataclasses
import importlib.util
import math
import os
import sys
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import upstream_fixtures
from launchtrace.otlp.ids import decode_id
from launchtrace.otlp.json_codec import KIND_NAMES, STATUS_NAMES, _dec_bytes, decode_traces_data, encode_line
from launchtrace.otlp.json_fast import FastLineDecoder, compiled_decoder
from launchtrace.sources.files import SpanFile
from launchtrace.spans import SpanData, SpanEvent, SpanLink
from strategies import attr_text_objects, attr_text_values, span_strategy
from strategies import json_events as event_data
from strategies import json_ids8 as ids8
from strategies import json_ids16 as ids16
from strategies import json_u32 as u32
from strategies import json_u64 as u64

FIXTURES = upstream_fixtures()
T = "5b8efff798038103d269b633813fc700"
BUILT = importlib.util.find_spec("launchtrace.otlp._jsonread") is not None


@pytest.fixture(autouse=True)
def _compiled_reader_present(monkeypatch):
    """The comparisons need the compiled module; LAUNCHTRACE_PURE_PYTHON would hide it."""
    monkeypatch.delenv("LAUNCHTRACE_PURE_PYTHON", raising=False)
    if not BUILT:
        pytest.skip("launchtrace.otlp._jsonread is not built here (no C compiler at install)")


def new_decoder(id_encoding: str = "auto"):
    decoder = compiled_decoder(id_encoding)
    assert decoder is not None
    return decoder


def general(line: bytes, id_encoding: str = "auto"):
    """(spans, problem texts) of the general decoder, or None when orjson finds no JSON in the line."""
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    spans, problems = decode_traces_data(obj, where="f:1", id_encoding=id_encoding)
    return spans, [str(p) for p in problems]


def check(decoder, line: bytes, id_encoding: str = "auto") -> list[SpanData] | None:
    """The compiled answer for ``line``, asserted to be None or exactly the general decoder's spans."""
    fast = decoder.decode(line)
    if fast is None:
        return None
    reference = general(line, id_encoding)
    assert reference is not None, f"the compiled reader accepted a line that is not JSON: {line[:200]!r}"
    spans, problems = reference
    assert problems == [], f"the compiled reader accepted a line with problems {problems}: {line[:200]!r}"
    assert type(fast) is list and len(fast) == len(spans)
    assert [repr(s) for s in fast] == [repr(s) for s in spans]  # types too (1 vs 1.0 vs True), and NaN
    if "nan" not in repr(spans):
        assert fast == spans
    for a, b in zip(fast, spans):
        assert type(a) is SpanData and all(type(x) is type(y) for x, y in zip(_walk(a), _walk(b)))
    return fast


def _walk(obj):
    """Every value inside a span, depth first, to compare types exactly (bool vs int, tuple vs list)."""
    if dataclasses.is_dataclass(obj):
        yield obj
        for f in dataclasses.fields(obj):
            yield from _walk(getattr(obj, f.name))
    elif type(obj) is tuple:
        yield obj
        for x in obj:
            yield from _walk(x)
    elif type(obj) is dict:
        yield obj
        for k, v in obj.items():
            yield k
            yield from _walk(v)
    else:
        yield obj


def line_of(*spans: dict, resource: dict | None = None, scope: dict | None = None) -> bytes:
    rs: dict = {"scopeSpans": [{"scope": scope if scope is not None else {"name": "s"}, "spans": list(spans)}]}
    if resource is not None:
        rs["resource"] = resource
    return orjson.dumps({"resourceSpans": [rs]})


def span(n: int = 1, **extra) -> dict:
    return {"traceId": T, "spanId": f"{n:016x}", "name": "k", "startTimeUnixNano": "1", **extra}


def attr(key: str, value: dict) -> dict:
    return {"key": key, "value": value}


# ------------------------------------------------------------------------------------------ generated
_text = st.text(max_size=10)  # all of Unicode but lone surrogates: astral characters, controls, escapes
_scalars = (
    _text
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.integers(2**63, 2**70)  # written as stringValue by the encoder
    | st.floats()  # NaN and the infinities are written as strings
    | st.binary(max_size=8)
    | st.none()
)
_attr_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=3).map(tuple) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=10,
)
_attrs = st.dictionaries(_text, _attr_values, max_size=5).map(lambda d: tuple(d.items()))
_spans = span_strategy(
    text=_text,
    attributes=_attrs,
    resources=st.sampled_from([(), (("service.name", "sim"),), (("service.name", "other"), ("pid", 7))]) | _attrs,
    ids16=ids16,
    ids8=ids8,
    events=st.builds(SpanEvent, _text, u64, _attrs, u32) | event_data,
    resource_schema_url=st.sampled_from(["", "https://opentelemetry.io/schemas/1.4.0"]),
    scope_name=st.sampled_from(["", "launchtrace"]) | _text,
    scope_version=st.sampled_from(["", "0.1"]),
    scope_attributes=st.sampled_from([(), (("a", 1),)]) | _attrs,
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_spans, min_size=1, max_size=6), st.integers(1, 3), st.booleans())
def test_generated_spans_are_read_as_the_general_decoder_reads_them(batch, per_line, indent):
    decoder = new_decoder()
    lines = [encode_line(batch[i : i + per_line]).encode() for i in range(0, len(batch), per_line)]
    if indent:  # whitespace everywhere the grammar allows it
        lines = [orjson.dumps(orjson.loads(x), option=orjson.OPT_INDENT_2) for x in lines]
    for line in lines + lines:  # the second round through the caches and position predictions
        assert check(decoder, line) is not None, line  # everything our encoder writes has an answer


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(attr_text_objects, max_size=5), min_size=1, max_size=5), st.booleans())
def test_any_attribute_objects_give_no_answer_or_the_general_one(arrays, spaced):
    """Attribute objects of every shape, valid or not: wrong types, extra keys, several kinds, odd strings."""
    decoder = new_decoder()
    option = orjson.OPT_INDENT_2 if spaced else 0
    for attrs in arrays + arrays:
        for where in ("span", "resource", "event", "scope"):
            if where == "span":
                line = line_of(span(1, attributes=attrs))
            elif where == "resource":
                line = line_of(span(1), resource={"attributes": attrs})
            elif where == "scope":
                line = line_of(span(1), scope={"name": "s", "attributes": attrs})
            else:
                line = line_of(span(1, events=[{"name": "e", "timeUnixNano": "5", "attributes": attrs}]))
            check(decoder, orjson.dumps(orjson.loads(line), option=option))


@settings(max_examples=200, deadline=None)
@given(attr_text_values)
def test_any_value_object_gives_no_answer_or_the_general_one(value):
    decoder = new_decoder()
    line = line_of(span(1, attributes=[attr("a", value), attr("b", {"stringValue": "x"})]))
    check(decoder, line)
    check(decoder, line)


def test_every_value_kind_is_answered():
    kv = {"kvlistValue": {"values": [attr("x", {"intValue": "1"}), attr("x", {"doubleValue": 2.5})]}}
    attrs = [
        attr("s", {"stringValue": 'é 😀 \u2028 \x01 \\ " /'}),
        attr("i", {"intValue": "-9223372036854775808"}),
        attr("n", {"intValue": 9223372036854775807}),
        attr("z", {"intValue": "007"}),
        attr("big", {"intValue": "123456789012345678901234567890"}),  # int() reads it: so does the reader
        attr("b", {"boolValue": True}),
        attr("d", {"doubleValue": 1e-300}),
        attr("di", {"doubleValue": 3}),
        attr("nan", {"doubleValue": "NaN"}),
        attr("inf", {"doubleValue": "-Infinity"}),
        attr("ds", {"doubleValue": "1.5"}),
        attr("y", {"bytesValue": base64.b64encode(b"\x00\xff").decode()}),
        attr("yu", {"bytesValue": "-_8"}),  # URL-safe, unpadded
        attr("a", {"arrayValue": {"values": [{"stringValue": "a"}, {"intValue": "2"}, {}, kv]}}),
        attr("ae", {"arrayValue": {"values": []}}),
        attr("k", kv),
        attr("ke", {"kvlistValue": {"values": []}}),
        attr("e", {}),
    ]
    line = line_of(
        span(1, attributes=attrs, kind="SPAN_KIND_SERVER", status={"code": "2", "message": "m"}),
        span(2, parentSpanId="0000000000000001", kind=3, status={"code": "STATUS_CODE_OK"}, flags="257"),
        span(3, parentSpanId="", traceState="a=b", events=[], links=None, status=None, droppedLinksCount=4),
        span(4, parentSpanId=None, startTimeUnixNano=5, endTimeUnixNano="18446744073709551615"),
    )
    decoder = new_decoder()
    for _ in range(3):
        spans = check(decoder, line)
        assert spans is not None and len(spans) == 4
    assert math.isnan(dict(spans[0].attributes)["nan"]) and spans[3].end_ns == 2**64 - 1


def test_ids_as_the_general_decoder_reads_them():
    b64 = base64.b64encode(bytes.fromhex(T)).decode()
    sid = base64.b64encode(bytes(7) + b"\x01").decode()
    upper = line_of(span(1, traceId=T.upper(), spanId="00000000000000AB"))
    base = line_of(span(1, traceId=b64, spanId=sid, links=[{"traceId": b64, "spanId": sid}]))
    for encoding in ("auto", "hex", "base64"):
        decoder = new_decoder(encoding)
        for line in (upper, base, line_of(span(1)), line_of(span(1, traceId=T[:-2] + "zz"))):
            check(decoder, line, encoding)
    assert new_decoder("auto").decode(base) is not None and new_decoder("base64").decode(base) is not None
    assert new_decoder("base64").decode(upper) is None  # hex where base64 is expected: a problem
    assert new_decoder("hex").decode(base) is None


# ------------------------------------------------------------------------------------ upstream fixtures
FIXTURE_FILES = sorted(p for p in FIXTURES.rglob("*") if p.is_file() and p.suffix in (".json", ".jsonl"))


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=lambda p: p.name)
def test_upstream_fixture_lines(path):
    body = path.read_bytes()
    texts = [x for x in body.splitlines() if x.strip()] if path.suffix == ".jsonl" else [body]
    for encoding in ("auto", "hex", "base64"):
        decoder = new_decoder(encoding)
        for text in texts:
            check(decoder, text, encoding)
            try:
                compact = orjson.dumps(orjson.loads(text))
            except orjson.JSONDecodeError:
                continue
            for _ in range(2):
                check(decoder, compact, encoding)


def test_fixture_list_is_not_empty():
    assert len(FIXTURE_FILES) >= 10


def test_upstream_otlp_files_are_answered():
    """Other producers' OTLP/JSON (spec examples, Jaeger's OTLP output) is read here, not only our own."""
    answered = set()
    for path in FIXTURE_FILES:
        texts = [x for x in path.read_bytes().splitlines() if x.strip()] if path.suffix == ".jsonl" else []
        for text in [*texts, path.read_bytes()]:
            if check(new_decoder(), text):
                answered.add(path.name)
    assert len(answered) >= 2, answered


# ------------------------------------------------------------------------------------ malformed lines
GOOD = line_of(
    span(
        1,
        attributes=[attr("a", {"stringValue": "x"}), attr("n", {"intValue": "5"}), attr("f", {"doubleValue": 0.5})],
        events=[{"name": "e", "timeUnixNano": "7", "attributes": [attr("k", {"boolValue": False})]}],
        links=[{"traceId": T, "spanId": "0000000000000009", "attributes": [attr("l", {"stringValue": "é"})]}],
        status={"code": 1},
    ),
    span(2, parentSpanId="0000000000000001", kind=2),
    resource={"attributes": [attr("service.name", {"stringValue": "sim"})]},
)


def test_every_truncation_and_byte_change_gives_no_answer_or_the_general_one():
    decoder = new_decoder()
    assert check(decoder, GOOD) is not None
    for cut in range(len(GOOD)):
        assert check(decoder, GOOD[:cut]) is None  # never a whole object
    for i in range(len(GOOD)):
        for byte in b'{}[]",:0-1e.\\ ax\x00\x1f\x7f\xc3\xff':
            check(decoder, GOOD[:i] + bytes([byte]) + GOOD[i + 1 :])
        check(decoder, GOOD[:i] + GOOD[i + 1 :])  # one byte left out
        check(decoder, GOOD[:i] + GOOD[i : i + 1] * 2 + GOOD[i + 1 :])  # one byte doubled


def _dup(key: bytes, where: bytes = b'"name":"k"') -> bytes:
    return line_of(span(1)).replace(where, where + b"," + key)


BAD = {
    "duplicate span key": _dup(b'"name":"j"'),
    "duplicate attributes": line_of(span(1, attributes=[])).replace(
        b'"attributes":[]', b'"attributes":[1e400],"attributes":[]'
    ),
    "duplicate resourceSpans": b'{"resourceSpans":[],"resourceSpans":[]}',
    "duplicate attribute key": line_of(span(1, attributes=[attr("a", {"stringValue": "x"})])).replace(
        b'"key":"a"', b'"key":"a","key":"b"'
    ),
    "two value kinds": line_of(span(1, attributes=[attr("a", {"stringValue": "x", "intValue": "1"})])),
    "duplicate status code": line_of(span(1, status={"code": 1})).replace(b'"code":1', b'"code":1,"code":2'),
    "unknown span key": line_of(span(1, surprise=1)),
    "escaped key": line_of(span(1)).replace(b'"name"', b'"n\\u0061me"'),
    "legacy batches": orjson.dumps({"batches": [{"scopeSpans": [{"spans": [span(1)]}]}]}),
    "legacy library spans": orjson.dumps({"resourceSpans": [{"instrumentationLibrarySpans": [{"spans": [span(1)]}]}]}),
    "empty object": b"{}",
    "array": b"[1]",
    "bom": b"\xef\xbb\xbf" + line_of(span(1)),
    "trailing garbage": line_of(span(1)) + b"x",
    "trailing comma": line_of(span(1)).replace(b'"name":"k"', b'"name":"k",'),
    "nul after": line_of(span(1)) + b"\x00",
    "form feed": b"\x0c" + line_of(span(1)),
    "invalid utf-8": line_of(span(1)).replace(b'"k"', b'"\xff"'),
    "overlong utf-8": line_of(span(1)).replace(b'"k"', b'"\xc0\x80"'),
    "encoded surrogate": line_of(span(1)).replace(b'"k"', b'"\xed\xa0\x80"'),
    "past U+10FFFF": line_of(span(1)).replace(b'"k"', b'"\xf4\x90\x80\x80"'),
    "truncated utf-8": line_of(span(1)).replace(b'"k"', b'"\xe2\x82"'),
    "utf-8 in a key": line_of(span(1)).replace(b'"name"', b'"n\xffme"'),
    "raw control char": line_of(span(1)).replace(b'"k"', b'"\x01"'),
    "raw tab": line_of(span(1)).replace(b'"k"', b'"\t"'),
    "lone high surrogate": line_of(span(1)).replace(b'"k"', b'"\\ud800"'),
    "lone low surrogate": line_of(span(1)).replace(b'"k"', b'"\\udc00x"'),
    "bad escape": line_of(span(1)).replace(b'"k"', b'"\\x41"'),
    "short unicode escape": line_of(span(1)).replace(b'"k"', b'"\\u12"'),
    "leading zero": line_of(span(1, startTimeUnixNano=0)).replace(b'"startTimeUnixNano":0', b'"startTimeUnixNano":01'),
    "plus sign": line_of(span(1, kind=1)).replace(b'"kind":1', b'"kind":+1'),
    "bare dot": line_of(span(1, kind=1)).replace(b'"kind":1', b'"kind":1.'),
    "bare exponent": line_of(span(1, kind=1)).replace(b'"kind":1', b'"kind":1e'),
    "int > 64 bits": line_of(span(1, kind=1)).replace(b'"kind":1', b'"kind":99999999999999999999999'),
    "uint64 number": line_of(span(1, startTimeUnixNano=2**64 - 1)),
    "time as float": line_of(span(1, startTimeUnixNano=1.5)),
    "time as integral float": line_of(span(1, startTimeUnixNano=2.0)),
    "double overflows": line_of(span(1, attributes=[attr("d", {"doubleValue": 1.0})])).replace(b"1.0", b"1e400"),
    "flags as bool": line_of(span(1, flags=True)),
    "name as number": line_of(span(1, name=3)),
    "name null": line_of(span(1, name=None)),
    "unknown kind": line_of(span(1, kind=9)),
    "unknown kind name": line_of(span(1, kind="SPAN_KIND_BOGUS")),
    "kind as bool": line_of(span(1, kind=True)),
    "unknown status": line_of(span(1, status={"code": 7})),
    "status not an object": line_of(span(1, status=[1])),
    "empty trace id": line_of(span(1, traceId="")),
    "no span id": line_of({"traceId": T}),
    "all-zero span id": line_of(span(1, spanId="0" * 16)),
    "span id not hex": line_of(span(1, spanId="zz" * 8)),
    "parent as number": line_of(span(1, parentSpanId=5)),
    "attributes not a list": line_of(span(1, attributes="nope")),
    "attribute without a value": line_of(span(1, attributes=[{"key": "a"}])),
    "attribute without a key": line_of(span(1, attributes=[{"value": {"stringValue": "x"}}])),
    "attribute key a number": line_of(span(1, attributes=[{"key": 1, "value": {"stringValue": "x"}}])),
    "attribute a list": line_of(span(1, attributes=[[]])),
    "value not an object": line_of(span(1, attributes=[{"key": "a", "value": "x"}])),
    "string value a number": line_of(span(1, attributes=[attr("a", {"stringValue": 1})])),
    "int value a bool": line_of(span(1, attributes=[attr("a", {"intValue": True})])),
    "int value not digits": line_of(span(1, attributes=[attr("a", {"intValue": "12x"})])),
    "bool value a string": line_of(span(1, attributes=[attr("a", {"boolValue": "true"})])),
    "bytes not base64": line_of(span(1, attributes=[attr("a", {"bytesValue": "!!"})])),
    "array values null": line_of(span(1, attributes=[attr("a", {"arrayValue": {"values": None}})])),
    "array element null": line_of(span(1, attributes=[attr("a", {"arrayValue": {"values": [None]}})])),
    "kvlist not an object": line_of(span(1, attributes=[attr("a", {"kvlistValue": []})])),
    "bad link": line_of(span(1, links=[{"traceId": "", "spanId": "1"}])),
    "link without ids": line_of(span(1, links=[{}])),
    "event a string": line_of(span(1, events=["e"])),
    "events an object": line_of(span(1, events={"name": "e"})),
    "scopeSpans null": orjson.dumps({"resourceSpans": [{"scopeSpans": None}]}),
    "spans null": orjson.dumps({"resourceSpans": [{"scopeSpans": [{"spans": None}]}]}),
    "schemaUrl null": orjson.dumps({"resourceSpans": [{"schemaUrl": None, "scopeSpans": []}]}),
    "resource a list": orjson.dumps({"resourceSpans": [{"resource": [1], "scopeSpans": []}]}),
    "scope name null": line_of(span(1), scope={"name": None}),
}


@pytest.mark.parametrize("line", list(BAD.values()), ids=list(BAD))
def test_problem_lines_get_no_answer(line):
    """Not JSON, a problem for the general decoder, or a shape the reader leaves to it (duplicates, legacy)."""
    assert new_decoder().decode(line) is None
    decoder = new_decoder()
    check(decoder, GOOD)  # with warm caches too
    assert decoder.decode(line) is None


def _nested(depth: int, kind: str = "arrayValue") -> bytes:
    """A line with one attribute value nested ``depth`` levels (text: orjson.dumps stops at 255 levels)."""
    if kind == "arrayValue":
        head, tail = b'{"arrayValue":{"values":[', b"]}}"
    else:
        head, tail = b'{"kvlistValue":{"values":[{"key":"k","value":', b"}]}}"
    value = head * depth + b'{"stringValue":"leaf"}' + tail * depth
    return line_of(span(1, attributes=[attr("a", {"stringValue": "x"})])).replace(b'{"stringValue":"x"}', value)


@pytest.mark.parametrize("kind", ["arrayValue", "kvlistValue"])
def test_nesting_is_read_to_a_bound_and_refused_past_it(kind):
    decoder = new_decoder()
    assert check(decoder, _nested(20, kind)) is not None
    for depth in (60, 200, 400):  # past the bound: no answer (the general decoder's recursion, orjson's depth)
        assert decoder.decode(_nested(depth, kind)) is None
    deep = line_of(span(1, attributes=[attr("a", {"stringValue": "x"})])).replace(
        b'{"stringValue":"x"}', b"[" * 5000 + b"]" * 5000
    )
    assert decoder.decode(deep) is None


def test_not_bytes_gets_no_answer():
    decoder = new_decoder()
    assert decoder.decode(GOOD.decode()) is None
    assert decoder.decode(bytearray(GOOD)) is None
    assert decoder.decode(None) is None


def test_a_memoryview_is_read_in_place_as_its_bytes():
    decoder = new_decoder()
    buffer = bytearray(b"xx" + GOOD + b"\n{")
    view = memoryview(buffer)[2 : 3 + len(GOOD)]  # a line of a read buffer (sources.files._read_lines)
    assert decoder.decode(view) == check(decoder, GOOD) is not None
    assert decoder.decode(memoryview(buffer)[: 2 + len(GOOD)]) is None  # "xx" before it: not JSON
    view.release()
    with pytest.raises(ValueError):
        decoder.decode(view)
    with pytest.raises(BufferError):  # not contiguous
        decoder.decode(memoryview(GOOD)[::2])


# ----------------------------------------------------------------------------------- objects and caches
def test_values_holding_dicts_are_never_shared_and_the_rest_may_be():
    kv = {"kvlistValue": {"values": [attr("a", {"intValue": "1"})]}}
    arr = {"arrayValue": {"values": [kv]}}
    attrs = [attr("m", kv), attr("r", arr), attr("s", {"stringValue": "x"})]
    line = line_of(span(1, attributes=attrs), span(2, attributes=attrs), resource={"attributes": [attr("m", kv)]})
    decoder = new_decoder()
    one, two = check(decoder, line)
    three, _ = check(decoder, line)
    assert one.attributes[0][1] is not two.attributes[0][1] is not three.attributes[0][1]
    assert one.attributes[1][1][0] is not two.attributes[1][1][0]
    assert one.resource is two.resource  # one line's spans share their resource, as the general decoder's do
    assert one.resource is not three.resource  # but a resource holding a dict is never cached across lines
    assert one.attributes[2] is two.attributes[2]  # the immutable pair comes from the caches


def test_caches_stay_bounded():
    decoder = new_decoder()
    for i in range(0, 60_000, 100):
        spans = [span(j, attributes=[attr(f"k{j}", {"stringValue": f"v{j}"}), attr("n", {"intValue": str(j)})])
                 for j in range(i + 1, i + 101)]  # fmt: skip
        assert check(decoder, line_of(*spans)) is not None
    sizes = decoder.cache_sizes()
    assert 0 < sizes["pairs"][0] <= 1 << 14 and sizes["pairs"][1] <= 4 << 20
    assert 0 < sizes["strings"][0] <= 1 << 13 and sizes["strings"][1] <= 1 << 20
    assert check(decoder, GOOD) is not None


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="reads the resident size from /proc")
def test_no_leaks():
    """200,000 decodes of answered and refused lines, every path: resident memory stays flat."""
    decoder = new_decoder()
    lines = [
        GOOD,
        GOOD.replace(b'"code":1', b'"code":9'),  # refused at the end of a span with everything built
        BAD["bytes not base64"],  # refused after a call into Python
        BAD["span id not hex"],  # refused by decode_id
        BAD["duplicate span key"],  # refused with the first value parsed
        BAD["duplicate status code"],
        BAD["duplicate attribute key"],
        _nested(5, "kvlistValue"),
        line_of(span(1, attributes=[attr("b", {"doubleValue": "NaN"}), attr("y", {"bytesValue": "AQI="})])),
    ]

    def run(n: int) -> None:
        for i in range(n):
            decoder.decode(lines[i % len(lines)])
            if i % 50 == 0:  # new texts: the caches fill and are emptied
                decoder.decode(line_of(span(1 + i, name=f"n{i}", attributes=[attr(f"k{i}", {"stringValue": "v"})])))

    run(20_000)
    before = _rss()
    run(200_000)
    assert _rss() - before < 20 * 1024 * 1024


def test_span_classes_it_cannot_fill_are_refused():
    from launchtrace.otlp import _jsonread

    args = (decode_id, _dec_bytes, KIND_NAMES, STATUS_NAMES, "auto")

    @dataclasses.dataclass(frozen=True, slots=True)
    class Wider:
        a: int
        b: int

    @dataclasses.dataclass(frozen=True)
    class NoSlots:
        name: str

    for cls in (Wider, NoSlots, dict, 3):
        with pytest.raises(TypeError):
            _jsonread.Decoder(SpanData, cls, SpanLink, *args)
        with pytest.raises(TypeError):
            _jsonread.Decoder(cls, SpanEvent, SpanLink, *args)
    assert _jsonread.Decoder(SpanData, SpanEvent, SpanLink, *args) is not None


# ------------------------------------------------------------------------------------------- wiring
def test_the_compiled_reader_is_used_when_built(monkeypatch, tmp_path):
    spec = importlib.util.find_spec("launchtrace.otlp._jsonread")
    if spec is None or not spec.origin or not Path(spec.origin).exists():  # only where the .so is truly absent
        pytest.skip("the compiled reader is not built here")
    assert FastLineDecoder().compiled is not None
    monkeypatch.setenv("LAUNCHTRACE_PURE_PYTHON", "1")
    assert FastLineDecoder().compiled is None
    monkeypatch.delenv("LAUNCHTRACE_PURE_PYTHON")

    # a file is read by it: with the general decoder out of the way, every line is read
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from bench_read import make_spans

    spans = make_spans(1200)
    path = tmp_path / "spans.jsonl"
    path.write_bytes(b"".join(encode_line(spans[i : i + 300]).encode() + b"\n" for i in range(0, 1200, 300)))

    def refuse(*args, **kwargs):
        raise AssertionError("the general decoder was asked")

    monkeypatch.setattr("launchtrace.sources.documents.spans_from_document", refuse)  # files.py reads it there
    with SpanFile(path) as f:
        assert f._fast.compiled is not None
        assert list(f) == spans
        assert f.format == "otlp-jsonl"


def test_a_line_it_refuses_goes_to_the_general_decoder(monkeypatch, tmp_path):
    """No Python copy of the reader in between: the line the compiled reader leaves is read by orjson and the
    general decoder, which reports the problem."""
    asked = []
    real = SpanFile._decoded

    def spy(self, where, result):
        asked.append(where)
        return real(self, where, result)

    monkeypatch.setattr(SpanFile, "_decoded", spy)
    path = tmp_path / "two.jsonl"
    path.write_bytes(GOOD + b"\n" + BAD["unknown kind"] + b"\n")
    assert FastLineDecoder().decode(BAD["unknown kind"]) is None
    with SpanFile(path) as f:
        spans = list(f)
    assert spans == FastLineDecoder().decode(GOOD) and asked == [f"{path}:2"]
    assert f.log.errors == 1 and "kind" in str(f.log.problems[0])
