"""The span builder's compiled common case (``launchtrace.export._fastbuild``) against its Python reference.

Random event streams (hypothesis): nested scopes, unscoped launches (step roots closed by count and by time
window), launches copied from templates as the materializer copies them, errors, foreign buffers, repeats,
probes, long kernel names; folding on and off, small span budgets, trace sampling. Each stream goes through two
builders whose random generators start from the same seed, one with the compiled loop and one without; the
spans (ids included), the counters and the fingerprints must be equal.
"""

from __future__ import annotations

import dataclasses
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from launchtrace import conventions as C
from launchtrace import native
from launchtrace.export import spanbuilder
from launchtrace.export.config import ExportConfig
from launchtrace.export.spanbuilder import SpanBuilder
from launchtrace.model import DeviceTime, LaunchRecord
from test_spanbuilder import RESOURCE, Events

COMPILED = native.load("launchtrace.export._fastbuild")
pytestmark = pytest.mark.skipif(COMPILED is None, reason="launchtrace.export._fastbuild is not built here")

KERNELS = ("sim.integrate", "sim.collide", "sim." + "k" * 40)  # the last one is longer than the length limit


class TemplateEvents(Events):
    """Events whose repeated launches are copies of a first one (``template``), as the materializer makes."""

    def __init__(self) -> None:
        super().__init__()
        self.protos: dict[tuple, LaunchRecord] = {}

    def repeat(self, kernel: str, **kw) -> None:
        key = (kernel, tuple(sorted(kw.items())))
        proto = self.protos.get(key)
        rec = self.launch(kernel, **kw)
        if proto is None:
            self.protos[key] = rec
            return
        copy = dataclasses.replace(proto, start_ns=rec.start_ns, end_ns=rec.end_ns, seq=rec.seq,
                                   scope_id=rec.scope_id, template=proto)  # fmt: skip
        self.events[-1] = ("record", copy)

    def gap(self, ns: int) -> None:
        self.t += ns


op = st.one_of(
    st.tuples(st.just("begin"), st.sampled_from(["step", "substep"])),
    st.tuples(st.just("end"), st.none()),
    st.tuples(st.just("launch"), st.sampled_from(KERNELS)),
    st.tuples(st.just("launch"), st.sampled_from(KERNELS[:2])),
    st.tuples(st.just("variant"), st.sampled_from(["error", "foreign", "repeat", "probes", "dt"])),
    st.tuples(st.just("gap"), st.sampled_from([10, 2_000_000_000])),
)


def _events(ops: list) -> list:
    ev = TemplateEvents()
    for kind, arg in ops:
        if kind == "begin":
            ev.begin(arg)
        elif kind == "end" and ev.open:
            ev.end()
        elif kind == "launch":
            ev.repeat(arg)
        elif kind == "variant":
            kw = {"error": {"error": "ValueError: bad"}, "foreign": {"foreign": True}, "repeat": {"repeat": 3},
                  "probes": {"probes": (DeviceTime(5, 9),)}, "dt": {"dt": 0.5}}[arg]  # fmt: skip
            ev.repeat(KERNELS[0], **kw)
        elif kind == "gap":
            ev.gap(arg)
    while ev.open:
        ev.end()
    return ev.events


def _build(events: list, compiled: bool, seed: int, **config) -> tuple:
    builder = SpanBuilder(ExportConfig.resolve(env={}, file_path="x.jsonl", **config), resource=RESOURCE)
    builder._rng.seed(seed)
    saved = spanbuilder._fastbuild
    spanbuilder._fastbuild = COMPILED if compiled else None
    try:
        spans = []
        for i in range(0, len(events), 7):  # several feeds, as the worker drains in chunks
            spans += builder.feed(events[i : i + 7], now_ns=0)
        spans += builder.flush(now_ns=10**18)
    finally:
        spanbuilder._fastbuild = saved
    return spans, builder.dropped(), builder.traces_started, builder.unknown_scope_ends


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ops=st.lists(op, max_size=60),
    seed=st.integers(0, 2**32),
    fold=st.sampled_from(["off", "always", "auto"]),
    budget=st.sampled_from([3, 5, 12, 40, 2000]),
    step_max=st.sampled_from([2, 1000]),
    sampler=st.sampled_from(["always_on", "traceidratio"]),
)
def test_compiled_loop_builds_the_spans_python_builds(ops, seed, fold, budget, step_max, sampler):
    events = _events(ops)
    config = dict(fold=fold, span_budget=budget, step_max_spans=step_max, max_attribute_length=30,
                  sampler=sampler, sampler_arg=0.5)  # fmt: skip
    assert _build(events, True, seed, **config) == _build(events, False, seed, **config)


class _ZeroIds(random.Random):
    """Draws in which every other span id comes out all zero (an invalid span id in OTLP)."""

    def randbytes(self, n: int) -> bytes:
        return (bytes(8) + self.getrandbits(64).to_bytes(8, "big")) * (n // 16)


def test_an_all_zero_span_id_becomes_one_on_both_paths():
    """The span ids' draw is shared by the compiled loop and the Python (``ready.pop()`` on both): an id drawn
    all zero is handed out as 1 by either, and both give the same ids in the same order."""
    events = _events([("begin", "step"), *[("launch", KERNELS[0])] * 40, ("end", None)])
    built = []
    for compiled in (True, False):
        builder = SpanBuilder(ExportConfig.resolve(env={}, file_path="x.jsonl"), resource=RESOURCE)
        builder._rng.seed(3)
        builder._ids.rng = _ZeroIds(3)
        saved, spanbuilder._fastbuild = spanbuilder._fastbuild, COMPILED if compiled else None
        try:
            built.append(builder.feed(events, now_ns=0) + builder.flush(now_ns=10**18))
        finally:
            spanbuilder._fastbuild = saved
    ids = [s.span_id for s in built[0]]
    assert built[0] == built[1] and len(ids) == 41
    assert bytes(8) not in ids and ids.count((1).to_bytes(8, "big")) == 20


@pytest.mark.parametrize("fold", ["off", "auto"])
def test_the_compiled_loop_takes_the_common_case(fold):
    """A run of repeated launches under a scope and without one is built in C: Python's ``_on_record`` sees
    only the records the compiled loop leaves to it (the first of each kernel and its first copy), also while
    ``fold="auto"`` holds a trace's spans back."""
    ev = TemplateEvents()
    ev.begin("step")
    for _ in range(50):
        ev.repeat(KERNELS[0])
    ev.end()
    for _ in range(50):
        ev.repeat(KERNELS[1])
    calls = []
    builder = SpanBuilder(ExportConfig.resolve(env={}, file_path="x.jsonl", fold=fold), resource=RESOURCE)
    python_on_record = builder._on_record
    builder._handlers["record"] = lambda rec: (calls.append(rec), python_on_record(rec))
    spans = builder.feed(ev.events, now_ns=0) + builder.flush(now_ns=10**18)
    assert len([s for s in spans if s.name in KERNELS]) == 100
    assert len(calls) <= 4


def test_a_record_the_loop_cannot_read_goes_to_python():
    """Trouble while looking at an event (here a record without the fields of a LaunchRecord) changes nothing
    and hands the event to Python, which reports it as it always did."""
    builder = SpanBuilder(ExportConfig.resolve(env={}, file_path="x.jsonl"), resource=RESOURCE)
    events = [("record", object())]
    assert COMPILED.records(builder.compiled_view, events, 0) == 0
    assert builder._out == [] and builder._steps == {}


def test_wrong_arguments_raise_before_anything_is_built():
    builder = SpanBuilder(ExportConfig.resolve(env={}, file_path="x.jsonl"))
    for wrong in (object(), builder, tuple(builder.compiled_view)[:-1]):  # the builder itself is not its view
        with pytest.raises(TypeError, match="compiled_view"):
            COMPILED.records(wrong, [], 0)
    with pytest.raises(TypeError):
        COMPILED.records(SpanBuilder(ExportConfig.resolve(env={}, file_path="x.jsonl")).compiled_view, (), 0)


@pytest.mark.parametrize("fold", ["off", "auto"])
@pytest.mark.parametrize("budget", [12, 40, 2000])
@pytest.mark.parametrize("step_max", [5, 1000])
@pytest.mark.parametrize("scoped", [True, False])
def test_long_runs_cross_budgets_and_step_bounds_as_python_does(budget, step_max, scoped, fold):
    """Long runs of template copies: the budget runs out and step roots close by count in the middle of a
    compiled run; a time gap closes a step by its window."""
    ev = TemplateEvents()
    for i in range(120):
        if scoped and i % 40 == 0:
            if ev.open:
                ev.end()
            ev.begin("step")
        if i == 70:
            ev.gap(2_000_000_000)
        ev.repeat(KERNELS[i % 2])
    while ev.open:
        ev.end()
    config = dict(fold=fold, span_budget=budget, step_max_spans=step_max)
    compiled, python = _build(ev.events, True, 7, **config), _build(ev.events, False, 7, **config)
    assert compiled == python
    if fold == "off" or budget == 2000:
        assert len(compiled[0]) > 10
    if fold == "auto":  # a trace past its budget folds instead of losing its launches
        assert compiled[1]["budget"] == 0
        assert any(s.attribute(C.FOLD_COUNT) for s in compiled[0]) == (budget < 2000 and (scoped or step_max > 5))


def test_the_compiled_view_is_the_builders_own_state_in_the_order_the_c_reads():
    """The C's one interface to the builder: the members it takes by position, named and checked at load, and
    the builder's own tables (changed in place by both sides), also after spans are taken."""
    from launchtrace.export.spanbuilder import CompiledView

    assert CompiledView._fields == COMPILED.VIEW_FIELDS
    builder = SpanBuilder(ExportConfig.resolve(env={}, file_path="x.jsonl"), resource=RESOURCE)
    view = builder.compiled_view
    assert view.scopes is builder._scopes and view.steps is builder._steps and view.ids is builder._ids
    assert view.limit == builder.config.max_attribute_length and view.step_max == builder.config.step_max_spans
    events = _events([("launch", KERNELS[0])] * 20)
    spans = builder.feed(events, now_ns=0) + builder.flush(now_ns=10**18)
    assert len(spans) > 20 and builder.compiled_view is view and view.out is builder._out and view.out == []
