"""The OTLP/HTTP sender against real servers on 127.0.0.1: one persistent connection, a new one when the
receiver closed the old, compression, proxies from the environment, partial success, back-off that shutdown
ends, and nothing of a header echoed when it cannot be sent.

The receivers are real: ``launchtrace collect`` (which closes idle connections after ``idle_timeout``) and a
small ``http.server`` speaking HTTP/1.1 that records what arrived on which connection and answers as scripted.
The sender's retries, timeouts and TLS behaviour under a real Warp program are in ``test_reliability_sinks.py``
and ``test_security_tls.py``.
"""

from __future__ import annotations

import base64
import gzip
import http.server
import logging
import threading
import time
import zlib

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTracePartialSuccess,
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

from launchtrace.export.otlpsend import HttpSender
from launchtrace.receiver.collect import Collector
from loopback_http import serve_in_background, stop_serving


def request(spans: int, first: int = 0) -> bytes:
    """An encoded ExportTraceServiceRequest of ``spans`` spans with distinct ids."""
    out = [
        Span(trace_id=b"\x01" * 16, span_id=(first + i + 1).to_bytes(8, "big"), name=f"s{first + i}")
        for i in range(spans)
    ]
    return ExportTraceServiceRequest(
        resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=out)])]
    ).SerializeToString()


class Receiver:
    """A real HTTP/1.1 server: records each POST (the client's port, the request target, headers, the body as
    decoded by its Content-Encoding) and answers with the next scripted ``(status, headers, body)``; past the
    script, 200 with an empty response. ``ending``: ``"keep"`` the connection open, ``"close"`` it saying
    ``Connection: close``, ``"drop"`` it after the answer without saying so."""

    def __init__(self, script: list | None = None, ending: str = "keep") -> None:
        self.script = list(script or [])
        self.seen: list[tuple[int, str, dict[str, str], bytes]] = []
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                encoding = self.headers.get("Content-Encoding", "")
                body = {"gzip": gzip.decompress, "deflate": zlib.decompress}.get(encoding, bytes)(body)
                owner.seen.append(
                    (self.client_address[1], self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                )
                status, headers, reply = owner.script.pop(0) if owner.script else (200, {}, b"")
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                if ending == "close":
                    self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(reply)
                if ending == "drop":
                    self.close_connection = True

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = serve_in_background(self._server)
        self.url = f"http://127.0.0.1:{self.port}/v1/traces"

    def __enter__(self) -> Receiver:
        return self

    def __exit__(self, *exc: object) -> None:
        stop_serving(self._server)


@pytest.fixture(autouse=True)
def _no_proxy_or_otlp_settings(monkeypatch):
    for name in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    for name in ("HEADERS", "COMPRESSION", "TIMEOUT", "ENDPOINT"):
        monkeypatch.delenv(f"OTEL_EXPORTER_OTLP_{name}", raising=False)
        monkeypatch.delenv(f"OTEL_EXPORTER_OTLP_TRACES_{name}", raising=False)


@pytest.mark.parametrize("ending", ["keep", "close", "drop"])
def test_requests_share_one_connection_unless_the_receiver_closes_it(ending: str, caplog) -> None:
    """Closed with ``Connection: close`` or dropped silently after an answer: the next request goes out on a new
    connection at once, with no failed attempt and no back-off."""
    with Receiver(ending=ending) as r, caplog.at_level(logging.DEBUG, logger="launchtrace.export.otlpsend"):
        sender = HttpSender(r.url, headers={"X-Tenant": "team-a"}, timeout=5)
        bodies = [request(3, first=10 * i) for i in range(5)]
        results = [sender.send(b) for b in bodies]
        sender.shutdown()
    assert all(res.ok for res in results), results
    assert [body for *_, body in r.seen] == bodies
    ports = {port for port, *_ in r.seen}
    assert len(ports) == (1 if ending == "keep" else 5)
    assert not [rec for rec in caplog.records if "retrying" in rec.getMessage()]
    for _, path, headers, _ in r.seen:
        assert path == "/v1/traces"
        assert headers["content-type"] == "application/x-protobuf"
        assert headers["user-agent"].startswith("launchtrace/")
        assert headers["x-tenant"] == "team-a"
        assert "content-encoding" not in headers


def test_a_connection_the_collector_closed_while_idle_is_replaced_without_a_retry(caplog) -> None:
    """``launchtrace collect`` closes a connection idle for ``idle_timeout``; the next request goes out on a new
    one at once: no failed attempt, no back-off."""
    with Collector(None, grpc_port=None, http_port=0, keep=True, idle_timeout=0.2) as c:
        sender = HttpSender(f"http://127.0.0.1:{c.http_port}/v1/traces", timeout=5)
        with caplog.at_level(logging.DEBUG, logger="launchtrace.export.otlpsend"):
            first = sender.send(request(2))
            time.sleep(0.6)  # the collector's handler times out after idle_timeout and closes the connection
            second = sender.send(request(2, first=2))
        assert c.wait_for_spans(4)
        assert c.requests_received == 2
        sender.shutdown()
    assert first.ok and second.ok
    assert not [rec for rec in caplog.records if "retrying" in rec.getMessage()]


@pytest.mark.parametrize("compression", ["gzip", "deflate"])
def test_compressed_bodies_arrive_as_sent(compression: str) -> None:
    with Receiver() as r:
        sender = HttpSender(r.url, compression=compression, timeout=5)
        body = request(50)
        assert sender.send(body).ok
        sender.shutdown()
    (_, _, headers, got), *_ = r.seen
    assert headers["content-encoding"] == compression
    assert got == body


def test_the_receivers_partial_success_is_returned() -> None:
    answer = ExportTraceServiceResponse(
        partial_success=ExportTracePartialSuccess(rejected_spans=3, error_message="too old")
    ).SerializeToString()
    with Receiver([(200, {}, answer)]) as r:
        sender = HttpSender(r.url, timeout=5)
        result = sender.send(request(9))
        sender.shutdown()
    assert (result.ok, result.rejected, result.message) == (True, 3, "too old")


def test_the_environments_http_proxy_gets_the_whole_url_and_its_credentials(monkeypatch) -> None:
    """The proxy is a real server on loopback; the endpoint's host is never resolved (it does not exist)."""
    with Receiver() as proxy:
        monkeypatch.setenv("HTTP_PROXY", f"http://user:p%40ss@127.0.0.1:{proxy.port}")
        sender = HttpSender("http://otlp.invalid:4318/v1/traces", timeout=5)
        assert sender.send(request(1)).ok
        sender.shutdown()
    (_, target, headers, _), *_ = proxy.seen
    assert target == "http://otlp.invalid:4318/v1/traces"
    assert headers["proxy-authorization"] == "Basic " + base64.b64encode(b"user:p@ss").decode()


def test_no_proxy_sends_directly(monkeypatch) -> None:
    with Receiver() as direct, Receiver() as proxy:
        monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.port}")
        monkeypatch.setenv("NO_PROXY", "localhost,127.0.0.1")
        sender = HttpSender(direct.url, timeout=5)
        assert sender.send(request(1)).ok
        sender.shutdown()
    assert len(direct.seen) == 1 and not proxy.seen
    assert direct.seen[0][1] == "/v1/traces"


def test_shutdown_ends_a_back_off_at_once() -> None:
    with Receiver([(503, {"Retry-After": "20"})] * 5) as r:
        sender = HttpSender(r.url, timeout=60)
        results = []
        t = threading.Thread(target=lambda: results.append(sender.send(request(1))))
        t.start()
        deadline = time.monotonic() + 10
        while not r.seen and time.monotonic() < deadline:
            time.sleep(0.02)
        sender.shutdown()
        t.join(10)
    assert not t.is_alive()
    assert results == [(False, "shut down", 0, "")]
    assert len(r.seen) == 1  # waiting out Retry-After when shut down: no second attempt


def test_concurrent_senders_each_get_a_connection_and_every_request_arrives() -> None:
    with Receiver() as r:
        sender = HttpSender(r.url, timeout=5)
        bodies = [request(2, first=10 * i) for i in range(12)]
        results: list = []
        threads = [
            threading.Thread(target=lambda part=bodies[i::2]: results.extend(sender.send(b) for b in part))
            for i in range(2)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        sender.shutdown()
    assert len(results) == 12 and all(res.ok for res in results)
    assert sorted(body for *_, body in r.seen) == sorted(bodies)
    assert len({port for port, *_ in r.seen}) <= 2


def test_a_header_that_cannot_be_sent_is_not_echoed() -> None:
    with Receiver() as r:
        sender = HttpSender(r.url, headers={"authorization": "Bearer s3cret\r\nx-evil: 1"}, timeout=5)
        result = sender.send(request(1))
        sender.shutdown()
    assert not result.ok and "s3cret" not in result.reason
    assert not r.seen


def test_an_endpoint_that_is_not_http_fails_each_send_with_a_reason() -> None:
    sender = HttpSender("ftp://127.0.0.1/v1/traces", timeout=1)
    result = sender.send(request(1))
    assert not result.ok and "not an http:// or https:// URL" in result.reason


def test_a_missing_ca_file_fails_at_once_naming_tls(tmp_path, caplog) -> None:
    sender = HttpSender("https://127.0.0.1:9/v1/traces", certificate_file=str(tmp_path / "absent.pem"), timeout=5)
    with caplog.at_level(logging.DEBUG, logger="launchtrace.export.otlpsend"):
        result = sender.send(request(1))
    assert not result.ok and result.reason.startswith("TLS: ")
    assert not [rec for rec in caplog.records if "retrying" in rec.getMessage()]  # a retry cannot find the file
