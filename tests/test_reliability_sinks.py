"""Sink faults under a real Warp program: the program's results never change, it is never held up, memory
stays bounded, and every span is either delivered or counted as dropped, exactly.

Everything here is real: Warp kernels on the CPU device, the export pipeline with the OpenTelemetry SDK's
own OTLP exporters (their retry and back-off logic), ``launchtrace collect``'s receiver on loopback, and for
the faults small real servers: a grpcio ``TraceService`` and an ``http.server`` that answer with scripted
status codes (UNAVAILABLE, RESOURCE_EXHAUSTED with a RetryInfo delay, HTTP 503 with Retry-After, 400), a TCP
listener that accepts and never answers, and one that answers with random bytes. The full disk is a real
tmpfs of 64 KiB (or ``/dev/full`` when mounting is not allowed) and the read-only folder a read-only tmpfs.

Each test measures a bare run of the same program in the same process and bounds the exported run's time
generously against it (the launching thread must never wait for the sink), never against a fixed time.

Each test builds the program's arrays (``fresh_sim``) before export starts: the fills and the copy Warp issues
inside ``wp.zeros`` / ``wp.array(data)`` are exported too (internal records), and these tests are about what
the sink does with a known number of spans, not about the program's setup.
"""

from __future__ import annotations

import contextlib
import http.server
import logging
import os
import random
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path

import numpy as np
import pytest

import launchtrace
import launchtrace.capture as capture
import launchtrace.export as export
from launchtrace import conventions as C
from launchtrace.receiver.collect import Collector
from loopback_http import serve_in_background, stop_serving

STEPS = 20
RECORDS_PER_STEP = 5  # Sim.step: a copy, a launch, a fill, two launches
SPANS_PER_STEP = RECORDS_PER_STEP + 1  # with folding off: one span per record plus the step scope
EXPORTER_TIMEOUT_S = 1.0  # OTEL_EXPORTER_OTLP_TIMEOUT for the dead-endpoint cases: retries end within this


# -- the program ------------------------------------------------------------------------------------------
def fresh_sim():
    """The small particle Sim, its arrays built (call it before export starts, see the module docstring)."""
    import warp_programs

    return warp_programs.Sim(seed=1)


def run_program(steps: int, sim, first: int = 0):
    """``steps`` scoped steps of ``sim``; (its final state, seconds the steps took, the Sim)."""
    t0 = time.perf_counter()
    for i in range(first, first + steps):
        with launchtrace.scope("step", i=i):
            sim.step()
    return sim.result(), time.perf_counter() - t0, sim


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.fixture
def bare(warp_cpu):
    """The program's result and time with nothing instrumented (after one warm-up that compiles)."""
    capture.uninstrument()
    run_program(2, fresh_sim())
    result, seconds, _ = run_program(STEPS, fresh_sim())
    return result, seconds


@pytest.fixture(autouse=True)
def _clean_export(monkeypatch):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", str(EXPORTER_TIMEOUT_S))
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", str(EXPORTER_TIMEOUT_S))
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "LAUNCHTRACE_FILE"):
        monkeypatch.delenv(name, raising=False)
    yield
    export.stop_export(5.0)
    capture.uninstrument()


def start(endpoint: str | None, protocol: str = "grpc", **kw):
    settings = {"fold": False, "export_interval_s": 60.0, **kw}  # the worker exports when flushed or stopped
    if endpoint is not None:
        settings.update(endpoint=endpoint, protocol=protocol)
    return export.start_export(**settings)


def endpoint_of(protocol: str, port: int) -> str:
    return f"http://127.0.0.1:{port}" + ("/v1/traces" if protocol == "http/protobuf" else "")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def assert_not_held_up(traced_s: float, bare_s: float) -> None:
    """The launching thread only appends to a queue: generous, relative bound (CI machines are noisy)."""
    assert traced_s < 5 * bare_s + 1.5, (traced_s, bare_s)


# -- scripted servers ---------------------------------------------------------------------------------------
class ScriptedGrpc:
    """A real grpcio OTLP TraceService that answers each Export with the next scripted action.

    An action is ``None`` (accept) or ``(grpc.StatusCode, retry_delay_s or None)``; past the script, accept.
    """

    def __init__(self, script: list) -> None:
        import grpc
        from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

        self.script = list(script)
        self.attempts: list[float] = []
        self.spans = 0
        self.seqs: list[int] = []  # the capture sequence numbers of the record spans accepted
        server = self

        class Service(trace_service_pb2_grpc.TraceServiceServicer):
            def Export(self, request, context):
                server.attempts.append(time.monotonic())
                action = server.script.pop(0) if server.script else None
                if action is None:
                    spans = [sp for r in request.resource_spans for s in r.scope_spans for sp in s.spans]
                    server.spans += len(spans)
                    server.seqs += [a.value.int_value for sp in spans for a in sp.attributes if a.key == C.SEQ]
                    return trace_service_pb2.ExportTraceServiceResponse()
                code, delay = action
                if delay is not None:
                    from google.protobuf.duration_pb2 import Duration
                    from google.rpc.error_details_pb2 import RetryInfo

                    info = RetryInfo(retry_delay=Duration(seconds=int(delay), nanos=int(delay % 1 * 1e9)))
                    context.set_trailing_metadata((("google.rpc.retryinfo-bin", info.SerializeToString()),))
                context.abort(code, "scripted failure")

        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Service(), self._server)
        self.port = self._server.add_insecure_port("127.0.0.1:0")
        self._server.start()

    def stop(self) -> None:
        self._server.stop(0).wait()


class ScriptedHttp:
    """A real OTLP/HTTP endpoint answering each POST with the next scripted ``(status, headers)``; past the
    script (or ``None``), 200 with an empty ExportTraceServiceResponse."""

    def __init__(self, script: list) -> None:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
            ExportTraceServiceResponse,
        )

        self.script = list(script)
        self.attempts: list[float] = []
        self.spans = 0
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, format, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                owner.attempts.append(time.monotonic())
                action = owner.script.pop(0) if owner.script else None
                if action is None:
                    req = ExportTraceServiceRequest.FromString(body)
                    owner.spans += sum(len(s.spans) for r in req.resource_spans for s in r.scope_spans)
                    status, headers, reply = 200, {}, ExportTraceServiceResponse().SerializeToString()
                else:
                    (status, headers), reply = action, b"scripted failure"
                self.send_response(status)
                for k, v in {"Content-Type": "application/x-protobuf", **headers}.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = serve_in_background(self._server)

    def stop(self) -> None:
        stop_serving(self._server)


@contextlib.contextmanager
def raw_listener(garbage: bool) -> Iterator[int]:
    """A real TCP listener: accepts and never answers (``garbage=False``) or answers random bytes and closes."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    stop = threading.Event()
    held: list[socket.socket] = []

    def serve() -> None:
        sock.settimeout(0.1)
        rng = random.Random(7)
        while not stop.is_set():
            try:
                conn, _ = sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            if garbage:
                with contextlib.suppress(OSError):
                    conn.recv(65536)
                    conn.sendall(bytes(rng.randrange(256) for _ in range(512)))
                conn.close()
            else:
                held.append(conn)  # keep it open, say nothing

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        yield sock.getsockname()[1]
    finally:
        stop.set()
        t.join(2)
        for c in held:
            c.close()
        sock.close()


# -- OTLP endpoint absent, killed, restarted --------------------------------------------------------------
@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_endpoint_absent_from_the_start(protocol, bare, caplog):
    rss0 = rss_bytes()
    sim = fresh_sim()
    start(endpoint_of(protocol, free_port()), protocol)
    with caplog.at_level(logging.WARNING, logger="launchtrace"):
        result, seconds, _ = run_program(STEPS, sim)
        t0 = time.perf_counter()
        final = export.stop_export(EXPORTER_TIMEOUT_S + 10)
        stop_s = time.perf_counter() - t0
    assert np.array_equal(result, bare[0])
    assert_not_held_up(seconds, bare[1])
    assert stop_s < EXPORTER_TIMEOUT_S + 5, stop_s
    expected = STEPS * SPANS_PER_STEP
    assert (final.built, final.exported, final.dropped_sink, final.dropped_queue) == (expected, 0, expected, 0)
    ours = [r for r in caplog.records if r.name.startswith("launchtrace") and r.levelno >= logging.WARNING]
    assert len([r for r in ours if "could not export" in r.getMessage()]) == 1
    assert rss_bytes() - rss0 < 64 << 20


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_endpoint_killed_mid_run(protocol, bare, tmp_path):
    collector = Collector(
        tmp_path / "got.jsonl",
        grpc_port=0 if protocol == "grpc" else None,
        http_port=0 if protocol != "grpc" else None,
    ).start()
    port = collector.grpc_port if protocol == "grpc" else collector.http_port
    sim = fresh_sim()
    start(endpoint_of(protocol, port), protocol)
    half = STEPS // 2
    _, s1, _ = run_program(half, sim)
    assert export.flush(10)
    collector.stop()  # killed: everything after this is lost, and counted
    result, s2, _ = run_program(STEPS - half, sim, first=half)
    final = export.stop_export(EXPORTER_TIMEOUT_S + 10)
    assert np.array_equal(result, bare[0])
    assert_not_held_up(s1 + s2, bare[1])
    assert collector.spans_received == final.exported == half * SPANS_PER_STEP
    assert final.dropped_sink == (STEPS - half) * SPANS_PER_STEP and final.dropped_queue == 0
    assert final.built == final.exported + final.dropped_sink


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_endpoint_restarted_within_the_retry_window_loses_nothing(protocol, bare, tmp_path, monkeypatch):
    """Down while the exporter sends; back after ~1.5 s, within the SDK's retry window (timeout 10 s): the
    spans held meanwhile (in the worker's batch and the bus queue) are all delivered, none dropped."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "10")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "10")
    port = free_port()
    kw = {"grpc_port": port, "http_port": None} if protocol == "grpc" else {"grpc_port": None, "http_port": port}
    sim = fresh_sim()
    start(endpoint_of(protocol, port), protocol)
    result, seconds, _ = run_program(STEPS, sim)
    flusher = threading.Thread(target=export.flush, args=(30,))
    flusher.start()  # the worker starts sending now, into nothing, and backs off
    time.sleep(1.5)
    with Collector(tmp_path / "got.jsonl", **kw) as collector:
        flusher.join(30)
        final = export.stop_export(20)
        assert collector.wait_for_spans(final.exported, 5)
    assert np.array_equal(result, bare[0])
    assert_not_held_up(seconds, bare[1])
    expected = STEPS * SPANS_PER_STEP
    assert (final.exported, final.dropped) == (expected, 0)
    assert collector.spans_received == expected


def test_restart_beyond_the_buffer_capacity_drops_exactly_the_overflow(bare, tmp_path, monkeypatch):
    """The worker is stuck retrying the first batch while the program keeps going: the bus queue holds
    ``queue_capacity`` events and counts every later one it refuses; once the endpoint is back, the first
    batch and the queued events arrive and nothing else is lost."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "10")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "10")
    port = free_port()
    capacity = 40
    sim = fresh_sim()
    start(endpoint_of("grpc", port), queue_capacity=capacity)
    for _ in range(3):  # 15 records, no scope: the first batch
        sim.step()
    flusher = threading.Thread(target=export.flush, args=(30,))
    flusher.start()
    time.sleep(0.3)  # the worker has drained the 15 events and is retrying
    with launchtrace.scope("later"):
        for _ in range(20):  # 100 records + scope begin/end = 102 events into a queue of 40
            sim.step()
    time.sleep(1.2)
    with Collector(None, grpc_port=port, http_port=None, keep=True) as collector:
        flusher.join(30)
        final = export.stop_export(20)
        assert collector.wait_for_spans(final.exported, 5)
    events_later = 20 * RECORDS_PER_STEP + 2
    assert final.dropped_queue == events_later - capacity
    assert final.dropped_sink == 0 and final.dropped_budget == 0
    assert collector.spans_received == final.exported == final.built
    seqs = sorted(s.attribute(C.SEQ) for s in collector.spans() if s.attribute(C.OP))
    assert len(seqs) == len(set(seqs))  # nothing delivered twice
    assert seqs[:15] == list(range(seqs[0], seqs[0] + 15))  # the whole first batch arrived
    # the bus keeps what it queued first and refuses the rest (launchtrace.capture.bus): the scope's begin
    # and the next capacity - 1 records arrived, in order, with no gap
    first = seqs[0]
    assert seqs == [*range(first, first + 15), *range(first + 16, first + 16 + capacity - 1)]


# -- slow, erroring and garbage-speaking endpoints ------------------------------------------------------------
def slow_grpc(answer_s: float) -> ScriptedGrpc:
    """A real OTLP/gRPC endpoint that accepts every request after ``answer_s`` seconds."""
    slow = ScriptedGrpc([])

    class Slow(list):
        def __bool__(self) -> bool:  # never empty: ScriptedGrpc asks for an action on every request
            return True

        def pop(self, i):
            time.sleep(answer_s)
            return None  # accept

    slow.script = Slow()
    return slow


@pytest.fixture
def answers_within_10_s(monkeypatch):
    """An exporter timeout that a slow endpoint's answers fit in (the module's 1 s is for dead endpoints)."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "10")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "10")


def test_slow_endpoint_that_answers_after_seconds_delivers_everything_without_holding_the_program(
    bare, answers_within_10_s
):
    slow = slow_grpc(2.0)
    try:
        sim = fresh_sim()
        start(endpoint_of("grpc", slow.port), export_interval_s=0.05)  # batches go out while the program runs
        result, seconds, _ = run_program(STEPS, sim)
        final = export.stop_export(30)
    finally:
        slow.stop()
    assert np.array_equal(result, bare[0])
    assert_not_held_up(seconds, bare[1])
    assert final.dropped == 0 and final.exported == slow.spans == STEPS * SPANS_PER_STEP


FULL_STEPS = 400  # 2,800 capture events into a queue of 700 (about 0.1 s of launches): it fills during each answer
FULL_CAPACITY = 700


def test_a_full_queue_waits_for_an_endpoint_slower_than_the_fixed_wait_and_loses_nothing(bare, answers_within_10_s):
    """The soak's flaky failure, made deterministic: ``launchtrace collect`` on a loaded machine took 70-190 ms
    to answer a request, the worker drains nothing while its write is unanswered, and the launching thread's
    fixed 0.1 s wait for room ran out, after which every event was dropped until half the queue drained
    (39,396-68,580 of 250,000). Here every answer takes 0.3 s and the queue fills during each one: the
    program waits for the answering endpoint (the queue did fill: ``waits``) and every span arrives."""
    from launchtrace.export.pipeline import ANSWERING_SINK_WAIT_S, FULL_QUEUE_WAIT_S

    answer_s = 0.3
    assert FULL_QUEUE_WAIT_S < answer_s < ANSWERING_SINK_WAIT_S
    slow = slow_grpc(answer_s)
    try:
        sim = fresh_sim()
        pipeline = start(endpoint_of("grpc", slow.port), export_interval_s=0.05, queue_capacity=FULL_CAPACITY)
        run_program(FULL_STEPS, sim)
        waits = pipeline._sub.waits
        final = export.stop_export(30)
    finally:
        slow.stop()
    assert waits > 0, "the queue never filled: the test did not test the wait"
    assert (final.dropped_queue, final.dropped_sink) == (0, 0), final
    assert final.exported == slow.spans == FULL_STEPS * SPANS_PER_STEP


def test_an_endpoint_slower_than_the_longest_wait_costs_one_bounded_wait_and_counts_the_overflow(
    bare, answers_within_10_s
):
    """An endpoint that answers after 1.5 s, past :data:`ANSWERING_SINK_WAIT_S`: the launching thread waits at
    most that long for it, then events are dropped (counted) until half the queue drained, as for a worker
    that stopped. Every event is counted by a second subscription; each is a record, so one span: every one is
    delivered or counted as dropped, none twice."""
    from launchtrace import rawevent
    from launchtrace.capture import bus
    from launchtrace.export.pipeline import ANSWERING_SINK_WAIT_S, FULL_QUEUE_WAIT_S

    slow = slow_grpc(1.5)
    try:
        sim = fresh_sim()
        pipeline = start(endpoint_of("grpc", slow.port), export_interval_s=0.05, queue_capacity=FULL_CAPACITY)
        with bus.subscribe(capacity=10 * FULL_STEPS * RECORDS_PER_STEP) as issued:
            t0 = time.perf_counter()
            for _ in range(FULL_STEPS):
                sim.step()
            seconds = time.perf_counter() - t0
        waits = pipeline._sub.waits
        final = export.stop_export(30)
    finally:
        slow.stop()
    events = issued.drain_raw()
    assert {e[rawevent.KIND] for e in events} == {rawevent.RECORD} and len(events) >= FULL_STEPS * RECORDS_PER_STEP
    # held up by its waits and nothing else, at most one per request (then it drops until half the queue drained)
    assert 1 <= waits <= len(slow.attempts) and final.dropped_queue > 0, (waits, final)
    assert_not_held_up(seconds - waits * (ANSWERING_SINK_WAIT_S + FULL_QUEUE_WAIT_S), bare[1] * FULL_STEPS / STEPS)
    assert final.dropped_sink == 0 and final.exported == slow.spans == final.built
    assert len(set(slow.seqs)) == len(slow.seqs) and set(slow.seqs) <= {e[rawevent.SEQ] for e in events}
    assert len(slow.seqs) + final.dropped_queue == len(events)


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_endpoint_that_never_answers_is_given_up_within_the_timeout(protocol, bare):
    with raw_listener(garbage=False) as port:
        sim = fresh_sim()
        start(endpoint_of(protocol, port), protocol)
        result, seconds, _ = run_program(STEPS, sim)
        t0 = time.perf_counter()
        final = export.stop_export(EXPORTER_TIMEOUT_S + 10)
        stop_s = time.perf_counter() - t0
    assert np.array_equal(result, bare[0])
    assert_not_held_up(seconds, bare[1])
    assert stop_s < EXPORTER_TIMEOUT_S + 5, stop_s
    assert (final.exported, final.dropped_sink) == (0, STEPS * SPANS_PER_STEP)


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_endpoint_answering_garbage_bytes(protocol, bare):
    with raw_listener(garbage=True) as port:
        sim = fresh_sim()
        start(endpoint_of(protocol, port), protocol)
        result, seconds, _ = run_program(STEPS, sim)
        final = export.stop_export(EXPORTER_TIMEOUT_S + 10)
    assert np.array_equal(result, bare[0])
    assert_not_held_up(seconds, bare[1])
    assert (final.exported, final.dropped_sink, final.dropped_queue) == (0, STEPS * SPANS_PER_STEP, 0)


@pytest.mark.parametrize(
    ("script", "delivered", "min_gap"),
    [
        pytest.param([("UNAVAILABLE", None)], True, 0.5, id="unavailable-then-ok"),
        pytest.param([("RESOURCE_EXHAUSTED", 1.5)], True, 1.4, id="resource-exhausted-retry-info-1.5s"),
        pytest.param([("UNAVAILABLE", None)] * 50, False, 0.0, id="always-unavailable"),
        pytest.param([("INVALID_ARGUMENT", None)], False, 0.0, id="invalid-argument-not-retried"),
    ],
)
def test_grpc_error_codes(script, delivered, min_gap, bare, monkeypatch):
    import grpc

    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "4")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "4")
    server = ScriptedGrpc([(getattr(grpc.StatusCode, code), delay) for code, delay in script])
    try:
        sim = fresh_sim()
        start(endpoint_of("grpc", server.port))
        result, seconds, _ = run_program(STEPS, sim)
        final = export.stop_export(15)
    finally:
        server.stop()
    expected = STEPS * SPANS_PER_STEP
    assert np.array_equal(result, bare[0])
    assert_not_held_up(seconds, bare[1])
    if delivered:
        assert (final.exported, final.dropped, server.spans) == (expected, 0, expected)
        assert server.attempts[1] - server.attempts[0] >= min_gap  # the back-off (or RetryInfo delay) was kept
    else:
        assert (final.exported, final.dropped_sink, server.spans) == (0, expected, 0)
    if script[0][0] == "INVALID_ARGUMENT":
        assert len(server.attempts) == 1  # not retryable: one attempt


@pytest.mark.parametrize(
    ("script", "delivered", "min_gap"),
    [
        pytest.param([(503, {"Retry-After": "1"})], True, 0.95, id="503-retry-after-1s"),
        pytest.param([(429, {})], True, 0.5, id="429-backoff"),
        pytest.param([(503, {"Retry-After": "1"})] * 50, False, 0.0, id="always-503"),
        pytest.param([(400, {})], False, 0.0, id="400-not-retried"),
    ],
)
def test_http_error_codes(script, delivered, min_gap, bare, monkeypatch):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "4")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "4")
    server = ScriptedHttp(script)
    try:
        sim = fresh_sim()
        start(endpoint_of("http/protobuf", server.port), "http/protobuf")
        result, seconds, _ = run_program(STEPS, sim)
        final = export.stop_export(15)
    finally:
        server.stop()
    expected = STEPS * SPANS_PER_STEP
    assert np.array_equal(result, bare[0])
    assert_not_held_up(seconds, bare[1])
    if delivered:
        assert (final.exported, final.dropped, server.spans) == (expected, 0, expected)
        assert server.attempts[1] - server.attempts[0] >= min_gap  # Retry-After (or the back-off) was kept
    else:
        assert (final.exported, final.dropped_sink, server.spans) == (0, expected, 0)
    if script[0][0] == 400:
        assert len(server.attempts) == 1


# -- the file sink on a full disk and in a read-only folder ---------------------------------------------------
@contextlib.contextmanager
def tmpfs(path: Path, options: str) -> Iterator[bool]:
    """Mount a real tmpfs at ``path`` (root only); yields whether it is mounted."""
    path.mkdir(parents=True, exist_ok=True)
    ok = (
        os.geteuid() == 0
        and subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], capture_output=True).returncode
        == 0
    )
    try:
        yield ok
    finally:
        if ok:
            subprocess.run(["umount", "-l", str(path)], capture_output=True, check=False)


def test_file_sink_on_a_full_disk_warns_once_and_the_program_is_unharmed(bare, tmp_path, caplog):
    with tmpfs(tmp_path / "small", "size=64k") as mounted:
        target = tmp_path / "small" / "spans.jsonl" if mounted else Path("/dev/full")
        if mounted:
            (tmp_path / "small" / "filler").write_bytes(b"x" * (64 * 1024 - 4096))  # leave one page
        with caplog.at_level(logging.WARNING, logger="launchtrace"):
            sim = fresh_sim()
            start(None, file_path=str(target), export_interval_s=0.05)
            result, seconds, _ = run_program(STEPS, sim)
            final = export.stop_export(10)
        written = target.read_bytes() if mounted else b""
    assert np.array_equal(result, bare[0])
    assert_not_held_up(seconds, bare[1])
    assert final.built == STEPS * SPANS_PER_STEP == final.exported + final.dropped_sink
    assert final.dropped_sink > 0
    assert written.count(b"\n") == len(written.splitlines())  # only whole lines were left in the file
    warnings = [r for r in caplog.records if r.name.startswith("launchtrace") and "could not export" in r.getMessage()]
    assert len(warnings) == 1 and "No space left" in warnings[0].getMessage()


def test_file_sink_in_a_read_only_folder_warns_once_and_the_program_is_unharmed(bare, tmp_path, caplog):
    with tmpfs(tmp_path / "ro", "ro,size=64k") as mounted:
        if not mounted:
            pytest.skip("needs root to mount a read-only tmpfs; test_sinks covers a chmod 555 folder")
        with caplog.at_level(logging.WARNING, logger="launchtrace"):
            sim = fresh_sim()
            start(None, file_path=str(tmp_path / "ro" / "spans.jsonl"), export_interval_s=0.05)
            result, seconds, _ = run_program(STEPS, sim)
            final = export.stop_export(10)
    assert np.array_equal(result, bare[0])
    assert_not_held_up(seconds, bare[1])
    assert (final.exported, final.dropped_sink) == (0, STEPS * SPANS_PER_STEP)
    warnings = [r for r in caplog.records if r.name.startswith("launchtrace") and "could not export" in r.getMessage()]
    assert len(warnings) == 1 and "Read-only file system" in warnings[0].getMessage()
