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

from functools import lru_cache
from typing import Any

from launchtrace import conventions as C
from launchtrace.model import DeviceTime, LaunchRecord, ScopeRecord, Site, ValueStats

__all__ = ["device_time_attributes", "record_attributes", "scope_attributes", "site_attributes"]


@lru_cache(maxsize=4096)
def site_attributes(site: Site, limit: int = C.MAX_VALUE_LENGTH) -> tuple:
    """The ``code.*`` attributes of a call site, in both the older and the current OpenTelemetry names."""
    file, function = C.bounded(site.file, limit), C.bounded(site.function, limit)
    attrs = [
        (C.CODE_FILEPATH, file),
        (C.CODE_LINENO, site.line),
        (C.CODE_FUNCTION, function),
        (C.CODE_FILE_PATH, file),
        (C.CODE_LINE_NUMBER, site.line),
        (C.CODE_FUNCTION_NAME, function),
    ]
    if site.module:
        attrs.append((C.CODE_NAMESPACE, C.bounded(site.module, limit)))
    return tuple(attrs)


def _int64(value: Any) -> Any:
    return C.scalar_value(value)


def record_attributes(
    rec: LaunchRecord, limit: int = C.MAX_VALUE_LENGTH, seq: bool = True, device_time: bool = True
) -> tuple:
    """The attributes of the span of one record (times, parentage and status are not attributes).

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
    if rec.block_dim is not None:
        attrs.append((C.BLOCK_DIM, rec.block_dim))
    if rec.max_blocks:
        attrs.append((C.MAX_BLOCKS, rec.max_blocks))
    if rec.device:
        attrs.append((C.DEVICE, rec.device))
    if rec.stream is not None:
        attrs.append((C.STREAM, _int64(rec.stream)))
    if rec.api:
        attrs.append((C.API, rec.api))
    if rec.internal:
        attrs.append((C.INTERNAL, True))
    if rec.adjoint:
        attrs.append((C.ADJOINT, True))
    if rec.captured:
        attrs.append((C.CAPTURED, True))
    if rec.graph_id is not None:
        attrs.append((C.GRAPH_ID, _int64(rec.graph_id)))
    if rec.graph_launches is not None:
        attrs.append((C.GRAPH_LAUNCHES, rec.graph_launches))
    if rec.module_hash:
        attrs.append((C.MODULE_HASH, rec.module_hash))
    if rec.repeat != 1:
        attrs.append((C.REPEAT, rec.repeat))
    attrs.append((C.BYTES, rec.nbytes))
    if seq:
        attrs.append((C.SEQ, rec.seq))
        if rec.graph_replay:
            attrs.append((C.GRAPH_REPLAY, rec.graph_replay))
    attrs.append((C.THREAD_ID, rec.thread))
    if rec.thread_name:
        attrs.append((C.THREAD_NAME, rec.thread_name))
    attrs.extend(site_attributes(rec.site, limit))
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


def scope_attributes(begin: ScopeRecord, end: ScopeRecord, limit: int = C.MAX_VALUE_LENGTH) -> tuple:
    """The attributes a scope span carries about the scope itself (its summary counters are added later).

    The user's own attributes (``launchtrace.scope("step", step=3)``) keep their names, listed under
    ``launchtrace.scope.attribute_keys`` so a reader tells them from ours.
    """
    attrs: list[tuple[str, Any]] = [(C.SCOPE_KIND, str(begin.kind)), (C.SCOPE_ID, begin.id)]
    if begin.internal:
        attrs.append((C.SCOPE_INTERNAL, True))
    attrs.append((C.SEQ, begin.seq))
    attrs.append((C.THREAD_ID, begin.thread))
    if begin.thread_name:
        attrs.append((C.THREAD_NAME, begin.thread_name))
    if begin.site is not None:
        attrs.extend(site_attributes(begin.site, limit))
    user = end.attributes or begin.attributes
    if user:
        attrs.append((C.SCOPE_ATTRIBUTE_KEYS, tuple(str(k) for k, _ in user)))
        for key, value in user:
            value = C.scalar_value(value)
            value = C.bounded(value, limit) if isinstance(value, str) else value
            attrs.append((C.scope_user_attr(str(key)), value))
    return tuple(attrs)
