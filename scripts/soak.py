"""Soak: a million launches through the exporter, with the OTLP endpoint down and then up.

- ``down``: the exporter points at a port nobody listens on. The launching thread must not slow down or grow:
  resident memory (``/proc/self/statm``) is sampled during the run; growth over the warmed-up baseline must
  stay under 64 MB. Every span is accounted for: ``exported + dropped == what was issued``.
- ``up``: ``launchtrace collect`` runs in its own process on loopback; afterwards the file it wrote is read
  back and rebuilt (folded summaries expanded), and the launches it represents must equal the launches issued.

The program is ``steps`` steps of ``launches // steps`` tiny kernel launches, each step a ``launchtrace.scope``
(so the span budget and folding see what a simulation loop looks like). Prints one JSON object per mode.

Example::

    python scripts/soak.py --launches 1000000            # both modes, ~2 x 1.5 minutes on 2 cores
    python scripts/soak.py --launches 50000 --mode up
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

RSS_LIMIT_BYTES = 64 << 20


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RssSampler:
    """Samples resident memory every 50 ms on a thread; ``peak`` is the highest seen."""

    def __init__(self) -> None:
        self.peak = rss_bytes()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            self.peak = max(self.peak, rss_bytes())

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss_bytes())


def _bump_kernel():
    """The soak's kernel, defined once per process at module level (so Warp's kernel cache serves it)."""
    import warp as wp

    global _BUMP
    if _BUMP is None:

        def bump(a: wp.array(dtype=wp.int32)):
            a[wp.tid()] += 1

        _BUMP = wp.Kernel(bump, key="soak_bump", module=wp.get_module("launchtrace_soak"))
    return _BUMP


_BUMP = None


def program(launches: int, steps: int):
    """The launch loop as a function of its own (kernels compiled before it is timed)."""
    import warp as wp

    import launchtrace

    bump = _bump_kernel()
    counter = wp.zeros(1, dtype=wp.int32, device="cpu")
    wp.launch(bump, dim=1, inputs=[counter], device="cpu")  # compile
    counter.zero_()
    per_step = launches // steps

    def run() -> int:
        for s in range(steps):
            with launchtrace.scope("soak-step", step=s):
                for _ in range(per_step):
                    wp.launch(bump, dim=1, inputs=[counter], device="cpu")
        return int(counter.numpy()[0])

    return run, per_step * steps


def launches_in_file(path: Path) -> int:
    from launchtrace.sources.files import read_spans
    from launchtrace.sources.rebuild import rebuild

    return sum(1 for r in rebuild(read_spans(path).spans).records() if r.op == "launch")


def soak(mode: str, launches: int, steps: int, protocol: str, exporter_timeout: float) -> dict:
    import warp as wp

    import launchtrace.export as export

    os.environ["OTEL_EXPORTER_OTLP_TIMEOUT"] = str(exporter_timeout)
    wp.config.quiet = True
    wp.init()
    run, issued = program(launches, steps)
    with tempfile.TemporaryDirectory(prefix="lt-soak-") as tmp:
        out = Path(tmp) / "collected.jsonl"
        port = free_port()
        collector = None
        if mode == "up":
            flag = "--grpc" if protocol == "grpc" else "--http"
            other = "--http" if protocol == "grpc" else "--grpc"
            collector = subprocess.Popen(
                [sys.executable, "-m", "launchtrace", "collect", "--out", str(out), flag, str(port), other, "off"],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            collector.stdout.readline()  # "listening on ..."
        suffix = "/v1/traces" if protocol == "http/protobuf" else ""
        export.start_export(endpoint=f"http://127.0.0.1:{port}{suffix}", protocol=protocol)
        base = rss_bytes()
        t0 = time.perf_counter()
        with RssSampler() as rss:
            counted = run()
            run_s = time.perf_counter() - t0
            final = export.stop_export(120.0)
        total_s = time.perf_counter() - t0
        arrived = None
        if collector is not None:
            collector.terminate()
            collector.communicate(timeout=120)
            arrived = launches_in_file(out)
    return {
        "mode": mode,
        "protocol": protocol,
        "launches": issued,
        "kernel_count_ok": counted == issued,
        "run_s": round(run_s, 2),
        "launches_per_s": round(issued / run_s),
        "total_s_with_final_flush": round(total_s, 2),
        "rss_growth_mb": round((rss.peak - base) / 2**20, 1),
        "rss_ok": rss.peak - base < RSS_LIMIT_BYTES,
        "built": final.built,
        "exported": final.exported,
        "dropped_sink": final.dropped_sink,
        "dropped_queue": final.dropped_queue,
        "dropped_budget": final.dropped_budget,
        "launches_arrived": arrived,
        "all_arrived": None if arrived is None else arrived == issued,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launches", type=int, default=1_000_000)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--mode", choices=("down", "up", "both"), default="both")
    parser.add_argument("--protocol", choices=("grpc", "http/protobuf"), default="grpc")
    parser.add_argument(
        "--exporter-timeout", type=float, default=10.0, help="OTEL_EXPORTER_OTLP_TIMEOUT, seconds (SDK default 10)"
    )
    args = parser.parse_args(argv)
    modes = ("down", "up") if args.mode == "both" else (args.mode,)
    ok = True
    for mode in modes:
        if len(modes) > 1:  # each mode in a fresh process: memory figures must not mix
            proc = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--mode",
                    mode,
                    "--launches",
                    str(args.launches),
                    "--steps",
                    str(args.steps),
                    "--protocol",
                    args.protocol,
                ],
                check=False,
            )
            ok = ok and proc.returncode == 0
            continue
        result = soak(mode, args.launches, args.steps, args.protocol, args.exporter_timeout)
        print(json.dumps(result), flush=True)
        ok = result["rss_ok"] and result["kernel_count_ok"] and result["all_arrived"] in (None, True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
