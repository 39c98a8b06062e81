"""``diff``'s shared work (issue 25): :func:`~launchtrace.analysis.segments.unowned_by_order` works a call site's
arrays out once per (arrays, buffers) tuples met in one call, and gives what working each record out gives.

Random segments of records drawn from a few shared tuples (as the rebuild shares a call site's), with owned
buffers, unowned ones inside allocations the capture saw (two allocations of one site, offsets), foreign
pointers, null arrays, records whose buffers do not line up with their arrays and copies of host data and
others sharing those tuples, are compared with the same
records each holding tuples of their own (so nothing is shared), to the type of every value (``repr``)."""

from __future__ import annotations

import random

import pytest

from launchtrace.analysis.segments import unowned_by_order
from launchtrace.model import BufferArg, LaunchRecord, Site

SITE = Site("p.py", 1, "f")
ALLOCS = ["State.x#1 (springs.py:41)", "State.x#2 (springs.py:41)", "State.v#1 (springs.py:42)"]


def _buffer(rng: random.Random, key: int) -> BufferArg:
    kind = rng.choice(["owned", "alloc", "foreign", "null"])
    if kind == "owned":
        return BufferArg(key, "a", 0x1000 + 16 * key, (4,), "float32", 16, rng.choice(["x", "y"]), rng.choice([0, 8]))
    if kind == "alloc":
        ptr = rng.choice([0x2000, 0x2010, 0x3000])
        return BufferArg(key, "b", ptr, (4,), "float32", 16, alloc=rng.choice(ALLOCS), offset=rng.choice([0, 16]))
    return BufferArg(key, "c", 0 if kind == "null" else rng.choice([0x4000, 0x5000, 0x2000]), (4,), "float32", 16)


def _segment(seed: int) -> list[LaunchRecord]:
    rng = random.Random(seed)
    pool = []
    for _ in range(4):
        buffers = tuple(_buffer(rng, k) for k in range(rng.randint(0, 3)))
        arrays = tuple((b.key, b.ptr) for b in buffers)
        if rng.random() < 0.2:  # buffers that do not line up with the arrays
            buffers = buffers[::-1] if rng.random() < 0.5 else buffers[:-1]
        pool.append((arrays, buffers))
    out = []
    for seq in range(rng.randint(0, 30)):
        arrays, buffers = rng.choice(pool)
        op, api = rng.choice(
            [("launch", "wp.launch"), ("copy", "wp.copy"), ("copy", "wp.array"), ("copy", "wp.array.numpy")]
        )
        out.append(LaunchRecord(op, "m.k", (4,), None, arrays, (), SITE, buffers=buffers, seq=seq, api=api))
    return out


def _own_tuples(records: list[LaunchRecord]) -> list[LaunchRecord]:
    """The same records, each with arrays and buffers tuples of its own (equal, never the same objects)."""
    out = []
    for rec in records:
        arrays = tuple([tuple(list(pair)) for pair in rec.arrays] + [None])[:-1]
        buffers = tuple([*rec.buffers, None])[:-1]
        out.append(
            LaunchRecord(rec.op, rec.kernel, rec.dim, None, arrays, (), SITE, buffers=buffers, seq=rec.seq, api=rec.api)
        )
    return out


@pytest.mark.parametrize("seed", range(200))
def test_unowned_by_order_of_shared_tuples_is_that_of_own_ones(seed: int) -> None:
    shared = _segment(seed)
    own = _own_tuples(shared)
    assert all(a.arrays is not b.arrays or not a.arrays for a, b in zip(shared, own, strict=True))
    assert repr(unowned_by_order(shared)) == repr(unowned_by_order(own))


def test_a_pair_met_again_names_nothing_new() -> None:
    """Pointers first met in a later record number after those of the repeated pair."""
    first = (BufferArg(0, "c", 0x4000, (4,), "float32", 16),)
    second = (BufferArg(0, "c", 0x5000, (4,), "float32", 16),)
    recs = [
        LaunchRecord("launch", "m.k", (4,), None, ((0, b[0].ptr),), (), SITE, buffers=b, seq=i)
        for i, b in enumerate([first, first, second, first])
    ]
    recs[1] = LaunchRecord("launch", "m.k", (4,), None, recs[0].arrays, (), SITE, buffers=first, seq=1)
    recs[3] = LaunchRecord("launch", "m.k", (4,), None, recs[0].arrays, (), SITE, buffers=first, seq=3)
    names = [rec.arrays[0][1] for rec in unowned_by_order(recs)]
    assert names == ["<unowned #0>", "<unowned #0>", "<unowned #1>", "<unowned #0>"]
