"""``launchtrace report TRACE --out FILE.html``: one self-contained HTML report."""

from __future__ import annotations

import argparse

from launchtrace.analysis.dataflow import build_dataflow
from launchtrace.analysis.diff import diff_traces
from launchtrace.analysis.stats import kernel_stats
from launchtrace.cli._analyzer import write_text
from launchtrace.loading import load_traces
from launchtrace.render.diff_text import diff_as_text
from launchtrace.render.dot import render_dot
from launchtrace.render.graphviz import GraphvizError, dot_available, run_dot
from launchtrace.render.html import render_report

HELP = "write one self-contained HTML report: timeline, diff summary, dataflow graph, kernel statistics"

GRAPH_LIMIT = 2000  # records; larger graphs take dot minutes and are unreadable anyway


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("traces", nargs="+", help="trace files or folders")
    parser.add_argument("--baseline", help="trace file(s) to diff against; the summary goes in the report")
    parser.add_argument("--title", default="launchtrace report", help="the page title")
    parser.add_argument("--out", required=True, help="the HTML file to write")


def _graph(traces) -> tuple[bytes | None, str]:
    if not traces:
        return None, "no trace"
    trace = traces[0]
    if len(trace.records) > GRAPH_LIMIT:
        return (
            None,
            f"graph left out: {len(trace.records)} records (limit {GRAPH_LIMIT}); use launchtrace graph",
        )
    if not dot_available():
        return None, "graph left out: Graphviz 'dot' is not installed"
    try:
        return run_dot(render_dot(trace, build_dataflow(trace), hide_readonly=True), "svg"), ""
    except GraphvizError as exc:
        return None, f"graph left out: {exc}"


def run(args: argparse.Namespace) -> int:
    traces = load_traces(args.traces)
    diff_text = None
    if args.baseline:
        diff_text = diff_as_text(diff_traces(load_traces(args.baseline), traces))
    svg, note = _graph(traces)
    page = render_report(
        traces,
        stats=kernel_stats(traces),
        diff_text=diff_text,
        graph_svg=svg,
        graph_note=note,
        title=args.title,
    )
    write_text(page, args.out)
    print(args.out)
    return 0
