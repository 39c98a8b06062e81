"""Fast constructors for the frozen, slotted dataclasses built once per launch or per span.

A frozen dataclass's generated ``__init__`` sets every field through ``object.__setattr__`` looked up by name,
which costs more than everything else the capture materializer, the span builder or the OTLP/JSON decoder do
for one record (measured about 2x the cost of this constructor for ``LaunchRecord`` and ``SpanData``). The
function made here builds the same object by calling each slot descriptor's ``__set__`` directly. It is
generated once from ``dataclasses.fields(cls)``, so a field added later is picked up; the tests check each
generated constructor against ``cls(...)`` field for field (``test_materialize_fast.py``,
``test_spanbuilder.py``, ``test_json_codec.py``).

Example::

    from launchtrace.fastinit import slot_constructor
    from launchtrace.spans import SpanData
    new_span = slot_constructor(SpanData)                         # every field, same defaults as SpanData
    make = slot_constructor(SpanData, ("trace_id", "span_id", "parent_span_id", "name"))  # positional subset
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable
from typing import Any

__all__ = ["slot_constructor", "slot_copier"]


def slot_constructor(cls: type, passed: tuple[str, ...] | None = None) -> Callable[..., Any]:
    """A constructor for the frozen slots dataclass ``cls`` that builds what ``cls(...)`` builds.

    ``passed`` ``None``: it takes every field, in order, with the dataclass's defaults (a drop-in for ``cls``).
    Otherwise it takes exactly the ``passed`` fields, positionally, and fills the others with their defaults.
    """
    env: dict[str, Any] = {"_new": object.__new__, "_cls": cls}
    params: list[str] = []
    lines: list[str] = []
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = set(passed or ()) - names
    if unknown:
        raise TypeError(f"{cls.__name__} has no field(s) {sorted(unknown)}")
    for f in dataclasses.fields(cls):
        env[f"_set_{f.name}"] = cls.__dict__[f.name].__set__
        has_default = f.default is not dataclasses.MISSING
        if has_default:
            env[f"_default_{f.name}"] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            env[f"_factory_{f.name}"] = f.default_factory
        if passed is None:
            if f.default_factory is not dataclasses.MISSING and not has_default:
                raise TypeError(f"{cls.__name__}.{f.name}: default factories are not supported here")
            params.append(f"{f.name}=_default_{f.name}" if has_default else f.name)
            value = f.name
        elif f.name in passed:
            value = f.name
        elif has_default:
            value = f"_default_{f.name}"
        elif f.default_factory is not dataclasses.MISSING:
            value = f"_factory_{f.name}()"
        else:
            raise TypeError(f"{cls.__name__}.{f.name} has no default and is not passed")
        lines.append(f"    _set_{f.name}(obj, {value})")
    if passed is not None:
        params = list(passed)
    source = f"def new({', '.join(params)}):\n    obj = _new(_cls)\n" + "\n".join(lines) + "\n    return obj\n"
    namespace: dict[str, Any] = {}
    # The source is built from the dataclass's own field names only; nothing from outside reaches it.
    exec(compile(source, f"<launchtrace.fastinit.{cls.__name__}>", "exec"), env, namespace)
    return namespace["new"]


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
    kept = [name for name in names if name not in changed]
    # the kept values in one C call (operator.attrgetter), then one slot setter call per field
    env: dict[str, Any] = {"_new": object.__new__, "_cls": cls, "_kept": operator.attrgetter(*kept)}
    lines = ["    kept = _kept(base)"] if len(kept) > 1 else ["    kept = (_kept(base),)"] if kept else []
    for name in names:
        env[f"_set_{name}"] = cls.__dict__[name].__set__
        value = f"v_{name}" if name in changed else f"kept[{kept.index(name)}]"
        lines.append(f"    _set_{name}(obj, {value})")
    params = ", ".join(["base", *(f"v_{name}" for name in changed)])
    source = f"def copy({params}):\n    obj = _new(_cls)\n" + "\n".join(lines) + "\n    return obj\n"
    namespace: dict[str, Any] = {}
    # Built from the dataclass's own field names only; nothing from outside reaches it.
    exec(compile(source, f"<launchtrace.fastinit.copy.{cls.__name__}>", "exec"), env, namespace)
    return namespace["copy"]
