"""``launchtrace snapshot TRACE --scope S --out FILE``: one occurrence of a scope as a topology snapshot (the
pytest plugin's format), and ``launchtrace diff --snapshot FILE TRACE``: every occurrence held against one."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from launchtrace.analysis.segments import Segment, segments
from launchtrace.cli._analyzer import write_json, write_text
from launchtrace.errors import UserError
from launchtrace.model import TraceData
from launchtrace.snapshot import (
    SnapshotError,
    SnapshotOptions,
    build_snapshot,
    compare,
    read_snapshot,
    render_snapshot,
)
from launchtrace.sources.loading import load_traces

HELP = "write one occurrence of a scope as a launch topology snapshot (the format of the pytest plugin)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("traces", nargs="+", metavar="TRACE", help="trace files or folders (one run)")
    parser.add_argument("--scope", required=True, help="the scope whose occurrence becomes the snapshot (e.g. step)")
    parser.add_argument(
        "--occurrence",
        type=int,
        help="which occurrence, from 0 (default: 1, the first after warm-up, or 0 when there is only one)",
    )
    parser.add_argument("--name", help="the snapshot's name (default: the scope's)")
    parser.add_argument("--ignore-scalars", action="store_true", help="leave scalar arguments out")
    parser.add_argument("--ignore-streams", action="store_true", help="leave streams out")
    parser.add_argument(
        "--root", default=".", help="call sites are written relative to this folder (default: the current one)"
    )
    parser.add_argument("--out", help="the snapshot file (default: stdout); an existing file must be a snapshot")


def _options(args: argparse.Namespace) -> SnapshotOptions:
    return SnapshotOptions(ignore_scalars=args.ignore_scalars, ignore_streams=args.ignore_streams)


def _segments(traces: list[TraceData], scope: str, specs: list[str]) -> list[Segment]:
    found = segments(traces, scope)
    if not found:
        raise UserError(f"scope {scope!r} not found in {', '.join(specs)}")
    return found


def _doc(seg: Segment, traces: list[TraceData], name: str, args: argparse.Namespace, scope: str) -> dict[str, Any]:
    return build_snapshot(
        seg.records,
        traces[seg.trace].scopes,
        name=name,
        root=args.root,
        base_scope=seg.scope_id,
        options=_options(args),
        extra={"scope": scope},
    )


def _refuse_overwrite(path: Path) -> None:
    """Nothing the user owns is overwritten: an existing ``--out`` must be a launchtrace snapshot."""
    if not path.exists():
        return
    try:
        read_snapshot(path)
    except SnapshotError as exc:
        raise UserError(f"{path} exists and is not a launchtrace snapshot; not overwriting it ({exc})") from None


def run(args: argparse.Namespace) -> int:
    traces = load_traces(args.traces)
    segs = _segments(traces, args.scope, args.traces)
    occurrence = args.occurrence if args.occurrence is not None else (1 if len(segs) > 1 else 0)
    if not 0 <= occurrence < len(segs):
        raise UserError(
            f"--occurrence {occurrence}: scope {args.scope!r} has {len(segs)} occurrence(s), 0..{len(segs) - 1}"
        )
    try:
        doc = _doc(segs[occurrence], traces, args.name or args.scope, args, args.scope)
    except SnapshotError as exc:
        raise UserError(str(exc)) from None
    doc["source"] = f"{', '.join(os.path.basename(s.rstrip('/')) for s in args.traces)} {args.scope} #{occurrence}"
    text = render_snapshot(doc)
    if args.out:
        from launchtrace.snapshot import write_atomic

        _refuse_overwrite(Path(args.out))
        try:
            write_atomic(args.out, text)
        except OSError as exc:
            raise UserError(f"{args.out}: cannot write: {exc.strerror or exc}") from None
    else:
        write_text(text, None)
    return 0


def diff_against_snapshot(args: argparse.Namespace) -> int:
    """``launchtrace diff --snapshot FILE TRACE...``: every occurrence of the snapshot's scope in the traces,
    compared with the snapshot; exit 1 when any differs. Called by :mod:`launchtrace.cli.diff`."""
    from launchtrace.render.diff_text import diff_as_json, diff_as_markdown, topology_lines
    from launchtrace.render.escape import terminal_lines
    from launchtrace.render.snapshot_text import as_trace_diff, counts_line

    path = Path(args.snapshot)
    try:
        stored = read_snapshot(path)
    except SnapshotError as exc:
        raise UserError(str(exc)) from None
    scope = args.scope or stored.get("scope")
    if not isinstance(scope, str) or not scope:
        raise UserError(f"{path} does not say which scope it holds: give --scope")
    traces = load_traces(args.traces)
    options = _options(args)
    pairs = []
    for seg in _segments(traces, scope, args.traces):
        try:
            doc = build_snapshot(
                seg.records, traces[seg.trace].scopes, name=scope, base_scope=seg.scope_id, root=".", options=options
            )
        except SnapshotError as exc:
            raise UserError(f"{', '.join(args.traces)}: {scope} #{seg.occurrence}: {exc}") from None
        entries = compare(stored, doc, options)
        pairs.append((scope, seg.occurrence, len(stored["launches"]), len(doc["launches"]), entries))
    result = as_trace_diff(pairs, options=(("snapshot", str(path)), ("scope", scope)))
    if args.format == "json":
        write_json(diff_as_json(result), args.out)
    elif args.format == "markdown":
        write_text(diff_as_markdown(result), args.out)
    else:
        head = f"{counts_line(result)}: {len(pairs)} occurrence(s) of {scope!r} against {path}"
        write_text(terminal_lines([head, *topology_lines(result)]), args.out)
    return 0 if result.equal else 1
