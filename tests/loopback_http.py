"""A real HTTP server on loopback that plays a trace backend: canned answers per path, requests recorded.

No Jaeger or Tempo can run on these machines (no container engine, no Go toolchain), so the readers are
tested against this server serving the real response bodies copied from the upstream repositories at the
real endpoint paths with the real status codes. Optionally over TLS with a self-signed certificate made by
``openssl``.
"""

from __future__ import annotations

import dataclasses
import http.server
import socketserver
import ssl
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import parse_qs, urlsplit


@dataclasses.dataclass
class Answer:
    status: int = 200
    body: bytes = b""
    content_type: str = "application/json"
    headers: tuple[tuple[str, str], ...] = ()
    delay: float = 0.0


@dataclasses.dataclass
class Seen:
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]


Route = Answer | list[Answer] | Callable[[Seen], Answer]


class Backend:
    """``routes[path]`` is an :class:`Answer`, a list of them (served in turn, the last one repeated) or a
    function of the request. Unknown paths get 404 with Jaeger's api_v3 error body."""

    def __init__(self, *, tls_dir: Path | None = None) -> None:
        self.routes: dict[str, Route] = {}
        self.seen: list[Seen] = []
        backend = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                parts = urlsplit(self.path)
                seen = Seen(parts.path, parse_qs(parts.query), {k.lower(): v for k, v in self.headers.items()})
                backend.seen.append(seen)
                answer = backend._answer(seen)
                if answer.delay:
                    time.sleep(answer.delay)
                try:
                    self.send_response(answer.status)
                    self.send_header("Content-Type", answer.content_type)
                    self.send_header("Content-Length", str(len(answer.body)))
                    for k, v in answer.headers:
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(answer.body)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def log_message(self, *args) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.scheme = "http"
        self.cert_file: Path | None = None
        if tls_dir is not None:
            self.cert_file, key = _self_signed(tls_dir)
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(self.cert_file, key)
            self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
            self.scheme = "https"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True)

    @property
    def url(self) -> str:
        host = "localhost" if self.scheme == "https" else "127.0.0.1"
        return f"{self.scheme}://{host}:{self.server.server_address[1]}"

    def _answer(self, seen: Seen) -> Answer:
        route = self.routes.get(seen.path)
        if route is None:
            return Answer(404, b'{"error":{"httpCode":404,"message":"No traces found"}}')
        if isinstance(route, list):
            return route.pop(0) if len(route) > 1 else route[0]
        if callable(route):
            return route(seen)
        return route

    def __enter__(self) -> Backend:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def _self_signed(directory: Path) -> tuple[Path, Path]:
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost",
         "-addext", "subjectAltName=DNS:localhost", "-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return cert, key


def free_port() -> int:
    """A loopback port with nothing listening (bound, then closed)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve_in_background(server: socketserver.BaseServer) -> int:
    """Serve ``server`` (bound to a free loopback port) from a daemon thread, its handler threads daemons too;
    its port. Stop it with :func:`stop_serving`."""
    if isinstance(server, socketserver.ThreadingMixIn):
        server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server.server_address[1]


def stop_serving(server: socketserver.BaseServer) -> None:
    server.shutdown()
    server.server_close()
