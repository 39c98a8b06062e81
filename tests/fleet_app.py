"""A small Warp "service" for the fleet tests: one process = one run, each step one trace.

``python tests/fleet_app.py VARIANT STEPS OUT.jsonl``; the host and build come from ``OTEL_RESOURCE_ATTRIBUTES``
(``host.name=h1,service.version=1.0``), as on a real fleet. Variants: ``clean``; ``dim`` (one launch with other
dimensions); ``slow`` (the ``work`` kernel does 4x the work: same topology, other code); ``alloc`` (a scratch
buffer allocated per call instead of the owned one). ``FLEET_METRICS_FILE`` serves the launch metrics for
Prometheus on a loopback port the kernel picks while the program runs, and writes ``127.0.0.1:PORT`` to that file
once it serves (a port chosen by the test could be taken by another process, Prometheus itself included, before
this one binds it); ``FLEET_LINGER_S`` keeps it up that long after;
``FLEET_RUN_S`` stops the steps after that many seconds; ``FLEET_SUBSTEPS`` repeats ``integrate``.
"""

from __future__ import annotations

import os
import sys
import time

VARIANT = sys.argv[1]
ITERATIONS = 400 if VARIANT == "slow" else 100

import warp as wp  # noqa: E402

import launchtrace  # noqa: E402

wp.config.quiet = True
N = 2048
SUBSTEPS = int(os.environ.get("FLEET_SUBSTEPS", "1"))
WORK_ITERATIONS = wp.constant(ITERATIONS)


@wp.kernel
def integrate(pos: wp.array(dtype=float), vel: wp.array(dtype=float), dt: float):
    i = wp.tid()
    pos[i] = pos[i] + vel[i] * dt


@wp.kernel
def work(pos: wp.array(dtype=float), scratch: wp.array(dtype=float)):
    i = wp.tid()
    acc = float(0.0)  # noqa: UP018 (Warp: a variable the loop changes is declared by a constructor)
    for k in range(WORK_ITERATIONS):
        acc = acc + wp.sin(pos[i] + float(k))
    scratch[i] = acc


@wp.kernel
def relax(scratch: wp.array(dtype=float), vel: wp.array(dtype=float)):
    i = wp.tid()
    vel[i] = vel[i] * 0.99 + scratch[i] * 0.001


class Sim:
    def __init__(self) -> None:
        self.pos = wp.zeros(N, dtype=float, device="cpu")
        self.vel = wp.ones(N, dtype=float, device="cpu")
        self.scratch = wp.zeros(N, dtype=float, device="cpu")

    def step(self) -> None:
        scratch = wp.empty(N, dtype=float, device="cpu") if VARIANT == "alloc" else self.scratch
        for _ in range(SUBSTEPS):  # > 1: repeated launches the exporter folds into one summary span
            wp.launch(integrate, dim=N, inputs=[self.pos, self.vel, 0.01], device="cpu")
        wp.launch(work, dim=N, inputs=[self.pos, scratch], device="cpu")
        relax_dim = N // 2 if VARIANT == "dim" else N
        wp.launch(relax, dim=relax_dim, inputs=[scratch, self.vel], device="cpu")


def main() -> None:
    steps, out = int(sys.argv[2]), sys.argv[3]
    launchtrace.start_export(file_path=out)
    address_file = os.environ.get("FLEET_METRICS_FILE")
    if address_file:
        metrics = launchtrace.start_metrics(exporters=("prometheus",), prometheus="127.0.0.1:0")
        with open(address_file + ".tmp", "w") as f:
            f.write(metrics.prometheus_address)
        os.replace(address_file + ".tmp", address_file)  # the reader never sees a partial address
    sim = Sim()
    launchtrace.own(sim, "sim")
    deadline = time.monotonic() + float(os.environ.get("FLEET_RUN_S", "inf"))
    for i in range(steps):
        if time.monotonic() > deadline:
            break
        with launchtrace.scope("step", step=i):
            sim.step()
        wp.synchronize()
    launchtrace.flush()
    time.sleep(float(os.environ.get("FLEET_LINGER_S", "0")))
    launchtrace.stop_export()


if __name__ == "__main__":
    main()
