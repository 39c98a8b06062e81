"""Fleet alerts for programs with no scope at all: each loop iteration of their unscoped work is a latency step.

A zero-code program often has no timer (``for i in range(n): wp.launch(...)``); the fleet left its work out
(its steps were the exporter's roots, cut by time), so a host running it twice as slow could never alert. Now
the baseline cuts each root's unscoped records into loop iterations
(:func:`launchtrace.analysis.fleet.occurrences.loop_iterations`) and judges their latency; the topology of
that work is still not judged (the roots' fingerprints differ from run to run).

Real Warp programs on the CPU device under ``launchtrace run`` with ``host.name`` set as a fleet sets it; the
roots cut small (``LAUNCHTRACE_STEP_MAX_SPANS``) so that many are plain steps the fast path reads.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fleet_gen import cli, traced_run
from launchtrace.analysis.fleet.baseline import BaselineBuilder
from launchtrace.sources.stream import TraceStream

PROGRAM = """
import os
import warp as wp
wp.config.quiet = True

LOOPS = wp.constant(int(400 * float(os.environ.get("SLOW", "1"))))

@wp.kernel
def work(x: wp.array(dtype=float)):
    i = wp.tid()
    a = x[i]
    for _k in range(LOOPS):
        a = wp.sin(a) * 0.5 + 0.2
    x[i] = a

@wp.kernel
def settle(x: wp.array(dtype=float)):
    i = wp.tid()
    x[i] = x[i] * 0.5

x = wp.zeros(256, dtype=float)
for _ in range(80):
    wp.launch(work, dim=256, inputs=[x])
    wp.launch(settle, dim=256, inputs=[x])
"""


def _run(folder: Path, name: str, host: str, slow: float = 1.0) -> Path:
    script = folder / "loose.py"
    script.write_text(PROGRAM, encoding="utf-8")
    env = {"SLOW": str(slow), "LAUNCHTRACE_STEP_MAX_SPANS": "40"}
    return traced_run(script, folder / f"{name}.jsonl", f"host.name={host}", "loose", env)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("loose")
    return {
        "base1": _run(folder, "base1", "h1"),
        "base2": _run(folder, "base2", "h1"),
        "same": _run(folder, "same", "h1"),
        "slow": _run(folder, "slow", "h2", slow=3.0),
    }


def test_a_host_that_runs_a_loop_with_no_scope_slower_alerts(runs: dict[str, Path], tmp_path: Path) -> None:
    base = tmp_path / "base.pb"
    built = cli("baseline", "build", "--from", str(runs["base1"]), str(runs["base2"]), "--out", str(base), "--quiet")
    assert built.returncode == 0, built.stderr
    done = cli("alert", "--baseline", str(base), "--from", str(runs["same"]), str(runs["slow"]), "--format", "json")
    assert done.returncode == 1, done.stderr
    alerts = json.loads(done.stdout)["alerts"]
    assert {a["group"]["host.name"] for a in alerts} == {"h2"}, alerts  # the unchanged h1 raises nothing
    assert {a["reason"] for a in alerts} == {"latency_regression"}  # no topology of work outside every scope
    kernels = {a["kernel"] for a in alerts}
    assert "__main__.work" in kernels and "__main__.settle" not in kernels
    (work,) = [a for a in alerts if a["kernel"] == "__main__.work"]
    assert work["scope"] == "<no scope>" and work["values"]["effect"] > 1.0
    assert any(line.startswith("from hosts h2 (1 run)") for line in work["evidence"]), work["evidence"]
    assert any(line.startswith("reference: hosts h1 (2 runs)") for line in work["evidence"]), work["evidence"]


def test_each_iteration_is_one_step_read_fast_or_rebuilt_alike(runs: dict[str, Path]) -> None:
    """80 iterations a run, in roots of 40 records (20 iterations): 80 latency steps a run, not 2 or 4 roots; the
    fast path (most roots are plain steps of one signature) gives the very baseline the rebuild gives."""
    built = {}
    for fast in (True, False):
        builder = BaselineBuilder(("host.name",))
        builder.add_stream(TraceStream.from_paths([runs["base1"], runs["base2"]]), fast=fast)
        built[fast] = builder
    assert built[True].fast_counts()[0] > 0
    data = {fast: b.to_proto().SerializeToString(deterministic=True) for fast, b in built.items()}
    assert data[True] == data[False]
    scope = built[True].groups[("h1",)].scopes["<no scope>"]
    work = next(acc for (kernel, _), acc in scope.kernels.items() if kernel == "__main__.work")
    assert sorted(len(values) for values in work.run_values().values()) == [80, 80]
