"""``summary`` puts a module's compile/load where the run paid it: a module first used at step 30 of 40 loads
there, not in the warm-up (a real program under ``launchtrace run``, its second module imported from a file)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

from launchtrace.cli import main

PROGRAM = textwrap.dedent(
    """
    import warp as wp
    import later

    @wp.kernel
    def first(x: wp.array(dtype=float)):
        x[wp.tid()] += 1.0

    x = wp.zeros(64, dtype=float)
    for step in range(40):
        with wp.ScopedTimer("step", print=False):
            wp.launch(first, dim=64, inputs=[x])
            if step >= 30:
                wp.launch(later.second, dim=64, inputs=[x])
    """
)
LATER = textwrap.dedent(
    """
    import warp as wp

    @wp.kernel
    def second(x: wp.array(dtype=float)):
        x[wp.tid()] = x[wp.tid()] * 0.5
    """
)


def _run(folder: Path, name: str, program: str) -> Path:
    """``program`` written to ``folder/name`` and run under ``launchtrace run`` there; its span file."""
    (folder / name).write_text(program)
    out = folder / "run.jsonl"
    cmd = [sys.executable, "-m", "launchtrace", "run", "--out", str(out), str(folder / name)]
    assert subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=folder).returncode == 0
    return out


def test_a_module_first_used_late_is_not_charged_to_the_warm_up(tmp_path: Path, capsys) -> None:
    (tmp_path / "later.py").write_text(LATER)
    out = _run(tmp_path, "prog.py", PROGRAM)
    assert main(["summary", str(out)]) == 0
    text = capsys.readouterr().out
    late = re.search(r"compile/load after the warm-up: ([\d.]+) ms in 1 load under 'step' \(a module first used", text)
    assert late, text
    assert main(["summary", str(out), "--format", "json"]) == 0
    loads = json.loads(capsys.readouterr().out)["loads"]
    assert loads["count"] == 2  # this program's module at the first step, `later` at step 30
    early = re.search(r"(?:; ([\d.]+) ms of it compile/load|no compile/load in it)\): included above", text)
    assert early, text
    early_ms = float(early.group(1)) if early.group(1) else 0.0
    assert abs(early_ms + float(late.group(1)) - loads["total_ns"] / 1e6) < 0.2  # each load counted once


SLEEPY = textwrap.dedent(
    """
    import time
    import warp as wp

    @wp.kernel
    def k(x: wp.array(dtype=float)):
        x[wp.tid()] += 1.0

    x = wp.zeros(64, dtype=float)
    for step in range(10):
        with wp.ScopedTimer("step", print=False):
            wp.launch(k, dim=64, inputs=[x])
            time.sleep(0.05)  # the program's own work between launches
            wp.launch(k, dim=64, inputs=[x])
    """
)


def test_the_wall_line_says_the_time_went_to_the_programs_own_code(tmp_path: Path, capsys) -> None:
    """A slow process is not always slow kernels: 10 steps of 50 ms of the program's own work around two tiny
    launches are about 0.5 s of wall time, almost none of it in the launches."""
    out = _run(tmp_path, "sleepy.py", SLEEPY)
    assert main(["summary", str(out)]) == 0
    text = capsys.readouterr().out
    line = next(line for line in text.splitlines() if line.startswith("wall: "))
    parts = ("launches, copies and fills", "compile/load", "the program's own code and waits between them")
    found = {}
    for where in parts:
        m = re.search(rf"([\d.]+) s \(([\d.]+)%\) in {re.escape(where)}", line)
        if m:
            found[where] = (float(m.group(1)), float(m.group(2)))
    own, calls = found[parts[2]], found[parts[0]]
    wall = float(re.match(r"wall: ([\d.]+) s traced", line).group(1))
    assert own[0] >= 0.45 and own[1] > 50 and calls[0] < 0.1, line
    assert abs(sum(s for s, _ in found.values()) - wall) < 0.005, line  # the three parts make the wall time
    assert main(["summary", str(out), "--format", "json"]) == 0
    assert abs(json.loads(capsys.readouterr().out)["wall_ns"] / 1e9 - wall) < 0.001
