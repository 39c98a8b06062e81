"""rebuild's launch patterns (``records.seen_launch``): a launch span that repeats an earlier one in every
attribute but those its record takes as its own (seq, scalars, device time, value statistics) is read without
its dict. Each case here is rebuilt twice, with the patterns and without them, and must come out the same to the
value's type, warnings included: spans that differ in a fixed value, in the order or the number of their names,
in a value equal to another but read differently, or that hold a value that cannot be read.
"""

from __future__ import annotations

import dataclasses

import pytest

from launchtrace import conventions as C
from launchtrace.sources import rebuild as rebuild_module
from launchtrace.sources import records
from launchtrace.sources.rebuild import rebuild
from launchtrace.spans import STATUS_ERROR, SpanData

TRACE = bytes(range(16))
ROOT = (99).to_bytes(8, "big")


def _span(span_id: int, attrs: tuple, *, name: str = "k", parent: bytes | None = ROOT) -> SpanData:
    return SpanData(TRACE, span_id.to_bytes(8, "big"), parent, name, 100 * span_id, 100 * span_id + 7, attrs)


def _root() -> SpanData:
    scope = ((C.SCOPE_KIND, "user"), (C.SCOPE_ID, 1), (C.SEQ, 0))
    return SpanData(TRACE, ROOT, None, "step", 0, 10**6, scope)


def _launch_attrs(seq: object, *, ptr: object = 64, owner: object = "sim.x", dt: object = 0.5, extra=()) -> tuple:
    attrs = ((C.OP, "launch"), (C.KERNEL, "m.k"), (C.PARAMS, ("x", "dt")), (C.ARRAY_KEYS, ("0",)))
    attrs += ((C.SCALAR_KEYS, ("1",)), ("launchtrace.arg.x.ptr", ptr), ("launchtrace.arg.x.shape", (4,)))
    attrs += (("launchtrace.arg.x.owner", owner), ("launchtrace.scalar.dt", dt), *extra, (C.SEQ, seq))
    return attrs


def _both(spans: list[SpanData], monkeypatch: pytest.MonkeyPatch) -> tuple:
    """The rebuilt records and warnings with the patterns (a fresh cache) and without them."""
    records._PATTERNS.clear()
    records._RECORDS.clear()
    seen = rebuild(spans)
    with monkeypatch.context() as m:  # as before the patterns: none looked for, none remembered
        m.setattr(rebuild_module, "_seen", lambda name, attributes: None)
        m.setattr(records, "_remember", lambda span, d, layout: None)
        records._RECORDS.clear()
        plain = rebuild(spans)
    return seen, plain


def _same(spans: list[SpanData], monkeypatch: pytest.MonkeyPatch) -> list:
    seen, plain = _both([_root(), *spans], monkeypatch)
    got, want = seen.records(), plain.records()
    assert got == want
    assert [repr(dataclasses.astuple(r)) for r in got] == [repr(dataclasses.astuple(r)) for r in want]
    assert seen.warnings == plain.warnings and seen.malformed == plain.malformed
    return got


def test_repeating_launches_take_the_pattern_and_their_own_values(monkeypatch):
    spans = [_span(i, _launch_attrs(i, dt=0.25 * i)) for i in range(1, 9)]
    rebuilt = _same(spans, monkeypatch)
    assert [(r.seq, r.scalars, r.start_ns) for r in rebuilt] == [(i, ((1, 0.25 * i),), 100 * i) for i in range(1, 9)]
    records._PATTERNS.clear()
    rebuild([_root(), *spans])
    assert sum(p.hits for p in records._PATTERNS.values()) == len(spans) - 1  # all but the first: no dict


def test_a_differing_fixed_value_or_a_value_read_differently_is_not_taken_for_the_pattern(monkeypatch):
    spans = [_span(1, _launch_attrs(1)), _span(2, _launch_attrs(2, ptr=128)), _span(3, _launch_attrs(3, owner=1))]
    spans += [_span(4, _launch_attrs(4, owner=True)), _span(5, _launch_attrs(5, ptr=64.0))]
    spans += [_span(6, _launch_attrs(6, ptr=True)), _span(7, _launch_attrs(7, owner="sim.y"))]
    rebuilt = _same(spans, monkeypatch)
    assert [r.buffers[0].owner for r in rebuilt] == ["sim.x", "sim.x", "1", "True", "sim.x", "sim.x", "sim.y"]
    assert [r.arrays[0][1] for r in rebuilt] == [64, 128, 64, 64, 64, 1, 64]


def test_names_in_another_order_twice_or_one_more_are_read_from_the_dict(monkeypatch):
    first = _launch_attrs(1)
    swapped = (*first[:-2], (*first[-1][:1], 2), first[-2])  # seq before the scalar
    twice = (*_launch_attrs(3)[:-1], (C.SEQ, 30), (C.SEQ, 3))  # the dict keeps the last value
    doubled_fixed = (*_launch_attrs(4)[:-1], ("launchtrace.arg.x.ptr", 8), (C.SEQ, 4))
    more = _launch_attrs(5, extra=((C.DEVICE, "cpu"),))
    spans = [_span(1, first), _span(2, swapped), _span(3, twice), _span(4, doubled_fixed), _span(5, more)]
    spans += [_span(6, _launch_attrs(6)), _span(7, (*swapped[:-2], (C.SEQ, 7), swapped[-1]))]
    rebuilt = _same(spans, monkeypatch)
    assert [r.seq for r in rebuilt] == [1, 2, 3, 4, 5, 6, 7]
    assert rebuilt[3].arrays[0][1] == 8 and rebuilt[4].device == "cpu"


def test_own_values_of_every_kind_are_read_as_the_dict_reads_them(monkeypatch):
    stats = tuple(
        (C.arg_stats_attr("x", f), v) for f, v in zip(C.STATS_FIELDS, (1.5, 0.5, -1, 3, None)) if v is not None
    )
    device = ((C.DEVICE_TIME_START, "1000"), (C.DEVICE_TIME_END, 1500))
    spans = []
    for i, dt in enumerate([0.5, -0.0, 0, False, True, (1.0, 2), [1, [2]], "[1, 2]", "[oops", float("nan")], 1):
        spans.append(_span(i, _launch_attrs(i, dt=dt, extra=(*stats, *device))))
    spans.append(_span(20, _launch_attrs("21", extra=(*stats, *device))))  # a decimal string seq
    rebuilt = _same(spans, monkeypatch)
    assert len(rebuilt) == len(spans) and all(r.probes for r in rebuilt)


def test_a_repeating_launch_with_an_unreadable_own_value_warns_as_the_first_reading_does(monkeypatch):
    spans = [_span(1, _launch_attrs(1)), _span(2, _launch_attrs("two")), _span(3, _launch_attrs(3))]
    spans.append(_span(4, _launch_attrs(4, extra=((C.DEVICE_TIME_START, 5),))))
    spans.append(_span(5, _launch_attrs(5, extra=((C.DEVICE_TIME_START, "x"),))))
    seen, plain = _both([_root(), *spans], monkeypatch)
    assert seen.records() == plain.records() and len(seen.records()) == 3
    assert seen.warnings == plain.warnings and seen.malformed == plain.malformed == 2


def test_joined_errors_and_scopes_of_repeating_launches_are_kept(monkeypatch):
    timer = ((C.SCOPE_KIND, "timer"), (C.SCOPE_ID, 2), (C.SEQ, 1))
    inner = (50).to_bytes(8, "big")
    spans = [SpanData(TRACE, inner, ROOT, "sim", 10, 10**5, timer)]
    for i in range(2, 8):
        joined = ((C.SCOPE_JOINED, i % 2 == 0),)
        spans.append(_span(i, _launch_attrs(i, extra=joined), parent=inner if i < 5 else ROOT))
    spans.append(dataclasses.replace(_span(8, _launch_attrs(8)), status_code=STATUS_ERROR, status_message="boom"))
    spans.append(_span(9, _launch_attrs(9), parent=(77).to_bytes(8, "big")))  # a parent that is missing
    rebuilt = _same(spans, monkeypatch)
    assert [r.scope_id for r in rebuilt] == [None, 2, None, 1, None, 1, 1, None]
    assert rebuilt[6].error == "boom"


def test_launches_alternating_between_states_are_each_found_by_the_pair_where_they_differ(monkeypatch):
    states = [dict(ptr=64, owner="sim.states[0]"), dict(ptr=128, owner="sim.states[1]")]
    spans = [_span(i, _launch_attrs(i, **states[i % 2])) for i in range(1, 11)]
    rebuilt = _same(spans, monkeypatch)
    assert [r.buffers[0].owner for r in rebuilt] == [states[i % 2]["owner"] for i in range(1, 11)]
    records._PATTERNS.clear()
    rebuild([_root(), *spans])
    (patterns,) = records._PATTERNS.values()
    assert patterns.probe is not None and patterns.hits == len(spans) - 2  # each state read once from its dict
    # where they differ in a value that cannot be a key (a list the record does not read), each is compared in turn
    records._PATTERNS.clear()
    spans = [_span(i, _launch_attrs(i, extra=(("user.tags", [i % 3]),))) for i in range(1, 11)]
    _same(spans, monkeypatch)
    records._PATTERNS.clear()
    rebuild([_root(), *spans])
    (patterns,) = records._PATTERNS.values()
    assert patterns.probe is None and len(patterns.seen) == 3 and patterns.hits == len(spans) - 3


def test_a_pattern_takes_the_latest_equal_pairs_and_still_matches_what_equals_them(monkeypatch):
    # 1, True and 1.0 are equal and read as the pointer 1; the pattern keeps the latest span's pairs
    spans = [_span(i, _launch_attrs(i, ptr=ptr)) for i, ptr in enumerate([1, True, 1.0, 1, True], 1)]
    rebuilt = _same(spans, monkeypatch)
    assert [r.arrays[0][1] for r in rebuilt] == [1] * 5 and all(type(r.arrays[0][1]) is int for r in rebuilt)
    records._PATTERNS.clear()
    rebuild([_root(), *spans])
    (patterns,) = records._PATTERNS.values()
    (seen,) = patterns.seen
    assert patterns.hits == 4 and seen.fixed == seen.fixed_at(spans[-1].attributes)
    assert all(a is b for a, b in zip(seen.fixed, seen.fixed_at(spans[-1].attributes)))  # the very pairs


def test_own_pairs_read_before_are_taken_again_and_only_seq_is_read(monkeypatch):
    first = _launch_attrs(1, dt=(1.0, -0.0))  # the same scalar pair objects in every span: as the reader shares them
    seqs = [1, 2, "3", 4, True, 6, "x", 8]
    spans = [_span(i, (*first[:-1], (C.SEQ, seq))) for i, seq in enumerate(seqs, 1)]
    spans.append(_span(9, (*first[:-2], ("launchtrace.scalar.dt", (1.0, 0.0)), (C.SEQ, 9))))  # an equal vector
    spans.append(_span(10, (*first[:-1], (C.SEQ, 10))))
    reads = []
    own = records._Layout._own
    monkeypatch.setattr(records._Layout, "_own", lambda self, d: reads.append(1) or own(self, d))
    rebuilt = _same(spans, monkeypatch)
    assert [r.seq for r in rebuilt] == [1, 1, 2, 3, 4, 6, 8, 9, 10]  # in seq order; "x" cannot be read: warned
    negative, positive = "((1, (1.0, -0.0)),)", "((1, (1.0, 0.0)),)"
    assert [repr(r.scalars) for r in rebuilt] == [negative] * 7 + [positive, negative]
    reads.clear()
    records._PATTERNS.clear()
    rebuild([_root(), *spans])
    assert len(reads) < len(spans) - 3  # most spans took the scalars read for the one before
    # a pair of another length where seq is: the dict's reading, which refuses it, with the patterns or not
    broken = [*spans[:3], _span(11, (*first[:-1], (C.SEQ, 11, 12)))]
    for patterns in (True, False):
        with monkeypatch.context() as m:
            if not patterns:
                m.setattr(rebuild_module, "_seen", lambda name, attributes: None)
            with pytest.raises(ValueError):
                rebuild([_root(), *broken])


def test_patterns_are_bounded_and_start_over_past_their_bound(monkeypatch):
    monkeypatch.setattr(records, "_MAX_NAMES", 3)
    spans = [_span(i, _launch_attrs(i), name=f"k{i % 5}") for i in range(1, 31)]
    rebuilt = _same(spans, monkeypatch)
    assert [r.seq for r in rebuilt] == list(range(1, 31))
    assert 0 < len(records._PATTERNS) <= 3 and all(len(p.seen) <= records._MAX_SEEN for p in records._PATTERNS.values())


class _Uncomparable:
    """An attribute value whose comparison raises (as a NumPy array's truth value does)."""

    def __eq__(self, other: object) -> bool:
        raise ValueError("no truth value")

    __ne__ = __eq__
    __hash__ = object.__hash__


def test_names_that_are_no_key_and_values_that_cannot_be_compared_are_read_from_the_dict(monkeypatch):
    odd = _Uncomparable()
    spans = [
        _span(i, _launch_attrs(i, extra=(("user.thing", odd if i % 2 else _Uncomparable()),))) for i in range(1, 7)
    ]
    spans += [_span(i, _launch_attrs(i), name=["k"]) for i in range(7, 10)]  # type: ignore[arg-type]
    spans += [_span(i, _launch_attrs(i)) for i in range(10, 13)]
    rebuilt = _same(spans, monkeypatch)
    assert [r.seq for r in rebuilt] == list(range(1, 13))
