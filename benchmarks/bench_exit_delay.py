"""How long ``launchtrace run`` keeps a program from exiting (docs/reliability.md, "Exit delay"): the time from the
program's last line to the process's end, bare Python versus ``launchtrace run``, in two worst cases:

- ``threads``: daemon threads still launching Warp kernels when the main thread returns (they never stop);
- ``unreachable``: an ``OTEL_EXPORTER_OTLP_ENDPOINT`` nobody listens on (a port on 127.0.0.1 that is closed).

The exit flush is bounded by ``LAUNCHTRACE_EXIT_TIMEOUT`` (default 2 s); what it could not write is counted in
the closing line, which is printed with each figure.

    python benchmarks/bench_exit_delay.py [--runs 3] [--seconds 1.0] [--exit-timeout 2]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time

PROGRAM = """
import sys, threading, time
import warp as wp
wp.config.quiet = True

@wp.kernel
def twice(a: wp.array(dtype=float), b: wp.array(dtype=float)):
    i = wp.tid()
    b[i] = 2.0 * a[i]

a = wp.zeros(8, dtype=float)
b = wp.zeros(8, dtype=float)

def forever():
    while True:
        wp.launch(twice, dim=8, inputs=[a, b])

if sys.argv[1] == "threads":
    for _ in range(2):
        threading.Thread(target=forever, daemon=True).start()
else:
    for _ in range(100):
        wp.launch(twice, dim=8, inputs=[a, b])
time.sleep(float(sys.argv[2]))
print("exiting", flush=True)
"""


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def one(cmd: list[str], env: dict[str, str]) -> tuple[float, str]:
    """Seconds from the program's ``exiting`` line to the process's end, and launchtrace's closing line."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    t = None
    for line in proc.stdout:  # type: ignore[union-attr]
        if line.strip() == "exiting":
            t = time.monotonic()
    proc.wait()
    assert t is not None, proc.stderr.read()  # type: ignore[union-attr]
    closing = [x for x in proc.stderr.read().splitlines() if x.startswith("launchtrace: ")]  # type: ignore[union-attr]
    return time.monotonic() - t, closing[-1] if closing else ""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=1.0, help="how long the program runs before it exits")
    ap.add_argument("--exit-timeout", default=None, help="LAUNCHTRACE_EXIT_TIMEOUT (default: unset, 2 s)")
    ap.add_argument("--cases", default="threads,unreachable", help="which cases, comma-separated")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        program = os.path.join(tmp, "prog.py")
        with open(program, "w") as f:
            f.write(textwrap.dedent(PROGRAM))
        base = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "LAUNCHTRACE_"))}
        if args.exit_timeout is not None:
            base["LAUNCHTRACE_EXIT_TIMEOUT"] = args.exit_timeout
        for case in args.cases.split(","):
            env = dict(base)
            run_args = ["--out", os.path.join(tmp, "s.jsonl")]
            if case == "unreachable":
                env["OTEL_EXPORTER_OTLP_ENDPOINT"] = f"http://127.0.0.1:{closed_port()}"
                run_args = []
            bare = [one([sys.executable, program, case, str(args.seconds)], env)[0] for _ in range(args.runs)]
            under = [
                one([sys.executable, "-m", "launchtrace", "run", *run_args, program, case, str(args.seconds)], env)
                for _ in range(args.runs)
            ]
            print(
                f"{case}: exit delay bare median {statistics.median(bare):.2f} s, under launchtrace run median "
                f"{statistics.median(d for d, _ in under):.2f} s (max {max(d for d, _ in under):.2f} s)"
            )
            for _, line in under:
                print(f"  {line}")


if __name__ == "__main__":
    main()
