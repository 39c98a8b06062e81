"""``launchtrace report``: the one self-contained HTML page to open after a run (no network at view time).

Sections, top to bottom (the order a Warp engineer asks the questions in):

1. header: service, host, pids, devices, versions, wall time, device operations, spans, folded and dropped;
2. step durations: one point per occurrence of each outermost scope (warm-up and outliers show at a glance;
   click a point to show that step in the timeline); the catch-all ``<no scope>`` steps (work outside every
   scope) are counted under the chart, not plotted, so they never squash the steps, and a step's point leaves
   out the compile/load inside it (said under the chart, shown on hover);
3. kernel time: per scope (a selector; "all" by default), a bar per kernel of its share of the time and a
   table of count, total, p50, p95 and share (in the manner of Holistic Trace Analysis' kernel breakdown);
4. timeline of a chosen step (median and slowest by default, any occurrence from a selector, or the whole
   run): a time axis with ticks, zoom with the wheel, pan by dragging (as in Perfetto and Jaeger), one row
   group per thread and per stream, scopes nested above the work they enclose, hover details with owners,
   arguments and call site; a folded run is one hatched block labelled with its count;
5. values (``--value-stats`` runs that wrote NaN/Inf): the first launch that did, with kernel, step, array
   and site, then the others;
6. dataflow: the graph of the representative step (Warp's ``Tape.visualize`` style, owner labels) at full
   size in a scrolling box (click: fit to the width), and the hazards found over the whole run;
7. diff against a baseline, when given: topology changes first, then the timing verdicts.

An input larger than the report's detail (``--detail-spans``, read by
:func:`launchtrace.analysis.detail.read_detail`) gets a section under the header that says so: how much is shown
in detail (sections 3-7 are of those spans, plus the slowest left-out occurrence of each step name in the
timeline), what was left out, and the whole input's exact totals per step name and per kernel; the header counts
the whole input and the step chart plots at most 20,000 of its steps (every k-th, and the slowest of each name).
:func:`report_chunks` gives the page in pieces (the data island view by view) for writing as it is made.

The header says how long compiling and loading modules took ("compile/load"): that time is in no kernel's
row and no launch's bar.

The CSS and JavaScript are inlined from ``report.css`` / ``report.js`` next to this module. Trace strings never
reach the page as markup: the data sits in a ``<script type="application/json">`` island with ``<``, ``>`` and
``&`` escaped as ``\\u003c`` etc. and is drawn with ``textContent``; server-side text is HTML-escaped; the graph
SVG (whose text Graphviz escaped) is embedded as a ``data:`` image, where it can neither run script nor add
markup to the page. Times inside the island are nanoseconds relative to each view's origin, so they stay exact
in JavaScript numbers.

Example::

    from launchtrace.analysis.overview import overview
    from launchtrace.render.html import render_report
    html = render_report(traces, overview(traces), title="nightly")
    open("report.html", "w").write(html)
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import math
from collections.abc import Iterator, Sequence
from importlib import resources
from typing import TYPE_CHECKING, Any

from launchtrace.analysis.overview import Overview
from launchtrace.analysis.runs import Occurrence, merge_run
from launchtrace.model import TraceData
from launchtrace.render.escape import html_text, json_for_script, json_text, script_safe
from launchtrace.render.timeline import TimelineItem, timeline_items
from launchtrace.steps import NO_SCOPE, STEP_ROOT

if TYPE_CHECKING:
    from launchtrace.analysis.detail import Detail

__all__ = ["MAX_TIMELINE_ITEMS", "render_report", "report_chunks"]

MAX_TIMELINE_ITEMS = 50_000  # beyond this a browser struggles; later steps are listed, not embedded
MAX_VALUE_LINES = 20
CATCH_ALL = (NO_SCOPE, STEP_ROOT)  # the steps of work outside every scope (launchtrace.steps)


def _asset(name: str) -> str:
    return resources.files("launchtrace.render").joinpath(name).read_text(encoding="utf-8")


class _ViewText:
    """The JSON of the timeline views, written here rather than by :mod:`json` from a dict per bar: a record's
    bar is in its step's view and in the whole run's, with the same hover rows, names and row label, so each of
    those is encoded (and made script-safe) once and reused. The text is what ``json_for_script`` of the dict
    ``{"id", "label", "origin", "items": [{"l", "lk", "k", "n", "s", "e", "d", "c", "r", "h"}, ...]}`` gives,
    to the byte: a value that is not a plain ``int`` or ``str`` goes through the same encoder."""

    def __init__(self) -> None:
        self._strings: dict[str, str] = {}
        self._details: dict[int, tuple[tuple, str]] = {}  # by the details tuple's id, with the tuple (kept)
        self._heads: dict[tuple[str, str, str, str], str] = {}  # (lane, lane kind, kind, name) -> their JSON
        self._pairs: dict[tuple[str, str], str] = {}  # a hover row of two strings -> its JSON

    def text(self, value: Any) -> str:
        """``value`` as script-safe JSON; strings remembered."""
        if type(value) is str:
            known = self._strings.get(value)
            if known is None:
                known = self._strings[value] = script_safe(json_text(value))
            return known
        if type(value) is int:
            return str(value)
        return script_safe(json_text(value))

    def details(self, rows: tuple) -> str:
        """The hover rows' JSON, once per rows tuple; each ``(key, value)`` row of two strings once per page (a
        call site's launches repeat most of theirs: kernel, site, arrays)."""
        known = self._details.get(id(rows))
        if known is not None and known[0] is rows:
            return known[1]
        if type(rows) is tuple:
            pairs = self._pairs
            parts = []
            for row in rows:
                if type(row) is tuple and len(row) == 2 and type(row[0]) is type(row[1]) is str:
                    text = pairs.get(row)
                    if text is None:
                        text = pairs[row] = script_safe(json_text(row))  # equal pairs of strings write the same
                else:
                    text = script_safe(json_text(row))
                parts.append(text)
            found = f"[{','.join(parts)}]"
        else:
            found = script_safe(json_text(rows))
        self._details[id(rows)] = (rows, found)
        return found

    def view(self, vid: str, label: str, items: Sequence[TimelineItem], origin: int) -> str:
        text, details, heads = self.text, self.details, self._heads
        bars = []
        for it in items:
            lane, lane_kind, kind, name = it.lane, it.lane_kind, it.kind, it.name
            start, end = it.start_ns - origin, max(it.end_ns, it.start_ns) - origin
            depth, count, record = it.depth, it.count, it.record
            if type(lane) is type(lane_kind) is type(kind) is type(name) is str:  # one bar's first four, once
                head = heads.get((lane, lane_kind, kind, name))
                if head is None:
                    head = heads[(lane, lane_kind, kind, name)] = (
                        f'{{"l":{text(lane)},"lk":{text(lane_kind)},"k":{text(kind)},"n":{text(name)},'
                    )
            else:
                head = f'{{"l":{text(lane)},"lk":{text(lane_kind)},"k":{text(kind)},"n":{text(name)},'
            if type(start) is type(end) is type(depth) is type(count) is type(record) is int:
                bars.append(
                    f'{head}"s":{start},"e":{end},"d":{depth},"c":{count},"r":{record},"h":{details(it.details)}}}'
                )
            else:  # not a plain int (a bool is written true): what the encoder writes
                bars.append(
                    f'{head}"s":{text(start)},"e":{text(end)},"d":{text(depth)},"c":{text(count)},'
                    f'"r":{text(record)},"h":{details(it.details)}}}'
                )
        return f'{{"id":{text(vid)},"label":{text(label)},"origin":{text(str(origin))},"items":[{",".join(bars)}]}}'


def _view(
    vid: str, label: str, data: TraceData, details: dict[int, tuple[Any, tuple]], texts: _ViewText
) -> tuple[str, int]:
    items = timeline_items([data], details)
    origin = min((it.start_ns for it in items if it.start_ns), default=0)
    return texts.view(vid, label, items, origin), len(items)


def _step_id(o: Occurrence) -> str:
    return f"{o.name}#{o.index}"


def _views(
    traces: Sequence[TraceData],
    ov: Overview,
    extra: Sequence[tuple[str, str, TraceData]] = (),
    whole: str = "whole run (every thread)",
    slowest: tuple[str, str, TraceData] | None = None,
) -> tuple[list[str], list[str], int]:
    """The embedded timeline views, as script-safe JSON: median and slowest first, then ``extra`` (a large
    input's slowest left-out steps), then every step in run order, then the whole run, while they fit under
    :data:`MAX_TIMELINE_ITEMS`. ``whole`` labels the view of every trace; ``slowest`` (a large input's slowest
    step, when it was left out of the detail) replaces the detail's slowest among the defaults. Returns (views,
    default ids, steps left out)."""
    order: list[tuple[str, str, TraceData]] = []
    defaults = []
    tagged = [("chosen", o) for o in ov.chosen] or [("median", ov.median), ("slowest", ov.slowest)]
    for tag, occ in tagged:
        if tag == "slowest" and slowest is not None:
            order.append(slowest)
            defaults.append(slowest[0])
        elif occ is not None:
            order.append((_step_id(occ), f"{occ.name} #{occ.index} ({tag})", occ.data))
            defaults.append(_step_id(occ))
    order.extend(extra)
    order.extend((_step_id(o), f"{o.name} #{o.index}", o.data) for o in ov.steps)
    order.append(("run", whole, merge_run(list(traces))))
    views, seen, used, left = [], set(), 0, 0
    details: dict[int, tuple[Any, tuple]] = {}  # a record's hover details, once for its step's view and the run's
    texts = _ViewText()
    for vid, label, data in order:
        if vid in seen:
            continue
        seen.add(vid)
        if used >= MAX_TIMELINE_ITEMS:  # full: not worth laying the step out to find that it does not fit
            left += 1
            continue
        view, n = _view(vid, label, data, details, texts)
        if used + n > MAX_TIMELINE_ITEMS and views:
            left += 1
            continue
        used += n
        views.append(view)
    return views, defaults, left


def _kernels(ov: Overview) -> dict[str, list[dict[str, Any]]]:
    out = {}
    for scope, rows in ov.kernels.items():
        out[scope] = [
            {
                "k": r.stats.kernel,
                "op": str(r.stats.op),
                "c": r.stats.count,
                "t": r.stats.total_ns,
                "p50": _num(r.stats.p50_ns),
                "p95": _num(r.stats.p95_ns),
                "sh": r.share,
            }
            for r in rows
        ]
    return out


def _num(value: Any) -> float | None:
    try:
        f = float(value)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def _when(ns: int) -> str:
    if not ns:
        return ""
    return datetime.datetime.fromtimestamp(ns / 1e9, tz=datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _header(ov: Overview, title: str, large: Detail | None = None) -> str:
    f = ov.facts
    if large is not None and large.large:  # the whole input's exact figures, not the detail's
        t = large.totals
        f = dataclasses.replace(
            f, start_ns=t.start_ns, end_ns=t.end_ns, launches=t.operations, spans=t.spans, dropped=t.dropped,
            traces=t.traces, threads=len(t.threads) or f.threads, devices=tuple(sorted(t.devices)) or f.devices,
            pids=tuple(t.pids) or f.pids,
        )  # fmt: skip
    wall = (f.end_ns - f.start_ns) / 1e9 if f.end_ns > f.start_ns else 0.0
    facts = [
        ("service", f.service),
        ("host", f.host),
        ("pid", ", ".join(f.pids)),
        ("devices", ", ".join(f.devices)),
        ("versions", ", ".join(f"{k} {v}" for k, v in f.versions)),
        ("started", _when(f.start_ns)),
        ("traced wall time", f"{wall:.3f} s"),
        ("device operations", f"{f.launches:,}"),
        ("folded", f"{f.folded:,} (times from summaries)"),
        ("compile/load", ov.loads.line().removeprefix("compile/load: ") if ov.loads.count else "none recorded"),
        ("spans", f"{f.spans:,}"),
        ("dropped spans", f"{f.dropped:,}"),
        ("traces / threads", f"{f.traces:,} / {f.threads:,}"),
    ]
    cells = "".join(
        f'<div class="fact" data-fact="{html_text(k)}"><dt>{html_text(k)}</dt><dd>{html_text(v or "-")}</dd></div>'
        for k, v in facts
    )
    return f'<header id="header"><h1>{html_text(title)}</h1><dl class="facts">{cells}</dl></header>'


def _timing_table(rows: Sequence[Any]) -> str:
    """The timing verdicts (``TimingChange`` rows): per-step figures, the effect with its interval, what the
    verdict rests on and its reason in words (see ``launchtrace.analysis.verdicts``)."""
    from launchtrace.render.diff_text import format_ns

    def pct(x: float) -> str:
        return "-" if not math.isfinite(x) else f"{x * 100:+.1f}%"

    head = "".join(
        f"<th>{c}</th>" for c in ("group", "per step A", "per step B", "change", "CI", "p", "rests on", "verdict")
    )
    body = []
    for t in rows:
        v = t.verdict
        call = v.verdict  # slower, faster, same or inconclusive
        q = "median" if t.quantile == 0.5 else f"p{t.quantile * 100:g}"
        cells = [
            html_text(t.group),
            html_text(f"{q} {format_ns(t.low_a_ns)}"),
            html_text(f"{q} {format_ns(t.low_b_ns)}"),
            pct(v.effect),
            f"{pct(v.ci_low)} .. {pct(v.ci_high)}",
            "-" if v.p_value is None else f"{v.p_value:.2g}",
            html_text(v.basis),
            f'<span title="{html_text(v.reason)}">{html_text(call)}</span>',
        ]
        body.append(
            f'<tr data-verdict="{html_text(call)}">' + "".join(f"<td>{c}</td>" for c in cells) + "</tr>"
            f'<tr class="reason"><td colspan="8">{html_text(v.reason)}</td></tr>'
        )
    return f'<table class="stats timing"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def _diff_section(diff: Any, note: str = "") -> str:
    """Topology changes first, then the timing verdicts, from a ``TraceDiff`` (its public fields only); ``note``:
    what the diff compares when the inputs were larger than their detail."""

    from launchtrace.render.diff_text import counts_text, topology_lines

    parts = [
        '<section id="diff"><h2>Diff against the baseline</h2>'
        + (f'<p class="note" id="diff-detail">{html_text(note)}</p>' if note else ""),
        '<h3>Topology</h3><p class="verdict {cls}">{text}</p>'.format(
            cls="same" if diff.equal else "changed",
            text=html_text("topology: equal" if diff.equal else f"topology: differs ({counts_text(diff.counts)})"),
        ),
    ]
    lines = topology_lines(diff)
    if len(lines) > 400:
        lines = [*lines[:400], "..."]
    if lines:
        parts.append('<pre class="diff">' + "\n".join(html_text(x) for x in lines) + "</pre>")
    rows = list(getattr(diff, "timing", ()) or ())
    parts.append("<h3>Timing</h3>")
    if rows:
        parts.append(_timing_table(rows))
    else:
        parts.append('<p class="note">no timing comparison</p>')
    parts.append("</section>")
    return "".join(parts)


def _load_ns(o: Occurrence) -> int:
    """Compile/load time inside a step (its ``warp.module.load`` scopes): left out of the step's point."""
    return sum(sc.duration_ns for sc in o.data.scopes.values() if sc.kind == "load" and sc.end_ns)


def _step_point(o: Occurrence) -> dict[str, Any]:
    """One point of the step chart: its duration without the compile/load inside it (``ld``, shown on hover)."""
    load = _load_ns(o)
    return {
        "n": o.name,
        "i": o.index,
        "s": str(o.start_ns),
        "d": max(0, o.duration_ns - load),
        "ld": load,
        "v": _step_id(o),
    }


def _load_note(plotted: Sequence[Occurrence]) -> str:
    loaded = [(o, _load_ns(o)) for o in plotted if _load_ns(o)]
    if not loaded:
        return ""
    total = sum(ns for _, ns in loaded) / 1e6
    which = ", ".join(f"{o.name} #{o.index}" for o, _ in loaded[:5]) + (" ..." if len(loaded) > 5 else "")
    return (
        f'<p class="note" id="steps-loads">Compile/load time ({total:,.1f} ms, in {html_text(which)}) is left out '
        "of the points, so one cold start does not flatten the rest; hover a point to see it.</p>"
    )


def _apart_note(apart: Sequence[Occurrence]) -> str:
    """What the step chart leaves out: the catch-all roots of work outside every scope, counted."""
    if not apart:
        return ""
    total = sum(o.duration_ns for o in apart) / 1e6
    return (
        f'<p class="note" id="steps-apart">Not plotted: {len(apart):,} {html_text(NO_SCOPE)} step(s), the work '
        f"outside every scope ({total:,.1f} ms in all; in the timeline's step list).</p>"
    )


def _values_section(ov: Overview) -> str:
    """The launches whose outputs held NaN/Inf: the first one in words, then each (kernel, array) once."""
    first = ov.values[0]
    seen: set[tuple[str, str]] = set()
    rest = []
    for bad in ov.values[1:]:
        if (bad.kernel, bad.param) not in seen and (bad.kernel, bad.param) != (first.kernel, first.param):
            seen.add((bad.kernel, bad.param))
            rest.append(bad)
    items = "".join(f"<li>{html_text(b.line())}</li>" for b in rest[:MAX_VALUE_LINES])
    more = len(rest) - MAX_VALUE_LINES
    return (
        '<section id="values" class="values"><h2>Values</h2>'
        f'<p class="bad">{html_text(first.line())}</p>'
        f'<p class="note">{html_text(ov.values_steps)}. Value statistics of every written array '
        f"(--value-stats); {len({id(b.record) for b in ov.values}):,} launches wrote NaN or Inf.</p>"
        + (f"<h3>Then</h3><ul>{items}</ul>" if items else "")
        + (f'<p class="note">and {more:,} more</p>' if more > 0 else "")
        + "</section>"
    )


def _failed_section(ov: Overview) -> str:
    """The calls that raised: a launch that failed ran nothing, and a program that caught the error looked fine."""
    items = "".join(
        f"<li>{f.count:,} x {html_text(f.what)}{html_text(f' (from {f.site})' if f.site else '')}: "
        f"<code>{html_text(f.error)}</code></li>"
        for f in ov.failed[:MAX_VALUE_LINES]
    )
    return (
        '<section id="failed" class="values"><h2>Failed calls</h2>'
        f'<p class="bad">{ov.failed_total:,} call(s) raised; a launch that raised ran nothing on the device.</p>'
        f"<ul>{items}</ul></section>"
    )


def render_report(traces: Sequence[TraceData], ov: Overview, **options: Any) -> str:
    """The report page as a string (see the module docstring): :func:`report_chunks` joined, same options."""
    return "".join(report_chunks(traces, ov, **options))


def report_chunks(
    traces: Sequence[TraceData],
    ov: Overview,
    *,
    diff: Any = None,
    graph_svg: bytes | None = None,
    graph_note: str = "",
    hazards: Sequence[str] = (),
    title: str = "launchtrace report",
    large: Detail | None = None,
    diff_note: str = "",
) -> Iterator[str]:
    """The report page in pieces, for writing as it is made: the data island goes out view by view. ``ov`` is the
    :func:`overview` of ``traces``; ``diff`` a ``TraceDiff`` against the baseline; ``graph_svg`` the SVG bytes of
    the representative step's dataflow graph (``None``: the section says why, from ``graph_note``); ``hazards``
    one line each; ``large``: how ``traces`` were read (:func:`~launchtrace.analysis.detail.read_detail`), for the
    notice and the exact totals of an input larger than its detail; ``diff_note``: what the diff compares then."""
    big = large is not None and large.large
    if big:
        views, defaults, left_out = _views(
            traces, ov, _slowest_views(large), "the spans in detail (every thread)", _slowest_overall(large, ov)
        )
    else:
        views, defaults, left_out = _views(traces, ov)
    plotted = [o for o in ov.steps if o.name not in CATCH_ALL] or list(ov.steps)  # the catch-all steps apart
    shown = {id(o) for o in plotted}  # plotted is a part of ov.steps: by identity, not a scan that compares each
    apart = [o for o in ov.steps if id(o) not in shown]
    steps = _large_points(large) if big else [_step_point(o) for o in plotted]
    rep = ov.representative
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; img-src data:; '
        "style-src 'unsafe-inline'; script-src 'unsafe-inline'\">",
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{html_text(title)}</title>",
        f"<style>{_asset('report.css')}</style></head><body>",
        _header(ov, title, large),
        *([_large_section(large)] if big else []),
        '<nav><a href="#steps">steps</a><a href="#kernels">kernels</a><a href="#timeline-section">timeline</a>'
        + ('<a href="#values">values</a>' if ov.values else "")
        + ('<a href="#failed">failed calls</a>' if ov.failed else "")
        + '<a href="#dataflow">dataflow</a>'
        + ('<a href="#diff">diff</a>' if diff is not None else "")
        + "</nav>",
        '<section id="steps"><h2>Step durations</h2>'
        '<p class="note">One point per occurrence of each outermost scope, in run order. Click one to see it in the '
        "timeline.</p>"
        + (_sampled_note(large, len(steps)) if big else _apart_note(apart) + _load_note(plotted))
        + (f'<p class="note">{html_text(ov.inferred)}.</p>' if ov.inferred else "")
        + '<div id="steps-chart" class="chart"></div></section>',
        '<section id="kernels"><h2>Kernel time</h2>'
        + (
            '<p class="note" id="kernels-detail">Of the spans shown in detail (see above); the whole input\'s '
            "totals per kernel are in the large-input section.</p>"
            if big
            else ""
        )
        + '<label>scope <select id="kernel-scope"></select></label>'
        '<div id="kernel-chart" class="chart"></div><div id="kernel-table"></div></section>',
        '<section id="timeline-section"><h2>Timeline</h2>'
        '<div class="toolbar"><label>step <select id="view-select"></select></label>'
        '<button type="button" id="zoom-reset">reset zoom</button>'
        '<span class="note">wheel or W/S: zoom, drag or A/D: pan, hover: details</span></div>',
    ]
    if left_out:
        parts.append(f'<p class="note">{left_out:,} more step(s) not embedded (over {MAX_TIMELINE_ITEMS:,} bars).</p>')
    parts.append('<div id="timelines"></div><div id="tip" role="tooltip"></div></section>')
    if ov.values:
        parts.append(_values_section(ov))
    if ov.failed:
        parts.append(_failed_section(ov))
    parts.append('<section id="dataflow"><h2>Dataflow</h2>')
    if rep is not None:
        parts.append(
            f'<p class="note">The chosen step: {html_text(rep.name)} #{rep.index}.</p>'
            if ov.chosen
            else f'<p class="note">The representative step: {html_text(rep.name)} #{rep.index} (median duration of '
            f"{sum(1 for o in ov.steps if o.name == rep.name):,} occurrences).</p>"
        )
    if graph_svg:
        b64 = base64.b64encode(graph_svg).decode("ascii")
        parts.append(
            '<p class="note">At full size: scroll to pan; click the graph to fit it to the width (and back).</p>'
            f'<div class="graph"><img alt="dataflow graph" src="data:image/svg+xml;base64,{b64}"></div>'
        )
    else:
        parts.append(f'<p class="note">{html_text(graph_note or "no graph")}</p>')
    parts.append(f"<h3>Hazards ({'the spans in detail' if big else 'whole run'}, every thread)</h3>")
    if hazards:
        parts.append('<ul class="hazards">' + "".join(f"<li>{html_text(h)}</li>" for h in hazards) + "</ul>")
    else:
        parts.append('<p class="note" id="no-hazards">none found</p>')
    parts.append("</section>")
    if diff is not None:
        parts.append(_diff_section(diff, diff_note))
    for part in parts:
        yield part + "\n"
    parts.clear()
    yield '<script type="application/json" id="launchtrace-data">{"views":['
    for k, view in enumerate(views):
        yield ("," if k else "") + view
    yield (
        f'],"defaults":{json_for_script(defaults)},"steps":{json_for_script(steps)},'
        f'"kernels":{json_for_script(_kernels(ov))}}}</script>\n'
    )
    yield f"<script>{_asset('report.js')}</script>\n"
    yield "</body></html>\n"


MAX_KERNEL_ROWS = 50


def _slowest_views(large: Detail) -> list[tuple[str, str, TraceData]]:
    """A timeline view of each step name's slowest left-out occurrence (ids as the step chart's points)."""
    return [
        (f"{step.name}#{index}", f"{step.name} #{index} (slowest of those left out of the detail)", merge_run(traces))
        for step, index, traces in large.slowest
        if traces
    ]


def _slowest_overall(large: Detail, ov: Overview) -> tuple[str, str, TraceData] | None:
    """The view of the input's slowest step of the detail's slowest name, when it was left out of the detail
    and is slower than every step in it (the timeline then shows it by default)."""
    if ov.chosen or ov.slowest is None:
        return None
    for step, index, traces in large.slowest:
        if step.name == ov.slowest.name and step.duration_ns > ov.slowest.duration_ns and traces:
            label = f"{step.name} #{index} (slowest; left out of the detail)"
            return f"{step.name}#{index}", label, merge_run(traces)
    return None


def _large_points(large: Detail) -> list[dict[str, Any]]:
    """The step chart's points of a large input (:attr:`Detail.points`), the catch-all steps apart."""
    points = [p for p in large.points if p[1] not in CATCH_ALL] or large.points
    return [{"n": n, "i": i, "s": str(start), "d": d, "ld": 0, "v": f"{n}#{i}"} for _, n, i, start, d in points]


def _sampled_note(large: Detail, plotted: int) -> str:
    every = "every step" if large.stride == 1 else f"one step in {large.stride:,}, in run order,"
    return (
        f'<p class="note" id="steps-sampled">{plotted:,} points for the input\'s {large.totals.traces:,} steps: '
        f"{every} and the slowest of each name. A point is the step's root span, compile/load included.</p>"
    )


def _large_section(large: Detail) -> str:
    """The notice that the page shows part of the input in detail, and the whole input's exact totals."""
    t = large.totals
    shown_traces, shown_spans = t.traces - large.left_traces, t.spans - large.left_spans
    notice = (
        f"This input holds {t.spans:,} spans in {t.traces:,} traces ({t.operations:,} device operations), more "
        f"than the {large.detail_spans:,} spans a page shows in detail (--detail-spans). In detail: the first "
        f"{shown_spans:,} spans ({shown_traces:,} traces) - the timeline, kernel time, values, dataflow, hazards and "
        f"diff below are of those - and the slowest left-out occurrence of {len(large.slowest):,} step name(s), in the "
        f"timeline. "
        + (
            f"The first trace alone holds more: it is shown cut to its first spans ({large.cut_spans:,} of its "
            "spans left out). "
            if large.cut_spans
            else ""
        )
        + f"Left out of the detail: {large.left_traces:,} traces, {large.left_spans:,} spans, "
        f"{large.left_operations:,} device operations. The header, the step chart and the tables below count the "
        "whole input exactly."
    )
    rows = []
    for name, st in sorted(t.steps.items(), key=lambda kv: -kv[1].total_ns):
        mean = st.total_ns / st.count / 1e3 if st.count else 0.0
        rows.append(
            f"<tr><td>{html_text(name)}</td><td>{st.count:,}</td><td>{st.total_ns / 1e6:,.3f}</td>"
            f"<td>{mean:,.1f}</td><td>{st.min_ns / 1e3:,.1f}</td><td>{st.max_ns / 1e3:,.1f}</td></tr>"
        )
    kernels = sorted(t.kernels.items(), key=lambda kv: -kv[1].total_ns)
    total = sum(k.total_ns for _, k in kernels) or 1
    krows = [
        f"<tr><td>{html_text(op)}</td><td>{html_text(kernel)}</td><td>{k.operations:,}</td><td>{k.spans:,}</td>"
        f"<td>{k.total_ns / 1e6:,.3f}</td><td>{k.total_ns / total * 100:.1f}%</td></tr>"
        for (op, kernel), k in kernels[:MAX_KERNEL_ROWS]
    ]
    rest = kernels[MAX_KERNEL_ROWS:]
    more = (
        f'<p class="note">and {len(rest):,} more kernels ({sum(k.total_ns for _, k in rest) / 1e6:,.3f} ms)</p>'
        if rest
        else ""
    )
    return (
        '<section id="large-input"><h2>Large input: part of it in detail</h2>'
        f'<p class="bad" id="large-notice" data-left-traces="{large.left_traces}" data-left-spans="{large.left_spans}"'
        f' data-spans="{t.spans}" data-traces="{t.traces}">{html_text(notice)}</p>'
        "<h3>Steps (whole input, exact)</h3>"
        '<table class="stats" id="large-steps"><thead><tr><th>step</th><th>count</th><th>total ms</th>'
        "<th>mean us</th><th>min us</th><th>max us</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>"
        "<h3>Device operations (whole input, exact; time of the spans)</h3>"
        '<table class="stats" id="large-kernels"><thead><tr><th>op</th><th>kernel</th><th>operations</th>'
        "<th>spans</th><th>total ms</th><th>share</th></tr></thead><tbody>"
        + "".join(krows)
        + "</tbody></table>"
        + more
        + "</section>"
    )
