"""Live against the real Jaeger v2: what goes wrong. A Jaeger stopped mid-export (nothing it acknowledged is
lost, what it could not take is counted dropped, the program's results are untouched); a trace id Jaeger does
not have (one line, exit 2); a search window with nothing in it.

The stopped Jaeger is a front tier (OTLP in, OTLP out) in front of the session's Jaeger, as a Collector would
be, so that what it acknowledged can still be counted in the store after it is gone.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import launchtrace
from jaeger_live import Jaeger
from launchtrace.cli import main
from launchtrace.export.config import ExportConfig
from launchtrace.export.pipeline import ExportPipeline
from test_pipeline import file_spans


def front_config(ports: dict[str, int], store_grpc: str) -> dict:
    """A Jaeger that only forwards: OTLP in, OTLP out to the store (no batching: it holds nothing back)."""
    host = "127.0.0.1"
    return {
        "service": {
            "extensions": ["healthcheckv2"],
            "pipelines": {"traces": {"receivers": ["otlp"], "exporters": ["otlp"]}},
            "telemetry": {
                "logs": {"level": "warn"},
                "metrics": {
                    "readers": [{"pull": {"exporter": {"prometheus": {"host": host, "port": ports["metrics"]}}}}]
                },
            },
        },
        "extensions": {"healthcheckv2": {"use_v2": True, "http": {"endpoint": f"{host}:{ports['health']}"}}},
        "receivers": {"otlp": {"protocols": {"grpc": {"endpoint": f"{host}:{ports['otlp_grpc']}"}}}},
        "exporters": {"otlp": {"endpoint": store_grpc.removeprefix("http://"), "tls": {"insecure": True}}},
    }


def steps(sim, n: int, first: int, pipeline: ExportPipeline) -> None:
    for i in range(first, first + n):
        with launchtrace.scope("step", i=i):
            sim.step()
        if i % 5 == 4:
            pipeline.flush(30)


def test_jaeger_stopped_mid_export_loses_nothing_it_acknowledged(
    jaeger, instrumented, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import warp_programs

    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "1")  # give up on the dead endpoint quickly
    bare = warp_programs.Sim()
    for _ in range(30):
        bare.step()
    expected = bare.result()

    front = Jaeger(tmp_path / "front", make_config=lambda ports: front_config(ports, jaeger.otlp_grpc))
    front.start()
    sim = warp_programs.Sim()
    cfg = ExportConfig.resolve(
        endpoint=front.otlp_grpc, protocol="grpc", service_name="live-stopped", export_interval_s=0.05
    )
    pipeline = ExportPipeline(cfg).start()
    try:
        steps(sim, 15, 0, pipeline)
        front.stop()  # Jaeger goes away mid-run (SIGTERM: it drains what it acknowledged, then exits)
        steps(sim, 15, 15, pipeline)
    finally:
        stats = pipeline.stop(timeout=30)
        front.stop()
    np.testing.assert_array_equal(sim.result(), expected)  # the program's results are untouched
    assert stats.dropped_sink > 0 and stats.built == stats.exported + stats.dropped_sink
    out = tmp_path / "stored.jsonl"
    source = f"jaeger+{jaeger.query_url}?service=live-stopped&since=1h&limit=100"
    for _ in range(100):  # the store's batch processor writes a moment after it received
        assert main(["pull", source, "--out", str(out), "--quiet"]) == 0
        if len(file_spans(out)) >= stats.exported:
            break
        time.sleep(0.1)
    assert len(file_spans(out)) == stats.exported  # every span the exporter counted exported is in Jaeger


def cli(*argv: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    return subprocess.run(
        [sys.executable, "-m", "launchtrace", *argv], capture_output=True, text=True, env=env, timeout=120
    )


def test_a_trace_id_jaeger_does_not_have_is_one_line_and_exit_2(jaeger, tmp_path: Path) -> None:
    out = tmp_path / "none.jsonl"
    proc = cli("pull", f"jaeger+{jaeger.query_url}", "--trace-id", "7" * 32, "--out", str(out))
    assert proc.returncode == 2
    assert proc.stderr == f"launchtrace pull: error: {jaeger.query_url}: trace {'7' * 32} not found\n"
    assert not out.exists()
    proc = cli("summary", f"jaeger+{jaeger.query_url}?trace-id={'7' * 32}&api=classic")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "no launchtrace spans" in proc.stderr, proc.stderr


def test_a_search_window_with_nothing_in_it(jaeger, tmp_path: Path) -> None:
    out = tmp_path / "empty.jsonl"
    window = ("--since", "2020-01-01T00:00:00Z", "--until", "2020-01-02T00:00:00Z")
    proc = cli("pull", f"jaeger+{jaeger.query_url}", "--service", "live-grpc", *window, "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == f"pulled 0 spans in 0 traces from {jaeger.query_url} (jaeger) -> {out}\n"
    assert out.read_text() == ""
    proc = cli("summary", f"jaeger+{jaeger.query_url}?service=nobody&since=1h")
    assert proc.returncode == 2
    assert proc.stderr == (
        f"launchtrace summary: error: jaeger+{jaeger.query_url}?service=nobody&since=1h: no launchtrace spans in "
        "this source\n"
    )
    proc = cli(
        "pull", f"jaeger+{jaeger.query_url}", "--service", "x", "--since", "1h", "--until", "2h", "--out", str(out)
    )
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "starts after it ends" in proc.stderr
