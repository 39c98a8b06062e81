"""Run-stable names for Warp's geometry objects, which kernels take as a ``uint64`` handle (``grid.id``).

Why: a ``wp.Mesh``, ``wp.HashGrid``, ``wp.Bvh`` or ``wp.Volume`` reaches a kernel as its ``.id``, a native
pointer that differs in every run. Recorded as a plain scalar, an unchanged program that queried a hash grid
failed the topology gate against itself on every step (``scalar grid 0x563096b8cb00 -> 0x55fb80021e00``).
Each object is named where the program made it, as an array allocation is (:mod:`launchtrace.allocsite`):
``wp.HashGrid grid``, ``wp.Mesh Scene.mesh``, ``#k`` after it for the k-th one of that name alive at once; the
materializer records that name in place of the handle (:data:`HANDLE_NAMES`).

Example::

    grid = wp.HashGrid(16, 16, 16)          # under capture
    HANDLE_NAMES[grid.id]                   # "wp.HashGrid grid"
"""

from __future__ import annotations

import os
import sys
import threading
import weakref
from collections.abc import Callable
from typing import Any

from launchtrace.allocsite import qualified, statement_target
from launchtrace.capture.hotpath import _warn_once, is_library_code
from launchtrace.capture.patching import wraps_like

__all__ = ["HANDLE_NAMES", "MAX_HANDLES", "OBJECT_CLASSES", "name_object", "wrap_object_init"]

OBJECT_CLASSES = ("Mesh", "HashGrid", "Bvh", "Volume")
"""The ``warp`` classes whose ``id`` kernels take as a ``uint64`` argument."""

HANDLE_NAMES: dict[int, str] = {}
"""Handle (``obj.id``) -> the name of the last object made with it. Kept after the object dies: the materializer
names a launch after the program moved on (an object local to a function is gone by then); a handle the
allocator hands to a new object is named anew. At most :data:`MAX_HANDLES`, the oldest forgotten first."""

MAX_HANDLES = 65536
"""Handles named at once: a program that builds a new grid every step must not grow this for ever."""

_taken: dict[str, set[int]] = {}  # name without "#k" -> the k of the objects of that name alive now
_lock = threading.Lock()


def _where(frame: Any) -> tuple[Any, int] | None:
    """The code and line of the first frame outside Warp and launchtrace."""
    while frame is not None and is_library_code(frame.f_code):
        frame = frame.f_back
    return (frame.f_code, frame.f_lineno) if frame is not None else None


def _release(base: str, k: int) -> None:
    with _lock:
        _taken.get(base, set()).discard(k)


def name_object(obj: Any, frame: Any) -> str | None:
    """Name ``obj`` (just built, called from ``frame``) in :data:`HANDLE_NAMES`; its name, or ``None`` when it
    has no handle yet (``wp.Volume()`` without data)."""
    handle = getattr(obj, "id", 0)
    if not isinstance(handle, int) or not handle:
        return None
    where = _where(frame)
    target = statement_target(where[0].co_filename, where[1]) if where else None
    if target and not target.startswith("<"):
        what = qualified(target, where[0])
    elif where:
        what = f"({os.path.basename(where[0].co_filename)}:{where[1]})"
    else:
        what = "(?)"
    base = f"wp.{type(obj).__name__} {what}"
    with _lock:
        taken = _taken.setdefault(base, set())
        k = next(i for i in range(len(taken) + 1) if i not in taken)
        taken.add(k)
        name = f"{base}#{k}" if k else base
        HANDLE_NAMES.pop(handle, None)  # named anew: now the newest
        HANDLE_NAMES[handle] = name
        while len(HANDLE_NAMES) > MAX_HANDLES:
            del HANDLE_NAMES[next(iter(HANDLE_NAMES))]
    weakref.finalize(obj, _release, base, k)
    return name


def wrap_object_init(original: Callable) -> Callable:
    """A geometry class's ``__init__`` that names the object it built (a failure to name it is never raised)."""

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        try:
            name_object(self, sys._getframe(1))
        except Exception:
            _warn_once("object name")

    return wraps_like(original, __init__)
