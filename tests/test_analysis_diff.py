"""The aligned diff on real Warp programs (CPU): each change is reported exactly, and nothing else."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest
import warp as wp

from launchtrace.analysis.diff import NO_SCOPE, diff_traces, segments
from launchtrace.model import LaunchRecord, ScopeRecord, Site, TraceData
from launchtrace.render.diff_text import diff_as_json, diff_as_markdown, diff_as_text
from launchtrace.topology import ChangeKind
from test_analysis_programs import Sim, run_program

STEPS = 3


@wp.kernel
def _generic_scale(x: wp.array(dtype=Any), s: Any):
    x[wp.tid()] = x[wp.tid()] * s


@pytest.fixture(scope="module")
def base_sim() -> Sim:
    return Sim()  # kept alive for the module, so no later Sim can reuse its addresses


@pytest.fixture(scope="module")
def base(base_sim: Sim) -> TraceData:
    return run_program("base", STEPS, base_sim)


def _entries(result):
    return [(seg.name, seg.occurrence, e) for seg in result.segments for e in seg.entries]


def test_two_runs_of_the_same_program_diff_as_equal(base: TraceData, base_sim: Sim) -> None:
    again = run_program("base", STEPS)  # a fresh Sim: other pointers, same owner labels
    assert diff_traces(base, run_program("base", STEPS, base_sim)).equal  # and the same Sim again
    assert {r.buffers[0].ptr for r in again.records} != {r.buffers[0].ptr for r in base.records}
    result = diff_traces(base, again)
    assert result.equal
    assert result.counts == {"inserted": 0, "removed": 0, "changed": 0, "moved": 0}
    assert [(s.name, s.occurrence, s.count_a, s.count_b) for s in result.segments] == [
        ("step", k, 3, 3) for k in range(STEPS)
    ]


def test_a_changed_launch_dim_is_reported_exactly(base: TraceData) -> None:
    entries = _entries(diff_traces(base, run_program("dim", STEPS)))
    assert [(name, occ) for name, occ, _ in entries] == [("step", k) for k in range(STEPS)]
    for _, _, e in entries:
        assert e.kind == ChangeKind.CHANGED and (e.index_a, e.index_b) == (1, 1)
        assert e.record_a.kernel.endswith(".add")
        assert [(f.field, f.name, f.before, f.after) for f in e.fields] == [("dim", "", (64,), (32,))]


def test_an_inserted_launch_is_reported_exactly(base: TraceData) -> None:
    entries = _entries(diff_traces(base, run_program("insert", STEPS)))
    assert len(entries) == STEPS
    for _, _, e in entries:
        assert e.kind == ChangeKind.INSERTED and (e.index_a, e.index_b) == (None, 1)
        assert e.record_b.kernel.endswith(".add") and e.record_b.buffer(2).owner == "sim.tmp2"


def test_a_swapped_buffer_is_reported_by_owner_label(base: TraceData) -> None:
    entries = _entries(diff_traces(base, run_program("swap", STEPS)))
    assert len(entries) == STEPS
    for _, _, e in entries:
        assert e.kind == ChangeKind.CHANGED and e.index_a == 1
        assert [(f.field, f.name, f.before, f.after) for f in e.fields] == [
            ("buffer", "b", ("sim.v", 0), ("sim.alt", 0))
        ]


def test_a_changed_scalar_is_reported_by_parameter_name(base: TraceData) -> None:
    result = diff_traces(base, run_program("scalar", STEPS))
    entries = _entries(result)
    assert len(entries) == STEPS
    for _, _, e in entries:
        assert e.kind == ChangeKind.CHANGED and e.index_a == 0
        assert [(f.field, f.name, f.before, f.after) for f in e.fields] == [("scalar", "s", 0.5, 0.25)]
    assert diff_traces(base, run_program("scalar", STEPS), ignore_scalars=True).equal


def test_an_extra_scope_occurrence_is_wholly_inserted(base: TraceData) -> None:
    longer = run_program("base", STEPS + 1)
    result = diff_traces(base, longer)
    assert result.counts == {"inserted": 3, "removed": 0, "changed": 0, "moved": 0}
    last = result.segments[-1]
    assert (last.name, last.occurrence, last.count_a, last.count_b) == ("step", STEPS, 0, 3)
    reverse = diff_traces(longer, base)
    assert reverse.counts == {"inserted": 0, "removed": 3, "changed": 0, "moved": 0}


def test_sets_of_traces_match_by_scope_name_and_occurrence() -> None:
    sim = Sim()
    a = [run_program("base", 2, sim), run_program("base", 2, sim)]
    b = [run_program("base", 1, sim), run_program("scalar", 3, sim)]
    result = diff_traces(a, b, scope="step")
    # occurrences are counted across the set: a has 4 steps, b has 1 base + 3 scalar
    changed = [(s.occurrence, len(s.entries)) for s in result.segments if s.entries]
    assert changed == [(1, 1), (2, 1), (3, 1)]


def test_streams_are_compared_unless_ignored() -> None:
    site = Site("prog.py", 3, "main")
    a = TraceData([LaunchRecord("launch", "m.k", (4,), 1, (), (), site)])
    b = TraceData([LaunchRecord("launch", "m.k", (4,), 2, (), (), site)])
    result = diff_traces(a, b)
    assert [f.field for _, _, e in _entries(result) for f in e.fields] == ["stream"]
    assert diff_traces(a, b, ignore_streams=True).equal


def _timed(kernel: str, durations: list[int], scope: int | None = None, t0: int = 1_000) -> list[LaunchRecord]:
    site = Site("prog.py", 1, "main")
    out, t = [], t0
    for d in durations:
        out.append(LaunchRecord("launch", kernel, (8,), None, (), (), site, start_ns=t, end_ns=t + d, scope_id=scope))
        t += d + 10
    return out


def _stepped(per_step: list[dict[str, int]], run: str = "r1") -> TraceData:
    """Hand-built: one ``step`` scope per entry, holding one launch of each kernel with that duration (ns),
    the step lasting the sum; ``run`` is the process (service.instance.id)."""
    records, scopes, t = [], {}, 1_000
    for k, kernels in enumerate(per_step):
        start = t
        for name, d in kernels.items():
            records += _timed(name, [d], k + 1, t)
            t += d + 10
        scopes[k + 1] = ScopeRecord(k + 1, "step", "user", start_ns=start, end_ns=t)
        t += 100
    return TraceData(records, scopes, {"service.instance.id": run})


def _steps(n: int, a: int, b: int, first: int | None = None, seed: int = 0) -> list[dict[str, int]]:
    out = [{"m.a": a + (k * 37 + seed) % 50, "m.b": b + (k * 53 + seed) % 50} for k in range(n)]
    if first is not None:
        out[0] = {"m.a": first, "m.b": first}  # the first step compiles
    return out


def test_timing_compares_per_step_totals_with_warm_up_left_out() -> None:
    """Hand-built durations: exact control over the steps is the point of this test."""
    base = _stepped(_steps(40, 100_000, 200_000, first=900_000_000))
    same = diff_traces(base, _stepped(_steps(40, 100_000, 200_000, first=800_000_000, seed=7), "r2"))
    assert not any(t.verdict.significant for t in same.timing)
    # one run each cannot rule out the drift between runs (25 %): not "same", but "inconclusive", and why
    assert {t.verdict.verdict for t in same.timing} == {"inconclusive"}
    assert all("3 runs per side would tell" in t.verdict.decide for t in same.timing)
    assert [(w.side, w.scope, w.steps) for w in same.warmup] == [("A", "step", 1), ("B", "step", 1)]
    row = next(t for t in same.timing if t.group == "kernel m.a in step")
    assert row.verdict.n_steps_a == 39 and row.verdict.basis == "steps-one-run"  # the warm-up step left out
    slow = diff_traces(base, _stepped(_steps(40, 100_000, 400_000, first=800_000_000), "r2"))
    by_group = {t.group: t for t in slow.timing}
    assert by_group["kernel m.b in step"].verdict.direction == "slower"
    assert by_group["kernel m.b in step"].verdict.verdict == "slower"
    assert 0.9 < by_group["kernel m.b in step"].verdict.effect < 1.1
    assert not by_group["kernel m.a in step"].verdict.significant
    assert by_group["scope step"].verdict.direction == "slower"  # the step holds the slower kernel
    assert slow.equal  # timing never makes topologies unequal
    few = diff_traces(_stepped(_steps(3, 100_000, 200_000)), _stepped(_steps(3, 900_000, 900_000), "r2"))
    assert all(t.verdict.basis == "insufficient" for t in few.timing)
    assert all(t.verdict.verdict == "inconclusive" and "at least 5 steps" in t.verdict.decide for t in few.timing)


def test_a_small_change_is_not_called_from_one_run_each() -> None:
    """+10 % with perfectly quiet steps: significant within the runs, but under what one run can tell from
    the drift between runs, so not called."""
    a = _stepped(_steps(30, 1_000_000, 1_000_000))
    b = _stepped([{k: int(v * 1.1) for k, v in s.items()} for s in _steps(30, 1_000_000, 1_000_000)], "r2")
    row = next(t for t in diff_traces(a, b).timing if t.group == "kernel m.a in step")
    assert row.verdict.p_value < 0.01 and not row.verdict.significant
    assert "cannot be told from this run's step-to-step noise" in row.verdict.reason
    assert row.verdict.verdict == "inconclusive"  # never "same": +10 % is past +-5 %


def test_several_runs_per_side_are_compared_run_against_run() -> None:
    a = [_stepped(_steps(10, 1_000_000 + 20_000 * r, 500_000, seed=r), f"a{r}") for r in range(3)]
    b = [_stepped(_steps(10, 1_200_000 + 20_000 * r, 500_000, seed=r), f"b{r}") for r in range(3)]
    result = diff_traces(a, b)
    assert (result.runs_a, result.runs_b) == (3, 3)
    row = next(t for t in result.timing if t.group == "kernel m.a in step")
    assert row.verdict.basis == "runs" and row.verdict.n_runs_a == 3 and row.verdict.direction == "slower"
    assert row.verdict.verdict == "slower"
    assert row.verdict.detectable_change is None  # the run-level test sees the drift itself
    assert result.equal and {s.run for s in result.segments} == {0, 1, 2}
    assert all(s.occurrence < 10 for s in result.segments)  # occurrences count within each run


def test_scopes_nested_in_a_step_are_timed() -> None:
    def trace(factor: float, run: str) -> TraceData:
        records, scopes = [], {}
        for occ in range(10):
            step_id, inner_id = 2 * occ + 1, 2 * occ + 2
            t = 1_000 + occ * 10_000_000
            inner = int((1_000_000 + occ * 1_000) * factor)
            scopes[step_id] = ScopeRecord(step_id, "step", "user", start_ns=t, end_ns=t + inner + 500_000)
            scopes[inner_id] = ScopeRecord(inner_id, "simulate", "timer", step_id, start_ns=t, end_ns=t + inner)
            records += _timed("m.k", [inner - 100], inner_id, t)
        return TraceData(records, scopes, {"service.instance.id": run})

    result = diff_traces(trace(1.0, "a"), trace(2.0, "b"))
    by_group = {t.group: t.verdict.direction for t in result.timing}
    assert by_group == {"scope step": "slower", "scope step/simulate": "slower", "kernel m.k in step": "slower"}


def test_unscoped_records_form_their_own_segments() -> None:
    site = Site("prog.py", 1, "main")
    rec = LaunchRecord("launch", "m.k", (4,), None, (), (), site)
    segs = segments([TraceData([rec, dataclasses.replace(rec, kernel="m.j")])])
    assert [(s.name, s.occurrence, len(s.records)) for s in segs] == [(NO_SCOPE, 0, 2)]


def test_formats_carry_the_same_entries(base: TraceData) -> None:
    result = diff_traces(base, run_program("swap", STEPS))
    text = diff_as_text(result)
    assert text.startswith("topology: differs (0 inserted, 0 removed, 3 changed)")
    assert text.count("buffer b sim.v -> sim.alt") == 1  # the same change in every step: printed once
    assert f"scope step {STEPS} occurrences #0-#{STEPS - 1}: 3 -> 3 records" in text
    data = diff_as_json(result)
    assert data["equal"] is False and data["counts"]["changed"] == STEPS
    fields = [f for s in data["segments"] for e in s["entries"] for f in e["fields"]]
    assert fields == [{"field": "buffer", "name": "b", "before": "sim.v", "after": "sim.alt"}] * STEPS
    md = diff_as_markdown(result)
    assert md.count("| changed | 1 |") == 1 and f"| step #0-#{STEPS - 1} | changed |" in md


_KEEP: list = []  # arrays of earlier runs stay alive, so a later run cannot be handed the same addresses


def _unowned_run(into_x: bool = False) -> TraceData:
    """Two steps of scale -> add on fresh arrays that nobody owns (each run gets other addresses)."""
    import numpy as np
    import warp as wp

    import launchtrace
    from launchtrace.testing import trace_launches
    from test_analysis_programs import DEVICE, N, add, scale

    x, v, tmp, out = (wp.array(np.ones(N, np.float32), dtype=float, device=DEVICE) for _ in range(4))
    _KEEP.append((x, v, tmp, out))
    with trace_launches() as trace:
        for _ in range(2):
            with launchtrace.scope("step"):
                wp.launch(scale, dim=N, inputs=[x, 0.5], outputs=[tmp], device=DEVICE)
                wp.launch(add, dim=N, inputs=[tmp, v], outputs=[x if into_x else out], device=DEVICE)
    return trace.to_data()


def test_unowned_buffers_compare_by_order_of_appearance_not_address() -> None:
    """Two runs of a program that owns nothing: other addresses, the same topology, so equal (the CI check on
    two processes must not fail on allocator addresses); raw pointers are still there on request; a launch that
    now writes another of its buffers is one change naming the buffers by their order."""
    first, second = _unowned_run(), _unowned_run()
    assert {p for r in first.records for _, p in r.arrays}.isdisjoint({p for r in second.records for _, p in r.arrays})
    assert diff_traces(first, second).equal
    assert not diff_traces(first, second, raw_pointers=True).equal
    entries = _entries(diff_traces(first, _unowned_run(into_x=True)))
    assert [(name, occ, e.kind, e.index_a) for name, occ, e in entries] == [
        ("step", k, ChangeKind.CHANGED, 1) for k in range(2)
    ]
    for _, _, e in entries:
        assert [(f.field, f.name, f.before, f.after) for f in e.fields] == [
            ("buffer", "out", "<unowned #3>", "<unowned #0>")
        ]


def test_a_step_whose_records_are_cut_in_two_is_one_step() -> None:
    """Another scope's records in the middle of a step (another thread's work in one trace) cut it into two
    segments; its time is still one step, counted once."""
    records, scopes = [], {}
    for occ in range(6):
        sid, other = 2 * occ + 1, 2 * occ + 2
        t = 1_000 + occ * 1_000_000
        scopes[sid] = ScopeRecord(sid, "step", "user", start_ns=t, end_ns=t + 500_000)
        scopes[other] = ScopeRecord(other, "io", "user", start_ns=t, end_ns=t + 10_000)
        records += (
            _timed("m.a", [100_000], sid, t) + _timed("m.io", [1_000], other, t) + _timed("m.b", [200_000], sid, t)
        )
    result = diff_traces(TraceData(records, scopes), TraceData(records, scopes))
    by_group = {t.group: t for t in result.timing}
    assert by_group["scope step"].verdict.n_steps_a == 6 and by_group["scope step"].launches_a == 6
    assert by_group["kernel m.b in step"].verdict.n_steps_a == 6
    assert by_group["scope step"].median_a_ns == 500_000


def _kernels_step(factor: float, kernels: int = 6, steps: int = 30, seed: int = 0) -> list[dict[str, int]]:
    """Steps of ``kernels`` kernels (200 us .. 700 us, a few percent of step noise), all ``factor`` as slow."""
    return [
        {
            f"m.k{i}": int((200_000 + 100_000 * i) * factor * (1 + ((k * 31 + i * 7 + seed) % 9) / 300))
            for i in range(kernels)
        }
        for k in range(steps)
    ]


def test_a_run_slow_in_every_kernel_is_drift_and_kernels_are_judged_relative() -> None:
    """Run B ran 1.4x slower in every kernel (a busy machine): one drift finding, no kernel reported slower;
    with one kernel also 2x as costly, that kernel alone is slower (relative to its run); --absolute judges
    raw times and reports every kernel."""
    a = _stepped(_kernels_step(1.0), "a")
    b = _stepped(_kernels_step(1.4, seed=3), "b")
    result = diff_traces(a, b)
    assert [(d.side, d.run, round(d.drift.factor, 1), d.applied) for d in result.drift] == [("B", 0, 1.4, True)]
    assert "run B1 ran 1.40x slower in every kernel" in result.drift[0].describe()
    assert "environment, not a kernel change" in result.drift[0].describe()
    assert not [t.group for t in result.timing if t.verdict.verdict in ("slower", "faster")]
    steps = _kernels_step(1.4, seed=3)
    for s in steps:
        s["m.k2"] *= 2
    changed = diff_traces(a, _stepped(steps, "b"))
    kernels = {t.name: t.verdict.verdict for t in changed.timing if t.kind == "kernel"}
    assert kernels["m.k2"] == "slower" and [k for k, v in kernels.items() if v == "slower"] == ["m.k2"]
    raw = diff_traces(a, b, absolute=True)
    assert raw.drift[0].applied is False
    assert {t.name for t in raw.timing if t.kind == "kernel" and t.verdict.verdict == "slower"} == {
        f"m.k{i}" for i in range(6)
    }
    text = diff_as_text(result)
    assert "timing: drift: run B1 ran 1.40x slower in every kernel" in text
    data = diff_as_json(result)
    assert data["drift"][0]["factor"] == pytest.approx(1.4, abs=0.01) and data["verdicts"]["slower"] == 0
    assert {row["verdict"] for row in data["timing"]} <= {"slower", "faster", "same", "inconclusive"}


def _growing(per_step: int, steps: int = 8) -> TraceData:
    """A particle system that emits ``per_step`` more particles each frame: every frame's launch is sized anew."""
    import warp as wp

    import launchtrace
    from launchtrace.testing import trace_launches
    from test_analysis_programs import scale

    x, y = wp.zeros(1024, dtype=float), wp.zeros(1024, dtype=float)
    with trace_launches() as trace:
        for frame in range(steps):
            with launchtrace.scope("frame"):
                wp.launch(scale, dim=64 + per_step * frame, inputs=[x, 2.0, y])
    return trace.to_data()


def test_occurrences_that_differ_only_in_their_values_are_one_block_of_text() -> None:
    """A count that grows every frame differs differently in each occurrence: one block naming the field and
    the first and last values, not a block per frame."""
    result = diff_traces(_growing(16), _growing(8))
    assert result.counts == {"inserted": 0, "removed": 0, "changed": 7, "moved": 0}  # frame 0 has the same size
    text = diff_as_text(result)
    lines = text.splitlines()
    assert sum(line.startswith("scope frame") for line in lines) == 1, text
    head = next(line for line in lines if line.startswith("scope frame"))
    assert head == "scope frame 7 occurrences #1-#7: 1 -> 1 records, values differ"
    entry = lines[lines.index(head) + 1]
    assert entry.startswith("  #0 ") and ".scale (from " in entry
    assert entry.endswith(
        ": dim: (80,) -> (72,) in #1; (96,) -> (80,) in #2; (112,) -> (88,) in #3 ... (176,) -> (120,) in #7 "
        "(7 different)"
    ), entry
    assert len(diff_as_json(result)["segments"]) >= 7  # the machine-readable form keeps every occurrence


def test_two_occurrences_that_differ_in_values_keep_their_own_blocks() -> None:
    result = diff_traces(_growing(16, steps=3), _growing(8, steps=3))
    text = diff_as_text(result)
    assert "values differ" not in text
    assert "scope frame #1: 1 -> 1 records" in text and "scope frame #2: 1 -> 1 records" in text


def _stepping(pause_s: float, steps: int = 24) -> TraceData:
    """Two launches a step; ``pause_s`` of the program's own work between them."""
    import time

    import warp as wp

    import launchtrace
    from launchtrace.testing import trace_launches
    from test_analysis_programs import scale

    x, y = wp.zeros(256, dtype=float), wp.zeros(256, dtype=float)
    with trace_launches() as trace:
        for _ in range(steps):
            with launchtrace.scope("step"):
                wp.launch(scale, dim=256, inputs=[x, 2.0, y])
                if pause_s:
                    time.sleep(pause_s)
                wp.launch(scale, dim=256, inputs=[y, 0.5, x])
    return trace.to_data()


def test_a_slower_step_says_whether_its_launches_or_the_code_between_them_took_the_time() -> None:
    result = diff_traces(_stepping(0.0), _stepping(0.004))
    (row,) = [t for t in result.timing if t.kind == "scope" and t.name == "step"]
    assert row.verdict.verdict == "slower"
    assert row.outside_b_ns - row.outside_a_ns > 3.5e6  # the 4 ms sleep: between the launches
    assert row.in_launches_b_ns < row.outside_b_ns / 4
    assert not any(math.isnan(v) for v in (row.in_launches_a_ns, row.outside_a_ns))
    kernels = [t for t in result.timing if t.kind == "kernel"]
    assert kernels and all(math.isnan(t.in_launches_a_ns) for t in kernels)  # only a step's own row is split
    line = next(line for line in diff_as_text(result).splitlines() if line.startswith("  slower: scope step:"))
    assert "; median step in launches " in line and ", outside them " in line
    as_json = next(t for t in diff_as_json(result)["timing"] if t["group"] == "scope step")
    assert as_json["outside_b_ns"] == row.outside_b_ns


def _generic_run(dtype) -> TraceData:
    """A generic kernel (``dtype=Any``) launched on an array allocated at one line, of ``dtype``."""
    import warp as wp

    import launchtrace
    from launchtrace.testing import trace_launches

    with trace_launches() as trace:
        x = wp.ones(32, dtype=dtype)
        for _ in range(3):
            with launchtrace.scope("step"):
                wp.launch(_generic_scale, dim=32, inputs=[x, dtype(2.0)])
    return trace.to_data()


def test_an_array_of_another_dtype_is_a_change_though_the_topology_key_holds_no_dtypes() -> None:
    """A generic kernel runs another overload for float64: ``diff`` said ``topology: equal``."""
    import warp as wp

    assert diff_traces(_generic_run(wp.float32), _generic_run(wp.float32)).equal
    result = diff_traces(_generic_run(wp.float32), _generic_run(wp.float64))
    changes = [
        (seg.name, [(f.field, f.name, f.before, f.after) for f in e.fields])
        for seg, e in ((seg, e) for seg in result.segments for e in seg.entries)
    ]
    assert ("step", [("dtype", "x", "float32", "float64")]) in changes, changes
    assert sum(1 for name, _ in changes if name == "step") == 3
    assert "dtype x float32 -> float64" in diff_as_text(result)


def _loop(scoped: bool) -> TraceData:
    from launchtrace.testing import trace_launches
    from test_analysis_programs import scale

    x, y = wp.zeros(64, dtype=float), wp.zeros(64, dtype=float)
    with trace_launches() as trace:
        for _ in range(20):
            if scoped:
                with wp.ScopedTimer("step", print=False):
                    wp.launch(scale, dim=64, inputs=[x, 2.0, y])
            else:
                wp.launch(scale, dim=64, inputs=[x, 2.0, y])
    return trace.to_data()


def test_a_loop_outside_every_scope_is_timed_per_iteration() -> None:
    """No timer at all (a zero-code program's usual shape): each iteration of the loop is a step, so its kernel
    gets a one-run verdict from 20 steps, as it does under a timer (it had two exporter roots' worth before)."""
    for scoped in (False, True):
        result = diff_traces(_loop(scoped), _loop(scoped))
        row = next(t for t in result.timing if t.kind == "kernel" and t.name == "test_analysis_programs.scale")
        assert row.scope == ("step" if scoped else "<no scope>")
        assert row.verdict.basis == "steps-one-run", row.verdict.reason
        warm = sum(w.steps for w in result.warmup if w.side == "A" and w.scope == row.scope)
        assert row.verdict.n_steps_a + warm == 20
