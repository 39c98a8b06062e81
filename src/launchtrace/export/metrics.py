"""Launch metrics that need no trace reading: exact counts and duration histograms, exported by the SDK.

The export worker sees every record before sampling, folding or the span budget; :class:`LaunchMetrics` counts
them there (off the launching thread), so the numbers are exact whatever happens to the traces. Instruments
(names in ``docs/semantic-conventions.md``):

- ``launchtrace.launches`` (counter): records, by ``launchtrace.kernel``, ``launchtrace.op``, ``launchtrace.scope``
  (the outermost scope's name, ``""`` outside any);
- ``launchtrace.launch.duration`` (histogram): their host durations, same attributes. Over OTLP an exponential
  histogram in nanoseconds (exact buckets, mergeable); to Prometheus a classic histogram in seconds with bounds
  at powers of two nanoseconds (each exponential bucket falls inside one, so the conversion is exact);
- ``launchtrace.scope.steps`` (counter): occurrences of each top-level scope by ``launchtrace.scope`` and
  ``launchtrace.scope.fingerprint`` (the first 16 hex digits of the scope span's fingerprint; at most
  :data:`MAX_FINGERPRINTS` per scope, the rest counted as ``"other"``).

Every series also carries the resource's ``service.name``, ``service.version`` and ``host.name`` (OTLP: on the
resource; Prometheus: as labels). Nothing of high cardinality: no pointers, ids or call sites.

The counters are the SDK's observable counters (read when a reader collects); the histograms are aggregated
here, one cheap update per record (the SDK's ``Histogram.record`` costs tens of microseconds a call on this
machine, more than the rest of the export of a launch), and handed to the SDK's readers as its own
``ExponentialHistogram`` / ``Histogram`` data. Readers: OTLP (``OTEL_METRICS_EXPORTER=otlp``, endpoint and
protocol from the usual ``OTEL_EXPORTER_OTLP_*`` settings, every ``OTEL_METRIC_EXPORT_INTERVAL`` ms) and a
Prometheus scrape endpoint (``prometheus``, on ``OTEL_EXPORTER_PROMETHEUS_HOST``:``OTEL_EXPORTER_PROMETHEUS_PORT``,
default ``127.0.0.1:9464``, path ``/metrics``).

Example::

    import launchtrace
    launchtrace.start_export()
    launchtrace.start_metrics(exporters=("prometheus",), prometheus="127.0.0.1:9464")
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Iterable, Sequence
from typing import Any

from launchtrace import conventions as C
from launchtrace import topology
from launchtrace.histogram import ExpHistogram
from launchtrace.model import LaunchRecord, ScopeRecord

__all__ = [
    "DURATION",
    "LAUNCHES",
    "MAX_FINGERPRINTS",
    "RESOURCE_LABELS",
    "STEPS",
    "LaunchMetrics",
    "MetricsExport",
    "exporters_from_env",
]

logger = logging.getLogger(__name__)

LAUNCHES, DURATION, STEPS = C.METRIC_LAUNCHES, C.METRIC_LAUNCH_DURATION, C.METRIC_SCOPE_STEPS
ATTR_KERNEL, ATTR_OP, ATTR_SCOPE, ATTR_FINGERPRINT = (
    "launchtrace.kernel",
    "launchtrace.op",
    "launchtrace.scope",
    "launchtrace.scope.fingerprint",
)
RESOURCE_LABELS = ("service.name", "service.version", "host.name")
MAX_FINGERPRINTS = 64
_LINE_CACHE = 4096
_canonical = getattr(topology, "_canonical", repr)


class LaunchMetrics:
    """Exact aggregates of the records and scopes the export worker drains (see the module docstring)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.launches: dict[tuple[str, str, str], int] = {}
        self.durations: dict[tuple[str, str, str], ExpHistogram] = {}
        self.steps: dict[tuple[str, str], int] = {}
        self._top: dict[int, tuple[int, str] | None] = {}  # open scope id -> (top scope id, name), None: internal
        self._digests: dict[int, Any] = {}  # open top scope id -> sha256 of its records' topology lines
        # id(template) -> (template, scope name, key, histogram, topology line)
        self._by_template: dict[int, tuple[Any, str, tuple[str, str, str], ExpHistogram, bytes]] = {}
        self._fingerprints: dict[str, set[str]] = {}

    def observe(self, events: Sequence[tuple[str, Any]]) -> None:
        """Count one drained chunk of ``("record" | "scope_begin" | "scope_end", item)`` events."""
        with self.lock:
            for kind, item in events:
                if kind == "record":
                    self._record(item)
                elif kind == "scope_begin":
                    self._begin(item)
                elif kind == "scope_end":
                    self._end(item)

    def _begin(self, scope: ScopeRecord) -> None:
        parent = self._top.get(scope.parent_id) if scope.parent_id is not None else None
        if parent is not None:
            self._top[scope.id] = parent
        elif scope.internal:
            self._top[scope.id] = None
        else:
            import hashlib

            self._top[scope.id] = (scope.id, scope.name)
            self._digests[scope.id] = hashlib.sha256()

    def _end(self, scope: ScopeRecord) -> None:
        top = self._top.pop(scope.id, None)
        if top is None or top[0] != scope.id:
            return
        digest = self._digests.pop(scope.id, None)
        if digest is None:
            return
        fp = digest.hexdigest()[:16]
        seen = self._fingerprints.setdefault(top[1], set())
        if fp not in seen:
            if len(seen) >= MAX_FINGERPRINTS:
                fp = "other"
            else:
                seen.add(fp)
        key = (top[1], fp)
        self.steps[key] = self.steps.get(key, 0) + 1

    def _record(self, rec: LaunchRecord) -> None:
        sid = rec.scope_id
        top = self._top.get(sid) if sid is not None else None
        name = top[1] if top is not None else ""
        template = rec.template
        hit = self._by_template.get(id(template)) if template is not None else None
        if hit is None or hit[0] is not template or hit[1] != name:
            key = (rec.kernel, str(rec.op), name)
            hist = self.durations.get(key)
            if hist is None:
                hist = self.durations[key] = ExpHistogram()
            hit = (template, name, key, hist, self._line(rec))
            if template is not None:
                if len(self._by_template) >= _LINE_CACHE:
                    self._by_template.clear()
                self._by_template[id(template)] = hit  # kept alive: its id cannot be reused meanwhile
        _, _, key, hist, line = hit
        n = rec.repeat if rec.repeat > 1 else 1
        launches = self.launches
        launches[key] = launches.get(key, 0) + n
        if rec.end_ns > 0:
            hist.add(rec.end_ns - rec.start_ns if rec.end_ns > rec.start_ns else 0, n)
        if top is not None:
            digest = self._digests.get(top[0])
            if digest is not None:
                digest.update(line * n if n > 1 else line)

    @staticmethod
    def _line(rec: LaunchRecord) -> bytes:
        """The record's line of :func:`launchtrace.topology.fingerprint`'s digest (cached with the record's
        template by :meth:`_record`: records copied from one template have one topology key)."""
        return json.dumps(_canonical(topology.topology_key(rec, raw=False)), separators=(",", ":")).encode() + b"\n"

    # -- snapshots for the readers (taken under the lock, on the reader's thread)
    def counts(self) -> list[tuple[dict[str, str], int]]:
        with self.lock:
            items = sorted(self.launches.items())
        return [({ATTR_KERNEL: k, ATTR_OP: op, ATTR_SCOPE: s}, n) for (k, op, s), n in items]

    def step_counts(self) -> list[tuple[dict[str, str], int]]:
        with self.lock:
            items = sorted(self.steps.items())
        return [({ATTR_SCOPE: s, ATTR_FINGERPRINT: fp}, n) for (s, fp), n in items]

    def histograms(self) -> list[tuple[dict[str, str], ExpHistogram]]:
        with self.lock:
            out = []
            for (k, op, s), h in sorted(self.durations.items()):
                copy = ExpHistogram(h.max_size)
                copy.merge(h)
                out.append(({ATTR_KERNEL: k, ATTR_OP: op, ATTR_SCOPE: s}, copy))
        return out


# ---------------------------------------------------------------------------------------------------------
# The SDK side
# ---------------------------------------------------------------------------------------------------------

POWER_OF_TWO_BOUNDS_S = tuple(2.0**k / 1e9 for k in range(8, 36))  # 256 ns .. 34 s
"""Prometheus bucket bounds: powers of two nanoseconds, in seconds."""


def _exponential_point(attrs: dict[str, str], h: ExpHistogram, start: int, now: int):
    from opentelemetry.sdk.metrics._internal.point import Buckets
    from opentelemetry.sdk.metrics.export import ExponentialHistogramDataPoint

    lo = min(h.buckets) if h.buckets else 0
    hi = max(h.buckets) if h.buckets else -1
    counts = [h.buckets.get(i, 0) for i in range(lo, hi + 1)]
    return ExponentialHistogramDataPoint(
        attributes=attrs,
        start_time_unix_nano=start,
        time_unix_nano=now,
        count=h.count,
        sum=h.sum,
        scale=h.scale,
        zero_count=h.zero_count,
        positive=Buckets(lo, counts),
        negative=Buckets(0, []),
        flags=0,
        min=h.min,
        max=h.max,
    )


def _explicit_point(attrs: dict[str, str], h: ExpHistogram, start: int, now: int):
    """The same samples in power-of-two-nanosecond buckets: bucket i at scale s >= 0 lies in one of them."""
    from opentelemetry.sdk.metrics.export import HistogramDataPoint

    counts = [0] * (len(POWER_OF_TWO_BOUNDS_S) + 1)
    counts[0] += h.zero_count
    shift = max(h.scale, 0)
    for index, n in h.buckets.items():
        # bucket (2**(index / 2**s), 2**((index + 1) / 2**s)] lies in (2**k, 2**(k + 1)] for k = index >> s
        k = (index >> shift) + 1 if h.scale >= 0 else (index + 1) << -h.scale  # the upper power of two
        slot = min(max(k - 8, 0), len(POWER_OF_TWO_BOUNDS_S))
        counts[slot] += n
    return HistogramDataPoint(
        attributes=attrs,
        start_time_unix_nano=start,
        time_unix_nano=now,
        count=h.count,
        sum=h.sum / 1e9,
        bucket_counts=counts,
        explicit_bounds=POWER_OF_TWO_BOUNDS_S,
        min=h.min / 1e9,
        max=h.max / 1e9,
    )


def _with_histograms(metrics_data: Any, metrics: LaunchMetrics, resource: Any, start: int, *, seconds: bool) -> Any:
    """``metrics_data`` from the SDK's collection, with the duration histogram added to our scope."""
    from opentelemetry.sdk.metrics.export import (
        AggregationTemporality,
        ExponentialHistogram,
        Histogram,
        Metric,
        MetricsData,
        ResourceMetrics,
        ScopeMetrics,
    )
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope

    now = time.time_ns()
    cumulative = AggregationTemporality.CUMULATIVE
    if seconds:
        data: Any = Histogram([_explicit_point(a, h, start, now) for a, h in metrics.histograms()], cumulative)
        metric = Metric(DURATION, "host duration of each launch, copy and fill", "s", data)
    else:
        data = ExponentialHistogram([_exponential_point(a, h, start, now) for a, h in metrics.histograms()], cumulative)
        metric = Metric(DURATION, "host duration of each launch, copy and fill", "ns", data)
    if not data.data_points:
        return metrics_data
    scope = InstrumentationScope("launchtrace")
    if metrics_data is None or not metrics_data.resource_metrics:
        return MetricsData([ResourceMetrics(resource, [ScopeMetrics(scope, [metric], "")], "")])
    first = metrics_data.resource_metrics[0]
    scopes = list(first.scope_metrics)
    for i, sm in enumerate(scopes):
        if sm.scope.name == "launchtrace":
            scopes[i] = ScopeMetrics(sm.scope, [*sm.metrics, metric], sm.schema_url)
            break
    else:
        scopes.append(ScopeMetrics(scope, [metric], ""))
    rest = list(metrics_data.resource_metrics[1:])
    return MetricsData([ResourceMetrics(first.resource, scopes, first.schema_url), *rest])


def exporters_from_env(env: dict[str, str] | None = None) -> tuple[str, ...]:
    """``OTEL_METRICS_EXPORTER`` as a tuple of ``otlp`` / ``prometheus`` (``none`` or unset: nothing)."""
    env = os.environ if env is None else env
    names = tuple(n.strip() for n in env.get("OTEL_METRICS_EXPORTER", "").split(",") if n.strip())
    known = tuple(n for n in names if n in ("otlp", "prometheus"))
    for n in names:
        if n not in ("otlp", "prometheus", "none"):
            logger.warning("launchtrace: OTEL_METRICS_EXPORTER=%s is not one of otlp, prometheus, none: ignored", n)
    return known


def prometheus_address(env: dict[str, str] | None = None) -> str:
    env = os.environ if env is None else env
    return f"{env.get('OTEL_EXPORTER_PROMETHEUS_HOST', '127.0.0.1')}:{env.get('OTEL_EXPORTER_PROMETHEUS_PORT', '9464')}"


class MetricsExport:
    """A MeterProvider with our instruments, fed by one :class:`LaunchMetrics`, read by OTLP and/or Prometheus."""

    def __init__(self, metrics: LaunchMetrics, resource_attrs: Iterable[tuple[str, Any]], exporters: Sequence[str],
                 *, prometheus: str | None = None) -> None:  # fmt: skip
        from opentelemetry.metrics import CallbackOptions, Observation
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.resources import Resource

        self.metrics = metrics
        self.resource = Resource(dict(resource_attrs))
        self.start_ns = time.time_ns()
        self.readers: list[Any] = []
        self.prometheus_address: str | None = None
        if "otlp" in exporters:
            self.readers.append(self._otlp_reader())
        if "prometheus" in exporters:
            self.readers.append(self._prometheus_reader(prometheus or prometheus_address()))
        self.provider = MeterProvider(metric_readers=self.readers, resource=self.resource)
        meter = self.provider.get_meter("launchtrace")

        def launches(_options: CallbackOptions) -> Iterable[Observation]:
            return [Observation(n, attrs) for attrs, n in metrics.counts()]

        def steps(_options: CallbackOptions) -> Iterable[Observation]:
            return [Observation(n, attrs) for attrs, n in metrics.step_counts()]

        meter.create_observable_counter(LAUNCHES, [launches], "{launch}", "launches, copies and fills issued")
        meter.create_observable_counter(STEPS, [steps], "{step}", "occurrences of each top-level scope")

    def _inject(self, reader_cls: type, *, seconds: bool) -> type:
        export = self

        class Reader(reader_cls):  # type: ignore[misc, valid-type]
            def _receive_metrics(self, metrics_data: Any, timeout_millis: float = 10_000, **kwargs: Any) -> None:
                data = _with_histograms(metrics_data, export.metrics, export.resource, export.start_ns, seconds=seconds)
                super()._receive_metrics(data, timeout_millis, **kwargs)

        return Reader

    def _otlp_reader(self) -> Any:
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

        protocol = os.environ.get("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL") or os.environ.get(
            "OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"
        )
        if protocol.startswith("http"):
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        else:
            from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter
        return self._inject(PeriodicExportingMetricReader, seconds=False)(OTLPMetricExporter())

    def _prometheus_reader(self, address: str) -> Any:
        from opentelemetry.exporter.prometheus import PrometheusMetricReader
        from prometheus_client import CollectorRegistry, start_http_server

        host, _, port = address.rpartition(":")
        registry = CollectorRegistry()
        reader = self._inject(PrometheusMetricReader, seconds=True)(
            resource_attribute_filter=lambda key: key in RESOURCE_LABELS, registry=registry
        )
        self.server, self.server_thread = start_http_server(int(port), addr=host or "127.0.0.1", registry=registry)
        self.prometheus_address = f"{host or '127.0.0.1'}:{self.server.server_address[1]}"
        return reader

    def shutdown(self) -> None:
        """A last export (OTLP), then stop the scrape endpoint. Never raises."""
        try:
            self.provider.shutdown()
        except Exception:  # telemetry never breaks the program
            logger.debug("launchtrace: metrics shutdown failed", exc_info=True)
        server = getattr(self, "server", None)
        if server is not None:
            server.shutdown()
            server.server_close()
