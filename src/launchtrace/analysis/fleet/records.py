"""Representative records in a baseline: :class:`~launchtrace.model.LaunchRecord` <-> ``launchtrace.v1.Record``.

A baseline keeps one occurrence per topology so that an alert can show the aligned diff against it. What is
kept is what the diff compares (op, kernel, dims, buffers by owner and offset, by allocation identity and offset
or by first-use order, scalars by name, call site) plus what names things (parameter names, shapes, dtypes); raw
pointers and times are not kept.
Rebuilt records give the same topology keys as the originals after
:func:`~launchtrace.analysis.diff.unowned_by_order`, which ``tests/test_fleet_baseline.py`` checks.

Example::

    from launchtrace.analysis.fleet.records import records_from_proto, records_to_proto
    back = records_from_proto(records_to_proto(occurrence.records))
"""

from __future__ import annotations

import json
import marshal
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from launchtrace.conventions import decode_key, encode_key
from launchtrace.model import BufferArg, LaunchRecord, Site
from launchtrace.topology import AllocRef
from launchtrace.v1 import baseline_pb2 as pb

__all__ = ["MADE_MAX", "iter_record_bytes", "record_bytes", "records_from_proto", "records_into", "records_to_proto"]

_UNOWNED = "<unowned #"


def _json_value(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), allow_nan=True, default=str)


def _from_json(text: str) -> Any:
    def tuples(v: Any) -> Any:
        return tuple(tuples(x) for x in v) if isinstance(v, list) else v

    return tuples(json.loads(text))


def _buffer(key: Any, ptr: Any, buf: BufferArg | None) -> pb.Buffer:
    out = pb.Buffer(key=encode_key(key))
    if type(ptr) is AllocRef:
        out.alloc = ptr.identity
        out.offset = int(ptr[1])
    elif isinstance(ptr, str) and ptr.startswith(_UNOWNED):
        out.unowned = int(ptr[len(_UNOWNED) : -1]) + 1
    elif not ptr:
        out.null = True
    if buf is not None:
        out.name = buf.name
        if buf.owner is not None:
            out.owner = buf.owner
            out.offset = int(buf.offset or 0)
        out.foreign = bool(buf.foreign)
        out.shape.extend(int(s) for s in buf.shape)
        out.dtype = buf.dtype
        out.nbytes = int(buf.nbytes)
    return out


def records_to_proto(records: Iterable[LaunchRecord]) -> list[pb.Record]:
    """``records`` (unowned buffers already by order) as ``Record`` messages."""
    out = []
    for r in records:
        msg = pb.Record()
        _fill(msg, r)
        out.append(msg)
    return out


def records_into(field: Any, records: Iterable[LaunchRecord]) -> None:
    """``records`` as :func:`records_to_proto` gives them, each added to the repeated ``Record`` field ``field``
    (a ``Topology``'s ``representative``) in place: a message made apart and copied in costs its own arena, about
    2.7 KB a record more at the peak of ``baseline build`` on one step of 100,000 launches (issue 25)."""
    for r in records:
        _fill(field.add(), r)


def record_bytes(records: Sequence[LaunchRecord]) -> list[bytes]:
    """Each record's ``Record`` message, serialized as it is inside a ``Topology`` (a sub-message's bytes are its
    own), one bytes object per distinct value: a step of many launches repeats a few, so a representative of a
    million records is a list of references to some hundred byte strings (``baselines.write_baseline`` splices
    them into the file) instead of a million messages, 1.3 KB each in protobuf's arena (issue 25).

    Records that hold the very same objects for everything the message is made of (the rebuild's copies of one
    launch share their dims, arguments, scalars, site and parameters) are made into bytes once: making each was
    half of ``baseline build``'s time on one wide trace. (By identity: the records are all alive meanwhile.)"""
    out: list[bytes] = []
    shared: dict[bytes, bytes] = {}
    made: dict[tuple, bytes] = {}
    for r in records:
        op, repeat = r.op, r.repeat
        key = (op, type(op), r.kernel, repeat, type(repeat), id(r.dim), id(r.arrays), id(r.buffers))
        key += (id(r.scalars), id(r.site), id(r.params), r.error)
        data = made.get(key)
        if data is None:
            msg = pb.Record()  # a message of its own each time: a cleared one keeps what it held in its arena
            _fill(msg, r)
            data = msg.SerializeToString(deterministic=True)
            data = made[key] = shared.setdefault(data, data)
        out.append(data)
    return out


MADE_MAX = 65_536
"""Distinct calls :func:`iter_record_bytes` remembers before it starts again."""


def iter_record_bytes(records: Iterable[LaunchRecord]) -> Iterator[bytes]:
    """:func:`record_bytes` of records that are not all alive at once (read back from a spill file, renamed as
    they come): each record's bytes in turn, a call met again told by the values of its dims, arrays and scalars
    (``marshal`` bytes and types: ``1``, ``True`` and ``1.0`` kept apart) and the identity of the objects it
    shares with the others of its call (buffers, site, parameters: held here while remembered, so their ids stay
    theirs). At most :data:`MADE_MAX` calls are remembered; a record not told apart is made anew."""
    shared: dict[bytes, bytes] = {}
    made: dict[tuple, tuple[bytes, Any, Any, Any]] = {}
    for r in records:
        op, repeat, arrays = r.op, r.repeat, r.arrays
        try:
            values: Any = marshal.dumps((r.dim, r.scalars))
            key: tuple | None = (op, type(op), r.kernel, repeat, type(repeat), values, arrays, r.error)
            key += (tuple((type(k), type(p)) for k, p in arrays), id(r.buffers), id(r.site), id(r.params))
            hash(key)
        except (ValueError, TypeError):  # a value marshal does not write, or one that does not hash: made anew
            key = None
        known = made.get(key) if key is not None else None
        if known is not None:
            yield known[0]
            continue
        msg = pb.Record()
        _fill(msg, r)
        data = msg.SerializeToString(deterministic=True)
        data = shared.setdefault(data, data)
        if key is not None:
            if len(made) >= MADE_MAX:
                made.clear()
                shared.clear()
            made[key] = (data, r.buffers, r.site, r.params)
        yield data


def _fill(msg: pb.Record, r: LaunchRecord) -> None:
    bufs = r.buffers if len(r.buffers) == len(r.arrays) else [r.buffer(k) for k, _ in r.arrays]
    msg.op, msg.kernel, msg.repeat = str(r.op), r.kernel, max(1, int(r.repeat or 1))
    msg.dim.extend(int(d) for d in r.dim)
    msg.buffers.extend(_buffer(k, p, b) for (k, p), b in zip(r.arrays, bufs))
    msg.scalars.extend(pb.Scalar(key=encode_key(k), json=_json_value(v)) for k, v in r.scalars)
    msg.site.CopyFrom(pb.Site(file=r.site.file, line=r.site.line, function=r.site.function, module=r.site.module))
    msg.params.extend(r.params)
    if r.error:
        msg.error = r.error


def records_from_proto(messages: Sequence[pb.Record]) -> tuple[LaunchRecord, ...]:
    """Records back from ``Record`` messages: owned buffers by owner and offset, unowned ones by allocation
    identity (an :class:`~launchtrace.topology.AllocRef`, as ``unowned_by_order`` gave them) or by order."""
    out = []
    for m in messages:
        arrays, buffers = [], []
        for i, b in enumerate(m.buffers):
            key = decode_key(b.key)
            if b.alloc:
                ptr: Any = AllocRef(b.alloc, b.offset)
            elif b.unowned:
                ptr = f"{_UNOWNED}{b.unowned - 1}>"
            elif b.null:
                ptr = 0
            else:
                ptr = i + 1  # a stand-in: owned buffers are compared by owner and offset
            arrays.append((key, ptr))
            owner = b.owner or None
            buffers.append(
                BufferArg(
                    key=key,
                    name=b.name,
                    ptr=ptr if isinstance(ptr, int) else 0,
                    shape=tuple(b.shape),
                    dtype=b.dtype,
                    nbytes=b.nbytes,
                    owner=owner,
                    offset=b.offset if owner is not None or b.alloc else None,
                    foreign=b.foreign,
                    alloc=b.alloc or None,
                )
            )
        site = Site(m.site.file, m.site.line, m.site.function, m.site.module)
        scalars = tuple((decode_key(s.key), _from_json(s.json)) for s in m.scalars)
        out.append(
            LaunchRecord(
                op=m.op,
                kernel=m.kernel,
                dim=tuple(m.dim),
                stream=None,
                arrays=tuple(arrays),
                scalars=scalars,
                site=site,
                params=tuple(m.params),
                buffers=tuple(buffers),
                repeat=max(1, m.repeat),
                error=m.error or None,
            )
        )
    return tuple(out)
