"""SpanBuilder on hand-built capture events: spans, parentage, traces, steps, budget, sampling, config."""

from __future__ import annotations

import dataclasses
import itertools
import logging
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from launchtrace import conventions as C
from launchtrace import topology
from launchtrace.export.config import ExportConfig, default_file_path
from launchtrace.export.spanbuilder import AUTO_FOLD_SWITCH, STEP_SPAN_NAME, SpanBuilder
from launchtrace.export.spanfactory import make_span
from launchtrace.export.spanresource import build_resource
from launchtrace.model import BufferArg, LaunchRecord, ScopeRecord, Site
from launchtrace.spans import STATUS_ERROR, SpanData, SpanEvent, SpanLink

SITE = Site("sim.py", 12, "step", "sim")
RESOURCE = (("service.name", "test"),)


class Events:
    """Builds an event stream the way capture emits it (seq increasing, times increasing)."""

    def __init__(self) -> None:
        self.seq = 0
        self.t = 1_000_000
        self.events: list[tuple[str, object]] = []
        self.open: list[ScopeRecord] = []
        self.next_id = 1

    def _tick(self) -> tuple[int, int]:
        self.seq += 1
        self.t += 1000
        return self.seq, self.t

    def begin(self, name: str, kind: str = "user", internal: bool = False, **attrs) -> ScopeRecord:
        seq, t = self._tick()
        parent = self.open[-1].id if self.open else None
        s = ScopeRecord(self.next_id, name, kind, parent, tuple(attrs.items()), start_ns=t, seq=seq,
                        internal=internal, site=SITE)  # fmt: skip
        self.next_id += 1
        self.open.append(s)
        self.events.append(("scope_begin", s))
        return s

    def end(self, error: str | None = None) -> None:
        _, t = self._tick()
        s = self.open.pop()
        self.events.append(("scope_end", dataclasses.replace(s, end_ns=t, error=error)))

    def launch(self, kernel: str = "sim.integrate", ptrs=(0x1000, 0x2000), dt: float = 0.01, **kw) -> LaunchRecord:
        seq, t = self._tick()
        buffers = tuple(
            BufferArg(i, ("x", "y")[i], p, (16,), "float32", 64, owner=None if kw.get("foreign") else "sim.buf",
                      offset=None if kw.get("foreign") else 64 * i, foreign=bool(kw.get("foreign")))
            for i, p in enumerate(ptrs)
        )  # fmt: skip
        kw.pop("foreign", None)
        r = LaunchRecord("launch", kernel, (16,), None, tuple(enumerate(ptrs)), ((2, dt),), SITE,
                         params=("x", "y", "dt"), buffers=buffers, device="cpu", start_ns=t, end_ns=t + 500,
                         seq=seq, scope_id=self.open[-1].id if self.open else None, **kw)  # fmt: skip
        self.events.append(("record", r))
        return r


def build(events, **config) -> tuple[SpanBuilder, list[SpanData]]:
    config.setdefault("file_path", "x.jsonl")
    builder = SpanBuilder(ExportConfig.resolve(env={}, **config), resource=RESOURCE)
    spans = builder.feed(events, now_ns=0)
    return builder, spans + builder.flush(now_ns=10**18)


def by_name(spans: list[SpanData], name: str) -> list[SpanData]:
    return [s for s in spans if s.name == name]


# --- spans and parentage ----------------------------------------------------------------------------------


def test_one_span_per_record_named_by_kernel_under_its_scope():
    ev = Events()
    ev.begin("step")
    a = ev.launch("sim.integrate")
    ev.launch("wp.copy")
    ev.end()
    _, spans = build(ev.events, fold=False)
    assert [s.name for s in spans] == ["sim.integrate", "wp.copy", "step"]
    root = spans[-1]
    assert root.parent_span_id is None
    assert all(s.parent_span_id == root.span_id and s.trace_id == root.trace_id for s in spans[:2])
    first = spans[0]
    assert (first.start_ns, first.end_ns) == (a.start_ns, a.end_ns)
    attrs = first.attributes_dict()
    assert attrs[C.OP] == "launch" and attrs[C.KERNEL] == "sim.integrate" and attrs[C.MODULE] == "sim"
    assert attrs[C.DIM] == (16,) and attrs[C.DEVICE] == "cpu" and attrs[C.BYTES] == 128
    assert attrs[C.arg_attr("x", C.ARG_OWNER)] == "sim.buf" and attrs[C.arg_attr("y", C.ARG_OFFSET)] == 64
    assert attrs[C.scalar_attr("dt")] == 0.01
    assert attrs[C.CODE_FILE_PATH] == "sim.py" and attrs[C.CODE_LINE_NUMBER] == 12
    assert attrs[C.CODE_FUNCTION_NAME] == "sim.step"  # stable semconv: fully qualified
    assert not set(C.CODE_DEPRECATED) & set(attrs)  # the deprecated names only on request
    assert first.resource == RESOURCE and first.scope_name == "launchtrace"
    assert len(first.trace_id) == 16 and len(first.span_id) == 8
    _, old = build(ev.events, fold=False, deprecated_code_attributes=True)  # for backends before semconv 1.33
    attrs = old[0].attributes_dict()
    assert attrs[C.CODE_FILEPATH] == attrs[C.CODE_FILE_PATH] == "sim.py"
    assert attrs[C.CODE_LINENO] == attrs[C.CODE_LINE_NUMBER] == 12
    assert attrs[C.CODE_FUNCTION] == "step" and attrs[C.CODE_NAMESPACE] == "sim"
    assert attrs[C.CODE_FUNCTION_NAME] == "sim.step"


def test_nested_scopes_nest_and_each_outermost_scope_is_its_own_trace():
    ev = Events()
    for step in range(3):
        ev.begin("step", step=step)
        ev.begin("collide")
        ev.launch("sim.collide")
        ev.end()
        ev.launch("sim.integrate")
        ev.end()
    _, spans = build(ev.events, fold=False)
    roots = by_name(spans, "step")
    assert len({s.trace_id for s in spans}) == 3 == len(roots)
    for root in roots:
        members = [s for s in spans if s.trace_id == root.trace_id]
        collide = next(s for s in members if s.name == "collide")
        assert collide.parent_span_id == root.span_id
        assert next(s for s in members if s.name == "sim.collide").parent_span_id == collide.span_id
        assert next(s for s in members if s.name == "sim.integrate").parent_span_id == root.span_id
    assert [r.attributes_dict()["step"] for r in roots] == [0, 1, 2]
    # consecutive roots of the same name are linked
    assert roots[0].links == ()
    for prev, cur in itertools.pairwise(roots):
        assert [(k.trace_id, k.span_id) for k in cur.links] == [(prev.trace_id, prev.span_id)]


def test_scope_span_carries_topology_fingerprint_launch_count_and_foreign_pointers():
    ev = Events()
    ev.begin("step")
    recs = [ev.launch("sim.a"), ev.launch("sim.b", ptrs=(0x5000, 0x6000), foreign=True)]
    ev.begin("inner")
    recs.append(ev.launch("sim.c", ptrs=(0x5000, 0x7000), foreign=True))
    ev.end()
    ev.end()
    _, spans = build(ev.events, fold=False)
    step = by_name(spans, "step")[0].attributes_dict()
    inner = by_name(spans, "inner")[0].attributes_dict()
    assert step[C.SCOPE_FINGERPRINT] == topology.fingerprint(recs)
    assert inner[C.SCOPE_FINGERPRINT] == topology.fingerprint(recs[2:])
    assert (step[C.SCOPE_LAUNCHES], inner[C.SCOPE_LAUNCHES]) == (3, 1)
    assert (step[C.SCOPE_FOREIGN_POINTERS], inner[C.SCOPE_FOREIGN_POINTERS]) == (3, 2)
    assert step[C.SCOPE_KIND] == "user" and isinstance(step[C.SCOPE_ID], int)


def test_fingerprint_is_stable_across_runs_with_different_pointers():
    """Owned buffers at other addresses (another run) give the same fingerprint; no pointer enters it."""

    def run(base: int) -> str:
        ev = Events()
        ev.begin("step")
        ev.launch("sim.a", ptrs=(base, base + 64))
        ev.end()
        _, spans = build(ev.events)
        return by_name(spans, "step")[0].attribute(C.SCOPE_FINGERPRINT)

    assert run(0x1000) == run(0x9000)


@pytest.mark.parametrize("memo_lines", [1 << 14, 300, 1])
def test_fingerprints_stay_exact_when_steps_repeat_and_the_digest_memo_fills(monkeypatch, memo_lines):
    """Steps that repeat hash their lines once (spanbuilder._DIGESTS): every scope's fingerprint is still
    topology.fingerprint of its own records, for scopes of many chunks, steps of other lengths and
    kernels, a record standing for several launches, and a memo bound that clears it mid-run."""
    from launchtrace.export import spanbuilder

    monkeypatch.setattr(spanbuilder, "_DIGESTS_MAX_LINES", memo_lines)
    monkeypatch.setattr(spanbuilder, "_DIGESTS", {})
    monkeypatch.setattr(spanbuilder, "_digests_lines", 0)
    ev = Events()
    expected: list[tuple[int, str]] = []
    for step, length in enumerate([3, 3, 300, 300, 3, 600, 3, 300, 257]):
        scope = ev.begin("step")
        recs = [ev.launch(("sim.a", "sim.b", "sim.c")[(i + step // 4) % 3]) for i in range(length)]
        if step == 4:
            recs.append(ev.launch("sim.a", repeat=5))
            recs.append(ev.launch("sim.b"))
        ev.end()
        expected.append((scope.id, topology.fingerprint(recs)))
    _, spans = build(ev.events, fold="off", span_budget=100_000)
    got = {s.attribute(C.SCOPE_ID): s.attribute(C.SCOPE_FINGERPRINT) for s in by_name(spans, "step")}
    assert [got[scope_id] for scope_id, _ in expected] == [fp for _, fp in expected]
    assert len({fp for _, fp in expected}) == 7  # the steps differ where they should
    held = sum(len(lines) for _, lines in spanbuilder._DIGESTS)
    assert held == spanbuilder._digests_lines <= max(memo_lines, spanbuilder._LINES_PER_UPDATE)


def test_error_gives_status_and_exception_event():
    ev = Events()
    ev.begin("step")
    ev.launch("sim.bad", error="RuntimeError: kernel launch failed")
    ev.end(error="ValueError: bad step")
    _, spans = build(ev.events)
    bad, step = by_name(spans, "sim.bad")[0], by_name(spans, "step")[0]
    assert bad.status_code == STATUS_ERROR and bad.status_message == "RuntimeError: kernel launch failed"
    (event,) = bad.events
    assert event.name == "exception"
    assert dict(event.attributes) == {"exception.type": "RuntimeError", "exception.message": "kernel launch failed"}
    assert step.status_code == STATUS_ERROR and step.status_message == "ValueError: bad step"


# --- steps ------------------------------------------------------------------------------------------------


def test_unscoped_launches_go_to_bounded_step_roots_by_count():
    ev = Events()
    for i in range(25):
        ev.launch("sim.k", dt=float(i))  # distinct: nothing folds
    _, spans = build(ev.events, step_max_spans=10)
    steps = by_name(spans, STEP_SPAN_NAME)
    assert [s.attribute(C.SCOPE_LAUNCHES) for s in steps] == [10, 10, 5]
    assert [s.attribute(C.STEP_INDEX) for s in steps] == [0, 1, 2]
    assert len({s.trace_id for s in steps}) == 3
    for prev, cur in itertools.pairwise(steps):
        assert cur.links[0].span_id == prev.span_id
    for s in by_name(spans, "sim.k"):
        assert s.parent_span_id in {st.span_id for st in steps if st.trace_id == s.trace_id}


def test_step_roots_close_by_time_window_in_record_time_and_at_feed_time():
    ev = Events()
    ev.launch("sim.k")
    ev.t += 2_000_000_000  # two seconds later
    ev.launch("sim.k")
    builder = SpanBuilder(ExportConfig.resolve(env={}, file_path="x", step_window_s=1.0), resource=RESOURCE)
    spans = builder.feed(ev.events, now_ns=ev.t)  # the first step closed by the second record's time
    # launch spans stream out as they are built: the second step's launch is out, its root still open
    assert [s.name for s in spans] == ["sim.k", STEP_SPAN_NAME, "sim.k"]
    assert spans[2].trace_id != spans[1].trace_id
    assert builder.feed([], now_ns=ev.t + 500) == []  # the second is still inside its window
    later = builder.feed([], now_ns=ev.t + 1_500_000_000)  # ... and past it at the next feed
    assert [s.name for s in later] == [STEP_SPAN_NAME]
    assert later[0].trace_id == spans[2].trace_id


# --- folding and budget -----------------------------------------------------------------------------------


def test_by_default_a_trace_within_its_budget_is_exported_in_full():
    """fold="auto" (the default): 100 repeats fit the budget, so every launch keeps its own span."""
    ev = Events()
    ev.begin("rollout")
    for i in range(100):
        ev.launch("sim.step", ptrs=(0x1000, 0x2000) if i % 2 == 0 else (0x2000, 0x1000))
    ev.end()
    builder, spans = build(ev.events)
    assert [s.name for s in spans] == ["sim.step"] * 100 + ["rollout"]
    assert [s.attribute(C.SEQ) for s in spans[:100]] == [r.seq for k, r in ev.events if k == "record"]
    assert (builder.folded_records, builder.summary_spans, builder.dropped_budget) == (0, 0, 0)


def test_by_default_a_trace_past_its_budget_keeps_its_first_spans_and_folds_only_the_rest():
    """fold="auto": spans stream out one per record until the trace has used AUTO_FOLD_SWITCH of its budget;
    from there on it folds (the ping-pong pair repeats), nothing is cut, and the mixed trace (individual spans,
    then a summary span) rebuilds to exactly the captured records."""
    from launchtrace.sources.rebuild import rebuild

    ev = Events()
    ev.begin("rollout")
    for i in range(200):
        ev.launch("sim.step", ptrs=(0x1000, 0x2000) if i % 2 == 0 else (0x2000, 0x1000))
    captured = [r for k, r in ev.events if k == "record"]
    switch = int((42 - 2) * AUTO_FOLD_SWITCH)
    builder = SpanBuilder(ExportConfig.resolve(env={}, file_path="x", span_budget=42), resource=RESOURCE)
    streamed = builder.feed(ev.events[: 1 + switch], now_ns=0)  # the scope begin and the first `switch` launches
    assert [s.attribute(C.SEQ) for s in streamed] == [r.seq for r in captured[:switch]]  # out before the end
    ev.end()
    spans = streamed + builder.feed(ev.events[1 + switch :], now_ns=0) + builder.flush(now_ns=10**18)
    assert [s.name for s in spans] == ["sim.step"] * switch + [f"sim.step x{(200 - switch) // 2}", "rollout"]
    assert spans[switch].attribute(C.FOLD_SEQ_LAST) == captured[-1].seq
    assert (builder.folded_records, builder.summary_spans, builder.dropped_budget) == (200 - switch, 1, 0)
    assert builder.traces_folded == 1
    result = rebuild(spans)
    assert result.warnings == [] and result.skipped == 0
    rebuilt = sorted(result.records(), key=lambda r: r.seq)
    assert [r.seq for r in rebuilt] == [r.seq for r in captured]
    assert topology.topology_keys(rebuilt) == topology.topology_keys(captured)
    assert [r.buffers for r in rebuilt] == [r.buffers for r in captured]


def test_repeats_fold_into_one_summary_span_with_the_topology_once():
    ev = Events()
    ev.begin("rollout")
    for i in range(100):
        ev.launch("sim.step", ptrs=(0x1000, 0x2000) if i % 2 == 0 else (0x2000, 0x1000))
    ev.end()
    builder, spans = build(ev.events, fold="always")
    assert [s.name for s in spans] == ["sim.step x50", "rollout"]
    assert (builder.folded_records, builder.summary_spans) == (100, 1)
    summary = spans[0]
    a = summary.attributes_dict()
    assert (a[C.FOLD_COUNT], a[C.FOLD_PERIOD], a[C.FOLD_LAUNCHES]) == (50, 2, 100)
    assert (a[C.OP], a[C.KERNEL], a[C.FOLD_KERNELS]) == ("launch", "sim.step", ("sim.step",))
    assert [e.name for e in summary.events] == [C.EVENT_FOLD_POSITION] * 2
    p0, p1 = (dict(e.attributes) for e in summary.events)
    assert (p0[C.FOLD_POSITION], p1[C.FOLD_POSITION]) == (0, 1)
    assert p0[C.arg_attr("x", C.ARG_PTR)] == 0x1000 and p1[C.arg_attr("x", C.ARG_PTR)] == 0x2000
    assert p0[C.FOLD_DURATION_COUNT] == 50 and p0[C.FOLD_DURATION_MEAN] == 500 == p0[C.FOLD_DURATION_P50]
    assert spans[1].attribute(C.SCOPE_LAUNCHES) == 100


def test_budget_cuts_a_trace_with_a_final_dropped_span():
    ev = Events()
    ev.begin("step")
    for i in range(50):
        ev.launch("sim.k", dt=float(i))
    ev.end()
    builder, spans = build(ev.events, span_budget=10)
    assert len(spans) == 10
    (dropped,) = by_name(spans, C.DROPPED_SPAN_NAME)
    assert dropped.attribute(C.DROPPED_SPANS) == 42 == builder.dropped_budget
    assert builder.dropped() == {"budget": 42, "unsampled": 0}
    assert spans[-1].name == "step" and dropped.parent_span_id == spans[-1].span_id


def test_budget_never_orphans_a_nested_scope_child():
    ev = Events()
    ev.begin("step")
    for i in range(6):
        ev.begin(f"inner{i}")
        ev.launch("sim.k", dt=float(i))
        ev.end()
    ev.end()
    _, spans = build(ev.events, span_budget=6)
    ids = {s.span_id for s in spans}
    assert all(s.parent_span_id is None or s.parent_span_id in ids for s in spans)
    assert len(spans) <= 6


@pytest.mark.parametrize("fold", ["auto", "always"])
def test_ten_thousand_step_loop_stays_within_budget_and_folds(fold):
    """A 10,000-iteration loop inside one scope (ping-pong buffers, dt changing every 500 steps, a checkpoint
    launch every 1,000) and 10,000 unscoped launches: every trace within budget, nothing dropped, and the
    rebuilt records have exactly the captured topology (owners and scalars included), in order. By default
    only the loop's trace (30,010 launches) is folded; the unscoped step traces (1,000 launches each) fit."""
    from launchtrace.sources.rebuild import rebuild

    ev = Events()
    ev.begin("train")
    for i in range(10_000):
        a, b = (0x1000, 0x2000) if i % 2 == 0 else (0x2000, 0x1000)
        ev.launch("sim.integrate", ptrs=(a, b), dt=0.01 * (1 + i // 500))
        ev.launch("sim.collide", ptrs=(0x3000, 0x4000))
        ev.launch("wp.copy", ptrs=(0x5000, a))
        if i % 1000 == 999:
            ev.launch("sim.checkpoint", ptrs=(0x6000, 0x7000))
    ev.end()
    for _ in range(10_000):
        ev.launch("sim.integrate")
    captured = [r for kind, r in ev.events if kind == "record"]
    builder, spans = build(ev.events, **({} if fold == "auto" else {"fold": fold}))
    traces: dict[bytes, int] = {}
    for s in spans:
        traces[s.trace_id] = traces.get(s.trace_id, 0) + 1
    assert max(traces.values()) <= 2000
    assert builder.dropped_budget == 0
    folded = sum(s.attribute(C.FOLD_LAUNCHES, 0) for s in spans)
    plain = sum(1 for s in spans if s.attribute(C.OP) is not None and s.attribute(C.FOLD_COUNT) is None)
    assert folded + plain == len(captured) == 40_010
    assert folded == builder.folded_records
    assert builder.summary_spans == sum(1 for s in spans if s.attribute(C.FOLD_COUNT) is not None)
    train_id = next(s.trace_id for s in spans if s.name == "train")
    if fold == "auto":  # the loop's first spans individually, up to the switch point; the rest folded
        switch = int((builder.config.span_budget - 2) * AUTO_FOLD_SWITCH)
        train_plain = [s for s in spans if s.trace_id == train_id and s.attribute(C.OP) is not None]
        train_plain = [s for s in train_plain if s.attribute(C.FOLD_COUNT) is None]
        in_loop = [r.seq for r in captured[:30_010]]
        assert sorted(s.attribute(C.SEQ) for s in train_plain)[:switch] == in_loop[:switch]
        assert switch <= len(train_plain) < switch + 200 and traces[train_id] < switch + 200
        assert folded == 30_010 - len(train_plain) and builder.traces_folded == 1
        assert sorted(n for t, n in traces.items() if t != train_id) == [1001] * 10
    else:
        assert traces[train_id] < 200
        assert len(spans) < 200
    result = rebuild(spans)
    assert result.warnings == [] and result.skipped == 0
    rebuilt = sorted(result.records(), key=lambda r: r.seq)
    assert topology.topology_keys(rebuilt) == topology.topology_keys(captured)
    assert [r.buffers for r in rebuilt] == [r.buffers for r in captured]
    train = next(s for s in spans if s.name == "train")
    assert train.attribute(C.SCOPE_FINGERPRINT) == topology.fingerprint([r for r in rebuilt if r.scope_id is not None])


# --- sampling ---------------------------------------------------------------------------------------------


def test_sampler_off_drops_whole_traces_and_counts_them():
    ev = Events()
    for _ in range(3):
        ev.begin("step")
        ev.launch()
        ev.launch("sim.other")
        ev.end()
    builder, spans = build(ev.events, sampler="always_off")
    assert spans == []
    assert builder.dropped_unsampled == 9 and builder.traces_started == 3


def test_sample_every_keeps_every_nth_trace_in_full():
    ev = Events()
    for _ in range(6):
        ev.begin("step")
        for _ in range(5):
            ev.launch()
        ev.end()
    builder, spans = build(ev.events, sampler="always_off", sample_every=3)
    roots = by_name(spans, "step")
    assert len(roots) == 2
    assert len(by_name(spans, "sim.integrate")) == 10  # unfolded in the kept traces
    assert builder.dropped_unsampled == 4 * 6


def test_sample_every_with_sampler_on_folds_the_others():
    ev = Events()
    for _ in range(2):
        ev.begin("step")
        for _ in range(5):
            ev.launch()
        ev.end()
    _, spans = build(ev.events, sample_every=2, fold="always")
    assert len(by_name(spans, "sim.integrate")) == 5 and len(by_name(spans, "sim.integrate x5")) == 1
    _, spans = build(ev.events, sample_every=2)  # fold="auto": both fit their budget
    assert len(by_name(spans, "sim.integrate")) == 10


# --- internal work, incomplete scopes, odd streams ---------------------------------------------------------


def test_internal_scopes_are_left_out_by_default_internal_records_never():
    """Warp's own timers are not device work: left out unless ``include_internal``. The device work Warp issues
    itself (Tape.backward's adjoints, warp.fem / warp.sparse launches, wp.zeros' fill) is: always exported,
    flagged ``launchtrace.internal``, under the nearest exported scope, and counted in that scope's topology."""
    ev = Events()
    ev.begin("step")
    ev.begin("Module sim load", kind="timer", internal=True)
    ev.begin("Compile x86", kind="timer", internal=True)
    init = ev.launch("sim.init", internal=True)  # two left-out timers deep
    ev.end()
    user = ev.launch("sim.user")  # a user launch under an internal timer
    ev.end()
    ev.end()
    ev.begin("Module sim load", kind="timer", internal=True)  # a left-out timer with no scope around it
    late = ev.launch("sim.late", internal=True)
    ev.end()
    _, spans = build(ev.events)
    assert [s.name for s in spans] == ["sim.init", "sim.user", "step", "sim.late", STEP_SPAN_NAME]
    init_span, user_span, step, late_span, root = spans
    assert init_span.parent_span_id == user_span.parent_span_id == step.span_id
    assert late_span.parent_span_id == root.span_id and late_span.trace_id == root.trace_id
    assert init_span.attribute(C.INTERNAL) is True and late_span.attribute(C.INTERNAL) is True
    assert user_span.attribute(C.INTERNAL) is None  # written only when true
    assert not any(s.attribute(C.SCOPE_INTERNAL) for s in spans)
    assert step.attribute(C.SCOPE_LAUNCHES) == 2
    assert step.attribute(C.SCOPE_FINGERPRINT) == topology.fingerprint([init, user])
    assert root.attribute(C.SCOPE_LAUNCHES) == 1 and root.attribute(C.SCOPE_FINGERPRINT) == topology.fingerprint([late])
    _, spans = build(ev.events, include_internal=True)
    names = ["sim.init", "Compile x86", "sim.user", "Module sim load", "step", "sim.late", "Module sim load"]
    assert [s.name for s in spans] == names
    assert spans[0].parent_span_id == spans[1].span_id and spans[1].attribute(C.SCOPE_INTERNAL) is True
    assert spans[2].parent_span_id == spans[3].span_id and spans[3].parent_span_id == spans[4].span_id
    assert spans[5].parent_span_id == spans[6].span_id and spans[6].parent_span_id is None


def test_flush_ends_open_scopes_as_incomplete():
    ev = Events()
    ev.begin("step")
    ev.begin("inner")
    ev.launch()
    builder = SpanBuilder(ExportConfig.resolve(env={}, file_path="x"), resource=RESOURCE)
    assert [s.name for s in builder.feed(ev.events, now_ns=0)] == ["sim.integrate"]  # streamed, not held
    spans = builder.flush(now_ns=ev.t + 10)
    assert [s.name for s in spans] == ["inner", "step"]
    for s in spans:
        assert s.attribute(C.SCOPE_INCOMPLETE) is True and s.end_ns == ev.t + 10


def test_unknown_scope_end_and_unknown_event_kind_are_counted_not_raised(caplog):
    end = ScopeRecord(99, "ghost", "user", end_ns=5)
    with caplog.at_level(logging.WARNING):
        builder, spans = build([("scope_end", end), ("weird", None)])
    assert spans == [] and builder.unknown_scope_ends == 1
    assert "unknown kind" in caplog.text


def test_long_strings_are_cut_to_the_limit():
    ev = Events()
    ev.begin("step")
    ev.launch("sim." + "k" * 5000)
    ev.end()
    _, spans = build(ev.events)
    assert len(spans[0].name) == 2048 and len(spans[0].attribute(C.KERNEL)) == 2048


# --- config and resource ----------------------------------------------------------------------------------


def test_config_keyword_beats_env_beats_default():
    env = {"LAUNCHTRACE_SPAN_BUDGET": "500", "LAUNCHTRACE_FOLD": "off", "OTEL_TRACES_SAMPLER": "traceidratio",
           "OTEL_TRACES_SAMPLER_ARG": "0.25", "LAUNCHTRACE_FILE": "/tmp/t.jsonl"}  # fmt: skip
    c = ExportConfig.resolve(env=env)
    assert (c.span_budget, c.fold, c.sampler, c.sampler_arg, c.file_path) == (
        500, "off", "traceidratio", 0.25, "/tmp/t.jsonl")  # fmt: skip
    c = ExportConfig.resolve(env=env, span_budget=99, fold="always")
    assert (c.span_budget, c.fold) == (99, "always")
    d = ExportConfig.resolve(env={})
    assert (d.span_budget, d.fold, d.sampler, d.endpoint, d.sink) == (
        2000,
        "auto",
        "parentbased_always_on",
        None,
        "file",
    )


@pytest.mark.parametrize(
    ("env", "kwarg", "expected"),
    [("always", None, "always"), ("AUTO", None, "auto"), ("off", None, "off"), ("true", None, "always"),
     ("0", None, "off"), ("always", "off", "off"), (None, True, "always"), (None, False, "off"), (None, None, "auto")],
)  # fmt: skip
def test_fold_mode_keyword_beats_env_beats_auto_and_reads_the_old_booleans(env, kwarg, expected):
    kwargs = {} if kwarg is None else {"fold": kwarg}
    assert ExportConfig.resolve(env={} if env is None else {"LAUNCHTRACE_FOLD": env}, **kwargs).fold == expected


def test_a_bad_fold_mode_in_the_environment_warns_and_falls_back_to_auto(caplog):
    with caplog.at_level(logging.WARNING, logger="launchtrace.export.config"):
        assert ExportConfig.resolve(env={"LAUNCHTRACE_FOLD": "sometimes"}).fold == "auto"
    assert "LAUNCHTRACE_FOLD" in caplog.text


def test_config_bad_env_warns_and_falls_back(caplog):
    with caplog.at_level(logging.WARNING):
        c = ExportConfig.resolve(env={"LAUNCHTRACE_SPAN_BUDGET": "lots", "OTEL_TRACES_SAMPLER": "sometimes",
                                      "LAUNCHTRACE_STEP_WINDOW": "-3"})  # fmt: skip
    assert (c.span_budget, c.sampler, c.step_window_s) == (2000, "parentbased_always_on", 1.0)
    assert "LAUNCHTRACE_SPAN_BUDGET" in caplog.text and "OTEL_TRACES_SAMPLER" in caplog.text
    assert "LAUNCHTRACE_STEP_WINDOW" in caplog.text


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [({"span_budget": 0}, "span_budget"), ({"protocol": "udp"}, "protocol"), ({"fold": "yes"}, "fold"),
     ({"sampler_arg": 2.0}, "sampler_arg"), ({"colour": 1}, "colour")],
)  # fmt: skip
def test_config_bad_keyword_raises_naming_it(kwargs, name):
    with pytest.raises(ValueError, match=name):
        ExportConfig.resolve(env={}, **kwargs)


def test_config_endpoint_and_protocol():
    c = ExportConfig.resolve(env={"OTEL_EXPORTER_OTLP_ENDPOINT": "http://h:4318"})
    assert (c.endpoint, c.protocol, c.sink) == ("http://h:4318/v1/traces", "http/protobuf", "otlp")
    c = ExportConfig.resolve(
        env={"OTEL_EXPORTER_OTLP_ENDPOINT": "http://h:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}
    )
    assert (c.endpoint, c.protocol) == ("http://h:4317", "grpc")
    c = ExportConfig.resolve(env={"OTEL_EXPORTER_OTLP_ENDPOINT": "http://h:4318",
                                  "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://t:1/x"})  # fmt: skip
    assert c.endpoint == "http://t:1/x"


def test_default_file_name():
    path = default_file_path(now=0, pid=42)
    name = os.path.basename(path)
    assert (
        name.startswith("launchtrace-19")
        and name.endswith("-42.jsonl")
        and len(name) == len("launchtrace-19700101-000000-42.jsonl")
    )
    assert os.path.dirname(path) == os.getcwd()


def test_resource_honours_otel_env_and_adds_ours(monkeypatch):
    monkeypatch.setenv("OTEL_SERVICE_NAME", "sim-service")
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=ci,host.name=override")
    res = dict(build_resource())
    assert res["service.name"] == "sim-service" and res["deployment.environment"] == "ci"
    assert res["host.name"] == "override"  # the environment wins over our defaults
    assert res[C.RESOURCE_LAUNCHTRACE_VERSION] and res[C.RESOURCE_WARP_VERSION].startswith("1.")
    assert isinstance(res["process.pid"], int)
    assert dict(build_resource(service_name="kw"))["service.name"] == "kw"  # keyword beats environment


# --- the hand-written SpanData constructor ----------------------------------------------------------------


@settings(max_examples=100, deadline=None)
@given(
    st.binary(min_size=16, max_size=16),
    st.binary(min_size=8, max_size=8),
    st.one_of(st.none(), st.binary(min_size=8, max_size=8)),
    st.text(max_size=10),
    st.integers(0, 2**63),
    st.integers(0, 2**63),
    st.lists(st.tuples(st.text(max_size=5), st.integers()), max_size=4).map(tuple),
    st.sampled_from([0, 1, 2]),
    st.text(max_size=5),
)
def test_make_span_equals_the_dataclass_constructor(tid, sid, parent, name, start, end, attrs, status, message):
    """spanfactory.make_span (generated for speed) builds exactly what SpanData(...) builds."""
    events = (SpanEvent("e", start, attrs),)
    links = (SpanLink(tid, sid),)
    fast = make_span(tid, sid, parent, name, start, end, attrs, status, message, events, links, RESOURCE, "s", "1")
    slow = SpanData(tid, sid, parent, name, start, end, attrs, status_code=status, status_message=message,
                    events=events, links=links, resource=RESOURCE, scope_name="s", scope_version="1")  # fmt: skip
    assert fast == slow and type(fast) is SpanData
    for field in dataclasses.fields(SpanData):
        assert getattr(fast, field.name) == getattr(slow, field.name)
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.name = "changed"  # still frozen


def test_ids_do_not_repeat_after_random_seed_or_fork():
    """A program that seeds ``random`` does not make our ids repeat, nor does a forked child."""
    import random

    def ids() -> list[bytes]:
        ev = Events()
        ev.begin("step")
        ev.launch()
        ev.end()
        _, spans = build(ev.events)
        return [s.trace_id for s in spans] + [s.span_id for s in spans]

    random.seed(0)
    first = ids()
    random.seed(0)
    assert not set(first) & set(ids())

    builder = SpanBuilder(ExportConfig.resolve(env={}, file_path="x"), resource=RESOURCE)
    builder._span_id()  # ids drawn ahead before the fork (32 at a time) must not be handed out in both
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: ids from the inherited builder, sent to the parent
        os.close(read)
        os.write(write, b"".join(builder._span_id() for _ in range(16)))
        os._exit(0)
    os.close(write)
    child = os.read(read, 8 * 16)
    os.close(read)
    os.waitpid(pid, 0)
    parent = b"".join(builder._span_id() for _ in range(16))
    assert len(child) == 128 and child != parent


@pytest.mark.parametrize("fold", ["off", "always", "auto"])
def test_record_copies_of_a_template_take_its_fold_key_and_give_the_same_spans(fold):
    """Records the materializer copied from a template (``LaunchRecord.template``) reuse the template's fold key
    id; the spans equal those of the same records made without templates (ids and times aside)."""
    base = LaunchRecord("launch", "m.k", (16,), None, ((0, 64),), ((1, 1),), SITE, params=("x", "dt"))
    other = dataclasses.replace(base, scalars=((1, 1.0),))  # == base in Python, another span (a double)
    assert other == base
    records = []
    for i in range(6):
        start = 1_000 + 1_000 * i
        proto = base if i % 3 != 2 else other
        records.append(dataclasses.replace(proto, start_ns=start, end_ns=start + 500, seq=i + 1))
    copied = [dataclasses.replace(r, template=base if i % 3 != 2 and i else None) for i, r in enumerate(records)]
    outputs = []
    for recs in (records, copied):
        builder, spans = build([("record", r) for r in recs], fold=fold)
        outputs.append([(s.name, s.start_ns, s.end_ns, s.attributes, [e.attributes for e in s.events]) for s in spans])
        keys = [builder._key_id(r) for r in recs]
        assert keys[0] == keys[1] == keys[3] == keys[4] and keys[2] == keys[5] != keys[0]
    assert outputs[0] == outputs[1]
    doubles = [
        dict(a)[C.scalar_attr("dt")]
        for _, _, _, a, _ in outputs[0]
        if dict(a).get(C.OP) and C.FOLD_COUNT not in dict(a)
    ]
    if fold != "always":
        assert [repr(v) for v in doubles] == ["1", "1", "1.0", "1", "1", "1.0"]


def test_device_timed_launches_fold_and_keep_their_device_time_statistics():
    """Device times (``device_timing``) are measurements like host times: repeats of a launch fold although
    each has its own device time, the summary's position events carry those times' statistics, and a span that
    is not folded carries its own device time (not one cached for its fold key). Records are built here with
    ``DeviceTime`` values; the CUDA events behind them are tested in test_device_timing.py."""
    from launchtrace.model import DeviceTime

    base = LaunchRecord("launch", "m.k", (16,), None, ((0, 64),), ((1, 0.5),), SITE, params=("x", "dt"))
    device_ns = [4000, 5000, 9000, 4000]
    records = [
        dataclasses.replace(
            base, start_ns=1000 * i, end_ns=1000 * i + 500, seq=i + 1, probes=(DeviceTime(2000 * i, 2000 * i + d),)
        )
        for i, d in enumerate(device_ns)
    ]
    _, folded = build([("record", r) for r in records], fold=True)
    (summary,) = [s for s in folded if s.attribute(C.FOLD_COUNT)]
    assert summary.attribute(C.FOLD_COUNT) == 4
    (event,) = summary.events
    stats = {k: v for k, v in event.attributes if k.startswith("launchtrace.fold.device_duration.")}
    assert stats == {
        C.FOLD_DEVICE_DURATION_COUNT: 4,
        C.FOLD_DEVICE_DURATION_MIN: 4000,
        C.FOLD_DEVICE_DURATION_MEAN: 5500,
        C.FOLD_DEVICE_DURATION_MAX: 9000,
        C.FOLD_DEVICE_DURATION_P50: 4500,
    }
    assert event.attributes and not any(k.startswith("launchtrace.device_time.") for k, _ in event.attributes)
    _, single = build([("record", r) for r in records], fold=False)
    launches = [s for s in single if s.attribute(C.OP)]
    assert [s.attribute(C.DEVICE_TIME_DURATION) for s in launches] == device_ns
    assert [s.attribute(C.DEVICE_TIME_START) for s in launches] == [0, 2000, 4000, 6000]


def test_a_module_load_outside_every_scope_is_in_the_step_root_and_restarts_its_window():
    """Warp's compile of a module (a warp.module.load scope, kind load) outside every scope joins the thread's
    step root instead of making a trace of its own per module, and the step's window starts after it: the
    launch that waited seconds for the compile is in the same step (issue 23)."""
    ev = Events()
    ev.launch("wp.fill")
    ev.begin("warp.module.load", kind="load")
    ev.t += 4_000_000_000  # a four-second compile, longer than the one-second window
    feed_during = ev.t - 2_000_000_000
    ev.end()
    ev.launch("sim.k")
    builder = SpanBuilder(ExportConfig.resolve(env={}, file_path="x", step_window_s=1.0), resource=RESOURCE)
    assert builder.feed(ev.events[:2], now_ns=feed_during)[-1].name == "wp.fill"  # mid-compile: step stays open
    spans = builder.feed(ev.events[2:], now_ns=ev.t) + builder.flush(now_ns=ev.t)
    names = [s.name for s in spans]
    assert names.count(STEP_SPAN_NAME) == 1 and "warp.module.load" in names
    step = next(s for s in spans if s.name == STEP_SPAN_NAME)
    load = next(s for s in spans if s.name == "warp.module.load")
    assert load.parent_span_id == step.span_id and load.trace_id == step.trace_id
    assert step.start_ns <= load.start_ns and load.end_ns <= step.end_ns
