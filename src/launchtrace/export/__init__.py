"""Export: records become OpenTelemetry spans, written off the launching thread to a file or over OTLP.

One process-wide export pipeline (:mod:`launchtrace.export.pipeline`): :func:`start_export` subscribes to
the capture bus and starts the worker; spans go to the OTLP JSON Lines file named by the settings
(``LAUNCHTRACE_FILE``, default ``launchtrace-<date>-<time>-<pid>.jsonl`` in the working directory), or over
OTLP when ``OTEL_EXPORTER_OTLP_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` (or ``endpoint=``) is set.
Settings resolve keyword > environment > default (:class:`~launchtrace.export.config.ExportConfig`).
Process exit flushes what is pending, and so does ``SIGTERM`` when the program left its default action in
place (the process then still dies of the signal, as it would have); a forked child exports on its own.

Example::

    import launchtrace
    launchtrace.start_export(file_path="spans.jsonl")  # also instruments Warp
    ...  # Warp code
    launchtrace.flush()
    print(launchtrace.export.stats())  # ExportStats(exported=..., dropped_sink=0, ...)
"""

from __future__ import annotations

import atexit
import logging
import os
import signal
import threading
from typing import Any

from launchtrace.export.config import ExportConfig
from launchtrace.export.pipeline import ExportPipeline, ExportStats

__all__ = [
    "ExportConfig",
    "ExportStats",
    "configure",
    "flush",
    "start_export",
    "start_metrics",
    "stats",
    "stop_export",
]

logger = logging.getLogger(__name__)

EXIT_FLUSH_TIMEOUT_S = 2.0
"""How long process exit (and a flushing signal, and ``launchtrace run``'s end) waits for the last spans to be
written by default: a dead OTLP endpoint, or daemon threads still launching, are given up then and what was
not written is counted as dropped. ``LAUNCHTRACE_EXIT_TIMEOUT`` (seconds, >= 0) changes it."""

LAUNCHTRACE_EXIT_TIMEOUT = "LAUNCHTRACE_EXIT_TIMEOUT"

FLUSH_SIGNALS = ("SIGTERM", "SIGHUP")
"""Signals whose default action (death) is kept but preceded by a flush: SIGTERM (``kill``, service managers)
and SIGHUP (the terminal closed). A handler the program installed is left alone."""

_lock = threading.RLock()
_settings: dict[str, Any] = {}
_started_with: dict[str, Any] = {}  # the keyword settings of the running export (restarted after a failed exec)
_pipeline: ExportPipeline | None = None
_last_stats: ExportStats | None = None
_hooks_installed = False
_metrics: Any = None  # launchtrace.export.metrics.MetricsExport while metrics are exported


def configure(**settings: Any) -> ExportConfig:
    """Remember settings for the next :func:`start_export` (keyword names of ``ExportConfig``).

    Raises ``ValueError`` naming a bad or unknown setting. Returns the config they resolve to now.
    """
    config = ExportConfig.resolve(**{**_settings, **settings})
    with _lock:
        _settings.update(settings)
    return config


def start_export(*, instrument: bool = True, truncate: bool = False, **settings: Any) -> ExportPipeline:
    """Start exporting (a no-op returning the running pipeline when already started).

    ``settings`` override :func:`configure`'s; ``instrument`` also patches Warp (``launchtrace.instrument``);
    ``truncate`` empties the output file first (file sink only).
    """
    global _pipeline
    with _lock:
        if _pipeline is not None and _pipeline.running:
            if settings:
                logger.warning("launchtrace: export already running; new settings ignored (stop_export first)")
            return _pipeline
        config = ExportConfig.resolve(**{**_settings, **settings})
        _started_with.clear()
        _started_with.update(settings)
        _install_hooks()
        _import_before_the_worker()
        _pipeline = ExportPipeline(config, truncate=truncate).start()
        _flush_at_multiprocessing_exit()
    if instrument:
        from launchtrace.capture import instrument as _instrument

        _instrument()
    if not _pipeline.config.join_active_span:  # nothing will use the application's active span: stop watching it
        from launchtrace.capture import appspan

        appspan.unwatch()
    logger.debug("launchtrace: exporting to %s", _pipeline.sink.description)
    if _metrics is None and os.environ.get("OTEL_METRICS_EXPORTER"):
        start_metrics()
    return _pipeline


def _import_before_the_worker() -> None:
    """Import here what the worker thread would import on its first drain, and what instrumenting imports.

    Two threads importing modules that import each other can meet in a cycle; Python then breaks the deadlock by
    handing one of them a partially initialized module ("cannot import name ... from partially initialized
    module 'launchtrace.capture.materialize'"), seen in spawned children that start the export while their
    main thread imports. Importing both here, in one thread, first, leaves the worker nothing to import."""
    import launchtrace.capture
    import launchtrace.capture.materialize  # noqa: F401


def start_metrics(exporters: tuple[str, ...] | None = None, *, prometheus: str | None = None) -> Any:
    """Also export launch metrics (counts, duration histograms; :mod:`launchtrace.export.metrics`) from the running
    export: ``exporters`` among ``"otlp"``, ``"prometheus"`` (default: ``OTEL_METRICS_EXPORTER``), ``prometheus``
    the ``host:port`` to serve ``/metrics`` on. Returns the ``MetricsExport`` (``None`` when nothing is asked for or
    it could not start: logged, never raised)."""
    global _metrics
    from launchtrace.export import metrics as M

    with _lock:
        pipeline = _pipeline if _pipeline is not None and _pipeline.running else start_export()
        if _metrics is not None:
            return _metrics
        names = tuple(exporters) if exporters is not None else M.exporters_from_env()
        if not names:
            return None
        try:
            from launchtrace.export.spanresource import build_resource

            counts = M.LaunchMetrics()
            _metrics = M.MetricsExport(
                counts, build_resource(pipeline.config.service_name), names, prometheus=prometheus
            )
        except Exception:  # telemetry never breaks the program
            logger.warning("launchtrace: could not start metrics export %s", names, exc_info=True)
            return None
        pipeline.observers.append(counts.observe)
    return _metrics


def flush(timeout: float = 10.0) -> bool:
    """Export everything captured so far; whether it finished within ``timeout`` seconds (``False``, and a
    warning, when no export was started: :func:`start_export`). Never raises."""
    pipeline = _pipeline
    if pipeline is None:
        logger.warning("launchtrace: flush() with no export running: nothing is exported (call start_export)")
        return False
    return pipeline.flush(timeout)


def stop_export(timeout: float = 10.0) -> ExportStats:
    """Flush (ending open scopes), stop the worker, close the sink; returns the final stats."""
    global _pipeline, _last_stats
    global _metrics
    with _lock:
        pipeline, _pipeline = _pipeline, None
        metrics, _metrics = _metrics, None
    if pipeline is None:
        return _last_stats or ExportStats()
    _last_stats = pipeline.stop(timeout)
    if metrics is not None:
        metrics.shutdown()  # after the final flush: the last export counts every record
    return _last_stats


def stats() -> ExportStats:
    """Counts of the running export (or of the last one stopped): exported, dropped per reason."""
    pipeline = _pipeline
    if pipeline is not None:
        return pipeline.stats()
    return _last_stats or ExportStats()


def exit_timeout(environ: Any = None) -> float:
    """Seconds the exit flush may take: ``LAUNCHTRACE_EXIT_TIMEOUT`` when it is a number >= 0, else
    :data:`EXIT_FLUSH_TIMEOUT_S` (a bad value is warned about once, never raised)."""
    global _warned_exit_timeout
    raw = (os.environ if environ is None else environ).get(LAUNCHTRACE_EXIT_TIMEOUT, "").strip()
    if not raw:
        return EXIT_FLUSH_TIMEOUT_S
    try:
        value = float(raw)
        if not value >= 0 or value == float("inf"):
            raise ValueError("must be a number of seconds >= 0")
    except ValueError as exc:
        if not _warned_exit_timeout:
            _warned_exit_timeout = True
            logger.warning("ignoring %s=%r (%s); using the default", LAUNCHTRACE_EXIT_TIMEOUT, raw, exc)
        return EXIT_FLUSH_TIMEOUT_S
    return value


_warned_exit_timeout = False


def _at_exit() -> None:
    if _pipeline is None:
        return
    try:
        final = stop_export(exit_timeout())
    except Exception:  # never turn a clean exit into a traceback
        logger.debug("launchtrace: exit flush failed", exc_info=True)
        return
    if final.dropped:
        logger.warning(
            "launchtrace: %d spans exported to %s, %d dropped (sink %d, queue %d, budget %d)",
            final.exported,
            final.sink,
            final.dropped,
            final.dropped_sink,
            final.dropped_queue,
            final.dropped_budget,
        )


_flushing_for_signal: int | None = None


def _on_flush_signal(signum: int, frame: object) -> None:
    """SIGTERM or SIGHUP with its default action (death by the signal): flush first, then die of it all the same.

    The exit status stays the one the program would have had (killed by the signal, ``-15`` / ``-1`` to a
    parent) and, as with the default action, no ``atexit`` handler runs. A second signal during the flush
    (an impatient ``kill``, a service manager repeating itself) does not cut the write that is under way: it
    is noted and the process dies once the flush, bounded by :func:`exit_timeout`, is over.
    """
    global _flushing_for_signal
    if _flushing_for_signal is not None:
        return  # the flush under way finishes, then the process dies of the first signal
    _flushing_for_signal = signum
    name = signal.Signals(signum).name
    pipeline = _pipeline
    if pipeline is not None:
        try:
            final = stop_export(exit_timeout())
            logger.warning(
                "launchtrace: %s: %d spans exported to %s before exiting, %d dropped",
                name,
                final.exported,
                final.sink,
                final.dropped,
            )
        except Exception:  # the signal must still end the process
            logger.debug("launchtrace: flush on %s failed", name, exc_info=True)
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _install_signal_flush() -> None:
    """Flush on SIGTERM and SIGHUP, only where the action is still the default: a handler the program installed
    (before or after this) is the program's to keep, and its clean exit flushes through ``atexit``."""
    if threading.current_thread() is not threading.main_thread():
        return  # signal.signal works only there; the default action then stays
    for name in FLUSH_SIGNALS:
        signum = getattr(signal, name, None)
        if signum is None:
            continue
        try:
            if signal.getsignal(signum) is signal.SIG_DFL:
                signal.signal(signum, _on_flush_signal)
        except (ValueError, OSError, AttributeError):  # an embedded interpreter's rules
            logger.debug("launchtrace: cannot flush on %s here", name, exc_info=True)


def _flush_before_exec(real: Any) -> Any:
    """``os.execv`` / ``os.execve`` that first write what is pending: the new program image keeps nothing of
    this one's memory, so records not yet exported would vanish silently (every other ``os.exec*`` goes through
    these two). If the exec fails, the export simply goes on."""

    def exec_after_flush(*args: Any, **kwargs: Any) -> Any:
        pipeline = _pipeline
        if pipeline is not None:
            try:
                pipeline.flush(exit_timeout(), final=True)
            except Exception:  # never keep the program from exec'ing
                logger.debug("launchtrace: flush before exec failed", exc_info=True)
        try:
            return real(*args, **kwargs)
        except BaseException:
            if pipeline is not None:
                _restart_after_failed_exec()
            raise

    exec_after_flush.__wrapped__ = real  # type: ignore[attr-defined]
    exec_after_flush.__name__ = real.__name__
    exec_after_flush.__doc__ = real.__doc__
    return exec_after_flush


def _restart_after_failed_exec() -> None:
    """The exec failed (no such program): the final flush ended the worker, so start a new one as before."""
    try:
        stop_export(exit_timeout())
        start_export(instrument=False, **_started_with)
    except Exception:
        logger.debug("launchtrace: could not restart the export after a failed exec", exc_info=True)


def _wrap_exec() -> None:
    for name in ("execv", "execve"):
        real = getattr(os, name, None)
        if real is not None and not hasattr(real, "__wrapped__"):
            setattr(os, name, _flush_before_exec(real))


def _after_fork_in_child() -> None:
    global _lock, _metrics
    _lock = threading.RLock()  # another thread may have held it at fork time
    _metrics = None  # the pipeline's observers are cleared too: the parent's counts are not the child's
    pipeline = _pipeline
    if pipeline is None:
        return
    try:
        pipeline.restart_in_child()
    except Exception:
        logger.warning("launchtrace: could not restart export in the forked child", exc_info=True)
        return
    _flush_at_multiprocessing_exit()


def _flush_at_multiprocessing_exit() -> None:
    """multiprocessing's forked workers (``fork``, and ``forkserver``'s) leave through ``os._exit`` (no atexit):
    flush from its finalizers.

    A ``Process`` clears the finalizer registry before running its after-fork hooks, so for a process still
    to start (or starting: the export may start while its target is unpickled) the finalizer is registered
    from such a hook; in a ``Process`` already running, directly.
    """
    import sys

    mp_util = sys.modules.get("multiprocessing.util")
    if mp_util is None or _pipeline is None:
        return
    mp_util.register_after_fork(_pipeline, _register_finalizer)
    mp_process = sys.modules.get("multiprocessing.process")
    current = mp_process.current_process() if mp_process is not None else None
    if current is not None and mp_process.parent_process() is not None and not getattr(current, "_inheriting", False):
        _register_finalizer(_pipeline)


def _register_finalizer(_pipeline_obj: object) -> None:
    import multiprocessing.util as mp_util

    mp_util.Finalize(None, _at_exit, exitpriority=10)


def _install_hooks() -> None:
    global _hooks_installed
    if _hooks_installed:
        return
    _hooks_installed = True
    atexit.register(_at_exit)
    _install_signal_flush()
    _wrap_exec()
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_after_fork_in_child)
