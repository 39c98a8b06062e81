"""Baseline files (``launchtrace.v1.Baseline`` protobuf): written atomically, read with one-line refusals.

A file that is not a baseline (another format, another protobuf message), one cut short, or one written by a
newer launchtrace with a newer schema version is refused with a :class:`~launchtrace.errors.UserError` naming
the file and the reason; the command line turns it into one line and exit code 2.

Example::

    from launchtrace.baselines import read_baseline, write_baseline
    write_baseline(builder.to_proto(), "base.pb")
    base = read_baseline("base.pb")
"""

from __future__ import annotations

import os
import tempfile
from array import array
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from google.protobuf.message import DecodeError, Message

from launchtrace.analysis.fleet.baseline import MAGIC, SCHEMA_VERSION, Spliced
from launchtrace.errors import UserError
from launchtrace.v1 import baseline_pb2 as pb

if TYPE_CHECKING:
    from launchtrace.model import LaunchRecord

__all__ = ["END", "MAX_FILE_BYTES", "max_file_bytes", "read_baseline", "write_baseline"]

END = "launchtrace.baseline.end"
MAX_FILE_BYTES = 1 << 31  # protobuf's own limit for one message
DEFAULT_MAX_BYTES = 256 << 20
"""The largest baseline read by default (``LAUNCHTRACE_MAX_BASELINE_BYTES`` changes it, up to
:data:`MAX_FILE_BYTES`): a baseline holds bounded statistics per group and step, far below this; a larger file
is refused before it is read, not read whole and then refused."""
MAX_UNKNOWN_BYTES = 1 << 20
"""Fields a newer launchtrace may add are skipped, up to this many bytes; more is refused (a 1 GB blob)."""

_HEAD = b"\x0a" + bytes([len(MAGIC)]) + MAGIC.encode()  # field 1 (magic), serialized first


def max_file_bytes(environ: Mapping[str, str] | None = None) -> int:
    """The size cap in force: ``LAUNCHTRACE_MAX_BASELINE_BYTES`` when it is a positive integer, else the default."""
    raw = (os.environ if environ is None else environ).get("LAUNCHTRACE_MAX_BASELINE_BYTES", "").strip()
    try:
        value = int(raw) if raw else DEFAULT_MAX_BYTES
    except ValueError:
        raise UserError(f"LAUNCHTRACE_MAX_BASELINE_BYTES={raw!r}: expected a number of bytes") from None
    if value <= 0:
        raise UserError(f"LAUNCHTRACE_MAX_BASELINE_BYTES={raw!r}: expected a positive number of bytes")
    return min(value, MAX_FILE_BYTES)


def is_baseline_file(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a regular file that starts with a baseline's marker, whatever its name (``alert
    --baseline`` takes a baseline file or a trace source; a baseline written as ``base.bin`` is still one)."""
    try:
        if not os.path.isfile(path):  # not a folder, and never a FIFO that would block the open
            return False
        with open(path, "rb") as f:
            return f.read(len(_HEAD)) == _HEAD
    except OSError:
        return False


def _looks_like(head: bytes) -> str:
    """A few words on what a refused file starts with."""
    if not any(head):
        return "it starts with zero bytes"
    text = head.lstrip()[:1]
    if text in (b"{", b"["):
        return "it is JSON (spans go to baseline build as inputs, not as a baseline)"
    if head[:2] == b"\x1f\x8b":
        return "it is gzip"
    return f"it starts with {head[:8].hex(' ')}"


def write_baseline(baseline: pb.Baseline, path: str | os.PathLike[str], spliced: Spliced | None = None) -> int:
    """Write ``baseline`` to ``path`` (beside it, then renamed into place); the bytes written. ``spliced``: the
    representatives :meth:`~launchtrace.analysis.fleet.baseline.BaselineBuilder.to_proto` left out, written in
    their places (the same bytes as the whole message's, without making their messages: see :func:`_chunks`)."""
    baseline.end = END
    chunks, size = _chunks(baseline, spliced) if spliced else ([baseline.SerializeToString(deterministic=True)], 0)
    size = size or len(chunks[0])
    target = Path(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent if str(target.parent) else ".")
        with os.fdopen(fd, "wb") as f:
            for chunk in chunks:
                if type(chunk) is bytes:
                    f.write(chunk)
                else:  # a representative made as it is written (_Streamed)
                    f.writelines(chunk)
        os.replace(tmp, target)
    except OSError as exc:
        raise UserError(f"{path}: cannot write: {exc.strerror or exc}") from None
    return size


Chunks = tuple[list[bytes], int]  # a message's bytes in pieces, and their length


def _chunks(baseline: pb.Baseline, spliced: Spliced) -> Chunks:
    """``baseline``'s serialized bytes in pieces, each representative in ``spliced`` written where its
    ``Topology`` has none: a message's fields are written in number order, each sub-message as its tag, its
    length and its own bytes, so a message with one repeated field left out is split before the first field
    numbered above it and that field's elements go between. The records' bytes are shared
    (:func:`~launchtrace.analysis.fleet.records.record_bytes`): a million of them cost a list of references.
    ``tests/test_wide.py`` checks the file against the whole message's bytes."""
    from launchtrace.analysis.fleet.records import record_bytes

    def whole(msg: Message) -> Chunks:
        data = msg.SerializeToString(deterministic=True)
        return [data], len(data)

    groups = []
    for g, group in enumerate(baseline.groups):
        if not any(key[0] == g for key in spliced):
            groups.append(whole(group))
            continue
        scopes = []
        for s, scope in enumerate(group.scopes):
            if not any(key[:2] == (g, s) for key in spliced):
                scopes.append(whole(scope))
                continue
            topologies = []
            for t, topology in enumerate(scope.topologies):
                records = spliced.get((g, s, t))
                if records is None:
                    topologies.append(whole(topology))
                elif not isinstance(records, (list, tuple)):  # a spilled step's: read back, never held
                    topologies.append(_with_field(topology, "representative", [_Streamed(records)]))
                else:
                    topologies.append(_with_field(topology, "representative", record_bytes(records)))
            scopes.append(_with_field(scope, "topologies", topologies))
        groups.append(_with_field(group, "scopes", scopes))
    return _with_field(baseline, "groups", groups)


def _with_field(msg: Message, field: str, elements: list[Chunks] | list[bytes]) -> Chunks:
    """``msg``'s bytes with its repeated message field ``field`` made of ``elements`` (each in pieces, or whole)."""
    number = msg.DESCRIPTOR.fields_by_name[field].number
    rest = type(msg)()
    rest.CopyFrom(msg)
    rest.ClearField(field)
    data = rest.SerializeToString(deterministic=True)
    cut = _fields_up_to(data, number)
    tag = _varint(number << 3 | 2)
    chunks, size = [data[:cut]], len(data)
    heads: dict[int, bytes] = {}
    for element in elements:
        if type(element) is _Streamed:  # its elements made as the file is written
            chunks.append(element)
            size += element.size
            continue
        if type(element) is bytes:
            pieces, length = (element,), len(element)
        else:
            pieces, length = element
        head = heads.get(length)
        if head is None:
            head = heads[length] = tag + _varint(length)
        chunks.append(head)
        chunks.extend(pieces)
        size += len(head) + length
    chunks.append(data[cut:])
    return chunks, size


class _Streamed:
    """The elements of a representative whose records are no list (a spilled step's, read back from its
    temporary file each time they are iterated): its records are read once
    (:func:`~launchtrace.analysis.fleet.records.iter_record_bytes`), keeping each one's distinct element (tag,
    length and bytes) and, per record, the index of its element (4 bytes): a step of a million launches is
    never held as records or references. A chunk of its own in :func:`write_baseline`."""

    __slots__ = ("elements", "order", "size")

    def __init__(self, records: Iterable[LaunchRecord]) -> None:
        from launchtrace.analysis.fleet.records import iter_record_bytes

        tag = _varint(pb.Topology.DESCRIPTOR.fields_by_name["representative"].number << 3 | 2)
        self.elements: list[bytes] = []
        index: dict[bytes, int] = {}
        self.order = array("I")
        size = 0
        for data in iter_record_bytes(records):
            at = index.get(data)
            if at is None:
                at = index[data] = len(self.elements)
                self.elements.append(tag + _varint(len(data)) + data)
            self.order.append(at)
            size += len(self.elements[at])
        self.size = size

    def __iter__(self) -> Iterator[bytes]:
        return map(self.elements.__getitem__, self.order)


def _varint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _read_varint(data: bytes, i: int) -> tuple[int, int]:
    n = shift = 0
    while True:
        b = data[i]
        i += 1
        n |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return n, i


def _fields_up_to(data: bytes, number: int) -> int:
    """The length of the fields numbered ``number`` or below at the start of serialized message ``data``."""
    i = 0
    while i < len(data):
        start = i
        key, i = _read_varint(data, i)
        if key >> 3 > number:
            return start
        kind = key & 7
        if kind == 0:
            _, i = _read_varint(data, i)
        elif kind == 1:
            i += 8
        elif kind == 2:
            length, i = _read_varint(data, i)
            i += length
        elif kind == 5:
            i += 4
        else:
            raise ValueError(f"wire type {kind} in a message launchtrace wrote")
    return len(data)


def read_baseline(path: str | os.PathLike[str]) -> pb.Baseline:
    """The baseline in ``path``; ``UserError`` (one line) when it is missing, foreign, cut short or too new."""
    name = str(path)
    limit = max_file_bytes()
    try:
        with open(path, "rb") as f:
            head = f.read(len(_HEAD))
            if head and head != _HEAD[: len(head)]:  # judged on its first bytes, not after reading it all
                raise UserError(
                    f"{name}: not a launchtrace baseline (no {MAGIC!r} marker at its start: {_looks_like(head)})"
                )
            size = os.fstat(f.fileno()).st_size
            if size > limit:
                raise UserError(
                    f"{name}: {size} bytes, more than the {limit} a baseline may have here "
                    f"(LAUNCHTRACE_MAX_BASELINE_BYTES raises it)"
                )
            data = head + f.read(limit + 1 - len(head))
    except FileNotFoundError:
        raise UserError(f"{name}: no such file") from None
    except OSError as exc:
        raise UserError(f"{name}: cannot read: {exc.strerror or exc}") from None
    if not data:
        raise UserError(f"{name}: not a launchtrace baseline (the file is empty)")
    msg = pb.Baseline()
    try:
        msg.ParseFromString(data)
    except (DecodeError, RuntimeError, ValueError) as exc:
        reason = " ".join(str(exc).split())[:120] or type(exc).__name__
        raise UserError(f"{name}: not a launchtrace baseline, or damaged (protobuf: {reason})") from None
    msg.DiscardUnknownFields()
    unknown = len(data) - msg.ByteSize()
    if unknown > MAX_UNKNOWN_BYTES:
        raise UserError(
            f"{name}: {unknown} bytes of fields this launchtrace does not know (at most {MAX_UNKNOWN_BYTES} are "
            f"skipped): damaged, or written by something else"
        )
    if msg.magic != MAGIC:
        raise UserError(f"{name}: not a launchtrace baseline (no {MAGIC!r} marker: another file format or message)")
    if msg.schema_version > SCHEMA_VERSION:
        raise UserError(
            f"{name}: baseline schema version {msg.schema_version} is newer than this launchtrace reads "
            f"({SCHEMA_VERSION}): upgrade launchtrace"
        )
    if msg.schema_version < 1:
        raise UserError(f"{name}: not a launchtrace baseline (schema version {msg.schema_version})")
    if msg.end != END:
        raise UserError(f"{name}: truncated launchtrace baseline (its end marker is missing)")
    _check_shape(name, msg)
    return msg


def _check_shape(name: str, msg: pb.Baseline) -> None:
    """What every reader of a baseline relies on, checked once here: a damaged file is one line, never a traceback."""
    if not msg.group_by or not all(msg.group_by):
        raise UserError(f"{name}: damaged launchtrace baseline (group_by names no resource attribute)")
    width = len(msg.group_by)
    for group in msg.groups:
        if len(group.values) != width:
            raise UserError(
                f"{name}: damaged launchtrace baseline (a group has {len(group.values)} values for "
                f"{width} group_by keys)"
            )
