"""``launchtrace check-static TRACE --scope NAME``: same topology every time? Exit 1 if not."""

from __future__ import annotations

import argparse

from launchtrace.analysis.static import check_static
from launchtrace.cli._analyzer import add_format, write_json, write_text
from launchtrace.errors import UserError
from launchtrace.model import TraceData
from launchtrace.render.diff_text import plural
from launchtrace.render.escape import terminal_lines
from launchtrace.sources.loading import load_traces

HELP = "check that every occurrence of a scope launches the same topology (CUDA-graph capturable)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("traces", nargs="+", help="trace files or folders")
    parser.add_argument("--scope", required=True, help="the scope name to check")
    add_format(parser)


def scope_names(traces: list[TraceData], limit: int = 20) -> list[str]:
    """The names of the scopes in ``traces``, nested ones too (Warp's internal timers left out), sorted."""
    names = {scope.name for trace in traces for scope in trace.scopes.values() if not scope.internal}
    return sorted(names)[:limit]


def run(args: argparse.Namespace) -> int:
    traces = load_traces(args.traces)
    report = check_static(traces, args.scope)
    if report.occurrences == 0:
        names = ", ".join(repr(n) for n in scope_names(traces)) or "none"
        raise UserError(f"scope {args.scope!r} not found in {', '.join(args.traces)}; scopes seen: {names}")
    if args.format == "json":
        write_json(
            {
                "scope": report.scope,
                "occurrences": report.occurrences,
                "static": report.static,
                "warmup": report.warmup,
                "notes": list(report.notes),
                "findings": [
                    {
                        "reason": str(f.reason),
                        "position": f.position,
                        "kernel": f.kernel,
                        "name": f.name,
                        "occurrences": f.occurrences,
                        "example": f.example,
                        "site": f.site,
                        "breaks": f.breaks,
                    }
                    for f in report.findings
                ],
            },
            None,
        )
    else:
        if report.occurrences < 2:
            verdict = "only one occurrence: nothing to compare"
        else:
            verdict = "static (same topology every time)" if report.static else "NOT static"
        lines = [f"scope {report.scope!r}: {plural(report.occurrences, 'occurrence')}, {verdict}", *report.notes]
        for f in report.findings:
            name = f" {f.name}" if f.name else ""
            warn = "" if f.breaks else " (warning)"
            lines.append(
                f"  {f.reason}{warn}: #{f.position} {f.kernel}{name}: {f.example} "
                f"[{plural(f.occurrences, 'occurrence')}] (from {f.site})"
            )
        write_text(terminal_lines(lines), None)
    return 0 if report.static else 1
