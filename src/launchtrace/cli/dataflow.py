"""``launchtrace dataflow TRACE``: read/write edges, critical path, overlap candidates and hazards.

By default each run (process) is analysed whole: every thread's records on one time axis, so a race between
two threads is found although their launches sit in different traces; ``--scope`` / ``--trace`` /
``--occurrence`` narrow it to chosen steps. Graph replays count as the accesses of the launches they ran.

Memory: the whole-run views (no choice made) are streamed (:mod:`launchtrace.analysis.dataflow_stream`: the
input read twice (a third time for late traces too large to keep), records added in issue order as soon as
nothing still to come can precede them, the listed rows kept in temporary files); ``--scope`` / ``--trace`` /
``--occurrence`` pick steps from the rebuilt traces (their spans read one trace at a time), as does a backend
source.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator

from launchtrace.analysis.dataflow import Dataflow, build_dataflow
from launchtrace.analysis.dataflow_stream import ROWS, StreamedFlow, stream_dataflow
from launchtrace.cli._analyzer import (
    LazyList,
    add_format,
    add_selection,
    chose_steps,
    selected_views,
    write_json_streamed,
    write_text,
)
from launchtrace.render.escape import terminal, terminal_lines
from launchtrace.sources.each import Traces

HELP = "dataflow of a trace: RAW/WAR/WAW edges, critical path, launches that could overlap, stream hazards"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("traces", nargs="+", help="trace files or folders")
    parser.add_argument("--edges", action="store_true", help="list every edge (text format)")
    parser.add_argument("--fail-on-hazard", action="store_true", help="exit 1 when a hazard is found")
    add_selection(parser)
    add_format(parser)


def _name(flow: Dataflow, i: int) -> str:
    rec = flow.records[i]
    return f"#{i} {rec.kernel}"


def _text(label: str, flow: Dataflow, edges: bool) -> list[str]:
    kinds: dict[str, int] = {}
    for e in flow.edges:
        kinds[str(e.kind)] = kinds.get(str(e.kind), 0) + 1
    lines = [
        f"{label}: {len(flow.records)} records, {len(flow.edges)} edges "
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


def _json(label: str, flow: Dataflow) -> dict:
    """One view's JSON; the per-record, per-access and per-edge arrays are made while they are written."""

    def records() -> Iterator[dict]:
        return ({"index": i, "kernel": r.kernel, "op": str(r.op)} for i, r in enumerate(flow.records))

    def accesses() -> Iterator[dict]:
        for a in flow.accesses:
            yield {"record": a.record, "name": a.name, "buffer": a.region.label, "mode": a.mode, "inferred": a.inferred}

    def edges() -> Iterator[dict]:
        for e in flow.edges:
            yield {"src": e.src, "dst": e.dst, "kind": str(e.kind), "buffer": e.buffer, "cross_lane": e.cross_lane}

    return {
        "view": label,
        "records": LazyList(records, len(flow.records)),
        "accesses": LazyList(accesses, len(flow.accesses)),
        "edges": LazyList(edges, len(flow.edges)),
        "critical_path": list(flow.critical_path),
        "critical_ns": flow.critical_ns,
        "overlap_candidates": [list(g) for g in flow.overlap_candidates()],
        "hazards": [
            {
                "src": h.edge.src,
                "dst": h.edge.dst,
                "kind": str(h.edge.kind),
                "buffer": h.edge.buffer,
                "src_site": str(flow.records[h.edge.src].site),
                "dst_site": str(flow.records[h.edge.dst].site),
                "reason": h.reason,
            }
            for h in flow.hazards
        ],
    }


def run(args: argparse.Namespace) -> int:
    source = Traces(args.traces)
    rows = ROWS if args.format == "json" else ("edges",) if args.edges else ()  # what the output lists
    streamed = None if chose_steps(args) else stream_dataflow(source, rows)
    if streamed is not None:  # the whole-run views, without holding the runs
        try:
            return _print_streamed(streamed, args)
        finally:
            for flow in streamed:
                flow.close()
    flows = [(v.label, build_dataflow(v.data, v.graphs)) for v in selected_views(source.in_order(), args)]
    if args.format == "json":
        write_json_streamed([_json(label, f) for label, f in flows], None)
    else:
        write_text(terminal_lines([line for label, f in flows for line in _text(label, f, args.edges)]), None)
    hazards = sum(len(f.hazards) for _, f in flows)
    return 1 if hazards and args.fail_on_hazard else 0


def _print_streamed(flows: list[StreamedFlow], args: argparse.Namespace) -> int:
    """What :func:`_text` / :func:`_json` print, from the streamed flows (their rows read back as written)."""
    if args.format == "json":
        write_json_streamed([_streamed_json(f) for f in flows], None)
    else:
        for flow in flows:  # line by line: --edges on a long run is millions of lines
            for line in _streamed_text(flow, args.edges):
                sys.stdout.write(terminal(line) + "\n")
    hazards = sum(len(f.hazards) for f in flows)
    return 1 if hazards and args.fail_on_hazard else 0


def _streamed_text(flow: StreamedFlow, edges: bool) -> Iterator[str]:
    path, total = flow.builder.critical_path()
    yield (
        f"{flow.label}: {flow.n} records, {flow.edges.count} edges "
        + ", ".join(f"{k} {n}" for k, n in sorted(flow.edge_kinds.items()))
    )
    yield (
        f"  critical path: {total / 1000:.1f} us over {len(path)} records: "
        + " -> ".join(flow.name(i) for i in path[:20])
        + (" ..." if len(path) > 20 else "")
    )
    for group in flow.overlap_candidates()[:20]:
        yield "  could overlap: " + ", ".join(flow.name(i) for i in group)
    for h in flow.hazards:
        yield f"  HAZARD #{h.edge.src} -> #{h.edge.dst}: {h.reason}"
    if edges:
        for e in flow.edges:
            yield f"  {e['kind']} {flow.name(e['src'])} -> {flow.name(e['dst'])} via {e['buffer']}"


def _streamed_json(flow: StreamedFlow) -> dict:
    path, total = flow.builder.critical_path()
    candidates = flow.overlap_candidates()
    return {
        "view": flow.label,
        "records": LazyList(lambda: iter(flow.records), flow.records.count),
        "accesses": LazyList(lambda: iter(flow.accesses), flow.accesses.count),
        "edges": LazyList(lambda: iter(flow.edges), flow.edges.count),
        "critical_path": list(path),
        "critical_ns": total,
        "overlap_candidates": [list(g) for g in candidates],
        "hazards": [
            {
                "src": h.edge.src,
                "dst": h.edge.dst,
                "kind": str(h.edge.kind),
                "buffer": h.edge.buffer,
                "src_site": src_site,
                "dst_site": dst_site,
                "reason": h.reason,
            }
            for h, (src_site, dst_site) in zip(flow.hazards, flow.sites)
        ],
    }
