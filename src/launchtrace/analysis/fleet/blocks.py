"""Steps of a known signature buffered as raw times and folded into a scope's latencies a block at a time.

A baseline's latency parts (:class:`~.baseline.LatencyAcc`: histograms, sample / step / run counts, per-run
step values) do not depend on the order steps come in (the histogram's scale and buckets are order-free, the
kept runs are those of lowest key hash, their values the earliest by start). So the steps the fast path
knows can wait: their ``(start, end)`` per launch is kept as int64 bytes per (scope, signature), and every
:data:`BLOCK_STEPS` steps (or when :data:`BUFFER_BYTES` are held in all, or at the end) a block is folded at
once (:func:`.stepscan.fold`: durations, kernel totals and histogram bucket counts in one pass in C) and
added to the scope's accumulators. Everything that does depend on order (step and topology counts, run keys,
the group's service name) is counted when the step comes, by the caller. Memory stays bounded: at most
:data:`BUFFER_BYTES` of times wait.

Example::

    blocks = Blocks(fold_for(), builder._window, by_run)
    blocks.add(scope_acc, known, run, times)   # times: int64 (start, end) per launch, in the signature's order
    blocks.flush_all()
"""

from __future__ import annotations

import dataclasses
from array import array
from collections.abc import Callable
from operator import add
from typing import Any

from launchtrace.analysis.fleet.fast import Known
from launchtrace.analysis.fleet.occurrences import MAX_POSITIONS, step_times

__all__ = ["BLOCK_STEPS", "BUFFER_BYTES", "Blocks"]

BLOCK_STEPS = 4096
"""Steps of one (scope, signature) folded at once."""
BUFFER_BYTES = 8 << 20
"""Times held in all blocks before every block is folded."""


@dataclasses.dataclass(slots=True)
class _Block:
    scope: Any  # ScopeAcc
    known: Known
    repeats: bytes
    kernel_of: bytes
    kernel_keys: list[tuple[str, str]]
    runs: list[str] = dataclasses.field(default_factory=list)
    times: list[bytes] = dataclasses.field(default_factory=list)


def _block(scope: Any, known: Known) -> _Block:
    keys: dict[tuple[str, str], int] = {}
    kernel_of = array("q", (keys.setdefault((k, op), len(keys)) for k, op, _ in known.kernels))
    repeats = array("q", (max(1, r) for _, _, r in known.kernels))
    return _Block(scope, known, repeats.tobytes(), kernel_of.tobytes(), list(keys))


class Blocks:
    """Known steps waiting to be folded into their scopes (see the module docstring)."""

    def __init__(
        self,
        fold: Callable[..., tuple | None],
        window: Callable[[int, int], None],
        by_run: Callable[[list[str], list[int]], list],
    ) -> None:
        self.fold = fold
        self.window = window
        self.by_run = by_run
        self.blocks: dict[tuple[int, int], _Block] = {}
        self.bytes = 0
        self.folded = self.one_by_one = 0  # steps folded in blocks, and steps added one by one

    def add(self, scope: Any, known: Known, run: str, times: bytes) -> None:
        """Add one step of ``scope`` with signature ``known``; ``times`` as :meth:`.stepscan.Scanner.scan`."""
        key = (id(scope), id(known))  # both held by the block: ids not reused while it waits
        block = self.blocks.get(key)
        if block is None:
            block = self.blocks[key] = _block(scope, known)
        block.runs.append(run)
        block.times.append(times)
        self.bytes += len(times)
        if len(block.runs) >= BLOCK_STEPS:
            self._fold(block)
        if self.bytes > BUFFER_BYTES:
            self.flush_all()

    def flush_all(self) -> None:
        for block in self.blocks.values():
            self._fold(block)
        self.blocks.clear()
        self.bytes = 0

    def _fold(self, block: _Block) -> None:
        if not block.runs:
            return
        runs, times = block.runs, b"".join(block.times)
        self.bytes -= len(times)
        block.runs, block.times = [], []
        launches = len(block.known.kernels)
        positions = min(launches, MAX_POSITIONS)
        out = self.fold(times, launches, block.repeats, block.kernel_of, len(block.kernel_keys), positions)
        if out is None:  # a launch without an end time, or numbers past int64: step by step
            self._one_by_one(block, runs, times)
            return
        starts, durations, duration_part, kernel_parts, position_parts = out
        scope = block.scope
        groups = self.by_run(runs, starts)
        scope.duration.add_block(groups, starts, durations, duration_part)
        for key, (totals, part) in zip(block.kernel_keys, kernel_parts):
            scope.latency(scope.kernels, key).add_block(groups, starts, totals, part)
        for pos, (values, part) in enumerate(position_parts):
            scope.latency(scope.positions, (pos, block.known.kernels[pos][0])).add_block(groups, starts, values, part)
        # the window of the whole block at once: its earliest start past 0 (what the window takes) and latest end
        self.window(min((s for s in starts if s > 0), default=0), max(map(add, starts, durations)))
        self.folded += len(runs)

    def _one_by_one(self, block: _Block, runs: list[str], times: bytes) -> None:
        values = array("q")
        values.frombytes(times)
        per_step = 2 * len(block.known.kernels)
        for i, run in enumerate(runs):
            row = values[i * per_step : (i + 1) * per_step]
            launches = ((k, op, r, row[2 * j], row[2 * j + 1]) for j, (k, op, r) in enumerate(block.known.kernels))
            start, duration, kernel_ns, kernel_samples, position_ns = step_times(launches)
            block.scope.add_times(run, start, duration, kernel_ns, kernel_samples, position_ns)
            self.window(start, start + duration)
        self.one_by_one += len(runs)
