"""Topology keys, fingerprints, alignment, diff entries and repeat detection over hand-built records.

Pure functions, so plain records are enough; the same functions over records captured from real Warp kernels
are tested in test_testing_api.py.
"""

from __future__ import annotations

import difflib
import os
import subprocess
import sys
import textwrap

from hypothesis import given, settings
from hypothesis import strategies as st

from launchtrace.model import BufferArg, LaunchRecord, Site
from launchtrace.ownership import BufferSet
from launchtrace.topology import (
    ALLOCATED,
    FOREIGN,
    ChangeKind,
    align,
    diff_records,
    find_repeats,
    fingerprint,
    format_entry,
    topology_key,
)

X, V, TMP = 0x10000, 0x20000, 0x90000


def rec(
    kernel: str = "sim.integrate",
    dim: tuple = (64,),
    arrays: tuple = ((0, X), (1, V)),
    scalars: tuple = ((2, 0.01),),
    line: int = 31,
    owners: dict | None = None,
    repeat: int = 1,
    stream: int | None = None,
) -> LaunchRecord:
    owners = owners or {}
    buffers = tuple(BufferArg(k, str(k), p, owner=owners.get(p), offset=0 if p in owners else None) for k, p in arrays)
    return LaunchRecord(
        "launch",
        kernel,
        dim,
        stream,
        arrays,
        scalars,
        Site("sim.py", line, "step", "sim"),
        params=("x", "v", "dt"),
        buffers=buffers,
        repeat=repeat,
    )


def owned() -> BufferSet:
    return BufferSet().add_range(X, 256, "sim.x").add_range(V, 256, "sim.v")


# -- keys ---------------------------------------------------------------------------------------------------


def test_key_with_buffers_labels_owned_and_marks_foreign() -> None:
    r = rec(arrays=((0, X + 8), (1, TMP)))
    assert topology_key(r, owned()) == (
        "launch",
        "sim.integrate",
        (64,),
        ((0, ("sim.x", 8)), (1, FOREIGN)),
        ((2, 0.01),),
    )


def test_key_options_scalars_streams_ignore() -> None:
    r = rec(arrays=((0, X), (1, TMP)), stream=7)
    ignore = BufferSet().add_range(TMP, 64, "tmp")
    key = topology_key(r, owned(), scalars=False, streams=True, ignore=ignore)
    assert key == ("launch", "sim.integrate", (64,), ((0, ("sim.x", 0)), (1, ALLOCATED)), 7)


def test_key_without_buffers_uses_recorded_owner_else_raw_pointer() -> None:
    r = rec(arrays=((0, X), (1, TMP)), owners={X: "gen.x"})
    assert topology_key(r)[3] == ((0, ("gen.x", 0)), (1, TMP))
    assert topology_key(r, raw=False)[3] == ((0, ("gen.x", 0)), (1, FOREIGN))


def test_null_pointer_stays_zero() -> None:
    assert topology_key(rec(arrays=((0, 0),)), owned())[3] == ((0, 0),)


# -- fingerprints -------------------------------------------------------------------------------------------


def test_fingerprint_ignores_pointers_times_and_sites_but_not_topology() -> None:
    a = [rec(arrays=((0, X), (1, TMP)), owners={X: "gen.x"})]
    b = [rec(arrays=((0, X), (1, TMP + 4096)), owners={X: "gen.x"}, line=99)]  # other foreign ptr, other line
    assert fingerprint(a) == fingerprint(b)
    assert len(fingerprint(a)) == 64
    assert fingerprint(a) != fingerprint([rec(arrays=((0, X), (1, TMP)), owners={X: "gen.v"})])
    assert fingerprint(a) != fingerprint([rec(arrays=((0, X), (1, TMP)), owners={X: "gen.x"}, scalars=((2, 0.02),))])
    assert fingerprint(a, scalars=False) == fingerprint(
        [rec(arrays=((0, X), (1, TMP)), owners={X: "gen.x"}, scalars=((2, 0.02),))], scalars=False
    )


def test_fingerprint_counts_a_folded_record_as_its_repetitions() -> None:
    assert fingerprint([rec()] * 3) == fingerprint([rec(repeat=3)])
    assert fingerprint([rec()] * 3) != fingerprint([rec()] * 2)


def test_fingerprint_is_stable_across_processes_and_hash_seeds() -> None:
    """Python's hash() is salted per process: a fingerprint built on it would differ between these runs."""
    code = textwrap.dedent(
        """
        from launchtrace.model import LaunchRecord, Site
        from launchtrace.topology import fingerprint
        site = Site("sim.py", 1, "f", "sim")
        scalars = ((1, 0.1), (2, "nan"), (3, (1.0, 2.5)))
        recs = [LaunchRecord("launch", "sim.k", (8, 2), None, ((0, 5),), scalars, site) for _ in range(3)]
        print(fingerprint(recs))
        """
    )
    digests = set()
    for seed in ("1", "2"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        digests.add(out.stdout.strip())
    assert len(digests) == 1


# -- alignment ----------------------------------------------------------------------------------------------


def apply_opcodes(a: list, b: list, ops: list) -> list:
    """Rebuild b from a and the opcodes, checking that they tile both sequences."""
    out: list = []
    i = j = 0
    for tag, i1, i2, j1, j2 in ops:
        assert (i1, j1) == (i, j), ops
        if tag == "equal":
            assert a[i1:i2] == b[j1:j2]
            out += a[i1:i2]
        else:
            assert tag in ("insert", "delete", "replace")
            out += b[j1:j2]
        i, j = i2, j2
    assert (i, j) == (len(a), len(b))
    return out


def matched(ops: list) -> int:
    return sum(i2 - i1 for tag, i1, i2, _, _ in ops if tag == "equal")


def test_align_one_insertion_is_one_insertion() -> None:
    assert align(list("abc"), list("axbc")) == [
        ("equal", 0, 1, 0, 1),
        ("insert", 1, 1, 1, 2),
        ("equal", 1, 3, 2, 4),
    ]


def test_align_long_traces_single_edit_exact() -> None:
    a = [1, 2, 3, 4, 5] * 20_000
    b = list(a)
    b.insert(50_000, 99)
    ops = align(a, b)
    assert ops == [
        ("equal", 0, 50_000, 0, 50_000),
        ("insert", 50_000, 50_000, 50_000, 50_001),
        ("equal", 50_000, 100_000, 50_001, 100_001),
    ]


def test_align_long_traces_with_an_insertion_every_step_finds_every_one() -> None:
    a = ["x", "i", "f"] * 5_000
    b = ["x", "i", "drag", "f"] * 5_000
    ops = align(a, b)
    assert apply_opcodes(a, b, ops) == b
    inserts = [op for op in ops if op[0] == "insert"]
    assert len(inserts) == 5_000 and all(op[4] - op[3] == 1 for op in inserts)
    assert matched(ops) == len(a)


def test_align_long_traces_with_a_change_every_step_pairs_them() -> None:
    a = ["x", "i(0.01)", "f"] * 5_000
    b = ["x", "i(0.02)", "f"] * 5_000
    ops = align(a, b)
    assert apply_opcodes(a, b, ops) == b
    assert [op for op in ops if op[0] != "equal"] == [("replace", i, i + 1, i, i + 1) for i in range(1, 15_000, 3)]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(0, 4), max_size=40), st.lists(st.integers(0, 4), max_size=40))
def test_align_small_is_a_valid_tiling_as_good_as_difflib(a: list, b: list) -> None:
    ops = align(a, b)
    assert apply_opcodes(a, b, ops) == b
    reference = difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
    assert matched(ops) >= matched(reference)


@settings(max_examples=30, deadline=None)
@given(
    st.lists(st.integers(0, 3), min_size=1, max_size=6),
    st.lists(st.tuples(st.integers(0, 3999), st.sampled_from(["ins", "del", "sub"])), max_size=20),
)
def test_align_long_is_a_valid_tiling_and_finds_scattered_edits(unit: list, edits: list) -> None:
    a = (unit * (4000 // len(unit) + 1))[:4000]
    b = list(a)
    for pos, kind in sorted(set(edits), reverse=True):
        if kind == "ins":
            b.insert(pos, 100 + pos)
        elif kind == "del":
            del b[pos]
        else:
            b[pos] = 100 + pos
    ops = align(a, b)
    assert apply_opcodes(a, b, ops) == b
    # Each edit costs at most one element of a (a deletion or substitution); a careless aligner loses more.
    assert matched(ops) >= len(a) - 2 * len(set(edits)) - 2


# -- diff entries -------------------------------------------------------------------------------------------


def test_diff_reports_an_inserted_launch_once_with_its_site() -> None:
    a = [rec(line=30), rec("sim.collide", line=31), rec("sim.integrate", line=32)]
    b = [a[0], a[1], rec("sim.apply_drag", dim=(32,), line=40), a[2]]
    entries = diff_records(a, b, owned())
    assert len(entries) == 1
    e = entries[0]
    assert (e.kind, e.index_a, e.index_b, e.record_b) == (ChangeKind.INSERTED, None, 2, b[2])
    assert format_entry(e) == "#2 inserted sim.apply_drag dim=(32,) (from sim.py:40 (step))"


def test_diff_reports_a_removed_launch() -> None:
    a = [rec(line=30), rec("sim.apply_drag", line=40), rec(line=32)]
    b = [a[0], a[2]]
    (e,) = diff_records(a, b, owned())
    assert (e.kind, e.index_a, e.index_b) == (ChangeKind.REMOVED, 1, None)
    assert format_entry(e) == "#1 removed sim.apply_drag dim=(64,) (from sim.py:40 (step))"


def test_diff_names_the_changed_scalar_buffer_and_dim_by_parameter() -> None:
    a = [rec(line=30), rec(line=31)]
    b = [rec(line=30, scalars=((2, 0.02),)), rec(line=31, dim=(128,), arrays=((0, X), (1, TMP)))]
    e1, e2 = diff_records(a, b, owned())
    assert e1.kind == ChangeKind.CHANGED and [(f.field, f.name, f.before, f.after) for f in e1.fields] == [
        ("scalar", "dt", 0.01, 0.02)
    ]
    assert format_entry(e1) == "#0 sim.integrate (from sim.py:30 (step)): scalar dt 0.01 -> 0.02"
    assert [(f.field, f.name) for f in e2.fields] == [("dim", ""), ("buffer", "v")]
    assert (
        format_entry(e2) == "#1 sim.integrate (from sim.py:31 (step)): dim (64,) -> (128,), buffer v sim.v -> <foreign>"
    )


def test_diff_pairs_by_site_when_every_launch_changed_and_one_was_inserted() -> None:
    a = [rec(line=16), rec(line=20)]
    b = [
        rec(line=16, scalars=((2, 0.02),)),
        rec(line=19, scalars=((2, 0.02),)),
        rec(line=20, scalars=((2, 0.02),)),
    ]
    entries = diff_records(a, b, owned())
    assert [(e.kind, e.index_a, e.index_b) for e in entries] == [
        (ChangeKind.CHANGED, 0, 0),
        (ChangeKind.INSERTED, None, 1),
        (ChangeKind.CHANGED, 1, 2),
    ]
    assert format_entry(entries[2]).startswith("#1->#2 sim.integrate (from sim.py:20 (step)): scalar dt")


def test_diff_kernel_swap_is_a_kernel_change() -> None:
    a = [rec("sim.a"), rec("sim.b"), rec("sim.c")]
    b = [rec("sim.a"), rec("sim.z"), rec("sim.c")]
    (e,) = diff_records(a, b)
    assert e.kind == ChangeKind.CHANGED and e.fields[0].field == "kernel"
    assert (e.fields[0].before, e.fields[0].after) == ("sim.b", "sim.z")


def test_diff_of_equal_traces_is_empty_and_streams_are_opt_in() -> None:
    a = [rec(stream=1), rec("sim.b")]
    b = [rec(stream=2), rec("sim.b")]
    assert diff_records(a, list(a)) == []
    assert diff_records(a, b) == []
    (e,) = diff_records(a, b, streams=True)
    assert [(f.field, f.before, f.after) for f in e.fields] == [("stream", 1, 2)]


# -- repeats ------------------------------------------------------------------------------------------------


def test_find_repeats_basic_periods() -> None:
    assert find_repeats(list("ababab")) == [(0, 2, 3)]
    assert find_repeats(list("xaaaay")) == [(1, 1, 4)]
    assert find_repeats(list("abcd")) == []
    assert find_repeats(list("aaaa")) == [(0, 1, 4)]  # the shortest period wins a tie
    assert find_repeats(list("xabcabcabcyy")) == [(1, 3, 3), (10, 1, 2)]


def test_find_repeats_ping_pong_buffers_have_period_two() -> None:
    step_even = ("launch", "sim.step", (64,), ((0, ("a", 0)), (1, ("b", 0))))
    step_odd = ("launch", "sim.step", (64,), ((0, ("b", 0)), (1, ("a", 0))))
    keys = [("launch", "init")] + [step_even, step_odd] * 50 + [("copy", "wp.copy")]
    assert find_repeats(keys) == [(1, 2, 50)]


def greedy_reference(keys: list, max_period: int) -> list:
    """The definition of find_repeats, written the slow and obvious way."""
    out, i, n = [], 0, len(keys)
    while i < n:
        best = None
        for p in range(1, max_period + 1):
            c = 1
            while i + (c + 1) * p <= n and keys[i + c * p : i + (c + 1) * p] == keys[i : i + p]:
                c += 1
            if c >= 2 and (best is None or c * p > best[1] * best[0]):
                best = (p, c)
        if best:
            out.append((i, best[0], best[1]))
            i += best[0] * best[1]
        else:
            i += 1
    return out


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 2), max_size=60), st.integers(1, 6))
def test_find_repeats_matches_its_definition(keys: list, max_period: int) -> None:
    assert find_repeats(keys, max_period=max_period) == greedy_reference(keys, max_period)


def test_find_repeats_runs_cover_identical_units() -> None:
    keys = ["i", "f", "c"] * 1000 + ["save"] + ["i", "f"] * 10
    runs = find_repeats(keys)
    assert runs == [(0, 3, 1000), (3001, 2, 10)]


def test_align_does_not_lose_matches_to_a_greedy_prefix() -> None:
    """Found by the property test above: trimming the common prefix and suffix first aligned 4 keys where the
    whole sequences align 5."""
    a, b = [2, 1, 2, 1, 1], [2, 2, 1, 0, 2, 1, 0, 1]
    ops = align(a, b)
    assert apply_opcodes(a, b, ops) == b
    assert matched(ops) == 5
