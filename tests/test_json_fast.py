"""Files read with the compiled reader and without it (``LAUNCHTRACE_PURE_PYTHON=1``, as where no compiler was
present at install): the same spans, the same problems, the same counts (issue 26).

The compiled reader (``launchtrace.otlp._jsonread``) answers only the lines the general decoder (``orjson.loads``
and ``json_codec.decode_traces_data``) reads without a problem, with exactly its spans
(``tests/test_jsonread_native.py`` checks that line by line); every other line, and every line without it, is
read the general way. There is no Python copy of the compiled reader: without it, the library path reads the
file. Where the compiled reader is not built both readings are the general one and these tests still run.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import upstream_fixtures
from launchtrace.otlp.json_codec import decode_traces_data, encode_line
from launchtrace.otlp.json_fast import FastLineDecoder
from launchtrace.sources import files
from launchtrace.sources.files import read_spans
from launchtrace.spans import SpanData
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
    """Decode ``line`` by the compiled reader and check its answer against the general decoder's."""
    fast = decoder.decode(line)
    if fast is not None:
        reference = general(line, decoder.id_encoding)
        assert reference is not None, "the compiled reader accepted a line that is not JSON"
        spans, problems = reference
        assert problems == [], "the compiled reader accepted a line the general decoder has problems with"
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


@pytest.fixture
def general_only(monkeypatch):
    """Read a file as where no compiler was present: ``LAUNCHTRACE_PURE_PYTHON=1`` leaves the compiled reader out."""

    def read(path: Path, **kw):
        with monkeypatch.context() as m:
            m.setenv("LAUNCHTRACE_PURE_PYTHON", "1")
            assert FastLineDecoder().compiled is None
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
    if FastLineDecoder().compiled is not None:  # whitespace everywhere: still answered by the compiled reader
        assert FastLineDecoder().decode(path.read_bytes()) == spans
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


def _dup_attributes(first: bytes) -> bytes:
    """A span whose ``attributes`` key occurs twice; ``first`` is the text of the copy that loses."""
    good = b'[{"key":"a","value":{"stringValue":"x"}}]'
    sp = b'{"traceId":"%s","spanId":"0000000000000001","attributes":%s,"attributes":%s}' % (T.encode(), first, good)
    return b'{"resourceSpans":[{"scopeSpans":[{"spans":[%s]}]}]}' % sp


# lines a reader could get wrong: hostile text in the copy of a key that loses, numbers past 64 bits, bad
# ids and enums, wrong types, unknown and legacy keys, a byte order mark mid-file, escapes, deep nesting
HARD_LINES = [
    _dup_attributes(b"[1e400]"),
    _dup_attributes(b'["\xff"]'),
    _dup_attributes(b"[" * 1100 + b"]" * 1100),
    _dup_attributes(b"[1e400]").replace(b'"attributes":[1e400]', b'"attribut\\u0065s":[1e400]'),
    b'{"resourceSpans":[{"resource":{"attributes":[1e400]},"resource":{},"scopeSpans":[]}]}',
    line_of(span(1, attributes=[attr("a", {"stringValue": "x"})]))[:-9],
    line_of(span(1, kind=1)).replace(b'"kind":1', b'"kind":99999999999999999999999'),
    line_of(span(1, startTimeUnixNano=2**64 - 1)),
    line_of(span(1, kind=9)),
    line_of(span(1, kind="SPAN_KIND_BOGUS")),
    line_of(span(1, status={"code": 7})),
    line_of(span(1, traceId="")),
    line_of(span(1, traceId="0" * 32)),
    line_of(span(1, spanId="0" * 16)),
    line_of(span(1, attributes="nope")),
    line_of(span(1, attributes=[{"key": "a"}])),
    line_of(span(1, name=3)),
    line_of(span(1, links=[{"traceId": "", "spanId": "1"}])),
    line_of(span(1, startTimeUnixNano="12x")),
    line_of(span(1, startTimeUnixNano=1.5)),
    line_of(span(1, flags=True)),
    line_of(span(1, surprise=1)),
    orjson.dumps({"batches": [{"instrumentationLibrarySpans": [{"spans": [span(1)]}]}]}),
    orjson.dumps({"resourceSpans": [], "result": {}}),
    b"\xef\xbb\xbf" + line_of(span(1)),
    line_of(span(1)) + b" x",
    line_of(span(1, name="a\u0001b")),
    (
        line_of(span(1, attributes=[attr("deep", {"arrayValue": {"values": [{"stringValue": "x"}]}})])).replace(
            b'{"arrayValue":{"values":[{"stringValue":"x"}]}}', b'{"arrayValue":' + b"[" * 600 + b"]" * 600 + b"}"
        )
    ),
]


def test_lines_the_compiled_reader_may_leave_to_the_general_decoder_read_the_same(general_only, tmp_path):
    """Each line of the table: no answer or the general decoder's, and the file reads the same both ways."""
    decoder = FastLineDecoder()
    for line in HARD_LINES:
        check_line(decoder, line)
    path = tmp_path / "hard.jsonl"
    path.write_bytes(b"\n".join(HARD_LINES))
    _same_reading(path, general_only)
    assert read_spans(path).errors >= 15


def test_empty_objects_past_the_cap_are_skipped_both_ways(general_only, tmp_path):
    """``MAX_EMPTY_OBJECTS`` empty array elements in a line of 1 MiB are read, one more skips it unread, with and
    without the compiled reader; ``"status":{}`` (the Collector writes one per span) is a field's value, not one."""
    cap = files.MAX_EMPTY_OBJECTS
    pad = attr("pad", {"stringValue": "x" * (1 << 20)})

    def values(n: int) -> bytes:
        return line_of(span(1, attributes=[pad, attr("a", {"arrayValue": {"values": [{}] * n}})]))

    statuses = [span(i + 1, status={}, name="k" * 100) for i in range(cap // 10)]
    lines = [line_of(*statuses), values(cap), values(cap + 1), orjson.dumps({"resourceSpans": [{}] * (4 * cap)})]
    decoder = FastLineDecoder()
    assert [len(x) >= 1 << 20 for x in lines] == [True, True, True, True]
    if decoder.compiled is not None:
        assert [check_line(decoder, x) is not None for x in lines] == [True, True, False, False]
    path = tmp_path / "empty.jsonl"
    path.write_bytes(b"\n".join(lines))
    result = read_spans(path, check=False)
    assert len(result.spans) == cap // 10 + 1 and result.skipped_lines == 2
    assert [str(p).split(": ", 1)[1] for p in result.problems] == [
        f"{n} empty objects in one line: not spans, skipped" for n in (cap + 1, 4 * cap)
    ]
    _same_reading(path, general_only, check=False)


def test_a_line_over_the_size_cap_is_refused_both_ways(general_only, tmp_path, monkeypatch):
    """A valid line longer than ``MAX_JSON_BYTES`` is not read by the compiled reader either: the same answer."""
    line = line_of(*(span(i + 1, name="k" * 50) for i in range(200)))
    monkeypatch.setattr(files, "MAX_JSON_BYTES", len(line) - 1)
    path = tmp_path / "long.jsonl"
    path.write_bytes(line + b"\n" + line_of(span(1))[:20] + b"\n")
    result = read_spans(path)
    assert result.spans == [] and result.skipped_lines == 2
    assert "that one is read up to; not read" in str(result.problems[0])
    _same_reading(path, general_only)


def test_duplicate_keys_read_the_same_both_ways(general_only, tmp_path):
    """The last value is kept (orjson's rule); the compiled reader leaves such a line to the general decoder."""
    line = line_of(span(1)).replace(b'"name":"k"', b'"name":"first","name":"second"')
    assert FastLineDecoder().decode(line) is None
    path = tmp_path / "dup.jsonl"
    path.write_bytes(line + b"\n" + _dup_attributes(b"[1e400]"))
    _same_reading(path, general_only)
    result = read_spans(path)
    assert [s.name for s in result.spans] == ["second"] and result.errors == 1  # orjson: 1e400 is out of range
