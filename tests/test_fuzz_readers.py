"""Property-based fuzzing (hypothesis) of every reader: random bytes, random JSON, and real documents
(a real Warp run's export, the upstream Jaeger / Tempo / OTLP fixtures) with one part broken at a time.

The contract: a reader never raises on bad input; it returns what it could read plus problems (one line each),
or, for a file, raises :class:`launchtrace.errors.UserError` with one line naming the file. Whatever it
returns, :func:`launchtrace.sources.rebuild.rebuild` rebuilds without raising, in bounded time and memory.
"""

from __future__ import annotations

import copy
import gzip
import json
import os
import tempfile
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from conftest import upstream_fixtures
from launchtrace.errors import UserError
from launchtrace.otlp.json_codec import decode_traces_data
from launchtrace.otlp.proto_decode import decode_traces_bytes
from launchtrace.sources.documents import spans_from_document
from launchtrace.sources.files import read_spans
from launchtrace.sources.jaeger_classic import spans_from_jaeger_traces
from launchtrace.sources.rebuild import rebuild

REPO = Path(__file__).resolve().parents[1]
FIXTURES = upstream_fixtures()
# no shrinking: the seeds are whole documents, and a failing example is printed as drawn
FUZZ = settings(
    max_examples=int(os.environ.get("LAUNCHTRACE_FUZZ_EXAMPLES", "60")),  # more for a deep run
    deadline=None,
    phases=(Phase.explicit, Phase.reuse, Phase.generate),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False),
    st.text(max_size=20),
    st.sampled_from(["", "NaN", "Infinity", "-1", "18446744073709551616", "zz", "AAAAAAAAAAAAAAAAAAAAAA=="]),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=12), inner, max_size=4)),
    max_leaves=20,
)


# -- seed documents ---------------------------------------------------------------------------------------
def _real_export_lines() -> list[dict]:
    """A real Warp run on the CPU exported by launchtrace (scopes, a folded loop, copies, fills)."""
    import warp as wp

    import launchtrace
    import launchtrace.capture as capture
    import launchtrace.export as export
    import warp_programs

    wp.config.quiet = True
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "seed.jsonl"
        sim = warp_programs.Sim()
        sim.step()
        export.start_export(file_path=str(path), truncate=True, fold="always")  # the seed holds summary spans
        try:
            with launchtrace.scope("outer", run=1):
                for i in range(4):
                    with launchtrace.scope("step", i=i):
                        sim.step()
                        sim.step()
            sim.step()  # unscoped: a synthetic step root
            export.stop_export(30)
        finally:
            capture.uninstrument()
        return [orjson.loads(line) for line in path.read_bytes().splitlines()]


@pytest.fixture(scope="module")
def seeds(warp_cpu) -> dict[str, object]:
    docs: dict[str, object] = {"launchtrace-export": _real_export_lines()}
    for p in sorted(FIXTURES.glob("*.json*")):
        text = p.read_text()
        docs[p.name] = (
            [json.loads(ln) for ln in text.splitlines() if ln.strip()] if p.suffix == ".jsonl" else json.loads(text)
        )
    return docs


def paths_of(obj: object, prefix: tuple = ()) -> list[tuple]:
    """Every path (keys and indexes) into a JSON document."""
    out = [prefix]
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.extend(paths_of(v, (*prefix, k)))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out.extend(paths_of(v, (*prefix, i)))
    return out


def mutate(doc: object, path: tuple, how: str, value: object) -> object:
    """A deep copy of ``doc`` with the node at ``path`` replaced, deleted, or duplicated."""
    doc = copy.deepcopy(doc)
    if not path:
        return value
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    last = path[-1]
    if how == "delete":
        del parent[last]
    elif how == "duplicate" and isinstance(parent, list):
        parent.insert(last, copy.deepcopy(parent[last]))
    else:
        parent[last] = value
    return doc


@st.composite
def broken_documents(draw, seeds: dict) -> tuple[str, object]:
    name = draw(st.sampled_from(sorted(seeds)))
    doc = seeds[name]
    for _ in range(draw(st.integers(1, 3))):
        paths = paths_of(doc)
        path = draw(st.sampled_from(paths))
        how = draw(st.sampled_from(["replace", "replace", "delete", "duplicate"]))
        doc = mutate(doc, path, how, draw(json_values))
    return name, doc


def as_lines(doc: object) -> bytes:
    if isinstance(doc, list) and doc and all(isinstance(d, dict) for d in doc):
        return "".join(json.dumps(d) + "\n" for d in doc).encode()
    return json.dumps(doc).encode()  # stdlib json: integers past 64 bits too


def rebuild_ok(spans) -> None:
    result = rebuild(spans)
    for data in result.traces.values():
        assert isinstance(data.records, list)
    assert all(isinstance(w, str) and "\n" not in w for w in result.warnings)


# -- the properties ---------------------------------------------------------------------------------------
@FUZZ
@given(value=json_values)
def test_otlp_json_decoder_never_raises_on_random_json(value) -> None:
    spans, problems = decode_traces_data(value, where="fuzz")
    assert all("\n" not in str(p) for p in problems)
    rebuild_ok(spans)


@FUZZ
@given(data=st.data())
def test_every_document_parser_survives_broken_real_documents(seeds, data) -> None:
    name, doc = data.draw(broken_documents(seeds))
    lines = doc if isinstance(doc, list) else [doc]
    for obj in lines:
        spans, _ = spans_from_document(obj, where=name)
        rebuild_ok(spans)
        spans, _ = decode_traces_data(obj, where=name)
        rebuild_ok(spans)
        jaeger_data = obj.get("data", obj) if isinstance(obj, dict) else obj
        spans, _ = spans_from_jaeger_traces(jaeger_data if isinstance(jaeger_data, list) else [jaeger_data])
        rebuild_ok(spans)


@FUZZ
@given(data=st.binary(max_size=600))
def test_protobuf_decoder_never_raises_on_random_bytes(data: bytes) -> None:
    spans, _ = decode_traces_bytes(data, where="fuzz")
    rebuild_ok(spans)


@FUZZ
@given(data=st.data())
def test_protobuf_decoder_survives_flipped_bytes_of_a_real_message(seeds, data) -> None:
    from launchtrace.otlp.encode_proto import ProtoEncoder

    spans, _ = decode_traces_data(seeds["launchtrace-export"][0])
    raw = bytearray(ProtoEncoder().encode(spans))
    for _ in range(data.draw(st.integers(1, 8))):
        raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(raw)))
    got, _ = decode_traces_bytes(bytes(raw[:cut]), where="fuzz")
    rebuild_ok(got)


@FUZZ
@given(data=st.data())
def test_file_reader_reads_or_names_the_file_in_one_line(seeds, data, tmp_path_factory) -> None:
    kind = data.draw(st.sampled_from(["bytes", "broken", "broken-gz", "truncated"]))
    if kind == "bytes":
        payload = data.draw(st.binary(max_size=400))
    else:
        _, doc = data.draw(broken_documents(seeds))
        payload = as_lines(doc)
        if kind == "truncated":
            payload = payload[: data.draw(st.integers(0, len(payload)))]
        if kind == "broken-gz":
            payload = gzip.compress(payload)
    path = tmp_path_factory.mktemp("fuzz") / "input.jsonl"
    path.write_bytes(payload)
    try:
        result = read_spans(path)
    except UserError as exc:
        message = str(exc)
        assert "\n" not in message and str(path) in message
        return
    assert all("\n" not in str(p) for p in result.problems)
    rebuild_ok(result.spans)
