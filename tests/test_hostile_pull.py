"""``launchtrace pull`` and its HTTP client against hostile backends written here, on loopback (issue 13).

No Jaeger or Tempo can run here: the hostile "backends" are ``loopback_http.Backend`` (a real ``http.server``)
for canned bodies and :class:`RawServer` (a socket server whose handler writes whatever bytes, as slowly as it
likes) for what no well-behaved server sends: slow drips, endless chunked bodies. Memory is the pull
process's own peak RSS (``VmHWM``), in a subprocess, against a small pull in the same way.
"""

from __future__ import annotations

import gzip
import math
import socket
import ssl
import subprocess
import sys
import threading
import time
import zlib
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from launchtrace.cli import main
from launchtrace.errors import UserError
from launchtrace.sources.http import HttpClient, HttpOptions
from loopback_http import Answer, Backend

TRACE = "5b8efff798038103d269b633813fc60c"
GOOD = orjson.dumps(
    {"result": {"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": TRACE, "spanId": "eee19b7ec3c1b174"}]}]}]}}
)


class RawServer:
    """A loopback TCP server; ``handle(sock)`` writes the answer (bounded loops only). One thread per client."""

    def __init__(self, handle: Callable[[socket.socket], None], tls: ssl.SSLContext | None = None) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        if tls is not None:
            self.sock = tls.wrap_socket(self.sock, server_side=True)
        self.handle = handle
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def _serve(self) -> None:
        self.sock.settimeout(0.1)
        while not self.stopped.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(5)
            try:
                data = b""
                while b"\r\n\r\n" not in data:
                    got = conn.recv(65536)
                    if not got:
                        return
                    data += got
                self.handle(conn)
            except OSError:
                pass

    def __enter__(self) -> RawServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopped.set()
        self.thread.join(2)
        self.sock.close()


def gzip_zeros(size: int) -> bytes:
    """gzip of ``size`` zero bytes, made cheaply: one 64 MiB member repeated (RFC 1952 allows concatenated
    members, and readers inflate them all)."""
    comp = zlib.compressobj(9, zlib.DEFLATED, 31)
    step = bytes(1 << 20)
    member = b"".join(comp.compress(step) for _ in range(64)) + comp.flush()
    return member * max(1, size >> 26)


RSS_SCRIPT = """
import sys
def vmhwm():  # this process's own peak (ru_maxrss would include the parent's: Linux keeps it across exec)
    return next(int(ln.split()[1]) * 1024 for ln in open("/proc/self/status") if ln.startswith("VmHWM:"))
from launchtrace.cli import main
rc = main(sys.argv[1:])
print("MAXRSS", vmhwm(), file=sys.stderr)
sys.exit(rc)
"""


def pull_rss(*argv: str) -> tuple[int, str, int]:
    """Run ``launchtrace pull argv`` in a fresh interpreter: (exit code, stderr without the RSS line, peak RSS)."""
    proc = subprocess.run(
        [sys.executable, "-c", RSS_SCRIPT, "pull", *argv], capture_output=True, text=True, timeout=120
    )
    lines = proc.stderr.splitlines()
    rss = int(next(ln for ln in lines if ln.startswith("MAXRSS")).split()[1])
    return proc.returncode, "\n".join(ln for ln in lines if not ln.startswith("MAXRSS")), rss


def baseline_rss(tmp_path: Path) -> int:
    with Backend() as b:
        b.routes[f"/api/v3/traces/{TRACE}"] = Answer(200, GOOD)
        rc, err, rss = pull_rss("jaeger+" + b.url, "--trace-id", TRACE, "--out", str(tmp_path / "ok.jsonl"))
    assert rc == 0, err
    return rss


@pytest.mark.parametrize("layers", [1, 2])
def test_a_gzip_bomb_answer_costs_pull_under_100_mb_and_names_the_limit(tmp_path: Path, layers: int) -> None:
    body = gzip_zeros(2 << 30)  # 2 GiB of zeros in about 2 MB
    encoding = "gzip"
    if layers == 2:
        body, encoding = gzip.compress(body), "gzip, gzip"  # gzip of gzip: a few kB
    base = baseline_rss(tmp_path)
    with Backend() as b:
        b.routes[f"/api/v3/traces/{TRACE}"] = Answer(200, body, headers=(("Content-Encoding", encoding),))
        rc, err, rss = pull_rss("jaeger+" + b.url, "--trace-id", TRACE, "--out", str(tmp_path / "x.jsonl"))
    print(f"pull, 2 GiB gzip bomb ({layers} layer(s), {len(body)} bytes): peak RSS +{(rss - base) / 2**20:.1f} MiB")
    assert rc == 2
    assert err.count("\n") == 0 and "Traceback" not in err, err
    assert f"{b.url}/api/v3/traces/{TRACE}" in err
    assert "inflates to more than 64 MiB" in err and "--max-answer-bytes" in err, err
    assert rss - base < 100 << 20


def test_an_endless_chunked_body_stops_at_the_limit(tmp_path: Path) -> None:
    chunk = b"[" * (1 << 20)

    def endless(conn: socket.socket) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
        for _ in range(4096):  # 4 GiB at most, then the server gives up too
            conn.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))

    with RawServer(endless) as srv:
        url = srv.url
        t0 = time.monotonic()
        with pytest.raises(UserError) as err:
            HttpClient(HttpOptions(url, max_answer_bytes=8 << 20)).get("/x")
        took = time.monotonic() - t0
    assert str(err.value) == f"{url}/x: answer is over 8 MiB (--max-answer-bytes)"
    assert took < 10


def drip(head_first: bool) -> Callable[[socket.socket], None]:
    def handle(conn: socket.socket) -> None:
        head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n"
        if head_first:
            conn.sendall(head)
        for byte in (b"" if head_first else head) + b" " * 100:  # one byte each 0.2 s: never idle 1 s
            conn.sendall(bytes([byte]) if isinstance(byte, int) else byte)
            time.sleep(0.2)

    return handle


@pytest.mark.parametrize("head_first", [True, False], ids=["body", "headers"])
def test_timeout_is_a_deadline_per_request_even_for_a_slow_drip(head_first: bool) -> None:
    with RawServer(drip(head_first)) as srv:
        t0 = time.monotonic()
        with pytest.raises(UserError) as err:
            HttpClient(HttpOptions(srv.url, timeout=1.0, retries=1), sleep=lambda s: None).get("/x")
        took = time.monotonic() - t0
    assert "no complete answer within 1 s (tried 2 times)" in str(err.value), err.value
    assert "cannot connect" not in str(err.value)
    assert took < 4, f"two tries of a 1 s deadline took {took:.1f} s"


def test_a_read_timeout_is_not_called_cannot_connect() -> None:
    with Backend() as b:
        b.routes["/x"] = Answer(200, b"{}", delay=3)
        with pytest.raises(UserError) as err:
            HttpClient(HttpOptions(b.url, timeout=0.5, retries=0)).get("/x")
    assert "no complete answer within 0.5 s" in str(err.value)


@pytest.mark.parametrize("value", ["nan", "inf", "0", "-1"])
def test_timeout_nan_and_inf_are_one_line(tmp_path: Path, value: str, capsys) -> None:
    try:  # the option's own check (cli._numbers) ends in argparse's exit; HttpOptions checks it again below
        rc = main(["pull", "jaeger+" + "http://127.0.0.1:9", "--trace-id", TRACE, "--timeout", value,
                   "--out", str(tmp_path / "x.jsonl")])  # fmt: skip
    except SystemExit as exc:
        rc = exc.code
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err and err.count("\n") == 1, err
    assert "--timeout" in err
    with pytest.raises(UserError):
        HttpOptions("http://127.0.0.1:9", timeout=float(value))
    assert math.isfinite(HttpOptions("http://127.0.0.1:9", timeout=2).timeout)


def search_answer(ids: list[str]) -> Answer:
    return Answer(200, orjson.dumps({"traces": [{"traceID": i} for i in ids]}))


def tempo_trace(seen) -> Answer:
    trace_id = seen.path.rsplit("/", 1)[1]
    span = {"traceId": trace_id, "spanId": "eee19b7ec3c1b174", "name": "s"}
    return Answer(200, orjson.dumps({"trace": {"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}}))


def test_tempo_search_honours_the_limit_and_fetches_each_trace_once(tmp_path: Path) -> None:
    many = [f"{i + 1:032x}" for i in range(3000)]
    with Backend() as b:
        b.routes["/api/search"] = search_answer(many)
        for i in many[:40]:
            b.routes[f"/api/v2/traces/{i}"] = tempo_trace
        rc = main(["pull", "tempo+" + b.url, "--service", "s", "--limit", "20", "--quiet",
                   "--out", str(tmp_path / "t.jsonl")])  # fmt: skip
        fetched = [s.path for s in b.seen if s.path.startswith("/api/v2/traces/")]
    assert rc == 0
    assert fetched == [f"/api/v2/traces/{i}" for i in many[:20]]
    with Backend() as b:
        b.routes["/api/search"] = search_answer([many[0]] * 2000 + [many[1]])
        b.routes[f"/api/v2/traces/{many[0]}"] = tempo_trace
        b.routes[f"/api/v2/traces/{many[1]}"] = tempo_trace
        rc = main(["pull", "tempo+" + b.url, "--service", "s", "--limit", "20", "--quiet",
                   "--out", str(tmp_path / "t.jsonl")])  # fmt: skip
        fetched = [s.path for s in b.seen if s.path.startswith("/api/v2/traces/")]
    assert rc == 0
    assert fetched == [f"/api/v2/traces/{many[0]}", f"/api/v2/traces/{many[1]}"]


def test_jaeger_search_keeps_at_most_limit_traces(tmp_path: Path) -> None:
    spans = [{"traceId": f"{i + 1:032x}", "spanId": "eee19b7ec3c1b174", "name": "s"} for i in range(300)]
    body = orjson.dumps({"result": {"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}})
    out = tmp_path / "j.jsonl"
    with Backend() as b:
        b.routes["/api/v3/traces"] = Answer(200, body)
        rc = main(["pull", "jaeger+" + b.url, "--service", "s", "--limit", "20", "--out", str(out)])
    assert rc == 0
    assert len(out.read_bytes().splitlines()) == 20  # one line per trace


def test_a_redirect_to_another_origin_drops_every_user_header() -> None:
    with Backend() as target, Backend() as origin:
        target.routes["/y"] = Answer(200, b"{}")
        origin.routes["/x"] = Answer(302, b"", headers=(("Location", f"{target.url}/y"),))
        origin.routes["/same"] = Answer(302, b"", headers=(("Location", "/same2"),))
        origin.routes["/same2"] = Answer(200, b"{}")
        options = HttpOptions(
            origin.url,
            token="tok",
            basic_auth=("u", "p"),
            headers=(("X-Api-Key", "key"), ("X-Scope-OrgID", "team-a")),
        )
        client = HttpClient(options)
        assert client.get("/x").status == 200
        assert client.get("/same").status == 200
    moved = target.seen[0].headers
    for name in ("authorization", "x-api-key", "x-scope-orgid"):
        assert name not in moved, (name, moved)
    kept = origin.seen[-1].headers
    assert (
        kept["x-api-key"] == "key" and kept["x-scope-orgid"] == "team-a" and kept["authorization"].startswith("Basic")
    )


def test_too_many_redirects_is_one_line() -> None:
    with Backend() as b:
        b.routes["/x"] = Answer(302, b"", headers=(("Location", "/x"),))
        with pytest.raises(UserError, match="redirect"):
            HttpClient(HttpOptions(b.url)).get("/x")


def test_a_connection_dropped_mid_answer_is_not_called_cannot_connect() -> None:
    def cut(conn: socket.socket) -> None:
        conn.sendall(b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"a":')

    with RawServer(cut) as srv:
        url = srv.url
        with pytest.raises(UserError) as err:
            HttpClient(HttpOptions(url, retries=1), sleep=lambda s: None).get("/x")
    assert str(err.value).startswith(f"{url}/x: connection failed while reading the answer ("), err.value
    assert str(err.value).endswith("(tried 2 times)")


def test_the_deadline_holds_under_tls_too(tmp_path: Path) -> None:
    from loopback_http import _self_signed

    cert, key = _self_signed(tmp_path)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    with RawServer(drip(True), tls=ctx) as srv:
        port = srv.sock.getsockname()[1]
        t0 = time.monotonic()
        with pytest.raises(UserError) as err:
            HttpClient(HttpOptions(f"https://localhost:{port}", ca_file=str(cert), timeout=1.0, retries=0)).get("/x")
        took = time.monotonic() - t0
    assert "no complete answer within 1 s (tried once)" in str(err.value), err.value
    assert took < 3
