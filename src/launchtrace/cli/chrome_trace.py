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

from launchtrace.cli._analyzer import add_bounded_input, chose_steps, loads_whole, selected_views, write_chunks
from launchtrace.render.chrome_trace import DEFAULT_MAX_EVENTS, chrome_trace, sampled_chunks
from launchtrace.sources.loading import load_traces

HELP = "write Chrome Trace Event JSON (open in Perfetto or chrome://tracing)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_bounded_input(
        parser, "--max-events", DEFAULT_MAX_EVENTS, "events written in full before the rest is sampled and counted"
    )
    parser.add_argument("--out", required=True, help="the JSON file to write ('-': stdout)")


def _whole(events: list[dict]) -> Iterator[str]:
    yield '{"displayTimeUnit":"ns","traceEvents":[\n'
    for i, event in enumerate(events):
        yield ("" if i == 0 else ",\n") + json.dumps(event, ensure_ascii=False, allow_nan=False)
    yield "\n]}\n"


def run(args: argparse.Namespace) -> int:
    if loads_whole(args):
        traces = load_traces(args.traces)
        if chose_steps(args):
            traces = [view.data for view in selected_views(traces, args)]
        write_chunks(_whole(chrome_trace(traces)["traceEvents"]), args.out)
        return 0
    from launchtrace.analysis.bounded import Scan
    from launchtrace.sources.each import Traces

    write_chunks(sampled_chunks(Scan(Traces(args.traces)), args.max_events), args.out)
    return 0
