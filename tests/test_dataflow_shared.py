"""The dataflow builder's shared work (issue 25): a call site's access rows made once per (buffers, parameters)
objects, and a space's overlap answers kept while no region is added, give what working each out again gives.

Random runs of records drawn from a few shared buffer and parameter tuples (as the rebuild shares them), with
copies, fills, launches and graph replays, captured work in graphs ``1`` and ``True``, owned buffers at
overlapping offsets and unowned pointer ranges, on two streams and two threads, are built with the shared work
and with it turned off; the dataflows (records, accesses, edges, critical path, waves, hazards) must be equal,
to the type of every value (``repr``)."""

from __future__ import annotations

import random

import pytest

from launchtrace.analysis import dataflow
from launchtrace.analysis.dataflow import _access_rows, _Space, build_dataflow
from launchtrace.model import BufferArg, LaunchRecord, Op, Site

SITE = Site("p.py", 1, "f")


def _buffers(rng: random.Random) -> tuple[BufferArg, ...]:
    out = []
    for k in range(rng.randint(0, 3)):
        if rng.random() < 0.6:
            owner, offset = rng.choice(["a", "b", "c"]), rng.choice([0, 0, 16, 32])
            out.append(BufferArg(k, "", 0x1000, (4,), "float32", rng.choice([16, 64]), owner, offset))
        else:
            ptr = rng.choice([0, 0x2000, 0x2010, 0x2040])
            out.append(BufferArg(k, rng.choice(["", "p"]), ptr, (4,), "float32", rng.choice([0, 32, 64])))
    return tuple(out)


def _with_access(buf: BufferArg, access: str) -> BufferArg:
    return BufferArg(
        buf.key, buf.name, buf.ptr, buf.shape, buf.dtype, buf.nbytes, buf.owner, buf.offset, buf.foreign, access
    )


def _run(seed: int) -> list[LaunchRecord]:
    rng = random.Random(seed)
    pool = []
    for _ in range(5):
        buffers = tuple(
            _with_access(b, rng.choice(["", "r", "w", "rw"])) if rng.random() < 0.5 else b for b in _buffers(rng)
        )
        pool.append(buffers)
    param_pool = [("x", "y", "z"), ("dst", "src"), ()]
    records = []
    for seq in range(rng.randint(1, 60)):
        buffers = rng.choice(pool)
        op = rng.choice([Op.LAUNCH, Op.LAUNCH, Op.COPY, Op.FILL, Op.GRAPH_LAUNCH])
        captured = rng.random() < 0.2 and op != Op.GRAPH_LAUNCH
        graph = rng.choice([None, 1, True, 2]) if captured or op == Op.GRAPH_LAUNCH else None
        stream = rng.choice([None, None, 7])
        start = rng.randint(0, 100)
        rec = LaunchRecord(
            op,
            rng.choice(["m.k", "m.j"]),
            (4,),
            stream,
            tuple((b.key, b.ptr) for b in buffers) if rng.random() < 0.9 else ((0, 0x2000),),
            (),
            SITE,
            params=rng.choice(param_pool),
            buffers=buffers if rng.random() < 0.85 else (),
            device=rng.choice(["cpu", "cuda:0"]),
            thread=rng.choice([1, 2]),
            start_ns=start,
            end_ns=start + rng.randint(0, 50),
            graph_id=graph,
            captured=captured,
            seq=seq,
        )
        records.append(rec)
    return records


def _built(records: list[LaunchRecord]) -> str:
    flow = build_dataflow(records)
    return repr((flow, flow.overlap_candidates()))


@pytest.mark.parametrize("seed", range(150))
def test_shared_access_rows_and_kept_overlaps_change_no_dataflow(seed: int, monkeypatch) -> None:
    records = _run(seed)
    dataflow._ACCESS_ROWS.clear()
    shared = _built(records)
    again = _built(records)  # every answer taken from what the first build kept
    with monkeypatch.context() as m:
        m.setattr(dataflow, "_shared_access_rows", _access_rows)
        m.setattr(dataflow, "_KEEP_FOUND", -1)
        fresh = _built(records)
    assert shared == fresh
    assert again == fresh


def test_an_overlap_answer_is_worked_out_again_when_a_region_is_added() -> None:
    space = _Space()
    a = dataflow.Region("ptr", 0, 64, "a")
    space.state(a)
    assert [s.region for s in space.overlapping(a)] == [a]
    b = dataflow.Region("ptr", 32, 96, "b")
    space.state(b)  # overlaps a: a's kept answer is stale
    assert [s.region for s in space.overlapping(a)] == [a, b]
    assert [s.region for s in space.overlapping(a)] == [s.region for s in space._overlapping(a)]


def test_graph_one_and_true_are_two_spaces() -> None:
    """``captured:1:`` and ``captured:True:`` name different spaces: equal keys must not share rows."""
    buffers = (BufferArg(0, "x", 0x1000, (4,), "float32", 16, "a", 0),)
    one = LaunchRecord(
        Op.LAUNCH, "m.k", (4,), None, ((0, 0x1000),), (), SITE, ("x",), buffers, captured=True, graph_id=1
    )
    true = LaunchRecord(
        Op.LAUNCH, "m.k", (4,), None, ((0, 0x1000),), (), SITE, ("x",), buffers, captured=True, graph_id=True
    )
    dataflow._ACCESS_ROWS.clear()
    spaces = [dataflow._accesses_of(0, rec, {})[0].region.space for rec in (one, true, one)]
    assert spaces == ["captured:1:owner:a", "captured:True:owner:a", "captured:1:owner:a"]
