"""``launchtrace diff A B``: an aligned topology diff and timing comparison; exit 1 when topology differs."""

from __future__ import annotations

import argparse

from launchtrace.analysis.diff import diff_traces
from launchtrace.cli._analyzer import add_format, write_json, write_text
from launchtrace.loading import load_traces
from launchtrace.render.diff_text import diff_as_json, diff_as_markdown, diff_as_text

HELP = "diff two traces (or sets of traces): inserted, removed and changed launches, timing changes"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("a", help="the baseline: a trace file or a folder of them")
    parser.add_argument("b", help="the trace(s) to compare against the baseline")
    parser.add_argument("--scope", help="compare occurrences of this scope only")
    parser.add_argument("--ignore-scalars", action="store_true", help="do not compare scalar arguments")
    parser.add_argument("--ignore-streams", action="store_true", help="do not compare streams")
    parser.add_argument(
        "--raw-pointers",
        action="store_true",
        help="compare unowned buffers by address (default: by the order they first appear in, per segment)",
    )
    parser.add_argument("--min-samples", type=int, default=8, help="samples per side before a timing verdict")
    parser.add_argument("--alpha", type=float, default=0.01, help="significance level of the timing test")
    parser.add_argument("--out", help="write here instead of stdout")
    add_format(parser, ("text", "json", "markdown"))


def run(args: argparse.Namespace) -> int:
    result = diff_traces(
        load_traces(args.a),
        load_traces(args.b),
        scope=args.scope,
        ignore_scalars=args.ignore_scalars,
        ignore_streams=args.ignore_streams,
        raw_pointers=args.raw_pointers,
        min_samples=args.min_samples,
        alpha=args.alpha,
    )
    if args.format == "json":
        write_json(diff_as_json(result), args.out)
    elif args.format == "markdown":
        write_text(diff_as_markdown(result), args.out)
    else:
        write_text(diff_as_text(result), args.out)
    return 0 if result.equal else 1
