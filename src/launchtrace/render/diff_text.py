"""A :class:`~launchtrace.analysis.diff.TraceDiff` as text for people, JSON for machines, Markdown for PRs.

Identical changes are grouped: scope occurrences whose entries are the same are printed once with the list of
occurrences (``scope step, 60 occurrences #0-#59``), and one change at several positions of a segment is one
line listing the positions. Every name from a trace is escaped for the terminal
(:func:`launchtrace.render.escape.terminal`) or for Markdown.

Example::

    from launchtrace.render.diff_text import diff_as_text
    print(diff_as_text(result))
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from launchtrace.analysis.diff import SegmentDiff, TimingChange, TraceDiff, WarmUp
from launchtrace.render.escape import terminal, terminal_lines
from launchtrace.topology import ChangeKind, DiffEntry, FieldChange, format_entry, format_value

__all__ = [
    "counts_text",
    "diff_as_json",
    "diff_as_markdown",
    "diff_as_text",
    "format_ns",
    "plural",
    "topology_lines",
]

_INDEX = re.compile(r"^#\d+(?:->#\d+)? ")


def plural(n: int, word: str, many: str | None = None) -> str:
    """``"1 occurrence"``, ``"2 occurrences"``."""
    return f"{n} {word if n == 1 else (many or word + 's')}"


def format_ns(ns: float) -> str:
    """A duration for people: ``812.3 us``, ``6.58 ms``, ``5.34 s``; ``-`` for NaN."""
    if math.isnan(ns):
        return "-"
    if abs(ns) < 1e6:
        return f"{ns / 1e3:.1f} us"
    if abs(ns) < 1e9:
        return f"{ns / 1e6:.2f} ms"
    return f"{ns / 1e9:.2f} s"


def _pct(change: float) -> str:
    return "-" if math.isnan(change) else f"{change * 100:+.1f}%"


def counts_text(counts: dict[str, int]) -> str:
    """``"1 inserted, 0 removed, 2 changed"``, then ``", 1 moved"`` only when a launch moved (the three counts
    read as they always did; a move is a topology change, so it is said whenever there is one)."""
    text = f"{counts['inserted']} inserted, {counts['removed']} removed, {counts['changed']} changed"
    return text + (f", {counts['moved']} moved" if counts.get("moved") else "")


def _summary(result: TraceDiff) -> str:
    if result.equal:
        return "topology: equal"
    return f"topology: differs ({counts_text(result.counts)})"


def _ranges(occurrences: Sequence[int], limit: int = 12) -> str:
    """``[0, 1, 2, 5]`` -> ``"#0-#2, #5"`` (at most ``limit`` pieces, then ``...``)."""
    pieces: list[str] = []
    start = prev = None
    for k in [*occurrences, None]:
        if start is not None and (k is None or k != prev + 1):
            pieces.append(f"#{start}" if start == prev else f"#{start}-#{prev}")
            start = None
        if k is not None and start is None:
            start = k
        prev = k
    return ", ".join(pieces[:limit]) + (", ..." if len(pieces) > limit else "")


def _entry_index(e: DiffEntry) -> str:
    if e.kind == ChangeKind.INSERTED:
        return f"#{e.index_b}"
    if e.kind == ChangeKind.REMOVED or e.index_a == e.index_b:
        return f"#{e.index_a}"
    return f"#{e.index_a}->#{e.index_b}"


def _entry_lines(entries: Sequence[DiffEntry], limit: int) -> list[str]:
    """One line per distinct change, the positions it happened at listed together."""
    groups: dict[str, list[str]] = {}
    for e in entries:
        text = _INDEX.sub("", format_entry(e), count=1)
        groups.setdefault(text, []).append(_entry_index(e))
    lines = []
    for text, where in list(groups.items())[:limit]:
        shown = ", ".join(where[:8]) + (f" and {len(where) - 8} more" if len(where) > 8 else "")
        lines.append(f"  {shown} {text}")
    if len(groups) > limit:
        lines.append(f"  ... {len(groups) - limit} more")
    return lines


def _segment_groups(result: TraceDiff) -> list[tuple[list[SegmentDiff], tuple[str, ...]]]:
    """Segments with entries, identical ones (same scope, record counts and changes) grouped."""
    groups: dict[tuple, list[SegmentDiff]] = {}
    for seg in result.segments:
        if seg.entries:
            key = (seg.name, seg.count_a, seg.count_b, tuple(format_entry(e) for e in seg.entries))
            groups.setdefault(key, []).append(seg)
    return [(segs, key[3]) for key, segs in groups.items()]


def _segment_head(segs: list[SegmentDiff]) -> str:
    seg = segs[0]
    side = "" if seg.count_a and seg.count_b else (" (only in B)" if seg.count_b else " (only in A)")
    where = (
        f"#{seg.occurrence}" if len(segs) == 1 else f"{len(segs)} occurrences {_ranges([s.occurrence for s in segs])}"
    )
    return f"scope {seg.name} {where}{side}: {seg.count_a} -> {seg.count_b} records"


def _warmup_line(warm: Sequence[WarmUp]) -> str:
    parts: dict[tuple, list[WarmUp]] = {}
    for w in warm:
        parts.setdefault((w.side, w.scope, w.steps), []).append(w)
    said = []
    for (side, scope, steps), ws in parts.items():
        runs = ("runs " if len(ws) > 1 else "run ") + ", ".join(str(w.run + 1) for w in ws[:6])
        runs += " ..." if len(ws) > 6 else ""
        first = format_ns(max(w.first_ns for w in ws))
        median = format_ns(sorted(w.median_ns for w in ws)[len(ws) // 2])
        took = f"the first up to {first}" if len(ws) > 1 else f"the first {first}"
        said.append(f"{side} {runs}: first {plural(steps, 'step')} of {scope!r} ({took}; median step {median})")
    return "timing: warm-up left out: " + "; ".join(said)


def _timing_line(t: TimingChange) -> str:
    v = t.verdict
    call = v.verdict
    folded = []
    if t.folded_a or t.folded_b:
        folded.append(f" [launches from fold summaries, recorded totals used: {t.folded_a}/{t.folded_b}]")
    q = _quantile_name(t)
    per_step = f"{q} {format_ns(t.low_a_ns)} -> {format_ns(t.low_b_ns)}"
    if q != "median":
        per_step += f", median {format_ns(t.median_a_ns)} -> {format_ns(t.median_b_ns)}"
    return f"  {call}: {t.group}: per step {per_step}; {v.reason}" + _split_text(t) + "".join(folded)


def _split_text(t: TimingChange) -> str:
    """Where a slower or faster step's time went: in launches or between them."""
    if t.verdict.verdict not in ("slower", "faster") or math.isnan(t.in_launches_a_ns + t.in_launches_b_ns):
        return ""
    return (
        f"; median step in launches {format_ns(t.in_launches_a_ns)} -> {format_ns(t.in_launches_b_ns)}, "
        f"outside them {format_ns(t.outside_a_ns)} -> {format_ns(t.outside_b_ns)}"
    )


def _quantile_name(t: TimingChange) -> str:
    return "median" if t.quantile == 0.5 else f"p{t.quantile * 100:g}"


_ORDER = {"slower": 0, "faster": 1, "inconclusive": 2, "same": 3}


def _timing_lines(result: TraceDiff, limit: int) -> list[str]:
    tested = [t for t in result.timing if t.verdict.basis != "insufficient"]
    few = len(result.timing) - len(tested)
    steps = sorted({t.verdict.basis for t in tested})
    basis = {"runs": "run-level test", "steps-one-run": "steps within runs"}
    lines = [
        f"timing: per-step totals of {plural(result.runs_a, 'run')} (A) against {plural(result.runs_b, 'run')} "
        f"(B); verdicts rest on {', '.join(basis[b] for b in steps) or 'nothing (too few steps)'}"
    ]
    if result.warmup:
        lines.append(_warmup_line(result.warmup))
    for d in result.drift:
        lines.append(f"timing: drift: {d.describe()}")
    if any(d.applied for d in result.drift):
        lines.append("timing: kernels and scopes below are judged relative to their run's speed (--absolute: raw)")
    counts = result.verdict_counts()
    said = ", ".join(f"{n} {word}" for word, n in counts.items())
    lines.append(
        f"timing: {said} over {plural(len(result.timing), 'group')}"
        + (f" ({few} with too few steps: inconclusive)" if few else "")
    )
    ordered = sorted(result.timing, key=lambda t: _ORDER[t.verdict.verdict])
    lines.extend(_timing_line(t) for t in ordered[:limit])
    if len(ordered) > limit:
        lines.append(f"  ... {len(ordered) - limit} more")
    return lines


def diff_as_text(result: TraceDiff, limit: int = 50) -> str:
    """Lines for a terminal: the verdict, each group of identical changes once, then the timing verdicts."""
    lines = [_summary(result), *topology_lines(result, limit)]
    lines.extend(_timing_lines(result, limit))
    return terminal_lines(lines)


VARYING_AT = 3
"""Occurrences of a scope whose changes differ only in their values (a count that grows every step) are shown
as one block once this many distinct ones share their shape."""


def _entry_shape(e: DiffEntry) -> tuple:
    """What a change is apart from its values: the same position, kernel, call site and changed fields."""
    if e.kind != ChangeKind.CHANGED:
        return (format_entry(e),)
    return (e.index_a, e.index_b, e.record.kernel, e.record.site, tuple((f.field, f.name) for f in e.fields))


def _blocks(result: TraceDiff) -> list[list[list[SegmentDiff]]]:
    """The groups of identical occurrences, those of one scope whose changes share their shape together."""
    blocks: dict[tuple, list[list[SegmentDiff]]] = {}
    for segs, _ in _segment_groups(result):
        seg = segs[0]
        key = (seg.name, seg.count_a, seg.count_b, tuple(_entry_shape(e) for e in seg.entries))
        blocks.setdefault(key, []).append(segs)
    out: list[list[list[SegmentDiff]]] = []
    for groups in blocks.values():
        out.extend([groups] if len(groups) >= VARYING_AT else [[g] for g in groups])
    return out


def _values(f: FieldChange) -> str:
    return f"{format_value(f.before)} -> {format_value(f.after)}"


def _varying_lines(groups: list[list[SegmentDiff]], limit: int) -> list[str]:
    """One line per changed position, its values in the first occurrences and the last."""
    first = groups[0][0]
    every = sorted((s for segs in groups for s in segs), key=lambda s: s.occurrence)
    lines = [_segment_head(every) + ", values differ"]
    order = sorted(groups, key=lambda segs: segs[0].occurrence)
    shown = order[:3] + ([order[-1]] if len(order) > 3 else [])
    for j, e in enumerate(first.entries[:limit]):
        if e.kind != ChangeKind.CHANGED:
            lines.extend(_entry_lines([e], 1))
            continue
        names = ", ".join(f"{f.field} {f.name}" if f.name else f.field for f in e.fields)
        said = []
        for segs in shown:
            fields = segs[0].entries[j].fields
            vals = ", ".join(_values(f) for f in fields)
            said.append(f"{vals} in {_ranges([s.occurrence for s in segs], 3)}")
        gap = " ... " if len(order) > 4 else "; "
        text = "; ".join(said[:3]) + (gap + said[3] if len(said) > 3 else "")
        where = f"{_entry_index(e)} {e.record.kernel} (from {e.record.site})"
        lines.append(f"  {where}: {names}: {text} ({len(order)} different)")
    if len(first.entries) > limit:
        lines.append(f"  ... {len(first.entries) - limit} more")
    return lines


def topology_lines(result: TraceDiff, limit: int = 50) -> list[str]:
    """The topology changes, identical ones grouped, as lines (not yet escaped: each output escapes them for
    its own context). Occurrences whose changes differ only in their values are one block
    (:data:`VARYING_AT`); at most ``limit`` blocks, then ``... N more``."""
    lines = []
    blocks = _blocks(result)
    for groups in blocks[:limit]:
        if len(groups) > 1:
            lines.extend(_varying_lines(groups, limit))
            continue
        lines.append(_segment_head(groups[0]))
        lines.extend(_entry_lines(groups[0][0].entries, limit))
    if len(blocks) > limit:
        lines.append(f"... {len(blocks) - limit} more scopes' changes (--format json lists them all)")
    return lines


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return None if math.isnan(value) or math.isinf(value) else value
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
    v = t.verdict
    return {
        "group": t.group,
        "kind": t.kind,
        "scope": t.scope,
        "name": t.name,
        "median_a_ns": _jsonable(t.median_a_ns),
        "median_b_ns": _jsonable(t.median_b_ns),
        "low_a_ns": _jsonable(t.low_a_ns),
        "low_b_ns": _jsonable(t.low_b_ns),
        "quantile": t.quantile,
        "launches_a": t.launches_a,
        "launches_b": t.launches_b,
        "folded_a": t.folded_a,
        "folded_b": t.folded_b,
        "in_launches_a_ns": _jsonable(t.in_launches_a_ns),
        "in_launches_b_ns": _jsonable(t.in_launches_b_ns),
        "outside_a_ns": _jsonable(t.outside_a_ns),
        "outside_b_ns": _jsonable(t.outside_b_ns),
        "effect": _jsonable(v.effect),
        "ci_low": _jsonable(v.ci_low),
        "ci_high": _jsonable(v.ci_high),
        "p_value": _jsonable(v.p_value),
        "verdict": v.verdict,
        "decide": v.decide,
        "significant": v.significant,
        "direction": v.direction,
        "basis": v.basis,
        "n_runs_a": v.n_runs_a,
        "n_runs_b": v.n_runs_b,
        "n_steps_a": v.n_steps_a,
        "n_steps_b": v.n_steps_b,
        "detectable_change": _jsonable(v.detectable_change),
        "reason": v.reason,
    }


def diff_as_json(result: TraceDiff) -> dict[str, Any]:
    """A JSON-ready dict: ``equal``, ``counts``, ``verdicts`` (rows per answer), ``options``, ``runs_a`` /
    ``runs_b``, ``segments`` (with ``entries``), ``timing`` (one object per group, the verdict's fields inline:
    ``verdict`` is ``slower``, ``faster``, ``same`` or ``inconclusive``), ``drift`` (runs that ran slower or
    faster in every kernel) and ``warmup``."""
    return {
        "equal": result.equal,
        "counts": result.counts,
        "verdicts": result.verdict_counts(),
        "options": {k: _jsonable(v) for k, v in result.options},
        "runs_a": result.runs_a,
        "runs_b": result.runs_b,
        "segments": [
            {
                "name": s.name,
                "occurrence": s.occurrence,
                "run": s.run,
                "count_a": s.count_a,
                "count_b": s.count_b,
                "entries": [_entry_json(e) for e in s.entries],
            }
            for s in result.segments
        ],
        "timing": [_timing_json(t) for t in result.timing],
        "drift": [
            {
                "side": d.side,
                "run": d.run,
                "factor": _jsonable(d.drift.factor),
                "kernels": d.drift.kernels,
                "agreeing": d.drift.agreeing,
                "applied": d.applied,
                "summary": d.describe(),
            }
            for d in result.drift
        ],
        "warmup": [
            {
                "side": w.side,
                "run": w.run,
                "scope": w.scope,
                "steps": w.steps,
                "first_ns": _jsonable(w.first_ns),
                "median_ns": _jsonable(w.median_ns),
            }
            for w in result.warmup
        ],
    }


_MD_PUNCTUATION = str.maketrans({c: "\\" + c for c in "`*_[]~"})


def _md(text: object) -> str:
    """Table-cell text: control characters escaped, pipes and HTML neutralised, and the characters that make
    Markdown markup backslash-escaped (brackets: no link ``[x](javascript:...)`` or image ``![i](http://...)`` can
    form; emphasis, strike-through, code), so a name from a trace renders as the text it is."""
    s = terminal(text).replace("\\", "\\\\").replace("|", "\\|").replace("&", "&amp;").replace("<", "&lt;")
    return s.translate(_MD_PUNCTUATION)


def _md_code(text: object) -> str:
    """Text inside a Markdown code span, where backslashes are shown as they are: pipes escaped (a table reads them
    first), a backtick, which would end the span, shown as a look-alike (U+02CB)."""
    return terminal(text).replace("|", "\\|").replace("`", "\u02cb")


def diff_as_markdown(result: TraceDiff, limit: int = 100) -> str:
    """A Markdown section for a pull request: the verdict, a table of (grouped) entries, a table of timing
    verdicts."""
    lines = [f"### launchtrace diff: {_summary(result)}", ""]
    rows = [(segs, e) for segs, _ in _segment_groups(result) for e in segs[0].entries]
    if rows:
        lines += [
            "| scope | kind | # | kernel | what changed | site |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        for segs, e in rows[:limit]:
            what = ", ".join(
                f"{f.field} {f.name} {format_value(f.before)} -> {format_value(f.after)}".replace("  ", " ")
                for f in e.fields
            )
            idx = e.index_a if e.index_a is not None else e.index_b
            if e.kind == ChangeKind.MOVED:
                idx, what = f"{e.index_a}->{e.index_b}", f"position {e.index_a} -> {e.index_b}"
            where = f"#{segs[0].occurrence}" if len(segs) == 1 else f"{_ranges([s.occurrence for s in segs])}"
            lines.append(
                f"| {_md(segs[0].name)} {where} | {e.kind} | {idx} | `{_md_code(e.record.kernel)}` "
                f"| {_md(what)} | {_md(e.record.site)} |"
            )
        if len(rows) > limit:
            lines.append(f"\n{len(rows) - limit} more entries not shown.")
        lines.append("")
    timing = [t for t in result.timing if t.verdict.basis != "insufficient"]
    if timing:
        lines += [
            f"| group | {_quantile_name(timing[0])} step A | {_quantile_name(timing[0])} step B | change | CI | p "
            "| rests on | verdict |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for t in timing:
            v = t.verdict
            p = "-" if v.p_value is None else f"{v.p_value:.2g}"
            call = v.verdict
            lines.append(
                f"| {_md(t.group)} | {format_ns(t.low_a_ns)} | {format_ns(t.low_b_ns)} | {_pct(v.effect)} "
                f"| {_pct(v.ci_low)} .. {_pct(v.ci_high)} | {p} | {v.basis} | {call} |"
            )
        lines.append("")
        lines.extend(f"- drift: {_md(d.describe())}" for d in result.drift)
        lines.extend(
            f"- {_md(t.group)}: {t.verdict.verdict}: {_md(t.verdict.reason)}"
            for t in timing
            if t.verdict.verdict != "same"
        )
    return "\n".join(lines) + "\n"
