"""The metric and label names a PromQL expression uses, and the names our pipeline really produces.

Used by ``tests/test_deploy.py`` to check every dashboard query and alert rule against what exists: the series
the Collector's ``span_metrics`` connector makes from the shipped Collector config (its namespace, unit and
dimensions), the Collector's own telemetry, Tempo's metrics-generator, and launchtrace's own metrics.

Example::

    used = names_in("sum by (launchtrace_kernel) (rate(traces_span_metrics_calls_total[5m]))")
    # Used(metrics={'traces_span_metrics_calls_total'}, labels={'launchtrace_kernel'})
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import promql_parser

# Grafana's variables, replaced by values of the same type before parsing.
_GRAFANA_VARS = {
    "$__rate_interval": "5m",
    "$__interval": "1m",
    "$__range": "1h",
}
_VAR = re.compile(r"\$\{?(\w+)\}?")


@dataclass
class Used:
    """Metric names (vector selectors) and label names (matchers, by/without, on/ignoring/group) of a query."""

    metrics: set[str] = field(default_factory=set)
    labels: set[str] = field(default_factory=set)


def _fill_grafana_vars(expr: str) -> str:
    for var, value in _GRAFANA_VARS.items():
        expr = expr.replace(var, value)
    return _VAR.sub(".*", expr)  # a template variable stands in a regex matcher: any value


def names_in(expr: str) -> Used:
    """The metric and label names ``expr`` uses (Grafana variables allowed); raises on a PromQL syntax error."""
    used = Used()
    _walk(promql_parser.parse(_fill_grafana_vars(expr)), used)
    return used


_LABEL_VALUES = re.compile(r"^\s*label_values\(\s*(?:(?P<metric>[a-zA-Z_:][\w:]*)\s*,\s*)?(?P<label>\w+)\s*\)\s*$")


def names_in_template(query: str) -> Used:
    """A Grafana variable query: ``label_values(metric, label)`` or a plain PromQL expression."""
    m = _LABEL_VALUES.match(query)
    if not m:
        return names_in(query)
    return Used(metrics={m["metric"]} if m["metric"] else set(), labels={m["label"]})


def _walk(node: object, used: Used) -> None:
    kind = type(node).__name__
    if kind == "VectorSelector":
        if node.name:
            used.metrics.add(node.name)
        for matcher in node.matchers.matchers:
            if matcher.name == "__name__":
                used.metrics.add(matcher.value)
            else:
                used.labels.add(matcher.name)
        for group in node.matchers.or_matchers:
            for matcher in group:
                used.labels.add(matcher.name)
        return
    if kind == "MatrixSelector":
        _walk(node.vector_selector, used)
        return
    if kind == "AggregateExpr":
        if node.modifier is not None:
            used.labels.update(node.modifier.labels)
        _walk(node.expr, used)
        if node.param is not None:
            _walk(node.param, used)
        return
    if kind == "BinaryExpr":
        modifier = node.modifier
        if modifier is not None:
            if modifier.matching is not None:
                used.labels.update(modifier.matching.labels)
            used.labels.update(getattr(modifier, "group_labels", None) or [])
        _walk(node.lhs, used)
        _walk(node.rhs, used)
        return
    if kind == "Call":
        for arg in node.args:
            _walk(arg, used)
        return
    if kind in ("ParenExpr", "UnaryExpr", "SubqueryExpr"):
        _walk(node.expr, used)
        return
    if kind in ("NumberLiteral", "StringLiteral"):
        return
    raise AssertionError(f"unknown PromQL node {kind}")


def prometheus_name(otel_name: str) -> str:
    """An OpenTelemetry attribute or metric name as the Prometheus exporter writes it: dots (and anything else
    outside ``[a-zA-Z0-9_]``) become underscores."""
    return re.sub(r"[^a-zA-Z0-9_]", "_", otel_name)


_UNIT_WORDS = {"ms": "milliseconds", "s": "seconds", "us": "microseconds", "ns": "nanoseconds"}


@dataclass
class Produced:
    """The series a source makes: metric name -> the label names it carries."""

    series: dict[str, set[str]] = field(default_factory=dict)

    def add(self, metric: str, labels: set[str]) -> None:
        self.series.setdefault(metric, set()).update(labels)

    def update(self, other: Produced) -> None:
        for metric, labels in other.series.items():
            self.add(metric, labels)


# Labels every scraped series gets from Prometheus itself.
SCRAPE_LABELS = {"job", "instance"}


def span_metrics_series(connector: dict) -> Produced:
    """What the Collector's ``span_metrics`` connector with this config produces, as Prometheus sees it through
    the ``prometheus`` exporter: ``<namespace>_calls_total`` and ``<namespace>_duration_<unit>_bucket|sum|count``,
    labelled by the standard dimensions and each configured one (dots as underscores)."""
    namespace = prometheus_name(connector.get("namespace", "traces.span.metrics"))
    unit = connector.get("histogram", {}).get("unit", "ms")
    labels = {"service_name", "span_name", "span_kind", "status_code", "collector_instance_id"}
    labels |= {prometheus_name(d["name"]) for d in connector.get("dimensions", [])}
    out = Produced()
    out.add(f"{namespace}_calls_total", labels)
    duration = f"{namespace}_duration_{_UNIT_WORDS[unit]}"
    out.add(f"{duration}_bucket", labels | {"le"})
    out.add(f"{duration}_sum", labels)
    out.add(f"{duration}_count", labels)
    return out


def collector_telemetry_series() -> Produced:
    """The Collector's own metrics the dashboards use (names from the Collector's metadata.yaml of
    receiverhelper / exporterhelper, Prometheus-style with ``_total``)."""
    out = Produced()
    for name in ("otelcol_receiver_accepted_spans_total", "otelcol_receiver_refused_spans_total"):
        out.add(name, {"receiver", "transport", "service_instance_id", "service_name", "service_version"})
    for name in ("otelcol_exporter_sent_spans_total", "otelcol_exporter_send_failed_spans_total"):
        out.add(name, {"exporter", "service_instance_id", "service_name", "service_version"})
    return out


def tempo_generator_series(dimensions: list[str]) -> Produced:
    """Tempo's metrics-generator span-metrics processor: label ``service`` (not ``service_name``)."""
    labels = {"service", "span_name", "span_kind", "status_code", "source"} | {prometheus_name(d) for d in dimensions}
    out = Produced()
    out.add("traces_spanmetrics_calls_total", labels)
    out.add("traces_spanmetrics_latency_bucket", labels | {"le"})
    out.add("traces_spanmetrics_latency_sum", labels)
    out.add("traces_spanmetrics_latency_count", labels)
    return out


def unknown_names(used: Used, produced: Produced) -> list[str]:
    """What ``used`` names that ``produced`` does not make: each unknown metric, and each label that none of the
    query's metrics carries (Prometheus's own ``job`` / ``instance`` / ``__name__`` allowed)."""
    problems = [f"metric {m}" for m in sorted(used.metrics) if m not in produced.series]
    carried = set(SCRAPE_LABELS) | {"__name__"}
    for metric in used.metrics:
        carried |= produced.series.get(metric, set())
    problems += [f"label {label}" for label in sorted(used.labels - carried)]
    return problems
