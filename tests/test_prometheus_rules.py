"""The shipped Prometheus rules (deploy/prometheus/launchtrace-rules.yaml) with Debian's promtool and Prometheus.

- ``promtool check rules`` and ``promtool test rules`` on synthetic series (tests/prometheus/): the slow host
  fires, the clean fleet stays quiet; a rule made blind (threshold 100x) fails those unit tests.
- Live: three real Warp processes (two hosts of the clean build, one slow build) serve their launch metrics on
  loopback; a real Prometheus scrapes them every second with the same rules file; the slow host's alert fires
  and no alert ever names a clean host.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from fleet_gen import Member, metrics_address, start_serving_metrics
from monitoring import PROMTOOL, Prometheus

ROOT = Path(__file__).resolve().parent.parent
RULES = ROOT / "deploy" / "prometheus" / "launchtrace-rules.yaml"
UNIT_TESTS = ROOT / "tests" / "prometheus" / "launchtrace-rules-test.yaml"


def promtool(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([PROMTOOL, *args], capture_output=True, text=True, timeout=120)


def test_rules_are_valid() -> None:
    proc = promtool("check", "rules", str(RULES))
    assert proc.returncode == 0 and "SUCCESS" in proc.stdout, proc.stdout + proc.stderr


def test_promtool_unit_tests_pass() -> None:
    proc = promtool("test", "rules", str(UNIT_TESTS))
    assert proc.returncode == 0 and "SUCCESS" in proc.stdout, proc.stdout + proc.stderr


def test_promtool_unit_tests_catch_a_blind_rule(tmp_path: Path) -> None:
    """The unit tests can fail: with the latency threshold raised to 100x, the slow host no longer fires."""
    blind = tmp_path / "deploy" / "prometheus"
    blind.mkdir(parents=True)
    text = RULES.read_text()
    assert text.count("1.5 * quantile") == 2
    (blind / RULES.name).write_text(text.replace("1.5 * quantile", "100 * quantile"))
    tests = tmp_path / "tests" / "prometheus"
    tests.mkdir(parents=True)
    (tests / UNIT_TESTS.name).write_text(UNIT_TESTS.read_text())
    proc = promtool("test", "rules", str(tests / UNIT_TESTS.name))
    assert proc.returncode != 0 and "LaunchtraceKernelSlowerThanPeers" in proc.stdout + proc.stderr


def test_live_prometheus_fires_for_the_slow_host_only(tmp_path: Path) -> None:
    members = [Member("clean", "1.0", "h1", 1), Member("clean", "1.0", "h2", 1), Member("slow", "1.2", "h4", 1)]
    procs = []
    try:
        started = [
            start_serving_metrics(m, 1_000_000, tmp_path / f"{m.name}.jsonl", {"FLEET_RUN_S": "90"}) for m in members
        ]
        procs = [proc for proc, _ in started]
        # Each run binds a port of the kernel's choosing and says which: a port picked here beforehand could be
        # taken by Prometheus before the run binds it, and then Prometheus would scrape itself as that "host".
        targets = [metrics_address(proc, address_file) for proc, address_file in started]
        with Prometheus(tmp_path, targets, [RULES], interval="1s") as prom:
            deadline = time.monotonic() + 80
            firing: list[dict] = []
            seen_hosts: set[str] = set()
            while time.monotonic() < deadline and not firing:
                alerts = prom.alerts()
                seen_hosts |= {a["labels"].get("host_name", "") for a in alerts}
                firing = [
                    a
                    for a in alerts
                    if a["state"] == "firing" and a["labels"]["alertname"] == "LaunchtraceKernelSlowerThanPeers"
                ]
                time.sleep(0.5)
            up = prom.query("up")
            assert len(up) == 3 and all(r["value"][1] == "1" for r in up), up
            hosts = {r["metric"]["host_name"] for r in prom.query("count by (host_name) (launchtrace_launches_total)")}
            assert hosts == {"h1", "h2", "h4"}, f"every target is a run of ours: {hosts}"
            assert firing, f"no alert fired; {prom.query('launchtrace:launch_duration_seconds:p50_5m')}"
            assert {a["labels"]["host_name"] for a in firing} == {"h4"}
            assert "__main__.work" in {a["labels"]["launchtrace_kernel"] for a in firing}
            assert seen_hosts <= {"h4"}, f"an alert named a clean host: {seen_hosts}"
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()


pytestmark = pytest.mark.skipif(not os.path.exists(PROMTOOL), reason="promtool missing: apt-get install prometheus")
