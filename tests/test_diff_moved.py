"""Launches that swap places in a step: one ``moved`` entry per call, not an insertion and a removal (issue 25).

A moved launch is still a topology change (the launch order matters to a CUDA graph and to dataflow): ``diff``
exits 1 and says ``1 moved``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path

import warp as wp

import launchtrace
from launchtrace.analysis.diff import diff_traces
from launchtrace.analysis.static import Reason, check_static
from launchtrace.capture import bus
from launchtrace.cli import main
from launchtrace.export.config import ExportConfig
from launchtrace.export.spanbuilder import SpanBuilder
from launchtrace.model import TraceData
from launchtrace.otlp.json_codec import encode_line
from launchtrace.render.diff_text import diff_as_json, diff_as_markdown, diff_as_text
from launchtrace.render.snapshot_text import mismatch_lines
from launchtrace.testing import trace_launches
from launchtrace.topology import ChangeKind, diff_records, format_entry
from test_analysis_programs import DEVICE, N, Sim, add, scale

STEPS = 3


def _trace(body: Callable[[Sim], None], steps: int = STEPS) -> TraceData:
    sim = Sim()
    with trace_launches() as trace:
        for _ in range(steps):
            with launchtrace.scope("step"):
                body(sim)
    return trace.to_data()


def _write(path: Path, body: Callable[[Sim], None], steps: int = STEPS) -> Path:
    """The program's spans as OTLP JSON Lines, as the file sink writes them (``write_trace_file``'s way)."""
    sim = Sim()
    with trace_launches():
        sub = bus.subscribe(thread=threading.get_ident())
        for _ in range(steps):
            with launchtrace.scope("step"):
                body(sim)
        sub.close()
        events = sub.drain()
    builder = SpanBuilder(ExportConfig.resolve(fold=False))
    path.write_text(encode_line(builder.feed(events) + builder.flush()) + "\n", encoding="utf-8")
    return path


def _scale_then_add(sim: Sim) -> None:
    wp.launch(scale, dim=N, inputs=[sim.x, 0.5], outputs=[sim.tmp], device=DEVICE)
    wp.launch(add, dim=N, inputs=[sim.tmp, sim.v], outputs=[sim.out], device=DEVICE)
    wp.copy(sim.x, sim.out)


def _add_then_scale(sim: Sim) -> None:
    wp.launch(add, dim=N, inputs=[sim.tmp, sim.v], outputs=[sim.out], device=DEVICE)
    wp.launch(scale, dim=N, inputs=[sim.x, 0.5], outputs=[sim.tmp], device=DEVICE)
    wp.copy(sim.x, sim.out)


def _adds(sim: Sim) -> None:
    for _ in range(2):  # two identical calls
        wp.launch(add, dim=N, inputs=[sim.tmp, sim.v], outputs=[sim.out], device=DEVICE)


def _scales(sim: Sim, factor: float = 0.5) -> None:
    for s in (factor, 2.0, 3.0):
        wp.launch(scale, dim=N, inputs=[sim.x, s], outputs=[sim.tmp], device=DEVICE)


def test_two_swapped_launches_are_one_moved_entry_per_step() -> None:
    result = diff_traces(_trace(_scale_then_add), _trace(_add_then_scale))
    assert not result.equal
    assert result.counts == {"inserted": 0, "removed": 0, "changed": 0, "moved": STEPS}
    entries = [e for seg in result.segments for e in seg.entries]
    assert len(entries) == STEPS
    for e in entries:
        assert e.kind == ChangeKind.MOVED and e.fields == ()
        assert e.record_a.kernel == e.record_b.kernel and e.record.kernel.endswith(".add")
        assert (e.index_a, e.index_b) == (1, 0) and e.record is e.record_b
    text = diff_as_text(result)
    assert text.splitlines()[0] == f"topology: differs (0 inserted, 0 removed, 0 changed, {STEPS} moved)"
    assert "inserted test" not in text and "removed test" not in text
    line = next(x for x in text.splitlines() if " moved " in x)
    assert line.startswith("  #1->#0 moved test_analysis_programs.add dim=(64,) (from ")
    data = json.loads(json.dumps(diff_as_json(result)))
    assert data["counts"] == {"inserted": 0, "removed": 0, "changed": 0, "moved": STEPS}
    first = data["segments"][0]["entries"]
    assert [(x["kind"], x["index_a"], x["index_b"], x["fields"]) for x in first] == [("moved", 1, 0, [])]
    md = diff_as_markdown(result)
    assert f"{STEPS} moved)" in md and "| moved | 1->0 |" in md and "position 1 -> 0" in md


def test_the_cli_gate_fails_on_a_moved_launch(tmp_path: Path, capsys) -> None:
    a = _write(tmp_path / "a.jsonl", _scale_then_add)
    b = _write(tmp_path / "b.jsonl", _add_then_scale)
    assert main(["diff", str(a), str(b)]) == 1
    out = capsys.readouterr().out
    assert f"topology: differs (0 inserted, 0 removed, 0 changed, {STEPS} moved)" in out
    assert main(["diff", str(a), str(b), "--format", "json"]) == 1
    assert json.loads(capsys.readouterr().out)["counts"]["moved"] == STEPS
    assert main(["diff", str(a), str(_write(tmp_path / "c.jsonl", _scale_then_add))]) == 0


def test_several_identical_moved_calls_pair_up_in_order() -> None:
    before = _trace(lambda sim: (_adds(sim), _scales(sim)))
    after = _trace(lambda sim: (_scales(sim), _adds(sim)))
    result = diff_traces(before, after)
    assert result.counts == {"inserted": 0, "removed": 0, "changed": 0, "moved": 2 * STEPS}
    for seg in result.segments:
        assert [(e.kind, e.index_a, e.index_b) for e in seg.entries] == [
            (ChangeKind.MOVED, 0, 3),
            (ChangeKind.MOVED, 1, 4),
        ]
    text = diff_as_text(result)
    assert f"scope step {STEPS} occurrences #0-#2: 5 -> 5 records" in text
    assert "  #0->#3, #1->#4 moved test_analysis_programs.add dim=(64,) (from " in text


def test_only_the_same_call_moves() -> None:
    """A launch gone from one place and another (other scalars) at another: still a removal and an insertion."""
    before = _trace(lambda sim: (_adds(sim), _scales(sim)))
    after = _trace(lambda sim: (_scales(sim, 0.25), _adds(sim), _adds(sim)))
    seg = diff_traces(before, after).segments[0]
    assert [(str(e.kind), e.index_a, e.index_b, e.record.kernel.rpartition(".")[2]) for e in seg.entries] == [
        ("inserted", None, 0, "scale"),  # factor 0.25: not the removed call (factor 0.5)
        ("removed", 2, None, "scale"),
        ("moved", 3, 1, "scale"),
        ("moved", 4, 2, "scale"),
        ("inserted", None, 5, "add"),
        ("inserted", None, 6, "add"),
    ]
    x = before.records[:5]  # add, add, scale 0.5, scale 2.0, scale 3.0
    swapped = diff_records([x[0], x[2]], [x[3], x[0]])  # a scale gone before the add, another after it
    assert [(str(e.kind), e.index_a, e.index_b) for e in swapped] == [("inserted", None, 0), ("removed", 1, None)]
    assert [format_entry(e).split(" ")[1] for e in swapped] == ["inserted", "removed"]


def test_check_static_names_a_launch_whose_order_varies_once() -> None:
    """Occurrences of a step that launch the same calls in another order are not static (a CUDA graph captured
    from one would replay the wrong order): one ``moved`` finding, not an insertion and a removal."""
    k = iter(range(10))
    report = check_static(_trace(lambda sim: (_add_then_scale if next(k) == 1 else _scale_then_add)(sim)), "step")
    assert not report.static
    assert [(f.reason, f.example) for f in report.findings] == [
        (Reason.LAUNCHES, "moved test_analysis_programs.add #1->#0")
    ]


def test_a_snapshot_mismatch_says_moved() -> None:
    a, b = _trace(_scale_then_add, 1).records, _trace(_add_then_scale, 1).records
    lines = mismatch_lines(diff_records(a, b), name="step", count_a=len(a), count_b=len(b), limit=10)
    assert lines[0] == "3 launches in the snapshot, 3 now (0 inserted, 0 removed, 0 changed, 1 moved)"
    assert lines[1].startswith("  #1->#0 moved test_analysis_programs.add dim=(64,) (from ")


def test_a_reversed_step_moves_two_calls_around_the_one_kept() -> None:
    r = _trace(_scale_then_add, 1).records  # scale, add, copy
    entries = diff_records(r, r[::-1])
    assert [(str(e.kind), e.index_a, e.index_b) for e in entries] == [("moved", 1, 1), ("moved", 2, 0)]
    assert format_entry(entries[0]).startswith("#1 moved test_analysis_programs.add dim=(64,) (from ")
