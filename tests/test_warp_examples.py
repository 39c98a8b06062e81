"""Warp's own shipped examples, run bare and under ``launchtrace run`` in fresh processes (CPU device).

A representative subset of ``scripts/sweep_warp_examples.py`` (the full sweep's table is in
docs/reliability.md): a graph-capture example, a CPU graph replay with ping-pong buffers, ``warp.fem`` with
sparse products and recorded ``wp.Launch`` commands, a ray marcher, and a discontinuous-Galerkin fem solver.
For each: every array the example holds at the end is bit-for-bit equal with and without launchtrace; the
launches read back from the exported file (folded summaries expanded) equal an independent count from Warp's
own ``print_launches`` log; nothing is dropped; and where Warp captures the step as a graph, the step's
topology is static.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _sweep():
    spec = importlib.util.spec_from_file_location("sweep_warp_examples", REPO / "scripts" / "sweep_warp_examples.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("sweep_warp_examples", module)
    spec.loader.exec_module(module)
    return module


sweep = _sweep()

SUBSET = [
    "warp.examples.core.example_graph_capture",
    "warp.examples.core.example_fluid",
    "warp.examples.fem.example_diffusion",
    "warp.examples.core.example_raymarch",
    "warp.examples.fem.example_burgers",
]


@pytest.mark.parametrize("module", SUBSET, ids=[m.rsplit(".", 1)[-1] for m in SUBSET])
def test_warp_example_same_results_every_launch_exported(module: str, tmp_path: Path) -> None:
    args = sweep.EXAMPLES[module].split()
    trace = tmp_path / "trace.jsonl"
    bare = sweep.run_driver(module, args, None, "run", timeout=600)
    traced = sweep.run_driver(module, args, trace, "run", timeout=600)  # under `launchtrace run --out`
    assert bare["state"], "the example holds arrays to compare"
    assert traced["state"] == bare["state"]  # bit for bit
    assert traced["launches"] == bare["launches"] > 0
    exported, spans, traces = sweep.exported_launches(trace)
    assert exported == traced["launches"]
    assert traced["export"]["dropped"] == 0 and traced["export"]["exported"] == spans
    verdict = sweep.static_verdict(traces)
    if module in sweep.STATIC_EXPECTED:
        assert verdict.startswith("static"), verdict
