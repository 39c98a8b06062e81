"""Live: the real Jaeger v2 as the Collector, running the shipped deploy/jaeger/collector-tail-sampling.yaml
(its endpoints and timings from the environment: every one on 127.0.0.1).

- ``tail_sampling`` stores only the slow steps (a latency policy on the step root) and the step with an errored
  launch; the fast clean steps are not stored;
- ``spanmetrics`` sees every span all the same: its ``prometheus`` exporter, scraped by the real Prometheus,
  counts every span the program exported, stored or not;
- three real Warp services (two clean hosts, one slow build) export to it; Prometheus evaluates
  deploy/prometheus/launchtrace-rules.yaml over the span metrics and the alert reaches the real Alertmanager:
  the slow host fires, the clean hosts do not.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import launchtrace
from fleet_gen import APP, Member, run_env
from jaeger_live import ROOT, Jaeger
from launchtrace.cli import main
from launchtrace.export.config import ExportConfig
from launchtrace.export.pipeline import ExportPipeline
from launchtrace.sources.loading import load_traces
from monitoring import PROMETHEUS, Alertmanager, Prometheus, WebhookReceiver

CONFIG = ROOT / "deploy" / "jaeger" / "collector-tail-sampling.yaml"
RULES = ROOT / "deploy" / "prometheus" / "launchtrace-rules.yaml"
SLOW_STEP_MS = 400


class CollectorJaeger(Jaeger):
    """The shipped config as it is; the environment gives it loopback ports and short timings."""

    def __init__(self, folder: Path) -> None:
        super().__init__(folder, config={})
        self.config_path = CONFIG

    def pick_ports(self) -> None:
        super().pick_ports()
        self.env = {
            "JAEGER_LISTEN_HOST": "127.0.0.1",
            "JAEGER_METRICS_PORT": str(self.ports["metrics"]),
            "JAEGER_HEALTH_PORT": str(self.ports["health"]),
            "JAEGER_QUERY_HTTP_PORT": str(self.ports["query_http"]),
            "JAEGER_QUERY_GRPC_PORT": str(self.ports["query_grpc"]),
            "OTLP_GRPC_PORT": str(self.ports["otlp_grpc"]),
            "OTLP_HTTP_PORT": str(self.ports["otlp_http"]),
            "SPANMETRICS_PORT": str(self.ports["prom_exporter"]),
            "SPANMETRICS_FLUSH": "1s",
            "TAIL_DECISION_WAIT": "3s",
            "SLOW_STEP_MS": str(SLOW_STEP_MS),
        }


def tail_sampled_program(endpoint: str) -> tuple[set[int], set[int], int]:
    """Eight steps over OTLP: five fast and clean, two slow, one fast with a launch that raises. The ``i`` of
    the slow ones, of the errored one, and the spans exported."""
    import warp as wp

    import warp_programs

    x = wp.zeros(4, dtype=float, device="cpu")
    wp.launch(warp_programs.scale, dim=4, inputs=[x, x, 1.0])  # compile and allocate outside the steps
    cfg = ExportConfig.resolve(endpoint=endpoint, protocol="grpc", service_name="live-tail", export_interval_s=0.05)
    pipeline = ExportPipeline(cfg).start()
    slow, errored = {2, 5}, {6}
    for i in range(8):
        with launchtrace.scope("step", i=i):
            wp.launch(warp_programs.scale, dim=4, inputs=[x, x, 2.0])
            if i in slow:
                time.sleep(2.5 * SLOW_STEP_MS / 1000)
            if i in errored:
                raised = False
                try:
                    wp.launch(warp_programs.scale, dim=4, inputs=[x, "not a float", 1.0])
                except Exception:  # Warp refuses the argument; launchtrace records the launch as failed
                    raised = True
                assert raised
            wp.launch(warp_programs.scale, dim=4, inputs=[x, x, 0.5])
    stats = pipeline.stop(30)
    assert stats.dropped == 0
    return slow, errored, stats.exported


def stored_steps(jaeger: Jaeger, tmp_path: Path, want: int) -> list[int]:
    """The ``i`` of every step trace of live-tail that Jaeger stored, once ``want`` are there (or 20 s)."""
    out = tmp_path / "stored.jsonl"
    source = f"jaeger+{jaeger.query_url}?service=live-tail&since=1h&limit=50"
    found: list[int] = []
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if main(["pull", source, "--out", str(out), "--quiet"]) == 0 and out.stat().st_size:
            found = sorted(
                dict(s.attributes)["i"] for t in load_traces(out) for s in t.scopes.values() if s.name == "step"
            )
            if len(found) >= want:
                break
        time.sleep(0.5)
    return found


def wait_for(prom: Prometheus, expr: str, ok, timeout: float = 60.0) -> list[dict]:
    deadline = time.monotonic() + timeout
    result: list[dict] = []
    while time.monotonic() < deadline:
        result = prom.query(expr)
        if ok(result):
            return result
        time.sleep(0.5)
    raise AssertionError(f"{expr}: {result}")


def test_jaeger_as_collector_samples_tails_counts_every_span_and_alerts_on_the_slow_host(
    instrumented, tmp_path: Path
) -> None:
    fleet = [Member("clean", "1.0", "h1", 1), Member("clean", "1.0", "h2", 1), Member("slow", "1.2", "h4", 1)]
    procs: list[subprocess.Popen] = []
    with (
        CollectorJaeger(tmp_path / "collector") as jaeger,
        WebhookReceiver() as hook,
        Alertmanager(tmp_path, hook.url, group_by=("alertname", "host_name")) as am,
        Prometheus(
            tmp_path,
            [f"127.0.0.1:{jaeger.ports['prom_exporter']}"],
            [RULES],
            alertmanagers=[am.url.removeprefix("http://")],
        ) as prom,
    ):
        try:
            for m in fleet:  # real Warp services exporting over OTLP to the collector, for up to 90 s
                env = run_env(m, {"OTEL_EXPORTER_OTLP_ENDPOINT": jaeger.otlp_grpc, "FLEET_RUN_S": "90"})
                env.update(OTEL_EXPORTER_OTLP_PROTOCOL="grpc")
                cmd = [sys.executable, str(APP), m.variant, "1000000", str(tmp_path / f"{m.name}.jsonl")]
                procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))

            # tail sampling decides storage: only the slow steps and the errored one are kept
            slow, errored, exported = tail_sampled_program(jaeger.otlp_grpc)
            assert stored_steps(jaeger, tmp_path, len(slow | errored)) == sorted(slow | errored)

            # span metrics see every span: the counts Prometheus scraped add up to all that was exported
            calls = 'sum(traces_span_metrics_calls_total{service_name="live-tail"})'
            wait_for(prom, calls, lambda r: r and float(r[0]["value"][1]) == exported)
            errors = 'sum(traces_span_metrics_calls_total{service_name="live-tail",status_code="STATUS_CODE_ERROR"})'
            assert float(prom.query(errors)[0]["value"][1]) >= 1

            # the slow host's kernel fires in Prometheus and reaches Alertmanager; no clean host ever does
            payload = hook.wait_for(
                lambda p: any(a["labels"]["alertname"] == "LaunchtraceSpanKernelSlowerThanPeers" for a in p["alerts"]),
                timeout=100,
            )
            alerts = [
                a for a in payload["alerts"] if a["labels"]["alertname"] == "LaunchtraceSpanKernelSlowerThanPeers"
            ]
            assert {a["labels"]["host_name"] for a in alerts} == {"h4"}
            assert "__main__.work" in {a["labels"]["launchtrace_kernel"] for a in alerts}
            fired = {a["labels"].get("host_name") for p in hook.payloads for a in p["alerts"]}
            assert fired == {"h4"}, f"an alert named a clean host: {fired}"
            hosts = {
                r["metric"]["host_name"] for r in prom.query("count by (host_name) (traces_span_metrics_calls_total)")
            }
            assert {"h1", "h2", "h4"} <= hosts
        finally:
            for p in procs:
                p.terminate()
            for p in procs:
                try:
                    p.wait(20)
                except subprocess.TimeoutExpired:
                    p.kill()


pytestmark = pytest.mark.skipif(
    not os.path.exists(PROMETHEUS) and not os.environ.get("CI"), reason="prometheus missing: apt-get install prometheus"
)
