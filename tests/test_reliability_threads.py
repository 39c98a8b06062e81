"""Eight threads launching real Warp kernels (CPU) under nested scopes, exported through the real pipeline and
read back: every launch arrives exactly once, under its own thread's scopes, with folding on (as users run it)
and off.
"""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path

import pytest

import launchtrace
import launchtrace.capture as capture
import launchtrace.export as export
from launchtrace.rebuild import rebuild
from launchtrace.sources.files import read_spans

THREADS = 8
BATCHES = 3
LAUNCHES = 40  # per batch


def worker(index: int, barrier: threading.Barrier, errors: list) -> None:
    import warp as wp

    import warp_programs

    try:
        x = wp.zeros(16, dtype=float, device="cpu")
        y = wp.zeros(16, dtype=float, device="cpu")
        barrier.wait()
        with launchtrace.scope(f"worker-{index}", worker=index):
            for b in range(BATCHES):
                with launchtrace.scope(f"batch-{b}"):
                    for _ in range(LAUNCHES):
                        # the scalar names the thread and batch, so each record says where it must land
                        wp.launch(warp_programs.scale, dim=16, inputs=[x, y, float(index * 100 + b)], device="cpu")
    except Exception as exc:  # reported by the test, not swallowed
        errors.append(exc)


@pytest.mark.parametrize("fold", [True, False])
def test_eight_threads_under_nested_scopes_every_launch_arrives_once_in_its_scope(
    fold: bool, warp_cpu, tmp_path: Path
) -> None:
    import warp_programs

    path = tmp_path / "threads.jsonl"
    warp_programs.Sim().step()  # compile outside the threads
    export.start_export(file_path=str(path), fold=fold, export_interval_s=0.05, truncate=True)
    try:
        barrier = threading.Barrier(THREADS)
        errors: list = []
        threads = [threading.Thread(target=worker, args=(i, barrier, errors)) for i in range(THREADS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        final = export.stop_export(30)
    finally:
        capture.uninstrument()
    assert not errors
    assert final.dropped == 0
    read = read_spans(path)
    assert not read.problems
    rebuilt = rebuild(read.spans)
    where: Counter = Counter()
    for data in rebuilt.traces.values():
        for r in data.records:
            if r.kernel.endswith(".scale"):
                (_, value), *_ = [kv for kv in r.scalars if r.arg_name(kv[0]) == "s"]
                s = int(value)
                where[(s // 100, s % 100, data.scope_path(r.scope_id))] += 1
    expected = {(i, b, (f"worker-{i}", f"batch-{b}")): LAUNCHES for i in range(THREADS) for b in range(BATCHES)}
    assert dict(where) == expected
    # one trace per outermost scope instance: one per thread, each holding only its own thread's records
    assert len(rebuilt.traces) == THREADS
    for data in rebuilt.traces.values():
        assert len({r.thread for r in data.records}) == 1
