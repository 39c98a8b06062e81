"""The one OTLP field table (``launchtrace.otlp.fields``) against protobuf, and the codecs against the table.

The table is read from the opentelemetry-proto descriptors; the tests check its wire keys against what the
protobuf library itself writes, and that every OTLP/JSON codec, Python or C, spells exactly the table's keys:
a key misspelled or missing in ``_jsonenc.c``, ``_jsonread.c`` or ``json_codec.py`` fails here, by name.
"""

from __future__ import annotations

import re
from pathlib import Path

import msgspec
import pytest
from opentelemetry.proto.trace.v1 import trace_pb2

from launchtrace.otlp import json_fast
from launchtrace.otlp.fields import MESSAGES, json_key, tag

SRC = Path(__file__).resolve().parent.parent / "src" / "launchtrace"

# fields launchtrace's spans have no place for (profiles' string tables, resource entities): no codec spells them
NOT_CARRIED = {"keyStrindex", "stringValueStrindex", "entityRefs", "descriptionKeys", "idKeys", "type"}
LEGACY = {"instrumentationLibrarySpans", "instrumentationLibrary"}  # read (and refused) by the decoders
FULL_JSON_CODECS = ("otlp/_jsonenc.c", "otlp/_jsonread.c", "otlp/json_codec.py")
OTHER_JSON_CODE = ("otlp/json_fast.py", "otlp/encode_jsonl.py", "otlp/transcode.py", "receiver/collect.py")


def _quoted_words(path: str) -> set[str]:
    """Every word written in double quotes (escaped as in C string literals, or not) in a source file."""
    return set(re.findall(r'\\?"([A-Za-z_][A-Za-z0-9_]*)\\?"', (SRC / path).read_text(encoding="utf-8")))


def _all_json_keys() -> set[str]:
    return {f.json for fields in MESSAGES.values() for f in fields.values()}


def test_the_table_holds_every_message_of_a_trace() -> None:
    assert {"TracesData", "ResourceSpans", "ScopeSpans", "Span", "Span.Event", "Span.Link", "Status", "Resource",
            "InstrumentationScope", "KeyValue", "AnyValue", "ArrayValue", "KeyValueList"} <= set(MESSAGES)  # fmt: skip
    assert json_key("Span", "start_time_unix_nano") == "startTimeUnixNano"
    assert MESSAGES["Span"]["flags"].number == 16 and MESSAGES["Span"]["flags"].type == "fixed32"


@pytest.mark.parametrize(
    "field, value",
    [("trace_id", b"\x01" * 16), ("trace_state", "s"), ("flags", 1), ("kind", 2), ("start_time_unix_nano", 5),
     ("dropped_attributes_count", 3), ("name", "n"), ("dropped_links_count", 300)],
)  # fmt: skip
def test_wire_keys_are_what_protobuf_writes(field: str, value: object) -> None:
    raw = trace_pb2.Span(**{field: value}).SerializeToString()
    assert raw.startswith(tag("Span", field))


@pytest.mark.parametrize("path", FULL_JSON_CODECS)
def test_each_full_json_codec_spells_exactly_the_tables_keys(path: str) -> None:
    """The encoder and both decoders, C and Python: every key of the table they carry, and no other."""
    words = _quoted_words(path)
    want = _all_json_keys() - NOT_CARRIED
    assert want - words == set(), f"{path} never spells these OTLP/JSON keys"
    assert (words & NOT_CARRIED) - {"type"} == set()


@pytest.mark.parametrize("path", FULL_JSON_CODECS + OTHER_JSON_CODE)
def test_no_codec_spells_a_camel_case_key_outside_the_table(path: str) -> None:
    camel = {w for w in _quoted_words(path) if re.fullmatch(r"[a-z]+(?:[A-Z][a-z0-9]*)+", w)}
    assert camel - _all_json_keys() - LEGACY == set(), f"{path}: a misspelled OTLP/JSON key?"


@pytest.mark.parametrize(
    "struct, message",
    [(json_fast._Span, "Span"), (json_fast._Event, "Span.Event"), (json_fast._Link, "Span.Link"),
     (json_fast._Status, "Status"), (json_fast._Scope, "InstrumentationScope"), (json_fast._Resource, "Resource"),
     (json_fast._ScopeSpans, "ScopeSpans"), (json_fast._ResourceSpans, "ResourceSpans"),
     (json_fast._TracesData, "TracesData")],
)  # fmt: skip
def test_the_fast_readers_structs_mirror_the_table(struct: type[msgspec.Struct], message: str) -> None:
    """Each msgspec struct of the Python fast path has the message's keys (less those it leaves to the general
    decoder by refusing them as unknown)."""
    keys = {f.json for f in MESSAGES[message].values()} - NOT_CARRIED
    assert set(struct.__struct_fields__) == keys
