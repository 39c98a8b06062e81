"""``launchtrace check-static TRACE [--scope NAME]``: same topology every time? Exit 1 if not.

Without ``--scope`` it checks the outermost repeating step (:func:`launchtrace.steps.default_scope`), or, in a
zero-code program whose top level is a repeating sequence of timers, each repetition
(:func:`launchtrace.steps.infer_steps`), and says which it picked."""

from __future__ import annotations

import argparse

from launchtrace.analysis.static import check_static
from launchtrace.cli._analyzer import add_format, write_json, write_text
from launchtrace.errors import UserError
from launchtrace.model import ScopeKind, TraceData
from launchtrace.render.diff_text import plural
from launchtrace.render.escape import terminal_lines
from launchtrace.sources.loading import load_traces
from launchtrace.steps import default_scope, infer_steps, occurrences

HELP = "check that every occurrence of a scope launches the same topology (CUDA-graph capturable)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("traces", nargs="+", help="trace files or folders")
    parser.add_argument(
        "--scope", help="the scope name to check (default: the outermost repeating one, or inferred steps)"
    )
    add_format(parser)


def scope_names(traces: list[TraceData], limit: int = 20) -> list[str]:
    """The names of the scopes in ``traces``, nested ones too (Warp's internal timers and module loads left out:
    never a step), sorted."""
    names = {
        scope.name
        for trace in traces
        for scope in trace.scopes.values()
        if not scope.internal and scope.kind != ScopeKind.LOAD
    }
    return sorted(names)[:limit]


def _default(traces: list[TraceData]) -> tuple[str, list | None, str]:
    """The scope to check when none is named: ``(name, steps or None, sentence saying which)``."""
    occs = occurrences(traces)
    inferred = infer_steps(occs)
    if inferred is not None:
        steps = [[r for o in step for r in o.records] for step in inferred.steps]
        how = (
            f"no --scope given: checking the inferred step {inferred.name!r} ({len(steps)} occurrences; {inferred.how})"
        )
        return inferred.name, steps, how
    name, how = default_scope(occs)
    if name is None:
        names = ", ".join(repr(n) for n in scope_names(traces)) or "none"
        raise UserError(f"{how} (scopes seen: {names})")
    return name, None, how


def run(args: argparse.Namespace) -> int:
    traces = load_traces(args.traces)
    picked = ""
    if args.scope is None:
        scope, steps, picked = _default(traces)
        report = check_static(traces, scope, steps)
    else:
        report = check_static(traces, args.scope)
    if report.occurrences == 0:
        names = ", ".join(repr(n) for n in scope_names(traces)) or "none"
        raise UserError(f"scope {args.scope!r} not found in {', '.join(args.traces)}; scopes seen: {names}")
    if args.format == "json":
        write_json(
            {
                "scope": report.scope,
                "picked": picked or None,
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
        lines = [picked] if picked else []
        lines.append(f"scope {report.scope!r}: {plural(report.occurrences, 'occurrence')}, {verdict}")
        lines += report.notes
        for f in report.findings:
            name = f" {f.name}" if f.name else ""
            warn = "" if f.breaks else " (warning)"
            lines.append(
                f"  {f.reason}{warn}: #{f.position} {f.kernel}{name}: {f.example} "
                f"[{plural(f.occurrences, 'occurrence')}] (from {f.site})"
            )
        write_text(terminal_lines(lines), None)
    return 0 if report.static else 1
