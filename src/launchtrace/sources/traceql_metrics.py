"""Tempo's TraceQL metrics (``GET /api/metrics/query_range``): per-group latency series without fetching traces.

The answer (Tempo 3.0): ``{"series": [{"labels": [{"key": "resource.host.name", "value": {"stringValue": "h1"}},
...], "samples": [{"timestampMs": "1700000000000", "value": 0.000123}, ...]}], "status": "PARTIAL"?}``; a partial
answer is read, with a warning. Quantiles come from Tempo's power-of-two buckets: coarse, but the same for every
group, which is what a comparison among peers needs.

Example::

    from launchtrace.sources.traceql_metrics import kernel_latency_query, query_range
    q = kernel_latency_query("sim", ("service.version", "host.name"))
    series = query_range(client, q, start_ns, end_ns, step_s=60, log=log)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from launchtrace.errors import UserError
from launchtrace.otlp.jsonkeys import BOOL_VALUE, DOUBLE_VALUE, INT_VALUE, KEY, STRING_VALUE, VALUE
from launchtrace.otlp.problems import Problem, Severity
from launchtrace.sources.http import HttpClient
from launchtrace.sources.report import ProblemLog
from launchtrace.sources.tempo import _quote

__all__ = ["Series", "kernel_latency_query", "query_range"]

KERNEL_LABEL = "span.launchtrace.kernel"


@dataclasses.dataclass(frozen=True)
class Series:
    """One series: its labels (TraceQL attribute -> value) and ``(timestamp ms, value)`` samples in time order."""

    labels: dict[str, str]
    samples: tuple[tuple[int, float], ...]


def kernel_latency_query(service: str, group_by: Sequence[str], quantile: float = 0.5) -> str:
    """The median launch duration per group and kernel, in TraceQL metrics."""
    where = "span.launchtrace.op != nil" + (f" && resource.service.name = {_quote(service)}" if service else "")
    by = ", ".join([*(f"resource.{k}" for k in group_by), KERNEL_LABEL])
    return f"{{ {where} }} | quantile_over_time(duration, {quantile}) by ({by})"


def _value(raw: object) -> str:
    if type(raw) is dict:
        for key in (STRING_VALUE, INT_VALUE, DOUBLE_VALUE, BOOL_VALUE):
            if key in raw:
                return str(raw[key])
    return "" if raw is None else str(raw)


def query_range(
    client: HttpClient, q: str, start_ns: int, end_ns: int, *, step_s: int, log: ProblemLog
) -> list[Series]:
    """The series of ``q`` over ``[start, end]`` every ``step_s`` seconds; bad series are skipped and logged."""
    if end_ns <= start_ns:
        raise UserError("the TraceQL metrics window is empty: give --since (and --until)")
    params = {"q": q, "start": start_ns // 10**9, "end": -(-end_ns // 10**9), "step": f"{step_s}s"}
    answer = client.get("/api/metrics/query_range", params=params)
    body = answer.json()
    if type(body) is not dict or type(body.get("series", [])) is not list:
        raise UserError(f"{answer.url}: not a TraceQL metrics answer (no 'series' list)")
    if body.get("status") == "PARTIAL":
        log.add(Problem(answer.url, "Tempo says the answer is partial", Severity.WARNING))
    out = []
    for i, raw in enumerate(body.get("series") or []):
        try:
            labels = {str(item[KEY]): _value(item.get(VALUE)) for item in raw.get("labels", [])}  # OTLP KeyValues
            samples = sorted(
                (int(s["timestampMs"]), float(s["value"])) for s in raw.get("samples", []) if s.get("value") is not None
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            log.add(Problem(answer.url, f"series {i} skipped: {type(exc).__name__}: {exc}"))
            continue
        out.append(Series(labels, tuple(samples)))
    return out
