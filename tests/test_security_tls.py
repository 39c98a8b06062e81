"""TLS and credentials, against real servers on loopback with a test CA made here (``cryptography``).

- OTLP over gRPC and HTTP with TLS: the SDK exporters verify the server against ``OTEL_EXPORTER_OTLP_CERTIFICATE``
  (also when ``REQUESTS_CA_BUNDLE`` is set, which ``requests`` would otherwise prefer); with the wrong CA
  nothing is sent in the clear and every span is counted as dropped.
- mTLS: with ``OTEL_EXPORTER_OTLP_CLIENT_KEY`` / ``_CLIENT_CERTIFICATE`` a receiver that requires a client
  certificate gets every span; without them, none.
- Through ``HTTPS_PROXY`` (a real CONNECT proxy here, with credentials) the OTLP/HTTP sender tunnels and verifies
  the receiver's certificate, not the proxy's.
- Without a configured CA the OTLP/HTTP sender takes ``REQUESTS_CA_BUNDLE``, else ``CURL_CA_BUNDLE``, else
  certifi's bundle, as the SDK's exporter (through ``requests``) does.
- ``OTEL_EXPORTER_OTLP_HEADERS`` (an ``authorization`` bearer token) reaches the receiver, and never the logs
  (captured at DEBUG, failures included) nor the spans.
- The query readers (``launchtrace pull --from jaeger|tempo``) over HTTPS with ``--ca-file``; a bearer token
  and basic auth reach the backend, and never stderr, the pulled file, or an error message.

The servers are real (grpcio with ``ssl_server_credentials``, ``http.server`` behind ``ssl``); no Jaeger or
Tempo can run here, so the backend serves the upstream Jaeger api_v3 fixture at the real path.
"""

from __future__ import annotations

import base64
import datetime
import http.server
import ipaddress
import json
import logging
import socket
import ssl
import threading
from concurrent import futures
from pathlib import Path

import certifi
import numpy as np
import pytest

import launchtrace
import launchtrace.capture as capture
import launchtrace.export as export
from conftest import upstream_fixtures
from launchtrace.cli import main
from loopback_http import serve_in_background, stop_serving

REPO = Path(__file__).resolve().parents[1]
FIXTURES = upstream_fixtures()
SECRET = "s3cr3t-TOKEN-4f9a"
STEPS = 4
SPANS = STEPS * 6  # Sim.step's 5 records + the step scope, folding off


# -- a test PKI -------------------------------------------------------------------------------------------
def _name(cn: str):
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def make_ca(cn: str):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(cn))
        .issuer_name(_name(cn))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(True, False, False, False, False, True, True, False, False), critical=True
        )  # digital_signature, key_cert_sign, crl_sign
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return key, cert


def make_server_cert(ca_key, ca_cert, client: bool = False):
    """A certificate for localhost / 127.0.0.1 signed by the CA; ``client``: for a client (mTLS) instead."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID

    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name("launchtrace test client" if client else "localhost"))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH if client else ExtendedKeyUsageOID.SERVER_AUTH]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return key, cert


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> dict[str, Path | bytes]:
    from cryptography.hazmat.primitives import serialization

    d = tmp_path_factory.mktemp("pki")
    ca_key, ca_cert = make_ca("launchtrace test CA")
    key, cert = make_server_cert(ca_key, ca_cert)
    client_key, client_cert = make_server_cert(ca_key, ca_cert, client=True)
    _, other_ca = make_ca("somebody else's CA")
    pem = serialization.Encoding.PEM
    out = {
        "ca": d / "ca.pem",
        "other_ca": d / "other-ca.pem",
        "cert": d / "server.pem",
        "key": d / "server.key",
        "client_cert": d / "client.pem",
        "client_key": d / "client.key",
    }
    out["ca"].write_bytes(ca_cert.public_bytes(pem))
    out["other_ca"].write_bytes(other_ca.public_bytes(pem))
    out["cert"].write_bytes(cert.public_bytes(pem))
    for name, k in (("key", key), ("client_key", client_key)):
        out[name].write_bytes(k.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    out["client_cert"].write_bytes(client_cert.public_bytes(pem))
    return out


# -- TLS servers -------------------------------------------------------------------------------------------
class TlsGrpcReceiver:
    """A real OTLP/gRPC TraceService behind TLS; records spans and the metadata of each request."""

    def __init__(self, pki: dict, status: object = None, client_certs: bool = False) -> None:
        import grpc
        from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

        self.spans = 0
        self.metadata: list[dict] = []
        self.raw: list[bytes] = []
        owner = self

        class Service(trace_service_pb2_grpc.TraceServiceServicer):
            def Export(self, request, context):
                owner.metadata.append(dict(context.invocation_metadata()))
                if status is not None:
                    context.abort(status, "no")
                owner.raw.append(request.SerializeToString())
                owner.spans += sum(len(s.spans) for r in request.resource_spans for s in r.scope_spans)
                return trace_service_pb2.ExportTraceServiceResponse()

        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Service(), self._server)
        creds = grpc.ssl_server_credentials(
            [(pki["key"].read_bytes(), pki["cert"].read_bytes())],
            root_certificates=pki["ca"].read_bytes() if client_certs else None,
            require_client_auth=client_certs,
        )
        self.port = self._server.add_secure_port("127.0.0.1:0", creds)
        self._server.start()
        self.url = f"https://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self._server.stop(0).wait()


class TlsHttpServer:
    """A real HTTPS server: ``routes`` maps a path to ``(status, body)``; POST bodies count OTLP spans."""

    def __init__(
        self,
        pki: dict,
        routes: dict[str, tuple[int, bytes]] | None = None,
        post_status: int = 200,
        client_certs: bool = False,
    ) -> None:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

        self.spans = 0
        self.headers: list[dict] = []
        self.raw: list[bytes] = []
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, format, *args):
                pass

            def _reply(self, status: int, body: bytes, ctype: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                owner.headers.append(dict(self.headers))
                status, body = (routes or {}).get(self.path.split("?")[0], (404, b'{"error": "not found"}'))
                self._reply(status, body, "application/json")

            def do_POST(self):
                owner.headers.append(dict(self.headers))
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if post_status == 200:
                    owner.raw.append(body)
                    req = ExportTraceServiceRequest.FromString(body)
                    owner.spans += sum(len(s.spans) for r in req.resource_spans for s in r.scope_spans)
                self._reply(post_status, b"", "application/x-protobuf")

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(pki["cert"], pki["key"])
        if client_certs:  # mTLS: a client without a certificate from the test CA is refused in the handshake
            ctx.verify_mode = ssl.CERT_REQUIRED
            ctx.load_verify_locations(pki["ca"])
        self._server.socket = ctx.wrap_socket(self._server.socket, server_side=True)
        self.port = self._server.server_address[1]
        self.url = f"https://localhost:{self.port}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


# -- helpers -----------------------------------------------------------------------------------------------
@pytest.fixture
def otlp_env(monkeypatch, pki):
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_INSECURE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "2")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "2")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", f"authorization=Bearer {SECRET},x-scope-orgid=tenant-1")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_CERTIFICATE", str(pki["ca"]))
    # as on most distributions and CI images: requests would let this bundle win over the OTLP certificate
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", certifi.where())
    yield monkeypatch
    export.stop_export(5)
    capture.uninstrument()


def run_exported(endpoint: str, protocol: str) -> tuple[np.ndarray, export.ExportStats]:
    import warp_programs

    sim = warp_programs.Sim(seed=3)
    sim.step()  # compiled
    export.start_export(endpoint=endpoint, protocol=protocol, fold=False, export_interval_s=60.0)
    for i in range(STEPS):
        with launchtrace.scope("step", i=i):
            sim.step()
    final = export.stop_export(20)
    capture.uninstrument()
    return sim.result(), final


def all_log_text(caplog) -> str:
    formatter = logging.Formatter("%(name)s %(message)s %(exc_info)s")
    return "\n".join(formatter.format(r) + repr(r.args) for r in caplog.records)


# -- OTLP export over TLS ----------------------------------------------------------------------------------
@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_otlp_over_tls_with_the_test_ca_delivers_with_the_auth_header(protocol, pki, otlp_env, warp_cpu, caplog):
    server = TlsGrpcReceiver(pki) if protocol == "grpc" else TlsHttpServer(pki)
    endpoint = server.url + ("/v1/traces" if protocol != "grpc" else "")
    try:
        with caplog.at_level(logging.DEBUG):
            _, final = run_exported(endpoint, protocol)
    finally:
        server.stop()
    assert (final.exported, final.dropped) == (SPANS, 0)
    assert server.spans == SPANS
    seen = server.metadata if protocol == "grpc" else [{k.lower(): v for k, v in h.items()} for h in server.headers]
    assert seen and all(m.get("authorization") == f"Bearer {SECRET}" for m in seen)
    assert all(m.get("x-scope-orgid") == "tenant-1" for m in seen)
    assert SECRET not in all_log_text(caplog)
    assert all(SECRET.encode() not in raw for raw in server.raw)  # never in a span or resource attribute


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_otlp_over_tls_with_the_wrong_ca_sends_nothing_and_counts_every_span(protocol, pki, otlp_env, warp_cpu, caplog):
    otlp_env.setenv("OTEL_EXPORTER_OTLP_CERTIFICATE", str(pki["other_ca"]))
    server = TlsGrpcReceiver(pki) if protocol == "grpc" else TlsHttpServer(pki)
    endpoint = server.url + ("/v1/traces" if protocol != "grpc" else "")
    try:
        with caplog.at_level(logging.DEBUG):
            result, final = run_exported(endpoint, protocol)
    finally:
        server.stop()
    assert result.size > 0
    assert (final.exported, final.dropped_sink) == (0, SPANS)
    assert server.spans == 0 and not (server.metadata if protocol == "grpc" else server.headers)
    assert SECRET not in all_log_text(caplog)


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_otlp_mtls_delivers_with_the_client_certificate_and_sends_nothing_without(protocol, pki, otlp_env, warp_cpu):
    server = TlsGrpcReceiver(pki, client_certs=True) if protocol == "grpc" else TlsHttpServer(pki, client_certs=True)
    endpoint = server.url + ("/v1/traces" if protocol != "grpc" else "")
    try:
        _, without = run_exported(endpoint, protocol)
        received_without = server.spans
        otlp_env.setenv("OTEL_EXPORTER_OTLP_CLIENT_KEY", str(pki["client_key"]))
        otlp_env.setenv("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", str(pki["client_cert"]))
        _, final = run_exported(endpoint, protocol)
    finally:
        server.stop()
    assert (without.exported, without.dropped_sink, received_without) == (0, SPANS, 0)
    assert (final.exported, final.dropped) == (SPANS, 0)
    assert server.spans == SPANS


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_a_rejected_token_is_counted_and_never_logged(protocol, pki, otlp_env, warp_cpu, caplog):
    import grpc

    server = (
        TlsGrpcReceiver(pki, status=grpc.StatusCode.UNAUTHENTICATED)
        if protocol == "grpc"
        else TlsHttpServer(pki, post_status=401)
    )
    endpoint = server.url + ("/v1/traces" if protocol != "grpc" else "")
    try:
        with caplog.at_level(logging.DEBUG):
            _, final = run_exported(endpoint, protocol)
    finally:
        server.stop()
    assert (final.exported, final.dropped_sink) == (0, SPANS)
    text = all_log_text(caplog)
    assert "could not export" in text
    assert SECRET not in text


# -- the query readers over TLS ----------------------------------------------------------------------------
TRACE_HEX = "00000000000000000000000000000001"


def backend_routes() -> dict[str, tuple[int, bytes]]:
    body = (FIXTURES / "jaeger_apiv3_GetTrace.json").read_bytes()
    tempo = json.dumps({"trace": json.loads(body)["result"]}).encode()
    return {f"/api/v3/traces/{TRACE_HEX}": (200, body), f"/api/v2/traces/{TRACE_HEX}": (200, tempo)}


class ConnectProxy:
    """A real HTTP CONNECT proxy on loopback: answers ``CONNECT host:port`` with 200 and relays bytes both ways
    (it sees only ciphertext); records each CONNECT line and its ``Proxy-Authorization``."""

    def __init__(self) -> None:
        import socketserver

        self.tunnels: list[tuple[str, str]] = []
        owner = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self):
                line = self.rfile.readline().decode("latin-1").strip()
                headers = {}
                while (h := self.rfile.readline().decode("latin-1").strip()) != "":
                    key, _, value = h.partition(":")
                    headers[key.strip().lower()] = value.strip()
                owner.tunnels.append((line, headers.get("proxy-authorization", "")))
                host, _, port = line.split()[1].rpartition(":")
                upstream = socket.create_connection((host, int(port)), timeout=5)
                self.wfile.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
                self.wfile.flush()
                relay = threading.Thread(target=_pipe, args=(upstream, self.connection), daemon=True)
                relay.start()
                _pipe(self.connection, upstream)  # the client says nothing more until it has the 200
                relay.join(5)

        self._server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.port = serve_in_background(self._server)

    def stop(self) -> None:
        stop_serving(self._server)


def _pipe(src, dst) -> None:
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def test_otlp_http_through_an_https_proxy_tunnel_verifies_the_receiver(pki, monkeypatch):
    """``HTTPS_PROXY`` with credentials: the sender opens a CONNECT tunnel and speaks TLS to the receiver through
    it, verifying the receiver's certificate (not the proxy's) against the configured CA."""
    from launchtrace.export.otlpsend import HttpSender

    server, proxy = TlsHttpServer(pki), ConnectProxy()
    for name in ("no_proxy", "NO_PROXY", "http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTPS_PROXY", f"http://otlp:pr0xy@127.0.0.1:{proxy.port}")
    try:
        sender = HttpSender(server.url + "/v1/traces", certificate_file=str(pki["ca"]), timeout=5)
        result = sender.send(b"")  # an empty ExportTraceServiceRequest: valid, no spans
        sender.shutdown()
    finally:
        server.stop()
        proxy.stop()
    assert result.ok, result
    assert len(server.headers) == 1
    (line, auth), *_ = proxy.tunnels
    assert line.startswith(f"CONNECT localhost:{server.port} ")
    assert auth == "Basic " + base64.b64encode(b"otlp:pr0xy").decode()


@pytest.mark.parametrize("variable", ["REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", None])
def test_otlp_http_without_a_configured_ca_takes_the_bundle_requests_would(variable, pki, monkeypatch):
    """No ``OTEL_EXPORTER_OTLP_CERTIFICATE``: the CA bundle of ``REQUESTS_CA_BUNDLE``, else ``CURL_CA_BUNDLE``,
    else certifi's (which does not hold the test CA: refused, as a TLS failure, and not retried)."""
    from launchtrace.export.otlpsend import HttpSender

    for name in ("OTEL_EXPORTER_OTLP_CERTIFICATE", "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE", "REQUESTS_CA_BUNDLE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("CURL_CA_BUNDLE", raising=False)
    if variable is not None:
        monkeypatch.setenv(variable, str(pki["ca"]))
    server = TlsHttpServer(pki)
    try:
        sender = HttpSender(server.url + "/v1/traces", timeout=5)
        result = sender.send(b"")
        sender.shutdown()
    finally:
        server.stop()
    if variable is not None:
        assert result.ok, result
        assert len(server.headers) == 1
    else:
        assert not result.ok and result.reason.startswith("TLS: ") and "CERTIFICATE_VERIFY_FAILED" in result.reason
        assert not server.headers


@pytest.mark.parametrize("kind", ["jaeger", "tempo"])
def test_pull_over_tls_with_the_ca_file_sends_credentials_and_never_prints_them(kind, pki, tmp_path, capsys):
    server = TlsHttpServer(pki, backend_routes())
    out = tmp_path / "pulled.jsonl"
    try:
        rc = main(
            ["pull", kind + "+" + server.url, "--trace-id", TRACE_HEX, "--ca-file", str(pki["ca"]),
             "--token", SECRET, "--header", "X-Scope-OrgID=tenant-1", "--out", str(out), "--quiet"]
        )  # fmt: skip
        rc_basic = main(
            ["pull", kind + "+" + server.url, "--trace-id", TRACE_HEX, "--ca-file", str(pki["ca"]),
             "--basic-auth", f"reader:{SECRET}", "--out", str(tmp_path / "basic.jsonl"), "--quiet"]
        )  # fmt: skip
    finally:
        server.stop()
    captured = capsys.readouterr()
    assert (rc, rc_basic) == (0, 0), captured.err
    heads = [{k.lower(): v for k, v in h.items()} for h in server.headers]
    assert heads[0]["authorization"] == f"Bearer {SECRET}" and heads[0]["x-scope-orgid"] == "tenant-1"
    assert heads[-1]["authorization"] == "Basic " + base64.b64encode(f"reader:{SECRET}".encode()).decode()
    assert SECRET not in captured.out + captured.err
    assert SECRET not in out.read_text() and out.read_text().count('"spanId"') == 1


@pytest.mark.parametrize(
    ("extra", "expect"),
    [
        pytest.param([], "certificate", id="no-ca-file"),
        pytest.param(["--ca-file", "OTHER"], "certificate", id="wrong-ca"),
    ],
)
def test_pull_over_tls_without_the_right_ca_is_one_line_naming_the_url(extra, expect, pki, tmp_path, capsys):
    server = TlsHttpServer(pki, backend_routes())
    extra = [str(pki["other_ca"]) if e == "OTHER" else e for e in extra]
    try:
        rc = main(
            ["pull", "jaeger+" + server.url, "--trace-id", TRACE_HEX, "--token", SECRET, "--retries", "0",
             "--out", str(tmp_path / "x.jsonl"), "--quiet", *extra]
        )  # fmt: skip
    finally:
        server.stop()
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert rc == 2 and len(lines) == 1, err
    assert lines[0].startswith("launchtrace pull: error: ") and f"localhost:{server.port}" in lines[0]
    assert expect in lines[0].lower()
    assert SECRET not in err
    assert not server.headers  # nothing was sent before the server was verified


def test_pull_rejected_credentials_never_echo_the_secret(pki, tmp_path, capsys):
    routes = {f"/api/v3/traces/{TRACE_HEX}": (401, b'{"error": {"message": "bad token"}}')}
    server = TlsHttpServer(pki, routes)
    try:
        rc = main(
            ["pull", "jaeger+" + f"https://reader:{SECRET}@localhost:{server.port}", "--trace-id",
             TRACE_HEX, "--ca-file", str(pki["ca"]), "--token", SECRET, "--retries", "0",
             "--out", str(tmp_path / "x.jsonl"), "--quiet"]
        )  # fmt: skip
    finally:
        server.stop()
    err = capsys.readouterr().err
    assert rc == 2 and "401" in err
    assert SECRET not in err
