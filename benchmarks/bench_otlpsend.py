"""What one OTLP request costs the sending process, in instructions (valgrind's callgrind), per protocol.

The export worker shares the GIL with the user's program, so what the sender executes per request (building it,
compressing, writing it to the socket, reading the answer and its partial success) is paid on the program's side.
:class:`launchtrace.export.otlpsend` senders send the same pre-encoded ``ExportTraceServiceRequest`` (512 launch
spans, the worker's batch) into ``launchtrace collect`` on loopback, which runs outside valgrind; each
protocol sends ``--n1`` and then ``--n2`` requests in counted blocks, and the difference divided by ``n2 - n1`` is
one request's cost, so the sender's start-up and the connection's set-up cancel. The spans are real (a two-array
kernel on Warp's CPU device, built and encoded by the exporter's own code outside valgrind), so compression sees
what it would in use. All threads are counted (gRPC's own threads too). Callgrind counts user-space
instructions: the kernel's side of a socket send is in no figure.

Run: ``python benchmarks/bench_otlpsend.py [--n1 20] [--n2 60] [--protocols http/protobuf,grpc]
[--compression none]`` (about a minute per protocol).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from collect_process import start_collect

SPANS_PER_REQUEST = 512
WARM_REQUESTS = 5


def request_bytes(spans: int = SPANS_PER_REQUEST) -> bytes:
    """One encoded request of ``spans`` real launch spans: a kernel with two arrays and a scalar launched on the CPU
    device under capture, turned into spans by the exporter's span builder and encoded as the OTLP sink does."""
    import threading

    import warp as wp

    from launchtrace.capture import bus
    from launchtrace.export.config import ExportConfig
    from launchtrace.export.spanbuilder import SpanBuilder
    from launchtrace.otlp.encode_proto import ProtoEncoder
    from launchtrace.testing import trace_launches

    wp.config.quiet = True
    wp.init()

    @wp.kernel
    def saxpy(x: wp.array(dtype=float), y: wp.array(dtype=float), a: float):
        i = wp.tid()
        y[i] = a * x[i] + y[i]

    x, y = wp.zeros(16, dtype=float, device="cpu"), wp.zeros(16, dtype=float, device="cpu")
    with trace_launches():
        sub = bus.subscribe(thread=threading.get_ident())
        for i in range(spans):
            wp.launch(saxpy, dim=16, inputs=[x, y, float(i)], device="cpu")
        sub.close()
        events = sub.drain()
    builder = SpanBuilder(ExportConfig.resolve(fold=False))
    built = [s for s in builder.feed(events) + builder.flush() if s.name.endswith("saxpy")]
    if len(built) != spans:
        raise SystemExit(f"built {len(built)} launch spans, expected {spans}")
    return ProtoEncoder().encode(built)


def child(args: argparse.Namespace) -> None:
    """Under callgrind: per protocol, a warm-up, then the n1 and n2 blocks between the markers."""
    from launchtrace.export.otlpsend import make_sender

    data = Path(args.payload).read_bytes()
    for protocol, endpoint in zip(args.protocols, args.endpoints):
        sender = make_sender(protocol, endpoint, compression=args.compression, timeout=30)
        for _ in range(WARM_REQUESTS):
            assert sender.send(data).ok
        for n in (args.n1, args.n2):
            os.getpgrp()  # callgrind zeroes its counts here
            for _ in range(n):
                result = sender.send(data)
            os.getsid(0)  # and dumps them here
            if not result.ok:
                raise SystemExit(f"{protocol}: {result.reason}")
        sender.shutdown()


def total(path: Path) -> int:
    """The instructions a callgrind dump counted (its ``summary:`` or ``totals:`` line)."""
    for line in path.read_text().splitlines():
        if line.startswith(("summary:", "totals:")):
            return int(line.split()[1])
    raise SystemExit(f"{path}: no totals line")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n1", type=int, default=20)
    p.add_argument("--n2", type=int, default=60)
    p.add_argument("--protocols", default="http/protobuf,grpc")
    p.add_argument("--compression", default="none", choices=("none", "gzip", "deflate"))
    p.add_argument("--keep", action="store_true", help="keep the temporary folder (callgrind's dumps, the request)")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--endpoints", default="", help=argparse.SUPPRESS)
    p.add_argument("--payload", default="", help=argparse.SUPPRESS)
    args = p.parse_args()
    args.protocols = args.protocols.split(",")
    if args.child:
        args.endpoints = args.endpoints.split(",")
        child(args)
        return
    folder = tempfile.mkdtemp(prefix="bench_otlpsend_")
    payload = os.path.join(folder, "request.pb")
    size = Path(payload).write_bytes(request_bytes())  # outside valgrind: Warp and the span builder are not counted
    collect, grpc, http = start_collect(os.path.join(folder, "got.pb"))
    try:
        endpoints = [grpc if proto == "grpc" else http for proto in args.protocols]
        out = os.path.join(folder, "cg.out")
        cmd = [
            "valgrind", "--tool=callgrind", "--zero-before=getpgrp", "--dump-before=getsid", "--compress-strings=no",
            f"--callgrind-out-file={out}", sys.executable, __file__, "--child", "--n1", str(args.n1),
            "--n2", str(args.n2), "--protocols", ",".join(args.protocols), "--compression", args.compression,
            "--endpoints", ",".join(endpoints), "--payload", payload,
        ]  # fmt: skip
        t0 = time.monotonic()
        env = dict(os.environ, PYTHONHASHSEED="0", OPENBLAS_NUM_THREADS="1")
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=3600)
        if done.returncode != 0:
            raise SystemExit(f"callgrind run failed (rc {done.returncode}):\n{done.stderr[-3000:]}")
        dumps = sorted(Path(folder).glob("cg.out.*"), key=lambda q: int(q.suffix[1:]))
        counts = [total(d) for d in dumps[: 2 * len(args.protocols)]]
    finally:
        collect.terminate()
        collect.wait(timeout=30)
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)
    print(
        f"per request ({SPANS_PER_REQUEST} spans, {size:,} bytes, compression {args.compression}; "
        f"{args.n2} - {args.n1} requests; callgrind {time.monotonic() - t0:.0f} s):"
    )
    for i, protocol in enumerate(args.protocols):
        a, b = counts[2 * i], counts[2 * i + 1]
        print(f"  {protocol:14s} {(b - a) / (args.n2 - args.n1):12,.0f} instructions")
    if args.keep:
        print(f"callgrind's dumps: {folder}/cg.out.* (per protocol, the n1 block then the n2 block)")


if __name__ == "__main__":
    main()
