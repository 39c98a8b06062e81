"""Chrome Trace Event JSON (the format Perfetto and chrome://tracing open) from traces.

Each trace becomes a process, each thread or stream row a thread track (named with metadata events), each
scope and record a complete (``"ph": "X"``) event with its hover details in ``args``. Timestamps are
microseconds relative to the earliest event, as the format expects.

Example::

    import json
    from launchtrace.render.chrome_trace import chrome_trace
    json.dump(chrome_trace([trace]), open("trace.json", "w"))
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from launchtrace.model import TraceData
from launchtrace.render.timeline import timeline_items

__all__ = ["chrome_trace"]


def chrome_trace(traces: Sequence[TraceData]) -> dict[str, Any]:
    """The Chrome trace object (``{"traceEvents": [...], "displayTimeUnit": "ns"}``) of ``traces``."""
    items = timeline_items(traces)
    origin = min((it.start_ns for it in items if it.start_ns), default=0)
    events: list[dict[str, Any]] = []
    tids: dict[tuple[int, str], int] = {}
    for t, trace in enumerate(traces):
        name = str(trace.attributes.get("trace_id") or trace.attributes.get("service.name") or f"trace {t}")
        events.append({"ph": "M", "name": "process_name", "pid": t + 1, "tid": 0, "args": {"name": name}})
    for it in items:
        key = (it.trace, it.lane)
        if key not in tids:
            tids[key] = len(tids) + 1
            events.append(
                {
                    "ph": "M",
                    "name": "thread_name",
                    "pid": it.trace + 1,
                    "tid": tids[key],
                    "args": {"name": it.lane},
                }
            )
        start = max(it.start_ns - origin, 0)
        events.append(
            {
                "ph": "X",
                "name": it.name,
                "cat": it.kind,
                "pid": it.trace + 1,
                "tid": tids[key],
                "ts": start / 1000.0,
                "dur": max(it.end_ns - it.start_ns, 0) / 1000.0,
                "args": dict(it.details),
            }
        )
    return {"traceEvents": events, "displayTimeUnit": "ns"}
