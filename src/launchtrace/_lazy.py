"""A package's public names imported on first use (PEP 562), so that importing the package stays cheap; and a
module imported on first use of one of its attributes (:func:`lazy_module`).

Example::

    __getattr__, __dir__ = lazy_names(__name__, {"read_spans": "launchtrace.sources.files"}, globals())
    np = lazy_module("numpy")   # imported at the first np.something
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from types import ModuleType
from typing import Any


def lazy_names(
    package: str, names: dict[str, str], namespace: dict[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package``: each name in ``names`` comes from the module it maps
    to, imported on first use and then kept in ``namespace`` (the package's globals)."""

    def __getattr__(name: str) -> Any:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(names))

    return __getattr__, __dir__


class _LazyModule:
    """Stands in for a module until one of its attributes is read; then imports it and hands that on."""

    __slots__ = ("_module", "_name")

    def __init__(self, name: str) -> None:
        self._name = name
        self._module: ModuleType | None = None

    def __getattr__(self, attribute: str) -> Any:
        module = self._module
        if module is None:
            module = self._module = importlib.import_module(self._name)
        return getattr(module, attribute)

    def __repr__(self) -> str:
        return f"<lazy module {self._name!r}>"


def lazy_module(name: str) -> Any:
    """``import name`` deferred to the first attribute read: for a heavy module (numpy: 0.1 s) that a module
    needs in some functions only, so that commands not calling them (``baseline build``) do not pay for it."""
    return _LazyModule(name)
