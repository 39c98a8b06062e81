"""The one run/step rule (:mod:`launchtrace.steps`): every command numbers the steps of one file the same way.

The programs are real Warp programs on the CPU, written through the exporter's span builder and encoder and read
back, as the commands read them (traces written latest first, as a collector may hand them on).
"""

from __future__ import annotations

import dataclasses
import json
import threading
from pathlib import Path

import numpy as np
import pytest
import warp as wp

import launchtrace
from launchtrace import conventions as C
from launchtrace.analysis.fleet.fast import read_step
from launchtrace.analysis.fleet.occurrences import occurrences_of
from launchtrace.analysis.overview import overview
from launchtrace.analysis.runs import group_runs, occurrences
from launchtrace.analysis.segments import segments
from launchtrace.capture import bus
from launchtrace.cli import main
from launchtrace.export.config import ExportConfig
from launchtrace.export.spanbuilder import SpanBuilder
from launchtrace.model import LaunchRecord, ScopeRecord, Site, TraceData
from launchtrace.otlp.json_codec import encode_line
from launchtrace.sources.files import read_spans
from launchtrace.sources.loading import load_traces
from launchtrace.sources.rebuild import rebuild
from launchtrace.steps import NO_SCOPE, default_scope, infer_steps, run_key, split_runs
from launchtrace.steps import occurrences as rule_occurrences
from launchtrace.testing import trace_launches
from test_analysis_programs import DEVICE, N, Sim, add, scale


def _write(path: Path, program, *, reverse: bool = True, fold: object = False) -> Path:
    """Run ``program(sim)`` under capture and write its spans as OTLP JSON Lines, traces in reverse order
    (``fold``: the exporter's fold mode)."""
    sim = Sim()
    with trace_launches():
        sub = bus.subscribe(thread=threading.get_ident())
        program(sim)
        sub.close()
        events = sub.drain()
    builder = SpanBuilder(ExportConfig.resolve(fold=fold))
    spans = builder.feed(events) + builder.flush()
    by_trace: dict[bytes, list] = {}
    for span in spans:
        by_trace.setdefault(span.trace_id, []).append(span)
    groups = list(by_trace.values())
    if reverse:
        groups.reverse()
    path.write_text("".join(encode_line(g) + "\n" for g in groups), encoding="utf-8")
    return path


def _stepped(sim: Sim) -> None:
    """Unscoped setup, five ``step`` scopes (the third one longer), unscoped readback."""
    wp.launch(scale, dim=N, inputs=[sim.v, 1.0], outputs=[sim.alt], device=DEVICE)
    for k in range(5):
        with launchtrace.scope("step"):
            for _ in range(3 if k == 2 else 1):
                wp.launch(scale, dim=N, inputs=[sim.x, 0.5], outputs=[sim.tmp], device=DEVICE)
            wp.launch(add, dim=N, inputs=[sim.tmp, sim.v], outputs=[sim.out], device=DEVICE)
    wp.copy(sim.x, sim.out)


def _zero_code(sim: Sim) -> None:
    """No launchtrace call and no enclosing scope: two timers, again and again."""
    for _ in range(4):
        with wp.ScopedTimer("simulate", print=False):
            wp.launch(scale, dim=N, inputs=[sim.x, 0.5], outputs=[sim.tmp], device=DEVICE)
            wp.launch(add, dim=N, inputs=[sim.tmp, sim.v], outputs=[sim.out], device=DEVICE)
        with wp.ScopedTimer("render", print=False):
            wp.copy(sim.x, sim.out)


def _seqs(records) -> tuple[int, ...]:
    return tuple(r.seq for r in records)


def test_diff_report_and_fleet_number_one_file_the_same_way(tmp_path: Path, capsys) -> None:
    traces = load_traces(_write(tmp_path / "t.jsonl", _stepped))
    assert len(split_runs(traces)) == 1 and len(group_runs(traces)) == 1
    report = {(o.name, o.index): _seqs(o.records) for o in overview(traces).steps}
    diff = {(s.name, s.occurrence): _seqs(s.records) for s in segments(traces)}
    assert sorted(report) == [(NO_SCOPE, 0)] + [("step", k) for k in range(5)]  # setup and readback: one trace
    assert diff == report
    steps = [o for o in overview(traces).steps if o.name == "step"]
    assert [o.start_ns for o in steps] == sorted(o.start_ns for o in steps)  # numbered by start, not file order
    assert [len(o.records) for o in steps] == [2, 2, 4, 2, 2]  # the longer one is step #2 everywhere
    backward = {(o.name, o.index): _seqs(o.records) for o in overview(traces[::-1]).steps}
    assert backward == report  # handed over in another order, the same numbers
    # the diff's segments, as its JSON output names them, are the report's steps
    capsys.readouterr()
    assert main(["diff", str(tmp_path / "t.jsonl"), str(tmp_path / "t.jsonl"), "--format", "json"]) == 0
    named = {(s["name"], s["occurrence"]) for s in json.loads(capsys.readouterr().out)["segments"]}
    assert named == set(report)
    # the fleet's steps: one per trace, named as the rule names them
    fleet = {(o.scope, _seqs(o.records)) for t in traces for o in occurrences_of(t, ())}
    assert fleet == {(name, seqs) for (name, _), seqs in report.items()}


def test_runs_are_told_apart_by_file_instance_and_process() -> None:
    a = TraceData(attributes={"source": "a.jsonl", "service.instance.id": "i1", "process.pid": 7})
    b = TraceData(attributes={"source": "a.jsonl", "service.instance.id": "i2", "process.pid": 7})
    c = TraceData(attributes={"source": "b.jsonl", "service.instance.id": "i1", "process.pid": 7})
    d = TraceData(attributes={"source": "a.jsonl", "host.name": "h", "process.pid": 7})
    e = TraceData(attributes={"source": "a.jsonl", "host.name": "h", "process.pid": 8})
    assert len({run_key(t) for t in (a, b, c, d, e)}) == 5
    assert split_runs([a, d, a, e]) == [[a, a], [d], [e]]
    assert [len(r.traces) for r in group_runs([a, d, a, e])] == [2, 1, 1]


def test_internal_scopes_are_never_steps() -> None:
    """Warp's own timers ("Module X load") hold records but are not steps: their records are unscoped."""
    rec = LaunchRecord("launch", "m.k", (4,), None, (), (), Site("p.py", 1, "f"), scope_id=1, start_ns=5, end_ns=9)
    trace = TraceData([rec], {1: ScopeRecord(1, "Module m load", "timer", internal=True, start_ns=1, end_ns=10)})
    (occ,) = rule_occurrences([trace])
    assert (occ.name, occ.index, occ.scope_id, occ.start_ns, occ.end_ns) == (NO_SCOPE, 0, None, 5, 9)


def test_zero_code_timers_repeating_are_inferred_as_steps(tmp_path: Path, capsys) -> None:
    path = _write(tmp_path / "z.jsonl", _zero_code)
    traces = load_traces(path)
    assert len(traces) == 8  # each timer its own trace
    inferred = infer_steps(occurrences(traces))
    assert inferred is not None and inferred.unit == ("simulate", "render") and len(inferred.steps) == 4
    assert [[o.index for o in s] for s in inferred.steps] == [[k, k] for k in range(4)]
    assert "steps inferred" in inferred.how and "repeat 4 times" in inferred.how
    capsys.readouterr()
    assert main(["summary", str(path), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["inferred_steps"] == [{"unit": ["simulate", "render"], "steps": 4, "how": inferred.how}]
    assert {k["kernel"].rpartition(".")[2]: k["steps"] for k in data["kernels"]} == {"scale": 4, "add": 4, "copy": 4}
    assert main(["summary", str(path)]) == 0
    assert inferred.how in capsys.readouterr().out
    ov = overview(traces)  # the report counts the repetitions as steps
    assert ov.inferred == inferred.how and [(o.name, o.index) for o in ov.steps] == [
        ("simulate+render", k) for k in range(4)
    ]
    assert all(len(o.records) == 3 and len(o.data.scopes) == 2 for o in ov.steps)
    assert ov.representative is not None and ov.representative.name == "simulate+render"
    page = tmp_path / "r.html"
    assert main(["report", str(path), "--out", str(page)]) == 0
    html = page.read_text(encoding="utf-8")
    assert "steps inferred: no enclosing scope" in html and "simulate+render #" in html
    assert main(["check-static", str(path)]) == 0
    out = capsys.readouterr().out
    assert "no --scope given: checking the inferred step 'simulate+render'" in out and "4 occurrences" in out
    # a program with an enclosing scope infers nothing, and check-static picks that scope
    stepped = load_traces(_write(tmp_path / "s.jsonl", _stepped))
    assert infer_steps(occurrences(stepped)) is None
    assert default_scope(occurrences(stepped))[0] == "step"
    assert main(["check-static", str(tmp_path / "s.jsonl")]) == 1  # step #2 launches more
    assert "checking 'step', the outermost repeating scope (5 occurrences)" in capsys.readouterr().out


@pytest.mark.parametrize("root", ["timer", "internal", "none"])
def test_the_fleet_fast_path_names_a_step_as_the_rule_does(tmp_path: Path, root: str) -> None:
    """A plain step that the fast path reads from spans alone falls in the step the rule gives its rebuilt
    trace: a named root scope, an internal one (not a step: its records are unscoped), or none."""

    def program(sim: Sim) -> None:
        if root == "none":
            wp.launch(scale, dim=N, inputs=[sim.x, 0.5], outputs=[sim.tmp], device=DEVICE)
            return
        with wp.ScopedTimer("phase", print=False):
            wp.launch(scale, dim=N, inputs=[sim.x, 0.5], outputs=[sim.tmp], device=DEVICE)
            wp.launch(add, dim=N, inputs=[sim.tmp, sim.v], outputs=[sim.out], device=DEVICE)

    spans = read_spans(_write(tmp_path / "f.jsonl", program, reverse=False)).spans
    if root == "internal":  # as Warp's own timers are exported with LAUNCHTRACE_INTERNAL on
        spans = [
            dataclasses.replace(s, attributes=(*s.attributes, (C.SCOPE_INTERNAL, True)))
            if s.parent_span_id is None
            else s
            for s in spans
        ]
    (trace,) = rebuild(spans).traces.values()
    (rule,) = [o for o in rule_occurrences([trace]) if o.records]
    assert rule.name == ("phase" if root == "timer" else NO_SCOPE)
    step = read_step(spans)
    assert step is not None and step.scope == rule.name
    (fleet,) = occurrences_of(trace, ())
    assert fleet.scope == rule.name and len(fleet.records) == len(rule.records)


@pytest.mark.parametrize("root", ["timer", "internal"])
def test_the_fleet_fast_path_gives_the_rules_steps(tmp_path: Path, root: str) -> None:
    """The baseline built through the fast path (:mod:`launchtrace.analysis.fleet.fast`) equals the
    straightforward one, which cuts steps by the rule, and its steps are the rule's."""
    from launchtrace.sources.stream import TraceStream
    from test_fleet_fast import build, read_baseline_bytes

    def program(sim: Sim) -> None:
        for _ in range(12):
            with wp.ScopedTimer("phase", print=False):
                wp.launch(scale, dim=N, inputs=[sim.x, 0.5], outputs=[sim.tmp], device=DEVICE)
                wp.launch(add, dim=N, inputs=[sim.tmp, sim.v], outputs=[sim.out], device=DEVICE)

    file = _write(tmp_path / "f.jsonl", program, reverse=False)
    if root == "internal":
        spans = [
            dataclasses.replace(s, attributes=(*s.attributes, (C.SCOPE_INTERNAL, True)))
            if s.parent_span_id is None
            else s
            for s in read_spans(file).spans
        ]
        file.write_text(encode_line(spans) + "\n", encoding="utf-8")
    fast, builder = build(TraceStream.from_paths([file]), fast=True)
    slow, _ = build(TraceStream.from_paths([file]), fast=False)
    assert fast == slow and builder.fast_counts()[0] > 0
    expected = {o.name for t in load_traces(file) for o in rule_occurrences(t) if o.records}
    assert expected == {"phase" if root == "timer" else NO_SCOPE}
    ((group),) = read_baseline_bytes(fast).groups
    assert {s.name for s in group.scopes} == expected and sum(s.steps for s in group.scopes) == 12


def test_numbers_do_not_depend_on_trace_order() -> None:
    """The same steps handed over in another trace order get the same numbers."""
    scopes = {k: ScopeRecord(k, "step", "user", start_ns=100 * k, end_ns=100 * k + 50) for k in range(1, 5)}
    traces = [TraceData([], {k: s}, {}) for k, s in scopes.items()]
    forward = [(o.name, o.index, o.start_ns) for o in rule_occurrences(traces)]
    backward = [(o.name, o.index, o.start_ns) for o in rule_occurrences(traces[::-1])]
    assert forward == backward == [("step", k, 100 * (k + 1)) for k in range(4)]
    assert np.all(np.diff([o.start_ns for o in rule_occurrences(traces[::-1])]) > 0)


TWO_THREADS = """
import sys
import threading
import warp as wp
wp.config.quiet = True

@wp.kernel
def k(a: wp.array(dtype=float)):
    i = wp.tid()
    a[i] = a[i] + 1.0

pattern = sys.argv[1]  # which thread takes each turn: "abab..." or "aabb..."
turns = {name: threading.Semaphore(0) for name in "ab"}

def work(name):
    a = wp.zeros(8, dtype=float)
    for _ in range(pattern.count(name)):
        turns[name].acquire()
        with wp.ScopedTimer(name + ".step", print=False):
            wp.launch(k, dim=8, inputs=[a])
        done.release()

done = threading.Semaphore(0)
wp.load_module(device="cpu")
threads = [threading.Thread(target=work, args=(n,)) for n in "ab"]
for t in threads:
    t.start()
for name in pattern:  # the scheduler's part, made explicit
    turns[name].release()
    done.acquire()
for t in threads:
    t.join()
"""


def test_two_threads_timers_are_not_taken_for_a_repeating_step(tmp_path: Path, capsys) -> None:
    """Two threads, each with its own ``ScopedTimer`` steps, interleaved one way in one run and another way in
    the next (as a scheduler does): no step is inferred from the two threads' timers together, so the runs diff
    as equal. Inferring ``b.step+a.step`` from whichever order the timers happened to come in made the zoo's
    ``workers`` fail the topology gate in 66 of 96 unchanged pairs."""
    import subprocess
    import sys

    script = tmp_path / "two_threads.py"
    script.write_text(TWO_THREADS, encoding="utf-8")
    files = {}
    for name, pattern in (("alternating", "ab" * 6), ("paired", "aabb" * 3)):
        files[name] = tmp_path / f"{name}.jsonl"
        done = subprocess.run(
            [sys.executable, "-m", "launchtrace", "run", "--out", str(files[name]), str(script), pattern],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
    for path in files.values():
        assert infer_steps(occurrences(load_traces(path))) is None
        capsys.readouterr()
        assert main(["summary", str(path), "--format", "json"]) == 0
        assert json.loads(capsys.readouterr().out)["inferred_steps"] == []  # the streamed summary's rule too
    capsys.readouterr()
    assert main(["diff", str(files["alternating"]), str(files["paired"]), "--format", "json"]) == 0


def test_check_static_names_the_other_repeating_scopes_it_did_not_check(capsys) -> None:
    """A training loop whose ``wp.Tape`` is never reset (``tape.zero()`` clears the gradients, not the recorded
    launches): each backward pass replays one more forward launch. ``check-static`` picked ``tape.forward`` and
    said ``static``; the growing ``tape.backward`` beside it was never named."""
    x = wp.array(np.ones(N, dtype=np.float32), dtype=float, device=DEVICE, requires_grad=True)
    y = wp.zeros(N, dtype=float, device=DEVICE, requires_grad=True)
    tape = wp.Tape()
    with trace_launches(include_warp=True) as trace:  # the adjoint launches are issued inside Warp, as exported
        for _ in range(4):
            with tape:
                wp.launch(scale, dim=N, inputs=[x, 2.0], outputs=[y], device=DEVICE)
            tape.backward(grads={y: wp.ones(N, dtype=float, device=DEVICE)})
            tape.zero()
    occs = rule_occurrences([trace.to_data()])
    name, how = default_scope(occs)
    assert name == "tape.forward"
    assert how.endswith("; also repeating, not checked: 'tape.backward' (4) (name one with --scope)"), how
    backward = [len(o.records) for o in occs if o.name == "tape.backward"]
    assert backward == sorted(backward) and backward[0] < backward[-1]  # it grows: worth naming
