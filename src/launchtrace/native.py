"""Where launchtrace's optional compiled parts are loaded, and the one switch that turns them all off.

Each compiled module (built by ``pip install`` from ``setup.py`` where a C compiler is available) stands in for
a Python reference that stays in the tree, is what runs without a compiler, and is what the tests compare the
compiled module against. ``LAUNCHTRACE_PURE_PYTHON=1`` makes every caller use the reference (for debugging, and
for the tests of the reference path).

Example::

    from launchtrace import native
    reader = native.load("launchtrace.otlp._jsonread")  # the module, or None
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

__all__ = ["load", "pure_python"]


def pure_python() -> bool:
    """Whether ``LAUNCHTRACE_PURE_PYTHON`` asks for the Python references only (read on every call)."""
    return os.environ.get("LAUNCHTRACE_PURE_PYTHON", "").strip() not in ("", "0")


def load(name: str) -> ModuleType | None:
    """The compiled module ``name``, or ``None``: not built here, or pure Python asked for."""
    if pure_python():
        return None
    try:
        return importlib.import_module(name)
    except ImportError:
        return None
