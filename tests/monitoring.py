"""Real Prometheus and Alertmanager (Debian's packages) on loopback for the tests, and a webhook receiver.

Each runs from a temporary folder with its own configuration, on a free loopback port, with no cluster port and
no service manager; it is stopped (terminate, then kill) when the ``with`` block ends.

Example::

    with WebhookReceiver() as hook, Alertmanager(tmp_path, hook.url) as am:
        requests.post(am.url + "/api/v2/alerts", json=[...])
        payload = hook.wait_for(lambda p: p["status"] == "firing")
"""

from __future__ import annotations

import http.server
import json
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

import requests

from loopback_http import free_port

ALERTMANAGER = (
    shutil.which("prometheus-alertmanager") or shutil.which("alertmanager") or "/usr/bin/prometheus-alertmanager"
)
PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"


class WebhookReceiver:
    """A loopback HTTP server that keeps every JSON body POSTed to it (Alertmanager's webhook receiver)."""

    def __init__(self) -> None:
        self.payloads: list[dict] = []
        self._cond = threading.Condition()
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with receiver._cond:
                    receiver.payloads.append(json.loads(body))
                    receiver._cond.notify_all()
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def wait_for(self, match: Callable[[dict], bool], timeout: float = 30.0) -> dict:
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for p in self.payloads:
                    if match(p):
                        return p
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"no matching webhook payload in {timeout} s; got {self.payloads}")
                self._cond.wait(left)

    def __enter__(self) -> WebhookReceiver:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


class _Daemon:
    def __init__(self, folder: Path, name: str) -> None:
        self.folder = folder / name
        self.folder.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None
        self.log = self.folder / "log.txt"

    def _start(self, cmd: list[str], ready_path: str) -> None:
        self.proc = subprocess.Popen(cmd, stdout=self.log.open("w"), stderr=subprocess.STDOUT, cwd=self.folder)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{cmd[0]} exited: {self.log.read_text()[-2000:]}")
            try:
                if requests.get(self.url + ready_path, timeout=1).status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"{cmd[0]} not ready in 60 s: {self.log.read_text()[-2000:]}")

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


class Alertmanager(_Daemon):
    """Alertmanager with one webhook receiver; ``group_wait`` short so that a test sees the notification soon."""

    def __init__(self, folder: Path, webhook_url: str, *, group_by: tuple[str, ...] = ("alertname", "group")) -> None:
        super().__init__(folder, "alertmanager")
        config = {
            "route": {
                "receiver": "test",
                "group_by": list(group_by),
                "group_wait": "200ms",
                "group_interval": "1s",
                "repeat_interval": "1h",
            },
            "receivers": [{"name": "test", "webhook_configs": [{"url": webhook_url, "send_resolved": False}]}],
        }
        (self.folder / "am.yml").write_text(json.dumps(config))  # JSON is YAML

    def __enter__(self) -> Alertmanager:
        self._start(
            [
                ALERTMANAGER,
                f"--config.file={self.folder / 'am.yml'}",
                f"--storage.path={self.folder / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--cluster.listen-address=",
            ],
            "/-/ready",
        )
        return self


class Prometheus(_Daemon):
    """Prometheus scraping ``targets`` (host:port) every ``interval``, with ``rule_files`` and evaluation as often."""

    def __init__(
        self,
        folder: Path,
        targets: list[str],
        rule_files: list[Path],
        interval: str = "1s",
        alertmanagers: list[str] = (),  # host:port of Alertmanagers to send firing alerts to
    ) -> None:
        super().__init__(folder, "prometheus")
        config = {
            "global": {"scrape_interval": interval, "evaluation_interval": interval},
            "rule_files": [str(p) for p in rule_files],
            "scrape_configs": [{"job_name": "launchtrace", "static_configs": [{"targets": targets}]}],
        }
        if alertmanagers:
            config["alerting"] = {"alertmanagers": [{"static_configs": [{"targets": list(alertmanagers)}]}]}
        (self.folder / "prometheus.yml").write_text(json.dumps(config))

    def __enter__(self) -> Prometheus:
        self._start(
            [
                PROMETHEUS,
                f"--config.file={self.folder / 'prometheus.yml'}",
                f"--storage.tsdb.path={self.folder / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
            ],
            "/-/ready",
        )
        return self

    def query(self, expr: str) -> list[dict]:
        answer = requests.get(self.url + "/api/v1/query", params={"query": expr}, timeout=5).json()
        assert answer["status"] == "success", answer
        return answer["data"]["result"]

    def alerts(self) -> list[dict]:
        return requests.get(self.url + "/api/v1/alerts", timeout=5).json()["data"]["alerts"]
