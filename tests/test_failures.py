"""Calls that raised, in ``summary`` and ``diff``: a real Warp program (CPU) run under ``launchtrace run`` whose
launch fails with a wrong dtype, caught by the program, and whose last step raises out of its timer."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from launchtrace.analysis.failures import FAILURES_KEPT, FailureTable
from launchtrace.cli import main
from launchtrace.model import TraceData
from launchtrace.sources.loading import load_traces

PROGRAM = textwrap.dedent(
    """
    import sys
    import warp as wp

    @wp.kernel
    def k(x: wp.array(dtype=float)):
        x[wp.tid()] += 1.0

    x = wp.zeros(64, dtype=float)
    bad = wp.zeros(64, dtype=int)
    every = int(sys.argv[1])
    for step in range(12):
        with wp.ScopedTimer("step", print=False):
            wp.launch(k, dim=64, inputs=[x])
            if step % every == 0:
                try:
                    wp.launch(k, dim=64, inputs=[bad])  # wrong dtype: raises before anything runs
                except RuntimeError:
                    pass
            if step == 11:
                raise ValueError("the last step failed")
    """
)


def _run(tmp_path: Path, every: int) -> Path:
    script, out = tmp_path / "prog.py", tmp_path / f"every{every}.jsonl"
    script.write_text(PROGRAM)
    proc = subprocess.run(
        [sys.executable, "-m", "launchtrace", "run", "--out", str(out), str(script), str(every)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 1 and "ValueError: the last step failed" in proc.stderr, proc.stderr
    raised = len(range(0, 12, every)) + 1  # the launches that raised, and the last step's timer
    assert proc.stderr.rstrip().endswith(f" dropped); {raised} calls or scopes raised (launchtrace summary lists them)")
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("failures")
    return _run(tmp, 4), _run(tmp, 1)


def test_summary_lists_the_calls_that_raised(runs, capsys) -> None:
    assert main(["summary", str(runs[0])]) == 0
    text = capsys.readouterr().out
    head = (
        "failed: 3 calls and 1 scope raised (a call that raised ran nothing on the device; the table above counts it)"
    )
    assert head in text, text
    lines = text.splitlines()
    rows = lines[lines.index(head) + 1 : lines.index(head) + 3]
    assert rows[0].startswith("       3 x launch __main__.k (from ")
    assert "prog.py:17 (<module>)): RuntimeError: " in rows[0]
    assert "expects an array with dtype" in rows[0]
    assert rows[1] == "       1 x scope step: ValueError: the last step failed"
    assert main(["summary", str(runs[0]), "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["failed_total"] == 4
    assert [(f["what"], f["count"]) for f in out["failed"]] == [("launch __main__.k", 3), ("scope step", 1)]


def test_a_program_with_no_failures_prints_no_failed_section(tmp_path: Path, capsys) -> None:
    from test_analysis_programs import write_trace_file

    assert main(["summary", str(write_trace_file(tmp_path / "ok.jsonl"))]) == 0
    assert "failed:" not in capsys.readouterr().out


def test_diff_marks_an_inserted_launch_that_raised(runs, capsys) -> None:
    assert main(["diff", str(runs[0]), str(runs[1])]) == 1
    text = capsys.readouterr().out
    assert "inserted __main__.k dim=(64,) [raised RuntimeError] (from " in text, text


def test_the_table_keeps_a_bounded_number_of_kinds_and_counts_every_call(runs) -> None:
    failed = next(r for t in load_traces([runs[0]]) for r in t.records if r.error)
    records = [dataclasses.replace(failed, kernel=f"m.k{i}", error=f"RuntimeError: bad {i}\nmore") for i in range(500)]
    table = FailureTable()
    table.add(TraceData(records=records))
    rows = table.rows()
    assert len(rows) == FAILURES_KEPT and table.total == 500 and table.others == 500 - FAILURES_KEPT
    assert rows[0].error == "RuntimeError: bad 0"  # the first line only


def test_the_report_page_has_a_failed_calls_section(runs, tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    assert main(["report", str(runs[0]), "--out", str(page)]) == 0
    html = page.read_text()
    section = html[html.index('<section id="failed"') :]
    section = section[: section.index("</section>")]
    assert "4 call(s) raised" in section
    assert "<li>3 x launch __main__.k (from " in section and "<code>RuntimeError: Error launching kernel" in section
    assert "<li>1 x scope step: <code>ValueError: the last step failed</code></li>" in section
    nav = html[html.index("<nav>") : html.index("</nav>")]
    assert '<a href="#failed">failed calls</a>' in nav  # the section can be found from the top of the page


SAME_CALL = textwrap.dedent(
    """
    import sys
    import warp as wp

    @wp.kernel
    def k(x: wp.array(dtype=float)):
        x[wp.tid()] += 1.0

    y = wp.zeros(64, dtype=int if sys.argv[1] == "int" else float)  # one allocation site either way
    for step in range(6):
        with wp.ScopedTimer("step", print=False):
            try:
                wp.launch(k, dim=64, inputs=[y])
            except RuntimeError:
                pass
    """
)


def test_the_same_call_raising_on_one_side_only_is_a_change(tmp_path: Path, capsys) -> None:
    """The topology key has no dtypes, so an array of another dtype from the same allocation site gave an equal
    key: ``diff`` said ``topology: equal`` while every launch of B raised and ran nothing."""
    script = tmp_path / "same_call.py"
    script.write_text(SAME_CALL)
    files = {}
    for name, dtype in (("a", "float"), ("again", "float"), ("b", "int")):
        files[name] = tmp_path / f"{name}.jsonl"
        cmd = [sys.executable, "-m", "launchtrace", "run", "--out", str(files[name]), str(script), dtype]
        assert subprocess.run(cmd, capture_output=True, text=True, timeout=300).returncode == 0
    assert main(["diff", str(files["a"]), str(files["again"])]) == 0
    assert capsys.readouterr().out.startswith("topology: equal")
    assert main(["diff", str(files["a"]), str(files["b"])]) == 1
    text = capsys.readouterr().out
    assert text.startswith("topology: differs (0 inserted, 0 removed, 7 changed)"), text  # and the wp.zeros fill
    assert "__main__.k (from " in text and "): dtype x float32 -> int32, raised no -> RuntimeError" in text
