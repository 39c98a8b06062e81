"""The export worker with real Warp kernels on the CPU device, the real SpanBuilder and real sinks.

Slow or failing sinks are real sink objects wrapped to sleep or raise (a slow disk cannot be made on demand);
every count is checked exactly against the records a second bus subscription saw.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from pathlib import Path

import pytest

import launchtrace
import launchtrace.export as export
from launchtrace import conventions as C
from launchtrace.capture import bus
from launchtrace.export.config import ExportConfig
from launchtrace.export.pipeline import ExportPipeline
from launchtrace.export.sinks import FileSink
from launchtrace.export.spanbuilder import STEP_SPAN_NAME
from launchtrace.otlp.proto_decode import spans_from_message
from test_sinks import parse_jsonl


def file_spans(path: Path) -> list:
    out = []
    for m in parse_jsonl(path):
        spans, problems = spans_from_message(m)
        assert not problems
        out.extend(spans)
    return out


def records_of(sub) -> list:
    return [item for kind, item in sub.drain() if kind == "record"]


@pytest.fixture
def sim(instrumented):
    import warp_programs

    s = warp_programs.Sim()
    s.step()  # compile outside the measured part
    return s


def config(tmp_path: Path, **kw) -> ExportConfig:
    return ExportConfig.resolve(**{"file_path": str(tmp_path / "spans.jsonl"), "export_interval_s": 0.05, **kw})


def test_every_record_becomes_one_span_under_its_scope(tmp_path: Path, sim) -> None:
    pipeline = ExportPipeline(config(tmp_path, fold=False)).start()
    with bus.subscribe() as sub:
        for i in range(4):
            with launchtrace.scope("step", i=i):
                sim.step()
        assert pipeline.flush(20)
        records = records_of(sub)
    stats = pipeline.stop()
    spans = file_spans(tmp_path / "spans.jsonl")
    record_spans = [s for s in spans if s.attribute(C.OP) is not None]
    scopes = {s.span_id: s for s in spans if s.attribute(C.SCOPE_KIND) == "user"}
    assert len(records) == 4 * 5 and len(scopes) == 4
    assert sorted(s.attribute(C.SEQ) for s in record_spans) == sorted(r.seq for r in records)
    for s in record_spans:
        assert s.parent_span_id in scopes and s.trace_id == scopes[s.parent_span_id].trace_id
    assert len({s.trace_id for s in scopes.values()}) == 4  # one trace per outermost scope
    assert stats.built == len(spans) == stats.exported and stats.dropped == 0


def test_flush_makes_closed_scopes_visible_without_stopping(tmp_path: Path, sim) -> None:
    pipeline = ExportPipeline(config(tmp_path, export_interval_s=60.0)).start()  # only flush drains
    try:
        with launchtrace.scope("step"):
            sim.step()
        assert pipeline.flush(20)
        assert len([s for s in file_spans(tmp_path / "spans.jsonl") if s.attribute(C.OP)]) == 5
        assert pipeline.running
    finally:
        pipeline.stop()


def test_bus_overflow_is_counted_exactly(tmp_path: Path, sim, monkeypatch: pytest.MonkeyPatch) -> None:
    """A tiny queue and a worker that only drains on flush: 50 launches, 10 kept, 40 counted as dropped.

    The worker waits from Python here: the compiled waiter wakes it as soon as a queue passes half full, and
    what it then drains before the queue overflows depends on timing (that wake has a test of its own)."""
    from launchtrace.export import pipeline as pipeline_module

    monkeypatch.setattr(pipeline_module, "_pause_waiter", lambda: None)
    pipeline = ExportPipeline(config(tmp_path, queue_capacity=10, export_interval_s=60.0, fold=False)).start()
    for _ in range(10):
        sim.step()  # 5 records each, outside any scope
    stats = pipeline.stop()
    record_spans = [s for s in file_spans(tmp_path / "spans.jsonl") if s.attribute(C.OP)]
    assert len(record_spans) == 10
    assert stats.dropped_queue == 40


class SlowSink(FileSink):
    """A real file sink that takes ``delay`` seconds per write (a slow disk or network)."""

    def __init__(self, path: Path, delay: float) -> None:
        super().__init__(path)
        self.delay = delay

    def write(self, spans) -> None:
        time.sleep(self.delay)
        super().write(spans)


def test_a_slow_sink_never_blocks_the_launching_thread_and_loses_nothing(tmp_path: Path, sim) -> None:
    sink = SlowSink(tmp_path / "spans.jsonl", delay=0.3)
    pipeline = ExportPipeline(config(tmp_path, fold=False), sink=sink).start()
    with bus.subscribe() as sub:
        for i in range(20):
            with launchtrace.scope("step", i=i):
                sim.step()
        records = records_of(sub)
    stats = pipeline.stop(timeout=30)
    spans = file_spans(tmp_path / "spans.jsonl")
    assert sorted(s.attribute(C.SEQ) for s in spans if s.attribute(C.OP)) == sorted(r.seq for r in records)
    assert stats.exported == stats.built == len(spans) and stats.dropped == 0


class DeadSink(FileSink):
    """A sink stuck on every write until it is shut down (a hung connection), then failing."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.released = threading.Event()

    def write(self, spans) -> None:
        self.released.wait(120)
        self._acct.failed(len(spans), "hung")

    def shutdown(self) -> None:
        self.released.set()


def test_stop_gives_up_on_a_hung_sink_within_the_timeout_and_counts(tmp_path: Path, sim) -> None:
    sink = DeadSink(tmp_path / "spans.jsonl")
    pipeline = ExportPipeline(config(tmp_path, fold=False), sink=sink).start()
    for i in range(5):
        with launchtrace.scope("step", i=i):
            sim.step()
    t0 = time.monotonic()
    stats = pipeline.stop(timeout=1.0)
    assert time.monotonic() - t0 < 30  # bounded by the timeout plus the join; never the sink's 120 s
    assert stats.exported == 0 and stats.dropped_sink == stats.built > 0


def test_a_span_building_bug_is_logged_once_and_the_worker_survives(tmp_path: Path, sim, caplog) -> None:
    calls = {"n": 0}

    def flaky_builder(cfg):
        from launchtrace.export.spanbuilder import SpanBuilder

        real = SpanBuilder(cfg)
        feed = real.feed

        def bad_feed(events, now_ns=None):
            calls["n"] += 1
            if calls["n"] <= 2:
                raise RuntimeError("bug in span building")
            return feed(events, now_ns)

        real.feed = bad_feed
        return real

    pipeline = ExportPipeline(config(tmp_path), builder_factory=flaky_builder).start()
    with caplog.at_level("ERROR", logger="launchtrace.export.pipeline"):
        for _ in range(3):
            with launchtrace.scope("step"):
                sim.step()
            pipeline.flush(20)
        pipeline.stop()
    errors = [r for r in caplog.records if r.name == "launchtrace.export.pipeline"]
    assert len(errors) == 1 and "bug in span building" in (errors[0].exc_text or "")
    assert calls["n"] >= 3 and pipeline.stats().exported > 0


def test_module_api_start_flush_stats_stop(tmp_path: Path, sim) -> None:
    path = tmp_path / "api.jsonl"
    export.start_export(file_path=str(path), export_interval_s=0.05, truncate=True)
    try:
        assert export.start_export() is export._pipeline  # idempotent
        with launchtrace.scope("step"):
            sim.step()
        assert launchtrace.flush(20)
        assert export.stats().exported >= 6
    finally:
        final = export.stop_export()
    assert final.exported == len(file_spans(path)) and export.stats() == final
    with pytest.raises(ValueError, match="span_budget"):
        export.configure(span_budget=1)
    with pytest.raises(ValueError, match="unknown parameter 'nope'"):
        export.start_export(nope=1)


def _child(path: str, queue) -> None:
    import warp_programs

    sim = warp_programs.Sim()
    with launchtrace.scope("child-step"):
        sim.step()
    queue.put(os.getpid())
    # no explicit flush: the multiprocessing finalizer installed after fork must export


def test_a_forked_child_exports_its_own_spans_never_the_parents(tmp_path: Path, sim) -> None:
    """The parent's sim was built before export started; the child builds its own while exporting, so it
    exports, in an unscoped step root, exactly the fills and the copy Warp issues inside ``Sim()``."""
    import warp_programs

    setup = warp_programs.internal_work(warp_programs.Sim)
    assert setup
    path = tmp_path / "fork.jsonl"
    export.start_export(file_path=str(path), export_interval_s=60.0, truncate=True)  # parent drains only at stop
    try:
        with launchtrace.scope("parent-step"):
            sim.step()  # pending in the parent's queue when the child is forked
        ctx = multiprocessing.get_context("fork")
        queue = ctx.Queue()
        child = ctx.Process(target=_child, args=(str(path), queue))
        child.start()
        child_pid = queue.get(timeout=60)
        child.join(60)
        assert child.exitcode == 0
    finally:
        export.stop_export()
    spans = file_spans(path)
    by_pid: dict[int, list] = {}
    for s in spans:
        by_pid.setdefault(dict(s.resource).get("process.pid"), []).append(s)
    assert set(by_pid) == {os.getpid(), child_pid}
    parent_names = sorted(s.name for s in by_pid[os.getpid()] if not s.attribute(C.OP))
    child_names = sorted(s.name for s in by_pid[child_pid] if not s.attribute(C.OP))
    assert parent_names == ["parent-step"] and child_names == sorted(["child-step", STEP_SPAN_NAME])
    assert len([s for s in by_pid[os.getpid()] if s.attribute(C.OP)]) == 5
    child_records = sorted((s for s in by_pid[child_pid] if s.attribute(C.OP)), key=lambda s: s.attribute(C.SEQ))
    assert len([s for s in child_records if not s.attribute(C.INTERNAL)]) == 5
    assert [(s.attribute(C.OP), s.name) for s in child_records if s.attribute(C.INTERNAL)] == setup


class RaisingSink(FileSink):
    """A third-party sink with a bug: every write raises."""

    def write(self, spans) -> None:
        raise RuntimeError("sink bug")


def test_a_sink_that_raises_costs_its_spans_counted_never_the_worker(tmp_path: Path, sim, caplog) -> None:
    pipeline = ExportPipeline(config(tmp_path, fold=False), sink=RaisingSink(tmp_path / "x.jsonl")).start()
    with caplog.at_level("ERROR", logger="launchtrace.export.pipeline"):
        for i in range(3):
            with launchtrace.scope("step", i=i):
                sim.step()
            assert pipeline.flush(20)
        stats = pipeline.stop()
    assert stats.built == stats.dropped_sink == 3 * 6 and stats.exported == 0
    assert len([r for r in caplog.records if r.name == "launchtrace.export.pipeline"]) == 1


def test_the_worker_waits_for_a_pause_in_the_launches_within_busy_defer_s(tmp_path: Path) -> None:
    """The waiting rule alone, on a controlled queue and clock (the timing of a real program is too noisy to
    assert on): events queued since the last look defer the export; a look with no new events, an urgent
    export (flush, exit), a queue past half full or ``busy_defer_s`` elapsed end the wait."""
    pipeline = ExportPipeline(config(tmp_path, busy_defer_s=5.0))
    pipeline._sub = bus.Subscription(capacity=100)
    wait = pipeline._wait_for_pause
    assert wait(10, False, 0.0) is True  # launching: wait
    assert wait(20, False, 0.02) is True  # still launching
    assert wait(20, False, 0.04) is False  # a pause: export now
    assert wait(30, False, 1.0) is True and wait(40, True, 1.02) is False  # a flush does not wait
    assert wait(45, False, 2.0) is True and wait(51, False, 2.02) is False  # past half full: no wait
    pipeline._seen = 0  # the export drained the queue (the worker notes the length after each export)
    assert wait(2, False, 3.0) is True and wait(3, False, 7.9) is True and wait(4, False, 8.0) is False  # 5 s cap
    never = ExportPipeline(config(tmp_path, busy_defer_s=0))
    never._sub = bus.Subscription(capacity=100)
    assert never._wait_for_pause(10, False, 0.0) is False


def test_spans_of_a_burst_arrive_after_it_without_a_flush(tmp_path: Path, sim) -> None:
    """Liveness of the rule on a real program: a burst of launches, then a pause (no flush): the spans arrive."""
    pipeline = ExportPipeline(config(tmp_path, fold=False, busy_defer_s=5.0)).start()
    try:
        with launchtrace.scope("burst"):
            for _ in range(50):
                sim.step()
        deadline = time.monotonic() + 10.0
        while time.monotonic() < deadline and pipeline.stats().exported < 50 * 5 + 1:
            time.sleep(0.05)
        assert pipeline.stats().exported == 50 * 5 + 1  # every launch and the scope, no flush asked
    finally:
        pipeline.stop()


class CountingSink(FileSink):
    """A real file sink that remembers how many spans each write held."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.sizes: list[int] = []

    def write(self, spans) -> None:
        self.sizes.append(len(spans))
        super().write(spans)


def test_writes_hold_at_most_max_export_batch_spans(tmp_path: Path, sim) -> None:
    """A step's spans are held back until it ends (``fold="auto"``), then released at once: writes of up to
    127 spans went out where ``max_export_batch`` says 64 (1,023 where it says 512, the default)."""
    sink = CountingSink(tmp_path / "spans.jsonl")
    pipeline = ExportPipeline(config(tmp_path, max_export_batch=64), sink=sink).start()
    with launchtrace.scope("step"):
        for _ in range(120):
            sim.step()  # 5 records each
    stats = pipeline.stop(timeout=30)
    assert stats.exported == sum(sink.sizes) >= 601 and stats.dropped == 0
    assert max(sink.sizes) <= 64, sink.sizes
