"""The real Jaeger v2 on loopback for the live tests: built by ``scripts/build_jaeger.sh``, started per config.

A pytest plugin (``pytest_plugins`` in conftest.py), so that the session fixture ``jaeger`` is one process for
every live test file. Each Jaeger gets a config written here: every endpoint on 127.0.0.1 on a free port,
``jaeger_query.enable_tracing: false`` (else Jaeger traces its own queries into itself), memory storage, its
own metrics on a loopback port; it runs with the test process's ``OTEL_*`` variables removed, is ready when
healthcheckv2's ``/status`` says ``StatusOK``, and is stopped (SIGTERM, then kill) at the end.

Where the binary is missing: under ``CI=true`` the live tests fail (CI must build it); on a machine without Go
they skip and say so; with Go, the fixture builds it (the cached binary is reused: instant once built).

Example::

    def test_x(jaeger):
        requests.get(jaeger.query_url + "/api/v3/services").json()
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from loopback_http import free_port

ROOT = Path(__file__).resolve().parents[1]
BUILD_SCRIPT = ROOT / "scripts" / "build_jaeger.sh"
BIN_ENV = "LAUNCHTRACE_JAEGER_BIN"
MAX_TRACES = 100_000


def jaeger_binary() -> str:
    """The Jaeger binary's path; fails under CI, skips without Go, builds (cached) otherwise."""
    given = os.environ.get(BIN_ENV)
    if given:
        if not os.access(given, os.X_OK):
            pytest.fail(f"${BIN_ENV}={given} is not an executable")
        return given
    path = subprocess.run([str(BUILD_SCRIPT), "--path"], capture_output=True, text=True, check=True).stdout.strip()
    if os.access(path, os.X_OK):
        return path
    in_ci = os.environ.get("CI", "").lower() in ("1", "true", "yes")
    if in_ci:
        pytest.fail(f"the Jaeger binary is missing in CI ({path}): .ci/run must run scripts/build_jaeger.sh first")
    if shutil.which("go") is None:
        pytest.skip("Go is not installed: cannot build the real Jaeger (scripts/build_jaeger.sh) for the live tests")
    proc = subprocess.run([str(BUILD_SCRIPT)], capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.fail(f"scripts/build_jaeger.sh failed: {proc.stderr[-2000:]}")
    return proc.stdout.strip().splitlines()[-1]


def base_config(ports: dict[str, int]) -> dict[str, Any]:
    """Jaeger as a trace store: OTLP in, memory storage, query APIs; every endpoint on 127.0.0.1."""
    host = "127.0.0.1"
    return {
        "service": {
            "extensions": ["jaeger_storage", "jaeger_query", "healthcheckv2"],
            "pipelines": {
                "traces": {
                    "receivers": ["otlp"],
                    "processors": ["batch"],
                    "exporters": ["jaeger_storage_exporter"],
                }
            },
            "telemetry": {
                "logs": {"level": "warn"},
                "metrics": {
                    "level": "detailed",
                    "readers": [{"pull": {"exporter": {"prometheus": {"host": host, "port": ports["metrics"]}}}}],
                },
            },
        },
        "extensions": {
            "healthcheckv2": {"use_v2": True, "http": {"endpoint": f"{host}:{ports['health']}"}},
            "jaeger_query": {
                "storage": {"traces": "mem"},
                "enable_tracing": False,
                "http": {"endpoint": f"{host}:{ports['query_http']}"},
                "grpc": {"endpoint": f"{host}:{ports['query_grpc']}"},
            },
            "jaeger_storage": {"backends": {"mem": {"memory": {"max_traces": MAX_TRACES}}}},
        },
        "receivers": {
            "otlp": {
                "protocols": {
                    "grpc": {"endpoint": f"{host}:{ports['otlp_grpc']}", "max_recv_msg_size_mib": 64},
                    "http": {"endpoint": f"{host}:{ports['otlp_http']}"},
                }
            }
        },
        "processors": {"batch": {}},
        "exporters": {"jaeger_storage_exporter": {"trace_storage": "mem"}},
    }


class PortTaken(RuntimeError):
    """Jaeger could not bind a port picked for it (another process took it in between)."""


class Jaeger:
    """One Jaeger process with its config; ``with Jaeger(folder) as j: j.query_url, j.otlp_grpc, ...``."""

    PORTS = ("otlp_grpc", "otlp_http", "query_http", "query_grpc", "health", "metrics", "prom_exporter")

    def __init__(
        self,
        folder: Path,
        config: dict[str, Any] | None = None,
        binary: str | None = None,
        make_config: Callable[[dict[str, int]], dict[str, Any]] = base_config,
    ) -> None:
        """``config``: a fixed config (its ports are the caller's business); else ``make_config(ports)``."""
        self.folder = folder
        self.folder.mkdir(parents=True, exist_ok=True)
        self.binary = binary or jaeger_binary()
        self.make_config = make_config
        self.own_config = config is None
        self.config_path = self.folder / "jaeger.yaml"
        self.log = self.folder / "jaeger.log"
        self.proc: subprocess.Popen | None = None
        self.env: dict[str, str] = {}  # added to its environment (a config may read ${env:...})
        self.config = copy.deepcopy(config) if config is not None else {}
        self.pick_ports()

    def pick_ports(self) -> None:
        """Free loopback ports, and the config (or environment) that names them. Called again when another
        process took one of them between picking and Jaeger's bind."""
        self.ports = {name: free_port() for name in self.PORTS}
        if self.own_config:
            self.config = self.make_config(self.ports)
            self.config_path.write_text(json.dumps(self.config, indent=1))  # JSON is YAML

    @property
    def query_url(self) -> str:
        return f"http://127.0.0.1:{self.ports['query_http']}"

    @property
    def otlp_grpc(self) -> str:
        return f"http://127.0.0.1:{self.ports['otlp_grpc']}"

    @property
    def otlp_http(self) -> str:
        """The OTLP/HTTP traces endpoint (with ``/v1/traces``)."""
        return f"http://127.0.0.1:{self.ports['otlp_http']}/v1/traces"

    def start(self) -> Jaeger:
        """Start and wait until healthy; fresh ports and another try (three in all) when a port was taken."""
        for attempt in range(3):
            try:
                return self._start_once()
            except PortTaken:
                if attempt == 2:
                    raise
                self.pick_ports()
        raise AssertionError("unreachable")

    def _start_once(self) -> Jaeger:
        env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
        env.update(self.env)
        self.proc = subprocess.Popen(
            [self.binary, "--config", str(self.config_path)],
            stdout=self.log.open("w"),
            stderr=subprocess.STDOUT,
            cwd=self.folder,
            env=env,
            start_new_session=True,
        )
        deadline = time.monotonic() + 60
        url = f"http://127.0.0.1:{self.ports['health']}/status"
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                log = self.log.read_text()
                if "address already in use" in log:
                    raise PortTaken(log[-3000:])
                raise RuntimeError(f"jaeger exited {self.proc.returncode}: {log[-3000:]}")
            try:
                if "StatusOK" in requests.get(url, timeout=1).text:
                    return self
            except requests.RequestException:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"jaeger not healthy in 60 s: {self.log.read_text()[-3000:]}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)

    def __enter__(self) -> Jaeger:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- what Jaeger says
    def self_metric(self, name: str) -> float:
        """The sum of one of Jaeger's own metrics (e.g. ``otelcol_receiver_accepted_spans_total``)."""
        text = requests.get(f"http://127.0.0.1:{self.ports['metrics']}/metrics", timeout=5).text
        total = 0.0
        for line in text.splitlines():
            if line.startswith(name) and line[len(name) : len(name) + 1] in ("{", " "):
                total += float(line.rsplit(" ", 1)[1])
        return total

    def trace_span_count(self, trace_hex: str) -> int:
        """Spans of one trace as api_v3 answers it (0 when Jaeger does not have it)."""
        answer = requests.get(f"{self.query_url}/api/v3/traces/{trace_hex}", params={"raw_traces": "true"}, timeout=30)
        if answer.status_code == 404:
            return 0
        answer.raise_for_status()
        return sum(
            len(ss.get("spans", []))
            for rs in answer.json()["result"].get("resourceSpans", [])
            for ss in rs.get("scopeSpans", [])
        )

    def wait_for_trace(self, trace_hex: str, spans: int, timeout: float = 30.0) -> None:
        """Until Jaeger answers the trace with ``spans`` spans (its batch processor stores a moment later)."""
        deadline = time.monotonic() + timeout
        seen = 0
        while time.monotonic() < deadline:
            seen = self.trace_span_count(trace_hex)
            if seen >= spans:
                return
            time.sleep(0.1)
        raise AssertionError(f"jaeger holds {seen} spans of {trace_hex}, expected {spans}")

    def wait_stored(self, timeout: float = 60.0) -> None:
        """Until every span Jaeger's receivers accepted has gone out of its storage exporter (its own metrics):
        then a query sees all of them. Cheaper than polling a query of a 50,000-span trace."""
        deadline = time.monotonic() + timeout
        accepted = sent = 0.0
        while time.monotonic() < deadline:
            accepted = self.self_metric("otelcol_receiver_accepted_spans_total")
            sent = self.self_metric("otelcol_exporter_sent_spans_total")
            if sent >= accepted:
                return
            time.sleep(0.1)
        raise AssertionError(f"jaeger accepted {accepted} spans but stored only {sent}")

    def wait_for_spans(self, accepted: int, timeout: float = 30.0) -> None:
        """Until Jaeger's receivers have accepted ``accepted`` spans in all (its own metric)."""
        deadline = time.monotonic() + timeout
        seen = 0.0
        while time.monotonic() < deadline:
            seen = self.self_metric("otelcol_receiver_accepted_spans_total")
            if seen >= accepted:
                return
            time.sleep(0.1)
        raise AssertionError(f"jaeger accepted {seen} spans, expected {accepted}")


@pytest.fixture(scope="session")
def jaeger(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Jaeger]:
    """One real Jaeger (memory storage) for the whole test run."""
    with Jaeger(tmp_path_factory.mktemp("jaeger")) as j:
        yield j
