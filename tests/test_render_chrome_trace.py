"""Chrome Trace Event JSON: one process per run (its pid), threads and streams as tracks, scopes nested,
absolute timestamps, folded runs as one labelled block."""

from __future__ import annotations

import dataclasses
import json
import os
import time
from pathlib import Path

from launchtrace.model import TraceData
from launchtrace.render.chrome_trace import chrome_trace
from launchtrace.sources.loading import load_traces
from test_analysis_programs import run_program, write_substep_file, write_trace_file


def test_every_record_and_scope_is_an_event() -> None:
    trace = run_program("base", 3)
    data = json.loads(json.dumps(chrome_trace([trace])))
    events = data["traceEvents"]
    complete = [e for e in events if e["ph"] == "X"]
    records = [e for e in complete if e["cat"] != "scope"]
    scopes = [e for e in complete if e["cat"] == "scope"]
    assert len(records) == len(trace.records) == 9
    assert len(scopes) == len(trace.scopes)
    assert [e["name"] for e in records] == [r.kernel for r in trace.records]
    assert all(e["ts"] >= 0 and e["dur"] >= 0 for e in complete)
    for e, r in zip(records, trace.records):
        assert e["dur"] == r.duration_ns / 1000.0
    names = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert names == {"thread MainThread"}
    first_scale = records[0]
    assert first_scale["args"]["arg s"] == "0.5" and first_scale["args"]["arg x"].startswith("sim.x ")


def test_a_run_is_one_process_with_its_pid_and_absolute_times(tmp_path: Path) -> None:
    before = time.time() * 1e6
    traces = load_traces(write_trace_file(tmp_path / "t.jsonl", steps=3))
    assert len(traces) == 3  # three traces, one process
    events = chrome_trace(traces)["traceEvents"]
    procs = [e for e in events if e["ph"] == "M" and e["name"] == "process_name"]
    assert [e["pid"] for e in procs] == [os.getpid()] and str(os.getpid()) in procs[0]["args"]["name"]
    complete = [e for e in events if e["ph"] == "X"]
    assert {e["pid"] for e in complete} == {os.getpid()}
    assert all(before - 60e6 < e["ts"] < time.time() * 1e6 for e in complete)  # microseconds since the epoch
    first = min(traces[0].records, key=lambda r: r.start_ns)
    assert min(e["ts"] for e in complete if e["cat"] != "scope") == first.start_ns / 1000.0
    # scopes nest: each record event lies inside its step's scope event on the same track
    scopes = [e for e in complete if e["cat"] == "scope"]
    for e in complete:
        if e["cat"] != "scope":
            assert any(
                s["tid"] == e["tid"] and s["ts"] <= e["ts"] and e["ts"] + e["dur"] <= s["ts"] + s["dur"] + 1e-3
                for s in scopes
            )


def test_streams_are_their_own_tracks_after_the_threads() -> None:
    """A CUDA stream needs a GPU: the records of a CPU run are given a stream handle."""
    trace = run_program("base", 1)
    moved = [dataclasses.replace(r, stream=0xBEEF, device="cuda:0") if r.op == "launch" else r for r in trace.records]
    events = chrome_trace([TraceData(moved, trace.scopes, trace.attributes)])["traceEvents"]
    names = {e["tid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert names == {1: "thread MainThread", 2: "cuda:0 stream 0xbeef"}
    on_stream = [e["name"] for e in events if e["ph"] == "X" and e["tid"] == 2]
    assert len(on_stream) == 2 and all(n.endswith((".scale", ".add")) for n in on_stream)


def test_a_folded_run_is_one_labelled_block_never_invented_bars(tmp_path: Path) -> None:
    """The same program exported with and without folding: the folded file gives one event per summary,
    carrying its count, and the events plus the counts still account for every device operation."""
    plain = load_traces(write_substep_file(tmp_path / "plain.jsonl", fold=False))
    folded = load_traces(write_substep_file(tmp_path / "folded.jsonl", fold=True))
    assert sum(len(t) for t in plain) == sum(len(t) for t in folded) == 36
    ev_plain = [e for e in chrome_trace(plain)["traceEvents"] if e["ph"] == "X" and e["cat"] != "scope"]
    ev_fold = [e for e in chrome_trace(folded)["traceEvents"] if e["ph"] == "X" and e["cat"] != "scope"]
    assert len(ev_plain) == 36 and not any(e["cat"] == "fold" for e in ev_plain)
    blocks = [e for e in ev_fold if e["cat"] == "fold"]
    assert blocks and all(e["args"]["folded"] is True for e in blocks)
    assert sum(e["args"].get("count", 1) for e in ev_fold) == 36
    assert all(" x" in e["name"] and "scale" in e["name"] for e in blocks)
    assert len(ev_fold) < 36  # fewer events: no bar per folded repetition
