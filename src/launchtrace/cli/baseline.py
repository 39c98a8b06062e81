"""``launchtrace baseline build|merge``: what a fleet normally launches and how long it takes, in one .pb file.

Example::

    launchtrace baseline build --from runs/ --group-by service.version,host.name --out base.pb
    launchtrace baseline build --from tempo http://tempo:3200 --service sim --since 1d --limit 5000 --out day.pb
    launchtrace baseline merge monday.pb tuesday.pb --out week.pb
"""

from __future__ import annotations

import argparse
import sys

from launchtrace.errors import UserError

HELP = "build a fleet baseline from traces (build), or combine two (merge)"
DEFAULT_GROUP_BY = "service.version,host.name"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from launchtrace.cli._fleet import add_source_arguments

    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    build = sub.add_parser("build", help="build a baseline from traces", description="build a baseline from traces")
    add_source_arguments(build)
    add_group_by(build)
    build.add_argument("--ignore-scalars", action="store_true", help="leave scalar arguments out of the topology")
    build.add_argument("--out", required=True, help="the baseline file to write (.pb)")
    merge = sub.add_parser("merge", help="merge baselines", description="merge baselines into one (exact)")
    merge.add_argument("inputs", nargs="+", help="baseline files (.pb), two or more")
    merge.add_argument("--out", required=True, help="the baseline file to write (.pb)")


def add_group_by(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--group-by",
        default=DEFAULT_GROUP_BY,
        help="resource attributes that make a group, comma-separated (default: %(default)s)",
    )


def group_keys(text: str) -> tuple[str, ...]:
    keys = tuple(k.strip() for k in text.split(",") if k.strip())
    if not keys:
        raise UserError("--group-by: name at least one resource attribute")
    return keys


def _build(args: argparse.Namespace) -> int:
    from launchtrace.analysis.fleet.baseline import BaselineBuilder
    from launchtrace.baselines import write_baseline
    from launchtrace.cli._fleet import Progress, open_stream, problems_line, source_kind

    builder = BaselineBuilder(group_keys(args.group_by), scalars=not args.ignore_scalars)
    stream = open_stream(args, spill=True)
    with Progress(stream, quiet=args.quiet):
        builder.add_stream(stream)
    if not stream.traces:
        why = problems_line(stream)
        raise UserError(
            f"{stream.label}: no launchtrace traces to build a baseline from" + (f" ({why})" if why else "")
        )
    kind, _ = source_kind(args)
    builder.add_source(stream.label, kind, stream.traces, stream.spans)
    spliced: dict = {}  # representatives of huge steps: written as bytes, never as messages (issue 25)
    baseline = builder.to_proto(spliced)
    size = write_baseline(baseline, args.out, spliced)
    steps = sum(s.steps for g in baseline.groups for s in g.scopes)
    if not args.quiet:
        print(
            f"baseline: {len(baseline.groups)} groups, {steps} steps, {stream.traces} traces -> {args.out} "
            f"({size} bytes)",
            file=sys.stderr,
        )
    return 0


def _merge(args: argparse.Namespace) -> int:
    from launchtrace.analysis.fleet.baseline import merge
    from launchtrace.baselines import read_baseline, write_baseline

    if len(args.inputs) < 2:
        raise UserError("merge: give two or more baseline files")
    merged = read_baseline(args.inputs[0])
    for path in args.inputs[1:]:
        try:
            merged = merge(merged, read_baseline(path))
        except ValueError as exc:
            raise UserError(f"{path}: cannot merge: {exc}") from None
    size = write_baseline(merged, args.out)
    print(
        f"merged {len(args.inputs)} baselines: {len(merged.groups)} groups -> {args.out} ({size} bytes)",
        file=sys.stderr,
    )
    return 0


def run(args: argparse.Namespace) -> int:
    return _build(args) if args.action == "build" else _merge(args)
