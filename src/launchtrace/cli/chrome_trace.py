"""``launchtrace chrome-trace TRACE --out FILE.json``: Chrome Trace Event JSON for Perfetto / chrome://tracing.

Files and folders are read one trace at a time and written as they are read (memory: one trace, plus the
samples :func:`launchtrace.render.chrome_trace.sampled_chunks` keeps); past ``--max-events`` the rest is
sampled and counted. With ``--scope`` / ``--trace`` / ``--occurrence``, or a backend URL, the input is loaded
whole first (as every command loads a backend's answer).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator

from launchtrace.cli._analyzer import add_selection, selected_views
from launchtrace.cli._numbers import at_least
from launchtrace.cli._writing import write_chunks
from launchtrace.render.chrome_trace import DEFAULT_MAX_EVENTS, chrome_trace, sampled_chunks
from launchtrace.sources.loading import load_traces
from launchtrace.sources.named import parse_backend

HELP = "write Chrome Trace Event JSON (open in Perfetto or chrome://tracing)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("traces", nargs="+", help="trace files or folders")
    parser.add_argument("--out", required=True, help="the JSON file to write ('-': stdout)")
    parser.add_argument(
        "--max-events",
        type=at_least(1),
        default=DEFAULT_MAX_EVENTS,
        metavar="N",
        help="events written in full before the rest is sampled and counted (default: %(default)s)",
    )
    add_selection(parser)


def _whole(events: list[dict]) -> Iterator[str]:
    yield '{"displayTimeUnit":"ns","traceEvents":[\n'
    for i, event in enumerate(events):
        yield ("" if i == 0 else ",\n") + json.dumps(event, ensure_ascii=False, allow_nan=False)
    yield "\n]}\n"


def run(args: argparse.Namespace) -> int:
    chosen = args.scope is not None or args.trace is not None or args.occurrence is not None
    if chosen or any(isinstance(t, str) and parse_backend(t) is not None for t in args.traces):
        traces = load_traces(args.traces)
        if chosen:
            traces = [view.data for view in selected_views(traces, args)]
        write_chunks(_whole(chrome_trace(traces)["traceEvents"]), args.out)
        return 0
    from launchtrace.analysis.bounded import Scan
    from launchtrace.sources.bytrace import TraceSpans

    write_chunks(sampled_chunks(Scan(TraceSpans(args.traces)), args.max_events), args.out)
    return 0
