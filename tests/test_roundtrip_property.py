"""Property: random capture event streams -> SpanBuilder -> a transport -> rebuild give the records back.

Transports: none, OTLP/JSON (``otlp.json_codec``), OTLP protobuf (``otlp.encode_proto`` -> ``proto_decode``)
and the default file sink (``export.sinks.FileSink`` writing JSON Lines, ``sources.files.read_spans``
reading them), so what a backend or the file holds rebuilds exactly.

With folding off every record comes back equal field for field (times, seq and scope included); with folding
on, equal except the times and seqs of folded repetitions, which are derived from the summary's statistics.
Scopes come back equal (ids, names, kinds, nesting, user attributes, sites, errors) either way. The check is
per thread in seq order, because a trace belongs to one thread.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile

import orjson
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from launchtrace import topology
from launchtrace.export.config import ExportConfig
from launchtrace.export.sinks import FileSink
from launchtrace.export.spanbuilder import SpanBuilder
from launchtrace.model import BufferArg, LaunchRecord, ScopeRecord, Site
from launchtrace.otlp.encode_proto import encode_spans
from launchtrace.otlp.json_codec import decode_traces_data, encode_line
from launchtrace.otlp.proto_decode import decode_traces_bytes
from launchtrace.sources.files import read_spans
from launchtrace.sources.rebuild import rebuild
from launchtrace.spans import SpanData

SITES = [
    Site("sim.py", 10, "step", "sim"),
    Site("/a/b/train.py", 200, "<module>", ""),
    Site("<unknown>", 0, "<unknown>"),
]
KERNELS = ["sim.integrate", "sim.collide", "wp.copy", "wp.fill", "warp.utils.array_scan"]
INT64 = st.integers(-(2**63), 2**63 - 1)
TEXT = st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=12)
FLOATS = st.floats(allow_nan=False, width=64)
SCALAR = st.one_of(
    INT64,
    FLOATS,
    st.booleans(),
    TEXT,
    st.just("nan"),
    st.tuples(FLOATS, FLOATS, FLOATS),
    st.tuples(st.integers(-5, 5), st.integers(-5, 5)),
)
PTRS = st.sampled_from([0, 0x1000, 0x2000, 0x7F00_0000_0000, 2**63 - 8])


@st.composite
def buffers(draw, keys: list, ptrs: list[int]) -> tuple:
    out = []
    for key, ptr in zip(keys, ptrs):
        owned = draw(st.booleans())
        alloc = None if owned else draw(st.sampled_from([None, "State.x (s.py:4)", "ünï.tmp#2.grad (t.py:9)"]))
        out.append(
            BufferArg(
                key, draw(st.sampled_from(["x", "y", "state.pos", ""])), ptr,
                draw(st.lists(st.integers(0, 64), max_size=3).map(tuple)),
                draw(st.sampled_from(["float32", "vec3f", ""])), draw(st.integers(0, 2**40)),
                owner=draw(st.sampled_from(["sim.x", "sim.y", "ünï"])) if owned else None,
                offset=draw(st.integers(0, 4096)) if owned or alloc else None,
                foreign=not owned and draw(st.booleans()),
                access=draw(st.sampled_from(["", "r", "w", "rw"])),
                alloc=alloc,
            )
        )  # fmt: skip
    return tuple(out)


@st.composite
def records(draw) -> LaunchRecord:
    params = draw(st.sampled_from([(), ("x", "y", "dt"), ("state", "n", "dt", "g"), ("a", "a", "b")]))
    n_args = draw(st.integers(0, 4))
    keys = [i if draw(st.integers(0, 3)) else f"{i}.f{i}" for i in range(n_args)]
    split = draw(st.integers(0, n_args))
    array_keys, scalar_keys = keys[:split], keys[split:]
    ptrs = [draw(PTRS) for _ in array_keys]
    bufs = draw(buffers(array_keys, ptrs)) if draw(st.booleans()) else ()
    return LaunchRecord(
        draw(st.sampled_from(["launch", "copy", "fill", "primitive", "graph_launch"])),
        draw(st.sampled_from(KERNELS)),
        draw(st.lists(st.integers(0, 1 << 20), min_size=1, max_size=3).map(tuple)),
        draw(st.one_of(st.none(), st.integers(0, 2**62))),
        tuple(zip(array_keys, ptrs)),
        tuple((k, draw(SCALAR)) for k in scalar_keys),
        draw(st.sampled_from(SITES)),
        params=params,
        buffers=bufs,
        block_dim=draw(st.one_of(st.none(), st.sampled_from([64, 256]))),
        max_blocks=draw(st.sampled_from([0, 0, 16])),
        device=draw(st.sampled_from(["cpu", "cuda:0", ""])),
        graph_id=draw(st.one_of(st.none(), st.integers(0, 2**40))),
        captured=draw(st.booleans()),
        adjoint=draw(st.booleans()),
        api=draw(st.sampled_from(["", "wp.launch", "wp.clone"])),
        internal=draw(st.booleans()),
        error=draw(st.one_of(st.none(), st.none(), st.sampled_from(["RuntimeError: boom", "odd"]))),
        repeat=draw(st.sampled_from([1, 1, 1, 4])),
        module_hash=draw(st.sampled_from(["", "deadbeef"])),
        # graph_replay is left 0: a pool record repeats with one ordinal, which no real replay does (real
        # replays, folded and not, are checked in test_graph_capture.py)
        graph_launches=draw(st.one_of(st.none(), st.integers(0, 100))),
    )


@st.composite
def streams(draw) -> tuple[list, list[LaunchRecord], dict[int, ScopeRecord]]:
    """A capture event stream: 1-2 threads, nested scopes, records drawn from a small pool (so runs occur)."""
    pool = draw(st.lists(records(), min_size=1, max_size=5))
    threads = [(1, "MainThread"), (2, "worker")][: draw(st.integers(1, 2))]
    stacks: dict[int, list[ScopeRecord]] = {t: [] for t, _ in threads}
    events: list = []
    recs: list[LaunchRecord] = []
    scopes: dict[int, ScopeRecord] = {}
    seq, t, next_id = 0, 10_000, 1
    for _ in range(draw(st.integers(0, 120))):
        seq += 1
        t += draw(st.integers(0, 5_000))
        thread, tname = draw(st.sampled_from(threads))
        stack = stacks[thread]
        action = draw(st.sampled_from(["rec"] * 6 + ["repeat", "begin", "end"]))
        if action == "begin":
            attrs = draw(st.dictionaries(st.sampled_from(["step", "env", "launchtrace.op", "lr"]), SCALAR, max_size=3))
            scope = ScopeRecord(next_id, draw(st.sampled_from(["step", "forward", "Module load", "ünï"])),
                                draw(st.sampled_from(["tape", "timer", "user"])),
                                stack[-1].id if stack else None, tuple(attrs.items()), thread, tname, t,
                                internal=draw(st.booleans()), site=draw(st.sampled_from([None, *SITES])),
                                seq=seq)  # fmt: skip
            next_id += 1
            stack.append(scope)
            scopes[scope.id] = scope
            events.append(("scope_begin", scope))
        elif action == "end" and stack:
            scope = stack.pop()
            ended = dataclasses.replace(scope, end_ns=t, error=draw(st.sampled_from([None, "ValueError: x"])))
            scopes[scope.id] = ended
            events.append(("scope_end", ended))
        else:
            count = draw(st.one_of(st.integers(2, 12), st.integers(60, 100))) if action == "repeat" else 1
            period = draw(st.integers(1, min(3, len(pool))))
            first = draw(st.integers(0, len(pool) - period))
            durations = draw(st.lists(st.integers(0, 40), min_size=1, max_size=4))  # few draws: fast
            for i in range(count * period):
                base = pool[first + i % period]
                seq += 1
                t += 1 + i % 7
                rec = dataclasses.replace(base, thread=thread, thread_name=tname, start_ns=t,
                                          end_ns=t + durations[i % len(durations)], seq=seq,
                                          scope_id=stack[-1].id if stack else None)  # fmt: skip
                recs.append(rec)
                events.append(("record", rec))
    return events, recs, scopes


def _via_json(spans: list[SpanData]) -> list[SpanData]:
    decoded, problems = decode_traces_data(orjson.loads(encode_line(spans)), where="prop") if spans else ([], [])
    assert not problems
    return decoded


def _via_protobuf(spans: list[SpanData]) -> list[SpanData]:
    decoded, problems = decode_traces_bytes(encode_spans(spans), where="prop") if spans else ([], [])
    assert not problems
    return decoded


def _via_file_sink(spans: list[SpanData]) -> list[SpanData]:
    """The default sink (OTLP JSON Lines file) written by the exporter, read back by the file reader."""
    if not spans:
        return []  # the sink creates its file on the first batch
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "spans.jsonl")
        sink = FileSink(path)
        for i in range(0, len(spans), 7):  # several batches: several lines
            sink.write(spans[i : i + 7])
        sink.shutdown()
        assert sink.stats().dropped == 0
        result = read_spans(path)
    assert not result.problems
    return result.spans


TRANSPORTS = {"direct": list, "otlp-json": _via_json, "otlp-protobuf": _via_protobuf, "file-sink": _via_file_sink}


def types(value):
    """The type tree of a value: ``3 == 3.0 == True`` in Python, so equality alone hides a lost type."""
    if isinstance(value, tuple | list):
        return tuple(types(v) for v in value)
    return type(value).__name__


def value_types(records: list[LaunchRecord]) -> list:
    return [(types(r.scalars), types(r.dim)) for r in records]


def scope_types(scopes: dict[int, ScopeRecord]) -> dict:
    return {sid: types(s.attributes) for sid, s in scopes.items()}


def _by_thread(records: list[LaunchRecord]) -> dict[int, list[LaunchRecord]]:
    out: dict[int, list[LaunchRecord]] = {}
    for r in sorted(records, key=lambda r: r.seq):
        out.setdefault(r.thread, []).append(r)
    return out


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(
    streams(),
    st.sampled_from(["off", "always", "auto"]),
    st.sampled_from(list(TRANSPORTS)),
    st.integers(1, 40),
    st.data(),
)
def test_export_then_rebuild_gives_the_records_back(stream, fold, transport, step_max, data):
    events, recs, scopes = stream
    config = ExportConfig.resolve(env={}, file_path="x", fold=fold, include_internal=True, span_budget=10**6,
                                  step_max_spans=step_max, step_window_s=1e6)  # fmt: skip
    builder = SpanBuilder(config, resource=(("service.name", "prop"),))
    spans = []
    i = 0
    while i < len(events):  # fed in random chunks, as the export worker drains
        n = data.draw(st.integers(1, 25))
        spans += builder.feed(events[i : i + n], now_ns=0)
        i += n
    spans += builder.flush(now_ns=10**15)
    assert builder.dropped() == {"budget": 0, "unsampled": 0}
    spans = TRANSPORTS[transport](spans)
    result = rebuild(spans)
    assert result.skipped == 0

    def strip(r: LaunchRecord) -> LaunchRecord:
        return dataclasses.replace(r, start_ns=0, end_ns=0, seq=0) if fold == "always" else r

    got = _by_thread(result.records())
    want = _by_thread(recs)
    assert got.keys() == want.keys()
    for thread in want:
        assert [strip(r) for r in got[thread]] == [strip(r) for r in want[thread]]
        assert value_types(got[thread]) == value_types(want[thread])
        seqs = [r.seq for r in got[thread]]
        assert seqs == sorted(set(seqs))
        # topology with owners, as the analyses see it
        assert topology.topology_keys(got[thread]) == topology.topology_keys(want[thread])
    # scopes: merged over all traces; a scope still open at flush comes back open (end_ns 0)
    rebuilt_scopes = {sid: s for d in result.traces.values() for sid, s in d.scopes.items()}
    assert rebuilt_scopes == scopes
    assert scope_types(rebuilt_scopes) == scope_types(scopes)
    # each trace keeps its own nesting
    for data_ in result.traces.values():
        for r in data_.records:
            assert r.scope_id is None or r.scope_id in data_.scopes
    # repetition counts: the summaries account for every folded record
    from launchtrace import conventions as C

    folded = sum(s.attribute(C.FOLD_LAUNCHES, 0) for s in spans)
    plain = sum(1 for s in spans if s.attribute(C.OP) is not None and s.attribute(C.FOLD_COUNT) is None)
    assert folded + plain == len(recs)
    if fold != "always":  # "auto": every trace fits the budget, so nothing folds
        assert folded == 0


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(streams(), st.sampled_from([12, 25, 60]), st.integers(1, 40), st.data())
def test_auto_folding_a_trace_past_its_budget_keeps_its_records_and_topology(stream, budget, step_max, data):
    """fold="auto" with small budgets: traces that would pass them are folded after their spans were held back
    (nested scopes included). Whatever is not cut comes back: with nothing cut, every record (times and seqs
    aside), the same topology in order, and the summaries account for every folded record."""
    from launchtrace import conventions as C

    events, recs, scopes = stream
    config = ExportConfig.resolve(env={}, file_path="x", fold="auto", include_internal=True, span_budget=budget,
                                  step_max_spans=step_max, step_window_s=1e6)  # fmt: skip
    builder = SpanBuilder(config, resource=(("service.name", "prop"),))
    spans = []
    i = 0
    while i < len(events):
        n = data.draw(st.integers(1, 25))
        spans += builder.feed(events[i : i + n], now_ns=0)
        i += n
    spans += builder.flush(now_ns=10**15)
    per_trace: dict[bytes, int] = {}
    for s in spans:
        per_trace[s.trace_id] = per_trace.get(s.trace_id, 0) + 1
    assert not per_trace or max(per_trace.values()) <= budget
    event(f"cut: {bool(builder.dropped_budget)}, folded traces: {min(builder.traces_folded, 2)}")
    if builder.dropped_budget:
        return  # cut as documented; what is cut is counted (test_spanbuilder.py)
    result = rebuild(_via_json(spans))
    assert result.skipped == 0

    def strip(r: LaunchRecord) -> LaunchRecord:
        return dataclasses.replace(r, start_ns=0, end_ns=0, seq=0)

    got, want = _by_thread(result.records()), _by_thread(recs)
    assert got.keys() == want.keys()
    for thread in want:
        assert [strip(r) for r in got[thread]] == [strip(r) for r in want[thread]]
        assert topology.topology_keys(got[thread]) == topology.topology_keys(want[thread])
    assert {sid: s for d in result.traces.values() for sid, s in d.scopes.items()} == scopes
    folded = sum(s.attribute(C.FOLD_LAUNCHES, 0) for s in spans)
    assert folded == builder.folded_records
    assert folded + sum(1 for s in spans if s.attribute(C.OP) is not None and s.attribute(C.FOLD_COUNT) is None) == len(
        recs
    )
