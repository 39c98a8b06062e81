"""Unscoped work in the topology diff: compared by its content, not by where the exporter closed its step roots.

The end-to-end tests run one real Warp program on the CPU device under ``launchtrace run`` twice, with the
exporter's step roots cut at other places (``LAUNCHTRACE_STEP_MAX_SPANS``, as a time window would cut them on
a slower or cold run), and diff the files through the CLI (streamed) and through ``diff_traces`` (lists). Before
this, a zero-code program that launched for longer than the one-second window failed the gate against itself.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

from launchtrace.analysis.diff import diff_traces
from launchtrace.analysis.diff_stream import diff_streamed
from launchtrace.analysis.segments import HOST_DATA, unowned_by_order
from launchtrace.analysis.unscoped import LoopIterations, UnscopedChunks, keyed_segments
from launchtrace.model import BufferArg, LaunchRecord, Site
from launchtrace.sources.each import Traces
from launchtrace.sources.loading import load_traces
from launchtrace.steps import NO_SCOPE, occurrences, split_runs

PROGRAM = """
import os, sys
import warp as wp
wp.config.quiet = True

@wp.kernel
def push(x: wp.array(dtype=float), s: float):
    i = wp.tid()
    x[i] = x[i] + s

@wp.kernel
def pull(x: wp.array(dtype=float)):
    i = wp.tid()
    x[i] = x[i] * 0.5

x = wp.zeros(64, dtype=float)
for step in range(int(sys.argv[1])):
    wp.launch(push, dim=64, inputs=[x, 1.0])
    wp.launch(pull, dim=64, inputs=[x])
    if step == int(os.environ.get("EXTRA_AT", "-1")):
        wp.launch(pull, dim=64, inputs=[x])
"""


def _launchtrace_run(script: Path, out: Path, *args: object, env: dict | None = None) -> str:
    """``launchtrace run --out OUT SCRIPT ARGS`` in a fresh process; its stderr (the closing line)."""
    done = subprocess.run(
        [sys.executable, "-m", "launchtrace", "run", "--out", str(out), str(script), *map(str, args)],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stderr


def _run(folder: Path, name: str, steps: int, step_max: int, extra_at: int = -1) -> Path:
    script = folder / "unscoped_program.py"
    script.write_text(PROGRAM, encoding="utf-8")
    out = folder / f"{name}.jsonl"
    env = {**os.environ, "LAUNCHTRACE_STEP_MAX_SPANS": str(step_max), "EXTRA_AT": str(extra_at)}
    closing = _launchtrace_run(script, out, steps, env=env)
    assert "child processes" not in closing  # one process: the closing line says nothing of children
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("unscoped")
    return {
        "a": _run(folder, "a", 1500, step_max=1000),
        "b": _run(folder, "b", 1500, step_max=37),  # the same launches, cut into 82 roots instead of 4
        "extra": _run(folder, "extra", 1500, step_max=1000, extra_at=700),
    }


def _roots(path: Path) -> int:
    return sum(1 for occ in occurrences(load_traces([path])) if occ.name == NO_SCOPE)


def _cli_diff(a: Path, b: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "launchtrace", "diff", str(a), str(b), "--format", "json"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def test_the_same_unscoped_launches_cut_into_other_roots_diff_as_equal(runs: dict[str, Path]) -> None:
    assert _roots(runs["a"]) < _roots(runs["b"])  # the exporter did cut them differently
    listed = diff_traces(load_traces([runs["a"]]), load_traces([runs["b"]]), timing=False)
    assert listed.equal, listed.counts
    done = _cli_diff(runs["a"], runs["b"])
    assert done.returncode == 0, done.stdout[-2000:]


def test_one_inserted_unscoped_launch_is_one_inserted_entry(runs: dict[str, Path]) -> None:
    for other in ("a", "b"):  # against the same cut and against another one
        listed = diff_traces(load_traces([runs[other]]), load_traces([runs["extra"]]), timing=False)
        assert listed.counts["inserted"] == 1 and listed.counts["removed"] == 0, (other, listed.counts)
        assert listed.counts["changed"] == 0
        entries = [e for seg in listed.segments for e in seg.entries]
        assert [e.record.kernel for e in entries] == ["__main__.pull"]
    assert _cli_diff(runs["a"], runs["extra"]).returncode == 1


def test_the_stream_and_the_lists_give_the_same_segments(runs: dict[str, Path]) -> None:
    for a, b in (("a", "b"), ("b", "extra"), ("extra", "a")):
        streamed = diff_streamed((Traces([runs[a]]), Traces([runs[b]])))
        assert streamed is not None
        listed = diff_traces(load_traces([runs[a]]), load_traces([runs[b]]))
        assert repr(streamed[0].segments) == repr(listed.segments)
        assert repr(streamed[0].timing) == repr(listed.timing)  # iterations numbered through the roots
        assert streamed[0].warmup == listed.warmup


def test_the_timing_has_a_step_per_loop_iteration_however_the_roots_were_cut(runs: dict[str, Path]) -> None:
    """1,500 iterations of ``push``, ``pull``: 1,500 steps on both sides (less the warm-up), where the exporter's
    4 and 82 roots were the steps before, and ``push``'s row rests on them."""
    result = diff_traces(load_traces([runs["a"]]), load_traces([runs["b"]]))
    warm = {w.side: w.steps for w in result.warmup if w.scope == NO_SCOPE}
    row = next(t for t in result.timing if t.kind == "kernel" and t.name == "__main__.push")
    assert row.scope == NO_SCOPE and row.verdict.basis == "steps-one-run"
    assert row.verdict.n_steps_a + warm.get("A", 0) == 1500
    assert row.verdict.n_steps_b + warm.get("B", 0) == 1500


# -- the chunker on its own -------------------------------------------------------------------------------------


def _rec(kernel: str, seq: int, thread: str = "MainThread") -> LaunchRecord:
    return LaunchRecord("launch", kernel, (8,), None, (), (), Site("p.py", 3, "f"), thread_name=thread, seq=seq)


def _feed(chunks: UnscopedChunks, parts: list[list[LaunchRecord]]) -> list[tuple]:
    done = []
    for part in parts:
        done += chunks.feed(part)[1]
    return [(key, tuple(r.kernel for r in recs)) for key, recs in done + chunks.finish()]


def _split(records: list[LaunchRecord], sizes: list[int]) -> list[list[LaunchRecord]]:
    parts, i = [], 0
    for n in sizes:
        parts.append(records[i : i + n])
        i += n
    return [*parts, records[i:]]


def test_chunks_do_not_depend_on_how_the_records_arrive_cut() -> None:
    stream = [_rec("init", 0)] + [_rec("ab"[k % 2], k + 1) for k in range(500)]
    whole = _feed(UnscopedChunks(16, 64), [stream])
    for sizes in ([1], [7, 30, 2], [100, 100, 100], [13] * 30):
        assert _feed(UnscopedChunks(16, 64), _split(stream, sizes)) == whole
    assert all(len(kernels) <= 64 for _, kernels in whole)
    assert len(whole) > 1 and all(kernels[0] == "a" for _, kernels in whole[1:])  # cut before the anchor, "a"


def test_chunks_realign_after_an_inserted_record() -> None:
    base = [_rec("init", 0)] + [_rec("ab"[k % 2], k + 1) for k in range(500)]
    inserted = [*base[:40], _rec("x", 10_000), *base[40:]]
    a, b = _feed(UnscopedChunks(16, 64), [base]), _feed(UnscopedChunks(16, 64), [inserted])
    differing = [i for i, (ca, cb) in enumerate(zip(a, b, strict=True)) if ca != cb]
    assert len(a) == len(b) and len(differing) == 1  # only the chunk that holds the inserted record


def test_threads_are_separate_streams_and_the_main_thread_keeps_the_plain_name() -> None:
    records = [_rec("a", 1), _rec("b", 2, "Thread-2 (worker)"), _rec("c", 3)]
    got = _feed(UnscopedChunks(16, 64), [records])
    assert got == [((NO_SCOPE, 0), ("a", "c")), (("<no scope> (Thread-2 (worker))", 0), ("b",))]
    pool = [_rec("b", 1, "ThreadPoolExecutor-1_1"), _rec("a", 2, "ThreadPoolExecutor-1_0")]
    assert _feed(UnscopedChunks(16, 64), [pool]) == [(("<no scope> (ThreadPoolExecutor-1)", 0), ("a", "b"))]


POOL_PROGRAM = """
import sys, threading
import warp as wp
wp.config.quiet = True

@wp.kernel
def fill(x: wp.array(dtype=float), v: float):
    x[wp.tid()] = v

bufs = [wp.zeros(64, dtype=float) for _ in range(2)]
swapped = sys.argv[1] == "swapped"  # which worker of the pool takes which task: the scheduler's choice
for it in range(int(sys.argv[2])):
    with wp.ScopedTimer("iteration", print=False):
        for worker in range(2):
            task = 1 - worker if swapped else worker
            extra = it == 3 and task == 0 and len(sys.argv) > 3
            def work(task=task, extra=extra):
                wp.launch(fill, dim=64, inputs=[bufs[task], float(it)])
                if extra:
                    wp.launch(fill, dim=64, inputs=[bufs[task], -1.0])
            t = threading.Thread(target=work, name=f"loader_{worker}")
            t.start()
            t.join()
"""


def test_a_pools_workers_are_one_stream_compared_by_content(tmp_path: Path) -> None:
    """Workers ``loader_0`` / ``loader_1`` of one pool taking each other's tasks in another run (as a
    ThreadPoolExecutor's idle workers do) are the same work: was ``(loader_1) #0 (only in A)`` and changed
    scalars; one more launch in a task is still one inserted entry, in the pool's stream."""
    script = tmp_path / "pool_program.py"
    script.write_text(POOL_PROGRAM, encoding="utf-8")
    runs = {}
    for name, args in (("a", ("plain", 6)), ("b", ("swapped", 6)), ("extra", ("swapped", 6, "extra"))):
        runs[name] = tmp_path / f"{name}.jsonl"
        _launchtrace_run(script, runs[name], *args)
    same = diff_traces(load_traces([runs["a"]]), load_traces([runs["b"]]), timing=False)
    assert same.equal, [(seg.name, [str(e.record) for e in seg.entries]) for seg in same.segments if seg.entries]
    assert _cli_diff(runs["a"], runs["b"]).returncode == 0
    more = diff_traces(load_traces([runs["a"]]), load_traces([runs["extra"]]), timing=False)
    assert more.counts["inserted"] == 1 and more.counts["removed"] == 0 and more.counts["changed"] == 0
    assert [seg.name for seg in more.segments if seg.entries] == ["<no scope> (loader)"]


def test_keyed_segments_places_each_chunk_where_its_first_record_was(runs: dict[str, Path]) -> None:
    segs = [s for s in occurrences(load_traces([runs["b"]])) if s.records]
    keyed = keyed_segments(segs)
    assert all(k[0] == NO_SCOPE for k in keyed)  # the program has no scope
    assert sum(len(v) for v in keyed.values()) == sum(len(s.records) for s in segs)
    assert list(keyed) == sorted(keyed, key=lambda k: k[1])


# -- host data ---------------------------------------------------------------------------------------------------


def _upload(dest: int, src: int) -> LaunchRecord:
    """``wp.array(numpy_array)`` as the capture records it: a copy from the program's host memory."""
    return LaunchRecord(
        "copy", "wp.copy", (4,), None, ((0, dest), (1, src)), (), Site("p.py", 9, "f"), api="wp.array",
        buffers=(BufferArg(0, "dest", dest, alloc="b (p.py:9)"), BufferArg(1, "src", src)),
    )  # fmt: skip


def test_the_host_data_of_wp_array_is_not_told_apart_by_address() -> None:
    # the C allocator handed the first temporary's address out again in one run and not in the other
    one = unowned_by_order([_upload(100, 7), _upload(200, 7)])
    two = unowned_by_order([_upload(300, 7), _upload(400, 8)])
    assert [r.arrays for r in one] == [r.arrays for r in two]
    assert [dict(r.arrays)[1] for r in one] == [HOST_DATA, HOST_DATA]
    plain = dataclasses.replace(_upload(100, 7), api="wp.copy")  # a user's wp.copy keeps its buffer identity
    assert dict(unowned_by_order([plain])[0].arrays)[1] == "<unowned #0>"


# -- processes that do different work ------------------------------------------------------------------------

ROLES_PROGRAM = """
import multiprocessing as mp
import sys
import time
import warp as wp
wp.config.quiet = True

@wp.kernel
def ka(a: wp.array(dtype=float)):
    i = wp.tid()
    a[i] = a[i] + 1.0

@wp.kernel
def kb(a: wp.array(dtype=float), s: float):
    i = wp.tid()
    a[i] = a[i] * s

def job(role, extra, late):
    wp.init()
    if role == late:  # the scheduler's part: which process gets going first
        time.sleep(1.0)
    a = wp.zeros(64, dtype=float)
    for step in range(6):
        with wp.ScopedTimer("step", print=False):
            if role == 0:
                wp.launch(ka, dim=64, inputs=[a])
            else:
                for _ in range(2 + extra):
                    wp.launch(kb, dim=64, inputs=[a, 0.5])

if __name__ == "__main__":
    ctx = mp.get_context("spawn")
    ps = [ctx.Process(target=job, args=(role, int(sys.argv[1]), int(sys.argv[2]))) for role in (0, 1)]
    for p in ps:
        p.start()
    for p in ps:
        p.join()
"""


def _kernels_by_run(path: Path) -> list[list[str]]:
    return [sorted({r.kernel for t in run for r in t.records}) for run in split_runs(load_traces([path]))]


def test_two_processes_that_do_different_work_pair_by_their_work_not_by_their_order(tmp_path: Path) -> None:
    """Two worker processes of one program (one launches ``ka``, the other ``kb``) write into one file, and the
    one that gets going first comes first: run k against run k paired ``ka``'s process with ``kb``'s (60
    inserted, 60 removed on an unchanged program, in 4 of 5 pairs of real runs). Here the program itself holds
    one process back, once the one, once the other."""
    script = tmp_path / "roles.py"
    script.write_text(ROLES_PROGRAM, encoding="utf-8")
    files = {}
    for name, extra, late in (("ka_first", 0, 1), ("kb_first", 0, 0), ("changed", 1, 1)):
        files[name] = tmp_path / f"{name}.jsonl"
        closing = _launchtrace_run(script, files[name], extra, late)
        # the parent launched nothing: its closing line says where the spans came from
        assert "launchtrace: 0 spans -> file" in closing and "; child processes wrote " in closing
    assert _kernels_by_run(files["ka_first"]) == [["__mp_main__.ka", "wp.zero"], ["__mp_main__.kb", "wp.zero"]]
    assert _kernels_by_run(files["kb_first"]) == [["__mp_main__.kb", "wp.zero"], ["__mp_main__.ka", "wp.zero"]]
    base, other = load_traces([files["ka_first"]]), load_traces([files["kb_first"]])
    assert diff_traces(base, other, timing=False).equal
    assert _cli_diff(files["ka_first"], files["kb_first"]).returncode == 0
    changed = diff_traces(other, load_traces([files["changed"]]), timing=False)
    assert changed.counts == {"inserted": 6, "removed": 0, "changed": 0, "moved": 0}  # one more kb in each of 6 steps


# -- the timing's loop iterations on their own ---------------------------------------------------------------


def _iterations(loops: LoopIterations, records: list[LaunchRecord]) -> list[tuple[str, int]]:
    got, last = [], {}
    for rec in records:
        name, n, begins = loops.of(rec)
        assert begins == (last.get(name) != n)  # the first record of each iteration, and only that one
        last[name] = n
        got.append((name, n))
    return got


def test_an_iteration_ends_where_a_call_comes_again() -> None:
    setup = [_rec("fill", 0), _rec("copy", 1)]
    body = [_rec(k, 2 + i) for i, k in enumerate("abcabcab")]
    got = _iterations(LoopIterations(), setup + body)
    assert [n for _, n in got] == [0, 0, 0, 0, 0, 1, 1, 1, 2, 2]  # the setup joins the first iteration
    assert {name for name, _ in got} == {NO_SCOPE}


def test_an_inner_loop_makes_each_of_its_calls_an_iteration() -> None:
    records = [_rec(k, i) for i, k in enumerate("akkkbakkkb")]
    assert [n for _, n in _iterations(LoopIterations(), records)] == [0, 0, 1, 2, 2, 2, 3, 4, 5, 5]


def test_iterations_are_counted_per_thread_and_bounded_in_calls() -> None:
    loops = LoopIterations(max_len=3)
    records = [_rec("a", 1), _rec("a", 2, "Thread-2 (worker)"), _rec("b", 3), _rec("a", 4, "Thread-2 (worker)")]
    assert _iterations(loops, records) == [
        (NO_SCOPE, 0),
        (f"{NO_SCOPE} (Thread-2 (worker))", 0),
        (NO_SCOPE, 0),
        (f"{NO_SCOPE} (Thread-2 (worker))", 1),
    ]
    distinct = [_rec(f"k{i}", 10 + i) for i in range(7)]  # a new kernel every launch: no call comes again
    assert [n for _, n in _iterations(LoopIterations(max_len=3), distinct)] == [0, 0, 0, 1, 1, 1, 2]


def _on(kernel: str, seq: int, ptr: int) -> LaunchRecord:
    buf = BufferArg(key=0, name="x", ptr=ptr, shape=(8,), dtype="float32", nbytes=32)
    return dataclasses.replace(_rec(kernel, seq), arrays=((0, ptr),), buffers=(buf,))


def test_one_line_launching_one_kernel_on_other_arrays_is_not_a_new_iteration() -> None:
    """An optimizer updating each parameter, a tinygrad jit call replaying every kernel from the line that calls
    it: one call site, one kernel, other arrays, all in one iteration; the same arrays again begin the next."""
    body = [_on("sgd", 0, 100), _on("sgd", 1, 200), _on("sgd", 2, 300)]
    again = [dataclasses.replace(r, seq=r.seq + 3) for r in body]
    assert [n for _, n in _iterations(LoopIterations(), body + again)] == [0, 0, 0, 1, 1, 1]
