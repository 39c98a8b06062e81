"""A :class:`~launchtrace.analysis.diff.TraceDiff` as text for people, JSON for machines, Markdown for PRs.

Example::

    from launchtrace.render.diff_text import diff_as_text
    print(diff_as_text(result))
"""

from __future__ import annotations

import math
from typing import Any

from launchtrace.analysis.diff import TraceDiff
from launchtrace.analysis.stats import TimingChange, Verdict
from launchtrace.topology import DiffEntry, format_entry, format_value

__all__ = ["diff_as_json", "diff_as_markdown", "diff_as_text"]

_NOTABLE = (Verdict.SLOWER, Verdict.FASTER)


def _us(ns: float) -> str:
    return "-" if math.isnan(ns) else f"{ns / 1000:.1f}"


def _pct(change: float) -> str:
    return "-" if math.isnan(change) else f"{change * 100:+.1f}%"


def _summary(result: TraceDiff) -> str:
    c = result.counts
    if result.equal:
        return "topology: equal"
    return f"topology: differs ({c['inserted']} inserted, {c['removed']} removed, {c['changed']} changed)"


def _timing_line(t: TimingChange) -> str:
    return (
        f"  {t.verdict}: {t.group}: p50 {_us(t.p50_a)} -> {_us(t.p50_b)} us ({_pct(t.change)}), "
        f"p95 {_us(t.p95_a)} -> {_us(t.p95_b)} us, n={t.count_a}/{t.count_b}, p={t.p_value:.2g}"
    )


def diff_as_text(result: TraceDiff, limit: int = 50) -> str:
    """Lines for a terminal: the verdict, up to ``limit`` entries per segment, then the timing of every kernel
    with enough samples and the significant changes at scope positions."""
    lines = [_summary(result)]
    for seg in result.segments:
        if not seg.entries:
            continue
        side = "" if seg.count_a and seg.count_b else (" (only in B)" if seg.count_b else " (only in A)")
        lines.append(f"scope {seg.name} #{seg.occurrence}{side}: {seg.count_a} -> {seg.count_b} records")
        lines.extend("  " + format_entry(e) for e in seg.entries[:limit])
        if len(seg.entries) > limit:
            lines.append(f"  ... {len(seg.entries) - limit} more")
    notable = [t for t in (*result.timing, *result.position_timing) if t.verdict in _NOTABLE]
    tested = [t for t in result.timing if t.verdict not in (Verdict.TOO_FEW, Verdict.ONLY_A, Verdict.ONLY_B)]
    lines.append(f"timing: {len(notable)} significant change(s) over {len(tested)} kernel(s) with enough samples")
    shown = tested[:limit] + [t for t in result.position_timing if t.verdict in _NOTABLE][:limit]
    lines.extend(_timing_line(t) for t in shown)
    return "\n".join(lines) + "\n"


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return None if math.isnan(value) else value
    return format_value(value)


def _entry_json(e: DiffEntry) -> dict[str, Any]:
    rec = e.record
    return {
        "kind": str(e.kind),
        "index_a": e.index_a,
        "index_b": e.index_b,
        "kernel": rec.kernel,
        "op": str(rec.op),
        "dim": list(rec.dim),
        "site": str(rec.site),
        "fields": [
            {"field": f.field, "name": f.name, "before": _jsonable(f.before), "after": _jsonable(f.after)}
            for f in e.fields
        ],
    }


def _timing_json(t: TimingChange) -> dict[str, Any]:
    return {
        "group": t.group,
        "count_a": t.count_a,
        "count_b": t.count_b,
        "p50_a_ns": _jsonable(t.p50_a),
        "p95_a_ns": _jsonable(t.p95_a),
        "p50_b_ns": _jsonable(t.p50_b),
        "p95_b_ns": _jsonable(t.p95_b),
        "change": _jsonable(t.change),
        "p_value": t.p_value,
        "verdict": str(t.verdict),
    }


def diff_as_json(result: TraceDiff) -> dict[str, Any]:
    """A JSON-ready dict: ``equal``, ``counts``, ``options``, ``segments`` (with ``entries``), ``timing``,
    ``position_timing``."""
    return {
        "equal": result.equal,
        "counts": result.counts,
        "options": {k: _jsonable(v) for k, v in result.options},
        "segments": [
            {
                "name": s.name,
                "occurrence": s.occurrence,
                "count_a": s.count_a,
                "count_b": s.count_b,
                "entries": [_entry_json(e) for e in s.entries],
            }
            for s in result.segments
        ],
        "timing": [_timing_json(t) for t in result.timing],
        "position_timing": [_timing_json(t) for t in result.position_timing],
    }


def _md(text: object) -> str:
    """Table-cell text: pipes and markup neutralised."""
    return str(text).replace("\\", "\\\\").replace("|", "\\|").replace("&", "&amp;").replace("<", "&lt;")


def diff_as_markdown(result: TraceDiff, limit: int = 100) -> str:
    """A Markdown section for a pull request: the verdict, a table of entries, a table of timing changes."""
    lines = [f"### launchtrace diff: {_summary(result)}", ""]
    rows = [(s, e) for s in result.segments for e in s.entries]
    if rows:
        lines += [
            "| scope | kind | # | kernel | what changed | site |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        for s, e in rows[:limit]:
            what = ", ".join(
                f"{f.field} {f.name} {format_value(f.before)} -> {format_value(f.after)}".replace("  ", " ")
                for f in e.fields
            )
            idx = e.index_a if e.index_a is not None else e.index_b
            lines.append(
                f"| {_md(s.name)} #{s.occurrence} | {e.kind} | {idx} | `{_md(e.record.kernel)}` "
                f"| {_md(what)} | {_md(e.record.site)} |"
            )
        if len(rows) > limit:
            lines.append(f"\n{len(rows) - limit} more entries not shown.")
        lines.append("")
    timing = [t for t in result.timing if t.verdict != Verdict.TOO_FEW]
    if timing:
        lines += [
            "| kernel | n (A/B) | p50 A (us) | p50 B (us) | change | p95 A (us) | p95 B (us) | p | verdict |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for t in timing:
            lines.append(
                f"| `{_md(t.group)}` | {t.count_a}/{t.count_b} | {_us(t.p50_a)} | {_us(t.p50_b)} | "
                f"{_pct(t.change)} | {_us(t.p95_a)} | {_us(t.p95_b)} | {t.p_value:.2g} | {t.verdict} |"
            )
    return "\n".join(lines) + "\n"
