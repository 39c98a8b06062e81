"""Replace a function everywhere it is bound, and put every binding back exactly.

Warp's public names are second bindings of one function (``wp.launch is warp._src.context.launch``), and
modules that ran ``from warp._src.utils import array_scan`` hold their own reference. Patching one attribute
misses the others, so :class:`PatchSet` rebinds every module-level name that refers to the original (one walk
over ``sys.modules``) and remembers each binding it changed, so :meth:`PatchSet.restore` undoes exactly those.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["PatchSet"]

_log = logging.getLogger(__name__)


class PatchSet:
    """The bindings changed by one ``instrument()``: ``(owner, name, original)`` in patch order."""

    def __init__(self) -> None:
        self._changed: list[tuple[Any, str, Any]] = []
        self.wrappers: dict[int, Any] = {}  # id(wrapper) -> original, for "is this ours?"

    def __len__(self) -> int:
        return len(self._changed)

    def set_attr(self, owner: Any, name: str, wrapper: Any) -> None:
        """Bind ``owner.name`` to ``wrapper`` (a class attribute or a module global), remembering the original."""
        original = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)
        setattr(owner, name, wrapper)
        self._changed.append((owner, name, original))
        self.wrappers[id(wrapper)] = original

    def rebind_everywhere(self, originals: dict[int, tuple[Any, Any]], modules: Iterable[Any] | None = None) -> int:
        """Rebind every module global that is one of ``originals`` (``id(original) -> (original, wrapper)``).

        Returns the number of bindings changed. Only module dicts are walked: names captured in closures or
        default arguments cannot be reached, and Warp has none on these paths.
        """
        count = 0
        for module in list(sys.modules.values()) if modules is None else modules:
            namespace = getattr(module, "__dict__", None)
            if not isinstance(namespace, dict):
                continue
            for name, value in list(namespace.items()):
                hit = originals.get(id(value))
                if hit is not None and hit[0] is value:
                    namespace[name] = hit[1]
                    self._changed.append((module, name, value))
                    count += 1
        return count

    def restore(self) -> None:
        """Put every changed binding back, newest first; a binding someone else changed since is left alone."""
        for owner, name, original in reversed(self._changed):
            current = owner.__dict__.get(name) if isinstance(owner, type) else getattr(owner, name, None)
            if id(current) not in self.wrappers:
                _log.warning("launchtrace: %s.%s was rebound by someone else; leaving it", _name(owner), name)
                continue
            setattr(owner, name, original)
        self._changed.clear()
        self.wrappers.clear()


def _name(owner: Any) -> str:
    return getattr(owner, "__name__", type(owner).__name__)


def wraps_like(original: Callable, wrapper: Callable) -> Callable:
    """Copy the identity of ``original`` onto ``wrapper`` (name, doc, signature via ``__wrapped__``)."""
    for attr in ("__module__", "__name__", "__qualname__", "__doc__"):
        try:
            setattr(wrapper, attr, getattr(original, attr))
        except (AttributeError, TypeError):
            continue
    wrapper.__wrapped__ = original  # type: ignore[attr-defined]
    return wrapper
