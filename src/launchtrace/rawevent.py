"""The raw capture event: its kinds, the position of each field, the builder of a record event, and the
sequence clock that orders events (with the oldest sequence number still queued).

It imports nothing of launchtrace, so whatever reads events (the capture layer, its compiled parts, the
export worker through the materializer) can name their fields without importing the code that makes them, and
the owner registry (:mod:`launchtrace.ownership`), which the capture layer consults, stamps its changes with
the same clock and asks which events may still arrive without importing the capture layer: imports point down.

An event is a flat tuple, read by position (a tuple index is the cheapest read there is, and the compiled
parts build and read the same tuples). Every event starts ``(kind, seq, tid, ...)``; the rest depends on the
kind, and each position has one name here. The compiled capture parts (``capture/_fastlaunch.c``,
``capture/_fastmat.c``) take the record layout from ``capture/_rawevent.h`` and publish it as
``RECORD_FIELDS``; :func:`check_compiled` compares it with :data:`RECORD_FIELDS` when they are loaded, so the
two cannot drift apart silently.

Example::

    from launchtrace import rawevent as ev
    if e[ev.KIND] == ev.RECORD:
        print(e[ev.SEQ], e[ev.R_CODE].co_name, e[ev.R_T1] - e[ev.R_T0])
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Sequence
from types import ModuleType
from typing import Any

__all__ = ["RECORD_FIELDS", "check_compiled", "next_seq", "oldest_pending", "record_event", "watch_queues"]

# -- kinds (the first field) -----------------------------------------------------------------------------------
RECORD = 0  # a call of a Warp entry point that issued device work
SCOPE_BEGIN = 1
SCOPE_END = 2
PROBED = 3  # a record measured by launchtrace.capture.probes, wrapped with the measurements
APP_SPAN = 4  # the application's active OpenTelemetry span changed (launchtrace.capture.appspan)
FRAMEWORK = 5  # another framework's record (tinygrad), in its own layout after the decoder it names

# -- fields every kind shares ------------------------------------------------------------------------------------
KIND = 0
SEQ = 1  # the process-wide sequence number: the event's order across threads
TID = 2  # the emitting thread's id

# -- RECORD ------------------------------------------------------------------------------------------------------
RECORD_FIELDS = (
    "kind", "seq", "tid", "entry", "payload", "code", "line", "module", "caller", "t0", "t1", "scope", "graph",
    "error", "kernel", "dim", "n_inputs", "device",
)  # fmt: skip
"""The record layout, by position; the same table as ``capture/_rawevent.h``. A nested record (any entry point)
has the first 14 fields, ``payload`` holding the extractor's tuple; a flat launch (``wp.launch``'s common call,
``payload`` is ``hotpath.FLAT``) has all 18, followed by the argument values from :data:`R_VALUES` on."""
R_ENTRY = 3  # the entry point's kind: "launch", "copy", "fill", ...
R_PAYLOAD = 4  # the extractor's tuple, or hotpath.FLAT
R_CODE = 5  # the site: code object, line, module name
R_LINE = 6
R_MODULE = 7
R_CALLER = 8  # the Warp entry point's code (names the API, decides "internal")
R_T0 = 9  # time_ns() around the original call
R_T1 = 10
R_SCOPE = 11  # the innermost open scope id, or None
R_GRAPH = 12  # the CUDA graph being captured, or None
R_ERROR = 13  # "Type: message" when the call raised, else None
N_RECORD = 14  # fields of a nested record
R_KERNEL = 14  # flat launch only: the kernel's handle id (hotpath.HANDLES)
R_DIM = 15
R_N_INPUTS = 16  # how many of the values are inputs
R_DEVICE = 17  # None, a device string, or a Device's handle id
R_VALUES = 18  # the first argument value: plain scalars and (ARR, ptr, shape, dtype id, capacity, device id)

# -- SCOPE_BEGIN: (kind, seq, tid, id, parent, name, scope kind, attributes, t0, site, internal, remote parent) ----
S_ID = 3
S_PARENT = 4
S_NAME = 5
S_KIND = 6
S_ATTRS = 7
S_T0 = 8
S_SITE = 9  # hotpath.find_site's tuple, or None
S_INTERNAL = 10
S_REMOTE_PARENT = 11  # the application's active span (trace_id, span_id, flags) when outermost, else None
# -- SCOPE_END: (kind, seq, tid, id, t1, error[, end attributes]) ---------------------------------------------------
E_T1 = 4
E_ERROR = 5
# -- PROBED: (kind, seq, tid, record event, measurements) ---------------------------------------------------------
P_RECORD = 3
P_RESULTS = 4
# -- APP_SPAN: (kind, seq, tid, (trace_id, span_id, flags) | None) ---------------------------------------------
A_PARENT = 3
# -- FRAMEWORK: (kind, seq, tid, decode, ...): decode(event) -> LaunchRecord reads the rest ------------------------
F_DECODE = 3


next_seq: Callable[[], int] = itertools.count(1).__next__
"""The next process-wide sequence number (thread-safe under the GIL)."""


def record_event(
    seq: int,
    tid: int,
    entry: str,
    payload: tuple,
    site: tuple[Any, int, str, Any],
    t0: int,
    t1: int,
    scope: int | None,
    graph: Any,
    error: BaseException | None,
) -> tuple:
    """A nested RECORD event; ``site`` is ``hotpath.find_site``'s ``(code, line, module, caller)``."""
    code, line, module, caller = site
    return (
        RECORD, seq, tid, entry, payload, code, line, module, caller, t0, t1, scope, graph,
        None if error is None else f"{type(error).__name__}: {error}",
    )  # fmt: skip


_queues: tuple[Sequence[Sequence[Any]], ...] = ()


def watch_queues(queues: Iterable[Sequence[Sequence[Any]]]) -> None:
    """The event queues :func:`oldest_pending` looks at (the capture bus calls this when they change)."""
    global _queues
    _queues = tuple(queues)


def oldest_pending() -> int:
    """The smallest sequence number a watched queue may still deliver (the next one when all are empty)."""
    oldest = next_seq()
    for q in _queues:
        try:
            oldest = min(oldest, q[0][SEQ])
        except IndexError:  # empty (or drained meanwhile)
            continue
    return oldest


def check_compiled(module: ModuleType) -> ModuleType:
    """``module`` (a compiled capture part) when its ``RECORD_FIELDS`` is :data:`RECORD_FIELDS`; else raise.

    Raises ``RuntimeError`` naming the first difference: a compiled part that reads events by other positions
    would mislabel every record, which no fallback should hide."""
    theirs = tuple(getattr(module, "RECORD_FIELDS", ()))
    if theirs != RECORD_FIELDS:
        at = next((i for i, (a, b) in enumerate(zip(theirs, RECORD_FIELDS)) if a != b), min(len(theirs), 18))
        raise RuntimeError(
            f"{module.__name__} was built for another capture event layout (field {at}: "
            f"{theirs[at] if at < len(theirs) else None!r} there, "
            f"{RECORD_FIELDS[at] if at < len(RECORD_FIELDS) else None!r} in launchtrace.rawevent); rebuild it"
        )
    return module
