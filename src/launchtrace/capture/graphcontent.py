"""What a captured graph holds, as a short fingerprint on each of its replays (``scalar graph_content``).

Why: a ``wp.capture_launch`` record is the same call whatever its graph runs. A program that captured its kernel
with another dim (or another kernel) replayed it in every step, and every step's topology stayed the same:
``alert`` said ``no alerts: every group matches its reference`` and ``check-static`` ``static``, while only
``diff`` (which compares the capture itself, outside the steps) saw the change. Each replay now carries a
fingerprint of its graph's captured records (op, kernel, dims, scalars, and each array's parameter name, dtype
and shape: not where the arrays live, which differs from run to run), so a step that replays another graph is
another topology, and a step that replays an equal graph (captured again each step, or not) is the same.

A graph captured while nobody listened (or whose replay comes first) has no fingerprint: its replays carry none.
"""

from __future__ import annotations

import dataclasses
import hashlib

from launchtrace.model import LaunchRecord, Op

__all__ = ["PARAM", "GraphContents"]

PARAM = "graph_content"
"""The replay's parameter name for the fingerprint."""

_MAX_GRAPHS = 4096  # graphs remembered at once (a program that captures anew every step makes one per step)


def _key(rec: LaunchRecord) -> tuple:
    arrays = tuple((b.name, b.dtype, tuple(b.shape)) for b in rec.buffers)
    return (str(rec.op), rec.kernel, tuple(rec.dim), repr(rec.scalars), arrays)


class GraphContents:
    """Feeds on a drain's materialized items: collects each graph's captured records, and gives each replay the
    fingerprint of its graph (the captured records of a graph always come before its first replay)."""

    def __init__(self) -> None:
        self._keys: dict[int, list[tuple]] = {}
        self._digests: dict[int, str] = {}

    def feed(self, out: list[tuple[str, object]]) -> None:
        for i, (kind, rec) in enumerate(out):
            if kind != "record" or getattr(rec, "graph_id", None) is None:
                continue
            assert isinstance(rec, LaunchRecord)
            graph = rec.graph_id
            if rec.captured:
                if graph not in self._keys and len(self._keys) >= _MAX_GRAPHS:
                    self._keys.clear()  # never replayed: forget them
                self._keys.setdefault(graph, []).append(_key(rec))
            elif rec.op == Op.GRAPH_LAUNCH and not rec.scalars:
                digest = self._digest(graph)
                if digest:
                    out[i] = (kind, dataclasses.replace(rec, scalars=((0, digest),), params=(PARAM,), template=None))

    def _digest(self, graph: int) -> str:
        digest = self._digests.get(graph)
        if digest is None:
            keys = self._keys.pop(graph, None)
            if keys is None:
                return ""
            if len(self._digests) >= _MAX_GRAPHS:
                self._digests.clear()
            digest = self._digests[graph] = hashlib.blake2b(repr(keys).encode(), digest_size=4).hexdigest()
        return digest
