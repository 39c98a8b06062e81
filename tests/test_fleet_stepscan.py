"""The compiled step scanner and block fold (``launchtrace.analysis.fleet._stepscan``) against their Python
references (:mod:`launchtrace.analysis.fleet.stepscan`) on real spans, generated variations and hostile input;
the histogram parts they make against :meth:`ExpHistogram.add`; block accumulation against step by step; and the
line reader the fast path reads through."""

from __future__ import annotations

import dataclasses
import io
import math
import random
from array import array

import pytest

from conftest import upstream_fixtures
from launchtrace.analysis.fleet import stepscan
from launchtrace.analysis.fleet.baseline import LatencyAcc, by_run
from launchtrace.errors import UserError
from launchtrace.histogram import ExpHistogram
from launchtrace.sources import files
from launchtrace.spans import SpanData

FIXTURES = upstream_fixtures()

native = stepscan._compiled()
needs_native = pytest.mark.skipif(native is None, reason="the compiled scanner is not built here")

ROOT_ID = bytes.fromhex("00000000000000aa")
TRACE = bytes(range(16))
RESOURCE = (("service.name", "svc"), ("host.name", "h1"), ("process.pid", 7))


def _record(i: int, *, seq: int | None = None, ptrs: tuple = (1000, 2000), **extra) -> SpanData:
    attrs = [
        ("launchtrace.op", "launch"),
        ("launchtrace.kernel", f"k{i % 3}"),
        ("launchtrace.dim", (64,)),
        ("launchtrace.params", ("a", "b", "n")),
        ("launchtrace.array_keys", ("0", "1")),
        ("launchtrace.scalar_keys", ("2",)),
        ("launchtrace.arg.a.ptr", ptrs[0]),
        ("launchtrace.arg.b.ptr", ptrs[1]),
        ("launchtrace.scalar.n", 3),
        ("thread.id", 99),
        ("launchtrace.seq", i if seq is None else seq),
    ]
    attrs.extend(extra.items())
    return SpanData(
        TRACE, bytes.fromhex(f"{i + 1:016x}"), ROOT_ID, "k", 100 * i, 100 * i + 50, tuple(attrs), resource=RESOURCE
    )


def _root(**attrs) -> SpanData:
    base = {"launchtrace.scope.kind": "user", "launchtrace.scope.id": 5, "launchtrace.seq": 0, "step": 1}
    base.update(attrs)
    return SpanData(TRACE, ROOT_ID, None, "step", 0, 10_000, tuple(base.items()), resource=RESOURCE)


def _trace(n: int = 5) -> list[SpanData]:
    return [_record(i, ptrs=(1000 + 8 * (i % 2), 2000)) for i in range(n)] + [_root()]


def both(spans, verify: bool = False):
    """The compiled and the Python scanner's answers, each with a fresh interner (so the ids agree)."""
    c = stepscan.scanner_for().scan(spans, verify)
    p = stepscan.scanner_for(python=True).scan(spans, verify)
    return c, p


def _real_traces() -> list[list[SpanData]]:
    """The upstream fixtures' traces (other tools' spans: mostly declined, which both must do alike)."""
    from launchtrace.sources.stream import TraceStream

    out = []
    for p in sorted(FIXTURES.glob("*.json")):
        try:
            out.extend(TraceStream.from_paths([p]).span_lists())
        except UserError:  # a fixture that is no span file
            continue
    return out


@needs_native
def test_scanner_agrees_with_the_reference_on_plain_and_varied_steps() -> None:
    spans = _trace()
    c, p = both(spans)
    assert c == p and c is not None
    root, _signature, times, _code = c
    assert root == len(spans) - 1
    t = array("q")
    t.frombytes(times)
    assert list(t) == [v for s in spans[:-1] for v in (s.start_ns, s.end_ns)]
    assert both(spans, verify=True)[0] == both(spans, verify=True)[1]
    rng = random.Random(7)
    for _ in range(300):
        trial = list(spans)
        k = rng.randrange(len(trial) - 1)
        choice = rng.randrange(9)
        if choice == 0:  # another sequence order
            trial[k] = _record(k, seq=rng.randrange(-3, 10))
        elif choice == 1:  # pointers that repeat, or a null
            trial[k] = _record(k, ptrs=(rng.choice([0, 1000, 2000, 2**63 - 1]), rng.choice([0, 1000, 2000])))
        elif choice == 2:  # values of other types that compare equal
            trial[k] = _record(k, **{"launchtrace.scalar.x": rng.choice([1, 1.0, True, "1", (1,), -0.0, 0.0])})
        elif choice == 3:
            rng.shuffle(trial)
        elif choice == 4:  # a pointer key with a non-int value: taken as a plain value
            trial[k] = _record(k, ptrs=("1000", 2000))
        elif choice == 5:  # the sequence number is no int: declined
            trial[k] = _record(k, seq="3")
        elif choice == 6:  # a root attribute of a user, and one of ours
            trial[-1] = _root(step=rng.randrange(3), **{"launchtrace.scope.internal": rng.choice([True, False])})
        elif choice == 7:  # int-only root attributes that change
            trial[-1] = _root(**{"launchtrace.scope.id": rng.randrange(9), "launchtrace.seq": rng.randrange(9)})
        else:
            trial[k] = dataclasses.replace(trial[k], start_ns=rng.randrange(-(2**63), 2**63))
        c, p = both(trial)
        assert c == p, choice
    real = _real_traces()
    assert real
    for trace in real:
        c, p = both(trace)
        assert c == p


@needs_native
def test_equal_signatures_only_for_what_read_step_cannot_tell_apart() -> None:
    scanner = stepscan.scanner_for()
    base = scanner.scan(_trace())
    assert scanner.scan(_trace())[1] == base[1]
    other_ptrs = [_record(i, ptrs=(5000 + 8 * (i % 2), 7000)) for i in range(5)] + [_root()]
    assert scanner.scan(other_ptrs)[1] == base[1]  # the same pattern with other addresses
    shared = [_record(i, ptrs=(1000, 1000)) for i in range(5)] + [_root()]
    assert scanner.scan(shared)[1] != base[1]  # two arrays share a pointer: another topology
    for value in (1, 1.0, True):
        spans = [_record(i, **{"launchtrace.scalar.x": value}) for i in range(5)] + [_root()]
        assert len({scanner.scan(spans)[1]}) == 1
    codes = {
        scanner.scan([_record(i, **{"launchtrace.scalar.x": v}) for i in range(5)] + [_root()])[1]
        for v in (1, 1.0, True)
    }
    assert len(codes) == 3  # 1, 1.0 and True are told apart (their JSON differs)
    assert scanner.scan([*_trace()[:-1], _root(step=9)])[3] == base[3]  # a user's value: the same root code
    assert scanner.scan([*_trace()[:-1], _root(**{"launchtrace.scope.internal": True})])[3] != base[3]


@needs_native
@pytest.mark.parametrize(
    "spans",
    [
        [],
        "not a list",
        [1, 2, 3],
        _trace()[:-1],  # no root
        [*_trace(), _root()],  # two roots
        [*_trace(), _trace()[0]],  # a span id twice
        [dataclasses.replace(s, parent_span_id=b"\x01" * 8) if i == 0 else s for i, s in enumerate(_trace())],
        [dataclasses.replace(s, status_code=2) if i == 0 else s for i, s in enumerate(_trace())],
        [dataclasses.replace(s, status_code="2") if i == 0 else s for i, s in enumerate(_trace())],
        [dataclasses.replace(s, resource=(("x", 1),)) if i == 0 else s for i, s in enumerate(_trace())],
        [dataclasses.replace(s, attributes=()) if i == 0 else s for i, s in enumerate(_trace())],
        [dataclasses.replace(s, attributes=[("a", 1)]) if i == 0 else s for i, s in enumerate(_trace())],
        [dataclasses.replace(s, attributes=((1, 1),)) if i == 0 else s for i, s in enumerate(_trace())],
        [dataclasses.replace(s, attributes=(("a", 1, 2),)) if i == 0 else s for i, s in enumerate(_trace())],
        [dataclasses.replace(s, attributes=(("a", {"k": 1}),)) if i == 0 else s for i, s in enumerate(_trace())],
        [dataclasses.replace(s, attributes=(("a", math.nan),)) if i == 0 else s for i, s in enumerate(_trace())],
        [dataclasses.replace(s, start_ns=2**64) if i == 0 else s for i, s in enumerate(_trace())],
        [dataclasses.replace(s, end_ns=None) if i == 0 else s for i, s in enumerate(_trace())],
        [dataclasses.replace(s, span_id=b"\x01") if i == 0 else s for i, s in enumerate(_trace())],
        [_record(0, seq=2**70), _root()],
        [_record(0, ptrs=(2**64, 1)), _root()],
        [_record(0, **{"launchtrace.fold.count": 3}), _root()],
        [_record(0), _root(**{"launchtrace.op": "launch"})],
        [_record(0), dataclasses.replace(_root(), name=3)],
    ],
)
def test_hostile_traces_are_declined_alike_and_never_crash(spans) -> None:
    c, p = both(spans)
    assert c is None and p is None


@needs_native
def test_scanner_identity_table_stays_bounded() -> None:
    scanner = stepscan.scanner_for(intern=stepscan.Interner(limit=100))
    for i in range(40_000):  # a new value in every step: every pair a new object
        spans = [_record(0, **{"launchtrace.scalar.x": i}), _root()]
        assert scanner.scan(spans) is not None
    assert scanner.table_size() <= 1 << 16


@needs_native
def test_big_values_bound_the_tables() -> None:
    """Values of 60 KiB, each new: the identity table empties itself by bytes, the interner too; one of
    70 KiB gets no id at all (the trace goes the straightforward way)."""
    import resource

    intern = stepscan.Interner()
    scanner = stepscan.scanner_for(intern=intern)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for i in range(3000):  # 180 MB of values in all
        spans = [_record(0, **{"launchtrace.scalar.x": f"{i:08d}" + "x" * 60_000}), _root()]
        assert scanner.scan(spans) is not None
        assert intern.bytes <= stepscan.INTERN_BYTES
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mib < 100, grown_mib
    assert scanner.scan([_record(0, **{"launchtrace.scalar.x": "x" * 70_000}), _root()]) is None


EDGE = [1, 2, 3, 4, 7, 8, 1000, 1023, 1024, 1025, 2**31, 2**32 + 1, 2**52, 2**53 + 1, 2**62, 2**63 - 1]


@needs_native
def test_bucket_index_is_the_histograms() -> None:
    rng = random.Random(3)
    values = EDGE + [rng.randrange(1, 2**63) for _ in range(2000)] + [rng.randrange(1, 10**6) for _ in range(2000)]
    for v in values:
        expected = stepscan.bucket_index(v)
        assert native.bucket_index(v) == expected, v
        h = ExpHistogram(max_size=10**9)
        h.add(v)
        assert h.buckets == {expected: 1}
    for bad in (0, -1, 2**63, "1", 1.5):
        with pytest.raises(ValueError):
            native.bucket_index(bad)


@pytest.mark.parametrize("seed", range(6))
def test_add_indexed_equals_adding_each(seed: int) -> None:
    rng = random.Random(seed)
    values = [rng.choice([0, rng.randrange(1, 10 ** rng.randrange(1, 18)), rng.choice(EDGE)]) for _ in range(500)]
    one = ExpHistogram(max_size=rng.choice([2, 8, 160]))
    for v in values:
        one.add(v)
    blocks = ExpHistogram(max_size=one.max_size)
    for start in range(0, len(values), 37):
        part = values[start : start + 37]
        buckets: dict[int, int] = {}
        for v in part:
            if v > 0:
                buckets[stepscan.bucket_index(v)] = buckets.get(stepscan.bucket_index(v), 0) + 1
        zeros = sum(1 for v in part if v <= 0)
        blocks.add_indexed(buckets, len(part), sum(part), min(part), max(part), zeros)
    assert blocks == one
    assert (blocks._lo, blocks._hi) == (min(one.buckets), max(one.buckets))


def _block(rng: random.Random, steps: int, launches: int):
    rows = []
    for _ in range(steps):
        start = rng.randrange(1, 10**12)
        for _ in range(launches):
            s = start + rng.randrange(0, 10**6)
            rows += [s, s + rng.choice([0, 1, 2, 1024, rng.randrange(0, 10**7)])]
    return array("q", rows).tobytes()


@needs_native
@pytest.mark.parametrize("seed", range(8))
def test_fold_agrees_with_the_reference(seed: int) -> None:
    rng = random.Random(seed)
    launches = rng.randrange(1, 12)
    kernels = rng.randrange(1, launches + 1)
    kernel_of = array("q", [rng.randrange(kernels) for _ in range(launches)]).tobytes()
    repeats = array("q", [rng.choice([1, 1, 2, 7]) for _ in range(launches)]).tobytes()
    times = _block(rng, rng.randrange(0, 60), launches)
    positions = rng.randrange(0, launches + 1)
    args = (times, launches, repeats, kernel_of, kernels, positions)
    assert native.fold(*args) == stepscan.fold(*args)


@needs_native
def test_fold_declines_and_refuses_alike() -> None:
    untimed = array("q", [5, 0]).tobytes()  # an end time of 0
    huge = array("q", [-(2**63), 2**63 - 1]).tobytes()  # a duration past int64
    ones = array("q", [1]).tobytes()
    for times in (untimed, huge):
        assert native.fold(times, 1, ones, array("q", [0]).tobytes(), 1, 1) is None
        assert stepscan.fold(times, 1, ones, array("q", [0]).tobytes(), 1, 1) is None
    for bad in (
        (b"\x00" * 7, 1, ones, ones, 1, 1),
        (b"", 1, array("q", [0]).tobytes(), ones, 1, 1),
        (b"", 1, ones, array("q", [3]).tobytes(), 1, 1),
        (b"", 0, b"", b"", 1, 0),
    ):
        with pytest.raises(ValueError):
            native.fold(*bad)
        with pytest.raises(ValueError):
            stepscan.fold(*bad)


@pytest.mark.parametrize(("runs", "starts"), [(150, 10**9), (5, 10**9), (5, 40), (3, 3)])
def test_latency_blocks_equal_steps_one_by_one(runs: int, starts: int) -> None:
    """Many runs (past the kept 64) or few with many steps each (past the kept 256, with starts that tie), in
    blocks or one at a time, in any order or in start order (where blocks skip what cannot be kept)."""
    rng = random.Random(11 + runs + starts)
    steps = [(f"run{rng.randrange(runs)}", rng.randrange(1, starts + 1), rng.randrange(0, 10**6)) for _ in range(6000)]
    one = LatencyAcc()
    for run, start, value in steps:
        one.add_one(run, start, value)
    expected = one.to_proto().SerializeToString(deterministic=True)
    for order in (steps, sorted(steps, key=lambda s: s[1])):
        for size in (1, 37, 500):
            blocked = LatencyAcc()
            for i in range(0, len(order), size):
                block = order[i : i + size]
                runs_, starts_, values = [s[0] for s in block], [s[1] for s in block], [s[2] for s in block]
                blocked.add_block(by_run(runs_, starts_), starts_, values, stepscan._part(values))
            assert blocked.to_proto().SerializeToString(deterministic=True) == expected, size


@needs_native
def test_encoded_step_values_equal_added_ones() -> None:
    from launchtrace.v1 import baseline_pb2 as pb

    rng = random.Random(5)
    pairs = [(0, 0), (1, -1), (2**64 - 1, 2**63 - 1), (5, -(2**63))]
    pairs += [(rng.randrange(2**64), rng.randrange(-(2**63), 2**63)) for _ in range(200)]
    added, merged = pb.RunSteps(run="r"), pb.RunSteps(run="r")
    for start, value in pairs:
        added.values.add(start_unix_nano=start, value=value)
    merged.MergeFromString(native.encode_step_values(pairs))
    assert merged.SerializeToString(deterministic=True) == added.SerializeToString(deterministic=True)
    for bad in ([(-1, 0)], [(2**64, 0)], [(0, 2**63)], [(0, "1")], [(0,)], [[0, 0]]):
        assert native.encode_step_values(bad) is None
    with pytest.raises(TypeError):
        native.encode_step_values(((0, 0),))


def test_line_reader_splits_as_readline(monkeypatch) -> None:
    rng = random.Random(2)
    for _ in range(400):
        monkeypatch.setattr(files, "_READ_BYTES", rng.choice([1, 2, 3, 5, 8, 64]))
        monkeypatch.setattr(files, "_KEEP_BYTES", rng.choice([1, 4, 100, 1 << 24]))
        parts = [b"\n", b"a", b"bb", b"\r\n", b"x" * rng.randrange(0, 200)]
        data = b"".join(rng.choice(parts) for _ in range(rng.randrange(0, 80)))
        kept = []
        lines = []
        for line in files._read_lines(io.BytesIO(data)):
            lines.append(bytes(line))
            kept.append(line)
        assert lines == list(io.BytesIO(data))
        for line in kept:  # each view is released before the buffer is written again: no stale bytes to read
            with pytest.raises(ValueError):
                bytes(line)
