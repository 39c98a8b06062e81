"""Fast constructors for the frozen, slotted dataclasses built once per launch or per span.

A frozen dataclass's generated ``__init__`` sets every field through ``object.__setattr__`` looked up by name,
which costs more than everything else the capture materializer, the span builder or the OTLP/JSON decoder do
for one record. The functions made here build the same object faster:

- they create an instance of a *twin* class: a plain class with exactly the dataclass's ``__slots__`` (same
  layout), whose ordinary attribute stores CPython 3.11+ specialises into direct slot writes, then give the
  object its real class (``obj.__class__ = cls``, which CPython allows between classes of identical layout),
  several times cheaper than ``SpanData(...)`` (``benchmarks/bench_structs.py``);
- where the twin cannot be made (a dataclass with a base class, ``__weakref__`` or ``__dict__``), they call each
  slot descriptor's ``__set__`` instead.

Where launchtrace's compiled ``_slots`` module is built (:mod:`launchtrace.native`), the positional
constructors and the copiers are its ``Constructor`` / ``Copier`` instead: the same stores done in C, one
allocation and one pointer store per field (``docs/export.md``, "Speed"). The Python functions stay the reference
and the fallback (a class whose fields are not all plain slots, a default factory, ``LAUNCHTRACE_PURE_PYTHON``).

The result is an ordinary frozen instance of ``cls``: equal, hashable and immutable as one made by ``cls(...)``.
Each function is generated once from ``dataclasses.fields(cls)``, so a field added later is picked up; the tests
check the generated functions against ``cls(...)`` / ``dataclasses.replace`` field for field
(``test_fastinit.py``, ``test_materialize_fast.py``, ``test_spanbuilder.py``, ``test_json_codec.py``).

Example::

    from launchtrace.fastinit import slot_constructor, slot_copier
    from launchtrace.spans import SpanData
    new_span = slot_constructor(SpanData)                         # every field, same defaults as SpanData
    make = slot_constructor(SpanData, ("trace_id", "span_id", "parent_span_id", "name"))  # positional subset
    retimed = slot_copier(SpanData, ("start_ns", "end_ns"))       # retimed(span, 5, 9)
"""

from __future__ import annotations

import dataclasses
import operator
import types
from collections.abc import Callable
from typing import Any

from launchtrace import native

__all__ = ["slot_constructor", "slot_copier"]

_TWINS: dict[type, type | None] = {}


def _twin(cls: type) -> type | None:
    """A plain class with ``cls``'s slot layout that an instance can be re-classed from, or ``None``."""
    if cls in _TWINS:
        return _TWINS[cls]
    twin: type | None = None
    slots = cls.__dict__.get("__slots__")
    if cls.__bases__ == (object,) and isinstance(slots, tuple) and "__weakref__" not in slots:
        candidate = type(f"_{cls.__name__}Twin", (), {"__slots__": slots, "__module__": __name__})
        try:
            probe = object.__new__(candidate)
            probe.__class__ = cls  # raises TypeError unless the layouts are the same
            twin = candidate
        except TypeError:
            twin = None
    _TWINS[cls] = twin
    return twin


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
    except (TypeError, ValueError):  # not plain object slots after all: the Python function
        return None


def _compile(name: str, source: str, env: dict[str, Any], cls: type) -> Callable[..., Any]:
    namespace: dict[str, Any] = {}
    # The source is built from the dataclass's own field names only; nothing from outside reaches it.
    exec(compile(source, f"<launchtrace.fastinit.{name}.{cls.__name__}>", "exec"), env, namespace)
    return namespace[name]


def _body(cls: type, values: dict[str, str], env: dict[str, Any]) -> str:
    """The statements that make ``obj`` an instance of ``cls`` with each field set to its expression."""
    twin = _twin(cls)
    env["_new"], env["_cls"], env["_twin"] = object.__new__, cls, twin
    if twin is not None:
        lines = ["    obj = _new(_twin)"] + [f"    obj.{field} = {value}" for field, value in values.items()]
        lines.append("    obj.__class__ = _cls")
    else:
        lines = ["    obj = _new(_cls)"]
        for field, value in values.items():
            slot = _slot(cls, field)
            env[f"_set_{field}"] = slot.__set__
            lines.append(f"    _set_{field}(obj, {value})")
    return "\n".join(lines) + "\n    return obj\n"


def slot_constructor(cls: type, passed: tuple[str, ...] | None = None) -> Callable[..., Any]:
    """A constructor for the frozen slots dataclass ``cls`` that builds what ``cls(...)`` builds.

    ``passed`` ``None``: it takes every field, in order, with the dataclass's defaults (a drop-in for ``cls``).
    Otherwise it takes exactly the ``passed`` fields, positionally only, and fills the others with their defaults.
    """
    env: dict[str, Any] = {}
    params: list[str] = []
    values: dict[str, str] = {}
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = set(passed or ()) - names
    if unknown:
        raise TypeError(f"{cls.__name__} has no field(s) {sorted(unknown)}")
    for f in dataclasses.fields(cls):
        has_default = f.default is not dataclasses.MISSING
        if has_default:
            env[f"_default_{f.name}"] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            env[f"_factory_{f.name}"] = f.default_factory
        if passed is None:
            if f.default_factory is not dataclasses.MISSING and not has_default:
                raise TypeError(f"{cls.__name__}.{f.name}: default factories are not supported here")
            params.append(f"{f.name}=_default_{f.name}" if has_default else f.name)
            values[f.name] = f.name
        elif f.name in passed:
            values[f.name] = f.name
        elif has_default:
            values[f.name] = f"_default_{f.name}"
        elif f.default_factory is not dataclasses.MISSING:
            values[f.name] = f"_factory_{f.name}()"
        else:
            raise TypeError(f"{cls.__name__}.{f.name} has no default and is not passed")
    if passed is not None:
        params = list(passed)
        factories = any(f"_factory_{name}" in env for name in names - set(passed))
        compiled = None if factories else _compiled(
            "new", cls, {name: i for i, name in enumerate(passed)},
            {name: env[f"_default_{name}"] for name in names - set(passed)},
        )  # fmt: skip
        if compiled is not None:
            return compiled
    positional_only = ", /" if passed else ""  # as the compiled Constructor: the fields in order, no keywords
    source = f"def new({', '.join(params)}{positional_only}):\n" + _body(cls, values, env)
    return _compile("new", source, env, cls)


def slot_copier(cls: type, changed: tuple[str, ...]) -> Callable[..., Any]:
    """A function ``copy(base, *values)``: what ``dataclasses.replace(base, **dict(zip(changed, values)))``
    builds, for the frozen slots dataclass ``cls``, without ``replace``'s keyword handling and ``__init__``.

    For records made by the thousand that differ from a cached one only in a few fields (times, sequence
    number): the materializer's launch templates and the rebuilder's expanded summary spans.
    """
    names = [f.name for f in dataclasses.fields(cls)]
    unknown = set(changed) - set(names)
    if unknown:
        raise TypeError(f"{cls.__name__} has no field(s) {sorted(unknown)}")
    if len(set(changed)) == len(changed):
        compiled = _compiled("copy", cls, {name: i for i, name in enumerate(changed)}, None)
        if compiled is not None:
            return compiled
    kept = [name for name in names if name not in changed]
    # the kept values in one C call (operator.attrgetter), then one store per field
    env: dict[str, Any] = {"_kept": operator.attrgetter(*kept) if kept else None}
    values = {name: f"v_{name}" if name in changed else f"kept[{kept.index(name)}]" for name in names}
    head = "    kept = _kept(base)\n" if len(kept) > 1 else "    kept = (_kept(base),)\n" if kept else ""
    params = ", ".join(["base", *(f"v_{name}" for name in changed), "/"])  # positional only, as the Copier
    source = f"def copy({params}):\n" + head + _body(cls, values, env)
    return _compile("copy", source, env, cls)
