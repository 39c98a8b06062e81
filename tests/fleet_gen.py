"""Makes a synthetic fleet: real Warp processes (``tests/fleet_app.py``) exporting under different hosts and builds.

Runs are started interleaved across groups, two at a time, so that the machine's load over time falls on every
group alike (as on a real fleet, where hosts run at the same time). Each run writes its own OTLP JSON Lines
file ``<group>-r<k>.jsonl``.

Example::

    files = make_fleet(tmp, [Member("clean", "1.0", "h1", runs=6)], steps=12)
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import time
from pathlib import Path

APP = Path(__file__).with_name("fleet_app.py")
SERVICE = "fleet-sim"


@dataclasses.dataclass(frozen=True)
class Member:
    variant: str  # clean | dim | slow | alloc
    version: str
    host: str
    runs: int

    @property
    def name(self) -> str:
        return f"{self.version}-{self.host}"


def run_env(member: Member, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {**os.environ, "OTEL_SERVICE_NAME": SERVICE}
    env["OTEL_RESOURCE_ATTRIBUTES"] = f"service.version={member.version},host.name={member.host}"
    env.pop("OTEL_EXPORTER_OTLP_ENDPOINT", None)
    env.update(extra or {})
    return env


def traced_run(script: Path, out: Path, resource: str, service: str, env: dict[str, str]) -> Path:
    """``launchtrace run --out OUT SCRIPT`` in a fresh process with ``OTEL_RESOURCE_ATTRIBUTES=resource`` (a
    fleet member's ``host.name`` and ``service.version``) and ``env`` on top; ``out``, once it exited 0."""
    run = {**os.environ, "OTEL_RESOURCE_ATTRIBUTES": resource, "OTEL_SERVICE_NAME": service, **env}
    run.pop("OTEL_EXPORTER_OTLP_ENDPOINT", None)
    done = subprocess.run(
        [sys.executable, "-m", "launchtrace", "run", "--out", str(out), str(script)],
        env=run, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return out


def cli(*argv: str) -> subprocess.CompletedProcess:
    """``launchtrace ARGV`` in a fresh process, its output captured."""
    return subprocess.run([sys.executable, "-m", "launchtrace", *argv], capture_output=True, text=True, timeout=300)


def start_serving_metrics(
    member: Member, steps: int, out: Path, extra: dict[str, str] | None = None
) -> tuple[subprocess.Popen, Path]:
    """Start one run that serves its launch metrics; the process and the file its ``host:port`` will be in."""
    address_file = out.with_suffix(".metrics-address")
    env = run_env(member, {"FLEET_METRICS_FILE": str(address_file), **(extra or {})})
    cmd = [sys.executable, str(APP), member.variant, str(steps), str(out)]
    with out.with_suffix(".stderr").open("w") as err:  # a file, not a pipe: a long run never blocks on it
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=err)
    return proc, address_file


def metrics_address(proc: subprocess.Popen, address_file: Path, timeout: float = 120.0) -> str:
    """The ``host:port`` a run started by :func:`start_serving_metrics` serves on, once it serves."""
    deadline = time.monotonic() + timeout
    while not address_file.exists():
        if proc.poll() is not None:
            err = address_file.with_suffix(".stderr").read_text()[-2000:]
            raise RuntimeError(f"fleet run exited ({proc.returncode}) before serving metrics: {err}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"fleet run did not serve metrics within {timeout} s")
        time.sleep(0.05)
    return address_file.read_text()


def make_fleet(folder: Path, members: list[Member], *, steps: int = 12, parallel: int = 2) -> dict[str, list[Path]]:
    """Run every member's runs; the files by member name, in run order."""
    folder.mkdir(parents=True, exist_ok=True)
    jobs = [(m, k) for k in range(max(m.runs for m in members)) for m in members if k < m.runs]
    out: dict[str, list[Path]] = {m.name: [] for m in members}
    running: list[tuple[subprocess.Popen, Path]] = []

    def reap(limit: int) -> None:
        while len(running) > limit:
            for item in list(running):
                proc, path = item
                if proc.poll() is not None:
                    running.remove(item)
                    _, err = proc.communicate()
                    if proc.returncode != 0 or not path.exists():
                        raise RuntimeError(f"{path.name}: fleet run failed ({proc.returncode}): {err[-2000:]}")
            time.sleep(0.02)

    for member, k in jobs:
        path = folder / f"{member.name}-r{k}.jsonl"
        out[member.name].append(path)
        cmd = [sys.executable, str(APP), member.variant, str(steps), str(path)]
        proc = subprocess.Popen(cmd, env=run_env(member), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        running.append((proc, path))
        reap(parallel - 1)
    reap(0)
    return out
