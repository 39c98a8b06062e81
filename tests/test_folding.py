"""Folding consecutive repeats: what folds, what never does, and that the expansion gives back the input."""

from __future__ import annotations

import dataclasses
import statistics

from hypothesis import given, settings
from hypothesis import strategies as st

from launchtrace.export.folding import MAX_PERIOD, FoldedRun, Folder, Single
from launchtrace.model import LaunchRecord, Site

SITE = Site("sim.py", 7, "step", "sim")


def rec(kernel: str, seq: int, ptr: int = 0x100, dur: int = 10, error: str | None = None) -> LaunchRecord:
    return LaunchRecord(
        "launch", kernel, (8,), None, ((0, ptr),), ((1, 0.5),), SITE,
        params=("x", "s"), start_ns=seq * 100, end_ns=seq * 100 + dur, seq=seq, error=error,
    )  # fmt: skip


def run_all(folder: Folder, records: list[LaunchRecord]) -> list:
    out = []
    for r in records:
        out.extend(folder.push(r))
    return out + folder.flush()


def expand(groups: list) -> list[LaunchRecord]:
    """The records the groups stand for, times and seqs zeroed (what folding keeps exactly)."""
    out = []
    for g in groups:
        seq = [g.record] if isinstance(g, Single) else list(g.sequence) * g.count
        out.extend(dataclasses.replace(r, start_ns=0, end_ns=0, seq=0) for r in seq)
    return out


def strip(records: list[LaunchRecord]) -> list[LaunchRecord]:
    return [dataclasses.replace(r, start_ns=0, end_ns=0, seq=0) for r in records]


def test_period_one_run_folds_into_one_group_with_stats():
    records = [rec("a", i, dur=10 + i) for i in range(1000)]
    groups = run_all(Folder(), records)
    assert len(groups) == 1
    (run,) = groups
    assert isinstance(run, FoldedRun) and run.count == 1000 and run.period == 1
    durs = [10 + i for i in range(1000)]
    s = run.stats[0]
    assert (s.count, s.min, s.max) == (1000, min(durs), max(durs))
    assert s.mean == round(statistics.fmean(durs))
    assert s.p50 == int(statistics.median(durs))
    assert run.start_ns == 0 and run.end_ns == 999 * 100 + 10 + 999
    assert run.last_seq == 999


def test_ping_pong_buffers_fold_with_period_two():
    records = [rec("step", i, ptr=0x100 if i % 2 == 0 else 0x200) for i in range(400)]
    groups = run_all(Folder(), records)
    assert len(groups) == 1 and groups[0].period == 2 and groups[0].count == 200
    assert [r.arrays[0][1] for r in groups[0].sequence] == [0x100, 0x200]


def test_longest_coverage_wins_over_a_short_inner_repeat():
    # a a b | a a b | ... : period 3 covers everything; period 1 would only fold "a a"
    pattern = ["a", "a", "b"]
    records = [rec(pattern[i % 3], i) for i in range(300)]
    groups = run_all(Folder(), records)
    assert len(groups) == 1 and groups[0].period == 3 and groups[0].count == 100


def test_period_eight_folds_and_nine_does_not():
    eight = [rec(f"k{i % 8}", i) for i in range(160)]
    groups = run_all(Folder(), eight)
    assert [(g.period, g.count) for g in groups] == [(8, 20)]
    nine = [rec(f"k{i % 9}", i) for i in range(180)]
    groups = run_all(Folder(), nine)
    assert all(isinstance(g, Single) for g in groups) and len(groups) == 180


def test_records_with_errors_never_fold():
    records = [rec("a", i, error="RuntimeError: boom") for i in range(10)]
    groups = run_all(Folder(), records)
    assert len(groups) == 10 and all(isinstance(g, Single) for g in groups)


def test_a_changed_scalar_breaks_the_run():
    records = [rec("a", i) for i in range(100)]
    records[50] = dataclasses.replace(records[50], scalars=((1, 0.25),))
    groups = run_all(Folder(), records)
    assert [type(g).__name__ for g in groups] == ["FoldedRun", "Single", "FoldedRun"]
    assert [g.count for g in groups if isinstance(g, FoldedRun)] == [50, 49]
    assert expand(groups) == strip(records)


def test_disabled_and_min_repeats():
    records = [rec("a", i) for i in range(5)]
    assert all(isinstance(g, Single) for g in run_all(Folder(enabled=False), records))
    groups = run_all(Folder(min_repeats=6), records)
    assert len(groups) == 5 and all(isinstance(g, Single) for g in groups)
    groups = run_all(Folder(min_repeats=5), records)
    assert len(groups) == 1 and groups[0].count == 5


def test_memory_stays_bounded_on_a_long_run():
    folder = Folder()
    for i in range(20_002):
        assert not folder.push(rec("k" + str(i % 3), i))
        assert len(folder) <= 64
    run, *tail = folder.flush()
    assert (run.count, run.period) == (6667, 3)
    assert [g.record.kernel for g in tail] == ["k0"]


def test_unhashable_scalars_still_fold():
    records = [dataclasses.replace(rec("a", i), scalars=((1, [1, 2]),)) for i in range(10)]
    groups = run_all(Folder(), records)
    assert len(groups) == 1 and groups[0].count == 10


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(0, 3), min_size=0, max_size=300),
    st.integers(2, 4),
    st.lists(st.integers(1, 40), min_size=1, max_size=12),
)
def test_expansion_equals_input(kinds, min_repeats, chunking):
    """Whatever the sequence and however it is pushed, the groups expand to exactly the input records,
    in order, and every fold is a real repetition of at least ``min_repeats`` and period <= 8."""
    records = [rec(f"k{k}", i, ptr=0x100 * (1 + k % 2)) for i, k in enumerate(kinds)]
    folder = Folder(min_repeats=min_repeats)
    groups = run_all(folder, records)
    assert expand(groups) == strip(records)
    for g in groups:
        if isinstance(g, FoldedRun):
            assert g.count >= min_repeats and 1 <= g.period <= MAX_PERIOD
            assert sum(s.count for s in g.stats) == g.count * g.period
