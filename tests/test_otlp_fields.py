"""The one OTLP field table (``launchtrace.otlp.fields``) against protobuf, and the codecs against the table.

The table is read from the opentelemetry-proto descriptors; the tests check its wire keys against what the
protobuf library itself writes, that the key constants generated from it (``scripts/gen_otlp_keys.py``:
``otlp/jsonkeys.py``, ``otlp/_jsonkeys.h``) are what the script writes now, that the codecs, which take their
keys from those constants, spell none by hand, and that the full codecs handle every key the table has for
launchtrace's spans: a key spelled by hand, misspelled or missing fails here, by name.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest
from opentelemetry.proto.trace.v1 import trace_pb2

from launchtrace.otlp.fields import MESSAGES, json_key, tag

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src" / "launchtrace"
sys.path.insert(0, str(ROOT / "scripts"))
import gen_otlp_keys  # noqa: E402

NOT_CARRIED = gen_otlp_keys.NOT_CARRIED  # fields launchtrace's spans have no place for: no codec spells them
LEGACY = {"instrumentationLibrarySpans", "instrumentationLibrary"}  # read (and refused) by the decoders
C_ON_THE_TABLE = ("otlp/_jsonenc.c", "otlp/_jsonread.c")  # their keys: _jsonkeys.h's JK_ macros; each writes, or
# reads, every key launchtrace's spans carry
KEYS_FROM_THE_TABLE = (
    "otlp/json_codec.py", "receiver/collect.py", "otlp/transcode.py",
    "sources/documents.py", "sources/traceql_metrics.py",
)  # fmt: skip
OTHER_FORMATS = {"timestampMs", "traceID"}  # Tempo's TraceQL metrics answer (labels: OTLP KeyValues), Jaeger's
PROTOBUF_NAMES_TOO = {"otlp/transcode.py"}  # also spells protobuf field names, some of them the same words
# also read other formats whose keys are some of the same words (Tempo's "status", Jaeger's "spans"): there only
# the camel-case keys, OTLP's own, count
OTHER_FORMATS_TOO = {"sources/documents.py", "sources/traceql_metrics.py"}


def _quoted_words(path: str) -> set[str]:
    """Every word written in double quotes (escaped as in C string literals, or not) in a source file."""
    return set(re.findall(r'\\?"([A-Za-z_][A-Za-z0-9_]*)\\?"', (SRC / path).read_text(encoding="utf-8")))


_CAMEL = re.compile(r"\b[a-z]+(?:[A-Z][a-z0-9]*)+\b")  # a key, or (a literal that is one such word) a typo?


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


def test_generated_keys_are_what_the_script_writes(tmp_path: Path) -> None:
    """``otlp/jsonkeys.py`` and ``otlp/_jsonkeys.h``, byte for byte what the table gives now."""
    for rel in gen_otlp_keys.generate(tmp_path):
        assert (tmp_path / rel).read_bytes() == (ROOT / "src" / rel).read_bytes(), f"{rel} is stale: regenerate"


def test_generated_keys_are_the_tables() -> None:
    from launchtrace.otlp import jsonkeys

    for fields in MESSAGES.values():
        for f in fields.values():
            assert getattr(jsonkeys, f.name.upper()) == f.json
    assert jsonkeys.keyed(',"<FLAGS>":%d') == b',"flags":%d'
    with pytest.raises(KeyError):
        jsonkeys.keyed('"<FLAG>"')


def _literals(path: str) -> list[tuple[int, str | bytes]]:
    """The str and bytes literals of a Python file, less docstrings and ``__slots__`` (attribute names)."""
    tree = ast.parse((SRC / path).read_text(encoding="utf-8"))
    skip: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            skip.add(id(body[0].value))  # a docstring
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            skip.add(id(node.value))  # an attribute docstring
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__slots__" for t in node.targets):
            skip.update(id(n) for n in ast.walk(node.value))
    return [
        (n.lineno, n.value)
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str | bytes) and id(n) not in skip
    ]


@pytest.mark.parametrize("path", KEYS_FROM_THE_TABLE)
def test_codecs_on_the_table_spell_no_key_by_hand(path: str) -> None:
    """These take every OTLP/JSON key from ``jsonkeys`` (constants, fragments built by ``keyed``), in their
    messages too, and no literal is one camel-case word (a key
    misspelled) but a legacy key or another format's."""
    keys = _all_json_keys()
    if path in PROTOBUF_NAMES_TOO:  # a lone word there may be a protobuf name (HasField("status")): JSON needs quotes
        bare = keys - {f.name for fields in MESSAGES.values() for f in fields.values()}
    elif path in OTHER_FORMATS_TOO:
        bare = set()
    else:
        bare = keys
    by_hand = []
    for line, value in _literals(path):
        text = value.decode("latin-1") if isinstance(value, bytes) else value
        named = set(_CAMEL.findall(text)) & keys  # in a message too: "event timeUnixNano"
        typo = _CAMEL.fullmatch(text) and text not in LEGACY | OTHER_FORMATS
        if text in bare or any(f'"{k}"' in text for k in keys) or named or typo:
            by_hand.append((line, value))
    assert by_hand == [], f"{path} spells OTLP/JSON keys by hand"
    assert "jsonkeys" in (SRC / path).read_text(encoding="utf-8")


def _c_code(path: str) -> str:
    """A C file without its comments."""
    return re.sub(r"/\*.*?\*/", "", (SRC / path).read_text(encoding="utf-8"), flags=re.S)


@pytest.mark.parametrize("path", C_ON_THE_TABLE)
def test_compiled_codecs_take_their_keys_from_the_generated_header(path: str) -> None:
    """No key spelled by hand in the C (nor any camel-case word, a key misspelled), only ``JK_`` macros of
    ``_jsonkeys.h``; the encoder writes, and the reader reads, every key of the table they carry."""
    code = _c_code(path)
    assert '#include "_jsonkeys.h"' in code
    words = set(re.findall(r'\\?"([A-Za-z_][A-Za-z0-9_]*)\\?"', code))
    assert words & _all_json_keys() == set(), f"{path} spells OTLP/JSON keys by hand"
    assert {w for w in words if re.fullmatch(r"[a-z]+(?:[A-Z][a-z0-9]*)+", w)} == set(), f"{path}: a misspelled key?"
    used = {name.lower() for name in re.findall(r"\bJK_([A-Z_]+)\b", code)} - {"len"}
    carried = {f.name for fields in MESSAGES.values() for f in fields.values() if f.json not in NOT_CARRIED}
    assert carried - used == set(), f"{path} never writes or reads these fields"
    assert used - carried == set(), f"{path} handles fields launchtrace's spans have no place for"


def _pb_macros() -> dict[str, tuple[str, str]]:
    """``PB_SPAN_NAME`` -> ("Span", "name"): every field-number macro of ``_otlpfields.h`` (the fields carried)."""
    return {
        f"{gen_otlp_keys._macro_prefix(message)}_{f.name.upper()}": (message, f.name)
        for message, fields in MESSAGES.items()
        for f in fields.values()
        if f.json not in NOT_CARRIED
    }


def test_field_macros_are_the_tables() -> None:
    """``_otlpfields.h``: each field's number and its wire tag's bytes, as the table (and protobuf) has them."""
    header = (SRC / "otlp" / "_otlpfields.h").read_text(encoding="utf-8")
    numbers = dict(re.findall(r"#define (PB_[A-Z_]+) (\d+)\n", header))
    tags = dict(re.findall(r'#define (PB_[A-Z_]+)_TAG "((?:\\x[0-9a-f]{2})+)"\n', header))
    macros = _pb_macros()
    assert set(numbers) == set(tags) == set(macros)
    for name, (message, field) in macros.items():
        assert int(numbers[name]) == MESSAGES[message][field].number
        assert bytes.fromhex(tags[name].replace("\\x", "")) == tag(message, field)


# _protoenc.c's functions that take a wire tag (an unsigned char, or put_fixed's bytes and their count) first
_TAG_TAKERS = r"put_tag_varint|put_fixed|put_fixed_if|put_field|begin_field|put_str_field|put_str_of|put_str_if|"
_TAG_TAKERS += r"put_bytes_field|put_varint_if|put_pair|put_attributes|put_each|group_str_field"


def test_the_compiled_protobuf_encoder_takes_its_tags_from_the_generated_header() -> None:
    """Every tag ``_protoenc.c`` writes is ``TAG(..)``/``TAGS(..)`` of ``_otlpfields.h``, or a function's
    ``tag`` parameter passed on: no tag byte by hand."""
    code = _c_code("otlp/_protoenc.c")
    assert '#include "_otlpfields.h"' in code
    calls = re.findall(rf"\b(?:{_TAG_TAKERS})\(&?\w+, ([^,]+),", code)
    assert len(calls) > 30
    assert [a for a in calls if not re.fullmatch(r"TAGS?\([A-Z_]+\)|tag|(?:const char|unsigned char) \*?tag", a)] == []
    assert re.findall(r"(?:\*p\+\+|b->p\[[^]]+\]) = 0x", code) == [], "a tag byte stored by hand"
    assert re.findall(r'"(?:\\x[0-9a-fA-F]{2})+"', code) == [], "a tag's bytes by hand"
