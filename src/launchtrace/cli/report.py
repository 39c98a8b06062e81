"""``launchtrace report TRACE --out FILE.html``: one self-contained HTML report (see :mod:`launchtrace.render.html`).

The graph is of the representative step (the median occurrence of the run's most common outermost scope), or
of the step ``--scope`` / ``--trace`` / ``--occurrence`` choose; hazards are those of the whole run, every
thread on one time axis; ``--baseline`` adds the diff section.

Files and folders are read one trace at a time (:func:`launchtrace.analysis.detail.read_detail`): the first
``--detail-spans`` spans are shown in detail and the rest counted exactly, so memory stays flat in the input's
size; the page then says what it left out. With ``--scope`` / ``--trace`` / ``--occurrence`` or a backend URL
the input is loaded whole, as before.
"""

from __future__ import annotations

import argparse

from launchtrace.analysis.dataflow import build_dataflow, find_hazards
from launchtrace.analysis.detail import DEFAULT_DETAIL_SPANS, Detail, read_detail
from launchtrace.analysis.overview import overview
from launchtrace.analysis.runs import View, views
from launchtrace.cli._analyzer import add_bounded_input, chose_steps, loads_whole, selected_views, write_chunks
from launchtrace.gcpause import collector_relaxed
from launchtrace.render.html import report_chunks
from launchtrace.sources.each import Traces
from launchtrace.sources.loading import load_traces
from launchtrace.sources.named import parse_backend

HELP = "write one self-contained HTML report: run facts, step durations, kernel time, timeline, dataflow, diff"

GRAPH_LIMIT = 2000  # records; larger graphs take dot minutes and are unreadable anyway


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_bounded_input(
        parser,
        "--detail-spans",
        DEFAULT_DETAIL_SPANS,
        "spans of the input shown in detail; the rest is counted exactly and summarised",
    )
    parser.add_argument("--baseline", help="trace file(s) to diff against; the diff goes in the report")
    parser.add_argument("--title", default="launchtrace report", help="the page title")
    parser.add_argument("--out", required=True, help="the HTML file to write")


def _graph(view) -> tuple[bytes | None, str]:
    if view is None:
        return None, "no step to draw"
    trace = view.data
    if len(trace.records) > GRAPH_LIMIT:
        return None, f"graph left out: {len(trace.records)} records (limit {GRAPH_LIMIT}); use launchtrace graph"
    from launchtrace.render.dot import render_dot  # only for a graph drawn
    from launchtrace.render.graphviz import GraphvizError, dot_available, run_dot

    if not dot_available():
        return None, "graph left out: Graphviz 'dot' is not installed"
    try:
        flow = build_dataflow(trace, view.graphs)
        return run_dot(render_dot(trace, flow, hide_readonly=True, title=view.label), "svg"), ""
    except GraphvizError as exc:
        return None, f"graph left out: {exc}"


@collector_relaxed()
def run(args: argparse.Namespace) -> int:
    chosen = chose_steps(args)
    large: Detail | None = None
    if loads_whole(args):
        traces = load_traces(args.traces)
    else:
        large = read_detail(Traces(args.traces), args.detail_spans)
        traces = large.traces
    diff, diff_note = None, ""
    if args.baseline:
        from launchtrace.analysis.diff import diff_traces  # only with a baseline: 14 ms of imports otherwise

        if large is None or parse_backend(args.baseline) is not None:
            diff = diff_traces(load_traces(args.baseline), traces)
        else:  # read as the input is: its first --detail-spans spans, so a huge baseline stays bounded too
            base = read_detail(Traces([args.baseline]), args.detail_spans)
            diff = diff_traces(base.traces, traces)
            if base.large or large.large:
                diff_note = (
                    f"Of the spans in detail: the first {base.totals.spans - base.left_spans:,} of the baseline's "
                    f"{base.totals.spans:,} against the first {large.totals.spans - large.left_spans:,} of this "
                    f"input's {large.totals.spans:,} (--detail-spans)."
                )
    if chosen:
        chosen = selected_views(traces, args)
        ov = overview(traces, [v.occurrence for v in chosen if v.occurrence is not None])
    else:
        ov = overview(traces)
        chosen = views(traces, occurrence="median")
        if ov.inferred and ov.representative is not None and chosen:  # the median inferred step
            rep, run = ov.representative, chosen[0].run
            chosen = [View(f"{run.label}: {rep.name} #{rep.index}", rep.data, run, chosen[0].graphs, rep)]
    hazards = [h.reason for v in views(traces) for h in find_hazards(v.data, v.graphs)]
    svg, note = _graph(chosen[0] if chosen else None)
    page = report_chunks(
        traces, ov, diff=diff, graph_svg=svg, graph_note=note, hazards=hazards, title=args.title, large=large,
        diff_note=diff_note,
    )  # fmt: skip
    write_chunks(page, args.out)
    print(args.out)
    return 0
