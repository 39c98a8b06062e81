"""``launchtrace chrome-trace TRACE --out FILE.json``: Chrome Trace Event JSON for Perfetto / chrome://tracing."""

from __future__ import annotations

import argparse

from launchtrace.cli._analyzer import write_json
from launchtrace.loading import load_traces
from launchtrace.render.chrome_trace import chrome_trace

HELP = "write Chrome Trace Event JSON (open in Perfetto or chrome://tracing)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("traces", nargs="+", help="trace files or folders")
    parser.add_argument("--out", required=True, help="the JSON file to write ('-': stdout)")


def run(args: argparse.Namespace) -> int:
    write_json(chrome_trace(load_traces(args.traces)), args.out)
    return 0
