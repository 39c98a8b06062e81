"""Eight threads launching real Warp kernels (CPU) under nested scopes, exported through the real pipeline and
read back: every launch arrives exactly once, under its own thread's scopes, with folding on (as users run it)
and off. Each thread also allocates its arrays while exporting: the fills Warp issues inside ``wp.zeros``
(internal records) arrive exactly once too, in that thread's own unscoped step root.
"""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path

import pytest

import launchtrace
import launchtrace.capture as capture
import launchtrace.export as export
from launchtrace.export.spanbuilder import STEP_SPAN_NAME
from launchtrace.sources.files import read_spans
from launchtrace.sources.rebuild import rebuild

THREADS = 8
BATCHES = 3
LAUNCHES = 40  # per batch


def buffers() -> tuple:
    """A worker's arrays (outside any scope: Warp's fills land in the thread's step root)."""
    import warp as wp

    return wp.zeros(16, dtype=float, device="cpu"), wp.zeros(16, dtype=float, device="cpu")


def worker(index: int, barrier: threading.Barrier, errors: list) -> None:
    import warp as wp

    import warp_programs

    try:
        x, y = buffers()
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
    setup = warp_programs.internal_work(buffers)  # what buffers() issues inside Warp, in order
    assert setup
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
    workers = [d for d in rebuilt.traces.values() if d.attributes["root"] != STEP_SPAN_NAME]
    assert sorted(d.attributes["root"] for d in workers) == sorted(f"worker-{i}" for i in range(THREADS))
    for data in workers:
        assert len({r.thread for r in data.records}) == 1 and not any(r.internal for r in data.records)
    # the rest: each thread's own allocations, outside any scope, each fill once
    setup_of: dict[int, list] = {}
    for data in rebuilt.traces.values():
        if data.attributes["root"] == STEP_SPAN_NAME:
            assert len({r.thread for r in data.records}) == 1 and all(r.scope_id is None for r in data.records)
            for r in data.records:
                setup_of.setdefault(r.thread, []).append(r)
    assert set(setup_of) == {data.records[0].thread for data in workers}
    for records in setup_of.values():
        records.sort(key=lambda r: r.seq)
        assert all(r.internal for r in records) and [(str(r.op), r.kernel) for r in records] == setup


REUSE_PROGRAM = """
import threading
import warp as wp
wp.config.quiet = True

@wp.kernel
def k(a: wp.array(dtype=float)):
    i = wp.tid()
    a[i] = 1.0

a = wp.zeros(8, dtype=float)
wp.launch(k, dim=8, inputs=[a])

def work():
    wp.launch(k, dim=8, inputs=[a])

idents = []
for n in range(6):  # one after another: the C library hands each new thread the ended one's ident
    t = threading.Thread(target=work, name=f"w{n}")
    t.start()
    idents.append(t.ident)
    t.join()
print(len(set(idents)))
"""


def test_a_thread_that_reuses_an_ended_threads_ident_keeps_its_own_name_and_id(tmp_path: Path) -> None:
    """Each launch names the thread that issued it, although the six threads share one or two idents and their
    events wait in the ring until the export worker turns them into records (before: ``w5, w3, w3, w3, w5, w5``
    for ``w0 .. w5``: a pending event took the name of whichever thread held its ident by then)."""
    import subprocess
    import sys

    script, out = tmp_path / "reuse.py", tmp_path / "reuse.jsonl"
    script.write_text(REUSE_PROGRAM, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "launchtrace", "run", "--out", str(out), str(script)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert int(done.stdout.split()[-1]) < 6  # glibc reuses an ended thread's ident: the case under test
    rebuilt = rebuild(read_spans(out).spans)
    mine = [r for t in rebuilt.traces.values() for r in t.records if r.kernel == "__main__.k"]
    records = sorted(mine, key=lambda r: r.seq)
    assert [r.thread_name for r in records] == ["MainThread", "w0", "w1", "w2", "w3", "w4", "w5"]
    assert len({r.thread for r in records}) == 7  # seven threads, seven thread.id values
