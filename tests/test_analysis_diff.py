"""The aligned diff on real Warp programs (CPU): each change is reported exactly, and nothing else."""

from __future__ import annotations

import dataclasses

import pytest

from launchtrace.analysis.diff import NO_SCOPE, diff_traces, segments
from launchtrace.analysis.stats import Verdict
from launchtrace.model import LaunchRecord, ScopeRecord, Site, TraceData
from launchtrace.render.diff_text import diff_as_json, diff_as_markdown, diff_as_text
from launchtrace.topology import ChangeKind
from test_analysis_programs import Sim, run_program

STEPS = 3


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
    assert result.counts == {"inserted": 0, "removed": 0, "changed": 0}
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
    assert result.counts == {"inserted": 3, "removed": 0, "changed": 0}
    last = result.segments[-1]
    assert (last.name, last.occurrence, last.count_a, last.count_b) == ("step", STEPS, 0, 3)
    reverse = diff_traces(longer, base)
    assert reverse.counts == {"inserted": 0, "removed": 3, "changed": 0}


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


def _timed(kernel: str, durations: list[int], scope: int | None = None) -> list[LaunchRecord]:
    site = Site("prog.py", 1, "main")
    out, t = [], 1_000
    for d in durations:
        out.append(LaunchRecord("launch", kernel, (8,), None, (), (), site, start_ns=t, end_ns=t + d, scope_id=scope))
        t += d + 10
    return out


def test_timing_noise_is_not_a_regression_but_a_real_slowdown_is() -> None:
    """Hand-built durations: exact control over the samples is the point of this test."""
    noise_a = [1000 + (k * 37) % 50 for k in range(40)]
    noise_b = [1000 + (k * 53) % 50 for k in range(40)]
    same = diff_traces(TraceData(_timed("m.k", noise_a)), TraceData(_timed("m.k", noise_b)))
    assert [t.verdict for t in same.timing] == [Verdict.SAME]
    slow = diff_traces(TraceData(_timed("m.k", noise_a)), TraceData(_timed("m.k", [d * 2 for d in noise_b])))
    row = slow.timing[0]
    assert row.verdict == Verdict.SLOWER and row.p_value < 1e-6 and 0.9 < row.change < 1.1
    few = diff_traces(TraceData(_timed("m.k", [100] * 3)), TraceData(_timed("m.k", [900] * 3)))
    assert few.timing[0].verdict == Verdict.TOO_FEW
    assert slow.equal  # timing never makes topologies unequal


def test_position_timing_groups_by_scope_and_position() -> None:
    """Hand-built: a scope occurring 10 times whose second launch doubles in B."""

    def trace(factor: int) -> TraceData:
        records, scopes = [], {}
        for occ in range(10):
            scopes[occ + 1] = ScopeRecord(occ + 1, "step", "user")
            records += _timed("m.a", [500 + occ], occ + 1) + _timed("m.b", [800 * factor + occ], occ + 1)
        return TraceData(records, scopes)

    result = diff_traces(trace(1), trace(2))
    by_group = {t.group: t.verdict for t in result.position_timing}
    assert by_group == {"step #0 m.a": Verdict.SAME, "step #1 m.b": Verdict.SLOWER}


def test_unscoped_records_form_their_own_segments() -> None:
    site = Site("prog.py", 1, "main")
    rec = LaunchRecord("launch", "m.k", (4,), None, (), (), site)
    segs = segments([TraceData([rec, dataclasses.replace(rec, kernel="m.j")])])
    assert [(s.name, s.occurrence, len(s.records)) for s in segs] == [(NO_SCOPE, 0, 2)]


def test_formats_carry_the_same_entries(base: TraceData) -> None:
    result = diff_traces(base, run_program("swap", STEPS))
    text = diff_as_text(result)
    assert text.startswith("topology: differs (0 inserted, 0 removed, 3 changed)")
    assert text.count("buffer b sim.v -> sim.alt") == STEPS
    data = diff_as_json(result)
    assert data["equal"] is False and data["counts"]["changed"] == STEPS
    fields = [f for s in data["segments"] for e in s["entries"] for f in e["fields"]]
    assert fields == [{"field": "buffer", "name": "b", "before": "sim.v", "after": "sim.alt"}] * STEPS
    md = diff_as_markdown(result)
    assert md.count("| changed | 1 |") == STEPS and "buffer b sim.v -> sim.alt" in md


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
