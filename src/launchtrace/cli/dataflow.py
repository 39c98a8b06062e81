"""``launchtrace dataflow TRACE``: read/write edges, critical path, overlap candidates and hazards."""

from __future__ import annotations

import argparse

from launchtrace.analysis.dataflow import Dataflow, build_dataflow
from launchtrace.cli._analyzer import add_format, write_json, write_text
from launchtrace.loading import load_traces
from launchtrace.render.escape import terminal_lines

HELP = "dataflow of a trace: RAW/WAR/WAW edges, critical path, launches that could overlap, stream hazards"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("traces", nargs="+", help="trace files or folders")
    parser.add_argument("--edges", action="store_true", help="list every edge (text format)")
    parser.add_argument("--fail-on-hazard", action="store_true", help="exit 1 when a hazard is found")
    add_format(parser)


def _name(flow: Dataflow, i: int) -> str:
    rec = flow.records[i]
    return f"#{i} {rec.kernel}"


def _text(t: int, flow: Dataflow, edges: bool) -> list[str]:
    kinds: dict[str, int] = {}
    for e in flow.edges:
        kinds[str(e.kind)] = kinds.get(str(e.kind), 0) + 1
    lines = [
        f"trace {t}: {len(flow.records)} records, {len(flow.edges)} edges "
        + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())),
        f"  critical path: {flow.critical_ns / 1000:.1f} us over {len(flow.critical_path)} records: "
        + " -> ".join(_name(flow, i) for i in flow.critical_path[:20])
        + (" ..." if len(flow.critical_path) > 20 else ""),
    ]
    for group in flow.overlap_candidates()[:20]:
        lines.append("  could overlap: " + ", ".join(_name(flow, i) for i in group))
    for h in flow.hazards:
        lines.append(f"  HAZARD #{h.edge.src} -> #{h.edge.dst}: {h.reason}")
    if edges:
        for e in flow.edges:
            lines.append(f"  {e.kind} {_name(flow, e.src)} -> {_name(flow, e.dst)} via {e.buffer}")
    return lines


def _json(flow: Dataflow) -> dict:
    return {
        "records": [{"index": i, "kernel": r.kernel, "op": str(r.op)} for i, r in enumerate(flow.records)],
        "accesses": [
            {
                "record": a.record,
                "name": a.name,
                "buffer": a.region.label,
                "mode": a.mode,
                "inferred": a.inferred,
            }
            for a in flow.accesses
        ],
        "edges": [
            {"src": e.src, "dst": e.dst, "kind": str(e.kind), "buffer": e.buffer, "cross_lane": e.cross_lane}
            for e in flow.edges
        ],
        "critical_path": list(flow.critical_path),
        "critical_ns": flow.critical_ns,
        "overlap_candidates": [list(g) for g in flow.overlap_candidates()],
        "hazards": [{"src": h.edge.src, "dst": h.edge.dst, "reason": h.reason} for h in flow.hazards],
    }


def run(args: argparse.Namespace) -> int:
    flows = [build_dataflow(t) for t in load_traces(args.traces)]
    if args.format == "json":
        write_json([_json(f) for f in flows], None)
    else:
        write_text(terminal_lines([line for t, f in enumerate(flows) for line in _text(t, f, args.edges)]), None)
    hazards = sum(len(f.hazards) for f in flows)
    return 1 if hazards and args.fail_on_hazard else 0
