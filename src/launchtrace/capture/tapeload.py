"""Two host-side scopes that make a zero-code run read like the code: module loads and Tape passes.

- **Module loads.** Warp compiles or loads a module inside the first launch of any of its kernels, timed by its
  own ``ScopedTimer("Module <name> <hash> load on device '<device>'")``. Left as an internal timer that load
  (seconds when the kernel cache is cold) would be charged to the launch. :func:`module_load_of` recognises
  that timer, so the timer patch opens a ``warp.module.load`` scope instead (kind ``load``, never internal),
  with the module and device as attributes and, at its end, whether it was ``compiled`` or ``cached``
  (:func:`load_result`). The materializer then starts the launch that contained the load where the load ended
  (``launchtrace.capture.materialize``): a launch span never holds compile time.
- **Tape passes.** ``with tape:`` and ``tape.backward()`` become ``tape.forward`` / ``tape.backward`` scopes
  when no scope is open on the thread (a user's timer or scope around them already says what they are).

Nothing here runs per launch: a timer's name is parsed only for Warp's own timers, a Tape pass costs one
scope.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from typing import Any

from launchtrace import conventions as C
from launchtrace.capture.hotpath import emit_scope_begin, emit_scope_end
from launchtrace.capture.patching import wraps_like
from launchtrace.capture.state import tstate

__all__ = [
    "MODULE_LOAD_SPAN",
    "TAPE_BACKWARD_SPAN",
    "TAPE_FORWARD_SPAN",
    "load_result",
    "module_load_of",
    "wrap_tape_backward",
    "wrap_tape_enter",
    "wrap_tape_exit",
]

MODULE_LOAD_SPAN = "warp.module.load"
TAPE_FORWARD_SPAN = "tape.forward"
TAPE_BACKWARD_SPAN = "tape.backward"
_LOAD_TIMER = re.compile(r"^Module (?P<module>.+?)(?: [0-9a-f]{7})? load on device '(?P<device>[^']*)'")


def module_load_of(timer_name: str) -> tuple | None:
    """The scope attributes of a Warp module-load timer (``((module key, name), (device key, device))``), or
    ``None`` when ``timer_name`` is another timer."""
    match = _LOAD_TIMER.match(timer_name)
    if match is None:
        return None
    return ((C.LOAD_MODULE, match["module"]), (C.LOAD_DEVICE, match["device"]))


def load_result(timer: Any) -> tuple:
    """The end attributes of a module-load timer: ``compiled``, ``cached`` or ``error`` from its ``extra_msg``."""
    result = str(getattr(timer, "extra_msg", "") or "").strip(" ()")
    return ((C.LOAD_RESULT, result),) if result else ()


def wrap_tape_enter(original: Callable) -> Callable:
    def __enter__(self: Any) -> Any:
        result = original(self)
        if not tstate().stack:
            sid = emit_scope_begin(TAPE_FORWARD_SPAN, "tape", (), False, sys._getframe(1))
            self.__dict__["_launchtrace_scope"] = sid
        return result

    return wraps_like(original, __enter__)


def wrap_tape_exit(original: Callable) -> Callable:
    def __exit__(self: Any, exc_type: Any, exc_value: Any, traceback: Any) -> Any:
        try:
            return original(self, exc_type, exc_value, traceback)
        finally:
            sid = self.__dict__.pop("_launchtrace_scope", None)
            if sid is not None:
                emit_scope_end(sid, exc_value)

    return wraps_like(original, __exit__)


def wrap_tape_backward(original: Callable) -> Callable:
    def backward(self: Any, *args: Any, **kwargs: Any) -> Any:
        if tstate().stack:
            return original(self, *args, **kwargs)
        sid = emit_scope_begin(TAPE_BACKWARD_SPAN, "tape", (), False, sys._getframe(1))
        try:
            result = original(self, *args, **kwargs)
        except BaseException as exc:
            emit_scope_end(sid, exc)
            raise
        emit_scope_end(sid)
        return result

    return wraps_like(original, backward)
