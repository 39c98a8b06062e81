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

__all__ = ["collector_paused"]


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
