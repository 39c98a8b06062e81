"""Capture: interpose every public way Warp issues device work, and scopes around it.

``instrument()`` patches Warp (see :mod:`launchtrace.capture.warp` for the list) and ``uninstrument()`` puts
every binding back exactly; both are idempotent and thread-safe. While instrumented and while somebody listens
(a :func:`launchtrace.testing.trace_launches` block, the exporter: see :mod:`launchtrace.capture.bus`), each
call becomes one record; with nobody listening a patched call costs one attribute read more than bare Warp.

Example::

    import launchtrace
    launchtrace.instrument()
    with launchtrace.scope("step", step=3):
        wp.launch(integrate, dim=n, inputs=[x, v, 0.01])
    launchtrace.uninstrument()
"""

from __future__ import annotations

import contextlib
import sys
import threading
from typing import Any

from launchtrace.capture import bus
from launchtrace.capture.hotpath import emit_scope_begin, emit_scope_end, is_library_code
from launchtrace.capture.patching import PatchSet

__all__ = ["bus", "instrument", "is_instrumented", "scope", "uninstrument"]

_lock = threading.RLock()
_patches: PatchSet | None = None


def instrument() -> bool:
    """Patch Warp so its device work is recorded. Returns ``False`` when it already was (a no-op)."""
    global _patches
    with _lock:
        if _patches is not None:
            return False
        from launchtrace.capture import appspan
        from launchtrace.capture.warp import patch_warp

        _patches = patch_warp()
        appspan.watch()
        return True


def uninstrument() -> bool:
    """Restore every binding :func:`instrument` changed. Returns ``False`` when not instrumented (a no-op)."""
    global _patches
    with _lock:
        if _patches is None:
            return False
        from launchtrace.capture import appspan

        _patches.restore()
        _patches = None
        appspan.unwatch()
        return True


def is_instrumented() -> bool:
    """Whether Warp is currently patched."""
    return _patches is not None


class scope(contextlib.ContextDecorator):
    """A named scope: a parent span for the device work issued inside it (context manager or decorator).

    ``attributes`` become span attributes (str, bool, int, float). Scopes nest per thread and close correctly
    when the block raises (the scope records the error). As a decorator each call is its own scope instance.

    Example::

        @launchtrace.scope("step")
        def step(state): ...

        with launchtrace.scope("rollout", env="cartpole", horizon=64):
            for _ in range(64):
                step(state)
    """

    def __init__(self, name: str, **attributes: Any) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"scope name must be a non-empty str, got {name!r}")
        self.name = name
        self.attributes = tuple(attributes.items())
        self._open: list[int] = []

    def _recreate_cm(self) -> scope:
        return scope(self.name, **dict(self.attributes))

    def __enter__(self) -> scope:
        frame = sys._getframe(1)
        if is_library_code(frame.f_code):  # contextlib's decorator wrapper: the site is further out
            frame = frame.f_back or frame
        self._open.append(emit_scope_begin(self.name, "user", self.attributes, False, frame))
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if self._open:
            emit_scope_end(self._open.pop(), exc)
