"""``report`` and ``chrome-trace`` on inputs past their caps: read one trace at a time, the exact totals of the
whole input kept, what was left out said, and the sample the docs promise (issue 25, size).

Real files written by the exporter's span builder from real Warp launches on the CPU, read by the real
commands; the truth the assertions compare with is computed independently from the file's spans.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from launchtrace.cli import main
from launchtrace.sources.files import read_spans
from test_analysis_programs import write_trace_file

STEPS = 40


@pytest.fixture(scope="module")
def trace_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_trace_file(tmp_path_factory.mktemp("scale") / "run.jsonl", steps=STEPS)


def _roots(path: Path) -> list:
    return [s for s in read_spans(path).spans if s.parent_span_id is None]


def test_chrome_trace_past_its_cap_keeps_a_sample_and_the_exact_totals(trace_file: Path, tmp_path: Path) -> None:
    spans = read_spans(trace_file).spans
    roots = _roots(trace_file)
    assert len(roots) == STEPS and {r.name for r in roots} == {"step"}
    out = tmp_path / "c.json"
    assert main(["chrome-trace", str(trace_file), "--out", str(out), "--max-events", "25"]) == 0
    data = json.loads(out.read_text(encoding="utf-8"))  # valid JSON, to the end
    info = data["otherData"]["launchtrace"]
    assert info["complete"] is False and info["max_events"] == 25
    totals = info["totals"]
    assert totals["spans"] == len(spans) and totals["traces"] == STEPS
    durations = [r.end_ns - r.start_ns for r in roots]
    assert totals["steps"]["step"] == {
        "count": STEPS,
        "total_ns": sum(durations),
        "min_ns": min(durations),
        "max_ns": max(durations),
    }
    scopes = [e for e in data["traceEvents"] if e["ph"] == "X" and e["name"] == "step"]
    full = [e for e in scopes if "launchtrace.sample" not in e["args"]]
    sampled = [e for e in scopes if "launchtrace.sample" in e["args"]]
    # traces in full: whole traces, in the order they ran, within the cap
    assert 0 < info["events_in_full"] <= 25
    assert [e["ts"] for e in full] == sorted(r.start_ns / 1000.0 for r in roots)[: len(full)]
    shown = {e["ts"] for e in scopes}
    left = [r for r in roots if r.start_ns / 1000.0 not in shown]
    assert info["left_out"]["traces"] == len(left) == STEPS - len(full) - len(sampled)
    assert info["left_out"]["spans"] == len(spans) - sum(
        1 for s in spans if any(s.start_ns >= r.start_ns and s.end_ns <= r.end_ns for r in roots if r not in left)
    )
    # the sample: the slowest left-out step, in full, marked as such
    slowest = max(roots, key=lambda r: r.end_ns - r.start_ns if r in left or r.start_ns / 1000.0 in
                  {e["ts"] for e in sampled} else -1)  # fmt: skip
    assert len(sampled) == 1 and sampled[0]["ts"] == slowest.start_ns / 1000.0
    assert sampled[0]["args"]["launchtrace.sample"].startswith("slowest left-out occurrence of step")
    assert info["samples"]["slowest_left_out"] == [
        {"step": "step", "start_ns": slowest.start_ns, "duration_ns": slowest.end_ns - slowest.start_ns}
    ]
    records = [e for e in data["traceEvents"] if e["ph"] == "X" and e["cat"] != "scope"]  # 3 launches a step
    assert len(records) == 3 * (len(full) + len(sampled))  # every launch of the traces shown, none invented
    marker = [e for e in data["traceEvents"] if e["ph"] == "i"]
    assert len(marker) == 1 and f"{len(left):,} traces" in marker[0]["name"] and marker[0]["s"] == "g"


def test_chrome_trace_under_its_cap_is_complete(trace_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "c.json"
    assert main(["chrome-trace", str(trace_file), "--out", str(out)]) == 0
    data = json.loads(out.read_text(encoding="utf-8"))
    info = data["otherData"]["launchtrace"]
    assert info["complete"] is True and info["left_out"] == {"traces": 0, "spans": 0, "device_operations": 0}
    events = [e for e in data["traceEvents"] if e["ph"] == "X"]
    assert len(events) == info["events_in_full"] - sum(1 for e in data["traceEvents"] if e["ph"] == "M")
    assert len(events) == 4 * STEPS + 1 and not any(e["ph"] == "i" for e in data["traceEvents"])


def test_chrome_trace_refuses_a_cap_below_one(trace_file: Path, tmp_path: Path, capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["chrome-trace", str(trace_file), "--out", str(tmp_path / "c.json"), "--max-events", "0"])
    assert exc.value.code == 2 and "expected a number >= 1" in capsys.readouterr().err
    assert not (tmp_path / "c.json").exists()
