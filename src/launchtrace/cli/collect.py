"""``launchtrace collect``: receive OTLP traces (gRPC and HTTP) on loopback and write them to a span file.

OTLP JSON Lines, or with an ``--out`` ending in ``.pb`` the protobuf as received (length-prefixed), which keeps
up with any sender (see docs/collect.md).

Example::

    launchtrace collect --out spans.jsonl --grpc 4317 --http 4318
    # other shell: OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4317 launchtrace run sim.py
"""

from __future__ import annotations

import argparse
import math
import signal
import sys
import threading

from launchtrace.errors import UserError

HELP = "receive OTLP traces over gRPC and HTTP and write them to a JSON Lines (or .pb: protobuf as received) file"

DEFAULT_OUT = "launchtrace-collected.jsonl"


def _port(text: str) -> int | None:
    if text.lower() in ("off", "none", "no"):
        return None
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number (0 = any free port, off = disabled)") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"port {port} is out of range 0-65535")
    return port


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a positive, finite number of seconds")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--out",
        "-o",
        default=DEFAULT_OUT,
        help=f"the file to append to ({DEFAULT_OUT}); a name ending in .pb or .pb.gz gets the protobuf as received",
    )
    parser.add_argument("--grpc", type=_port, default=4317, metavar="PORT", help="OTLP/gRPC port (4317; 0 = any; off)")
    parser.add_argument("--http", type=_port, default=4318, metavar="PORT", help="OTLP/HTTP port (4318; 0 = any; off)")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    parser.add_argument(
        "--idle-timeout",
        type=_seconds,
        default=30.0,
        metavar="S",
        help="close an HTTP connection silent this long, between requests or inside one (30)",
    )
    parser.add_argument(
        "--max-spans", type=int, default=0, metavar="N", help="stop after receiving N spans (0: run until signalled)"
    )


def run(args: argparse.Namespace) -> int:
    from launchtrace.receiver.collect import Collector

    if args.grpc is None and args.http is None:
        raise UserError("both --grpc and --http are off: nothing to listen on")
    from launchtrace.cli._output import make_parent

    make_parent("--out", args.out)
    try:
        collector = Collector(
            args.out, grpc_port=args.grpc, http_port=args.http, host=args.host, idle_timeout=args.idle_timeout
        ).start()
    except OSError as exc:
        raise UserError(f"{exc} (output {args.out})") from None
    stop = threading.Event()

    def _on_signal(signum: int, frame: object) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, _on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    parts = []
    if collector.grpc_port is not None:
        parts.append(f"grpc {args.host}:{collector.grpc_port}")
    if collector.http_port is not None:
        parts.append(f"http {args.host}:{collector.http_port}")
    print(f"launchtrace collect: listening on {', '.join(parts)}; writing {args.out}", flush=True)
    try:
        while not stop.is_set():
            if args.max_spans and collector.wait_for_spans(args.max_spans, timeout=0.2):
                print(f"launchtrace collect: reached {collector.spans_received} spans", flush=True)
                break
            if not args.max_spans:
                stop.wait(0.2)
    finally:
        collector.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    failed = f", {collector.spans_failed} not written (refused to their senders)" if collector.spans_failed else ""
    print(
        f"launchtrace collect: received {collector.spans_received} spans in {collector.requests_received} "
        f"requests; wrote {collector.spans_written} to {args.out}{failed}",
        file=sys.stderr,
        flush=True,
    )
    for kind, n in sorted(collector.problems.items()):
        print(f"launchtrace collect: {n} requests {kind}", file=sys.stderr, flush=True)
    return 1 if collector.write_errors else 0
