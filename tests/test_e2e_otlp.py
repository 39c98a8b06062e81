"""End to end over loopback: a real Warp program on the CPU, the export worker, OTLP gRPC / HTTP through the
SDK exporters, into ``launchtrace collect`` (in-process and as the real command). Every launch arrives once with
the parentage and attributes recorded; a receiver that dies mid-run costs spans, counted exactly, never the
program's results."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import launchtrace
from launchtrace import conventions as C
from launchtrace.capture import bus
from launchtrace.export.config import ExportConfig
from launchtrace.export.pipeline import ExportPipeline
from launchtrace.receiver.collect import Collector
from test_pipeline import file_spans


def run_steps(sim, steps: int, pipeline: ExportPipeline | None = None, flush_every: int = 0) -> None:
    for i in range(steps):
        with launchtrace.scope("step", i=i):
            sim.step()
        if pipeline is not None and flush_every and i % flush_every == flush_every - 1:
            pipeline.flush(30)


def check_every_launch_once(records: list, scopes: dict, spans: list) -> None:
    by_seq: dict[int, list] = {}
    for s in spans:
        if s.attribute(C.OP) is not None:
            by_seq.setdefault(s.attribute(C.SEQ), []).append(s)
    assert sorted(by_seq) == sorted(r.seq for r in records)
    span_of_scope = {s.attribute(C.SCOPE_ID): s for s in spans if s.attribute(C.SCOPE_KIND) == "user"}
    for rec in records:
        (span,) = by_seq[rec.seq]  # exactly once
        assert span.name == rec.kernel and span.attribute(C.KERNEL) == rec.kernel
        assert span.attribute(C.OP) == str(rec.op)
        assert tuple(span.attribute(C.DIM)) == tuple(rec.dim)
        qualified = f"{rec.site.module}.{rec.site.function}" if rec.site.module else rec.site.function
        assert span.attribute(C.CODE_LINE_NUMBER) == rec.site.line and span.attribute(C.CODE_FUNCTION_NAME) == qualified
        assert (span.start_ns, span.end_ns) == (rec.start_ns, rec.end_ns)
        parent = span_of_scope[rec.scope_id]
        assert span.parent_span_id == parent.span_id and span.trace_id == parent.trace_id
        assert parent.name == scopes[rec.scope_id].name == "step"
        assert parent.attribute("i") == dict(scopes[rec.scope_id].attributes)["i"]


def capture(sim, steps: int, pipeline: ExportPipeline) -> tuple[list, dict]:
    with bus.subscribe() as sub:
        run_steps(sim, steps, pipeline, flush_every=5)
        events = sub.drain()
    records = [item for kind, item in events if kind == "record"]
    scopes = {item.id: item for kind, item in events if kind == "scope_begin"}
    return records, scopes


@pytest.fixture
def sim(instrumented):
    import warp_programs

    s = warp_programs.Sim()
    s.step()
    return s


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_warp_program_over_otlp_into_the_collector(tmp_path: Path, sim, protocol: str) -> None:
    out = tmp_path / "collected.jsonl"
    with Collector(out, grpc_port=0, http_port=0, keep=True) as c:
        port = c.grpc_port if protocol == "grpc" else c.http_port
        cfg = ExportConfig.resolve(
            endpoint=f"http://127.0.0.1:{port}", protocol=protocol, export_interval_s=0.05, fold=False
        )
        pipeline = ExportPipeline(cfg).start()
        records, scopes = capture(sim, 12, pipeline)
        stats = pipeline.stop()
        assert c.wait_for_spans(stats.exported)
        received = c.spans()
    assert stats.exported == stats.built == len(received) and stats.dropped == 0
    check_every_launch_once(records, scopes, received)
    check_every_launch_once(records, scopes, file_spans(out))  # and the collector's file says the same


def test_warp_program_into_the_collect_command(tmp_path: Path, sim) -> None:
    out = tmp_path / "collected.jsonl"
    proc = subprocess.Popen(
        [sys.executable, "-m", "launchtrace", "collect", "--out", str(out), "--grpc", "0", "--http", "off"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline()
        port = int(line.split("grpc 127.0.0.1:")[1].split(";")[0])
        cfg = ExportConfig.resolve(endpoint=f"http://127.0.0.1:{port}", protocol="grpc", export_interval_s=0.05)
        pipeline = ExportPipeline(cfg).start()
        records, scopes = capture(sim, 10, pipeline)
        stats = pipeline.stop()
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert f"received {stats.exported} spans" in err
    check_every_launch_once(records, scopes, file_spans(out))


def test_receiver_stopped_mid_run_costs_spans_counted_exactly_not_results(
    tmp_path: Path, sim, monkeypatch: pytest.MonkeyPatch
) -> None:
    import warp_programs

    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "1")  # give up on a dead endpoint quickly
    bare = warp_programs.Sim()
    for _ in range(30):
        bare.step()
    expected = bare.result()

    sim2 = warp_programs.Sim()
    c = Collector(None, grpc_port=0, http_port=None, keep=True).start()
    cfg = ExportConfig.resolve(endpoint=f"http://127.0.0.1:{c.grpc_port}", protocol="grpc", export_interval_s=0.05)
    pipeline = ExportPipeline(cfg).start()
    run_steps(sim2, 15, pipeline, flush_every=5)
    pipeline.flush(30)
    c.stop()  # the receiver goes away mid-run
    run_steps(sim2, 15, pipeline, flush_every=5)
    stats = pipeline.stop(timeout=30)
    np.testing.assert_array_equal(sim2.result(), expected)  # identical results
    assert stats.exported == c.spans_received  # every span counted exported did arrive
    assert stats.dropped_sink > 0 and stats.built == stats.exported + stats.dropped_sink


def test_receiver_killed_mid_run_the_program_finishes(tmp_path: Path) -> None:
    """The program runs in its own process with ``launchtrace run``; the ``collect`` command is SIGKILLed
    after the first spans arrive. The program exits 0 and reports the drops."""
    out = tmp_path / "collected.jsonl"
    collector = subprocess.Popen(
        [sys.executable, "-m", "launchtrace", "collect", "--out", str(out), "--grpc", "0", "--http", "off"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    port = int(collector.stdout.readline().split("grpc 127.0.0.1:")[1].split(";")[0])
    marker = tmp_path / "half"
    program = tmp_path / "prog.py"
    program.write_text(
        f"""
import os, sys, time
sys.path.insert(0, {str(Path(__file__).resolve().parent)!r})
import launchtrace, warp_programs
sim = warp_programs.Sim()
for i in range(40):
    with launchtrace.scope("step", i=i):
        sim.step()
    if i == 19:
        launchtrace.flush()
        open({str(marker)!r}, "w").close()
        while os.path.exists({str(marker)!r}):
            time.sleep(0.05)
print("done", flush=True)
"""
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update(
        OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{port}",
        OTEL_EXPORTER_OTLP_PROTOCOL="grpc",
        OTEL_EXPORTER_OTLP_TIMEOUT="1",
        LAUNCHTRACE_EXPORT_INTERVAL="0.05",
    )
    prog = subprocess.Popen(
        [sys.executable, "-m", "launchtrace", "run", str(program)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        import time

        deadline = time.monotonic() + 120
        while not marker.exists() and time.monotonic() < deadline and prog.poll() is None:
            time.sleep(0.05)
        collector.kill()
        collector.wait(30)
        marker.unlink()
        stdout, stderr = prog.communicate(timeout=120)
    finally:
        for p in (prog, collector):
            if p.poll() is None:
                p.kill()
    assert prog.returncode == 0, stderr
    assert stdout.endswith("done\n")
    assert "dropped" in stderr and "Traceback" not in stderr
    summary = [line for line in stderr.splitlines() if line.startswith("launchtrace: ")][-1]
    exported = int(summary.split()[1])
    assert 0 < exported < 40 * 6 + 1
    assert len([s for s in file_spans(out) if s.attribute(C.OP)]) <= exported


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_receiver_down_from_the_start_costs_every_span_counted_never_results(
    sim, monkeypatch: pytest.MonkeyPatch, protocol: str
) -> None:
    import warp_programs
    from test_sinks import free_port

    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "1")
    bare = warp_programs.Sim()
    for _ in range(10):
        bare.step()
    cfg = ExportConfig.resolve(
        endpoint=f"http://127.0.0.1:{free_port()}", protocol=protocol, export_interval_s=0.05, fold=False
    )
    sim2 = warp_programs.Sim()  # built before export: Warp's internal fills and copy are not what this counts
    pipeline = ExportPipeline(cfg).start()
    run_steps(sim2, 10, pipeline, flush_every=5)
    stats = pipeline.stop(timeout=30)
    np.testing.assert_array_equal(sim2.result(), bare.result())
    assert stats.exported == 0 and stats.built == stats.dropped_sink == 10 * (5 + 1)
