"""Kernels given a ``wp.HashGrid`` / ``wp.Mesh`` as its ``uint64`` handle: recorded by the object's name.

The handle is a native pointer, different in every run: recorded as a number, an unchanged program failed
``diff`` against itself on every step (``scalar grid 0x563096b8cb00 -> 0x55fb80021e00``). Real kernels on the
CPU device; the run-level check is two real ``launchtrace run`` subprocesses and the real ``diff``.
"""

from __future__ import annotations

import gc
import subprocess
import sys
from pathlib import Path

import pytest

from launchtrace.capture.objects import HANDLE_NAMES
from launchtrace.testing import trace_launches

HERE = Path(__file__).resolve().parent


@pytest.fixture
def progs(instrumented):
    sys.path.insert(0, str(HERE))
    try:
        import warp_programs

        yield warp_programs
    finally:
        sys.path.remove(str(HERE))


def test_handles_are_recorded_by_the_objects_names(progs, warp_cpu) -> None:
    wp = warp_cpu
    p = wp.zeros(8, dtype=wp.vec3, device="cpu")
    count = wp.zeros(8, dtype=int, device="cpu")
    grids = []
    with trace_launches() as trace:
        for _ in range(2):
            grid = wp.HashGrid(4, 4, 4, device="cpu")
            grids.append(grid)
            grid.build(p, 0.5)
            wp.launch(progs.grid_neighbours, dim=8, inputs=[grid.id, p, 0.5, count], device="cpu")
    here = "test_handles_are_recorded_by_the_objects_names"
    names = [dict(r.scalars)[0] for r in trace.to_data().records if r.kernel.endswith("grid_neighbours")]
    assert names == [f"wp.HashGrid {here}.grid", f"wp.HashGrid {here}.grid#1"]  # two alive at once
    del grid, grids
    gc.collect()
    again = wp.HashGrid(4, 4, 4, device="cpu")  # the names of dead objects are free again
    assert HANDLE_NAMES[again.id] == f"wp.HashGrid {here}.again"
    grid = wp.HashGrid(4, 4, 4, device="cpu")
    assert HANDLE_NAMES[grid.id] == f"wp.HashGrid {here}.grid"


def test_an_unchanged_geometry_program_diffs_equal(tmp_path: Path, warp_cpu) -> None:
    outs = []
    for name in ("a", "b"):
        out = tmp_path / f"{name}.jsonl"
        proc = subprocess.run(
            [sys.executable, "-m", "launchtrace", "run", "--out", str(out), str(HERE / "warp_programs.py"), "geometry"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr
        outs.append(str(out))
    diff = subprocess.run(
        [sys.executable, "-m", "launchtrace", "diff", *outs], capture_output=True, text=True, timeout=300
    )
    assert diff.stdout.startswith("topology: equal"), diff.stdout
    assert "wp.HashGrid geometry_steps.grid" in Path(outs[0]).read_text()


def test_the_handle_names_are_bounded(monkeypatch) -> None:
    """A program that builds a new grid every step names a new handle each time: the oldest names go past
    ``MAX_HANDLES``, the newest stay."""
    from launchtrace.capture import objects

    class Grid:
        def __init__(self, handle: int) -> None:
            self.id = handle

    monkeypatch.setattr(objects, "MAX_HANDLES", 8)
    monkeypatch.setattr(objects, "HANDLE_NAMES", {})
    kept = [Grid(1000 + i) for i in range(20)]
    for g in kept:
        objects.name_object(g, sys._getframe())
    assert len(objects.HANDLE_NAMES) == 8
    assert sorted(objects.HANDLE_NAMES) == [1000 + i for i in range(12, 20)]
