"""``WarpInstrumentor``: the OpenTelemetry instrumentor for NVIDIA Warp, for ``opentelemetry-instrument``.

Registered under the ``opentelemetry_instrumentor`` entry point (``warp``), so ``opentelemetry-instrument python
app.py`` patches Warp and starts launchtrace's export: every launch, copy and fill becomes a span, sent where
the standard ``OTEL_EXPORTER_OTLP_*`` variables say (or to the JSON Lines file when no endpoint is set). The
spans are built by launchtrace's own worker from capture records, not through the SDK's ``TracerProvider``:
one SDK span per kernel launch would cost several times the launch itself. A ``tracer_provider=`` given to
``instrument`` is honoured for what launchtrace can take from it, its resource and its sampler (an SDK
``TracerProvider``; anything else is refused with a ``ValueError``); its span processors are not used.

``_instrument`` / ``_uninstrument`` are symmetric and safe to repeat (``BaseInstrumentor`` guards them too).

Example::

    from launchtrace.instrumentor import WarpInstrumentor
    WarpInstrumentor().instrument(file_path="spans.jsonl")  # keyword settings of ExportConfig
    ...  # Warp code
    WarpInstrumentor().uninstrument()  # flushes and stops the export
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from opentelemetry.instrumentation.instrumentor import BaseInstrumentor

__all__ = ["WarpInstrumentor"]

_INSTRUMENTS = ("warp-lang >= 1.19",)
_BASE_KWARGS = ("meter_provider", "logger_provider", "skip_dep_check", "raise_exception_on_conflict")


class WarpInstrumentor(BaseInstrumentor):
    """Instruments Warp: patches its device-work entry points and exports them as spans."""

    def instrumentation_dependencies(self) -> Collection[str]:
        return _INSTRUMENTS

    def _instrument(self, **kwargs: Any) -> None:
        from launchtrace.capture import instrument
        from launchtrace.export import start_export
        from launchtrace.export.config import ExportConfig

        settings = {k: v for k, v in kwargs.items() if k not in _BASE_KWARGS}
        if settings.get("tracer_provider", 0) is None:
            del settings["tracer_provider"]
        ExportConfig.resolve(**settings)  # a bad setting (an unusable tracer_provider) is refused before patching
        instrument()
        start_export(instrument=False, **settings)

    def _uninstrument(self, **kwargs: Any) -> None:
        from launchtrace.capture import uninstrument
        from launchtrace.export import stop_export

        uninstrument()
        stop_export()
