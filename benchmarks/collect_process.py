"""``launchtrace collect`` on loopback for a benchmark: started on free ports, outside any valgrind, its endpoints
read from its first line."""

from __future__ import annotations

import re
import subprocess
import sys
from typing import NamedTuple


class Collect(NamedTuple):
    proc: subprocess.Popen
    grpc: str | None  # "http://127.0.0.1:<port>" (OTLP/gRPC), None when off
    http: str | None  # "http://127.0.0.1:<port>/v1/traces" (OTLP/HTTP), None when off


def start_collect(out: str, *, grpc: bool = True, http: bool = True, extra: tuple[str, ...] = ()) -> Collect:
    """``launchtrace collect --out out`` with the listeners asked for, each on a free port."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "launchtrace", "collect", "--out", out, "--grpc", "0" if grpc else "off",
         "--http", "0" if http else "off", *extra],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    line = proc.stdout.readline()
    grpc_port, http_port = re.search(r"grpc 127\.0\.0\.1:(\d+)", line), re.search(r"http 127\.0\.0\.1:(\d+)", line)
    if (grpc and not grpc_port) or (http and not http_port):
        proc.kill()
        raise SystemExit(f"launchtrace collect did not start: {line!r}")
    return Collect(
        proc,
        f"http://127.0.0.1:{grpc_port.group(1)}" if grpc_port else None,
        f"http://127.0.0.1:{http_port.group(1)}/v1/traces" if http_port else None,
    )
