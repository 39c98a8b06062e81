"""``launchtrace collect`` against hostile and broken HTTP clients written here (raw sockets on loopback).

Each test is one case of issue 13: decompression bombs, oversized or lying ``Content-Length``, chunked
uploads, bursts of concurrent senders, idle connections, and "acknowledged means written". Memory is the
receiver's peak RSS growth (``VmHWM`` of the ``collect`` subprocess), read from ``/proc``.
"""

from __future__ import annotations

import gzip
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import zlib
from pathlib import Path

import orjson
import pytest

from launchtrace.otlp.encode_proto import encode_spans
from launchtrace.receiver.collect import Collector
from launchtrace.spans import SpanData

TRACE = bytes.fromhex("5b8efff798038103d269b633813fc700")


def make_spans(n: int, name: str = "span") -> list[SpanData]:
    return [
        SpanData(TRACE, (i + 1).to_bytes(8, "big"), None, name, 1_000 + i, 2_000 + i, (("i", i),)) for i in range(n)
    ]


def span_names(path: Path) -> list[str]:
    names = []
    for line in path.read_bytes().splitlines():
        if line.strip():
            doc = orjson.loads(line)
            names += [sp["name"] for rs in doc["resourceSpans"] for ss in rs["scopeSpans"] for sp in ss["spans"]]
    return names


PROTO = "application/x-protobuf"


def request(port: int, head: bytes, body: bytes = b"", *, timeout: float = 10.0) -> tuple[int, bytes]:
    """Send ``head`` (request line and headers, no blank line) and ``body``; the status and the answer's bytes."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(head + b"\r\n\r\n" + body)
        return read_answer(s)


def read_answer(s: socket.socket) -> tuple[int, bytes]:
    data = b""
    while b"\r\n\r\n" not in data:
        got = s.recv(65536)
        if not got:
            break
        data += got
    if not data:
        return 0, b""
    status = int(data.split(b" ", 2)[1])
    head, _, rest = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length":
            length = int(v)
    while len(rest) < length:
        got = s.recv(65536)
        if not got:
            break
        rest += got
    return status, rest


def post_head(length: int | str | None, *, ctype: str = PROTO, extra: str = "") -> bytes:
    lines = ["POST /v1/traces HTTP/1.1", "Host: 127.0.0.1", f"Content-Type: {ctype}"]
    if length is not None:
        lines.append(f"Content-Length: {length}")
    if extra:
        lines.append(extra)
    return "\r\n".join(lines).encode()


def gzip_bomb(inflated: int) -> bytes:
    """A gzip body inflating to ``inflated`` zero bytes, made cheaply: one 64 MiB member repeated (RFC 1952 allows
    concatenated members; every reader of gzip inflates them all)."""
    member_size = 64 << 20
    comp = zlib.compressobj(9, zlib.DEFLATED, 31)
    zeros = bytes(1 << 20)
    member = b"".join(comp.compress(zeros) for _ in range(member_size >> 20)) + comp.flush()
    return member * max(1, inflated // member_size)


def start_cli(out: Path, *extra: str) -> tuple[subprocess.Popen, int]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "launchtrace", "collect", "--out", str(out), "--grpc", "off", "--http", "0", *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    first = proc.stdout.readline()
    assert "listening on" in first, first + proc.stderr.read()
    return proc, int(first.split("http 127.0.0.1:")[1].split(";")[0])


def peak_rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def test_a_2_gb_gzip_bomb_is_413_and_costs_the_receiver_under_100_mb(tmp_path: Path) -> None:
    bomb = gzip_bomb(2 << 30)
    assert len(bomb) < 4 << 20
    proc, port = start_cli(tmp_path / "c.jsonl")
    try:
        ok_status, _ = request(port, post_head(len(encode_spans(make_spans(3)))), encode_spans(make_spans(3)))
        assert ok_status == 200
        before = peak_rss(proc.pid)
        status, body = request(port, post_head(len(bomb), extra="Content-Encoding: gzip"), bomb, timeout=60)
        grown = peak_rss(proc.pid) - before
        print(f"collect, 2 GiB gzip bomb: peak RSS +{grown / 2**20:.1f} MiB")
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert status == 413, body
    assert b"inflates to more than" in body
    assert grown < 100 << 20, f"peak RSS grew {grown >> 20} MiB"
    assert "Traceback" not in err


@pytest.fixture
def collector(tmp_path: Path):
    with Collector(tmp_path / "c.jsonl", grpc_port=None, http_port=0, idle_timeout=1.0) as c:
        yield c


def written(c: Collector) -> list[str]:
    """The names of the spans in the collector's file so far."""
    assert c.wait_written(10)
    return span_names(Path(c.out))


def test_an_oversized_content_length_is_413_before_the_body_is_sent(collector: Collector) -> None:
    with socket.create_connection(("127.0.0.1", collector.http_port), timeout=5) as s:
        s.sendall(post_head(1 << 30) + b"\r\n\r\n")  # and no body at all
        status, body = read_answer(s)
    assert status == 413 and b"over" in body


def test_a_content_length_with_no_body_does_not_hold_a_thread(collector: Collector) -> None:
    baseline = threading.active_count()
    with socket.create_connection(("127.0.0.1", collector.http_port), timeout=10) as s:
        s.sendall(post_head(5000) + b"\r\n\r\n" + b"\x0a\x03")  # 2 of 5,000 bytes, then silence
        t0 = time.monotonic()
        assert s.recv(100) == b"", "the receiver gives up and closes the connection"
        assert time.monotonic() - t0 < 5
    deadline = time.monotonic() + 5
    while threading.active_count() > baseline and time.monotonic() < deadline:
        time.sleep(0.05)
    assert threading.active_count() <= baseline
    assert collector.requests_received == 0


@pytest.mark.parametrize("value", ["abc", "1e3", "-5", "+5", "0x10", " 1 2"])
def test_a_content_length_that_is_not_a_number_is_400(collector: Collector, value: str, capfd) -> None:
    status, body = request(collector.http_port, post_head(value), b"\x0a\x00")
    assert status == 400 and b"Content-Length" in body
    assert collector.requests_received == 0
    assert "Traceback" not in capfd.readouterr().err


def test_chunked_uploads_are_read_and_written(collector: Collector) -> None:
    raw = encode_spans(make_spans(7))
    pieces = [raw[i : i + 100] for i in range(0, len(raw), 100)]
    chunked = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\n\r\n"
    status, _ = request(collector.http_port, post_head(None, extra="Transfer-Encoding: chunked"), chunked)
    assert status == 200
    assert collector.spans_received == 7
    assert len(written(collector)) == 7


def test_chunked_uploads_are_bounded_and_malformed_chunks_are_400(collector: Collector) -> None:
    status, _ = request(
        collector.http_port, post_head(None, extra="Transfer-Encoding: chunked"), b"zz\r\nab\r\n0\r\n\r\n"
    )
    assert status == 400
    huge = b"%x\r\n" % (1 << 30)
    status, body = request(collector.http_port, post_head(None, extra="Transfer-Encoding: chunked"), huge)
    assert status == 413, body
    assert collector.requests_received == 0


def test_gzip_and_deflate_bodies_inflating_past_the_limit_are_413(collector: Collector, monkeypatch) -> None:
    import launchtrace.receiver.collect as collect

    monkeypatch.setattr(collect, "MAX_MESSAGE_BYTES", 1 << 20)
    big = bytes(2 << 20)
    for encoding, body in (("gzip", gzip.compress(big)), ("deflate", zlib.compress(big))):
        status, answer = request(collector.http_port, post_head(len(body), extra=f"Content-Encoding: {encoding}"), body)
        assert status == 413, (encoding, answer)
    good = gzip.compress(encode_spans(make_spans(2))) * 2  # two members: both inflated
    status, _ = request(collector.http_port, post_head(len(good), extra="Content-Encoding: gzip"), good)
    assert status == 200 and collector.spans_received == 4


@pytest.mark.parametrize(
    "bad",
    ["5b8efff798038103d269b633813fc6", "", "00000000000000000000000000000000", "5b8efff798038103 d269b633813fc60c"],
)
def test_json_trace_ids_of_the_wrong_form_are_400(collector: Collector, bad: str) -> None:
    doc = {
        "resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": bad, "spanId": "eee19b7ec3c1b174", "name": "x"}]}]}]
    }
    body = orjson.dumps(doc)
    status, answer = request(collector.http_port, post_head(len(body), ctype="application/json"), body)
    assert status == 400, answer
    assert collector.requests_received == 0


@pytest.mark.parametrize("bad", ["eee19b7ec3c1b1", "0000000000000000", "eee19b7e c3c1b174", ""])
def test_json_span_ids_of_the_wrong_form_are_400(collector: Collector, bad: str) -> None:
    span = {"traceId": "5b8efff798038103d269b633813fc60c", "spanId": bad, "name": "x"}
    body = orjson.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]})
    status, answer = request(collector.http_port, post_head(len(body), ctype="application/json"), body)
    assert status == 400, answer


def test_200_concurrent_senders_all_succeed_and_each_request_is_written_once(collector: Collector) -> None:
    n = 200
    bodies = [encode_spans(make_spans(1, name=f"burst-{i}")) for i in range(n)]
    statuses: list[int] = [0] * n
    go = threading.Barrier(n)

    def send(i: int) -> None:
        go.wait()
        try:
            statuses[i] = request(collector.http_port, post_head(len(bodies[i])), bodies[i], timeout=30)[0]
        except OSError as exc:
            statuses[i] = -1
            print(i, exc)

    threads = [threading.Thread(target=send, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert statuses.count(200) == n, {s: statuses.count(s) for s in set(statuses)}
    assert sorted(written(collector)) == sorted(f"burst-{i}" for i in range(n))


def test_600_idle_connections_are_closed_after_the_idle_timeout(collector: Collector) -> None:
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 2000:  # both ends of 600 connections live in this process
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    baseline = threading.active_count()
    socks = [socket.create_connection(("127.0.0.1", collector.http_port), timeout=10) for _ in range(600)]
    try:
        time.sleep(0.5)
        held = threading.active_count()
        deadline = time.monotonic() + 10
        while threading.active_count() > baseline and time.monotonic() < deadline:
            time.sleep(0.1)
        assert threading.active_count() <= baseline, (baseline, held, threading.active_count())
        assert all(s.recv(10) == b"" for s in socks[:20]), "closed by the receiver"
    finally:
        for s in socks:
            s.close()
    raw = encode_spans(make_spans(1))
    assert request(collector.http_port, post_head(len(raw)), raw)[0] == 200, "still serving"


def odd_request(i: int) -> bytes:
    """A request protobuf parses and keeps a top-level unknown field (99, varint) of."""
    return encode_spans(make_spans(20, name=f"odd-{i}")) + b"\x98\x06\x01"


@pytest.mark.parametrize("name", ["c.jsonl", "c.pb"])
def test_acknowledged_requests_survive_sigkill(tmp_path: Path, name: str) -> None:
    """Acknowledged means written, in either output format: a SIGKILL loses nothing that was answered 200."""
    out = tmp_path / name
    proc, port = start_cli(out)
    acked = 0
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            t_end = time.monotonic() + 2.0
            i = 0
            while time.monotonic() < t_end:
                body = odd_request(i)
                s.sendall(post_head(len(body)) + b"\r\n\r\n" + body)
                status, _ = read_answer(s)
                assert status == 200
                acked += 1
                i += 1
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=10)
    assert acked > 20
    if name.endswith(".pb"):
        from launchtrace.otlp.proto_decode import iter_length_prefixed

        with open(out, "rb") as f:
            kept = sum(1 for _, body in iter_length_prefixed(f) if isinstance(body, bytes))
    else:
        lines = [ln for ln in out.read_bytes().split(b"\n") if ln.strip()]
        kept = sum(1 for ln in lines if _complete(ln))
    assert kept >= acked, f"{acked} requests acknowledged, {kept} in the file"


def _complete(line: bytes) -> bool:
    try:
        orjson.loads(line)
    except orjson.JSONDecodeError:
        return False
    return True


def test_a_grpc_gzip_message_inflating_past_the_limit_is_refused_by_grpc(tmp_path: Path) -> None:
    """gRPC's own bound: grpcio checks the inflated size against ``grpc.max_receive_message_length`` (64 MiB)."""
    import grpc

    proc = subprocess.Popen(
        [sys.executable, "-m", "launchtrace", "collect", "--out", str(tmp_path / "g.jsonl"), "--grpc", "0",
         "--http", "off"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        port = int(proc.stdout.readline().split("grpc 127.0.0.1:")[1].split(";")[0])
        options = [("grpc.max_send_message_length", (1 << 31) - 1)]
        with grpc.insecure_channel(f"127.0.0.1:{port}", options=options, compression=grpc.Compression.Gzip) as ch:
            export = ch.unary_unary("/opentelemetry.proto.collector.trace.v1.TraceService/Export")
            export(b"", timeout=10)
            before = peak_rss(proc.pid)
            with pytest.raises(grpc.RpcError) as err:
                export(bytes(256 << 20), timeout=60)
            grown = peak_rss(proc.pid) - before
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
    assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert grown < 100 << 20, f"{grown >> 20} MiB"
