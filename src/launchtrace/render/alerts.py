"""Fleet alerts as text, Markdown, JSON, and the Alertmanager ``POST /api/v2/alerts`` body.

Labels sent to Alertmanager route and deduplicate: ``alertname`` (one per reason, ``LaunchtraceTopologyDrift``,
...), ``service``, ``group`` (``service.version=1.1,host.name=h3``), ``scope``, ``kernel`` (left out for a whole
scope), ``reason``, ``severity`` (``warning``; ``info`` for a ``host_slowdown``), and each group-by attribute
with dots as underscores (``host_name``).
Annotations: ``summary``, ``description`` (the evidence, one line each), ``exemplar_trace_ids`` (comma-separated
hex) and ``against``. ``startsAt`` is the end of the window read, so the same input gives the same body.

Example::

    from launchtrace.render.alerts import alerts_as_text
    print(alerts_as_text(alerts, header="window: 12 traces"))
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Sequence
from typing import Any

from launchtrace.analysis.fleet.alerts import Alert

__all__ = ["ALERT_NAMES", "alertmanager_payload", "alerts_as_json", "alerts_as_markdown", "alerts_as_text"]

ALERT_NAMES = {
    "topology_drift": "LaunchtraceTopologyDrift",
    "new_foreign_buffers": "LaunchtraceNewForeignBuffers",
    "launch_count_change": "LaunchtraceLaunchCountChange",
    "latency_regression": "LaunchtraceLatencyRegression",
    "host_slowdown": "LaunchtraceHostSlowdown",
}
_LABEL = re.compile(r"[^A-Za-z0-9_]")


def _headline(a: Alert) -> str:
    kernel = f" kernel {a.kernel}" if a.kernel else ""
    level = "" if a.severity == "warning" else f" ({a.severity})"
    return f"FIRING {a.reason}{level} [{a.service}] {a.group_label} scope {a.scope}{kernel}"


def alerts_as_text(alerts: Sequence[Alert], header: str = "") -> str:
    lines = [header] if header else []
    lines.append(f"{len(alerts)} alert(s)" if alerts else "no alerts: every group matches its reference")
    for a in alerts:
        lines.append(_headline(a))
        lines.append(f"  {a.summary} (against {a.against})")
        lines.extend(f"  {e}" for e in a.evidence)
        if a.exemplars:
            lines.append(f"  exemplar traces: {', '.join(a.exemplars)}")
    return "\n".join(lines) + "\n"


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def alerts_as_markdown(alerts: Sequence[Alert], header: str = "") -> str:
    lines = ["## launchtrace fleet alerts", ""]
    if header:
        lines += [header, ""]
    if not alerts:
        return "\n".join([*lines, "No alerts: every group matches its reference.", ""])
    lines += ["| reason | service | group | scope | kernel | summary |", "| --- | --- | --- | --- | --- | --- |"]
    for a in alerts:
        cells = (a.reason, a.service, a.group_label, a.scope, a.kernel or "", a.summary)
        lines.append("| " + " | ".join(f"`{_md(c)}`" if i < 5 and c else _md(c) for i, c in enumerate(cells)) + " |")
    for a in alerts:
        kernel = f", kernel `{_md(a.kernel)}`" if a.kernel else ""
        lines += ["", f"### {_md(a.reason)}: {_md(a.group_label)}, scope `{_md(a.scope)}`{kernel}", "", "```text"]
        lines += [*a.evidence, *([f"exemplar traces: {', '.join(a.exemplars)}"] if a.exemplars else []), "```"]
    return "\n".join(lines) + "\n"


def alert_as_dict(a: Alert) -> dict[str, Any]:
    return {
        "reason": a.reason,
        "severity": a.severity,
        "service": a.service,
        "group": dict(zip(a.group_by, a.group)),
        "scope": a.scope,
        "kernel": a.kernel,
        "summary": a.summary,
        "evidence": list(a.evidence),
        "exemplar_trace_ids": list(a.exemplars),
        "against": a.against,
        "values": dict(a.values),
    }


def alerts_as_json(alerts: Sequence[Alert], window: dict[str, Any]) -> dict[str, Any]:
    return {"window": window, "firing": len(alerts), "alerts": [alert_as_dict(a) for a in alerts]}


def _rfc3339(ns: int) -> str:
    seconds, frac = divmod(max(0, ns), 10**9)
    stamp = dt.datetime.fromtimestamp(seconds, tz=dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{stamp}.{frac // 1000:06d}Z"


def alertmanager_payload(alerts: Sequence[Alert], *, starts_at_ns: int, generator_url: str = "") -> list[dict]:
    """The JSON list Alertmanager's ``POST /api/v2/alerts`` takes."""
    out = []
    for a in alerts:
        labels = {
            "alertname": ALERT_NAMES.get(a.reason, "LaunchtraceAlert"),
            "service": a.service or "unknown",
            "group": a.group_label,
            "scope": a.scope,
            "reason": a.reason,
            "severity": a.severity,
        }
        if a.kernel:
            labels["kernel"] = a.kernel
        for key, value in zip(a.group_by, a.group):
            labels.setdefault(_LABEL.sub("_", key), value)
        annotations = {
            "summary": a.summary,
            "description": "\n".join(a.evidence) or a.summary,
            "exemplar_trace_ids": ",".join(a.exemplars),
            "against": a.against,
        }
        body: dict[str, Any] = {"labels": labels, "annotations": annotations, "startsAt": _rfc3339(starts_at_ns)}
        if generator_url:
            body["generatorURL"] = generator_url
        out.append(body)
    return out
