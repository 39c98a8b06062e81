"""rebuild: spans -> TraceData, the exact inverse of the SpanBuilder (through OTLP/JSON too)."""

from __future__ import annotations

import dataclasses
import json

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from launchtrace import conventions as C
from launchtrace import topology
from launchtrace.export.config import ExportConfig
from launchtrace.export.spanbuilder import SpanBuilder
from launchtrace.model import BufferArg, LaunchRecord, ScopeRecord, Site
from launchtrace.otlp.json_codec import decode_traces_data, encode_line
from launchtrace.sources.rebuild import TRACE_ID, rebuild, scope_traces
from launchtrace.spans import SpanData, SpanEvent

SITE = Site("/home/u/sim.py", 40, "step", "sim")
RESOURCE = (("service.name", "test"),)


def export(events, **config) -> list[SpanData]:
    config.setdefault("file_path", "x.jsonl")
    builder = SpanBuilder(ExportConfig.resolve(env={}, **config), resource=RESOURCE)
    return builder.feed(events, now_ns=0) + builder.flush(now_ns=10**18)


def through_json(spans: list[SpanData]) -> list[SpanData]:
    decoded, problems = decode_traces_data(orjson.loads(encode_line(spans)), where="test")
    assert not problems
    return decoded


def rich_records(scope_id: int | None) -> list[LaunchRecord]:
    """Records exercising every field the model has."""
    bufs = (
        BufferArg(0, "state.pos", 0x7F0000001000, (64, 3), "vec3f", 768, owner="sim.pos", offset=0, access="rw"),
        BufferArg("1.vel", "state.vel", 0x7F0000002000, (64,), "vec3f", 768, foreign=True, access="r"),
        BufferArg(3, "renamed", 0x7F0000003000, (8, 8), "float32", 256, owner="sim.grid", offset=128),
    )
    a = LaunchRecord(
        "launch", "sim.integrate", (64,), 7, tuple((b.key, b.ptr) for b in bufs),
        ((2, 0.01), (4, 3), (5, True), (6, "mode"), (7, (0.0, -9.8, 0.0)), (8, "nan"), ("1.mass", 2.5)),
        SITE, params=("state", "state_vel", "dt", "grid", "n", "flag", "label", "gravity", "bad"), buffers=bufs,
        block_dim=128, max_blocks=4, device="cpu", thread=140001, thread_name="MainThread", start_ns=1_000,
        end_ns=2_500, scope_id=scope_id, graph_id=None, captured=False, adjoint=True, api="wp.launch",
        seq=10, module_hash="abc123",
    )  # fmt: skip
    b = LaunchRecord(
        "copy", "wp.copy", (64,), None, ((0, 0x10), (1, 0x20)), (), Site("<unknown>", 0, "<unknown>"),
        params=("dest", "src"), start_ns=3_000, end_ns=3_100, scope_id=scope_id, seq=11, internal=True,
        api="wp.clone", captured=True, graph_id=2**40 + 5,
    )  # no buffers at all  # fmt: skip
    c = LaunchRecord(
        "graph_launch", "wp.capture_launch", (1,), 2**62, (), (), SITE, start_ns=4_000, end_ns=9_000,
        scope_id=scope_id, seq=12, error="RuntimeError: graph exploded: twice", repeat=3,
    )  # fmt: skip
    return [a, b, c]


def scoped(records_for, attrs=(("step", 3), ("launchtrace.op", "user-collides"))):
    outer = ScopeRecord(1, "step", "user", None, attrs, thread=140001, thread_name="MainThread",
                        start_ns=500, seq=9, site=SITE)  # fmt: skip
    inner = ScopeRecord(2, "forward", "tape", 1, (), thread=140001, start_ns=2_900, seq=13)
    recs = records_for(1)
    inner_rec = dataclasses.replace(recs[0], scope_id=2, seq=14, start_ns=3_000, end_ns=3_200)
    events = [("scope_begin", outer), *[("record", r) for r in recs], ("scope_begin", inner),
              ("record", inner_rec), ("scope_end", dataclasses.replace(inner, end_ns=3_300)),
              ("scope_end", dataclasses.replace(outer, end_ns=10_000, error="KeyError: 'x'"))]  # fmt: skip
    scopes = {1: dataclasses.replace(outer, end_ns=10_000, error="KeyError: 'x'"),
              2: dataclasses.replace(inner, end_ns=3_300)}  # fmt: skip
    return events, [*recs, inner_rec], scopes


@pytest.mark.parametrize("codec", [False, True], ids=["spans", "otlp-json"])
def test_every_field_round_trips_exactly(codec):
    events, records, scopes = scoped(rich_records)
    spans = export(events, fold=False, include_internal=True)
    if codec:
        spans = through_json(spans)
    result = rebuild(spans)
    assert result.skipped == 0 and result.warnings == []
    (data,) = result.traces.values()
    assert data.records == records
    assert data.scopes == scopes
    assert data.scope_path(2) == ("step", "forward")
    assert data.attributes["service.name"] == "test" and data.attributes[TRACE_ID] == spans[0].trace_id.hex()
    # scalar types survive, int vs float vs bool vs str vs vector
    scalars = dict(data.records[0].scalars)
    assert [type(scalars[k]) for k in (2, 4, 5, 6, 7, 8)] == [float, int, bool, str, tuple, str]


def test_unscoped_records_come_back_without_scope():
    recs = rich_records(None)
    spans = export([("record", r) for r in recs], fold=False, include_internal=True)
    result = rebuild(spans)
    assert sorted(result.records(), key=lambda r: r.seq) == recs
    # one step root per thread: the first record ran on thread 140001, the others on thread 0
    assert len(result.traces) == 2
    for data in result.traces.values():
        assert data.scopes == {} and data.attributes["root"] == "launchtrace.step"


def test_folded_summary_expands_to_its_repetitions():
    scope = ScopeRecord(1, "rollout", "user", start_ns=0, seq=1)
    records = []
    for i in range(300):
        t = 1_000 + i * 1_000
        ptrs = (0x100, 0x200) if i % 2 == 0 else (0x200, 0x100)
        records.append(LaunchRecord("launch", "sim.step", (8,), None, tuple(enumerate(ptrs)), ((2, 0.1),), SITE,
                                    params=("a", "b", "dt"), start_ns=t, end_ns=t + 100 + (i % 2) * 50,
                                    seq=2 + 3 * i, scope_id=1))  # fmt: skip
    end = dataclasses.replace(scope, end_ns=400_000)
    events = [("scope_begin", scope), *[("record", r) for r in records], ("scope_end", end)]
    spans = export(events, fold="always")
    assert len(spans) == 2
    result = rebuild(through_json(spans))
    (data,) = result.traces.values()
    got = data.records
    assert len(got) == 300
    strip = [dataclasses.replace(r, start_ns=0, end_ns=0, seq=0) for r in got]
    assert strip == [dataclasses.replace(r, start_ns=0, end_ns=0, seq=0) for r in records]
    # durations are the per-position means, seqs increase from the first to the last real one
    assert {r.duration_ns for r in got[0::2]} == {100} and {r.duration_ns for r in got[1::2]} == {150}
    seqs = [r.seq for r in got]
    assert seqs[0] == records[0].seq and seqs[-1] == records[-1].seq and seqs == sorted(set(seqs))
    summary = spans[0]
    assert all(summary.start_ns <= r.start_ns and r.end_ns <= summary.end_ns for r in got)
    # the scope's fingerprint equals the fingerprint of the rebuilt records
    assert topology.fingerprint(got) == spans[1].attribute(C.SCOPE_FINGERPRINT)
    # expand=False: one record per position standing for the repetitions
    compact = rebuild(spans, expand=False).records()
    assert [r.repeat for r in compact] == [150, 150]
    assert topology.fingerprint(compact) == spans[1].attribute(C.SCOPE_FINGERPRINT)


def test_foreign_spans_are_skipped_and_counted_even_between_ours():
    events, _records, _ = scoped(rich_records)
    spans = export(events, fold=False, include_internal=True)
    root = next(s for s in spans if s.parent_span_id is None)
    # another instrumentation's span sits between the root and a record span
    http = SpanData(root.trace_id, b"\xaa" * 8, root.span_id, "GET /weights", 1, 2, (("http.method", "GET"),))
    first = spans[0]
    spans[0] = dataclasses.replace(first, parent_span_id=http.span_id)
    other_trace = SpanData(b"\x01" * 16, b"\x02" * 8, None, "unrelated", 1, 2)
    result = rebuild([*spans, http, other_trace])
    assert result.skipped == 2
    assert list(result.traces) == [root.trace_id.hex()]
    assert result.records()[0].scope_id == 1  # found through the foreign parent


def test_budget_cut_and_incomplete_scopes_become_warnings():
    scope = ScopeRecord(1, "step", "user", start_ns=0, seq=1)
    recs = [LaunchRecord("launch", "k", (1,), None, (), ((0, float(i)),), SITE, params=("v",),
                         start_ns=i, end_ns=i + 1, seq=i + 2, scope_id=1) for i in range(20)]  # fmt: skip
    spans = export([("scope_begin", scope), *[("record", r) for r in recs]], span_budget=5)
    result = rebuild(spans)
    (data,) = result.traces.values()
    assert len(data.records) == 3 and data.attributes[C.DROPPED_SPANS] == 17
    assert any("17 spans were left out" in w for w in result.warnings)
    assert any("still open" in w for w in result.warnings)
    assert data.scopes[1].end_ns == 0  # open, as the model spells it


def test_missing_parents_duplicates_and_cycles_are_warnings_not_crashes():
    events, _, _ = scoped(rich_records)
    spans = export(events, fold=False, include_internal=True)
    root = next(s for s in spans if s.parent_span_id is None)
    rest = [s for s in spans if s is not root]
    result = rebuild([*rest, rest[0]])
    assert any("duplicate span id" in w for w in result.warnings)
    assert any("is missing" in w for w in result.warnings)
    assert all(r.scope_id in (None, 2) for r in result.records())
    a, b = rest[0], rest[1]
    cyc = [dataclasses.replace(a, parent_span_id=b.span_id), dataclasses.replace(b, parent_span_id=a.span_id)]
    result = rebuild(cyc)
    assert any("cycle" in w for w in result.warnings)


def test_arrays_arriving_as_json_strings_are_read():
    """Jaeger's classic API flattens array attributes to JSON strings; rebuild reads those too."""
    events, records, _ = scoped(rich_records)
    spans = export(events, fold=False, include_internal=True)

    def flatten(span: SpanData) -> SpanData:
        attrs = tuple((k, json.dumps(list(v)) if isinstance(v, tuple) else v) for k, v in span.attributes)
        return dataclasses.replace(span, attributes=attrs)

    got = rebuild([flatten(s) for s in spans]).records()
    assert [(r.kernel, r.dim, r.params, [b.shape for b in r.buffers]) for r in got] == [
        (r.kernel, r.dim, r.params, [b.shape for b in r.buffers]) for r in records
    ]


def test_scope_traces_split_per_scope_instance():
    events = []
    records = []
    for step in range(3):
        s = ScopeRecord(10 + step, "step", "user", start_ns=step * 100, seq=step * 10)
        events.append(("scope_begin", s))
        for j in range(2):
            r = LaunchRecord("launch", f"k{j}", (1,), None, (), ((0, step),), SITE, params=("i",),
                             start_ns=step * 100 + j, end_ns=step * 100 + j + 1, seq=step * 10 + j + 1,
                             scope_id=s.id)  # fmt: skip
            records.append(r)
            events.append(("record", r))
        events.append(("scope_end", dataclasses.replace(s, end_ns=step * 100 + 50)))
    result = rebuild(export(events))
    assert len(result.traces) == 3
    parts = [p for data in result.traces.values() for p in scope_traces(data, "step")]
    assert [[r.kernel for r in p.records] for p in parts] == [["k0", "k1"]] * 3
    assert [p.attributes["scope_id"] for p in parts] == [10, 11, 12]


# --- a real Warp program on the CPU device ----------------------------------------------------------------


@pytest.mark.parametrize("fold", [False, True], ids=["unfolded", "folded"])
def test_real_warp_program_round_trips_through_otlp_json(instrumented, fold):
    """A real Warp simulation (launches, a copy, a fill, a reduction) with owned buffers and scopes:
    the drained capture events -> spans -> OTLP/JSON -> rebuild give the captured records back."""
    from tests import warp_programs as programs

    import launchtrace
    from launchtrace.capture import bus

    sim = programs.Sim(32)
    owned = launchtrace.own(sim, "sim")
    sub = bus.subscribe()
    try:
        with launchtrace.scope("rollout", env="test"):
            for i in range(20):
                with launchtrace.scope("step", step=i):
                    sim.step()
        for _ in range(5):
            sim.step()  # unscoped: a synthetic step root
        events = sub.drain()
    finally:
        sub.close()
        launchtrace.disown(owned)
    captured = [e for k, e in events if k == "record" and not e.internal]
    scopes = {e.id: e for k, e in events if k == "scope_end" and not e.internal}
    # 21 of the program's scopes, and Warp's module load where this process had not loaded it yet
    assert len(captured) == 25 * 5 and len([s for s in scopes.values() if s.kind != "load"]) == 21
    assert any(b.owner and b.owner.startswith("sim.") for r in captured for b in r.buffers)

    spans = through_json(export(events, fold=fold))
    result = rebuild(spans)
    assert result.skipped == 0 and result.warnings == []
    got = sorted(result.records(), key=lambda r: r.seq)
    if fold:
        assert len(spans) < len(captured)
        got = [dataclasses.replace(r, start_ns=0, end_ns=0, seq=0) for r in got]
        captured = [dataclasses.replace(r, start_ns=0, end_ns=0, seq=0) for r in captured]
    assert got == captured
    rebuilt_scopes = {sid: s for d in result.traces.values() for sid, s in d.scopes.items()}
    assert rebuilt_scopes == scopes
    rollout = next(s for s in spans if s.name == "rollout")
    in_rollout = [r for r in captured if r.scope_id in scopes]
    assert rollout.attribute(C.SCOPE_FINGERPRINT) == topology.fingerprint(in_rollout)
    assert rollout.attribute(C.SCOPE_LAUNCHES) == 100


# --- hostile input ------------------------------------------------------------------------------------------

JUNK = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=8), st.binary(max_size=4),
    st.lists(st.one_of(st.integers(), st.text(max_size=3), st.floats()), max_size=3).map(tuple),
)  # fmt: skip
OUR_KEYS = [C.OP, C.KERNEL, C.DIM, C.STREAM, C.SEQ, C.PARAMS, C.ARRAY_KEYS, C.SCALAR_KEYS, C.THREAD_ID,
            C.CODE_LINENO, C.SCOPE_KIND, C.SCOPE_ID, C.SCOPE_ATTRIBUTE_KEYS, C.FOLD_COUNT, C.FOLD_PERIOD,
            C.arg_attr("0", C.ARG_PTR), C.arg_attr("0", C.ARG_SHAPE), C.arg_attr("0", C.ARG_OFFSET),
            C.DROPPED_SPANS, C.BLOCK_DIM, C.REPEAT]  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(OUR_KEYS), JUNK), max_size=8), st.booleans())
def test_rebuild_never_raises_on_junk_values_under_our_names(attrs, as_event):
    """Spans that use our attribute names with values of any type: warnings (one line each), never a raise."""
    attrs = tuple(dict(attrs).items())
    events = (SpanEvent(C.EVENT_FOLD_POSITION, 0, attrs),) if as_event else ()
    spans = [
        SpanData(b"\x01" * 16, b"\x02" * 8, None, "root", 0, 1, ((C.SCOPE_KIND, "user"), (C.SCOPE_ID, 1))),
        SpanData(b"\x01" * 16, b"\x03" * 8, b"\x02" * 8, "junk", 0, 1, attrs, events=events),
    ]
    result = rebuild(spans)
    assert all("\n" not in w for w in result.warnings)
    assert result.malformed <= 1 and result.skipped <= 1


def test_a_huge_fold_count_is_not_expanded(monkeypatch):
    import launchtrace.sources.rebuild as rebuild_module

    scope = ScopeRecord(1, "rollout", "user", start_ns=0, seq=1)
    recs = [LaunchRecord("launch", "k", (1,), None, (), (), SITE, start_ns=i, end_ns=i + 1, seq=i + 2, scope_id=1)
            for i in range(50)]  # fmt: skip
    spans = export([("scope_begin", scope), *[("record", r) for r in recs],
                    ("scope_end", dataclasses.replace(scope, end_ns=100))], fold="always")  # fmt: skip
    monkeypatch.setattr(rebuild_module, "MAX_EXPANDED", 10)
    result = rebuild(spans)
    assert [r.repeat for r in result.records()] == [50]
    assert any("not expanded" in w for w in result.warnings)


def test_an_unreadable_value_names_the_span_and_keeps_the_rest():
    events, records, _ = scoped(rich_records)
    spans = export(events, fold=False, include_internal=True)
    bad = next(s for s in spans if s.attribute(C.KERNEL) == "wp.copy")
    broken = dataclasses.replace(bad, attributes=((C.OP, "copy"), (C.DIM, "not a dim")))
    result = rebuild([broken if s is bad else s for s in spans])
    assert result.malformed == 1 and result.skipped == 0
    assert len(result.records()) == len(records) - 1
    (warning,) = result.warnings
    assert bad.span_id.hex() in warning and "wp.copy" in warning


def test_with_times_equals_dataclasses_replace():
    import launchtrace.sources.rebuild as rebuild_module

    for rec in rich_records(7):
        fast = rebuild_module._with_times(rec, 11, 22, 33)
        assert fast == dataclasses.replace(rec, start_ns=11, end_ns=22, seq=33) and type(fast) is LaunchRecord
        with pytest.raises(dataclasses.FrozenInstanceError):
            fast.seq = 1
