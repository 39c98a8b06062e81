"""Runs, steps and graph replays: the whole process on one time axis, chosen steps, what replays ran.

The race is a real Warp program (``tests/race_program.py``) run in a subprocess with the real exporter, and
analysed from its exported file. Graph capture needs CUDA, so on the CPU the capture is stood in for: the
launches of a real CPU program are marked captured into graph 7 (``captured=True``, ``graph_id=7``, the record
contract capture gives) and ``wp.capture_launch`` records are added to later steps; they then go through the
real span builder, OTLP JSON Lines encoder, reader and rebuild.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import warp as wp

import launchtrace
from launchtrace.analysis.dataflow import build_dataflow
from launchtrace.analysis.replays import captured_graphs, expand_replay, replay_counts, with_replay_counts
from launchtrace.analysis.runs import group_runs, merge_run, occurrences, representative, select, views
from launchtrace.analysis.stats import kernel_stats
from launchtrace.capture import bus
from launchtrace.cli import main
from launchtrace.errors import UserError
from launchtrace.export.config import ExportConfig
from launchtrace.export.spanbuilder import SpanBuilder
from launchtrace.model import LaunchRecord, Op
from launchtrace.otlp.json_codec import encode_line
from launchtrace.sources.loading import load_traces
from launchtrace.testing import trace_launches
from test_analysis_programs import DEVICE, N, Sim, add, scale, write_substep_file, write_trace_file

HERE = Path(__file__).parent


@pytest.fixture(scope="module")
def race_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The race program's exported file, from a run in which the two kernels really overlapped (read back
    from the file; the program makes that the rule, and a run where the machine kept them apart is redone)."""
    out = tmp_path_factory.mktemp("race") / "race.jsonl"
    for _ in range(3):
        subprocess.run([sys.executable, str(HERE / "race_program.py"), str(out)], check=True, timeout=300)
        spins = [r for t in load_traces(out) for r in t.records if r.kernel.endswith(".spin") and r.thread_name]
        a, b = [r for r in spins if r.thread_name in ("reader", "writer")]
        if a.start_ns < b.end_ns and b.start_ns < a.end_ns:
            return out
    pytest.fail("the reader's and the writer's kernels never overlapped in three runs")


def test_the_cross_thread_race_is_found_from_the_exported_file(race_file: Path, capsys) -> None:
    traces = load_traces(race_file)
    spins = {r.thread_name: (k, r) for k, t in enumerate(traces) for r in t.records if r.thread_name != "MainThread"}
    assert spins["reader"][0] != spins["writer"][0]  # the two threads' launches sit in different traces
    assert all(build_dataflow(t).hazards == () for t in traces)  # so one trace at a time sees no race
    assert main(["dataflow", str(race_file), "--fail-on-hazard"]) == 1
    out = capsys.readouterr().out
    (line,) = [x for x in out.splitlines() if "HAZARD" in x]
    assert "on s.x" in line and "thread reader" in line and "thread writer" in line and "ran at the same time" in line
    assert "race_program.py:48 (reader)" in line and "race_program.py:53 (writer)" in line  # both sites named
    assert main(["dataflow", str(race_file)]) == 0  # without --fail-on-hazard it is reported, not failed
    capsys.readouterr()
    assert main(["dataflow", str(race_file), "--format", "json", "--fail-on-hazard"]) == 1
    (flow,) = json.loads(capsys.readouterr().out)
    (hazard,) = flow["hazards"]
    assert hazard["buffer"] == "s.x" and {hazard["src_site"], hazard["dst_site"]} == {
        f"{HERE / 'race_program.py'}:48 (reader)",
        f"{HERE / 'race_program.py'}:53 (writer)",
    }


def test_a_run_is_one_process_and_merges_in_issue_order(race_file: Path, tmp_path: Path) -> None:
    other = write_trace_file(tmp_path / "other.jsonl", steps=2)
    traces = load_traces([race_file, other])
    runs = group_runs(traces)
    assert len(runs) == 2 and runs[0].pid != runs[1].pid
    merged = merge_run(runs[0].traces)
    assert len(merged.records) == sum(len(t.records) for t in runs[0].traces)
    assert [r.seq for r in merged.records] == sorted(r.seq for r in merged.records)
    assert len(views(traces)) == 2  # one whole-run view per process


def test_steps_are_chosen_by_scope_trace_and_occurrence(tmp_path: Path) -> None:
    traces = load_traces(write_trace_file(tmp_path / "t.jsonl", steps=5))
    steps = occurrences(traces, "step")
    assert [o.index for o in steps] == [0, 1, 2, 3, 4] and all(len(o.data.records) == 3 for o in steps)
    ranked = sorted(steps, key=lambda o: (o.duration_ns, o.start_ns))
    assert representative(traces) == ranked[2]  # the median duration among the five
    (slowest,) = select(traces, scope="step", occurrence="slowest")
    assert slowest.duration_ns == max(o.duration_ns for o in steps)
    (third,) = select(traces, occurrence=3)
    assert third.index == 3 and third.name == "step"
    tid = str(traces[1].attributes["trace_id"])
    (one,) = select(traces, trace=tid[:10])
    assert one.trace == 1
    with pytest.raises(UserError, match=r"no such scope .*seen: step"):
        select(traces, scope="nope")
    with pytest.raises(UserError, match="no such trace"):
        select(traces, trace="ffff")
    with pytest.raises(UserError, match="out of range"):
        select(traces, scope="step", occurrence=9)


def _replayed_run(path: Path) -> Path:
    """A setup step whose two launches are marked captured into graph 7, then two steps that each write
    ``sim.v`` (which the graph reads) and replay the graph once; written through the real exporter pieces."""
    sim = Sim()
    with trace_launches():
        sub = bus.subscribe(thread=threading.get_ident())
        with launchtrace.scope("setup"):
            wp.launch(scale, dim=N, inputs=[sim.x, 0.5], outputs=[sim.tmp], device=DEVICE)
            wp.launch(add, dim=N, inputs=[sim.tmp, sim.v], outputs=[sim.out], device=DEVICE)
        for _ in range(2):
            with launchtrace.scope("step"):
                wp.copy(sim.v, sim.alt)
        sub.close()
        events = sub.drain()
    out: list = []
    copies = 0
    for kind, item in events:
        item = dataclasses.replace(item, seq=item.seq * 10)  # room for the replays in the issue order
        if kind == "record" and item.op == Op.LAUNCH:
            item = dataclasses.replace(item, captured=True, graph_id=7)
        out.append((kind, item))
        if kind == "record" and item.op == Op.COPY:
            copies += 1
            replay = LaunchRecord(
                "graph_launch",
                "wp.capture_launch",
                (),
                None,
                (),
                (),
                item.site,
                device=item.device,
                thread=item.thread,
                thread_name=item.thread_name,
                start_ns=item.end_ns + 1000,
                end_ns=item.end_ns + 9000,
                scope_id=item.scope_id,
                graph_id=7,
                api="wp.capture_launch",
                seq=item.seq + 5,
            )
            out.append(("record", replay))
    assert copies == 2
    builder = SpanBuilder(ExportConfig.resolve(fold=False))
    spans = builder.feed(out) + builder.flush()
    path.write_text(encode_line(spans) + "\n", encoding="utf-8")
    return path


def test_replays_run_the_captured_launches_across_traces(tmp_path: Path, capsys) -> None:
    traces = load_traces(_replayed_run(tmp_path / "g.jsonl"))
    assert [o.name for o in occurrences(traces)] == ["setup", "step", "step"]  # capture and replays apart
    graphs = captured_graphs(traces)
    assert [r.kernel.rsplit(".", 1)[1] for r in graphs[7]] == ["scale", "add"]
    assert replay_counts(traces) == {7: 2}
    replay = next(r for t in traces for r in t.records if r.op == Op.GRAPH_LAUNCH)
    ran = expand_replay(replay, graphs)
    assert [r.kernel for r in ran] == [r.kernel for r in graphs[7]] and all(r.start_ns == replay.start_ns for r in ran)

    rows = {r.kernel.rsplit(".", 1)[-1]: r.count for r in with_replay_counts(kernel_stats(traces), traces)}
    assert rows["scale"] == 2 and rows["add"] == 2 and rows["capture_launch"] == 2  # 1 captured x 2 replays

    (view,) = views(traces)
    flow = build_dataflow(view.data, view.graphs)
    index = {id(r): i for i, r in enumerate(flow.records)}
    replays = [i for i, r in enumerate(flow.records) if r.op == Op.GRAPH_LAUNCH]
    copies = [i for i, r in enumerate(flow.records) if r.op == Op.COPY]
    modes = {a.region.label: a.mode for a in flow.accesses_of(replays[0])}
    assert modes["sim.v"] == "r" and modes["sim.out"] == "w" and modes["sim.tmp"] == "rw"
    raw = {(e.src, e.dst, e.buffer) for e in flow.edges if str(e.kind) == "RAW"}
    assert (copies[0], replays[0], "sim.v") in raw  # the replay depends on the copy before it
    assert not any(set(g) & {copies[0], replays[0]} == {copies[0], replays[0]} for g in flow.overlap_candidates())
    captured = [index[id(r)] for r in flow.records if r.captured]
    assert all(e.src not in captured or e.dst in captured for e in flow.edges)  # capture orders only itself

    # one replay step on its own: its graph comes from the run, though the capture is in another trace
    (step,) = views(traces, scope="step", occurrence=1)
    flow = build_dataflow(step.data, step.graphs)
    assert {a.region.label for a in flow.accesses if flow.records[a.record].op == Op.GRAPH_LAUNCH} >= {"sim.v"}
    assert main(["summary", str(tmp_path / "g.jsonl")]) == 0
    table = capsys.readouterr().out.split("\n\n")[0].splitlines()[3:]  # the per-kernel rows, under the header
    lines = {x.split()[0].rsplit(".", 1)[-1]: x.split() for x in table}
    assert lines["scale"][2] == "2" and lines["add"][2] == "2"


def test_records_rebuilt_from_a_summary_span_say_so(tmp_path: Path) -> None:
    """The same program exported with and without folding: only the folded file's records carry a Fold, whose
    count x period is the number of records it stands for and whose statistics are those recorded."""
    plain = [r for t in load_traces(write_substep_file(tmp_path / "p.jsonl", fold=False)) for r in t.records]
    folded = [r for t in load_traces(write_substep_file(tmp_path / "f.jsonl", fold=True)) for r in t.records]
    assert all(r.fold is None for r in plain) and len(plain) == len(folded) == 36
    by_span: dict[str, list] = {}
    for r in folded:
        if r.fold is not None:
            by_span.setdefault(r.fold.span_id, []).append(r)
    assert by_span
    for recs in by_span.values():
        fold = recs[0].fold
        assert len(recs) == fold.count * fold.period
        assert all(fold.start_ns <= r.start_ns and r.end_ns <= fold.end_ns for r in recs)
        for r in recs:
            assert 0 < r.fold.min_ns <= r.fold.mean_ns <= r.fold.max_ns and r.duration_ns == r.fold.mean_ns
