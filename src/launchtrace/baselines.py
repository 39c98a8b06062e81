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
from collections.abc import Mapping
from pathlib import Path

from google.protobuf.message import DecodeError

from launchtrace.analysis.fleet.baseline import MAGIC, SCHEMA_VERSION
from launchtrace.errors import UserError
from launchtrace.v1 import baseline_pb2 as pb

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


def write_baseline(baseline: pb.Baseline, path: str | os.PathLike[str]) -> int:
    """Write ``baseline`` to ``path`` (beside it, then renamed into place); the bytes written."""
    baseline.end = END
    data = baseline.SerializeToString(deterministic=True)
    target = Path(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent if str(target.parent) else ".")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, target)
    except OSError as exc:
        raise UserError(f"{path}: cannot write: {exc.strerror or exc}") from None
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
