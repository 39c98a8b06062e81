"""Record and scope -> span attribute tuples, following :mod:`launchtrace.conventions`.

Pure functions called by the span builder once per record, off the launching thread. They write only what
differs from the record model's defaults (no ``launchtrace.internal=false`` on every span), so a span stays
small, and :mod:`launchtrace.sources.rebuild` restores the defaults. Site attributes and argument labels are cached:
a program has few distinct call sites and kernel signatures.

Example::

    from launchtrace.export.spanattrs import record_attributes
    from launchtrace.model import LaunchRecord, Site
    rec = LaunchRecord("launch", "sim.step", (8,), None, ((0, 0x10),), ((1, 0.5),), Site("a.py", 3, "f"),
                       params=("x", "dt"))
    print(dict(record_attributes(rec))["launchtrace.scalar.dt"])  # 0.5
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from operator import attrgetter
from typing import Any

from launchtrace import conventions as C
from launchtrace.model import DeviceTime, LaunchRecord, ScopeRecord, Site, ValueStats

__all__ = ["device_time_attributes", "record_attributes", "scope_attributes", "site_attributes"]


@lru_cache(maxsize=4096)
def site_attributes(site: Site, limit: int = C.MAX_VALUE_LENGTH, deprecated: bool = False) -> tuple:
    """The ``code.*`` attributes of a call site: the stable OpenTelemetry names (``code.function.name`` fully
    qualified, ``module.function``); with ``deprecated`` the older names as well, for backends that read only
    those (``code.filepath``, ``code.lineno``, ``code.function``, ``code.namespace``)."""
    file, function = C.bounded(site.file, limit), C.bounded(site.function, limit)
    qualified = C.bounded(f"{site.module}.{site.function}", limit) if site.module else function
    attrs = [(C.CODE_FILE_PATH, file), (C.CODE_LINE_NUMBER, site.line), (C.CODE_FUNCTION_NAME, qualified)]
    if deprecated:
        attrs += [(C.CODE_FILEPATH, file), (C.CODE_LINENO, site.line), (C.CODE_FUNCTION, function)]
        if site.module:
            attrs.append((C.CODE_NAMESPACE, C.bounded(site.module, limit)))
    return tuple(attrs)


def _int64(value: Any) -> Any:
    return C.scalar_value(value)


_WRITE = {"int": int, "int64": _int64, "str": str, "bool": bool}
"""How each kind of :data:`launchtrace.conventions.RECORD_FIELDS` is written."""


def _compile(table: tuple) -> tuple[Callable[[Any], tuple], tuple]:
    """A table's fields read in one call (``attrgetter``), and per field ``(key, writer, default)``."""
    getter = attrgetter(*(field for _, field, _, _ in table))
    return getter, tuple((key, _WRITE[kind], default) for key, _, kind, default in table)


_RECORD_TABLE = _compile(C.RECORD_FIELDS)
_THREAD_TABLE = _compile(C.THREAD_FIELDS)


def _table_attributes(attrs: list, item: Any, table: tuple) -> None:
    """The attributes of a compiled table's rows (:data:`launchtrace.conventions.RECORD_FIELDS`) whose field
    differs from its default (``...``: always written)."""
    getter, rows = table
    for (key, write, default), value in zip(rows, getter(item)):
        if default is ... or value != default:
            attrs.append((key, write(value)))


def record_attributes(
    rec: LaunchRecord,
    limit: int = C.MAX_VALUE_LENGTH,
    seq: bool = True,
    device_time: bool = True,
    deprecated_code: bool = False,
) -> tuple:
    """The attributes of the span of one record (times, parentage and status are not attributes).
    ``deprecated_code``: the older ``code.*`` names too (:func:`site_attributes`).

    ``seq=False`` and ``device_time=False`` leave out ``launchtrace.seq`` (with a graph replay's ordinal,
    ``launchtrace.graph.replay``) and the device times: what remains
    depends only on the record's fold key, so the span builder caches it per key and appends those two
    (:func:`device_time_attributes`).
    """
    kernel = C.bounded(rec.kernel, limit)
    attrs: list[tuple[str, Any]] = [(C.OP, str(rec.op)), (C.KERNEL, kernel), (C.DIM, tuple(rec.dim))]
    if rec.op == "launch":
        module = kernel.rpartition(".")[0]
        if module:
            attrs.append((C.MODULE, module))
    _table_attributes(attrs, rec, _RECORD_TABLE)
    attrs.append((C.BYTES, rec.nbytes))
    if seq:
        attrs.append((C.SEQ, rec.seq))
        if rec.graph_replay:
            attrs.append((C.GRAPH_REPLAY, rec.graph_replay))
    _table_attributes(attrs, rec, _THREAD_TABLE)
    attrs.extend(site_attributes(rec.site, limit, deprecated_code))
    if rec.params:
        attrs.append((C.PARAMS, tuple(rec.params)))
    array_keys = tuple(C.encode_key(k) for k, _ in rec.arrays)
    scalar_keys = tuple(C.encode_key(k) for k, _ in rec.scalars)
    if array_keys:
        attrs.append((C.ARRAY_KEYS, array_keys))
    if scalar_keys:
        attrs.append((C.SCALAR_KEYS, scalar_keys))
    array_labels, scalar_labels = C.arg_labels(tuple(rec.params), array_keys, scalar_keys)
    buffers = rec.buffers
    for i, (_key, ptr) in enumerate(rec.arrays):
        _array_attributes(attrs, array_labels[i], ptr, buffers[i] if i < len(buffers) else None, limit)
    for label, (_key, value) in zip(scalar_labels, rec.scalars):
        value = C.scalar_value(value)
        attrs.append((C.scalar_attr(label), C.bounded(value, limit) if isinstance(value, str) else value))
    if rec.probes:
        _probe_attributes(attrs, rec, array_labels, device_time)
    return tuple(attrs)


def device_time_attributes(rec: LaunchRecord) -> tuple:
    """``launchtrace.device_time.*`` of a record timed on its device, else ``()`` (see ``device_timing``)."""
    for probe in rec.probes:
        if type(probe) is DeviceTime:
            return (
                (C.DEVICE_TIME_START, probe.start_ns),
                (C.DEVICE_TIME_END, probe.end_ns),
                (C.DEVICE_TIME_DURATION, probe.duration_ns),
            )
    return ()


def _probe_attributes(attrs: list, rec: LaunchRecord, array_labels: tuple, device_time: bool) -> None:
    """The optional measurements (``value_stats``, ``device_timing``): statistics under the array argument's
    label, device times under ``launchtrace.device_time.*``. NaN and infinities stay doubles (OTLP has them)."""
    labels = {key: array_labels[i] for i, (key, _ptr) in enumerate(rec.arrays)}
    for probe in rec.probes:
        if type(probe) is ValueStats:
            label = labels.get(probe.key)
            if label is None:
                continue
            if probe.skipped:
                attrs.append((C.arg_stats_attr(label, "skipped"), probe.skipped))
                continue
            for field, value in (("mean", probe.mean), ("std", probe.std), ("min", probe.min), ("max", probe.max)):
                attrs.append((C.arg_stats_attr(label, field), _int64(value) if type(value) is int else value))
        elif type(probe) is DeviceTime and device_time:
            attrs.append((C.DEVICE_TIME_START, probe.start_ns))
            attrs.append((C.DEVICE_TIME_END, probe.end_ns))
            attrs.append((C.DEVICE_TIME_DURATION, probe.duration_ns))


def _array_attributes(attrs: list, label: str, ptr: int, buf: Any, limit: int) -> None:
    attrs.append((C.arg_attr(label, C.ARG_PTR), _int64(ptr)))
    if buf is None:
        return
    attrs.append((C.arg_attr(label, C.ARG_SHAPE), tuple(buf.shape)))
    attrs.append((C.arg_attr(label, C.ARG_DTYPE), buf.dtype))
    attrs.append((C.arg_attr(label, C.ARG_BYTES), buf.nbytes))
    if buf.owner is not None:
        attrs.append((C.arg_attr(label, C.ARG_OWNER), C.bounded(buf.owner, limit)))
    elif buf.alloc is not None:
        attrs.append((C.arg_attr(label, C.ARG_ALLOC), C.bounded(buf.alloc, limit)))
    if buf.offset is not None:
        attrs.append((C.arg_attr(label, C.ARG_OFFSET), buf.offset))
    if buf.foreign:
        attrs.append((C.arg_attr(label, C.ARG_FOREIGN), True))
    if buf.access:
        attrs.append((C.arg_attr(label, C.ARG_ACCESS), buf.access))
    if buf.name != label:
        attrs.append((C.arg_attr(label, C.ARG_NAME), buf.name))


def scope_attributes(
    begin: ScopeRecord, end: ScopeRecord, limit: int = C.MAX_VALUE_LENGTH, deprecated_code: bool = False
) -> tuple:
    """The attributes a scope span carries about the scope itself (its summary counters are added later).

    The user's own attributes (``launchtrace.scope("step", step=3)``) keep their names, listed under
    ``launchtrace.scope.attribute_keys`` so a reader tells them from ours.
    """
    attrs: list[tuple[str, Any]] = [(C.SCOPE_KIND, str(begin.kind)), (C.SCOPE_ID, begin.id)]
    if begin.internal:
        attrs.append((C.SCOPE_INTERNAL, True))
    attrs.append((C.SEQ, begin.seq))
    _table_attributes(attrs, begin, _THREAD_TABLE)
    if begin.site is not None:
        attrs.extend(site_attributes(begin.site, limit, deprecated_code))
    user = end.attributes or begin.attributes
    ours = C.LOAD_ATTRIBUTES
    for key, _ in user:  # a plain look first: the two generators, run for every scope, cost ~9,000 instructions
        if key in ours:  # a module load's (issue 23): under their own names
            attrs.extend(item for item in user if item[0] in ours)
            user = tuple(item for item in user if item[0] not in ours)
            break
    if user:
        attrs.append((C.SCOPE_ATTRIBUTE_KEYS, tuple(str(k) for k, _ in user)))
        for key, value in user:
            value = C.scalar_value(value)
            value = C.bounded(value, limit) if isinstance(value, str) else value
            attrs.append((C.scope_user_attr(str(key)), value))
    return tuple(attrs)
