"""Export settings: one frozen :class:`ExportConfig`, resolved keyword > environment variable > default.

This follows the OpenTelemetry SDK's export package: every environment variable is a constant here, a bad
environment value logs a warning and falls back to the default, a bad keyword argument raises a
``ValueError`` that names the parameter. The span builder (:mod:`launchtrace.export.spanbuilder`) and the
export worker and sinks (:mod:`launchtrace.export`) read the same object.

Example::

    from launchtrace.export.config import ExportConfig
    config = ExportConfig.resolve(span_budget=500, fold="off")
    print(config.file_path, config.sampler)  # launchtrace-20260101-120000-4242.jsonl parentbased_always_on
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from collections.abc import Callable, Mapping
from typing import Any

__all__ = [
    "DEFAULTS",
    "ENV",
    "FOLD_MODES",
    "LAUNCHTRACE_BUSY_DEFER",
    "LAUNCHTRACE_DEPRECATED_CODE_ATTRIBUTES",
    "LAUNCHTRACE_DEVICE_TIMING",
    "LAUNCHTRACE_EXPORT_INTERVAL",
    "LAUNCHTRACE_FILE",
    "LAUNCHTRACE_FOLD",
    "LAUNCHTRACE_FOLD_MIN_REPEATS",
    "LAUNCHTRACE_INCLUDE_INTERNAL",
    "LAUNCHTRACE_JOIN_ACTIVE_SPAN",
    "LAUNCHTRACE_MAX_EXPORT_BATCH",
    "LAUNCHTRACE_QUEUE_CAPACITY",
    "LAUNCHTRACE_SAMPLE_EVERY",
    "LAUNCHTRACE_SERVICE_NAME",
    "LAUNCHTRACE_SPAN_BUDGET",
    "LAUNCHTRACE_STEP_MAX_SPANS",
    "LAUNCHTRACE_STEP_WINDOW",
    "LAUNCHTRACE_VALUE_STATS",
    "LAUNCHTRACE_VALUE_STATS_MAX_ELEMENTS",
    "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_PROTOCOL",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
    "OTEL_SERVICE_NAME",
    "OTEL_TRACES_SAMPLER",
    "OTEL_TRACES_SAMPLER_ARG",
    "PROTOCOLS",
    "SAMPLERS",
    "ExportConfig",
    "default_file_path",
]

_log = logging.getLogger(__name__)

# Our own variables.
LAUNCHTRACE_FILE = "LAUNCHTRACE_FILE"
LAUNCHTRACE_QUEUE_CAPACITY = "LAUNCHTRACE_QUEUE_CAPACITY"
LAUNCHTRACE_EXPORT_INTERVAL = "LAUNCHTRACE_EXPORT_INTERVAL"
LAUNCHTRACE_BUSY_DEFER = "LAUNCHTRACE_BUSY_DEFER"
LAUNCHTRACE_MAX_EXPORT_BATCH = "LAUNCHTRACE_MAX_EXPORT_BATCH"
LAUNCHTRACE_SPAN_BUDGET = "LAUNCHTRACE_SPAN_BUDGET"
LAUNCHTRACE_FOLD = "LAUNCHTRACE_FOLD"
LAUNCHTRACE_FOLD_MIN_REPEATS = "LAUNCHTRACE_FOLD_MIN_REPEATS"
LAUNCHTRACE_STEP_MAX_SPANS = "LAUNCHTRACE_STEP_MAX_SPANS"
LAUNCHTRACE_STEP_WINDOW = "LAUNCHTRACE_STEP_WINDOW"
LAUNCHTRACE_INCLUDE_INTERNAL = "LAUNCHTRACE_INCLUDE_INTERNAL"
LAUNCHTRACE_VALUE_STATS = "LAUNCHTRACE_VALUE_STATS"
LAUNCHTRACE_VALUE_STATS_MAX_ELEMENTS = "LAUNCHTRACE_VALUE_STATS_MAX_ELEMENTS"
LAUNCHTRACE_DEVICE_TIMING = "LAUNCHTRACE_DEVICE_TIMING"
LAUNCHTRACE_SAMPLE_EVERY = "LAUNCHTRACE_SAMPLE_EVERY"
LAUNCHTRACE_JOIN_ACTIVE_SPAN = "LAUNCHTRACE_JOIN_ACTIVE_SPAN"
LAUNCHTRACE_SERVICE_NAME = "LAUNCHTRACE_SERVICE_NAME"
LAUNCHTRACE_DEPRECATED_CODE_ATTRIBUTES = "LAUNCHTRACE_DEPRECATED_CODE_ATTRIBUTES"
# Standard OpenTelemetry variables.
OTEL_EXPORTER_OTLP_ENDPOINT = "OTEL_EXPORTER_OTLP_ENDPOINT"
OTEL_EXPORTER_OTLP_TRACES_ENDPOINT = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
OTEL_EXPORTER_OTLP_PROTOCOL = "OTEL_EXPORTER_OTLP_PROTOCOL"
OTEL_EXPORTER_OTLP_TRACES_PROTOCOL = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
OTEL_TRACES_SAMPLER = "OTEL_TRACES_SAMPLER"
OTEL_TRACES_SAMPLER_ARG = "OTEL_TRACES_SAMPLER_ARG"
OTEL_SERVICE_NAME = "OTEL_SERVICE_NAME"
OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT = "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT"

PROTOCOLS = ("grpc", "http/protobuf")
FOLD_MODES = ("auto", "always", "off")
"""``auto``: fold only a trace that would pass its span budget; ``always``: fold from the first repeat; ``off``."""
SAMPLERS = (
    "always_on",
    "always_off",
    "traceidratio",
    "parentbased_always_on",
    "parentbased_always_off",
    "parentbased_traceidratio",
)


def default_file_path(now: float | None = None, pid: int | None = None) -> str:
    """``launchtrace-<YYYYmmdd-HHMMSS>-<pid>.jsonl`` in the working directory (as ``nsys`` names reports)."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(time.time() if now is None else now))
    return os.path.join(os.getcwd(), f"launchtrace-{stamp}-{os.getpid() if pid is None else pid}.jsonl")


def _parse_bool(text: str) -> bool:
    low = text.strip().lower()
    if low in ("1", "true", "yes", "on"):
        return True
    if low in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"not a boolean: {text!r}")


def _parse_fold(text: str) -> str:
    """A fold mode; the booleans of earlier versions still read (true: ``always``, false: ``off``)."""
    low = text.strip().lower()
    if low in FOLD_MODES:
        return low
    return "always" if _parse_bool(low) else "off"


def _parse_choice(choices: tuple[str, ...]) -> Callable[[str], str]:
    def parse(text: str) -> str:
        low = text.strip().lower()
        if low not in choices:
            raise ValueError(f"not one of {', '.join(choices)}: {text!r}")
        return low

    return parse


@dataclasses.dataclass(frozen=True, slots=True)
class ExportConfig:
    """How records become spans and where the spans go.

    Construct it with :meth:`resolve` (keyword > environment > default); the constructor itself only
    validates. Field by field:

    - ``file_path``: the OTLP JSON Lines file written when no OTLP endpoint is set (``LAUNCHTRACE_FILE``).
    - ``endpoint``: OTLP traces endpoint (``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``, else
      ``OTEL_EXPORTER_OTLP_ENDPOINT``); ``None`` means the file sink.
    - ``protocol``: ``grpc`` or ``http/protobuf`` (``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`` / ``_PROTOCOL``).
    - ``queue_capacity``: capture events buffered between the launching thread and the export worker
      (default 100,000: a few hundred bytes each, so the buffer stays within a 64 MB memory budget; past it,
      new events are dropped and counted).
    - ``export_interval_s``: how often the worker drains and exports (default 0.25 s); ``max_export_batch``:
      spans per export.
    - ``busy_defer_s``: while the program is launching (a capture event queued within the last 20 ms) the
      worker waits for a pause, at most this long (default 0.25 s; 0: never waits), so bursts of launches do
      not share the GIL with span building; a flush, exit or a half-full queue never wait. The two together
      bound how long a finished trace waits before it is written (0.5 s), which is what a crash (SIGKILL,
      ``os._exit``) can lose beyond the traces still open (``docs/reliability.md``).
    - ``span_budget``: most spans in one trace.
    - ``fold``: when consecutive repeats of a record sequence become one summary span (``LAUNCHTRACE_FOLD``):
      ``auto`` (default) only in a trace that would pass ``span_budget`` (a trace that fits is exported in full,
      one span per launch), ``always`` from the first repeat (fewest spans), ``off`` never (a trace past its
      budget is cut). ``True`` / ``False`` are read as ``always`` / ``off``. ``fold_min_repeats``: the shortest
      run folded.
    - ``step_max_spans`` / ``step_window_s``: bounds of the synthetic "step" roots for unscoped launches.
    - ``include_internal``: export Warp's own timer scopes too ("Compile x86", ...; "Module X load" is always
      exported, as a ``warp.module.load`` span): host-side
      bookkeeping, not device work, so left out by default. The device work Warp issues itself (adjoint
      launches, ``warp.fem`` / ``warp.sparse`` launches, the fill in ``wp.zeros``) is exported either way,
      marked ``launchtrace.internal``.
    - ``value_stats``: mean / std / min / max of every array a launch writes, computed right after it on the
      launching thread (on CUDA: a synchronize and a copy to host per launch); arrays of more than
      ``value_stats_max_elements`` scalars are skipped (marked, never sampled). See
      :mod:`launchtrace.capture.probes`.
    - ``device_timing``: on CUDA devices, when the device ran each launch, from pooled CUDA events polled by
      the export worker (never a synchronize on the launching thread); nothing on the CPU.
    - ``sampler`` / ``sampler_arg``: ``OTEL_TRACES_SAMPLER`` / ``_ARG``, decided once per trace.
    - ``sample_every``: every N-th trace of each root name is kept in full (unfolded) whatever the sampler.
    - ``service_name``: overrides ``OTEL_SERVICE_NAME`` / ``OTEL_RESOURCE_ATTRIBUTES`` when given
      (``LAUNCHTRACE_SERVICE_NAME``: how ``launchtrace run`` hands the name it chose to child processes).
    - ``join_active_span``: a root scope opened while the thread has an active OpenTelemetry span (the
      application's own tracing) becomes that span's child, in its trace (``LAUNCHTRACE_JOIN_ACTIVE_SPAN``,
      default on); off, every root starts its own trace.
    - ``tracer_provider``: an SDK ``TracerProvider`` (``WarpInstrumentor().instrument(tracer_provider=...)``)
      whose resource and sampler are used instead of the ones built from the environment; its span
      processors are not (launchtrace builds and sends its spans itself). Anything else is refused.
    - ``max_attribute_length``: strings longer than this are cut (``OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT``).
    - ``deprecated_code_attributes``: write the deprecated ``code.filepath``, ``code.lineno``,
      ``code.function`` and ``code.namespace`` beside the stable ``code.file.path``, ``code.line.number`` and
      ``code.function.name`` (``LAUNCHTRACE_DEPRECATED_CODE_ATTRIBUTES``; off by default: only for backends that
      read nothing newer than semconv 1.32).
    """

    file_path: str = ""
    endpoint: str | None = None
    protocol: str = "http/protobuf"
    queue_capacity: int = 100_000
    export_interval_s: float = 0.25
    busy_defer_s: float = 0.25
    max_export_batch: int = 512
    span_budget: int = 2000
    fold: str = "auto"
    fold_min_repeats: int = 2
    step_max_spans: int = 1000
    step_window_s: float = 1.0
    include_internal: bool = False
    value_stats: bool = False
    value_stats_max_elements: int = 10_000_000
    device_timing: bool = False
    sampler: str = "parentbased_always_on"
    sampler_arg: float | None = None
    sample_every: int = 0
    service_name: str | None = None
    max_attribute_length: int = 2048
    join_active_span: bool = True
    deprecated_code_attributes: bool = False
    tracer_provider: Any = None

    def __post_init__(self) -> None:
        if isinstance(self.fold, bool):  # the earlier boolean setting
            object.__setattr__(self, "fold", "always" if self.fold else "off")
        for name, (check, what) in _CHECKS.items():
            value = getattr(self, name)
            if not check(value):
                raise ValueError(f"ExportConfig: {name} must be {what}, got {value!r}")

    @property
    def sink(self) -> str:
        """``"otlp"`` when an endpoint is configured, else ``"file"``."""
        return "file" if self.endpoint is None else "otlp"

    @classmethod
    def resolve(cls, env: Mapping[str, str] | None = None, **kwargs: Any) -> ExportConfig:
        """Settings from keyword arguments, then environment variables, then defaults.

        ``env`` defaults to ``os.environ``. An unknown keyword or a bad keyword value raises ``ValueError``
        naming it; a bad environment value logs a warning and the default is used.
        """
        env = os.environ if env is None else env
        unknown = sorted(set(kwargs) - {f.name for f in dataclasses.fields(cls)})
        if unknown:
            raise ValueError(f"ExportConfig: unknown parameter {unknown[0]!r}")
        values: dict[str, Any] = {}
        for name, (variables, parse) in ENV.items():
            if name in kwargs:
                continue
            for variable in variables:
                raw = env.get(variable)
                if raw is None or raw.strip() == "":
                    continue
                try:
                    value = parse(raw)
                    check, what = _CHECKS.get(name, (lambda v: True, ""))
                    if not check(value):
                        raise ValueError(f"must be {what}")
                except ValueError as exc:
                    _log.warning("ignoring %s=%r (%s); using the default", variable, raw, exc)
                    break
                values[name] = value
                break
        if "endpoint" not in kwargs and "endpoint" not in values:
            generic = env.get(OTEL_EXPORTER_OTLP_ENDPOINT, "").strip()
            if generic and not _parses_as_url(generic):
                _log.warning("ignoring %s=%r (not a URL); using the default", OTEL_EXPORTER_OTLP_ENDPOINT, generic)
            elif generic:
                values["endpoint"] = _signal_endpoint(generic, kwargs.get("protocol", values.get("protocol")))
        values.update(kwargs)
        if not values.get("file_path"):
            values["file_path"] = default_file_path()
        return cls(**values)


def _signal_endpoint(base: str, protocol: str | None) -> str:
    """The generic OTLP endpoint as the traces endpoint: HTTP appends ``/v1/traces`` (as the SDK does)."""
    if (protocol or DEFAULTS.protocol) == "grpc":
        return base
    return base.rstrip("/") + "/v1/traces"


def _parses_as_url(text: str) -> bool:
    """Whether the OTLP exporters can take ``text`` as their endpoint (``http://[::1`` or a port of ``x`` make them
    raise ``ValueError`` inside the program)."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(text if "://" in text else f"http://{text}")
        _ = parts.port
    except ValueError:
        return False
    return bool(parts.hostname)


def _positive_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v > 0


def _non_negative_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _positive_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and v > 0


def _ratio_or_none(v: Any) -> bool:
    return v is None or (isinstance(v, int | float) and not isinstance(v, bool) and 0 <= v <= 1)


def _is_bool(v: Any) -> bool:
    return isinstance(v, bool)


def _is_sdk_provider(v: Any) -> bool:
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace.sampling import Sampler

    return isinstance(getattr(v, "resource", None), Resource) and isinstance(getattr(v, "sampler", None), Sampler)


_CHECKS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "file_path": (lambda v: isinstance(v, str), "a path string"),
    "endpoint": (lambda v: v is None or (isinstance(v, str) and v != "" and _parses_as_url(v)), "a URL or None"),
    "protocol": (lambda v: v in PROTOCOLS, f"one of {', '.join(PROTOCOLS)}"),
    "queue_capacity": (_positive_int, "a positive int"),
    "export_interval_s": (_positive_number, "a positive number of seconds"),
    "busy_defer_s": (lambda v: _positive_number(v) or v == 0, "a number of seconds >= 0"),
    "max_export_batch": (_positive_int, "a positive int"),
    "span_budget": (lambda v: _positive_int(v) and v >= 3, "an int >= 3"),
    "fold": (lambda v: v in FOLD_MODES, f"one of {', '.join(FOLD_MODES)}"),
    "fold_min_repeats": (lambda v: _positive_int(v) and v >= 2, "an int >= 2"),
    "step_max_spans": (_positive_int, "a positive int"),
    "step_window_s": (_positive_number, "a positive number of seconds"),
    "include_internal": (_is_bool, "a bool"),
    "value_stats": (_is_bool, "a bool"),
    "value_stats_max_elements": (_positive_int, "a positive int"),
    "device_timing": (_is_bool, "a bool"),
    "sampler": (lambda v: v in SAMPLERS, f"one of {', '.join(SAMPLERS)}"),
    "sampler_arg": (_ratio_or_none, "a ratio in [0, 1] or None"),
    "sample_every": (_non_negative_int, "an int >= 0"),
    "service_name": (lambda v: v is None or (isinstance(v, str) and v != ""), "a non-empty string or None"),
    "max_attribute_length": (_positive_int, "a positive int"),
    "join_active_span": (_is_bool, "a bool"),
    "deprecated_code_attributes": (_is_bool, "a bool"),
    "tracer_provider": (
        lambda v: v is None or _is_sdk_provider(v),
        "an opentelemetry.sdk.trace.TracerProvider (launchtrace uses its resource and sampler; it builds "
        "its spans itself, so an API-only or proxy provider has nothing it can use)",
    ),
}

ENV: dict[str, tuple[tuple[str, ...], Callable[[str], Any]]] = {
    "file_path": ((LAUNCHTRACE_FILE,), str),
    "endpoint": ((OTEL_EXPORTER_OTLP_TRACES_ENDPOINT,), str.strip),
    "protocol": ((OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, OTEL_EXPORTER_OTLP_PROTOCOL), _parse_choice(PROTOCOLS)),
    "queue_capacity": ((LAUNCHTRACE_QUEUE_CAPACITY,), int),
    "export_interval_s": ((LAUNCHTRACE_EXPORT_INTERVAL,), float),
    "busy_defer_s": ((LAUNCHTRACE_BUSY_DEFER,), float),
    "max_export_batch": ((LAUNCHTRACE_MAX_EXPORT_BATCH,), int),
    "span_budget": ((LAUNCHTRACE_SPAN_BUDGET,), int),
    "fold": ((LAUNCHTRACE_FOLD,), _parse_fold),
    "fold_min_repeats": ((LAUNCHTRACE_FOLD_MIN_REPEATS,), int),
    "step_max_spans": ((LAUNCHTRACE_STEP_MAX_SPANS,), int),
    "step_window_s": ((LAUNCHTRACE_STEP_WINDOW,), float),
    "include_internal": ((LAUNCHTRACE_INCLUDE_INTERNAL,), _parse_bool),
    "value_stats": ((LAUNCHTRACE_VALUE_STATS,), _parse_bool),
    "value_stats_max_elements": ((LAUNCHTRACE_VALUE_STATS_MAX_ELEMENTS,), int),
    "device_timing": ((LAUNCHTRACE_DEVICE_TIMING,), _parse_bool),
    "sampler": ((OTEL_TRACES_SAMPLER,), _parse_choice(SAMPLERS)),
    "sampler_arg": ((OTEL_TRACES_SAMPLER_ARG,), float),
    "sample_every": ((LAUNCHTRACE_SAMPLE_EVERY,), int),
    "max_attribute_length": ((OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT,), int),
    "service_name": ((LAUNCHTRACE_SERVICE_NAME,), str.strip),
    "join_active_span": ((LAUNCHTRACE_JOIN_ACTIVE_SPAN,), _parse_bool),
    "deprecated_code_attributes": ((LAUNCHTRACE_DEPRECATED_CODE_ATTRIBUTES,), _parse_bool),
}
"""Field -> (environment variables in order of precedence, parser)."""

DEFAULTS = ExportConfig(file_path="launchtrace.jsonl")
"""The defaults (with a fixed ``file_path``; :meth:`ExportConfig.resolve` computes the real one)."""
