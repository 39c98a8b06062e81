"""``launchtrace graph TRACE --out DIR``: the dataflow as DOT (SVG, PNG when ``dot`` is installed).

By default one picture per distinct topology of each run's steps (outermost scope occurrences): identical steps
are drawn once, from their median-duration occurrence, titled with how many there were ("step: 60
occurrences"); past :data:`SHAPES_AT` topologies in a run, one per shape (dims and scalar values aside).
``--scope NAME`` does the same for that scope's occurrences (a static scope gives one picture); ``--trace`` /
``--occurrence`` draw the chosen occurrences one by one. A picture holds at most ``--max-nodes`` records
(repeats collapsed first); the rest are listed in an index node.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from launchtrace.analysis.dataflow import build_dataflow
from launchtrace.analysis.diff import diff_traces
from launchtrace.analysis.replays import captured_graphs
from launchtrace.analysis.runs import View, group_runs, occurrences, pick, shape_groups, topology_groups
from launchtrace.cli._analyzer import add_selection, safe_child, safe_name, selected_views
from launchtrace.cli._numbers import at_least
from launchtrace.errors import UserError
from launchtrace.model import TraceData
from launchtrace.render.dot import MAX_RECORDS, render_dot
from launchtrace.render.graphviz import GraphvizError, dot_available, run_dot
from launchtrace.sources.loading import load_traces
from launchtrace.topology import ChangeKind

HELP = "draw the dataflow graph as DOT, SVG and PNG (kernels with argument ports, scopes, repeated blocks)"

_log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("traces", nargs="*", help="trace files or folders (one graph per distinct step topology)")
    parser.add_argument("--diff", nargs=2, metavar=("A", "B"), help="draw B, coloured by its diff against A")
    parser.add_argument("--hide-readonly", action="store_true", help="hide buffers no record writes")
    parser.add_argument("--no-collapse", action="store_true", help="draw repeated sequences in full")
    parser.add_argument("--formats", default="svg,png", help="rendered formats besides DOT (default: svg,png)")
    parser.add_argument(
        "--max-nodes",
        type=at_least(1),
        default=MAX_RECORDS,
        help="records drawn per picture at most; the rest are listed in an index node (default %(default)s)",
    )
    parser.add_argument("--out", required=True, help="output folder")
    add_selection(parser)


SHAPES_AT = 8
"""More distinct step topologies than this in a run: steps are drawn once per shape (the same kernels on the same
buffers, dims and scalar values aside), titled with how many topologies each picture stands for."""


def _distinct_steps(traces: list[TraceData], scope: str | None = None) -> list[tuple[str, View]]:
    """One (stem, view) per distinct topology of each run's outermost scope occurrences (of ``scope``'s
    occurrences), titled with its count."""
    out = []
    for r, run in enumerate(group_runs(traces)):
        graphs = captured_graphs(run.traces)
        occs = occurrences(run.traces, scope)
        if scope is not None:
            occs = [o for o in occs if o.name == scope]
        groups = topology_groups(occs)
        by_shape = len(groups) > SHAPES_AT
        if by_shape:  # many topologies that may differ only in dims and scalars: one picture per shape
            groups = shape_groups(occs)
        for k, members in enumerate(groups):
            chosen = pick(members, "median")
            n = len(members)
            distinct = len(topology_groups(members)) if by_shape and n > 1 else 1
            kind = f"this shape ({distinct} topologies: dims or scalars vary)" if distinct > 1 else "this topology"
            title = f"{chosen.name}: {n} occurrence{'s' if n != 1 else ''}" + (
                f" with {kind} (drawn: #{chosen.index}, the median)" if n > 1 else f" (#{chosen.index})"
            )
            stem = f"run{r}-{k}-{safe_name(chosen.name, 40)}"  # short: the extension must survive safe_child
            out.append((stem, View(title, chosen.data, run, graphs, chosen)))
    return out


def _diff_status(a: list[TraceData], b: TraceData) -> tuple[dict[int, str], list]:
    index = {id(r): i for i, r in enumerate(b.records)}
    status: dict[int, str] = {}
    removed = []
    for seg in diff_traces(a, [b]).segments:
        for e in seg.entries:
            if e.kind == ChangeKind.REMOVED:
                removed.append(e.record_a)
            elif e.record_b is not None and id(e.record_b) in index:
                # a moved call (the same call at another position) is marked as changed where it is now
                status[index[id(e.record_b)]] = "added" if e.kind == ChangeKind.INSERTED else "changed"
    return status, removed


def _write(out: Path, stem: str, text: str, formats: list[str]) -> list[Path]:
    written = [safe_child(out, stem + ".dot")]
    written[0].write_text(text, encoding="utf-8")
    if not dot_available():
        _log.warning("Graphviz 'dot' is not installed: wrote DOT text only")
        return written
    for fmt in formats:
        try:
            data = run_dot(text, fmt)
        except GraphvizError as exc:
            raise UserError(f"{written[0]}: {exc}") from exc
        path = safe_child(out, f"{stem}.{fmt}")
        path.write_bytes(data)
        written.append(path)
    return written


def run(args: argparse.Namespace) -> int:
    out = Path(args.out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"{out}: cannot create folder: {exc.strerror or exc}") from exc
    formats = [f for f in args.formats.split(",") if f]
    if any(f not in ("svg", "png", "pdf") for f in formats):
        raise UserError(f"--formats: choose among svg, png, pdf (got {args.formats!r})")
    jobs: list[tuple[str, TraceData, dict[int, str], list, str, dict | None]] = []
    if args.diff:
        a, b = load_traces(args.diff[0]), load_traces(args.diff[1])
        for k, tb in enumerate(b):
            status, removed = _diff_status(a[k : k + 1] or a, tb)
            jobs.append((f"diff-{k}-{tb.attributes.get('trace_id', '')}", tb, status, removed, "", None))
    if not args.traces and not args.diff:
        raise UserError("give trace files, or --diff A B")
    traces = load_traces(args.traces) if args.traces else []
    chosen = args.trace is not None or args.occurrence is not None
    if traces and args.scope is not None and not chosen:  # one picture per distinct topology of the scope
        found = _distinct_steps(traces, args.scope)
        if not found:
            selected_views(traces, args)  # raises the "no such scope" error with the names seen
        for stem, view in found:
            jobs.append((stem, view.data, {}, [], view.label, view.graphs))
    elif traces and (chosen or args.scope is not None):
        for k, view in enumerate(selected_views(traces, args)):
            name = view.occurrence.name if view.occurrence else "run"
            jobs.append((f"{k}-{safe_name(name, 40)}", view.data, {}, [], view.label, view.graphs))
    elif traces:
        for stem, view in _distinct_steps(traces):
            jobs.append((stem, view.data, {}, [], view.label, view.graphs))
    for stem, trace, status, removed, title, graphs in jobs:
        text = render_dot(
            trace,
            build_dataflow(trace, graphs),
            hide_readonly=args.hide_readonly,
            collapse_repeats=not args.no_collapse,
            status=status,
            removed=removed,
            title=title,
            max_records=args.max_nodes,
        )
        for path in _write(out, stem, text, formats):
            print(path)
    return 0
