# ruff: noqa: E501 (PromQL queries and panel descriptions read best unbroken)
"""Write deploy/compose/grafana/dashboards/launchtrace-overview.json, the provisioned Grafana dashboard.

Exact counts and latencies come from launchtrace's own metrics (``launchtrace_*``: every record, before folding
and sampling); per-scope latency, errors, dropped and folded spans from the Collector's span_metrics connector
(``traces_span_metrics_*``: every span, before tail sampling). ``tests/test_deploy.py`` checks every name used
here against what those really produce, and that the file is this script's output.

    python scripts/gen_grafana_dashboard.py
"""

from __future__ import annotations

import json
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "deploy/compose/grafana/dashboards/launchtrace-overview.json"
PROM = {"type": "prometheus", "uid": "prometheus"}
SEL = 'service_name=~"$service"'
CALLS = "traces_span_metrics_calls_total"
SPAN_BUCKET = "traces_span_metrics_duration_milliseconds_bucket"
LAUNCHES = "launchtrace_launches_total"
LAUNCH_BUCKET = "launchtrace_launch_duration_seconds_bucket"
STEPS = "launchtrace_scope_steps_total"


def panel(id_, title, targets, unit, x, y, w=12, h=8, kind="timeseries", desc=""):
    return {
        "id": id_,
        "type": kind,
        "title": title,
        "description": desc,
        "datasource": PROM,
        "gridPos": {"x": x, "y": y, "w": w, "h": h},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "targets": [
            {
                "refId": chr(65 + i),
                "datasource": PROM,
                "expr": expr,
                "legendFormat": legend,
                **({"format": "table", "instant": True} if kind == "table" else {}),
            }
            for i, (expr, legend) in enumerate(targets)
        ],
    }


def dashboard() -> dict:
    fingerprints = f"sum by (service_version, launchtrace_scope, launchtrace_scope_fingerprint) (increase({STEPS}{{{SEL}}}[1h])) > 0"
    panels = [
        panel(
            1,
            "Launches per kernel (per second)",
            [
                (
                    f"sum by (launchtrace_kernel, launchtrace_op) (rate({LAUNCHES}{{{SEL}}}[$__rate_interval]))",
                    "{{launchtrace_kernel}} ({{launchtrace_op}})",
                )
            ],
            "ops",
            0,
            0,
            desc="Every launch, copy, fill, primitive and graph launch, counted by the export worker before folding and sampling (launchtrace.launches).",
        ),
        panel(
            2,
            "p95 host time per kernel",
            [
                (
                    f"histogram_quantile(0.95, sum by (le, launchtrace_kernel) (rate({LAUNCH_BUCKET}{{{SEL}}}[$__rate_interval])))",
                    "{{launchtrace_kernel}}",
                )
            ],
            "s",
            12,
            0,
            desc="95th percentile of each kernel's host duration per call (launchtrace.launch.duration, every record).",
        ),
        panel(
            3,
            "p95 per scope",
            [
                (
                    f'histogram_quantile(0.95, sum by (le, span_name) (rate({SPAN_BUCKET}{{{SEL}, launchtrace_scope_kind!=""}}[$__rate_interval])))',
                    "{{span_name}}",
                )
            ],
            "ms",
            0,
            8,
            desc="Scope spans (launchtrace.scope, wp.ScopedTimer, wp.Tape, step roots) by name, from the Collector's span_metrics connector before sampling.",
        ),
        panel(
            4,
            "Topology fingerprints per service version",
            [(f"count by (service_version) ({fingerprints})", "{{service_version}}")],
            "short",
            12,
            8,
            desc="Distinct top-level scope topologies seen in the last hour per build: a build with more or other fingerprints than its predecessor launches differently.",
        ),
        panel(
            5,
            "Scope topologies seen per service version (last hour)",
            [(fingerprints, "")],
            "short",
            0,
            16,
            w=24,
            kind="table",
            desc="Which fingerprint each scope had in each service version, and in how many steps.",
        ),
        panel(
            6,
            "Dropped and folded spans",
            [
                (
                    f'sum by (service_name) (rate({CALLS}{{{SEL}, span_name="launchtrace.dropped"}}[$__rate_interval]))',
                    "traces cut by the span budget ({{service_name}})",
                ),
                (
                    f'sum by (service_name) (rate({CALLS}{{{SEL}, span_name=~"fold .*"}}[$__rate_interval]))',
                    "folded summary spans ({{service_name}})",
                ),
                (
                    f'sum by (service_name) (rate({CALLS}{{{SEL}, launchtrace_op!=""}}[$__rate_interval]))',
                    "records with a span of their own ({{service_name}})",
                ),
                (
                    f"sum by (service_name) (rate({LAUNCHES}{{{SEL}}}[$__rate_interval]))",
                    "records in all ({{service_name}}): the difference was folded",
                ),
                (
                    f'sum by (service_name) (rate({CALLS}{{{SEL}, status_code="STATUS_CODE_ERROR"}}[$__rate_interval]))',
                    "spans with status ERROR ({{service_name}})",
                ),
            ],
            "ops",
            0,
            24,
            desc="A launchtrace.dropped span marks a trace the span budget cut; a fold span stands for many repeated records.",
        ),
        panel(
            7,
            "Collector: spans accepted, refused, sent, failed",
            [
                ("sum(rate(otelcol_receiver_accepted_spans_total[$__rate_interval]))", "accepted"),
                ("sum(rate(otelcol_receiver_refused_spans_total[$__rate_interval]))", "refused (memory_limiter)"),
                ("sum by (exporter) (rate(otelcol_exporter_sent_spans_total[$__rate_interval]))", "sent {{exporter}}"),
                (
                    "sum by (exporter) (rate(otelcol_exporter_send_failed_spans_total[$__rate_interval]))",
                    "failed {{exporter}}",
                ),
            ],
            "ops",
            12,
            24,
            desc="The Collector's own telemetry: refused spans mean the memory_limiter pushed back; failed ones a backend is unreachable.",
        ),
    ]
    variable_query = f"label_values({LAUNCHES}, service_name)"
    return {
        "uid": "launchtrace-overview",
        "title": "launchtrace: launches, latency, topology",
        "schemaVersion": 39,
        "version": 1,
        "editable": True,
        "tags": ["launchtrace"],
        "time": {"from": "now-1h", "to": "now"},
        "refresh": "30s",
        "templating": {
            "list": [
                {
                    "name": "service",
                    "label": "service",
                    "type": "query",
                    "datasource": PROM,
                    "query": {"query": variable_query, "refId": "service"},
                    "definition": variable_query,
                    "includeAll": True,
                    "multi": True,
                    "allValue": ".*",
                    "current": {"text": "All", "value": "$__all"},
                    "refresh": 2,
                }
            ]
        },
        "panels": panels,
    }


def render() -> str:
    return json.dumps(dashboard(), indent=2) + "\n"


if __name__ == "__main__":
    OUT.write_text(render())
    print(OUT)
