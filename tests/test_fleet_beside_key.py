"""Fleet alerts see what the topology fingerprint leaves out: an array of another dtype and a call that raised.

A build that passes ``float64`` where the fleet passes ``float32`` to a generic kernel runs another overload, and a
host whose launch raises (and whose program catches it) runs nothing; both keep the fingerprint (it holds no
dtypes, so baselines made before stay valid), and ``alert`` said nothing. Now the window's representative step is
compared with the baseline's step of the same fingerprint beside it, as ``launchtrace diff`` compares them.

Real Warp programs on the CPU device under ``launchtrace run``, with ``host.name`` and ``service.version`` set as a
fleet sets them; ``baseline build`` and ``alert`` through the command line.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fleet_gen import cli, traced_run

PROGRAM = """
import os
from typing import Any
import numpy as np
import warp as wp
wp.config.quiet = True

@wp.kernel
def double(x: wp.array(dtype=Any)):
    i = wp.tid()
    x[i] = x[i] + x[i]

@wp.kernel
def halve(x: wp.array(dtype=float)):
    i = wp.tid()
    x[i] = x[i] * 0.5

def state(dtype):
    return wp.array(np.ones(64), dtype=dtype)

dtype = {"float32": wp.float32, "float64": wp.float64, "int32": wp.int32}[os.environ["DTYPE"]]
x = state(dtype)
y = state(wp.float32 if os.environ.get("RAISE") != "1" else wp.int32)
for _ in range(12):
    with wp.ScopedTimer("step", print=False):
        wp.launch(double, dim=64, inputs=[x])
        try:
            wp.launch(halve, dim=64, inputs=[y])
        except RuntimeError:
            pass
"""


def _run(folder: Path, name: str, host: str, version: str, **env: str) -> Path:
    script = folder / "generic.py"
    script.write_text(PROGRAM, encoding="utf-8")
    resource = f"service.version={version},host.name={host}"
    return traced_run(script, folder / f"{name}.jsonl", resource, "generic", env)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("beside")
    runs = {
        "base1": _run(folder, "base1", "h1", "1.0", DTYPE="float32"),
        "base2": _run(folder, "base2", "h2", "1.0", DTYPE="float32"),
        "same": _run(folder, "same", "h1", "1.0", DTYPE="float32"),
        "float64": _run(folder, "float64", "h3", "1.1", DTYPE="float64"),
        "raises": _run(folder, "raises", "h4", "1.0", DTYPE="float32", RAISE="1"),
    }
    base = folder / "base.pb"
    built = cli("baseline", "build", "--from", str(runs["base1"]), str(runs["base2"]), "--out", str(base), "--quiet")
    assert built.returncode == 0, built.stderr
    return {**runs, "base": base}


def _alerts(fleet: dict[str, Path], *names: str) -> tuple[int, list[dict]]:
    args = ("alert", "--baseline", str(fleet["base"]), "--from", *(str(fleet[n]) for n in names), "--format", "json")
    done = cli(*args)
    assert done.returncode in (0, 1), done.stderr
    return done.returncode, json.loads(done.stdout)["alerts"]


def test_an_unchanged_host_raises_nothing(fleet: dict[str, Path]) -> None:
    code, alerts = _alerts(fleet, "same")
    assert code == 0 and [a for a in alerts if a["reason"] == "topology_drift"] == []


def test_a_build_that_passes_another_dtype_is_a_topology_drift(fleet: dict[str, Path]) -> None:
    code, alerts = _alerts(fleet, "same", "float64")
    drift = [a for a in alerts if a["reason"] == "topology_drift"]
    assert code == 1 and len(drift) == 1, alerts
    (alert,) = drift
    assert alert["group"]["host.name"] == "h3" and alert["kernel"] == "__main__.double"
    assert "differ beside it (dtype)" in alert["summary"]
    assert any("dtype x float32 -> float64" in line for line in alert["evidence"]), alert["evidence"]


def test_a_host_whose_launch_raises_is_a_topology_drift(fleet: dict[str, Path]) -> None:
    code, alerts = _alerts(fleet, "raises")
    drift = [a for a in alerts if a["reason"] == "topology_drift"]
    assert code == 1 and len(drift) == 1, alerts
    (alert,) = drift
    assert alert["group"]["host.name"] == "h4" and alert["kernel"] == "__main__.halve"
    assert "raised" in alert["summary"] and "dtype" in alert["summary"]
    assert any("raised no -> RuntimeError" in line for line in alert["evidence"]), alert["evidence"]
