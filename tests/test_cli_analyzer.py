"""The analyzer commands end to end, on trace files written from real Warp programs (CPU)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from launchtrace.cli import main
from launchtrace.cli._analyzer import safe_child, safe_name
from test_analysis_programs import Sim, write_trace_file


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("traces")
    sim = Sim()
    out = {v: write_trace_file(folder / f"{v}.jsonl", v, 3, sim) for v in ("base", "insert", "scalar")}
    out["again"] = write_trace_file(folder / "again.jsonl", "base", 3, sim)
    return out


def test_diff_exits_0_when_equal_and_1_when_topology_differs(files, capsys) -> None:
    assert main(["diff", str(files["base"]), str(files["again"])]) == 0
    assert capsys.readouterr().out.startswith("topology: equal")
    assert main(["diff", str(files["base"]), str(files["insert"])]) == 1
    out = capsys.readouterr().out
    assert out.startswith("topology: differs (3 inserted, 0 removed, 0 changed)")
    assert out.count(" inserted ") == 1  # the same insertion in each of the 3 steps, printed once
    assert "scope step 3 occurrences #0-#2: 3 -> 4 records" in out


def test_diff_json_and_markdown(files, capsys) -> None:
    assert main(["diff", str(files["base"]), str(files["scalar"]), "--format", "json"]) == 1
    data = json.loads(capsys.readouterr().out)
    fields = [f for s in data["segments"] for e in s["entries"] for f in e["fields"]]
    assert fields == [{"field": "scalar", "name": "s", "before": 0.5, "after": 0.25}] * 3
    args = ["diff", str(files["base"]), str(files["scalar"]), "--ignore-scalars", "--format", "markdown"]
    assert main(args) == 0
    assert capsys.readouterr().out.startswith("### launchtrace diff: topology: equal")


def test_check_static(files, tmp_path, capsys) -> None:
    assert main(["check-static", str(files["base"]), "--scope", "step"]) == 0
    assert "3 occurrences, static" in capsys.readouterr().out
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    shutil.copy(files["base"], mixed / "1.jsonl")
    shutil.copy(files["scalar"], mixed / "2.jsonl")
    assert main(["check-static", str(mixed), "--scope", "step"]) == 1
    out = capsys.readouterr().out
    assert "6 occurrences, NOT static" in out and "varying scalars: #0" in out and " s: 0.5 -> 0.25" in out
    assert main(["check-static", str(files["base"]), "--scope", "nope"]) == 2
    assert "scope 'nope' not found" in capsys.readouterr().err


def test_dataflow_and_summary(files, capsys) -> None:
    assert main(["dataflow", str(files["base"]), "--format", "json"]) == 0
    (whole,) = json.loads(capsys.readouterr().out)  # the whole run (one process) by default
    assert len(whole["records"]) == 9 and (2, 3, "RAW", "sim.x") in {
        (e["src"], e["dst"], e["kind"], e["buffer"]) for e in whole["edges"]
    }  # the copy into sim.x orders the next step's scale
    assert main(["dataflow", str(files["base"]), "--format", "json", "--scope", "step"]) == 0
    flows = json.loads(capsys.readouterr().out)
    assert len(flows) == 3 and flows[1]["view"].endswith("step #1")  # one per step occurrence
    assert {(e["src"], e["dst"], e["kind"], e["buffer"]) for e in flows[0]["edges"]} == {
        (0, 1, "RAW", "sim.tmp"),
        (1, 2, "RAW", "sim.out"),
        (0, 2, "WAR", "sim.x"),
    }
    assert main(["summary", str(files["base"])]) == 0
    out = capsys.readouterr().out
    assert "3 traces, 9 records" in out and "wp.copy" in out and "time per scope" in out


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz 'dot' not installed (CI installs it)")
def test_graph_writes_dot_svg_png(files, tmp_path, capsys) -> None:
    out = tmp_path / "g"
    assert main(["graph", str(files["base"]), "--out", str(out), "--hide-readonly"]) == 0
    written = sorted(p.suffix for p in out.iterdir())
    assert written == [".dot", ".png", ".svg"]  # three identical steps: one picture
    assert all(p.parent == out for p in out.iterdir())
    assert "step: 3 occurrences with this topology" in next(out.glob("*.dot")).read_text()
    capsys.readouterr()
    chosen = tmp_path / "chosen"
    args = ["graph", str(files["base"]), "--out", str(chosen), "--formats", "", "--scope", "step", "--occurrence"]
    assert main([*args, "slowest"]) == 0
    (dot,) = chosen.glob("*.dot")
    assert "step #" in dot.read_text()
    png = next(out.glob("*.png")).read_bytes()
    assert png.startswith(b"\x89PNG")
    capsys.readouterr()
    assert main(["graph", "--diff", str(files["base"]), str(files["insert"]), "--out", str(out / "d")]) == 0
    dots = sorted((out / "d").glob("*.dot"))
    assert len(dots) == 3 and all("#b7e4a8" in p.read_text() for p in dots)  # the inserted launch, in green


def test_report_and_chrome_trace(files, tmp_path, capsys) -> None:
    page = tmp_path / "r.html"
    assert main(["report", str(files["insert"]), "--baseline", str(files["base"]), "--out", str(page)]) == 0
    html = page.read_text()
    assert "topology: differs (3 inserted" in html and "launchtrace-data" in html
    out = tmp_path / "c.json"
    assert main(["chrome-trace", str(files["base"]), "--out", str(out)]) == 0
    events = json.loads(out.read_text())["traceEvents"]
    assert sum(1 for e in events if e["ph"] == "X" and e["cat"] != "scope") == 9


def test_bad_input_is_one_line_and_exit_2(tmp_path) -> None:
    missing = tmp_path / "missing.jsonl"
    proc = subprocess.run(
        [sys.executable, "-m", "launchtrace", "diff", str(missing), str(missing)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"launchtrace diff: error: {missing}: no such file"
    garbage = tmp_path / "garbage.jsonl"
    garbage.write_text("this is not a trace\n")
    proc = subprocess.run(
        [sys.executable, "-m", "launchtrace", "summary", str(garbage)], capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and str(garbage) in proc.stderr


def test_names_from_traces_cannot_escape_the_output_folder(tmp_path) -> None:
    assert safe_name("../../etc/passwd") == "etc_passwd"
    assert safe_name("..") == "trace" and safe_name("") == "trace"
    assert safe_child(tmp_path, "../x/../../y.dot").parent == tmp_path.resolve()  # slashes never survive


def test_graph_without_graphviz_still_writes_dot(files, tmp_path) -> None:
    """A real subprocess whose PATH holds no ``dot``: DOT text only, a warning, exit 0."""
    out = tmp_path / "nodot"
    env = {"PATH": str(Path(sys.executable).parent), "HOME": str(Path.home())}
    env.update({k: v for k, v in os.environ.items() if k == "PYTHONPATH"})  # the launchtrace under test
    proc = subprocess.run(
        [sys.executable, "-m", "launchtrace", "graph", str(files["base"]), "--out", str(out)],
        capture_output=True, text=True, timeout=120, check=False, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.suffix for p in out.iterdir()) == [".dot"]  # one picture per distinct step topology
    assert "Graphviz 'dot' is not installed" in proc.stderr


def test_choosing_what_to_look_at_rejects_what_matches_nothing(files, tmp_path, capsys) -> None:
    base = str(files["base"])
    for argv in (["--trace", "ffff"], ["--scope", "nope"], ["--scope", "step", "--occurrence", "7"]):
        assert main(["dataflow", base, *argv]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and ("no such" in err or "out of range" in err), err
    with pytest.raises(SystemExit) as exc:
        main(["dataflow", base, "--occurrence", "-1"])
    assert exc.value.code == 2 and "expected a number >= 0" in capsys.readouterr().err
    out = tmp_path / "chosen.json"
    assert main(["chrome-trace", base, "--out", str(out), "--scope", "step", "--occurrence", "1"]) == 0
    events = json.loads(out.read_text())["traceEvents"]
    assert sum(1 for e in events if e["ph"] == "X" and e["cat"] != "scope") == 3  # one step's three records


def test_diff_takes_several_runs_per_side(files, capsys) -> None:
    argv = ["diff", str(files["base"]), str(files["again"]), "--against", str(files["scalar"]), str(files["base"])]
    assert main([*argv, "--format", "json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert (data["runs_a"], data["runs_b"]) == (2, 2)  # one run per file here (no process ids in them)
    changed = {(s["run"], s["occurrence"]) for s in data["segments"] if s["entries"]}
    assert changed == {(0, 0), (0, 1), (0, 2)}  # run 1 of A against run 1 of B (scalar); run 2 equal
    # 2 runs a side are under --min-runs (3): never the run-level test; 3 steps a run, so few or pooled
    assert {t["basis"] for t in data["timing"]} <= {"insufficient", "steps-one-run"}
    assert all(t["n_runs_a"] == 2 for t in data["timing"] if t["basis"] != "insufficient")
    assert main(argv) == 1
    assert "timing: per-step totals of 2 runs (A) against 2 runs (B)" in capsys.readouterr().out
    assert main(["diff", str(files["base"]), str(files["again"]), str(files["scalar"])]) == 2
    assert "give A and B, or A1 A2 ... --against B1 B2 ..." in capsys.readouterr().err
