"""The fast OTLP JSON line reader against the general decoder it stands in for: same spans, same problems.

``FastLineDecoder.decode`` must return exactly what ``decode_traces_data(orjson.loads(line))`` returns for a
line the general decoder reads without a problem, and ``None`` for every line it is not sure about (the
reader then runs the general decoder). Where whole files are compared, the reference reading switches the
fast path off (``general_only``): that is the reader as it was before the fast path existed.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import upstream_fixtures
from launchtrace.otlp.json_codec import _dec_attrs, decode_traces_data, encode_line
from launchtrace.otlp.json_fast import CACHE_LIMIT, MAX_BRACKETS, FastLineDecoder, _AttributeTexts
from launchtrace.sources.files import read_spans
from launchtrace.spans import SpanData
from strategies import attr_text_objects, attr_text_strings
from strategies import json_spans as span_data

FIXTURES = upstream_fixtures()
T = "5b8efff798038103d269b633813fc700"


def general(line: bytes | str, id_encoding: str = "auto"):
    """What the general decoder makes of one line: (spans, problem texts), or None when it is not JSON."""
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    spans, problems = decode_traces_data(obj, where="f:1", id_encoding=id_encoding)
    return spans, [str(p) for p in problems]


def check_line(decoder: FastLineDecoder, line: bytes) -> list[SpanData] | None:
    """Decode ``line`` fast and check the answer against the general decoder's; returns the fast answer."""
    fast = decoder.decode(line)
    if fast is not None:
        reference = general(line, decoder.id_encoding)
        assert reference is not None, "the fast path accepted a line that is not JSON"
        spans, problems = reference
        assert problems == [], "the fast path accepted a line the general decoder has problems with"
        assert fast == spans
        assert [repr(s) for s in fast] == [repr(s) for s in spans]  # NaN != NaN: compare the text too
    return fast


def line_of(*spans: dict, resource: dict | None = None) -> bytes:
    rs: dict = {"scopeSpans": [{"scope": {"name": "s"}, "spans": list(spans)}]}
    if resource is not None:
        rs["resource"] = resource
    return orjson.dumps({"resourceSpans": [rs]})


def span(n: int = 1, **extra) -> dict:
    return {"traceId": T, "spanId": f"{n:016x}", "name": "k", "startTimeUnixNano": "1", **extra}


def attr(key: str, value: dict) -> dict:
    return {"key": key, "value": value}


# ------------------------------------------------------------------------------------ generated spans
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(span_data, min_size=1, max_size=8), st.integers(1, 3))
def test_generated_spans_read_back_as_the_general_decoder_reads_them(batch, per_line):
    decoder = FastLineDecoder()
    lines = [encode_line(batch[i : i + per_line]).encode() for i in range(0, len(batch), per_line)]
    for line in lines + lines:  # the second round finds its pieces in the cache
        fast = check_line(decoder, line)
        if fast is None:  # only for \u escapes (control characters) or "attributes" as a key or string value
            assert b"\\u" in line or b'"attributes"' in line.replace(b'"attributes":[', b"")


def test_launch_spans_take_the_fast_path_with_and_without_the_cache():
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from bench_read import _launch_attributes, _unique_attributes, make_spans

    for attributes in (_launch_attributes, _unique_attributes):
        spans = make_spans(1500, attributes)
        decoder = FastLineDecoder()
        read = []
        for i in range(0, len(spans), 100):
            line = encode_line(spans[i : i + 100]).encode()
            fast = check_line(decoder, line)
            assert fast is not None
            read += fast
        assert read == spans
        # the spans of a line share their resource and scope tuples, as the general decoder's do
        assert read[0].resource is read[1].resource and read[0].scope_attributes is read[1].scope_attributes


# ------------------------------------------------------------------------------ attribute texts alone


def _outcome(fn, text: bytes):
    try:
        return "ok", fn(text)
    except ValueError as exc:  # the codec's BadSpan, orjson's JSONDecodeError
        return type(exc).__name__, None


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(attr_text_objects, max_size=6), min_size=1, max_size=6), st.booleans())
def test_attribute_texts_decode_what_the_general_path_decodes(arrays, spaced):
    texts = _AttributeTexts()
    option = orjson.OPT_INDENT_2 if spaced else 0
    for attrs in arrays + arrays:  # the second round reads pieces and templates learnt in the first
        text = orjson.dumps(attrs, option=option)
        fast = _outcome(texts.decode, text)
        slow = _outcome(lambda t: _dec_attrs(orjson.loads(t)), text)
        assert fast[0] == "ok" if slow[0] == "ok" else fast[0] != "ok", (text, fast, slow)
        assert repr(fast[1]) == repr(slow[1]), text


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["seq", "name"]), attr_text_strings | st.from_regex(r"[0-9]{1,30}", fullmatch=True)),
        max_size=12,
    )
)
def test_templates_read_only_values_that_need_no_parse(values):
    """One key with many values, as ints and strings: templates learnt from one piece serve the others."""
    texts = _AttributeTexts()
    for key, value in values:
        for kind in ("intValue", "stringValue"):
            text = orjson.dumps([attr(key, {kind: value}), attr("other", {"boolValue": True})])
            fast = _outcome(texts.decode, text)
            slow = _outcome(lambda t: _dec_attrs(orjson.loads(t)), text)
            assert (fast[0] == "ok") == (slow[0] == "ok") and repr(fast[1]) == repr(slow[1]), text


def test_templates_take_only_bytes_a_json_string_may_hold():
    texts = _AttributeTexts()
    good = orjson.dumps(
        [attr("seq", {"intValue": "1"}), attr("s", {"stringValue": "a"}), attr("o", {"stringValue": "o"})]
    )
    texts.decode(good)
    assert set(texts.templates.values()) == {("seq", True), ("s", False), ("o", False)}
    for old, new in ((b'"1"', b'"\t7"'), (b'"a"', b'"\tb"'), (b'"1"', b'"7\x00"')):  # raw control bytes: not JSON
        texts.skip = 0
        with pytest.raises(ValueError):
            orjson.loads(good.replace(old, new))
        with pytest.raises(ValueError):
            texts.decode(good.replace(old, new))
    texts.skip = 0
    assert texts.decode(good.replace(b'"1"', b'" 7"')) == (("seq", 7), ("s", "a"), ("o", "o"))  # as int(" 7")


def test_a_split_inside_a_nested_value_reads_the_array_whole():
    kv = {"kvlistValue": {"values": [attr("a", {"intValue": "1"}), attr("b", {"stringValue": "x"})]}}
    line = line_of(span(1, attributes=[attr("m", kv), attr("n", {"intValue": "2"})]))
    assert b'},{"key":"b"' in line  # the split point inside the kvlist
    decoder = FastLineDecoder()
    for _ in range(2):
        (s,) = check_line(decoder, line)
        assert s.attributes == (("m", {"a": 1, "b": "x"}), ("n", 2))


def test_mutable_values_are_never_shared_between_spans():
    kv = {"kvlistValue": {"values": [attr("a", {"intValue": "1"})]}}
    arr = {"arrayValue": {"values": [kv]}}
    text = orjson.dumps([attr("m", kv), attr("r", arr), attr("s", {"stringValue": "x"})])
    texts = _AttributeTexts()
    one = texts.decode(text)
    texts.skip = 0  # read the second copy piece by piece too, not whole
    two = texts.decode(text)
    assert one == two == (("m", {"a": 1}), ("r", ({"a": 1},)), ("s", "x"))
    assert one[0][1] is not two[0][1] and one[1][1][0] is not two[1][1][0]
    assert one[2] is two[2]  # the immutable one comes from the cache


def test_caches_stay_bounded(monkeypatch):
    import launchtrace.otlp.json_fast as json_fast

    monkeypatch.setattr(json_fast, "CACHE_LIMIT", 100)  # the same code path, in fewer steps
    texts = _AttributeTexts()
    for i in range(1000):
        text = orjson.dumps([attr("seq", {"intValue": str(i)}), attr(f"k{i}", {"stringValue": "v"})])
        assert texts.decode(text) == (("seq", i), (f"k{i}", "v"))
        texts.skip = 0  # read every array piece by piece
    assert 0 < len(texts.pieces) <= 100 and 0 < len(texts.templates) <= 100
    assert CACHE_LIMIT >= 1 << 12  # the real bound keeps a launch's repeating values


def test_mostly_new_arrays_are_parsed_whole_for_a_while():
    texts = _AttributeTexts()
    first = orjson.dumps([attr(f"k{i}", {"stringValue": "v"}) for i in range(4)])
    texts.decode(first)
    assert texts.skip > 0 and len(texts.pieces) == 4  # learnt from, then a few arrays are read whole
    skipped = texts.skip
    second = orjson.dumps([attr(f"j{i}", {"stringValue": "v"}) for i in range(4)])
    assert texts.decode(second) == tuple((f"j{i}", "v") for i in range(4))
    assert texts.skip == skipped - 1 and len(texts.pieces) == 4


# ------------------------------------------------------------------------------- lines it must refuse
def _dup_attributes(first: bytes) -> bytes:
    """A span whose ``attributes`` key occurs twice; ``first`` is the text of the copy that loses."""
    good = b'[{"key":"a","value":{"stringValue":"x"}}]'
    sp = b'{"traceId":"%s","spanId":"0000000000000001","attributes":%s,"attributes":%s}' % (T.encode(), first, good)
    return b'{"resourceSpans":[{"scopeSpans":[{"spans":[%s]}]}]}' % sp


@pytest.mark.parametrize(
    "line",
    [
        pytest.param(_dup_attributes(b"[1e400]"), id="overflowing number in a skipped duplicate"),
        pytest.param(_dup_attributes(b'["\xff"]'), id="invalid UTF-8 in a skipped duplicate"),
        pytest.param(_dup_attributes(b"[" * 1100 + b"]" * 1100), id="too deep in a skipped duplicate"),
        pytest.param(
            _dup_attributes(b"[1e400]").replace(b'"attributes":[1e400]', b'"attribut\\u0065s":[1e400]'),
            id="escaped duplicate key",
        ),
        pytest.param(
            b'{"resourceSpans":[{"resource":{"attributes":[1e400]},"resource":{},"scopeSpans":[]}]}',
            id="attributes in a skipped duplicate resource",
        ),
        pytest.param(line_of(span(1, attributes=[attr("a", {"stringValue": "x"})]))[:-9], id="truncated"),
        pytest.param(
            line_of(span(1, kind=1)).replace(b'"kind":1', b'"kind":99999999999999999999999'), id="int > 64 bits"
        ),
        pytest.param(line_of(span(1, startTimeUnixNano=2**64 - 1)), id="uint64 as a number"),
        pytest.param(line_of(span(1, kind=9)), id="unknown kind"),
        pytest.param(line_of(span(1, kind="SPAN_KIND_BOGUS")), id="unknown kind name"),
        pytest.param(line_of(span(1, status={"code": 7})), id="unknown status"),
        pytest.param(line_of(span(1, traceId="")), id="empty trace id"),
        pytest.param(line_of(span(1, traceId="0" * 32)), id="all-zero trace id"),
        pytest.param(line_of(span(1, spanId="0" * 16)), id="all-zero span id"),
        pytest.param(line_of(span(1, attributes="nope")), id="attributes not a list"),
        pytest.param(line_of(span(1, attributes=[{"key": "a"}])), id="attribute without a value"),
        pytest.param(line_of(span(1, name=3)), id="number as name"),
        pytest.param(line_of(span(1, links=[{"traceId": "", "spanId": "1"}])), id="bad link"),
        pytest.param(line_of(span(1, startTimeUnixNano="12x")), id="time not digits"),
        pytest.param(line_of(span(1, startTimeUnixNano=1.5)), id="time as float"),
        pytest.param(line_of(span(1, flags=True)), id="flags as bool"),
        pytest.param(line_of(span(1, surprise=1)), id="unknown span field"),
        pytest.param(
            orjson.dumps({"batches": [{"instrumentationLibrarySpans": [{"spans": [span(1)]}]}]}), id="legacy keys"
        ),
        pytest.param(orjson.dumps({"resourceSpans": [], "result": {}}), id="another envelope key"),
        pytest.param(b"\xef\xbb\xbf" + line_of(span(1)), id="byte order mark"),
        pytest.param(line_of(span(1)) + b" x", id="trailing garbage"),
        pytest.param(line_of(span(1, name="a\u0001b")), id="escaped control character"),
        pytest.param(
            line_of(span(1, attributes=[attr("deep", {"arrayValue": {"values": [{"stringValue": "x"}]}})])).replace(
                b'{"arrayValue":{"values":[{"stringValue":"x"}]}}', b'{"arrayValue":' + b"[" * 600 + b"]" * 600 + b"}"
            ),
            id="attribute nested past the bracket bound",
        ),
    ],
)
def test_lines_the_fast_path_does_not_answer(line):
    assert FastLineDecoder(compiled=False).decode(line) is None
    # the compiled reader (where built) reads \u escapes itself: no answer, or the general decoder's spans
    check_line(FastLineDecoder(), line)


def test_nesting_orjson_refuses_in_the_line_is_refused_with_any_recursion_limit():
    """A piece nested 1,017 deep parses alone, but not 8 levels down in a line: the bracket bound refuses it.

    With Python's default recursion limit msgspec refuses such a line itself; raised, it does not.
    """
    import sys

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(20_000)
    try:
        pad = b"[" * 1015 + b"]" * 1015
        line = line_of(span(1, attributes=[attr("a", {"stringValue": "x", "pad": 0})])).replace(
            b'"pad":0', b'"pad":' + pad
        )
        assert general(line) is None  # orjson: too deep
        assert FastLineDecoder().decode(line) is None
    finally:
        sys.setrecursionlimit(limit)


def test_values_nested_past_msgspec_s_limit_give_no_answer_instead_of_raising():
    deep = b"[" * 3000 + b"]" * 3000
    line = line_of(span(1, attributes=[attr("a", {"stringValue": "x"})])).replace(b'{"stringValue":"x"}', deep)
    assert FastLineDecoder().decode(line) is None


def test_base64_and_enum_names_are_read_as_the_general_decoder_reads_them():
    import base64

    b64 = base64.b64encode(bytes.fromhex(T)).decode()
    sid = base64.b64encode(bytes(7) + b"\x01").decode()
    line = line_of(span(1, traceId=b64, spanId=sid, kind="SPAN_KIND_SERVER", status={"code": "STATUS_CODE_ERROR"}))
    for encoding in ("auto", "base64"):
        (s,) = check_line(FastLineDecoder(encoding), line)
        assert (s.trace_id.hex(), s.kind, s.status_code) == (T, 2, 2)
    hex_line = line_of(span(1))
    assert FastLineDecoder("base64").decode(hex_line) is None  # a hex id where base64 is expected: a problem
    assert "a hex id where base64 was expected" in general(hex_line, "base64")[1][0]


# ------------------------------------------------------------------------------------------ whole files
@pytest.fixture
def general_only(monkeypatch):
    """Switch the fast path off, so a file is read as before it existed (the reference of these tests)."""

    def read(path: Path, **kw):
        with monkeypatch.context() as m:
            m.setattr(FastLineDecoder, "decode", lambda self, line: None)
            return read_spans(path, **kw)

    return read


def _same_reading(path: Path, general_only, **kw) -> None:
    fast, slow = read_spans(path, **kw), general_only(path, **kw)
    assert (fast.format, fast.spans, [str(p) for p in fast.problems]) == (
        slow.format,
        slow.spans,
        [str(p) for p in slow.problems],
    )
    assert (fast.errors, fast.warnings, fast.skipped_spans, fast.skipped_lines) == (
        slow.errors,
        slow.warnings,
        slow.skipped_spans,
        slow.skipped_lines,
    )


FIXTURE_FILES = sorted(p for p in FIXTURES.rglob("*") if p.is_file() and p.suffix in (".json", ".jsonl"))


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=lambda p: p.name)
def test_upstream_fixtures_read_as_before(path, general_only, tmp_path):
    _same_reading(path, general_only)
    for encoding in ("hex", "base64"):
        _same_reading(path, general_only, id_encoding=encoding)
    # and each one as a compact JSON line, three times over (the cache warm on the later lines)
    body = path.read_bytes()
    texts = [x for x in body.splitlines() if x.strip()] if path.suffix == ".jsonl" else [body]
    docs = [orjson.loads(x) for x in texts]
    lines = tmp_path / "as-lines.jsonl.gz"
    lines.write_bytes(gzip.compress(b"".join(orjson.dumps(doc) + b"\n" for doc in docs) * 3))
    _same_reading(lines, general_only)


def test_fixture_list_is_not_empty():
    assert len(FIXTURE_FILES) >= 10


def test_malformed_lines_give_the_same_problems(general_only, tmp_path):
    good = line_of(span(1, attributes=[attr("a", {"intValue": "5"})]), span(2, parentSpanId="0000000000000001"))
    lines = [
        good,
        good[:50],
        b"not json",
        b"",
        line_of(span(3, kind="SPAN_KIND_WRONG"), span(4)),
        line_of(span(5, attributes="nope")),
        b"[1, 2]",
        line_of(span(6, spanId="W47/95gDgQPSabYzgT/HAA==")),
        line_of(span(7, traceId="")),
        line_of(span(8, links=[{"traceId": T, "spanId": "00"}])),
        _dup_attributes(b"[1e400]"),
        line_of(span(9, startTimeUnixNano=2**64 - 1)),
        good,
    ]
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b"\n".join(lines))
    _same_reading(path, general_only)
    _same_reading(path, general_only, check=False)
    fast = read_spans(path)
    assert fast.errors >= 8 and len(fast.spans) >= 3


def test_a_pretty_printed_document_is_read_fast_and_the_same(general_only, tmp_path):
    spans = [SpanData(bytes.fromhex(T), (i + 1).to_bytes(8, "big"), None, f"k{i}", 1, 2, (("n", i),)) for i in range(5)]
    path = tmp_path / "doc.json"
    path.write_bytes(orjson.dumps(orjson.loads(encode_line(spans)), option=orjson.OPT_INDENT_2))
    assert FastLineDecoder().decode(path.read_bytes()) == spans  # whitespace everywhere: still answered
    _same_reading(path, general_only)
    assert read_spans(path).format == "otlp-json"


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(span_data, min_size=1, max_size=4), st.data())
def test_damaged_lines_are_read_as_before(general_only, tmp_path, batch, data):
    line = encode_line(batch).encode()
    cut = data.draw(st.integers(0, len(line)))
    flip = data.draw(st.integers(0, len(line) - 1))
    byte = data.draw(st.sampled_from(b'{}[]",:0\\ax\xff'))
    damaged = [line[:cut], line[:flip] + bytes([byte]) + line[flip + 1 :], line]
    decoder = FastLineDecoder()
    for one in damaged:
        check_line(decoder, one)
    path = tmp_path / "damaged.jsonl"
    path.write_bytes(b"\n".join(damaged))
    _same_reading(path, general_only, check=False)


def test_max_brackets_leaves_room_for_the_line_around_it():
    assert MAX_BRACKETS + 16 < 1024  # orjson's depth limit, with the skeleton's levels around an attribute
