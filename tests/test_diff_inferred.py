"""``diff`` counts a zero-code run's steps as ``summary``, ``report`` and ``check-static`` do (issue 26): each
repetition of the top-level ``wp.ScopedTimer`` s is one step, named after its timers (``simulate+render``).

Real Warp programs on the CPU with no launchtrace call and no enclosing scope, written as OTLP JSON Lines.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import warp as wp

from launchtrace.analysis.diff import diff_traces
from launchtrace.cli import main
from launchtrace.sources.loading import load_traces
from launchtrace.topology import ChangeKind
from test_analysis_programs import DEVICE, N, add, scale
from test_steps import _write, _zero_code

UNIT = "simulate+render"


def _zero_code_one_more(sim) -> None:
    """The same timers, and one more launch in ``render`` each time."""
    for _ in range(4):
        with wp.ScopedTimer("simulate", print=False):
            wp.launch(scale, dim=N, inputs=[sim.x, 0.5], outputs=[sim.tmp], device=DEVICE)
            wp.launch(add, dim=N, inputs=[sim.tmp, sim.v], outputs=[sim.out], device=DEVICE)
        with wp.ScopedTimer("render", print=False):
            wp.copy(sim.x, sim.out)
            wp.launch(scale, dim=N, inputs=[sim.out, 2.0], outputs=[sim.tmp], device=DEVICE)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("inferred")
    return {
        "a": _write(folder / "a.jsonl", _zero_code, reverse=False),
        "again": _write(folder / "again.jsonl", _zero_code, reverse=False),
        "more": _write(folder / "more.jsonl", _zero_code_one_more, reverse=False),
    }


def test_a_zero_code_run_diffs_by_inferred_steps(files) -> None:
    result = diff_traces(load_traces(files["a"]), load_traces(files["again"]))
    assert result.equal
    assert [(s.name, s.occurrence, s.count_a, s.count_b) for s in result.segments] == [
        (UNIT, k, 3, 3) for k in range(4)
    ]  # not simulate #k and render #k
    groups = {(t.kind, t.scope, t.name) for t in result.timing}
    assert ("scope", UNIT, UNIT) in groups
    assert {("scope", UNIT, f"{UNIT}/simulate"), ("scope", UNIT, f"{UNIT}/render")} <= groups
    assert {t.scope for t in result.timing} == {UNIT}
    kernels = {t.name.rpartition(".")[2] for t in result.timing if t.kind == "kernel"}
    assert kernels == {"scale", "add", "copy"}
    assert all(t.launches_a == 4 for t in result.timing if t.kind == "kernel")


def test_a_launch_added_to_every_step_is_one_insertion_per_inferred_step(files, capsys) -> None:
    result = diff_traces(load_traces(files["a"]), load_traces(files["more"]))
    entries = [(s.name, s.occurrence, e) for s in result.segments for e in s.entries]
    assert [(name, k) for name, k, _ in entries] == [(UNIT, k) for k in range(4)]
    assert all(e.kind == ChangeKind.INSERTED and e.record_b.kernel.endswith(".scale") for _, _, e in entries)
    assert main(["diff", str(files["a"]), str(files["more"])]) == 1
    out = capsys.readouterr().out
    assert f"scope {UNIT} 4 occurrences #0-#3: 3 -> 4 records" in out
    assert main(["diff", str(files["a"]), str(files["more"]), "--format", "json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert {s["name"] for s in data["segments"]} == {UNIT}


def test_a_named_scope_is_still_compared_as_asked(files) -> None:
    """``--scope render`` names the timer: no inference, its four occurrences are the steps."""
    result = diff_traces(load_traces(files["a"]), load_traces(files["more"]), scope="render")
    assert [(s.name, s.occurrence, s.count_a, s.count_b) for s in result.segments] == [
        ("render", k, 1, 2) for k in range(4)
    ]
