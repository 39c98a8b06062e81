"""Other threads launching beside the steps (issue 25): one run per side cannot vouch for those steps.

Two runs of an unchanged program whose pool threads launch beside the main thread's timed steps read
``slower: kernel ... +627%`` one run each (how the threads share the machine holds through a run; the steps
within one run cannot show it). The diff now makes such one-run verdicts ``inconclusive``, telling the user to
compare three runs a side, and keeps the verdicts of a program without such threads. A kernel's row in a timed
step is judged by its own launches: inconclusive only where they held another thread's whole launch (waited
for its kernel) in ``1 - quantile`` of the steps, so a kernel that other threads merely run beside keeps its
one-run verdict. The crafted records pin the signal (:mod:`launchtrace.analysis.contention`); real recorded runs
check the verdicts end to end, listed and streamed alike.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from fleet_gen import traced_run
from launchtrace.analysis.contention import Concurrency, run_shares
from launchtrace.analysis.diff import concurrent_verdict, diff_traces
from launchtrace.analysis.diff_stream import diff_streamed
from launchtrace.analysis.segments import segments
from launchtrace.analysis.verdicts import compare_runs
from launchtrace.model import UNKNOWN_SITE, LaunchRecord, ScopeRecord, TraceData
from launchtrace.sources.each import Traces
from launchtrace.sources.loading import load_traces

MAIN, POOL, OTHER = 1, 2, 3
MS = 1_000_000


def _rec(kernel: str, thread: int, start: int, end: int, scope: int | None = None, name: str = "") -> LaunchRecord:
    return LaunchRecord(
        "launch", kernel, (64,), None, (), (), UNKNOWN_SITE, thread=thread, thread_name=name, start_ns=start,
        end_ns=end, scope_id=scope,
    )  # fmt: skip


def _steps(n: int, *, pool: bool, scoped_other: bool = False, held: int = 0) -> list[TraceData]:
    """``n`` ``iteration`` scopes on the main thread, 1 ms each; beside each, a pool thread's unscoped launch
    (``pool``: begun before the step's launch, ended inside it) or another thread's own scoped step
    (``scoped_other``). In the first ``held`` steps the pool's launch lies inside the main thread's launch: that
    launch waited for it."""
    out = []
    for k in range(n):
        t0 = 10 * MS * (k + 1)
        scope = ScopeRecord(k + 1, "iteration", "timer", thread=MAIN, start_ns=t0, end_ns=t0 + MS)
        out.append(TraceData([_rec("m.fill", MAIN, t0 + 100, t0 + MS - 100, k + 1)], {k + 1: scope}))
        if pool:
            start = t0 + 200 if k < held else t0 - 200
            out.append(TraceData([_rec("m.spray", POOL, start, t0 + 500, None, "ThreadPoolExecutor-1_0")]))
        if scoped_other:
            sid = 1000 + k
            other = ScopeRecord(sid, "b.step", "timer", thread=OTHER, start_ns=t0, end_ns=t0 + MS)
            out.append(TraceData([_rec("m.churn", OTHER, t0 + 10, t0 + MS - 10, sid)], {sid: other}))
    return out


def test_pool_launches_beside_the_steps_are_the_signal() -> None:
    traces = _steps(20, pool=True)
    shares = run_shares(traces, segments(traces))
    assert shares["iteration"] == 1.0
    assert shares["<no scope> (ThreadPoolExecutor-1)"] == 1.0  # unscoped work: the main thread's timed launches count
    assert shares[("iteration", "m.fill")] == 0.0  # beside the kernel's launches, never inside one: no wait
    traces = _steps(20, pool=False)
    assert run_shares(traces, segments(traces)) == {"iteration": 0.0, ("iteration", "m.fill"): 0.0}


@pytest.mark.parametrize("order", ["as recorded", "pool first", "pool last", "reversed"])
def test_a_launch_held_whole_is_a_wait_in_whatever_order_the_traces_come(order: str) -> None:
    """Each trace before its steps, in any order of traces: a step meets the pool traces before it (the latest
    launch by launch, the earlier ones by their summary) and marks are set by those after it."""
    traces = _steps(20, pool=True, held=5)
    pool = [t for t in traces if t.records[0].thread == POOL]
    main = [t for t in traces if t.records[0].thread == MAIN]
    fed = {"as recorded": traces, "pool first": pool + main, "pool last": main + pool, "reversed": traces[::-1]}
    shares = run_shares(fed[order], segments(fed[order]))
    assert shares[("iteration", "m.fill")] == 0.25 and shares["iteration"] == 1.0


def test_another_threads_own_steps_and_the_same_threads_work_are_not() -> None:
    traces = _steps(20, pool=False, scoped_other=True)  # the zoo's workers: each thread its own timer
    assert run_shares(traces, segments(traces)) == {
        "iteration": 0.0,
        "b.step": 0.0,
        ("iteration", "m.fill"): 0.0,
        ("b.step", "m.churn"): 0.0,
    }
    seen = Concurrency()  # the main thread's own unscoped work between its steps
    for trace in _steps(20, pool=False):
        seen.add_trace(trace)
    seen.add_trace(TraceData([_rec("m.copy", MAIN, 0, 500 * MS)]))
    for seg in segments(_steps(20, pool=False)):
        seen.add_step(seg)
    assert seen.shares()["iteration"] == 0.0 and seen.shares()[("iteration", "m.fill")] == 0.0


PROGRAM = textwrap.dedent(
    """
    import os
    from concurrent.futures import ThreadPoolExecutor

    import numpy as np
    import warp as wp

    wp.config.quiet = True
    LOOPS = int(os.environ["LOOPS"])
    POOL = os.environ["POOL"] == "1"


    @wp.kernel
    def fill_k(a: wp.array(dtype=float), b: wp.array(dtype=float), loops: int):
        i = wp.tid()
        s = a[i]
        for _k in range(loops):
            s = wp.sin(s) * 0.5 + 0.75
        b[i] = s


    @wp.kernel
    def spray_k(a: wp.array(dtype=float), loops: int):
        i = wp.tid()
        s = a[i]
        for _k in range(loops):
            s = wp.cos(s) * 0.5 + 0.8
        a[i] = s


    n = 1024
    x = wp.array(np.linspace(0, 1, n, dtype=np.float32), dtype=float, device="cpu")
    y = wp.zeros(n, dtype=float, device="cpu")
    side = [wp.zeros(n, dtype=float, device="cpu") for _ in range(2)]
    with ThreadPoolExecutor(max_workers=2) as pool:
        for _ in range(40):
            tasks = [pool.submit(wp.launch, spray_k, dim=n, inputs=[a, 40], device="cpu") for a in side] if POOL else []
            with wp.ScopedTimer("iteration", print=False):
                wp.launch(fill_k, dim=n, inputs=[x, y, LOOPS], device="cpu")
            for t in tasks:
                t.result()
    """
)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Real runs: pool threads beside the timed steps or not, the main thread's kernel as costly or 3x."""
    folder = tmp_path_factory.mktemp("concurrent")
    script = folder / "prog.py"
    script.write_text(PROGRAM, encoding="utf-8")
    out = {}
    for pool in ("0", "1"):
        for loops in ("40", "120"):
            name = f"pool{pool}-{loops}"
            out[name] = traced_run(script, folder / f"{name}.jsonl", "", "concurrent", {"POOL": pool, "LOOPS": loops})
    return out


def _row(result, kernel: str):
    (row,) = [t for t in result.timing if t.kind == "kernel" and t.name.endswith(kernel) and t.scope == "iteration"]
    return row.verdict


def _same_streamed(a: Path, b: Path):
    """The streamed diff gives the lists' rows (a zero-code run's inferred steps are left to the lists, so the
    step scope is named)."""
    listed = diff_traces(load_traces([a]), load_traces([b]), scope="iteration")
    streamed = diff_streamed((Traces([a]), Traces([b])), scope="iteration")
    assert streamed is not None
    assert repr(streamed[0].timing) == repr(listed.timing)
    return listed


def test_one_run_each_with_pool_threads_beside_the_steps_is_inconclusive(runs) -> None:
    """The step's row is inconclusive; the kernel's row too where its launches waited for the pool's in 90 % of
    the steps (how often depends on the threads' phase in these runs), else it keeps the 3x change."""
    a, b = runs["pool1-40"], runs["pool1-120"]
    listed = diff_traces(load_traces([a]), load_traces([b]))
    (step,) = [t.verdict for t in listed.timing if t.kind == "scope" and t.scope == "iteration"]
    assert step.basis == "steps-one-run" and step.verdict == "inconclusive" and not step.significant
    assert "other threads launched during" in step.reason and "compare 3 runs a side" in step.reason
    waited = max(run_shares(t, segments(t))[("iteration", "__main__.fill_k")] for t in map(load_traces, ([a], [b])))
    v = _row(listed, ".fill_k")
    assert v.basis == "steps-one-run" and v.effect > 0.0  # the 3x change shows
    if waited >= 0.9:
        assert v.verdict == "inconclusive" and "waited for another thread's launch" in v.reason
    else:
        assert v.verdict == "slower" and "other threads" not in v.reason
    named = _same_streamed(a, b)  # the stream keeps the signals too (scope named)
    assert _row(named, ".fill_k").verdict == v.verdict


def test_one_run_each_without_other_threads_still_finds_the_slower_kernel(runs) -> None:
    listed = diff_traces(load_traces([runs["pool0-40"]]), load_traces([runs["pool0-120"]]))
    v = _row(listed, ".fill_k")
    assert v.verdict == "slower" and "other threads" not in v.reason
    _same_streamed(runs["pool0-40"], runs["pool0-120"])


def test_three_runs_a_side_keep_the_run_level_test() -> None:
    a = [[10.0, 10.1, 10.2, 10.0, 10.1, 10.3]] * 3
    b = [
        [20.0, 20.2, 20.1, 20.0, 20.3, 20.1],
        [21.0, 21.2, 21.1, 21.0, 21.3, 21.1],
        [19.0, 19.2, 19.1, 19.0, 19.3, 19.1],
    ]
    busy = ({"iteration": 1.0}, {"iteration": 1.0})
    by_runs = compare_runs(a, b)
    assert by_runs.basis == "runs" and concurrent_verdict(by_runs, "iteration", busy, 3) is by_runs
    one = compare_runs(a[:1], b[:1])
    assert one.verdict == "slower" and concurrent_verdict(one, "elsewhere", busy, 3) is one
    flipped = concurrent_verdict(one, "iteration", busy, 3)
    assert (flipped.verdict, flipped.direction, flipped.significant) == ("inconclusive", "none", False)
    assert flipped.reason.startswith("other threads launched during 100% of these steps (side A)")
    assert "steps alone: slower" in flipped.reason and flipped.effect == one.effect


@pytest.mark.parametrize(("waited", "kept"), [(0.0, True), (0.85, True), (0.9, False), (1.0, False)])
def test_a_kernel_in_a_timed_step_is_judged_by_its_own_waits(waited: float, kept: bool) -> None:
    """Inconclusive once its launches waited in ``1 - quantile`` of its steps on either side (its p10 step
    then holds a wait); the step's own row keeps the step-level signal."""
    one = compare_runs([[10.0, 10.1, 10.2, 10.0, 10.1, 10.3]], [[20.0, 20.2, 20.1, 20.0, 20.3, 20.1]])
    busy = ({"iteration": 1.0, ("iteration", "m.fill"): 0.0}, {"iteration": 1.0, ("iteration", "m.fill"): waited})
    v = concurrent_verdict(one, "iteration", busy, 3, "m.fill", 0.1)
    assert (v is one) == kept
    if not kept:
        assert v.verdict == "inconclusive" and v.reason.startswith(
            f"its launches waited for another thread's launch (held it whole) in {waited:.0%} of these steps (side B)"
        )
    assert concurrent_verdict(one, "iteration", busy, 3).verdict == "inconclusive"  # the step's own row
    assert concurrent_verdict(one, "iteration", busy, 3, "m.other", 0.1).verdict == "inconclusive"  # no entry


def test_the_earlier_traces_index_kept_as_traces_come_answers_as_one_built_at_once() -> None:
    """``contention._insert`` keeps each thread's earlier traces indexed as they come (rebuilding the index for
    every trace was quadratic in a run's traces); any launch interval asks it what it asks the batch-built one."""
    import random

    from launchtrace.analysis.contention import _holds, _insert, _inside_index

    rng = random.Random(7)
    for _ in range(500):
        spans = [(s, s + rng.randint(0, 50)) for s in (rng.randint(0, 100) for _ in range(rng.randint(0, 40)))]
        kept: tuple[list[int], list[int]] = ([], [])
        for start, end in spans:
            _insert(kept, start, end)
        built = _inside_index(spans)
        assert kept[0] == built[0]
        for _ in range(40):
            start = rng.randint(-5, 110)
            end = start + rng.randint(0, 60)
            assert _holds(kept, start, end) == _holds(built, start, end), (spans, start, end)
