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
import sys
import time
from pathlib import Path

import pytest

from fleet_gen import APP, Member, run_env
from loopback_http import free_port
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
    ports = [free_port() for _ in members]
    procs = []
    try:
        for member, port in zip(members, ports):
            env = run_env(member, {"FLEET_METRICS_PORT": str(port), "FLEET_RUN_S": "90", "FLEET_LINGER_S": "0"})
            cmd = [sys.executable, str(APP), member.variant, "1000000", str(tmp_path / f"{member.name}.jsonl")]
            procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        targets = [f"127.0.0.1:{p}" for p in ports]
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
