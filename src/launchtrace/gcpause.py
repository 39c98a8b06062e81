"""The cyclic garbage collector paused for one bounded piece of work that allocates many objects and frees none.

Readers and rebuilders build thousands of dicts, tuples and records that all stay alive until the piece is done, so
the collector's runs during it find nothing to free and only cost time (two thirds of ``orjson.loads``' time in
``benchmarks/bench_read.py``; a superlinear rebuild of one trace of 100,000 launches). The collector is left as it
was found: a caller that disabled it keeps it disabled.

Example::

    with collector_paused():
        spans = decode(line)
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

__all__ = ["collector_paused", "collector_relaxed"]


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Pause the cyclic collector for the ``with`` block (never across a ``yield`` of the caller's)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


@contextlib.contextmanager
def collector_relaxed(young: int = 100_000) -> Iterator[None]:
    """The cyclic collector run rarely for one command (``report``): what is alive at the start (the imported
    modules) is frozen out of its runs and a young collection waits for ``young`` new objects instead of 700.
    ``report`` builds its detail (10,000 spans' records, views and page data) and keeps it: the collector's
    frequent runs found nothing and cost a tenth of its time. Cycles are still collected, later, so a command
    that makes cyclic garbage as it streams holds more of it: ``diff`` peaked 12 MB higher this way, for no
    time saved, and ``summary`` and ``dataflow`` saved none, so they keep the default. Usable as a decorator;
    thresholds and the frozen objects are restored at the end (a command run inside a test leaves the
    collector as it was)."""
    old = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(young, max(old[1], 10), max(old[2], 10))
    try:
        yield
    finally:
        gc.set_threshold(*old)
        gc.unfreeze()
