"""``launchtrace summary TRACE``: per-kernel counts and durations, per launch and per step, time per scope,
compile/load time on its own line, and where values first went non-finite (``--value-stats`` runs).

Memory stays flat in the input: traces are read and rebuilt one at a time and only the figures are kept (a few
bytes per launch and per scope occurrence for exact percentiles; :mod:`launchtrace.analysis.summary_state`).

Adjoint launches are rows of their own (``__main__.repulsion (adjoint)``).

Figures that come from fold summaries (recorded statistics, not measured launch by launch) are marked ``*``
and explained under the table; a per-launch p95 that no summary recorded is ``-``.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
from typing import Any

from launchtrace.analysis.stats import KernelStats, ScopeStats
from launchtrace.analysis.summary_state import SummaryResult, SummaryState
from launchtrace.analysis.values import BadValues
from launchtrace.cli._analyzer import add_format, write_json, write_text
from launchtrace.render.escape import columns, pad, terminal, terminal_lines
from launchtrace.sources.each import Traces

HELP = "per-kernel counts and time (per launch and per step) and time per scope, over traces"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("traces", nargs="+", help="trace files or folders")
    parser.add_argument(
        "--top", type=int, default=0, help="only the N kernels with the most total time (0: all, the default)"
    )
    add_format(parser)


def _plural(n: int, word: str) -> str:
    return f"{n} {word if n == 1 else word + 's'}"


def _us(ns: float, mark: bool = False) -> str:
    if ns is None or math.isnan(ns):
        return "-"
    return f"{ns / 1e3:.1f}" + ("*" if mark else "")


def _jsonable(row: Any) -> dict[str, Any]:
    return {
        k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in dataclasses.asdict(row).items()
    }


def _kernel_lines(rows: list[KernelStats]) -> list[str]:
    names = [terminal(r.kernel) for r in rows]
    width = max([columns(n) for n in names] + [6])
    head = (
        f"{'kernel':<{width}}  {'op':<12} {'count':>8} {'total ms':>10} {'mean us':>9} {'p50 us':>9} {'p95 us':>9} "
        f"{'max us':>10} | {'steps':>6} {'p50 us':>9} {'p95 us':>9} {'max us':>10}"
    )
    lines = [
        "per launch, then per step (the kernel's total time in each occurrence of its outermost scope, "
        "or each loop iteration outside every scope):",
        head,
    ]
    for name, r in zip(names, rows):
        lines.append(
            f"{pad(name, width)}  {terminal(r.op):<12} {r.count:>8} {r.total_ns / 1e6:>10.3f} {_us(r.mean_ns):>9} "
            f"{_us(r.p50_ns, r.p50_from_summaries):>9} {_us(r.p95_ns):>9} {_us(r.max_ns, r.max_from_summaries):>10} "
            f"| {r.steps:>6} {_us(r.step_p50_ns):>9} {_us(r.step_p95_ns):>9} {_us(r.step_max_ns):>10}"
        )
    replayed = [r.kernel for r in rows if r.replayed]
    if replayed:
        lines.append(
            f"- ran only in graph replays ({', '.join(terminal(k) for k in replayed[:3])}"
            f"{', ...' if len(replayed) > 3 else ''}): count is what the replays ran; a replay is timed as a "
            "whole, in wp.capture_launch's row (the captured call's own time is the capture, when nothing ran)"
        )
    folded = sum(r.folded for r in rows)
    if folded:
        lines.append(
            f"* from fold summaries ({folded} of {sum(r.count for r in rows)} launches were folded): max is the "
            "recorded maximum, p50 an estimate from the recorded p50s; a folded kernel's per-launch p95 is not "
            "recorded (-): its spread is in the per-step columns, which are exact (count x mean per position)"
        )
    return lines


def _scope_lines(rows: list[ScopeStats], split: dict[str, tuple[int, int, int]]) -> list[str]:
    if not rows:
        return ["no scopes (wp.ScopedTimer, Tape scopes, launchtrace.scope) in these traces"]
    paths = [terminal(r.path) for r in rows]
    width = max([columns(p) for p in paths] + [5])
    lines = [
        "time per scope (each occurrence measured):",
        f"{'scope':<{width}}  {'kind':<6} {'count':>7} {'total ms':>10} {'p50 us':>10} {'p95 us':>10} {'max us':>11}",
    ]
    for path, r in zip(paths, rows):
        lines.append(
            f"{pad(path, width)}  {terminal(r.kind):<6} {r.count:>7} {r.total_ns / 1e6:>10.3f} {_us(r.p50_ns):>10} "
            f"{_us(r.p95_ns):>10} {_us(r.max_ns):>11}"
        )
    for path, r in zip(paths, rows):
        early, late, late_count = split.get(r.path, (0, 0, 0))
        if r.warmup:
            rest = (r.total_ns - r.warmup_ns - late) / max(1, r.count - r.warmup)
            why = f"{early / 1e6:.1f} ms of it compile/load" if early else "no compile/load in it"
            without = " without compile/load" if late else ""
            lines.append(
                f"warm-up: the first {_plural(r.warmup, 'occurrence')} of {path!r} took {r.warmup_ns / 1e6:.1f} ms "
                f"(the others {rest / 1e6:.2f} ms on average{without}; {why}): included above"
            )
        if late and "/" not in r.path:
            lines.append(
                f"compile/load after the warm-up: {late / 1e6:.1f} ms in {_plural(late_count, 'load')} under "
                f"{path!r} (a module first used later in the run): included above"
            )
    return lines


def _value_lines(result: SummaryResult) -> list[str]:
    """The "values" section: the first launch whose output held NaN/Inf, and how many did."""
    bad = result.bad
    if not bad:
        return []
    lines = ["values (--value-stats):", f"  {bad[0].line()}"]
    if result.bad_launches > 1:
        kernels = result.bad_kernels
        more = ", ".join(kernels[:5]) + (f" and {len(kernels) - 5} more" if len(kernels) > 5 else "")
        lines.append(f"  {result.bad_launches} launches wrote non-finite values in all ({more})")
    if bad[0].step is not None:
        lines.append(f"  ({result.clock_how})")
    return lines


def _wall_line(result: SummaryResult) -> str:
    """Where the traced wall time went: in Warp's calls, in compile/load, or in the program's own code and waits
    between them (a slow process is not always slow kernels)."""
    wall = result.wall_ns
    if wall <= 0:
        return ""
    calls = sum(r.total_ns for r in result.kernels)
    loads = result.loads.total_ns
    rest = wall - calls - loads

    def share(ns: float) -> str:
        return f"{ns / 1e9:.3f} s ({ns / wall:.1%})"

    runs = f" over {result.runs} runs" if result.runs > 1 else ""
    line = f"wall: {wall / 1e9:.3f} s traced{runs}: {share(calls)} in launches, copies and fills"
    if loads:
        line += f", {share(loads)} in compile/load"
    if rest >= 0:
        return line + f", {share(rest)} in the program's own code and waits between them"
    return line + " (several threads' calls overlap: together they are longer than the wall clock)"


def _failure_lines(result: SummaryResult) -> list[str]:
    """The calls that raised: a failed launch ran nothing, yet the tables above count it."""
    if not result.failed_total:
        return []
    scopes = sum(f.count for f in result.failed if f.what.startswith("scope "))
    calls = result.failed_total - scopes
    why = " (a call that raised ran nothing on the device; the table above counts it)" if calls else ""
    what = " and ".join(_plural(n, kind) for n, kind in ((calls, "call"), (scopes, "scope")) if n)
    lines = [f"failed: {what} raised{why}"]
    for f in result.failed[:20]:
        where = f" (from {f.site})" if f.site else ""
        lines.append(f"  {f.count:>6} x {f.what}{where}: {f.error}")
    shown = sum(f.count for f in result.failed[:20])
    if result.failed_total > shown:
        lines.append(f"  ... {result.failed_total - shown} more (--format json lists up to 200 kinds)")
    return lines


def _bad_json(b: BadValues) -> dict[str, Any]:
    stats = {k: v if not isinstance(v, float) or math.isfinite(v) else str(v) for k, v in _stats_of(b).items()}
    return {
        "kernel": b.kernel,
        "array": b.array,
        "param": b.param,
        "step": b.step,
        "scope": b.scope,
        "site": b.site,
        "what": b.what,
        "stats": stats,
    }


def _stats_of(b: BadValues) -> dict[str, Any]:
    return {"mean": b.stats.mean, "std": b.stats.std, "min": b.stats.min, "max": b.stats.max}


def run(args: argparse.Namespace) -> int:
    state = SummaryState()  # one trace at a time: memory bounded as the module docstring of summary_state says
    for key, trace in Traces(args.traces, spill=True):  # it only iterates a trace's records
        state.add(key, trace)
    result = state.result()
    rows = result.kernels
    if args.top > 0:
        rows = rows[: args.top]
    scopes, loads, bad, inferred = result.scopes, result.loads, result.bad, result.inferred
    if args.format == "json":
        out = {
            "traces": result.traces,
            "records": result.records,
            "kernels": [_jsonable(r) for r in rows],
            "scopes": [_jsonable(r) for r in scopes],
            "loads": _jsonable(loads),
            "non_finite": [_bad_json(b) for b in bad],
            "inferred_steps": [{"unit": list(i.unit), "steps": i.steps, "how": i.how} for i in inferred],
            "wall_ns": result.wall_ns,
            "failed": [dataclasses.asdict(f) for f in result.failed],
            "failed_total": result.failed_total,
        }
        if result.bad_total > len(bad):
            out["non_finite_total"] = result.bad_total  # only the first BAD_KEEP are listed
        write_json(out, None)
        return 0
    lines = [f"{_plural(result.traces, 'trace')}, {_plural(result.records, 'record')}"]
    lines += [i.how for i in inferred]
    if loads.count:
        lines.append(loads.line())
    wall = _wall_line(result)
    if wall:
        lines.append(wall)
    lines += _kernel_lines(rows)
    failed = _failure_lines(result)
    if failed:
        lines += ["", *failed]
    lines.append("")
    lines += _scope_lines(scopes, result.load_split)
    if bad:
        lines.append("")
        lines += _value_lines(result)
    write_text(terminal_lines(lines), None)
    return 0
