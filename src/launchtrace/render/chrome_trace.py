"""Chrome Trace Event JSON (the format Perfetto and chrome://tracing open) from traces.

Laid out to sit beside an Nsight Systems or PyTorch profiler trace of the same run in Perfetto:

- one process per run, with the run's real ``process.pid`` (named ``<service> (pid N)``);
- one thread track per host thread (named as Python names it) and one track per CUDA stream
  (``cuda:0 stream 0x...``), threads first;
- scopes and the work under them as complete (``"ph": "X"``) events on their thread's track, so they nest;
- timestamps in absolute microseconds since the Unix epoch (``ts``), as the profilers write theirs, so the
  tracks line up on one time axis (a double holds them to about 0.25 us);
- a folded run (see :mod:`launchtrace.render.timeline`) as one event spanning its summary, named with its count
  and marked ``"folded": true`` in ``args``, never as invented per-launch events.

Example::

    import json
    from launchtrace.render.chrome_trace import chrome_trace
    json.dump(chrome_trace(traces), open("trace.json", "w"))
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from launchtrace.analysis.runs import group_runs
from launchtrace.model import TraceData
from launchtrace.render.timeline import timeline_items

__all__ = ["chrome_trace"]


def _meta(name: str, pid: int, tid: int, args: dict[str, Any]) -> dict[str, Any]:
    return {"ph": "M", "name": name, "pid": pid, "tid": tid, "args": args}


def chrome_trace(traces: Sequence[TraceData]) -> dict[str, Any]:
    """The Chrome trace object (``{"traceEvents": [...], "displayTimeUnit": "ns"}``) of ``traces``."""
    events: list[dict[str, Any]] = []
    used_pids: set[int] = set()
    for r, run in enumerate(group_runs(traces)):
        pid = run.pid if run.pid is not None and run.pid not in used_pids else 1_000_000 + r
        used_pids.add(pid)
        name = str(run.attributes.get("service.name") or "launchtrace")
        events.append(_meta("process_name", pid, 0, {"name": f"{name} (pid {run.pid})" if run.pid else name}))
        events.append(_meta("process_sort_index", pid, 0, {"sort_index": r}))
        tids: dict[tuple[str, str], int] = {}
        items = timeline_items(run.traces)
        lanes = sorted({(it.lane_kind, it.lane) for it in items}, key=lambda k: (k[0] != "thread", k[1]))
        for k, (kind, lane) in enumerate(lanes):
            tids[(kind, lane)] = k + 1
            events.append(_meta("thread_name", pid, k + 1, {"name": lane}))
            events.append(_meta("thread_sort_index", pid, k + 1, {"sort_index": k}))
        for it in items:
            args = dict(it.details)
            if it.kind == "fold":
                args["folded"] = True
                args["count"] = it.count
            events.append(
                {
                    "ph": "X",
                    "name": it.name,
                    "cat": it.kind,
                    "pid": pid,
                    "tid": tids[(it.lane_kind, it.lane)],
                    "ts": it.start_ns / 1000.0,
                    "dur": max(it.end_ns - it.start_ns, 0) / 1000.0,
                    "args": args,
                }
            )
    return {"traceEvents": events, "displayTimeUnit": "ns"}
