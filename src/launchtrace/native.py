"""Where launchtrace's optional compiled parts are loaded, and the switches that turn them off or make them required.

Each compiled module (built by ``pip install`` from ``setup.py`` where a C compiler is available) stands in for
a Python reference that stays in the tree, is what runs without a compiler, and is what the tests compare the
compiled module against. ``LAUNCHTRACE_PURE_PYTHON=1`` makes every caller use the reference (for debugging, and
for the tests of the reference path). ``LAUNCHTRACE_REQUIRE_NATIVE=1`` (CI) makes a compiled part that is missing
an error instead of a quiet fallback: ``setup.py`` then builds every extension non-optionally, and :func:`load`
raises. Pure Python, where asked for, wins over it.

Example::

    from launchtrace import native
    reader = native.load("launchtrace.otlp._jsonread")  # the module, or None
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

__all__ = ["COMPILED", "load", "pure_python", "require_native"]

#: Every compiled part, as a path under ``src/launchtrace`` without ``.c``; ``setup.py`` builds this list.
COMPILED = (
    "_slots",
    "capture/_fastlaunch",
    "capture/_fastmat",
    "export/_fastbuild",
    "otlp/_jsonread",
    "otlp/_jsonenc",
    "otlp/_protoenc",
)


def _flag(variable: str) -> bool:
    return os.environ.get(variable, "").strip() not in ("", "0")


def pure_python() -> bool:
    """Whether ``LAUNCHTRACE_PURE_PYTHON`` asks for the Python references only (read on every call)."""
    return _flag("LAUNCHTRACE_PURE_PYTHON")


def require_native() -> bool:
    """Whether ``LAUNCHTRACE_REQUIRE_NATIVE`` makes a missing compiled part an error (read on every call)."""
    return _flag("LAUNCHTRACE_REQUIRE_NATIVE")


def load(name: str) -> ModuleType | None:
    """The compiled module ``name``, or ``None``: not built here, or pure Python asked for.

    Raises :class:`ImportError` instead of returning ``None`` for a module that is not built when
    :func:`require_native` is set.
    """
    if pure_python():
        return None
    try:
        return importlib.import_module(name)
    except ImportError as error:
        if require_native():
            raise ImportError(f"{name} is not built and LAUNCHTRACE_REQUIRE_NATIVE is set: {error}") from error
        return None
