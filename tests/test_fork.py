"""A ``fork``ed child (multiprocessing, fork start method) exports on its own: the parent's pending spans are
exported once, by the parent, never by the child, and nothing of either is lost.

Real Warp kernels on the CPU, the real pipeline, and both sinks: the JSON Lines file (shared by both
processes, appended line by line) and OTLP/gRPC into a real ``launchtrace collect`` receiver on loopback (a
gRPC channel does not survive ``fork``: the child must build its own).

Each process builds its ``Sim`` while exporting, so each exports, besides its scoped steps, exactly the fills
and the copy Warp issues inside that ``Sim()`` (internal records), counted against
``warp_programs.internal_work`` of the same setup.
"""

from __future__ import annotations

import multiprocessing
import os
from collections import Counter
from pathlib import Path

import pytest

import launchtrace
import launchtrace.capture as capture
import launchtrace.export as export
from launchtrace import conventions as C
from launchtrace.receiver.collect import Collector
from launchtrace.sources.files import read_spans
from launchtrace.sources.rebuild import rebuild

PARENT_STEPS = 30  # pending in the parent's queue at fork time
CHILD_STEPS = 7
RECORDS_PER_STEP = 5


def _child(queue) -> None:
    import warp_programs

    sim = warp_programs.Sim(seed=2)
    for i in range(CHILD_STEPS):
        with launchtrace.scope("child-step", i=i):
            sim.step()
    queue.put((os.getpid(), export.stats().exported))
    # no flush here: the finalizer the fork hook installs must export at the child's exit


def records_by_pid(spans) -> dict[int, list]:
    """Launch records per process in issue order, folded summaries expanded (rebuild), by resource pid."""
    by_trace_pid = {s.trace_id.hex(): dict(s.resource).get("process.pid") for s in spans}
    out: dict[int, list] = {}
    for trace_id, data in rebuild(spans).traces.items():
        out.setdefault(by_trace_pid[trace_id], []).extend(data.records)
    return {pid: sorted(records, key=lambda r: r.seq) for pid, records in out.items()}


@pytest.mark.parametrize("sink", ["file", "otlp-grpc"])
def test_forked_child_exports_its_own_spans_and_the_parents_pending_spans_arrive_once(
    sink: str, warp_cpu, tmp_path: Path
) -> None:
    import warp_programs

    warp_programs.Sim().step()  # compile before the fork
    setup = warp_programs.internal_work(warp_programs.Sim)  # what each Sim() issues inside Warp
    assert setup
    path = tmp_path / "spans.jsonl"
    collector = None
    if sink == "file":
        settings = {"file_path": str(path), "truncate": True}
    else:
        collector = Collector(path, grpc_port=0, http_port=None).start()
        settings = {"endpoint": f"http://127.0.0.1:{collector.grpc_port}", "protocol": "grpc"}
    export.start_export(export_interval_s=60.0, **settings)  # the parent exports only when stopped
    try:
        sim = warp_programs.Sim(seed=1)
        for i in range(PARENT_STEPS):
            with launchtrace.scope("parent-step", i=i):
                sim.step()
        ctx = multiprocessing.get_context("fork")
        queue = ctx.Queue()
        child = ctx.Process(target=_child, args=(queue,))
        child.start()
        child_pid, _ = queue.get(timeout=120)
        child.join(120)
        assert child.exitcode == 0
        final = export.stop_export(30)
    finally:
        capture.uninstrument()
        if collector is not None:
            collector.stop()
    assert final.dropped == 0 and final.exported == final.built
    read = read_spans(path)
    assert not read.problems
    records = records_by_pid(read.spans)
    assert set(records) == {os.getpid(), child_pid}
    for pid, steps in ((os.getpid(), PARENT_STEPS), (child_pid, CHILD_STEPS)):
        assert len([r for r in records[pid] if not r.internal]) == steps * RECORDS_PER_STEP
        assert [(str(r.op), r.kernel) for r in records[pid] if r.internal] == setup
    scope_names = Counter(
        (dict(s.resource).get("process.pid"), s.name) for s in read.spans if s.attribute(C.SCOPE_KIND) == "user"
    )
    assert scope_names == {(os.getpid(), "parent-step"): PARENT_STEPS, (child_pid, "child-step"): CHILD_STEPS}
    ids = [s.span_id for s in read.spans]
    assert len(ids) == len(set(ids))  # nothing exported twice, no id reused across the two processes
