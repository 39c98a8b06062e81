"""``launchtrace report``: one self-contained HTML file (no network at view time).

The page holds the timeline of scopes and launches per thread and stream (hover for details), the diff
summary when one was computed, the dataflow graph as an embedded SVG image, and the per-kernel statistics
table. The CSS and JavaScript are inlined from ``report.css`` / ``report.js`` next to this module.

Trace strings never reach the page as markup: the timeline data sits in a ``<script
type="application/json">`` island with ``<``, ``>`` and ``&`` escaped as ``\\u003c`` etc. and is drawn with
``textContent``; tables and the diff text are HTML-escaped; the graph SVG (whose text Graphviz escaped) is
embedded as a ``data:`` image, where it can neither run script nor add markup to the page.

Example::

    from launchtrace.render.html import render_report
    html = render_report([trace], stats=kernel_stats([trace]), title="nightly")
    open("report.html", "w").write(html)
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from importlib import resources

from launchtrace.analysis.stats import KernelStats
from launchtrace.model import TraceData
from launchtrace.render.escape import html_text, json_for_script
from launchtrace.render.timeline import timeline_items

__all__ = ["MAX_TIMELINE_ITEMS", "render_report"]

MAX_TIMELINE_ITEMS = 50_000  # beyond this a browser struggles; the rest is counted, not drawn


def _asset(name: str) -> str:
    return resources.files("launchtrace.render").joinpath(name).read_text(encoding="utf-8")


def _stats_table(stats: Sequence[KernelStats]) -> str:
    head = "".join(
        f"<th>{h}</th>"
        for h in (
            "kernel",
            "op",
            "count",
            "total (us)",
            "mean (us)",
            "p50 (us)",
            "p95 (us)",
            "max (us)",
            "bytes",
        )
    )
    rows = []
    for s in stats:
        cells = [html_text(s.kernel), html_text(s.op)]
        nums = [
            s.count,
            s.total_ns / 1e3,
            s.mean_ns / 1e3,
            s.p50_ns / 1e3,
            s.p95_ns / 1e3,
            s.max_ns / 1e3,
            s.nbytes,
        ]
        rows.append(
            "<tr>"
            + "".join(f"<td>{c}</td>" for c in cells)
            + "".join(
                f'<td class="num">{n:,.1f}</td>' if isinstance(n, float) else f'<td class="num">{n:,}</td>'
                for n in nums
            )
            + "</tr>"
        )
    return f'<table class="stats"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def render_report(
    traces: Sequence[TraceData],
    *,
    stats: Sequence[KernelStats] = (),
    diff_text: str | None = None,
    graph_svg: bytes | None = None,
    graph_note: str = "",
    title: str = "launchtrace report",
) -> str:
    """The report page as a string (see the module docstring). ``graph_svg`` is the SVG bytes of the dataflow
    graph (``None``: the section says why, from ``graph_note``)."""
    items = timeline_items(traces)
    drawn = items[:MAX_TIMELINE_ITEMS]
    names = [str(t.attributes.get("trace_id") or f"trace {k}") for k, t in enumerate(traces)]
    data = {
        "traces": names,
        "items": [
            {
                "t": it.trace,
                "l": it.lane,
                "k": it.kind,
                "n": it.name,
                "s": it.start_ns,
                "e": it.end_ns,
                "depth": it.depth,
                "r": it.record,
                "d": [list(p) for p in it.details],
            }
            for it in drawn
        ],
    }
    n_records = sum(len(t.records) for t in traces)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; img-src data:; '
        "style-src 'unsafe-inline'; script-src 'unsafe-inline'\">",
        f"<title>{html_text(title)}</title>",
        f"<style>{_asset('report.css')}</style></head><body>",
        f"<h1>{html_text(title)}</h1>",
        f'<p class="note">{len(traces)} trace(s), {n_records:,} records, '
        f"{sum(len(t.scopes) for t in traces):,} scopes.</p>",
        "<h2>Timeline</h2>",
    ]
    if len(drawn) < len(items):
        parts.append(f'<p class="note">Showing the first {len(drawn):,} of {len(items):,} bars.</p>')
    parts.append('<div id="timeline"></div><div id="tip"></div>')
    if diff_text is not None:
        body = "\n".join(html_text(line) for line in diff_text.splitlines())
        parts.append(f'<h2>Diff</h2><pre class="diff">{body}</pre>')
    parts.append("<h2>Dataflow graph</h2>")
    if graph_svg:
        b64 = base64.b64encode(graph_svg).decode("ascii")
        parts.append(f'<div class="graph"><img alt="dataflow graph" src="data:image/svg+xml;base64,{b64}"></div>')
    else:
        parts.append(f'<p class="note">{html_text(graph_note or "no graph")}</p>')
    parts.append("<h2>Kernels</h2>")
    parts.append(_stats_table(stats))
    parts.append(f'<script type="application/json" id="launchtrace-data">{json_for_script(data)}</script>')
    parts.append(f"<script>{_asset('report.js')}</script>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
