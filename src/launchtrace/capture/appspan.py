"""The application's active OpenTelemetry span, told to the span builder when it changes on a thread.

An outermost ``launchtrace.scope`` reads the active span itself when it opens
(:func:`launchtrace.capture.hotpath.active_span_parent`). Launches outside any scope cannot (reading it per
launch would cost the hot path), yet their synthetic ``launchtrace.step`` roots should join the
application's span too. So while Warp is instrumented, OpenTelemetry's runtime context is wrapped: each
``attach`` / ``detach`` (a span made current or no longer current: ``start_as_current_span``,
``use_span``, ``context.attach``) that changes the thread's active span queues one ``APP_SPAN`` event
``(APP_SPAN, seq, tid, (trace_id, span_id, trace_flags) | None)``, in order with the thread's launches.
Nothing is queued while nobody listens, and nothing when the active span stays the same.

Limits: the runtime context is OpenTelemetry's private ``_RUNTIME_CONTEXT``; where it is missing the wrap is
skipped (scopes still join). ``asyncio`` tasks sharing a thread switch contexts without ``attach``, so a
step root there may take the span of the task that attached last; scopes are exact.

Example::

    from launchtrace.capture import appspan
    appspan.watch()  # done by launchtrace.instrument()
    appspan.unwatch()
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from launchtrace.capture import bus
from launchtrace.capture.state import _local

__all__ = ["unwatch", "watch"]

_log = logging.getLogger(__name__)
_lock = threading.Lock()
_wrapped: Any = None  # the runtime context we replaced, while watching
_get_current_span: Any = None  # opentelemetry.trace.get_current_span, once watching


class _Last(threading.local):
    span: Any = None  # the span object this thread's active span was when last looked at
    told: Any = None  # what this thread last told the bus


_last = _Last()


def _changed(context: Any = None) -> None:
    """After attach (``context``: the one attached) or detach: queue the thread's active span if it changed."""
    if not bus.queues():
        return
    try:
        span = _get_current_span(context)
        last = _last
        if span is last.span:  # the common case of nested attaches within one span: nothing to build
            return
        last.span = span
        sc = span.get_span_context()
        told = (
            (sc.trace_id.to_bytes(16, "big"), sc.span_id.to_bytes(8, "big"), int(sc.trace_flags))
            if sc.is_valid
            else None
        )
        if told == last.told:
            return
        last.told = told
        bus.offer((bus.APP_SPAN, bus.next_seq(), _local.st.tid, told))
    except Exception:  # never break the application's own tracing
        _log.debug("launchtrace: could not note the active span", exc_info=True)


def _watching_class(base: type) -> type:
    class WatchingRuntimeContext(base):  # type: ignore[misc, valid-type]
        """OpenTelemetry's runtime context, unchanged, plus :func:`_changed` after attach and detach."""

        def __init__(self, inner: Any) -> None:
            self._inner = inner

        def attach(self, context: Any) -> Any:
            token = self._inner.attach(context)
            _changed(context)
            return token

        def get_current(self) -> Any:
            return self._inner.get_current()

        def detach(self, token: Any) -> None:
            self._inner.detach(token)
            _changed()

    return WatchingRuntimeContext


def watch() -> bool:
    """Start telling the bus about changes of the active span; whether it is on (idempotent)."""
    global _wrapped, _get_current_span
    with _lock:
        if _wrapped is not None:
            return True
        try:
            import opentelemetry.context as otel_context
            from opentelemetry.context.context import _RuntimeContext
            from opentelemetry.trace import get_current_span
        except ImportError:
            return False
        _get_current_span = get_current_span
        inner = getattr(otel_context, "_RUNTIME_CONTEXT", None)
        if inner is None:
            _log.debug("launchtrace: OpenTelemetry's runtime context not found; launches outside scopes never join")
            return False
        otel_context._RUNTIME_CONTEXT = _watching_class(_RuntimeContext)(inner)
        _wrapped = inner
        return True


def unwatch() -> bool:
    """Put OpenTelemetry's runtime context back; whether it was watched."""
    global _wrapped
    with _lock:
        if _wrapped is None:
            return False
        import opentelemetry.context as otel_context

        current = otel_context._RUNTIME_CONTEXT
        if getattr(current, "_inner", None) is _wrapped:
            otel_context._RUNTIME_CONTEXT = _wrapped
        _wrapped = None
        return True
