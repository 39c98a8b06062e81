"""Optional per-launch measurements: value statistics of what a launch wrote, and CUDA device timing.

Both are off by default (``ExportConfig.value_stats`` / ``device_timing``, ``LAUNCHTRACE_VALUE_STATS`` /
``LAUNCHTRACE_DEVICE_TIMING``; the export pipeline calls :func:`configure`). Off, ``wp.launch``'s hot path pays
one module-level flag check (``launchtrace.capture.warp._PROBES``). On, a recorded ``wp.launch`` (also
``launch_tiled`` and ``Tape.backward``'s adjoint launches; not ``wp.Launch.launch``) runs through
:func:`wrap_launch`'s wrapper instead:

1. CUDA and ``device_timing``: a start event is recorded on the launch's stream (:mod:`.devicetiming`);
2. the launch runs, timed on the host as always; then the end event is recorded;
3. ``value_stats``: the statistics of every array the kernel writes are computed now, on the launching thread,
   before later launches change the values (:mod:`.valuestats`; on CUDA a synchronize and a copy to host);
4. the record event is queued wrapped with the results: a ``rawevent.PROBED`` event.

The export worker's materializer turns it into a :class:`~launchtrace.model.LaunchRecord` whose ``probes`` holds
:class:`~launchtrace.model.ValueStats` and :class:`~launchtrace.model.DeviceTime` (:func:`attach`, which waits
for the CUDA events at most until one deadline per drain, ``WAIT_S`` after it began). Nothing here raises into
the program: a failure is logged once and the launch is recorded without that measurement.

Example::

    from launchtrace.capture import probes
    probes.configure(value_stats=True)
    ...  # instrumented Warp code, under trace_launches() or the exporter
    print(probes.stats())  # ProbeStats(value_stats=True, ..., stats_arrays=12, ...)
"""

from __future__ import annotations

import dataclasses
import logging
import os
import sys
import time
from collections.abc import Callable
from time import time_ns
from typing import Any

from launchtrace.capture import bus
from launchtrace.capture.devicetiming import Pending, Timer
from launchtrace.capture.hotpath import _warn_once, find_site
from launchtrace.capture.state import _local
from launchtrace.capture.valuestats import MAX_ELEMENTS, array_stats, written_positions
from launchtrace.model import LaunchRecord
from launchtrace.rawevent import PROBED, record_event

__all__ = ["WAIT_S", "ProbeStats", "attach", "configure", "stats", "wait_deadline", "wrap_launch"]

_log = logging.getLogger("launchtrace.capture")

WAIT_S = 0.05
"""How long the export worker waits, per drain, for CUDA events still running; later, records go untimed."""

VALUE_STATS = False
DEVICE_TIMING = False
_max_elements = MAX_ELEMENTS
TIMER = Timer()
_counts = {"arrays": 0, "skipped": 0}
_cuda_checked = [False]
if hasattr(os, "register_at_fork"):  # a forked child cannot use the parent's CUDA events
    os.register_at_fork(after_in_child=TIMER.forget_devices)


@dataclasses.dataclass(frozen=True)
class ProbeStats:
    """What the probes did since the process started.

    ``stats_arrays``: arrays given statistics; ``stats_skipped``: written arrays given none (too large, struct
    dtype, error). ``timed``: launches given a device time; ``untimed_pool``: not timed because every event
    pair was in flight; ``untimed_capture``: issued during a graph capture; ``untimed_incomplete``: their events
    were not complete by the worker's deadline; ``in_flight``: event pairs recorded, not yet resolved.
    """

    value_stats: bool = False
    device_timing: bool = False
    max_elements: int = MAX_ELEMENTS
    stats_arrays: int = 0
    stats_skipped: int = 0
    timed: int = 0
    untimed_pool: int = 0
    untimed_capture: int = 0
    untimed_incomplete: int = 0
    in_flight: int = 0


def configure(
    *, value_stats: bool | None = None, device_timing: bool | None = None, max_elements: int | None = None
) -> ProbeStats:
    """Turn the measurements on or off for every launch from now on (``None``: leave as is)."""
    global VALUE_STATS, DEVICE_TIMING, _max_elements
    if max_elements is not None:
        if not isinstance(max_elements, int) or isinstance(max_elements, bool) or max_elements <= 0:
            raise ValueError(f"max_elements must be a positive int, got {max_elements!r}")
        _max_elements = max_elements
    if value_stats is not None:
        VALUE_STATS = bool(value_stats)
    if device_timing is not None:
        DEVICE_TIMING = bool(device_timing)
        _cuda_checked[0] = False
    _set_flag(VALUE_STATS or DEVICE_TIMING)
    return stats()


_flag_listeners: list[Callable[[bool], None]] = []


def on_flag(listener: Callable[[bool], None]) -> None:
    """Call ``listener(on)`` now and whenever a measurement is switched on or off: the hot path above
    (:mod:`launchtrace.capture.warp`) keeps the flag in a module global of its own, read once per launch."""
    _flag_listeners.append(listener)
    listener(VALUE_STATS or DEVICE_TIMING)


def _set_flag(on: bool) -> None:
    for listener in _flag_listeners:
        listener(on)


def stats() -> ProbeStats:
    """The settings and counters now."""
    t = TIMER
    return ProbeStats(
        VALUE_STATS,
        DEVICE_TIMING,
        _max_elements,
        _counts["arrays"],
        _counts["skipped"],
        t.timed,
        t.untimed_pool,
        t.untimed_capture,
        t.untimed_incomplete,
        t.in_flight(),
    )


def wait_deadline() -> float:
    """The ``time.monotonic`` deadline for the CUDA events of one drain (see :func:`attach`)."""
    return time.monotonic() + WAIT_S


def attach(rec: LaunchRecord, results: tuple, deadline: float) -> LaunchRecord:
    """``rec`` with the measurements of ``results`` as its ``probes`` (export worker side, never raises).

    A pending device timing is polled until ``deadline``; not complete by then, the record goes without it."""
    try:
        probes = []
        for item in results:
            if type(item) is Pending:
                item = item.resolve(deadline)
                if item is None:
                    continue
            probes.append(item)
        # template None: the measurements make it unlike the record it was copied from (its fold key differs)
        return dataclasses.replace(rec, probes=tuple(probes), template=None) if probes else rec
    except Exception:
        _warn_once("attaching measurements")
        return rec


# -- the launching thread --------------------------------------------------------------------------------------


def wrap_launch(original: Callable, extract: Callable, post: Callable) -> Callable:
    """The measuring ``wp.launch`` wrapper (``launchtrace.capture.warp.wrap_launch`` hands recorded launches to
    it while a measurement is on). ``extract``: the launch payload extractor; ``post``: the Tape caller fix."""

    def probed(*args: Any, **kwargs: Any) -> Any:
        st = _local.st
        st.busy = True  # nested device work (numpy()'s copy to host) is not recorded
        timing = None
        device = None
        try:
            device, stream = _device_and_stream(args, kwargs)
            if DEVICE_TIMING and device.is_cuda:
                timing = TIMER.begin(device, stream)
        except Exception:
            _warn_once("device timing")
        t0 = time_ns()
        try:
            result = original(*args, **kwargs)
        except BaseException as exc:
            t1 = time_ns()
            st.busy = False
            _abandon(timing)
            _emit(args, kwargs, extract, sys._getframe(2), t0, t1, exc, ())
            raise
        t1 = time_ns()
        results: list[Any] = []
        try:
            if result is not None:  # record_cmd=True: nothing ran
                _abandon(timing)
            else:
                if timing is not None:
                    timing.end()
                    results.append(timing)
                if VALUE_STATS and device is not None:
                    results.extend(_value_stats(args, kwargs, device))
        except Exception:
            _warn_once("measuring a launch")
        finally:
            st.busy = False
        frame = sys._getframe(2)  # the caller of wrap_launch's wrapper: the program, or Warp's own code
        post(args, kwargs, result, frame)
        if result is None:
            _emit(args, kwargs, extract, frame, t0, t1, None, tuple(results))
        _check_cuda()
        return result

    return probed


def _device_and_stream(args: tuple, kwargs: dict) -> tuple[Any, Any]:
    """The device and stream Warp's ``launch`` will use (its own rule: a stream names the device)."""
    from warp._src.context import runtime

    n = len(args)
    stream = args[7] if n > 7 else kwargs.get("stream")
    if stream is not None:
        return stream.device, stream
    device = runtime.get_device(args[6] if n > 6 else kwargs.get("device"))
    return device, (device.stream if device.is_cuda else None)


def _value_stats(args: tuple, kwargs: dict, device: Any) -> list:
    """Statistics of the arrays the launch wrote (none for adjoint launches and during a graph capture)."""
    from warp._src.types import array

    n = len(args)
    if (args[8] if n > 8 else kwargs.get("adjoint")) or device.is_capturing:
        return []
    kernel = args[0] if n else kwargs.get("kernel")
    inputs = list((args[2] if n > 2 else kwargs.get("inputs")) or ())
    values = inputs + list((args[3] if n > 3 else kwargs.get("outputs")) or ())
    out = []
    for i in written_positions(kernel, len(inputs), len(values)):
        if isinstance(values[i], array):
            found = array_stats(i, values[i], _max_elements)
            if found is not None:
                out.append(found)
                _counts["skipped" if found.skipped else "arrays"] += 1
    return out


def _abandon(timing: Pending | None) -> None:
    if timing is not None:
        timing.abandon()


def _emit(
    args: tuple, kwargs: dict, extract: Callable, frame: Any, t0: int, t1: int, error: Any, results: tuple
) -> None:
    """Queue the launch's record event, wrapped with ``results`` if any."""
    try:
        site = find_site(frame)
        st = _local.st
        stack = st.stack
        seq = bus.next_seq()
        scope = stack[-1] if stack else None
        payload = extract(args, kwargs, None)
        event = record_event(seq, st.tid, "launch", payload, site, t0, t1, scope, st.capture_graph, error)
        if results:
            event = (PROBED, seq, st.tid, event, results)
        bus.offer(event)
    except Exception:
        _warn_once("recording a launch")


def _check_cuda() -> None:
    """``device_timing`` alone without a CUDA device measures nothing: take launches back to the fast path."""
    if _cuda_checked[0]:
        return
    _cuda_checked[0] = True
    if VALUE_STATS or not DEVICE_TIMING:
        return
    try:
        from warp._src.context import runtime

        if not runtime.cuda_devices:
            _log.info("launchtrace: device_timing: no CUDA device, host times are exact; launches take the fast path")
            _set_flag(False)
    except Exception:
        pass
