"""Chrome Trace Event JSON: every scope and record is a complete event on a named track."""

from __future__ import annotations

import json

from launchtrace.render.chrome_trace import chrome_trace
from test_analysis_programs import run_program


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
