"""DOT output: accepted by Graphviz, Tape.visualize style, and inert for strings from traces."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
import xml.etree.ElementTree as ET

import pytest

from launchtrace.analysis.dataflow import build_dataflow
from launchtrace.model import BufferArg, LaunchRecord, ScopeRecord, Site, TraceData
from launchtrace.render.dot import STATUS_COLORS, find_runs, render_dot
from test_analysis_programs import run_program

needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz 'dot' not installed (CI installs it)")

EVIL = 'm.<b>bold</b>"]; evil -> injected [label="x"]; } { \\N \\l &amp; <script>alert(1)</script>'
SVG = "{http://www.w3.org/2000/svg}"


def _svg(text: str) -> ET.Element:
    proc = subprocess.run(["dot", "-Tsvg"], input=text.encode(), capture_output=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr.decode()
    assert not proc.stderr.strip(), proc.stderr.decode()  # no warnings either
    return ET.fromstring(proc.stdout)


def _texts(svg: ET.Element) -> list[str]:
    return ["".join(t.itertext()) for t in svg.iter(f"{SVG}text")]


@needs_dot
def test_a_real_program_graph_is_accepted_and_repeats_collapse() -> None:
    trace = run_program("base", 5)
    text = render_dot(trace, build_dataflow(trace))
    svg = _svg(text)
    assert text.count('label="repeated 5x"') == 1
    titles = {"".join(t.itertext()) for t in svg.iter(f"{SVG}title")}
    assert {"r0", "r1", "r2"} <= titles and "r3" not in titles  # later repetitions are folded into the first
    texts = _texts(svg)
    assert "step" in texts and "repeated 5x" in texts
    assert any(t.endswith(".scale") for t in texts) and "wp.copy" in texts
    flat = render_dot(trace, build_dataflow(trace), collapse_repeats=False)
    assert "repeated" not in flat and "r14 [" in flat


@needs_dot
def test_read_only_buffers_hide_on_request() -> None:
    trace = run_program("base", 1)
    shown = _texts(_svg(render_dot(trace, build_dataflow(trace))))
    hidden = _texts(_svg(render_dot(trace, build_dataflow(trace), hide_readonly=True)))
    assert "sim.v" in shown and "sim.v" not in hidden  # only ever read
    assert "sim.x" in hidden  # written by the copy


def _evil_trace() -> TraceData:
    site = Site('<b>f</b>".py', 1, "f")
    buf = BufferArg(0, EVIL, 0x1000, (4,), "float32", 16, owner=EVIL, offset=0, access="rw")
    rec = LaunchRecord(
        "launch",
        EVIL,
        (4,),
        None,
        ((0, 0x1000),),
        ((1, EVIL),),
        site,
        params=(EVIL, EVIL),
        buffers=(buf,),
        scope_id=1,
    )
    scope = ScopeRecord(1, EVIL, "user", attributes=(("k", EVIL),))
    return TraceData([rec, dataclasses.replace(rec, dim=(8,))], {1: scope})


@needs_dot
def test_markup_and_dot_syntax_from_traces_render_as_inert_text() -> None:
    trace = _evil_trace()
    text = render_dot(trace, build_dataflow(trace), status={1: "changed"}, removed=[trace.records[0]])
    svg = _svg(text)
    titles = {"".join(t.itertext()) for t in svg.iter(f"{SVG}title")}
    assert "evil" not in titles and "injected" not in titles  # no node was injected
    texts = _texts(svg)
    assert EVIL in texts  # the kernel and scope names, verbatim as text
    assert not list(svg.iter(f"{SVG}script"))
    assert "bold" not in {el.tag for el in svg.iter()}


@needs_dot
def test_diff_status_colours_launches() -> None:
    trace = run_program("base", 1)
    text = render_dot(trace, build_dataflow(trace), status={0: "added", 1: "changed"}, removed=[trace.records[2]])
    _svg(text)
    assert STATUS_COLORS["added"] in text and STATUS_COLORS["changed"] in text
    assert "cluster_removed" in text and STATUS_COLORS["removed"] in text


def test_runs_cover_every_key_once() -> None:
    keys = list("xababababyzzz")
    runs = find_runs(keys)
    covered = [i for r in runs for i in range(r.start, r.start + r.length * r.count)]
    assert covered == list(range(len(keys)))
    assert [(r.start, r.length, r.count) for r in runs if r.count > 1] == [(1, 2, 4), (10, 1, 3)]


@needs_dot
def test_captured_work_is_drawn_as_captured_and_a_replay_as_running_it() -> None:
    """Capture needs CUDA: the records of a real CPU program are marked captured into graph 3 (the record
    contract capture gives), and a replay record is added after them."""
    trace = run_program("base", 1)
    captured = [dataclasses.replace(r, captured=True, graph_id=3) for r in trace.records]
    replay = LaunchRecord("graph_launch", "wp.capture_launch", (), None, (), (), Site("p.py", 9, "f"), graph_id=3)
    data = TraceData([*captured, replay], trace.scopes)
    text = render_dot(data, build_dataflow(data), title="step: 1 occurrence")
    texts = _texts(_svg(text))
    assert "captured into graph 3 (runs at each replay)" in texts and "replays graph 3" in texts
    assert texts.count("captured, not run here") == 3 and "step: 1 occurrence" in texts
    assert "sim.x (rw)" in texts  # the replay's ports: what its graph's launches touch (scale reads, copy writes)


@needs_dot
def test_a_block_repeated_with_a_time_varying_scalar_collapses_and_shows_its_range() -> None:
    """A loop that passes ``t = step * 0.1`` repeats in everything but that value: drawn once, ``repeated 10x``,
    with the range the value took (not the first repetition's value as if every one had it)."""
    site = Site("sim.py", 7, "step")
    records = []
    for step in range(10):
        records.append(LaunchRecord("launch", "sim.wave", (8,), None, (), (("t", step * 0.1), ("k", 2.0)), site))
        records.append(LaunchRecord("launch", "sim.spin", (8,), None, (), (("q", (step, 0.0)),), site))
    trace = TraceData(records, {}, {})
    text = render_dot(trace, build_dataflow(trace))
    texts = _texts(_svg(text))
    assert text.count('label="repeated 10x"') == 1 and "r2 [" not in text
    assert "0.0 .. 0.9 (10 values)" in texts and "2.0" in texts  # the constant stays as it is
    assert "varies (10 values)" in texts  # a vector that changes: no range
    flat = render_dot(trace, build_dataflow(trace), collapse_repeats=False)
    assert "repeated" not in flat and "0.30000000000000004" in flat


@needs_dot
def test_a_repeated_block_inside_a_repeated_scope_shows_every_value_it_stands_for() -> None:
    """Three ``step`` scopes, each launching ``wave`` four times with ``t = 10 * step + k``: one scope drawn,
    one launch drawn in it, and the range over all twelve launches (the inner block's own four, and the same
    positions of the two later steps)."""
    site = Site("sim.py", 7, "step")
    records, scopes = [], {}
    for step in range(3):
        scopes[step + 1] = ScopeRecord(step + 1, "step", "user", start_ns=100 * step + 1, end_ns=100 * step + 90)
        for k in range(4):
            records.append(
                LaunchRecord("launch", "sim.wave", (8,), None, (), (("t", 10 * step + k),), site, scope_id=step + 1)
            )
    trace = TraceData(records, scopes, {})
    text = render_dot(trace, build_dataflow(trace))
    texts = _texts(_svg(text))
    assert 'label="repeated 3x"' in text and 'label="repeated 4x"' in text and "r1 [" not in text
    assert "0 .. 23 (12 values)" in texts


class _CountingAccesses(tuple):
    """The dataflow's accesses, counting how many times they are walked."""

    walks = 0

    def __iter__(self):
        type(self).walks += 1
        return super().__iter__()


def test_a_long_step_draws_without_walking_every_access_per_edge() -> None:
    """One step of many launches (a 20,000-launch step took 42 s in ``graph``: each edge end scanned every
    access of the trace for its port). The accesses are walked a fixed number of times, not once per edge."""
    trace = run_program("base", 200)
    flow = build_dataflow(trace)
    counted = dataclasses.replace(flow, accesses=_CountingAccesses(flow.accesses))
    _CountingAccesses.walks = 0
    text = render_dot(trace, counted, collapse_repeats=False, max_records=10_000)
    assert text == render_dot(trace, flow, collapse_repeats=False, max_records=10_000)
    assert len(flow.edges) > 400 and _CountingAccesses.walks < 10, _CountingAccesses.walks
