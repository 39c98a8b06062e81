"""rebuild's per-layout cache: spans that share attribute names reuse what the names decide, and nothing else.

The rebuild works out the arguments' labels and attribute names, the call site's attributes and the record's
constructor once per layout (the attribute names in order and the argument lists), and shares call sites and
shapes by value. These tests mix layouts in one trace and give spans values that are equal but read
differently (``(1,) == (True,)``, ``1 == True``), which a cache keyed by equality alone would mix up.
"""

from __future__ import annotations

import dataclasses

from launchtrace import conventions as C
from launchtrace.export.config import ExportConfig
from launchtrace.export.spanbuilder import SpanBuilder
from launchtrace.model import BufferArg, LaunchRecord, Site
from launchtrace.sources import wide
from launchtrace.sources.rebuild import rebuild
from launchtrace.sources.stream import TraceStream
from launchtrace.spans import SpanData

TRACE = bytes(range(16))


def _launch(span_id: int, attrs: tuple) -> SpanData:
    return SpanData(TRACE, span_id.to_bytes(8, "big"), None, "k", 10, 20, ((C.OP, "launch"), *attrs))


def _records(spans: list[SpanData]) -> list[LaunchRecord]:
    result = rebuild(spans)
    assert not result.warnings
    return result.records()


def test_two_call_sites_with_different_layouts_in_one_file_rebuild_exactly():
    site_a = Site("/w/sim.py", 40, "step", "sim")
    site_b = Site("/w/other.py", 7, "go", "other")
    owned = BufferArg(0, "x", 0x1000, (64, 3), "vec3f", 768, owner="sim.x", offset=0, access="rw")
    bare = BufferArg(0, "x", 0x2000, (8,), "float32", 32)
    pair = (BufferArg(0, "a", 0x10, (4,), "int32", 16, access="r"), BufferArg(2, "c", 0x20, (4,), "int32", 16))
    records = []
    for i in range(6):  # the layouts interleaved, each seen several times
        common = {"thread": 5, "start_ns": 100 * i, "end_ns": 100 * i + 50, "seq": 3 * i}
        a = LaunchRecord("launch", "sim.k", (64,), None, ((0, owned.ptr),), ((1, 0.5 * i),), site_a,
                         params=("x", "dt"), buffers=(owned,), device="cpu", **common)  # fmt: skip
        b = LaunchRecord("launch", "sim.k", (8,), 7, ((0, bare.ptr),), ((1, i),), site_a, params=("x", "n"),
                         buffers=(bare,), block_dim=64, **{**common, "seq": 3 * i + 1})  # fmt: skip
        c = LaunchRecord("launch", "other.k", (4,), None, ((0, 0x10), (2, 0x20)), ((1, (1.0, -0.0)),), site_b,
                         params=("a", "v", "c"), buffers=pair, api="wp.launch", **{**common, "seq": 3 * i + 2})  # fmt: skip  # noqa: E501
        records += [a, b, c]
    builder = SpanBuilder(ExportConfig.resolve(env={}, file_path="x.jsonl"), resource=(("service.name", "t"),))
    spans = builder.feed([("record", r) for r in records], now_ns=0) + builder.flush(now_ns=10**18)
    rebuilt = sorted(_records(spans), key=lambda r: r.seq)
    assert rebuilt == records
    assert [r.scalars for r in rebuilt] == [r.scalars for r in records]  # 0 stays an int, -0.0 a float
    assert [type(v) for r in rebuilt for _, v in r.scalars] == [type(v) for r in records for _, v in r.scalars]


def test_argument_lists_equal_but_read_differently_are_not_mixed_up():
    # the same attribute names; params (1,) and (True,) are equal tuples but label the argument "1" and "True"
    names = ((C.ARRAY_KEYS, ("0",)), ("launchtrace.arg.1.ptr", 4096), ("launchtrace.arg.1.shape", (2,)))
    one = _launch(1, ((C.PARAMS, (1,)), *names, (C.SEQ, 1)))
    true = _launch(2, ((C.PARAMS, (True,)), *names, (C.SEQ, 2)))
    first, second = sorted(_records([one, true]), key=lambda r: r.seq)
    assert first.params == ("1",) and first.arrays == ((0, 4096),)
    assert first.buffers == (BufferArg(0, "1", 4096, (2,)),)
    assert second.params == ("True",) and second.arrays == ((0, 0),) and second.buffers == ()


def test_call_site_values_equal_but_read_differently_are_not_mixed_up():
    def site_span(span_id: int, file: object, line: object) -> SpanData:
        code = ((C.CODE_FILE_PATH, file), (C.CODE_LINE_NUMBER, line), (C.CODE_FUNCTION_NAME, "m.f"))
        return _launch(span_id, (*code, (C.SEQ, span_id)))

    spans = [site_span(1, 1, 3), site_span(2, True, 3.0), site_span(3, 1, True), site_span(4, "1", 3)]
    sites = [r.site for r in sorted(_records(spans), key=lambda r: r.seq)]
    assert sites == [Site("1", 3, "f", "m"), Site("True", 3, "f", "m"), Site("1", 1, "f", "m"), Site("1", 3, "f", "m")]


def test_equal_shapes_of_other_types_read_as_the_same_ints():
    def shaped(span_id: int, shape: object) -> SpanData:
        arg = ((C.PARAMS, ("x",)), (C.ARRAY_KEYS, ("0",)), ("launchtrace.arg.x.shape", shape))
        return _launch(span_id, (*arg, (C.DIM, shape), (C.SEQ, span_id)))

    rebuilt = sorted(_records([shaped(1, (2, 3)), shaped(2, (2.0, 3)), shaped(3, [2, True])]), key=lambda r: r.seq)
    assert [r.dim for r in rebuilt] == [(2, 3), (2, 3), (2, 1)]
    assert all(type(n) is int for r in rebuilt for n in r.dim + r.buffers[0].shape)
    assert [dataclasses.replace(r, seq=0) for r in rebuilt[:2]] == [dataclasses.replace(rebuilt[0], seq=0)] * 2


def test_a_kept_record_takes_each_span_own_values_and_text_read_from_equal_non_strings_is_not_shared():
    def span(span_id: int, owner: object, dt: object, start: int) -> SpanData:
        arg = ((C.PARAMS, ("x", "dt")), (C.ARRAY_KEYS, ("0",)), (C.SCALAR_KEYS, ("1",)))
        arg += (("launchtrace.arg.x.ptr", 64), ("launchtrace.arg.x.shape", (4,)), ("launchtrace.arg.x.owner", owner))
        attrs = (*arg, ("launchtrace.scalar.dt", dt), (C.SEQ, span_id))
        return dataclasses.replace(_launch(span_id, attrs), start_ns=start, end_ns=start + 5)

    spans = [span(1, "a", 0.5, 100), span(2, "a", -0.0, 200), span(3, 1, 0.0, 300), span(4, True, 0, 400)]
    spans.append(span(5, "a", (1.0, 2), 500))
    rebuilt = sorted(_records(spans), key=lambda r: r.seq)
    assert [(r.seq, r.start_ns, r.end_ns) for r in rebuilt] == [(i, 100 * i, 100 * i + 5) for i in range(1, 6)]
    assert [r.buffers[0].owner for r in rebuilt] == ["a", "a", "1", "True", "a"]
    assert [repr(r.scalars) for r in rebuilt] == ["((1, 0.5),)", "((1, -0.0),)", "((1, 0.0),)", "((1, 0),)",
                                                  "((1, (1.0, 2)),)"]  # fmt: skip


def test_scalars_are_shared_only_between_launches_that_read_them_exactly_alike(monkeypatch):
    """Launches of one call site share one tuple of scalars (issue 25: 340 bytes a record) when theirs read the
    same to the type and the float's sign; never a tuple with a NaN (no copy of it is equal to it). The wide trace's
    reader shares them (every trace made wide here)."""
    monkeypatch.setattr(wide, "WIDE_AT", 1)

    def _records(spans: list[SpanData]) -> list[LaunchRecord]:
        stream = TraceStream.from_span_batches(lambda log: iter([spans]), "test")
        (trace,) = list(stream)
        return trace.records

    def span(span_id: int, dt: object) -> SpanData:
        arg = ((C.PARAMS, ("x", "dt")), (C.ARRAY_KEYS, ("0",)), (C.SCALAR_KEYS, ("1",)))
        arg += (("launchtrace.arg.x.ptr", 64), ("launchtrace.arg.x.shape", (4,)))
        return _launch(span_id, (*arg, ("launchtrace.scalar.dt", dt), (C.SEQ, span_id)))

    values = [0.5, 0.5, -0.0, 0.0, 0, False, 1, True, 1.0, (1.0, 2), (1.0, 2), (1.0, 2.0), [1, [2]], [1, [2]]]
    values += [float("nan"), float("nan")]
    rebuilt = sorted(_records([span(i + 1, v) for i, v in enumerate(values)]), key=lambda r: r.seq)
    got = [r.scalars for r in rebuilt]
    assert [repr(s) for s in got] == [repr(((1, v if not isinstance(v, list) else (1, (2,))),)) for v in values]
    assert got[0] is got[1] and got[9] is got[10] and got[12] is got[13]  # equal to the type: one tuple
    for a, b in [(2, 3), (4, 5), (6, 7), (6, 8), (9, 11)]:  # equal, but read differently: never one tuple
        assert got[a] == got[b] and got[a] is not got[b]
    assert got[14] is not got[15] and got[14] != got[15]  # NaN: each launch its own, as before
