"""Capture events -> spans: one span per record, scopes as parent spans, one trace per outermost scope.

The export worker drains the capture bus and hands the events to :meth:`SpanBuilder.feed`, which returns the
spans completed so far; :meth:`SpanBuilder.flush` ends everything still open. Pure and single-threaded: no
I/O, no SDK span objects (building an SDK span per launch costs several times a CPU kernel launch).

The rules (issue 3, written down in ``docs/traces.md``):

- one span per launch / copy / fill / primitive / graph launch, named by its kernel (``wp.copy``, ...),
  including the device work Warp issues itself (``Tape.backward``'s adjoints, ``warp.fem`` / ``warp.sparse``
  launches, ``wp.zeros``' fill: ``launchtrace.internal=true``): it runs on the device like the user's;
- scopes are parent spans, nested as they nested (Warp's own timers, which are not device work, only with
  ``include_internal``; what ran under one left out hangs from the nearest exported scope); each outermost
  scope instance is its own trace (random 16-byte trace id, 8-byte span ids) whose root links to the
  previous root of the same name;
- records outside any scope go to synthetic ``launchtrace.step`` roots, one open per thread, closed after
  ``step_max_spans`` records or ``step_window_s`` seconds;
- lossless by default (``fold="auto"``): a trace's spans stream out as they are built, one span per record,
  so a trace within its ``span_budget`` is written in full. Once a trace has used ``AUTO_FOLD_SWITCH`` (3/4)
  of its budget it folds from then on: consecutive repeats of a record sequence (period 1..8) become one
  summary span (:mod:`launchtrace.export.folding`), named after the kernels it holds; its first spans stay
  individual. ``fold="always"`` folds every trace from the first repeat, ``fold="off"`` never folds.
  Whatever still does not fit is cut at ``span_budget`` spans with a final ``launchtrace.dropped`` span
  saying how many were left out;
- sampling is decided once per trace (:mod:`launchtrace.export.sampling`).

Example::

    builder = SpanBuilder(ExportConfig.resolve())
    spans = builder.feed(subscription.drain())
    spans += builder.flush()
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import operator
import os
import random
import time
import weakref
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

from launchtrace import __version__, native, topology
from launchtrace import conventions as C
from launchtrace.export.config import ExportConfig
from launchtrace.export.folding import FoldedRun, Folder, Single, fold_key
from launchtrace.export.sampling import TraceSampler
from launchtrace.export.spanattrs import device_time_attributes, record_attributes, scope_attributes
from launchtrace.export.spanfactory import make_span
from launchtrace.export.spanresource import build_resource
from launchtrace.model import LaunchRecord, Op, ScopeKind, ScopeRecord
from launchtrace.spans import STATUS_ERROR, SpanData, SpanEvent, SpanLink

__all__ = ["AUTO_FOLD_SWITCH", "STEP_SPAN_NAME", "SpanBuilder", "summary_span_name"]

_log = logging.getLogger(__name__)

STEP_SPAN_NAME = "launchtrace.step"
SCOPE_NAME = "launchtrace"
_KEY_CACHE_LIMIT = 1 << 14
# A node's topology lines are hashed this many at a time (_fastbuild.c's LINES_PER_UPDATE). A step repeats its
# launches, so its scopes hash the same lines from the same digest again and again: _DIGESTS maps (digest before,
# the next lines) to the digest after them, and the second time costs a dict look-up instead of SHA-256 over every
# line (2,300 instructions a launch for the trivial kernel of bench_instructions, 6,200 for its wide one). Chunks
# this short keep a step root cut at any length in step with the roots before it: only its last, short chunk may
# be new. A digest in _DIGESTS is shared and never updated again; the memo is bounded by the lines its keys hold.
_LINES_PER_UPDATE = 16
_DIGESTS: dict[tuple[Any, tuple[bytes, ...]], Any] = {}
_DIGESTS_MAX_LINES = 1 << 14  # about 1 MB of keys; a step root of 1,000 launches in 7 phases holds 7,000
# The per-record line of topology.fingerprint's digest, so a scope's fingerprint is computed as records arrive
# (topology exposes only the whole-list function). If topology stops providing it, the fallback keeps export
# working and tests/test_spanbuilder.py's comparison with topology.fingerprint fails loudly.
_canonical: Callable[[Any], Any] = getattr(topology, "_canonical", lambda key: repr(key))
_IDS_PER_DRAW = 32
_ZERO_ID, _ONE_ID = bytes(8), (1).to_bytes(8, "big")
_CUT_IDS = operator.itemgetter(*(slice(8 * i, 8 * i + 8) for i in range(_IDS_PER_DRAW)))  # a draw's 32 ids, in C


class _SpanIds:
    """A builder's span ids: random 8-byte ids (never all zero), drawn 32 at a time in one ``randbytes`` call, cut
    into ``ready`` and handed out from its end (``ready.pop()``); the compiled loop (``_fastbuild.c``) takes them
    from the same list, so both paths give the same ids in the same order. Why: one ``getrandbits(64)`` per span,
    its int and the int's bytes cost about 500 instructions per launch more (bench_instructions); a Python call
    per span (the ids' own ``take``) about 900 more than ``ready.pop()`` on the Python path (fold="always")."""

    __slots__ = ("__weakref__", "ready", "rng")

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.ready: list[bytes] = []  # drawn, not yet taken: the last is the next (the same list for good)

    def take(self) -> bytes:
        ready = self.ready
        if not ready:
            raw = self.rng.randbytes(8 * _IDS_PER_DRAW)
            ready.extend(_CUT_IDS(raw))
            if _ZERO_ID in ready:
                ready[:] = [i if i != _ZERO_ID else _ONE_ID for i in ready]
        return ready.pop()

    def reseed(self) -> None:
        self.rng.seed()
        self.ready.clear()


_ID_SOURCES: weakref.WeakSet[_SpanIds] = weakref.WeakSet()
"""Every builder's ids: reseeded (and the drawn ids dropped) in a forked child, so parent and child never share
ids."""


def _reseed_after_fork() -> None:
    for ids in list(_ID_SOURCES):
        ids.reseed()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reseed_after_fork)
_MAX_ROOT_NAMES = 10_000
# fold="auto": the share of a trace's span budget written one span per record; once a trace has used this
# much of it, the rest of the trace folds (so a long loop keeps its first iterations individually and its
# summary spans still fit). Below it spans stream out as they are built, exactly as with fold="off".
AUTO_FOLD_SWITCH = 0.75
_fastbuild = native.load("launchtrace.export._fastbuild")  # _on_record's common case, compiled, or None


class CompiledView(NamedTuple):
    """All of a :class:`SpanBuilder` that its compiled common case (``export/_fastbuild.c``) reads or changes.

    Why: the C loop needs the builder's tables, and reading them by the builder's private attribute names tied
    it to every rename inside this module. The builder makes this once; each member is the builder's own object:
    the dicts and the output list, which both sides change in place, and settings fixed for the builder's life.
    The C takes the members by position and publishes its order as ``_fastbuild.VIEW_FIELDS``, checked against
    these fields when the module is loaded. Beyond this, the C reads only public attributes of the records,
    nodes and traces it is handed (listed in ``_fastbuild.c``).
    """

    scopes: dict[int, Any]  # open, exported scopes by scope id (_Node)
    aliases: dict[int, Any]  # left-out internal scopes -> nearest exported ancestor (_Node or None)
    steps: dict[int, Any]  # open step root per thread (_Node)
    template_keys: dict[int, tuple[LaunchRecord, int]]  # id(template) -> (template, fold-key id)
    lines: dict[int, tuple[bytes, tuple]]  # topology line cache per fold-key id
    attrs: dict[int, tuple]  # static span attributes per fold-key id
    out: list[SpanData]  # the spans completed, taken by SpanBuilder._take
    ids: _SpanIds  # the builder's span ids
    resource: tuple
    step_max: int  # ExportConfig.step_max_spans
    step_window_ns: int
    limit: int  # ExportConfig.max_attribute_length
    make_span: Callable[..., SpanData]
    seq_key: str  # the attribute key of a record's sequence number
    scope_name: str  # the instrumentation scope of every span
    version: str


if _fastbuild is not None and tuple(getattr(_fastbuild, "VIEW_FIELDS", ())) != CompiledView._fields:
    raise RuntimeError(
        f"launchtrace.export._fastbuild reads another SpanBuilder view ({getattr(_fastbuild, 'VIEW_FIELDS', None)}"
        f" against {CompiledView._fields}); rebuild it"
    )


def summary_span_name(kernel: str, count: int, others: int) -> str:
    """A summary span's name, searchable by kernel: ``springs x20``, ``springs x20 (+2 kernels)``.

    ``kernel`` is the sequence's first launch (its first record when none is a launch: a fill is rarely what a
    person searches for), ``count`` the repetitions, ``others`` the sequence's other distinct kernels.
    """
    name = f"{kernel} x{count}"
    if others > 0:
        name += f" (+{others} kernel{'s' if others > 1 else ''})"
    return name


class _Trace:
    """One trace being built: its id, sampling decision and span budget.

    ``stream_until``: while ``used`` is below it, each record is its own span, written at once. It is the
    budget's ``limit``, or with ``fold="auto"`` (``switch=True``) the switch point (``AUTO_FOLD_SWITCH`` of
    it) until the trace reaches it and starts folding (:meth:`SpanBuilder._start_folding`).
    """

    __slots__ = ("dropped", "full", "id", "limit", "sampled", "stream_until", "used")

    def __init__(self, trace_id: bytes, sampled: bool, full: bool, budget: int, switch: bool = False) -> None:
        self.id = trace_id
        self.sampled = sampled
        self.full = full
        self.limit = budget - 2  # room left for the root and the final "dropped" span
        self.used = 0
        self.dropped = 0
        self.stream_until = int(self.limit * AUTO_FOLD_SWITCH) if switch and not full else self.limit

    @property
    def switching(self) -> bool:
        """``fold="auto"`` and not folding yet: reaching ``stream_until`` starts folding instead of cutting."""
        return self.stream_until < self.limit

    def reserve(self) -> bool:
        """Take one span of the budget; False (and counted) when the trace is full."""
        if self.used < self.limit:
            self.used += 1
            return True
        self.dropped += 1
        return False


class _Node:
    """An open parent span: a scope, or a synthetic step root."""

    __slots__ = (
        "begin",
        "children",
        "closed",
        "digest",
        "emitted",
        "external_parent",
        "first_start",
        "folder",
        "foreign",
        "last_end",
        "launches",
        "lines",
        "links",
        "parent",
        "records",
        "span_id",
        "step_index",
        "trace",
        "window_from",
    )

    def __init__(self, trace: _Trace, span_id: bytes, parent: _Node | None, folder: Folder) -> None:
        self.trace = trace
        self.span_id = span_id
        self.parent = parent
        self.folder = folder
        self.emitted = True  # False when the budget had no room for this scope's own span
        self.begin: ScopeRecord | None = None  # None for a step root
        self.children: list[_Node] = []
        self.closed = False
        self.digest: Any = None  # the SHA-256 of the lines hashed so far (None: none), shared through _DIGESTS
        self.lines: list[bytes] = []  # topology lines not yet in the digest (see flush_lines)
        self.foreign: set[int] = set()
        self.launches = 0
        self.records = 0  # records directly under a step root (its count bound)
        self.first_start = 0
        self.window_from = 0  # a step root: when its step_window_s began (after a module load it holds)
        self.last_end = 0
        self.links: tuple = ()
        self.step_index = 0
        self.external_parent: bytes | None = None  # the application's span a root joined (its span id)

    @property
    def is_root(self) -> bool:
        return self.parent is None

    def flush_lines(self) -> None:
        """Hash the pending topology lines: once for the same lines from the same digest (_DIGESTS), and then in
        one update (one 72-byte update per launch cost 1,000 instructions more than the same bytes in bulk)."""
        lines = self.lines
        if lines:
            key = (self.digest, tuple(lines))
            lines.clear()
            after = _DIGESTS.get(key)
            if after is None:
                after = _hash_more(*key)
                _DIGESTS[key] = after
            self.digest = after

    def hash_repeated(self, line: bytes, repeat: int) -> None:
        """Hash one line ``repeat`` times (a record that stands for several launches)."""
        self.flush_lines()
        digest = self.digest.copy() if self.digest is not None else hashlib.sha256()
        for _ in range(repeat):
            digest.update(line)
        self.digest = digest

    def fingerprint(self) -> str:
        """topology.fingerprint of the records accounted under this node so far."""
        self.flush_lines()
        return (self.digest or hashlib.sha256()).hexdigest()


def _hash_more(before: Any, lines: tuple[bytes, ...]) -> Any:
    """SHA-256 ``before`` (None: a new one) continued with ``lines``, ``before`` left as it was; makes room in
    _DIGESTS for the caller's new entry."""
    global _digests_lines
    after = before.copy() if before is not None else hashlib.sha256()
    after.update(b"".join(lines))
    _digests_lines += len(lines)
    if _digests_lines > _DIGESTS_MAX_LINES:
        _DIGESTS.clear()
        _digests_lines = len(lines)
    return after


_digests_lines = 0  # the lines _DIGESTS' keys hold


class SpanBuilder:
    """Turns capture events into :class:`~launchtrace.spans.SpanData`; see the module docstring for rules.

    Counters (ints): ``dropped_budget`` (spans cut by the span budget), ``dropped_unsampled`` (spans of
    traces the sampler dropped), ``unknown_scope_ends`` (a scope end whose begin was never seen),
    ``traces_started``, ``folded_records`` / ``summary_spans`` (records folded, into how many summary spans),
    ``raised`` (spans of calls and scopes that raised),
    ``traces_folded`` (``fold="auto"`` traces that reached their switch point and folded the rest); :meth:`dropped`
    sums the drops per reason.
    """

    def __init__(
        self,
        config: ExportConfig | None = None,
        resource: tuple | None = None,
        clock_ns: Callable[[], int] = time.time_ns,
    ) -> None:
        self.config = config if config is not None else ExportConfig.resolve()
        provider = self.config.tracer_provider
        if resource is None:
            resource = build_resource(self.config.service_name, provider_resource=getattr(provider, "resource", None))
        self.resource = resource
        self._clock = clock_ns
        self._rng = random.Random()  # our own: a program's random.seed(0) must not make ids repeat
        self._ids = _SpanIds(self._rng)
        self._ready_ids = self._ids.ready
        _ID_SOURCES.add(self._ids)
        sampler = provider.sampler if provider is not None else self.config.sampler
        self._sampler = TraceSampler(sampler, self.config.sampler_arg, self.config.sample_every)
        self._join = self.config.join_active_span
        self._limit = self.config.max_attribute_length
        self._old_code = self.config.deprecated_code_attributes
        self._include_internal = self.config.include_internal
        self._step_max = self.config.step_max_spans
        self._step_window_ns = int(self.config.step_window_s * 1e9)
        self._scopes: dict[int, _Node] = {}  # open, exported scopes by scope id
        self._aliases: dict[int, _Node | None] = {}  # left-out internal scopes -> nearest exported ancestor
        self._steps: dict[int, _Node] = {}  # open step root per thread
        self._last_root: dict[str, tuple[bytes, bytes]] = {}
        self._step_counts: dict[int, int] = {}
        self._key_ids: dict[Any, int] = {}
        self._template_keys: dict[int, tuple[LaunchRecord, int]] = {}  # id(template) -> (template, key id)
        self._next_key = itertools.count(1).__next__
        self._lines: dict[int, tuple[bytes, tuple]] = {}
        self._attrs: dict[int, tuple] = {}
        self._out: list[SpanData] = []
        self.compiled_view = CompiledView(
            self._scopes, self._aliases, self._steps, self._template_keys, self._lines, self._attrs, self._out,
            self._ids, self.resource, self._step_max, self._step_window_ns, self._limit, make_span, C.SEQ,
            SCOPE_NAME, __version__,
        )  # fmt: skip
        self.dropped_budget = 0
        self.dropped_unsampled = 0
        self.unknown_scope_ends = 0
        self.traces_started = 0
        self.folded_records = 0
        self.summary_spans = 0
        self.traces_folded = 0
        self.raised = 0  # spans of calls and scopes that raised (status ERROR)
        self._fold_mode = self.config.fold
        self._handlers: dict[str, Callable[[Any], None]] = {
            "record": self._on_record,
            "scope_begin": self._on_scope_begin,
            "scope_end": self._on_scope_end,
            "app_span": self._on_app_span,
        }
        self._app_spans: dict[int, tuple[bytes, bytes, int]] = {}  # thread -> the application's active span

    # --- public -------------------------------------------------------------------------------------------

    def feed(self, events: Iterable[tuple[str, Any]], now_ns: int | None = None) -> list[SpanData]:
        """Take capture events in order; returns the spans completed so far (expired steps close)."""
        handlers = self._handlers
        events = events if type(events) is list else list(events)
        fast = _fastbuild.records if _fastbuild is not None else None
        view = self.compiled_view
        i, n = 0, len(events)
        while i < n:
            if fast is not None:  # the run of common records from here, compiled (see _fastbuild.c)
                i = fast(view, events, i)
                if i >= n:
                    break
            kind, item = events[i]
            i += 1
            handler = handlers.get(kind)
            if handler is None:
                _log.warning("ignoring capture event of unknown kind %r", kind)
                continue
            handler(item)
        now = self._clock() if now_ns is None else now_ns
        for thread, step in list(self._steps.items()):  # (one holding a module load still open waits for it)
            if not step.children and now - step.window_from >= self._step_window_ns:
                del self._steps[thread]
                self._close_step(step)
        return self._take()

    def flush(self, now_ns: int | None = None) -> list[SpanData]:
        """End everything open: scopes end now and are marked incomplete, steps close; returns the spans."""
        now = self._clock() if now_ns is None else now_ns
        roots = {id(n): n for n in self._scopes.values() if n.is_root}
        for node in list(roots.values()):
            self._close_scope(node, None, now)
        self._scopes.clear()
        self._aliases.clear()
        for step in list(self._steps.values()):
            self._close_step(step)
        self._steps.clear()
        return self._take()

    def dropped(self) -> dict[str, int]:
        """Spans not exported, per reason."""
        return {"budget": self.dropped_budget, "unsampled": self.dropped_unsampled}

    # --- events -------------------------------------------------------------------------------------------

    def _on_record(self, rec: LaunchRecord) -> None:
        # The hot path of the export worker: one call per record, so settings are read from locals.
        node = self._resolve(rec.scope_id)
        if node is None:
            node = self._step_for(rec)
        trace = node.trace
        if not trace.sampled:
            self.dropped_unsampled += 1
            return
        key = self._key_id(rec)
        self._account(node, rec, key)
        folder = node.folder
        if not folder.enabled:
            self._emit_record(node, rec, key)
            return
        for group in folder.push(rec, key):
            self._emit_group(node, group)

    def _on_scope_begin(self, scope: ScopeRecord) -> None:
        parent = self._resolve(scope.parent_id)
        if scope.internal and not self._include_internal:
            self._aliases[scope.id] = parent
            return
        span_id = self._span_id()
        if parent is None and scope.kind == "load":  # a module load outside every scope: in the step root
            parent = self._step_at(scope.thread, scope.start_ns)  # (not a trace of its own per module)
        if parent is None:
            step = self._steps.get(scope.thread)
            if step is not None:  # "consecutive" means in the thread's order: no run spans this scope
                self._flush_folder(step)
            node = self._new_root(scope.name, span_id, scope.remote_parent if self._join else None)
        else:
            self._flush_folder(parent)
            node = _Node(parent.trace, span_id, parent, self._folder(parent.trace))
            parent.children.append(node)
            if parent.trace.sampled:
                node.emitted = parent.trace.reserve()
            else:
                self.dropped_unsampled += 1
        node.begin = scope
        node.first_start = scope.start_ns
        self._scopes[scope.id] = node

    def _on_app_span(self, change: tuple[int, tuple[bytes, bytes, int] | None]) -> None:
        """The application's active span changed on a thread: its open step root ends (a step never spans two
        of the application's spans), and the next one joins the new span."""
        if not self._join:
            return
        thread, span = change
        if span is None:
            self._app_spans.pop(thread, None)
        else:
            self._app_spans[thread] = span
        step = self._steps.pop(thread, None)
        if step is not None:
            self._close_step(step)

    def _on_scope_end(self, scope: ScopeRecord) -> None:
        if scope.id in self._aliases:
            del self._aliases[scope.id]
            return
        node = self._scopes.get(scope.id)
        if node is None:
            self.unknown_scope_ends += 1
            return
        step = node.parent
        if scope.kind == "load" and step is not None and step.begin is None:  # a load in a step root: the
            step.window_from = max(step.window_from, scope.end_ns)  # step's window starts after the compile
            step.last_end = max(step.last_end, scope.end_ns)
        self._close_scope(node, scope, scope.end_ns)

    # --- nodes --------------------------------------------------------------------------------------------

    def _resolve(self, scope_id: int | None) -> _Node | None:
        if scope_id is None:
            return None
        node = self._scopes.get(scope_id)
        if node is not None:
            return node
        return self._aliases.get(scope_id)

    def _folder(self, trace: _Trace) -> Folder:
        """Folding is on in ``always`` mode, and in ``auto`` mode once the trace has reached its switch point."""
        enabled = self._fold_mode != "off" and not trace.full and not trace.switching
        return Folder(self.config.fold_min_repeats, enabled=enabled)

    def _span_id(self) -> bytes:
        ready = self._ready_ids
        return ready.pop() if ready else self._ids.take()

    def _new_root(self, name: str, span_id: bytes, remote: tuple[bytes, bytes, int] | None = None) -> _Node:
        """A new trace, or with ``remote`` (the application's span it opened in) a subtree of that trace."""
        trace_id = remote[0] if remote is not None else (self._rng.getrandbits(128) or 1).to_bytes(16, "big")
        decision = self._sampler.decide(trace_id, name, remote)
        trace = _Trace(
            trace_id, decision.sampled, decision.full, self.config.span_budget, switch=self._fold_mode == "auto"
        )
        self.traces_started += 1
        node = _Node(trace, span_id, None, self._folder(trace))
        if remote is not None:
            node.external_parent = remote[1]
        if decision.sampled:
            previous = self._last_root.get(name)
            if previous is not None:
                node.links = (SpanLink(previous[0], previous[1]),)
            if name not in self._last_root and len(self._last_root) >= _MAX_ROOT_NAMES:
                self._last_root.clear()  # root names made per step ("step 17"): stay bounded
            self._last_root[name] = (trace_id, span_id)
        else:
            self.dropped_unsampled += 1
        return node

    def _step_for(self, rec: LaunchRecord) -> _Node:
        step = self._step_at(rec.thread, rec.start_ns)
        step.records += 1
        return step

    def _step_at(self, thread: int, start_ns: int) -> _Node:
        """The thread's open step root, or a new one from ``start_ns`` (the open one closed first when it holds
        ``step_max_spans`` records or its window has passed)."""
        step = self._steps.get(thread)
        if step is not None and (step.records >= self._step_max or start_ns - step.window_from >= self._step_window_ns):
            del self._steps[thread]
            self._close_step(step)
            step = None
        if step is None:
            step = self._new_root(STEP_SPAN_NAME, self._span_id(), self._app_spans.get(thread))
            step.first_start = step.window_from = start_ns
            index = self._step_counts.get(thread, 0)
            self._step_counts[thread] = index + 1
            step.step_index = index
            self._steps[thread] = step
        return step

    def _account(self, node: _Node, rec: LaunchRecord, key: Any) -> None:
        """Add a record to the counters and topology digest of its parent and every ancestor."""
        line, foreign = self._line(rec, key)
        repeat = rec.repeat
        if repeat != 1:
            repeat = max(1, int(repeat or 1))
        n: _Node | None = node
        while n is not None:
            n.launches += repeat
            if repeat == 1:
                n.lines.append(line)
                if len(n.lines) >= _LINES_PER_UPDATE:
                    n.flush_lines()
            else:
                n.hash_repeated(line, repeat)
            if foreign:
                n.foreign.update(foreign)
            if rec.end_ns > n.last_end:
                n.last_end = rec.end_ns
            n = n.parent

    def _key_id(self, rec: LaunchRecord) -> int:
        """The record's fold key as an int, hashed once per record and never reused for another key.

        The topology line, the span attributes and the folder's comparisons all go by this id. A record with
        an error gets a fresh negative id: it never folds and is never cached.
        """
        if rec.error is not None:
            return -self._next_key()
        template = rec.template  # a copy of an earlier record (capture.materialize): the same fold key
        if template is not None:
            hit = self._template_keys.get(id(template))
            if hit is not None and hit[0] is template:
                return hit[1]
        key = fold_key(rec)
        ids = self._key_ids
        try:
            found = ids.get(key)
        except TypeError:  # an unhashable scalar value
            key = repr(key)
            found = ids.get(key)
        if found is None:
            if len(ids) >= _KEY_CACHE_LIMIT:  # forget old keys; ids stay unique, so no false fold
                ids.clear()
                self._lines.clear()
                self._attrs.clear()
                self._template_keys.clear()
            found = self._next_key()
            ids[key] = found
        if template is not None:
            if len(self._template_keys) >= _KEY_CACHE_LIMIT:
                self._template_keys.clear()
            self._template_keys[id(template)] = (template, found)  # kept alive: its id cannot be reused
        return found

    def _line(self, rec: LaunchRecord, key: int) -> tuple[bytes, tuple]:
        """The record's line in :func:`launchtrace.topology.fingerprint`'s digest, and the pointers of its
        foreign buffers; cached by key id (the buffers are part of the fold key)."""
        hit = self._lines.get(key)
        if hit is None:
            canon = _canonical(topology.topology_key(rec, raw=False))
            line = json.dumps(canon, separators=(",", ":"), ensure_ascii=True).encode() + b"\n"
            hit = (line, tuple(b.ptr for b in rec.buffers if b.foreign))
            if key > 0:
                self._lines[key] = hit
        return hit

    def _record_attributes(self, rec: LaunchRecord, key: int) -> tuple:
        static = self._attrs.get(key)
        if static is None:
            static = record_attributes(rec, self._limit, seq=False, device_time=False, deprecated_code=self._old_code)
            if key > 0:
                self._attrs[key] = static
        if rec.probes:  # device times differ per launch, like the sequence number
            return (*static, (C.SEQ, rec.seq), *device_time_attributes(rec))
        if rec.graph_replay:  # so does a replay's ordinal (not in the fold key: repeated replays fold)
            return (*static, (C.SEQ, rec.seq), (C.GRAPH_REPLAY, rec.graph_replay))
        # A concatenation, not (*static, ...), which builds a list first: 600 instructions per record (issue 26)
        return static + ((C.SEQ, rec.seq),)  # noqa: RUF005

    def _flush_folder(self, node: _Node) -> None:
        for group in node.folder.flush():
            self._emit_group(node, group)

    def _close_scope(self, node: _Node, end: ScopeRecord | None, end_ns: int) -> None:
        """End a scope span (``end`` None: still open at flush, so incomplete), children first."""
        for child in list(node.children):
            self._close_scope(child, None, end_ns)
        if node.parent is not None and node in node.parent.children:
            node.parent.children.remove(node)
        begin = node.begin
        assert begin is not None
        self._scopes.pop(begin.id, None)
        self._flush_folder(node)
        node.closed = True
        if not node.trace.sampled:
            return
        incomplete = end is None
        final = end if end is not None else begin
        attrs = scope_attributes(begin, final, self._limit, self._old_code) + self._summary(node)
        if incomplete:
            attrs += ((C.SCOPE_INCOMPLETE, True),)
        if node.external_parent is not None:
            attrs += ((C.SCOPE_JOINED, True),)
        span = self._span(
            node, begin.name, begin.start_ns, max(end_ns, begin.start_ns), attrs, final.error if end else None
        )
        if node.is_root:
            self._finish_trace(node, span)
        elif node.emitted:
            self._out.append(span)

    def _close_step(self, step: _Node) -> None:
        self._flush_folder(step)
        step.closed = True
        if not step.trace.sampled:
            return
        attrs = (
            (C.SCOPE_KIND, str(ScopeKind.STEP)),
            (C.STEP_INDEX, step.step_index),
            *self._summary(step),
        )
        if step.external_parent is not None:
            attrs += ((C.SCOPE_JOINED, True),)
        end = max(step.first_start, step.last_end)
        span = self._span(step, STEP_SPAN_NAME, step.first_start, end, attrs, None)
        self._finish_trace(step, span)

    def _summary(self, node: _Node) -> tuple:
        return (
            (C.SCOPE_LAUNCHES, node.launches),
            (C.SCOPE_FINGERPRINT, node.fingerprint()),
            (C.SCOPE_FOREIGN_POINTERS, len(node.foreign)),
        )

    def _finish_trace(self, root: _Node, span: SpanData) -> None:
        trace = root.trace
        if trace.dropped:
            self.dropped_budget += trace.dropped
            self._out.append(
                SpanData(
                    trace.id,
                    self._span_id(),
                    root.span_id,
                    C.DROPPED_SPAN_NAME,
                    span.end_ns,
                    span.end_ns,
                    ((C.DROPPED_SPANS, trace.dropped),),
                    resource=self.resource,
                    scope_name=SCOPE_NAME,
                    scope_version=__version__,
                )
            )
        self._out.append(span)

    # --- spans --------------------------------------------------------------------------------------------

    def _span(
        self,
        node: _Node,
        name: str,
        start: int,
        end: int,
        attrs: tuple,
        error: str | None,
        events: tuple = (),
    ) -> SpanData:
        parent = node.parent.span_id if node.parent is not None else node.external_parent
        return self._make(node.trace.id, node.span_id, parent, name, start, end, attrs, error, events, node.links)

    def _make(
        self,
        trace_id: bytes,
        span_id: bytes,
        parent: bytes | None,
        name: str,
        start: int,
        end: int,
        attrs: tuple,
        error: str | None,
        events: tuple = (),
        links: tuple = (),
    ) -> SpanData:
        status, message = 0, ""
        if error is not None:
            self.raised += 1
            status, message = STATUS_ERROR, C.bounded(error, self._limit)
            etype, sep, emsg = error.partition(": ")
            if not sep:
                etype, emsg = "Exception", error
            exception = (
                (C.EXCEPTION_TYPE, C.bounded(etype, self._limit)),
                (C.EXCEPTION_MESSAGE, C.bounded(emsg, self._limit)),
            )
            events = (*events, SpanEvent(C.EVENT_EXCEPTION, end, exception))
        return make_span(
            trace_id,
            span_id,
            parent,
            C.bounded(name, self._limit),
            start,
            end,
            attrs,
            status,
            message,
            events,
            links,
            self.resource,
            SCOPE_NAME,
            __version__,
        )

    def _emit_group(self, node: _Node, group: Single | FoldedRun) -> None:
        if isinstance(group, Single):
            self._emit_record(node, group.record, group.key)
        elif node.trace.reserve():
            self.summary_spans += 1
            self.folded_records += group.launches
            self._out.append(self._summary_span(node, group))

    def _emit_record(self, node: _Node, rec: LaunchRecord, key: int) -> None:
        trace = node.trace
        if trace.used >= trace.stream_until:
            if trace.switching:  # fold="auto" at its switch point: fold from this record on
                self._start_folding(trace)
                for group in node.folder.push(rec, key):
                    self._emit_group(node, group)
                return
            trace.dropped += 1
            return
        trace.used += 1
        attrs = self._record_attributes(rec, key)
        ready = self._ready_ids  # self._span_id(), inlined
        span_id = ready.pop() if ready else self._ids.take()
        name = rec.kernel + C.ADJOINT_SUFFIX if rec.adjoint else rec.kernel  # C.kernel_title, inlined
        if rec.error is None and len(name) <= self._limit:  # the common case, without _make's checks
            span = make_span(
                trace.id, span_id, node.span_id, name, rec.start_ns, rec.end_ns, attrs, 0, "", (), (),
                self.resource, SCOPE_NAME, __version__,
            )  # fmt: skip
        else:
            span = self._make(trace.id, span_id, node.span_id, name, rec.start_ns, rec.end_ns, attrs, rec.error)
        self._out.append(span)

    def _start_folding(self, trace: _Trace) -> None:
        """A ``fold="auto"`` trace reached its switch point: its open nodes fold from now on.

        The spans already written stay as they are (the trace's first spans, one per record); only the
        rest of the trace folds, and what still does not fit is cut at the budget as usual.
        """
        trace.stream_until = trace.limit
        self.traces_folded += 1
        for node in itertools.chain(self._scopes.values(), self._steps.values()):
            if node.trace is trace and not node.folder.enabled:
                node.folder = self._folder(trace)

    def _summary_span(self, node: _Node, run: FoldedRun) -> SpanData:
        events = []
        for index, (rec, stats) in enumerate(zip(run.sequence, run.stats)):
            device = run.device_stats[index] if run.device_stats else None
            attrs = (
                *record_attributes(rec, self._limit, device_time=False, deprecated_code=self._old_code),
                (C.FOLD_POSITION, index),
                (C.FOLD_DURATION_COUNT, stats.count),
                (C.FOLD_DURATION_MIN, stats.min),
                (C.FOLD_DURATION_MEAN, stats.mean),
                (C.FOLD_DURATION_MAX, stats.max),
                (C.FOLD_DURATION_P50, stats.p50),
            )
            if device is not None:
                attrs += (
                    (C.FOLD_DEVICE_DURATION_COUNT, device.count),
                    (C.FOLD_DEVICE_DURATION_MIN, device.min),
                    (C.FOLD_DEVICE_DURATION_MEAN, device.mean),
                    (C.FOLD_DEVICE_DURATION_MAX, device.max),
                    (C.FOLD_DEVICE_DURATION_P50, device.p50),
                )
            events.append(SpanEvent(C.EVENT_FOLD_POSITION, rec.start_ns, attrs))
        first = run.sequence[0]
        main = next((r for r in run.sequence if r.op == Op.LAUNCH), first)
        kernels = tuple(dict.fromkeys(C.bounded(r.kernel, self._limit) for r in run.sequence))
        attrs = (
            (C.FOLD_COUNT, run.count),
            (C.FOLD_PERIOD, run.period),
            (C.FOLD_LAUNCHES, run.launches),
            (C.FOLD_SEQ_LAST, run.last_seq),
            (C.OP, str(main.op)),
            (C.KERNEL, C.bounded(main.kernel, self._limit)),
            (C.FOLD_KERNELS, kernels),
            (C.THREAD_ID, first.thread),
        )
        trace = node.trace
        return self._make(
            trace.id,
            self._span_id(),
            node.span_id,
            summary_span_name(main.kernel, run.count, len(kernels) - 1),
            run.start_ns,
            run.end_ns,
            attrs,
            None,
            tuple(events),
        )

    def _take(self) -> list[SpanData]:
        out = self._out.copy()  # the list itself stays: compiled_view holds it
        self._out.clear()
        return out
