"""A CPU graph capture (Warp 1.19) and its replays: records and spans say what ran, and when.

Captured work did not run when it was issued; each ``wp.capture_launch`` ran all of it. The oracle is the
program's own result: the graph adds ``x`` into ``acc`` twice per replay, so after 5 replays ``acc`` holds
``10 * x`` exactly when 5 replays of a 2-launch graph ran and the capture itself ran nothing. Every check
below follows that arithmetic, live (``trace_launches``) and through the real exporter, the file sink and
:func:`launchtrace.sources.loading.load_traces`, with the capture and each replay in different traces.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import warp as wp

import launchtrace
import launchtrace.capture as capture
import launchtrace.export as export
from launchtrace import conventions as C
from launchtrace.sources.files import read_spans
from launchtrace.sources.loading import load_traces
from launchtrace.testing import trace_launches
from launchtrace.topology import captured_graphs, replays

N = 16
REPLAYS = 5


@wp.kernel
def accumulate(x: wp.array(dtype=float), acc: wp.array(dtype=float)):
    i = wp.tid()
    acc[i] = acc[i] + x[i]


@pytest.fixture(autouse=True)
def _clean(warp_cpu):
    yield
    export.stop_export(20)
    launchtrace.disown("g")
    capture.uninstrument()


class Program:
    """Two launches of ``accumulate`` and a fill of ``scratch``, captured into one CPU graph."""

    def __init__(self) -> None:
        self.x = wp.array(np.arange(N, dtype=np.float32), dtype=float, device="cpu")
        self.acc = wp.zeros(N, dtype=float, device="cpu")
        self.scratch = wp.zeros(N, dtype=float, device="cpu")
        wp.launch(accumulate, dim=N, inputs=[self.x, self.acc], device="cpu")  # compiled before the capture
        self.acc.zero_()
        self.capture_lines: list[int] = []

    def capture(self) -> wp.Graph:
        with wp.ScopedCapture(device="cpu") as cap:
            self.capture_lines.append(sys._getframe().f_lineno + 1)
            wp.launch(accumulate, dim=N, inputs=[self.x, self.acc], device="cpu")
            self.capture_lines.append(sys._getframe().f_lineno + 1)
            self.scratch.fill_(2.0)
            self.capture_lines.append(sys._getframe().f_lineno + 1)
            wp.launch(accumulate, dim=N, inputs=[self.x, self.acc], device="cpu")
        return cap.graph

    def check_ran(self, replays_done: int) -> None:
        np.testing.assert_array_equal(self.acc.numpy(), 2 * replays_done * np.arange(N, dtype=np.float32))


def test_live_records_tell_the_capture_from_its_replays(instrumented) -> None:
    prog = Program()
    with trace_launches() as captured:
        graph = prog.capture()
    prog.check_ran(0)  # the capture ran nothing
    with trace_launches() as replayed:
        for _ in range(REPLAYS):
            wp.capture_launch(graph)
    prog.check_ran(REPLAYS)

    assert [r.site.line for r in captured] == prog.capture_lines
    assert all(r.captured and r.op != "graph_launch" for r in captured)
    (graph_id,) = {r.graph_id for r in captured}
    assert graph_id is not None and graph_id == capture.warp.graph_id_of(graph)
    assert captured.captured_graph(graph_id) == list(captured)
    assert not replayed.captured_graph(graph_id)  # replaying captures nothing

    runs = replayed.replays(graph_id)
    assert len(runs) == len(replayed) == REPLAYS
    assert [r.graph_replay for r in runs] == list(range(1, REPLAYS + 1))
    assert {r.graph_launches for r in runs} == {3}
    assert not any(r.captured for r in runs)
    # expanded: what the replays ran is the captured records, once each per replay
    ran = [rec for run in runs for rec in captured.captured_graph(run.graph_id)]
    assert sum(r.kernel.endswith(".accumulate") for r in ran) == 2 * REPLAYS  # acc == 10 x, as checked


def test_replay_ordinals_count_replays_nobody_recorded(instrumented) -> None:
    prog = Program()
    graph = prog.capture()  # nobody listening: the graph still knows its size
    wp.capture_launch(graph)
    wp.capture_launch(graph)
    with trace_launches() as trace:
        wp.capture_launch(graph)
    prog.check_ran(3)
    (run,) = trace.replays()
    assert (run.graph_replay, run.graph_launches) == (3, 3)


def test_graph_ids_are_distinct_per_graph_and_large_enough_to_be_unique_across_processes(instrumented) -> None:
    prog = Program()
    ids = {capture.warp.graph_id_of(prog.capture()) for _ in range(3)}
    assert len(ids) == 3 and None not in ids
    assert all(0 < i < 2**62 for i in ids)
    assert len({i >> 32 for i in ids}) == 1  # one process prefix, a counter below it


@pytest.mark.parametrize("fold", [False, True], ids=["unfolded", "folded"])
def test_exported_capture_and_replays_survive_a_file_and_rebuild_across_traces(tmp_path: Path, fold: bool) -> None:
    """Capture in one scope, replays in the steps of another and in separate scopes; folding the 5
    consecutive replays (``fold=True``: from the first repeat) keeps each replay's ordinal."""
    prog = Program()
    launchtrace.own(prog, "g")
    path = tmp_path / "graph.jsonl"
    export.start_export(file_path=str(path), truncate=True, fold=fold)
    with launchtrace.scope("capture"):
        graph = prog.capture()
    with launchtrace.scope("loop"):
        for _ in range(REPLAYS):
            wp.capture_launch(graph)
    for step in range(2):
        with launchtrace.scope("step", step=step):
            wp.capture_launch(graph)
    final = export.stop_export(20)
    assert final.dropped == 0
    prog.check_ran(REPLAYS + 2)

    read = read_spans(path)
    assert not read.problems
    spans = [s for s in read.spans if s.attribute(C.OP) or s.attribute(C.FOLD_COUNT)]
    captured_spans = [s for s in spans if s.attribute(C.CAPTURED)]
    (graph_id,) = {s.attribute(C.GRAPH_ID) for s in captured_spans}
    assert len(captured_spans) == 3
    assert all(s.attribute(C.GRAPH_REPLAY) is None for s in captured_spans)
    replay_spans = [s for s in spans if s.attribute(C.OP) == "graph_launch" and not s.attribute(C.FOLD_COUNT)]
    assert all(s.attribute(C.GRAPH_ID) == graph_id and s.attribute(C.GRAPH_LAUNCHES) == 3 for s in replay_spans)
    assert not any(s.attribute(C.CAPTURED) for s in replay_spans)
    if fold:
        assert len(replay_spans) == 2  # the loop's 5 are one summary span, each step's replay its own

    traces = load_traces(path)
    names = [t.attributes.get("launchtrace.root.name") for t in traces]
    records = [rec for trace in traces for rec in trace.records]
    assert len(traces) >= 4, names  # capture, loop and two steps: four traces
    graphs = captured_graphs(records)
    assert list(graphs) == [graph_id]
    kept = graphs[graph_id]
    assert [r.site.line for r in kept] == prog.capture_lines
    assert [r.kernel for r in kept] == [f"{__name__}.accumulate", "wp.fill", f"{__name__}.accumulate"]
    owners = [[(b.name, b.owner) for b in r.buffers] for r in kept]
    assert owners[0] == [("x", "g.x"), ("acc", "g.acc")] and owners[1] == [("array", "g.scratch")]
    runs = replays(records, graph_id)
    assert [r.graph_replay for r in runs] == list(range(1, REPLAYS + 3))
    assert all(r.graph_launches == len(kept) for r in runs)
    ran = [rec for run in runs for rec in graphs[run.graph_id]]
    assert sum(r.kernel.endswith("accumulate") for r in ran) == 2 * (REPLAYS + 2)  # acc == 14 x, as checked


def test_a_captured_sparse_product_is_warps_own_work_and_each_replay_runs_it(instrumented) -> None:
    """``warp.sparse.bsr_mv`` under a CPU capture: its launch is internal and captured; ``graph_launches``
    counts it although ``trace_launches()`` (user work only) leaves it out of the captured records."""
    import warp.sparse as sparse

    n = 16
    diagonal = wp.array(np.arange(n, dtype=np.int32), device="cpu")
    matrix = sparse.bsr_from_triplets(n, n, diagonal, diagonal, wp.full(n, 2.0, dtype=float, device="cpu"))
    x = wp.array(np.ones(n, dtype=np.float32), device="cpu")
    y = wp.zeros(n, dtype=float, device="cpu")
    sparse.bsr_mv(matrix, x, y)  # compiled outside the capture; y = A x = 2
    with trace_launches(include_warp=True) as everything, trace_launches() as user:
        with wp.ScopedCapture(device="cpu") as cap:
            sparse.bsr_mv(matrix, x, y, alpha=1.0, beta=1.0)  # y += A x, on each replay
        np.testing.assert_array_equal(y.numpy(), np.full(n, 2.0, dtype=np.float32))  # nothing ran yet
        for _ in range(REPLAYS):
            wp.capture_launch(cap.graph)
    np.testing.assert_array_equal(y.numpy(), np.full(n, 2.0 * (1 + REPLAYS), dtype=np.float32))
    graph_id = capture.warp.graph_id_of(cap.graph)
    (kept,) = everything.captured_graph(graph_id)
    assert kept.internal and kept.captured and kept.op == "launch" and "bsr_mv" in kept.kernel
    assert user.captured_graph(graph_id) == []
    assert [(r.graph_replay, r.graph_launches) for r in user.replays(graph_id)] == [
        (i, 1) for i in range(1, REPLAYS + 1)
    ]


def test_a_kernel_run_only_by_replays_counts_what_ran_and_claims_no_time(instrumented) -> None:
    """Its records' times are those of the capture calls, when nothing ran: ``summary`` read ``count 10, total
    0.561 ms, mean 560.9 us`` (one capture call's time over ten runs). Now the count is what ran and the time
    stays in ``wp.capture_launch``'s row, where the replays were timed."""
    import math

    from launchtrace.analysis.replays import with_replay_counts
    from launchtrace.analysis.stats import kernel_stats
    from launchtrace.cli.summary import _kernel_lines

    prog = Program()
    with trace_launches() as trace:
        graph = prog.capture()
        for _ in range(REPLAYS):
            wp.capture_launch(graph)
    prog.check_ran(REPLAYS)
    data = trace.to_data()
    rows = {r.kernel: r for r in with_replay_counts(kernel_stats([data]), [data])}
    acc = next(r for k, r in rows.items() if k.endswith(".accumulate"))
    assert acc.count == 2 * REPLAYS and acc.replayed and acc.total_ns == 0
    assert math.isnan(acc.mean_ns) and math.isnan(acc.max_ns) and acc.steps == 0
    replays = rows["wp.capture_launch"]
    assert replays.count == REPLAYS and replays.total_ns > 0 and not replays.replayed
    text = "\n".join(_kernel_lines(list(rows.values())))
    assert f"- ran only in graph replays ({acc.kernel}, wp.fill)" in text  # the fill was captured too
    line = next(x for x in text.splitlines() if x.split()[0] == acc.kernel)
    assert line.split()[2:5] == [str(2 * REPLAYS), "0.000", "-"]


def test_each_replay_carries_a_fingerprint_of_what_its_graph_holds(instrumented, tmp_path: Path) -> None:
    """A step that replays a graph captured with another dim was the same topology (``alert``: ``no alerts``,
    ``check-static``: ``static``); graphs of equal content (captured again each step) share the fingerprint."""
    prog = Program()
    with trace_launches() as trace:
        first, again = prog.capture(), prog.capture()
        with wp.ScopedCapture(device="cpu") as cap:
            wp.launch(accumulate, dim=N // 2, inputs=[prog.x, prog.acc], device="cpu")
        for graph in (first, again, cap.graph):
            wp.capture_launch(graph)
    runs = [r for r in trace.to_data().records if r.op == "graph_launch"]
    a, b, c = (dict(r.scalars)[0] for r in runs)
    assert a == b != c and len(a) == 8 and runs[0].params == ("graph_content",)
    from launchtrace.topology import topology_key

    assert topology_key(runs[0]) == topology_key(runs[1]) != topology_key(runs[2])
