"""The export worker: capture bus -> SpanBuilder -> sink, on one daemon thread, off the launching thread.

The launching thread pays one ``deque.append`` per event (the capture bus); everything else happens here:
every ``export_interval_s`` (or when :meth:`ExportPipeline.flush` wakes it) the worker drains the subscription
in chunks of ``max_export_batch`` events, feeds them to the :class:`~launchtrace.export.spanbuilder.SpanBuilder`
and writes the completed spans to the sink. Memory is bounded by the bus capacity (``queue_capacity``; the
new events are refused past it, and counted) plus one chunk in flight. When the queue is more than half
full the worker stops resting and runs flat out: under the GIL that slows the launching thread instead of
losing spans; and when the queue is full a launching thread waits for room before an event is dropped
(back-pressure, bounded): up to ``FULL_QUEUE_WAIT_S``, or while the worker writes to a sink that answers,
until that write is answered (at most ``ANSWERING_SINK_WAIT_S``).

Nothing here raises into the user's program: a sink failure is counted by the sink, a bug in span building is
logged once and the worker keeps going. At process exit the pipeline flushes (open scopes end, marked
incomplete) within a timeout; a sink still retrying then is shut down so its retries stop. In a forked child
the pipeline starts over: a fresh subscription, builder, sink and thread, so the child exports its own spans
and never the parent's.

Example::

    from launchtrace.export.pipeline import ExportPipeline
    from launchtrace.export.config import ExportConfig
    pipeline = ExportPipeline(ExportConfig.resolve(file_path="spans.jsonl")).start()
    ...  # instrumented Warp code
    pipeline.stop()
    print(pipeline.stats())
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from launchtrace import native
from launchtrace.export.config import ExportConfig
from launchtrace.export.sinks import EXPORT_THREAD_PREFIX, FileSink, OtlpSink, Sink
from launchtrace.export.threadsignals import leave_signals_to_the_program

__all__ = ["ANSWERING_SINK_WAIT_S", "DEFAULT_DUTY_CYCLE", "ExportPipeline", "ExportStats", "sink_for"]

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class ExportStats:
    """What the exporter did so far.

    - ``built``: spans built and handed to the sink (``built == exported + dropped_sink`` once written).
    - ``exported``: spans the sink accepted.
    - ``dropped_sink``: spans the sink could not deliver (failed or rejected requests, unwritable file).
    - ``dropped_queue``: capture events lost because the bus queue overflowed, plus events still queued when
      the exit flush ran out of time (each event is one span: a record, or a scope's begin or end).
    - ``dropped_budget``: spans cut by the per-trace span budget; ``unsampled``: spans of traces the sampler
      left out (by design, not a loss).
    - ``folded_records`` / ``summary_spans``: records folded into summary spans (not lost: each summary
      span holds the repetition count and the sequence), and how many summary spans they became.
    - ``batches`` / ``failures``: sink writes and failed sink writes. ``sink``: where spans go.
    - ``raised``: spans of calls (launches, copies, fills) and scopes that raised: a launch that raised ran
      nothing, which a program that catches the error never shows.
    """

    built: int = 0
    exported: int = 0
    dropped_sink: int = 0
    dropped_queue: int = 0
    dropped_budget: int = 0
    unsampled: int = 0
    folded_records: int = 0
    summary_spans: int = 0
    batches: int = 0
    failures: int = 0
    sink: str = ""
    raised: int = 0

    @property
    def dropped(self) -> int:
        """Spans lost (sink + queue + budget); unsampled spans are not losses."""
        return self.dropped_sink + self.dropped_queue + self.dropped_budget


def sink_for(config: ExportConfig, *, truncate: bool = False) -> Sink:
    """The sink ``config`` asks for: OTLP when it has an endpoint, else the JSON Lines file."""
    if config.endpoint is None:
        return FileSink(config.file_path, truncate=truncate)
    endpoint = config.endpoint
    if config.protocol == "http/protobuf":
        from urllib.parse import urlparse

        if urlparse(endpoint).path in ("", "/"):  # a base URL given as a keyword: the SDK wants the full URL
            endpoint = endpoint.rstrip("/") + "/v1/traces"
    return OtlpSink(endpoint, protocol=config.protocol)


FULL_QUEUE_WAIT_S = 0.1
"""When the capture queue is full, how long a launching thread waits for the worker to make room before the
event is dropped (counted), unless the worker is writing to a sink that answers (:data:`ANSWERING_SINK_WAIT_S`).
A worker that keeps failing to make room costs one such wait, not one per event, until the queue has drained to
half (see :class:`launchtrace.capture.bus.Subscription`)."""

ANSWERING_SINK_WAIT_S = 1.0
"""While the worker is writing a batch to a sink whose last write went through, a launching thread that finds the
capture queue full waits for that write, up to this long after the write began: the worker drains the queue as
soon as the sink answers. A receiver that is slower than the program but answering (``launchtrace collect`` on a
loaded machine took 70-190 ms a request of 1,023 spans) sets the program's pace instead of losing tens of
thousands of events to a fixed 0.1 s; one that stops answering costs one wait of at most this, then events are
dropped and counted as before; one whose last write failed gets :data:`FULL_QUEUE_WAIT_S`."""

DEFAULT_DUTY_CYCLE = 0.25
"""Share of the time the worker may be busy while it keeps up (see :class:`ExportPipeline`)."""

BUSY_GAP_S = 0.02
"""No capture event queued for this long: the program is between bursts of launches (see ``busy_defer_s``)."""

DRAIN_CHUNK = 512
"""Capture events drained and built at a time: small, so the worker can rest between chunks; spans are still
written in batches of up to ``max_export_batch``."""


class ExportPipeline:
    """One subscription, one SpanBuilder, one sink, one daemon thread; see the module docstring.

    ``sink`` and ``builder_factory`` default to what ``config`` asks for (tests pass their own).
    ``duty_cycle``: with CPython's GIL, every second the worker spends building spans is taken from the
    launching thread. While the capture queue is less than half full and nobody waits on a flush, the
    worker rests between chunks so that it is busy at most this share of the time; past half full, at a
    flush and at exit it runs flat out. The work is the same, spread so that the program runs first.

    Before that, it waits for a pause: woken while the program is still launching (events queued since it
    last looked, :data:`BUSY_GAP_S` ago), it looks again every :data:`BUSY_GAP_S` and exports once no event
    came in between, or after ``config.busy_defer_s`` at the latest. Work done in the program's pauses
    (waiting on the device, I/O, between steps) costs it nothing, and the launching thread and the worker do
    not hand the GIL back and forth on every ctypes call of a launch. Where the compiled capture wrapper is
    built, the same rule is kept without the GIL (:meth:`_run_waiting_outside_the_gil`).
    """

    def __init__(
        self,
        config: ExportConfig | None = None,
        *,
        sink: Sink | None = None,
        builder_factory: Callable[[ExportConfig], Any] | None = None,
        truncate: bool = False,
        duty_cycle: float = DEFAULT_DUTY_CYCLE,
    ) -> None:
        if not 0.0 < duty_cycle <= 1.0:
            raise ValueError(f"duty_cycle must be in (0, 1], got {duty_cycle!r}")
        self.config = config if config is not None else ExportConfig.resolve()
        self._duty = duty_cycle
        self._builder_factory = builder_factory or _default_builder
        self.sink: Sink = sink if sink is not None else sink_for(self.config, truncate=truncate)
        self._own_sink = sink is None
        self._sub: Any = None
        self._builder: Any = None
        self._thread: threading.Thread | None = None
        self._wake = threading.Event()
        self._cond = threading.Condition()
        self._requested = 0  # flush requests made
        self._done = 0  # flush requests served (every event queued before them was exported)
        self._final_requested = False
        self._stopping = False
        self._stopped = False
        self._abandoned = 0
        self._build_errors = 0
        self._built = 0
        self._lost_in_sink = 0  # spans of writes where the sink itself raised (a third-party sink's bug)
        self._sink_failures = 0  # the sink's failure count after the last write
        self._sink_answers = True  # the last write went through: a full queue waits for the next one
        self._probes_on = False  # this pipeline turned measurements on (probes.configure)
        self._seen = 0  # capture queue length when the worker last looked (more now: the program launched)
        self._deferred_since: float | None = None  # when the worker began waiting for a pause in the launches
        self.observers: list[Callable[[list], None]] = []  # see each drained chunk (launchtrace.export.metrics)
        self._inherited_resource: tuple | None = None  # in a forked child: the parent's, with the child's pid

    # -- lifecycle -------------------------------------------------------------------------------------------
    def start(self) -> ExportPipeline:
        """Subscribe to the capture bus and start the worker thread."""
        from launchtrace.capture import bus

        self._sub = bus.subscribe(capacity=self.config.queue_capacity, wait_s=FULL_QUEUE_WAIT_S)
        self._builder = self._new_builder()
        self._start_probes()
        self._thread = threading.Thread(target=self._run, name=f"{EXPORT_THREAD_PREFIX}-{os.getpid()}", daemon=True)
        self._thread.start()
        return self

    def _start_probes(self) -> None:
        """Turn on the measurements the config asks for (``value_stats``, ``device_timing``); stop turns them off."""
        config = self.config
        if config.value_stats or config.device_timing:
            from launchtrace.capture import probes

            probes.configure(
                value_stats=config.value_stats,
                device_timing=config.device_timing,
                max_elements=config.value_stats_max_elements,
            )
            self._probes_on = True

    def _new_builder(self) -> Any:
        if self._inherited_resource is not None and self._builder_factory is _default_builder:
            from launchtrace.export.spanbuilder import SpanBuilder

            return SpanBuilder(self.config, resource=self._inherited_resource)
        return self._builder_factory(self.config)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive() and not self._stopped

    def flush(self, timeout: float = 10.0, *, final: bool = False) -> bool:
        """Export everything captured so far; whether it finished within ``timeout`` seconds.

        ``final`` also ends what is still open (scopes end now, marked incomplete; steps close), as at exit.
        Safe to call from any thread except the worker; never raises.
        """
        if self._thread is None or not self._thread.is_alive():
            return False
        with self._cond:
            self._requested += 1
            ticket = self._requested
            if final:
                self._final_requested = True
        self._wake_worker()
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._done < ticket:
                left = deadline - time.monotonic()
                if left <= 0 or not self._thread.is_alive():
                    return False
                self._cond.wait(min(left, 0.5))
        return True

    def stop(self, timeout: float = 10.0) -> ExportStats:
        """Final flush within ``timeout`` (a sink still busy then is shut down), close, and return the stats."""
        if self._stopped or self._thread is None:
            return self.stats()
        deadline = time.monotonic() + timeout
        # a quarter (at most 0.5 s) is kept for stopping a stuck sink and the worker: the whole stays in ``timeout``
        done = self.flush(timeout - min(0.5, timeout / 4), final=True)
        self._stopping = True
        if not done:  # the sink is stuck (retrying a dead endpoint): abort its retries, then finish quickly
            logger.warning(
                "launchtrace: export did not finish within %.1f s; stopping %s (what was not written is counted as "
                "dropped; LAUNCHTRACE_EXIT_TIMEOUT sets the time at exit)",
                timeout,
                self.sink.description,
            )
            self.sink.shutdown()
        self._wake_worker()
        self._thread.join(max(0.05, deadline - time.monotonic()))
        if self._thread.is_alive():
            logger.debug("launchtrace: the export worker did not stop; its pending spans are lost")
        self._stopped = True
        if self._probes_on:
            from launchtrace.capture import probes

            probes.configure(value_stats=False, device_timing=False)
            self._probes_on = False
        if self._sub is not None:
            self._sub.close()
            self._abandoned += len(self._sub.queue)
            self._sub.queue.clear()
        if done and self._own_sink:
            self.sink.shutdown()
        return self.stats()

    def stats(self) -> ExportStats:
        sink = self.sink.stats()
        builder = self._builder
        budget = getattr(builder, "dropped_budget", 0) if builder is not None else 0
        unsampled = getattr(builder, "dropped_unsampled", 0) if builder is not None else 0
        queue = (self._sub.dropped if self._sub is not None else 0) + self._abandoned
        return ExportStats(
            built=self._built,
            exported=sink.exported,
            dropped_sink=sink.dropped + self._lost_in_sink,
            dropped_queue=queue,
            dropped_budget=budget,
            unsampled=unsampled,
            folded_records=getattr(builder, "folded_records", 0) if builder is not None else 0,
            summary_spans=getattr(builder, "summary_spans", 0) if builder is not None else 0,
            batches=sink.batches,
            failures=sink.failures,
            sink=self.sink.description,
            raised=getattr(builder, "raised", 0) if builder is not None else 0,
        )

    # -- fork ------------------------------------------------------------------------------------------------
    def restart_in_child(self) -> None:
        """In a forked child: drop the parent's pending events and state, start a fresh worker and sink.

        This runs inside ``os.fork``'s after-fork hooks, before the hooks registered after ours (such as
        ``concurrent.futures``' reset of a lock held across the fork): nothing here may wait on another
        module's lock. So the child's resource is the parent's with the child's pid (``Resource.create``
        would run the SDK's detectors on a thread pool, whose lock is still held at this point).
        """
        from launchtrace.export.spanresource import with_pid

        resource = getattr(self._builder, "resource", None)
        if isinstance(resource, tuple):
            self._inherited_resource = with_pid(resource, os.getpid())
        old_sub = self._sub
        if old_sub is not None:
            old_sub.queue.clear()  # the parent's events: the parent exports them
            old_sub.close()
        self._wake = threading.Event()
        self._cond = threading.Condition()
        self._requested = self._done = 0
        self._final_requested = self._stopping = self._stopped = False
        self._abandoned = self._build_errors = self._built = self._lost_in_sink = self._sink_failures = 0
        self._sink_answers = True
        self._seen, self._deferred_since = 0, None
        self.observers = []  # the parent's metrics stay the parent's: a child calls start_metrics itself
        if self._own_sink:
            if isinstance(self.sink, FileSink):
                self.sink.reopen_after_fork()
            else:
                self.sink = sink_for(self.config)
        elif hasattr(self.sink, "reopen_after_fork"):
            self.sink.reopen_after_fork()
        if self._thread is not None:
            self.start()

    # -- the worker ------------------------------------------------------------------------------------------
    def _run(self) -> None:
        leave_signals_to_the_program()
        pauses = _pause_waiter()
        if pauses is not None:
            self._run_waiting_outside_the_gil(pauses)
            return
        interval = self.config.export_interval_s
        while True:
            if not self._behind():
                self._wake.wait(BUSY_GAP_S if self._deferred_since is not None else interval)
            self._wake.clear()
            with self._cond:
                ticket = self._requested
                final = self._final_requested
            urgent = final or self._stopping or ticket > self._done
            if self._wait_for_pause(len(self._sub.queue), urgent, time.monotonic()):
                continue
            if self._export_once(ticket, final):
                return

    def _run_waiting_outside_the_gil(self, pauses: Any) -> None:
        """The worker's loop where the compiled wrapper is built: every wait happens in C, without the GIL.

        It sleeps ``export_interval_s``, then, while the program launches, on until a pause of
        :data:`BUSY_GAP_S` (at most ``busy_defer_s`` more), and only then takes the GIL to export; a flush,
        stopping or a queue past half full wake it at once (``_fastlaunch.wait_for_pause``). Waiting from
        Python meant taking the GIL periodically to look, and a thread asking for the GIL costs the launching
        thread each time (what that came to: ``docs/export.md``, "Speed")."""
        config = self.config
        while True:
            token = pauses.wake_count()  # before the flags are read: a later wake ends the wait at once
            with self._cond:
                ticket = self._requested
                final = self._final_requested
            if not (final or self._stopping or ticket > self._done or self._wake.is_set() or self._behind()):
                pauses.wait_for_pause(
                    BUSY_GAP_S, config.export_interval_s + config.busy_defer_s, token, config.export_interval_s
                )
            self._wake.clear()
            with self._cond:
                ticket = self._requested
                final = self._final_requested
            if self._export_once(ticket, final):
                return

    def _behind(self) -> bool:
        """The capture queue is past half full: export now, without waiting for a pause. The wake that a queue
        passing half full sends may have come while the worker was writing (a sink slow to answer, the queue
        filling meanwhile), before the wait it was meant to end."""
        sub = self._sub
        return len(sub.queue) > sub.capacity // 2

    def _export_once(self, ticket: int, final: bool) -> bool:
        """One export cycle, then flush requests up to ``ticket`` are answered; whether the worker ends."""
        self._cycle(final)
        self._seen = len(self._sub.queue)
        with self._cond:
            if ticket > self._done:
                self._done = ticket
            self._cond.notify_all()
        return final or self._stopping

    def _wait_for_pause(self, queued: int, urgent: bool, now: float) -> bool:
        """Whether to keep waiting instead of exporting now (see the class docstring): the program queued
        events since the last look, nothing is urgent (flush, exit, a queue past half full), and the wait has
        not reached ``busy_defer_s``."""
        launching = queued > self._seen
        self._seen = queued
        if urgent or not launching or queued > self._sub.capacity // 2 or self.config.busy_defer_s <= 0:
            self._deferred_since = None
            return False
        if self._deferred_since is None:
            self._deferred_since = now
        if now - self._deferred_since < self.config.busy_defer_s:
            return True
        self._deferred_since = None
        return False

    def _wake_worker(self) -> None:
        """Wake the worker wherever it waits: on its event, or for a pause outside the GIL."""
        self._wake.set()
        pauses = _pause_waiter()
        if pauses is not None:
            pauses.wake()

    def _cycle(self, final: bool) -> None:
        """Drain the bus in small chunks, build spans, write them in batches of up to ``max_export_batch``;
        with ``final`` end everything open. Resting (see ``duty_cycle``) happens between chunks."""
        batch = self.config.max_export_batch
        chunk = min(batch, DRAIN_CHUNK)
        sub, builder = self._sub, self._builder
        pending: list = []
        # the final cycle takes what is queued now, not what threads still launching keep adding (exit would
        # never end): later events stay queued and are counted as dropped when the pipeline stops
        left = len(sub.queue) if final else -1
        while True:
            if final:
                if left <= 0:
                    break
                chunk = min(chunk, left)
            started = time.perf_counter()
            try:
                events = sub.drain(max_items=chunk)
            except Exception:  # a materialisation bug: never let it kill the worker
                self._log_worker_error("draining the capture bus")
                events = []
            for observe in self.observers:  # before sampling and folding: metrics count every record
                self._build(observe, events)
            pending += self._build(builder.feed, events)
            more = len(events) >= chunk or bool(sub.queue)
            if final:
                left -= len(events)
                more = more and left > 0 and not self._stopping  # stopping: the exit timeout has run out
            if pending and (len(pending) >= batch or not more):
                self._write_batches(pending, batch)
                pending = []
            if not more:
                break
            if not final:
                self._rest(time.perf_counter() - started)
        if final:
            spans = self._build(lambda _events: builder.flush(), ())
            if spans:
                self._write_batches(spans, batch)

    def _write_batches(self, spans: list, batch: int) -> None:
        """``spans`` written ``batch`` at a time: a step that ends releases every span it held back at once, and
        a chunk's spans on top of the ones pending made writes and OTLP requests of up to twice ``batch``."""
        for start in range(0, len(spans), batch):
            self._write(spans[start : start + batch] if len(spans) > batch else spans)

    def _write(self, spans: list) -> None:
        """Hand ``spans`` to the sink; while it answers, a full capture queue waits for it (see
        :data:`ANSWERING_SINK_WAIT_S`), and whether it answered decides the next write's wait."""
        self._built += len(spans)
        sub = self._sub
        if self._sink_answers:
            sub.consumer_busy_until = time.monotonic() + ANSWERING_SINK_WAIT_S
        try:
            self.sink.write(spans)
        except Exception:  # sinks never raise; a custom one that does must not kill the worker
            self._lost_in_sink += len(spans)
            self._sink_answers = False
            self._log_worker_error(f"writing to {self.sink.description}")
        else:
            failures = self.sink.stats().failures
            self._sink_answers = failures == self._sink_failures
            self._sink_failures = failures
        finally:  # answered: the worker drains next, and a waiting thread gives it the usual wait to do it
            sub.consumer_busy_until = time.monotonic() + FULL_QUEUE_WAIT_S

    def _rest(self, busy_s: float) -> None:
        """Rest so the worker's share stays at ``duty_cycle``, unless behind, flushing or stopping; a queue that
        passes half full during the rest ends it (the program may be filling it faster than the rest lasts)."""
        if self._duty >= 1.0 or self._stopping:
            return
        pauses = _pause_waiter()
        token = pauses.wake_count() if pauses is not None else 0  # before looking: a later wake ends the rest
        if self._behind():  # falling behind: run flat out (the GIL then slows the program)
            return
        with self._cond:
            if self._requested > self._done:
                return
        rest = busy_s * (1.0 - self._duty) / self._duty
        if pauses is not None:  # without the GIL; woken by a queue passing half full, a flush, stopping
            pauses.wait_for_pause(BUSY_GAP_S, rest, token, rest)
            return
        end = time.monotonic() + rest
        while not self._behind():  # nothing wakes this worker at half full: look every BUSY_GAP_S
            left = end - time.monotonic()
            if left <= 0 or self._wake.wait(min(left, BUSY_GAP_S)):
                return

    def _build(self, step: Callable[[Any], list], events: Any) -> list:
        try:
            return step(events)
        except Exception:  # a span-building bug: log once, keep exporting the rest
            self._log_worker_error("building spans")
            return []

    def _log_worker_error(self, what: str) -> None:
        self._build_errors += 1
        if self._build_errors == 1:
            logger.exception("launchtrace: export failed while %s; continuing (logged once)", what)
        else:
            logger.debug("launchtrace: export failed again while %s", what, exc_info=True)


def _pause_waiter() -> Any:
    """The compiled wrapper's module, which watches for pauses in the launches without the GIL; ``None`` where it
    is not built (or pure Python is asked for): the worker then looks every :data:`BUSY_GAP_S` itself."""
    return native.load("launchtrace.capture._fastlaunch")


def _default_builder(config: ExportConfig) -> Any:
    from launchtrace.export.spanbuilder import SpanBuilder

    return SpanBuilder(config)
