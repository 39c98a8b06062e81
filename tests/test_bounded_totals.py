"""``Totals`` (the report's and chrome-trace's exact counts of every span) reads a span's attributes by where its
layout puts them, worked out once per layout, instead of making a dict of each span (issue 25's speed). These
tests hold it to the plain reading: a dict of the attributes (the last of a repeated name wins), on spans of
any layout, with repeated names, missing or null values, folds, dropped-span counts and the name caps.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from launchtrace import conventions as C
from launchtrace.analysis import bounded
from launchtrace.analysis.bounded import KernelTotal, Totals
from launchtrace.spans import SpanData


def _int(value: object) -> int:
    try:
        return int(value)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return 0


def plain_totals(traces: list[list[SpanData]], cap: int) -> dict:
    """What Totals must count, span by span through a dict of each span's attributes."""
    kernels: dict = {}
    threads: set = set()
    devices: set = set()
    out = {"spans": 0, "operations": 0, "dropped": 0, "traces": 0}
    for spans in traces:
        out["traces"] += 1
        out["spans"] += len(spans)
        for span in spans:
            attrs = dict(span.attributes)
            thread = attrs.get(C.THREAD_ID)
            if thread is not None and thread not in threads and len(threads) < cap:
                threads.add(thread)
            op = attrs.get(C.OP)
            if op is None:
                if C.DROPPED_SPANS in attrs:
                    out["dropped"] += _int(attrs[C.DROPPED_SPANS])
                continue
            key = (op, attrs.get(C.KERNEL) or span.name)
            row = kernels.get(key)
            if row is None:  # the cap on names, as Totals applies it
                row = bounded._capped(kernels, (str(key[0]), str(key[1])), KernelTotal)
            n = 1
            if C.FOLD_LAUNCHES in attrs or C.REPEAT in attrs:
                n = _int(attrs.get(C.FOLD_LAUNCHES)) or _int(attrs.get(C.REPEAT)) or 1
            row.spans += 1
            row.operations += n
            if span.end_ns - span.start_ns > 0:
                row.total_ns += span.end_ns - span.start_ns
            out["operations"] += n
            device = attrs.get(C.DEVICE)
            if device and device not in devices and len(devices) < cap:
                devices.add(str(device))
    return {**out, "kernels": kernels, "threads": threads, "devices": devices}


NAMES = [C.OP, C.KERNEL, C.THREAD_ID, C.DEVICE, C.FOLD_LAUNCHES, C.REPEAT, C.DROPPED_SPANS, "code.line.number", "x"]
VALUES = st.one_of(
    st.sampled_from(["launch", "copy", "k1", "k2", "cpu", "cuda:0", "", "7", "x"]),
    st.integers(-3, 40),
    st.none(),
    st.booleans(),
)
ATTRIBUTES = st.lists(st.tuples(st.sampled_from(NAMES), VALUES), max_size=9).map(tuple)
SPAN = st.builds(
    lambda attrs, name, start, length, root: SpanData(
        trace_id=bytes(16),
        span_id=bytes(8),
        parent_span_id=None if root else bytes(7) + b"\x01",
        name=name,
        start_ns=start,
        end_ns=start + length,
        attributes=attrs,
    ),
    ATTRIBUTES,
    st.sampled_from(["k1", "step", ""]),
    st.integers(0, 1000),
    st.integers(-5, 1000),
    st.booleans(),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(SPAN, min_size=1, max_size=8), min_size=1, max_size=6), st.sampled_from([2, 3, 1000]))
def test_totals_count_what_a_dict_of_each_span_says(traces, cap) -> None:
    old = bounded.MAX_NAMES
    bounded.MAX_NAMES = cap
    try:
        totals = Totals()
        for spans in traces:
            totals.add(spans)
        want = plain_totals(traces, cap)
    finally:
        bounded.MAX_NAMES = old
    assert (totals.traces, totals.spans, totals.operations, totals.dropped) == (
        want["traces"], want["spans"], want["operations"], want["dropped"],
    )  # fmt: skip
    assert totals.threads == want["threads"]
    assert totals.devices == want["devices"]
    assert {k: (r.spans, r.operations, r.total_ns) for k, r in totals.kernels.items()} == {
        k: (r.spans, r.operations, r.total_ns) for k, r in want["kernels"].items()
    }


def test_a_repeated_name_counts_its_last_value() -> None:
    span = SpanData(
        trace_id=bytes(16), span_id=bytes(8), parent_span_id=None, name="s", start_ns=1, end_ns=5,
        attributes=((C.OP, "launch"), (C.KERNEL, "first"), (C.THREAD_ID, 1), (C.KERNEL, "last"), (C.REPEAT, 3)),
    )  # fmt: skip
    totals = Totals()
    totals.add([span])
    assert list(totals.kernels) == [("launch", "last")]
    assert totals.operations == 3 and totals.threads == {1}


def test_equal_values_of_two_types_count_as_written() -> None:
    """A device of ``1`` and one of ``True`` are two devices ("1", "True") as counting each span's text gives,
    though a set of the raw values holds one; threads keep the first of equal values, as before."""
    spans = [
        SpanData(
            trace_id=bytes(16),
            span_id=bytes(7) + bytes([k]),
            parent_span_id=None if k == 2 else bytes(8),
            name="k",
            start_ns=1,
            end_ns=2,
            attributes=((C.OP, "launch"), (C.DEVICE, device), (C.THREAD_ID, device)),
        )
        for k, device in enumerate([1, True, "cpu"])
    ]
    totals = Totals()
    totals.add(spans)
    assert totals.devices == {"1", "True", "cpu"}
    assert len(totals.threads) == 2
