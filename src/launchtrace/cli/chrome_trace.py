"""``launchtrace chrome-trace TRACE --out FILE.json``: Chrome Trace Event JSON for Perfetto / chrome://tracing."""

from __future__ import annotations

import argparse

from launchtrace.cli._analyzer import add_selection, selected_views, write_json
from launchtrace.render.chrome_trace import chrome_trace
from launchtrace.sources.loading import load_traces

HELP = "write Chrome Trace Event JSON (open in Perfetto or chrome://tracing)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("traces", nargs="+", help="trace files or folders")
    parser.add_argument("--out", required=True, help="the JSON file to write ('-': stdout)")
    add_selection(parser)


def run(args: argparse.Namespace) -> int:
    traces = load_traces(args.traces)
    if args.scope is not None or args.trace is not None or args.occurrence is not None:
        traces = [view.data for view in selected_views(traces, args)]
    write_json(chrome_trace(traces), args.out)
    return 0
