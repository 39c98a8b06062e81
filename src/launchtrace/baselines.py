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
from pathlib import Path

from google.protobuf.message import DecodeError

from launchtrace.analysis.fleet.baseline import MAGIC, SCHEMA_VERSION
from launchtrace.errors import UserError
from launchtrace.v1 import baseline_pb2 as pb

__all__ = ["END", "MAX_FILE_BYTES", "read_baseline", "write_baseline"]

END = "launchtrace.baseline.end"
MAX_FILE_BYTES = 1 << 31  # protobuf's own limit for one message


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
    try:
        size = os.path.getsize(path)
        if size > MAX_FILE_BYTES:
            raise UserError(f"{name}: not a launchtrace baseline ({size} bytes, more than a protobuf message holds)")
        data = Path(path).read_bytes()
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
    return msg
