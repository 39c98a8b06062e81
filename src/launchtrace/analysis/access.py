"""How one array argument of a record is accessed (read, written or both): the rule that the dataflow and
the graph replays share, in a module of its own so neither has to import the other.

``BufferArg.access`` when capture filled it; else inferred from the operation: a copy writes its destination
(key 0) and reads its source, a fill writes, a launch with no recorded split reads and writes.

Example::

    from launchtrace.analysis.access import access_mode
    mode, inferred = access_mode(record, record.buffers[0])
"""

from __future__ import annotations

from launchtrace.model import BufferArg, LaunchRecord, Op

__all__ = ["access_mode"]


def access_mode(rec: LaunchRecord, buf: BufferArg) -> tuple[str, bool]:
    """``(mode, inferred)`` for one array argument: ``mode`` is ``"r"``, ``"w"`` or ``"rw"``; ``inferred``
    says it came from the operation, not from capture."""
    if buf.access in ("r", "w", "rw"):
        return buf.access, False
    if rec.op == Op.COPY:
        return ("w" if buf.key == 0 else "r"), True
    if rec.op == Op.FILL:
        return "w", True
    return "rw", True
