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


def test_a_module_first_used_late_is_not_charged_to_the_warm_up(tmp_path: Path, capsys) -> None:
    (tmp_path / "prog.py").write_text(PROGRAM)
    (tmp_path / "later.py").write_text(LATER)
    out = tmp_path / "run.jsonl"
    cmd = [sys.executable, "-m", "launchtrace", "run", "--out", str(out), str(tmp_path / "prog.py")]
    assert subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path).returncode == 0
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
