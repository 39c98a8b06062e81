"""Makers for the frozen, slotted dataclasses built once per launch or per span: compiled where built, else the
dataclass itself.

A frozen dataclass's generated ``__init__`` sets every field through ``object.__setattr__`` looked up by name,
which costs more than everything else the capture materializer or the span builder do for one record. Where
launchtrace's compiled ``_slots`` module is built (:mod:`launchtrace.native`), the makers here are its
``Constructor`` / ``Copier``: one allocation and one pointer store per field (``docs/export.md``, "Speed").
Elsewhere (no compiler at install, ``LAUNCHTRACE_PURE_PYTHON``, a class whose fields are not all plain slots, a
default factory) they are the dataclass's own constructor and :func:`dataclasses.replace`: the library doing
the same job, slower, and no hand-written twin of the compiled makers (issue 26).

The result is an ordinary frozen instance of ``cls``: equal, hashable and immutable as one made by ``cls(...)``;
the tests compare the compiled makers against ``cls(...)`` / ``dataclasses.replace`` field for field
(``test_fastinit.py``, ``test_materialize_fast.py``, ``test_spanbuilder.py``, ``test_json_codec.py``).

Example::

    from launchtrace.fastinit import slot_constructor, slot_copier
    from launchtrace.spans import SpanData
    make = slot_constructor(SpanData, ("trace_id", "span_id", "parent_span_id", "name"))  # positional subset
    retimed = slot_copier(SpanData, ("start_ns", "end_ns"))  # retimed(span, 5, 9)
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Callable
from typing import Any

from launchtrace import native

__all__ = ["slot_constructor", "slot_copier"]


def _slot(cls: type, name: str) -> Any:
    """The descriptor of field ``name`` as ``cls``'s attribute look-up finds it (the class or a base), or None."""
    return next((k.__dict__[name] for k in cls.__mro__ if name in k.__dict__), None)


def _compiled(kind: str, cls: type, sources: dict[str, int], defaults: dict[str, Any] | None) -> Any:
    """The compiled maker (``launchtrace._slots``) for ``cls``, or ``None`` where it cannot stand in."""
    slots = native.load("launchtrace._slots")
    names = [f.name for f in dataclasses.fields(cls)]
    descriptors = tuple(_slot(cls, name) for name in names)
    if slots is None or not all(isinstance(d, types.MemberDescriptorType) for d in descriptors):
        return None
    order = tuple(sources.get(name, -1) for name in names)
    try:
        if kind == "copy":
            return slots.Copier(cls, descriptors, order)
        assert defaults is not None
        return slots.Constructor(cls, descriptors, order, tuple(defaults.get(name) for name in names))
    except (TypeError, ValueError):  # not plain object slots after all: the dataclass's own constructor
        return None


def slot_constructor(cls: type, passed: tuple[str, ...]) -> Callable[..., Any]:
    """A constructor for the frozen slots dataclass ``cls`` that takes exactly the ``passed`` fields,
    positionally only, fills the others with their defaults, and builds what ``cls(...)`` builds."""
    fields = dataclasses.fields(cls)
    unknown = set(passed) - {f.name for f in fields}
    if unknown:
        raise TypeError(f"{cls.__name__} has no field(s) {sorted(unknown)}")
    defaults: dict[str, Any] = {}
    factories = False
    for f in fields:
        if f.name in passed:
            continue
        if f.default is not dataclasses.MISSING:
            defaults[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            factories = True  # a call per object: the dataclass's own constructor makes it
        else:
            raise TypeError(f"{cls.__name__}.{f.name} has no default and is not passed")
    if not factories and len(set(passed)) == len(passed):
        compiled = _compiled("new", cls, {name: i for i, name in enumerate(passed)}, defaults)
        if compiled is not None:
            return compiled
    count = len(passed)

    def new(*values: Any) -> Any:
        if len(values) != count:
            raise TypeError(f"{cls.__name__} maker takes {count} positional arguments ({len(values)} given)")
        return cls(**dict(zip(passed, values)))

    return new


def slot_copier(cls: type, changed: tuple[str, ...]) -> Callable[..., Any]:
    """A function ``copy(base, *values)``: what ``dataclasses.replace(base, **dict(zip(changed, values)))``
    builds, for the frozen slots dataclass ``cls``, without ``replace``'s keyword handling and ``__init__``
    where compiled.

    For records made by the thousand that differ from a cached one only in a few fields (times, sequence
    number): the materializer's launch templates and the rebuilder's expanded summary spans.
    """
    unknown = set(changed) - {f.name for f in dataclasses.fields(cls)}
    if unknown:
        raise TypeError(f"{cls.__name__} has no field(s) {sorted(unknown)}")
    if len(set(changed)) == len(changed):
        compiled = _compiled("copy", cls, {name: i for i, name in enumerate(changed)}, None)
        if compiled is not None:
            return compiled
    count = len(changed)

    def copy(base: Any, *values: Any) -> Any:
        if len(values) != count:
            raise TypeError(f"{cls.__name__} copier takes 1 + {count} positional arguments ({1 + len(values)} given)")
        if type(base) is not cls:
            raise TypeError(f"{cls.__name__} copier: base is a {type(base).__name__}")
        return dataclasses.replace(base, **dict(zip(changed, values)))

    return copy
