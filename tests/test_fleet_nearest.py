"""A fleet alert explains a new step topology by the reference's nearest one, and says it once.

A program whose steps differ by a step counter (``fill(x, float(it))``) makes every step its own topology. One
inserted launch was then one ``topology_drift`` and one ``launch_count_change`` alert per step (40 alerts for 20
steps, ``1 of 20 steps`` each), each explained against the reference's most common step with the counter beside
it (``scalar v 2.0 -> 13.0``), as if that had changed too. Real Warp programs on the CPU device under
``launchtrace run``; ``baseline build`` and ``alert`` through the command line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

PROGRAM = """
import os
import warp as wp
wp.config.quiet = True

@wp.kernel
def fill(x: wp.array(dtype=float), v: float):
    x[wp.tid()] = v

x = wp.zeros(64, dtype=float)
for it in range(12):
    with wp.ScopedTimer("step", print=False):
        wp.launch(fill, dim=64, inputs=[x, float(it)])
        if os.environ.get("EXTRA") == "1":
            wp.launch(fill, dim=32, inputs=[x, -1.0])
"""


def _cli(*argv: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "launchtrace", *argv], capture_output=True, text=True, timeout=300, env=env
    )


def test_one_inserted_launch_in_counter_steps_is_one_alert_each_way(tmp_path: Path) -> None:
    script = tmp_path / "counter.py"
    script.write_text(PROGRAM, encoding="utf-8")
    files = {}
    for name, extra in (("base", "0"), ("extra", "1")):
        files[name] = tmp_path / f"{name}.jsonl"
        env = {**os.environ, "EXTRA": extra}
        env.pop("OTEL_EXPORTER_OTLP_ENDPOINT", None)
        done = _cli("run", "--out", str(files[name]), str(script), env=env)
        assert done.returncode == 0, done.stderr
    base = tmp_path / "base.pb"
    assert _cli("baseline", "build", "--from", str(files["base"]), "--out", str(base), "--quiet").returncode == 0
    done = _cli("alert", "--baseline", str(base), "--from", str(files["extra"]), "--format", "json", "--quiet")
    assert done.returncode == 1, done.stderr
    alerts = [a for a in json.loads(done.stdout)["alerts"] if a["reason"] != "latency_regression"]
    assert sorted(a["reason"] for a in alerts) == ["launch_count_change", "topology_drift"], alerts
    for alert in alerts:
        assert "12 of 12 steps" in alert["summary"], alert["summary"]
        evidence = [line for line in alert["evidence"] if line.startswith("#")]
        assert evidence == [f"#1 inserted __main__.fill dim=(32,) (from {script}:15 (<module>))"], evidence
