"""Dataflow: read/write edges, critical path, overlap candidates and hazards."""

from __future__ import annotations

import dataclasses
import threading

import numpy as np
import pytest
import warp as wp

from launchtrace.analysis.dataflow import EdgeKind, build_dataflow, find_hazards
from launchtrace.capture import bus
from launchtrace.model import BufferArg, LaunchRecord, Site
from launchtrace.sources.loading import trace_from_events
from launchtrace.testing import trace_launches
from test_analysis_programs import DEVICE, N, Sim, add, busy, run_program, scale


def _edges(flow) -> set[tuple[int, int, str, str]]:
    return {(e.src, e.dst, str(e.kind), e.buffer) for e in flow.edges}


def test_the_program_edges_follow_reads_and_writes() -> None:
    flow = build_dataflow(run_program("base", 2))
    # step: 0 scale x->tmp, 1 add tmp,v->out, 2 copy out->x; then 3, 4, 5 again
    assert _edges(flow) == {
        (0, 1, "RAW", "sim.tmp"),
        (1, 2, "RAW", "sim.out"),
        (0, 2, "WAR", "sim.x"),  # the copy overwrites what the scale read
        (2, 3, "RAW", "sim.x"),
        (0, 3, "WAW", "sim.tmp"),
        (1, 3, "WAR", "sim.tmp"),
        (3, 4, "RAW", "sim.tmp"),
        (1, 4, "WAW", "sim.out"),
        (2, 4, "WAR", "sim.out"),
        (4, 5, "RAW", "sim.out"),
        (3, 5, "WAR", "sim.x"),
        (2, 5, "WAW", "sim.x"),
    }
    assert flow.hazards == ()
    assert not any(a.inferred for a in flow.accesses)  # capture filled every access


def test_the_critical_path_follows_measured_durations() -> None:
    sim = Sim()
    with trace_launches() as trace:
        wp.launch(busy, dim=N, inputs=[sim.x, 20000], outputs=[sim.tmp], device=DEVICE)  # slow
        wp.launch(scale, dim=N, inputs=[sim.v, 2.0], outputs=[sim.tmp2], device=DEVICE)  # fast, independent
        wp.launch(add, dim=N, inputs=[sim.tmp, sim.tmp2], outputs=[sim.out], device=DEVICE)
    records = trace.to_data().records
    assert records[0].duration_ns > 10 * records[1].duration_ns
    flow = build_dataflow(trace.to_data())
    assert flow.critical_path == (0, 2)
    assert flow.critical_ns == records[0].duration_ns + records[2].duration_ns
    assert flow.waves == ((0, 1), (2,))
    assert flow.overlap_candidates() == [(0, 1)]  # independent, yet issued back to back on one thread


def test_views_of_an_unowned_array_connect_by_pointer_range() -> None:
    big = wp.array(np.zeros(4 * N, dtype=np.float32), dtype=float, device=DEVICE)
    src = wp.array(np.ones(N, dtype=np.float32), dtype=float, device=DEVICE)
    with trace_launches() as trace:
        wp.launch(scale, dim=N, inputs=[src, 1.0], outputs=[big[0:N]], device=DEVICE)  # writes bytes 0..256
        wp.launch(scale, dim=N, inputs=[big[N // 2 : N + N // 2], 1.0], outputs=[src], device=DEVICE)  # overlaps
        wp.launch(scale, dim=N, inputs=[big[2 * N : 3 * N], 1.0], outputs=[src], device=DEVICE)  # disjoint
    flow = build_dataflow(trace.to_data())
    raw = {(e.src, e.dst) for e in flow.edges if e.kind == EdgeKind.RAW}
    assert (0, 1) in raw and (0, 2) not in raw
    assert all(a.region.space == "ptr" for a in flow.accesses)


def _rec(kernel: str, stream: int | None, **bufs: str) -> LaunchRecord:
    buffers = tuple(
        BufferArg(k, name, 0x1000 * (k + 1), (16,), "float32", 64, owner=name, offset=0, access=mode)
        for k, (name, mode) in enumerate(bufs.items())
    )
    return LaunchRecord(
        "launch",
        kernel,
        (16,),
        stream,
        tuple((b.key, b.ptr) for b in buffers),
        (),
        Site("p.py", 1, "f"),
        params=tuple(bufs),
        buffers=buffers,
        device="cuda:0",
    )


def test_two_streams_touching_one_buffer_is_a_hazard() -> None:
    """Hand-built records: two CUDA streams cannot run on this CPU-only machine."""
    records = [
        _rec("m.produce", 0x10, x="w"),
        _rec("m.consume", 0x20, x="r", y="w"),  # other stream, nothing orders it after the producer
        _rec("m.later", 0x10, y="r"),  # same buffer y, but back on stream 0x10 after the consumer: also unordered
        _rec("m.same_stream", 0x10, x="w"),  # WAW with produce on its own stream: ordered, no hazard
    ]
    flow = build_dataflow(records)
    hazards = {(h.edge.src, h.edge.dst, str(h.edge.kind)) for h in flow.hazards}
    assert hazards == {(0, 1, "RAW"), (1, 2, "RAW"), (1, 3, "WAR")}
    assert "stream 16" in flow.hazards[0].reason and "stream 32" in flow.hazards[0].reason


def test_find_hazards_is_the_dataflows_hazards_and_skips_one_lane() -> None:
    """``find_hazards`` (the report's) gives ``build_dataflow(...).hazards`` and builds nothing for one lane."""
    two = [
        _rec("m.produce", 0x10, x="w"),
        _rec("m.consume", 0x20, x="r", y="w"),
        _rec("m.later", 0x10, y="r"),
        _rec("m.same_stream", 0x10, x="w"),
    ]
    assert find_hazards(two) == build_dataflow(two).hazards and len(find_hazards(two)) == 3
    one = [dataclasses.replace(r, stream=0x10) for r in two]  # the same accesses on one stream: ordered
    assert build_dataflow(one).edges  # it has edges, all within the lane
    assert find_hazards(one) == build_dataflow(one).hazards == ()
    assert find_hazards([]) == ()


def test_an_unordered_write_after_read_on_two_cpu_threads_is_a_hazard() -> None:
    """Hand-built timings: two host threads whose calls overlapped in time (not reproducible on demand)."""
    site = Site("p.py", 1, "f")
    reader = LaunchRecord(
        "launch",
        "m.read",
        (4,),
        None,
        ((0, 0x100),),
        (),
        site,
        params=("x",),
        buffers=(BufferArg(0, "x", 0x100, (4,), "float32", 16, access="r"),),
        device="cpu",
        thread=1,
        start_ns=100,
        end_ns=300,
    )
    writer = LaunchRecord(
        "launch",
        "m.write",
        (4,),
        None,
        ((0, 0x100),),
        (),
        site,
        params=("x",),
        buffers=(BufferArg(0, "x", 0x100, (4,), "float32", 16, access="w"),),
        device="cpu",
        thread=2,
        start_ns=200,
        end_ns=400,
    )
    flow = build_dataflow([reader, writer])
    assert [(h.edge.kind, h.edge.src, h.edge.dst) for h in flow.hazards] == [(EdgeKind.WAR, 0, 1)]
    later = dataclasses.replace(writer, start_ns=500, end_ns=600)
    assert build_dataflow([reader, later]).hazards == ()  # one after the other: ordered by time


def test_two_cpu_threads_racing_on_one_buffer_is_a_hazard() -> None:
    """Real threads on the CPU device: Warp releases the GIL while a CPU kernel runs, so a reader and a
    writer of ``sim.x`` started together overlap (each runs for tens of milliseconds). Whether they did is
    read back from the records, and the hazard must be reported exactly when they did."""
    sim = Sim()
    barrier = threading.Barrier(2)

    def reader() -> None:
        barrier.wait()
        wp.launch(busy, dim=N, inputs=[sim.x, 20000], outputs=[sim.tmp], device=DEVICE)

    def writer() -> None:
        barrier.wait()
        wp.launch(busy, dim=N, inputs=[sim.v, 20000], outputs=[sim.x], device=DEVICE)

    with trace_launches():  # holds the instrumentation; the subscription below sees every thread
        sub = bus.subscribe()
        threads = [threading.Thread(target=reader, name="reader"), threading.Thread(target=writer, name="writer")]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        sub.close()
        trace = trace_from_events(sub.drain())
    a, b = trace.records
    assert {a.thread_name, b.thread_name} == {"reader", "writer"}
    overlapped = a.start_ns < b.end_ns and b.start_ns < a.end_ns
    flow = build_dataflow(trace)
    if overlapped:  # the usual case
        assert [(h.edge.src, h.edge.dst, h.edge.buffer) for h in flow.hazards] == [(0, 1, "sim.x")]
        assert str(flow.hazards[0].edge.kind) in ("RAW", "WAR")  # which one finished first decides the order
        assert "reader" in flow.hazards[0].reason and "ran at the same time" in flow.hazards[0].reason
    else:  # one ran wholly before the other: ordered by time, no hazard
        assert flow.hazards == ()


def test_unknown_access_is_assumed_read_and_write() -> None:
    site = Site("p.py", 1, "f")
    a = LaunchRecord("launch", "m.a", (4,), None, ((0, 0x100),), (), site)
    b = LaunchRecord("launch", "m.b", (4,), None, ((0, 0x100),), (), site)
    flow = build_dataflow([a, b])
    assert {str(e.kind) for e in flow.edges} == {"RAW", "WAW", "WAR"}
    assert all(acc.inferred and acc.mode == "rw" for acc in flow.accesses)


@pytest.mark.gpu
def test_two_real_cuda_streams_sharing_a_buffer_are_a_hazard() -> None:
    """Needs a CUDA device: skipped on the CPU-only machines this project is tested on."""
    if not wp.is_cuda_available():
        pytest.skip("no CUDA device")
    device = "cuda:0"
    x = wp.zeros(N, dtype=float, device=device)
    y = wp.zeros(N, dtype=float, device=device)
    s1, s2 = wp.Stream(device), wp.Stream(device)
    with trace_launches() as trace:
        wp.launch(scale, dim=N, inputs=[y, 2.0], outputs=[x], device=device, stream=s1)  # writes x
        wp.launch(scale, dim=N, inputs=[x, 3.0], outputs=[y], device=device, stream=s2)  # reads x: unordered
    wp.synchronize_device(device)
    flow = build_dataflow(trace.to_data())
    assert [(h.edge.src, h.edge.dst) for h in flow.hazards] == [(0, 1), (0, 1)]  # RAW on x, WAR on y
    assert {str(h.edge.kind) for h in flow.hazards} == {"RAW", "WAR"}
