"""Topology snapshots: a recorded block of device work as a stable, reviewable text file, and its comparison.

A snapshot is what a reviewer reads in a pull request when a change alters a step's launch topology: one launch
per line (kernel, dims, buffers by owner label or stable identity with offsets, scalars by parameter name, the
call site relative to the repository, the scope path inside the recorded block), keys sorted, no pointers, no
times, no absolute paths. The pytest plugin (:mod:`launchtrace.pytest_plugin`) and ``launchtrace snapshot`` /
``launchtrace diff --snapshot`` write and read the same format.

Comparison turns both sides back into :class:`~launchtrace.model.LaunchRecord` s whose buffers carry their
snapshot labels and hands them to :func:`launchtrace.topology.diff_records`: the project's one alignment, so a
snapshot mismatch reads like every other topology diff (``#3 m.integrate (from sim.py:88 (step)): dim (1024,) ->
(512,)``). Sites and scopes are shown, not compared (moving a launch to another line or timer is a refactor, not
a topology change); a snapshot whose text differs only in them is reported as stale, not as a mismatch.

Example::

    from launchtrace.snapshot import SnapshotOptions, build_snapshot, compare, parse_snapshot, render_snapshot
    doc = build_snapshot(trace.records, trace.scopes, name="step", root=repo)
    text = render_snapshot(doc)                                   # what goes into the file
    entries = compare(parse_snapshot(text, "step.json"), doc, SnapshotOptions())  # [] when equal
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from launchtrace.allocations import identity_of
from launchtrace.model import HOST_DATA, BufferArg, LaunchRecord, ScopeRecord, Site
from launchtrace.topology import ChangeKind, DiffEntry, Locator, diff_records, format_value, plain_value, slotless

__all__ = [
    "FORMAT_VERSION",
    "MAX_LAUNCHES",
    "SnapshotError",
    "SnapshotOptions",
    "UnownedNames",
    "buffer_label",
    "build_snapshot",
    "compare",
    "parse_snapshot",
    "read_snapshot",
    "relative_site",
    "render_snapshot",
    "snapshot_records",
    "write_atomic",
]

FORMAT_VERSION = 1
MAX_LAUNCHES = 100_000
"""A snapshot is one step, read by people: more launches than this is refused, not written (a folded summary
span can claim any number of repetitions)."""
_FORMAT_KEY = "launchtrace_snapshot"


class SnapshotError(ValueError):
    """A snapshot file that cannot be read; the message names the file and what is wrong."""


@dataclasses.dataclass(frozen=True)
class SnapshotOptions:
    """What a comparison looks at. ``float_tolerance`` maps a scalar parameter name (``"*"``: every float
    scalar) to a tolerance ``t``: two floats are equal when ``|a - b| <= t * max(1, |a|, |b|)``."""

    ignore_scalars: bool = False
    ignore_streams: bool = False
    float_tolerance: Mapping[str, float] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        for name, tol in self.float_tolerance.items():
            if not isinstance(tol, (int, float)) or isinstance(tol, bool) or not tol >= 0 or math.isinf(tol):
                raise ValueError(f"float_tolerance[{name!r}] must be a finite number >= 0, got {tol!r}")


# ---------------------------------------------------------------------------------------------------------
# Buffer identity: the one place that decides what a buffer is called in a snapshot
# ---------------------------------------------------------------------------------------------------------


class UnownedNames:
    """Names for buffers nothing else names, numbered by the order they first appear in one snapshot."""

    def __init__(self) -> None:
        self._names: dict[Any, str] = {}
        self._sites: dict[str, dict[str, int]] = {}  # site name -> allocation identity -> order met in

    def allocation(self, identity: str) -> str:
        """An allocation's name in this snapshot: its site's name (``Sim.x``), ``#k`` added for the k-th other
        allocation of that site met here. Not the process-wide slot, which depends on what earlier tests left
        alive."""
        base = slotless(identity)
        seen = self._sites.setdefault(base, {})
        k = seen.setdefault(identity, len(seen))
        return base if k == 0 else f"{base}#{k}"

    def name(self, identity: Any) -> str:
        found = self._names.get(identity)
        if found is None:
            found = self._names[identity] = f"<unowned #{len(self._names)}>"
        return found


def buffer_label(
    buf: BufferArg | None, ptr: int, owners: Locator | None, unowned: UnownedNames, host: bool = False
) -> str | None:
    """What an array argument is called in a snapshot (``None`` for a null array).

    In order: the ``owners`` the test named (``launch_topology(..., owners={"sim": sim})``), the label
    :func:`launchtrace.own` gave at capture (``BufferArg.owner``), the capture's run-stable allocation identity
    of an unowned buffer (``BufferArg.alloc``: the allocating statement's target, ``Sim.step.tmp``, with ``#k``
    for the k-th other allocation of that statement met in the snapshot; stable under address reuse, see
    :mod:`launchtrace.allocations` and :meth:`UnownedNames.allocation`), else ``<host data>`` for the program's
    own host memory on the unowned side of a ``wp.array(numpy_array)`` / ``array.numpy()`` copy (``host``:
    :attr:`LaunchRecord.copies_host_data`; as ``diff`` names it, since a NumPy temporary's address is reused, or
    not, from run to run), else ``<unowned #k>`` numbered by the first appearance of the address in the snapshot
    (memory allocated before the capture began, or not by Warp). Offsets into a labelled buffer are kept:
    ``sim.x+128``.
    """
    if not ptr:
        return None
    if owners is not None:
        loc = owners.locate(ptr)
        if loc is not None:
            return format_value((loc[0], loc[1]))
    if buf is not None and buf.owner is not None:
        return format_value((buf.owner, buf.offset or 0))
    if buf is not None and buf.alloc is not None:  # "State.x#1 (sim.py:41)": the identity, without the line
        return format_value((unowned.allocation(identity_of(buf.alloc) or buf.alloc), buf.offset or 0))
    if host:
        return HOST_DATA
    return unowned.name(ptr)


# ---------------------------------------------------------------------------------------------------------
# Building a snapshot from records
# ---------------------------------------------------------------------------------------------------------


def relative_site(site: Site, root: str | os.PathLike | None) -> str:
    """``"tests/sim.py:88 (step)"``: the site with its file relative to ``root`` (``/`` separators); a file
    outside ``root`` keeps the part after ``site-packages/``, else its base name. Never an absolute path."""
    file = site.file or "<unknown>"
    if not file.startswith("<"):
        path = os.path.normpath(os.path.abspath(file))
        rel = None
        if root is not None:
            base = os.path.normpath(os.path.abspath(os.fspath(root)))
            if path == base or path.startswith(base.rstrip(os.sep) + os.sep):
                rel = os.path.relpath(path, base)
        if rel is None:
            marker = f"site-packages{os.sep}"
            rel = path.split(marker, 1)[1] if marker in path else os.path.basename(path)
        file = rel.replace(os.sep, "/")
    return f"{file}:{site.line} ({site.function})"


def _scope_path(scopes: Mapping[int, ScopeRecord], scope_id: int | None, base: int | None) -> str:
    """The names of the scopes enclosing a record inside the recorded block (``base`` excluded), outermost
    first, joined by ``/``."""
    names: list[str] = []
    seen: set[int] = set()
    while scope_id is not None and scope_id != base and scope_id in scopes and scope_id not in seen:
        seen.add(scope_id)
        scope = scopes[scope_id]
        if not scope.internal:
            names.append(scope.name)
        scope_id = scope.parent_id
    return "/".join(reversed(names))


def _finite_or_text(value: float) -> float | str:
    return value if math.isfinite(value) else repr(value)


def _scalar(value: Any) -> Any:
    """A JSON value for a scalar argument: numbers stay numbers, NaN and infinities become strings, vectors
    lists, numpy scalars their Python value, anything else its type name (:func:`~.topology.plain_value`)."""
    return plain_value(value, _finite_or_text)


def _arg_names(rec: LaunchRecord, keys: Iterable[Any]) -> list[str]:
    """Parameter names for argument keys, made unique (``x#3`` for a second ``x``)."""
    out, seen = [], set()
    for key in keys:
        name = rec.arg_name(key)
        if name in seen:
            name = f"{name}#{key}"
        seen.add(name)
        out.append(name)
    return out


def _dims(rec: LaunchRecord) -> list[int]:
    dims = list(rec.dim)
    if not all(isinstance(d, int) and not isinstance(d, bool) for d in dims):
        raise SnapshotError(f"{rec.kernel} (from {rec.site}): dimensions {rec.dim!r} are not integers")
    return dims


def _launch_entry(
    rec: LaunchRecord,
    *,
    owners: Locator | None,
    unowned: UnownedNames,
    streams: dict[Any, int] | None,
    scalars: bool,
    scope: str,
    site: str,
) -> dict[str, Any]:
    bufs = rec.buffers if len(rec.buffers) == len(rec.arrays) else [rec.buffer(k) for k, _ in rec.arrays]
    names = _arg_names(rec, (k for k, _ in rec.arrays))
    host = rec.copies_host_data
    entry: dict[str, Any] = {
        "op": str(rec.op),
        "kernel": rec.kernel,
        "dim": _dims(rec),
        "buffers": {n: buffer_label(b, p, owners, unowned, host) for n, (_, p), b in zip(names, rec.arrays, bufs)},
        "site": site,
    }
    if scalars:
        names = _arg_names(rec, (k for k, _ in rec.scalars))
        entry["scalars"] = {n: _scalar(v) for n, (_, v) in zip(names, rec.scalars)}
    if streams is not None and rec.stream is not None:
        entry["stream"] = streams.setdefault(rec.stream, len(streams))
    if scope:
        entry["scope"] = scope
    if rec.captured:
        entry["captured"] = True
    return entry


def build_snapshot(
    records: Sequence[LaunchRecord],
    scopes: Mapping[int, ScopeRecord] | None = None,
    *,
    name: str,
    owners: Locator | None = None,
    root: str | os.PathLike | None = None,
    base_scope: int | None = None,
    source: str = "",
    options: SnapshotOptions | None = None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The snapshot document of ``records`` (a recorded block, or one occurrence of a scope).

    ``scopes``: the scope records the block's scope paths come from, relative to ``base_scope`` (the scope
    occurrence itself, left out of the paths); ``root``: the directory sites are made relative to; ``source``:
    where it came from (a test id, a trace file name); ignored fields (``options``) are not written. A record
    standing for ``repeat`` folded repetitions is written ``repeat`` times; :class:`SnapshotError` past
    :data:`MAX_LAUNCHES`.
    """
    opts = options or SnapshotOptions()
    scopes = scopes or {}
    unowned = UnownedNames()
    streams: dict[Any, int] | None = None if opts.ignore_streams else {}
    sites: dict[Site, str] = {}
    launches = []
    for rec in records:
        site = sites.get(rec.site)
        if site is None:
            site = sites[rec.site] = relative_site(rec.site, root)
        entry = _launch_entry(
            rec,
            owners=owners,
            unowned=unowned,
            streams=streams,
            scalars=not opts.ignore_scalars,
            scope=_scope_path(scopes, rec.scope_id, base_scope),
            site=site,
        )
        count = max(1, int(rec.repeat or 1))
        if len(launches) + count > MAX_LAUNCHES:
            raise SnapshotError(
                f"{name!r}: more than {MAX_LAUNCHES:,} launches in one snapshot (a summary span claims {count:,}"
                " repetitions, or the block is a whole run): snapshot one step"
            )
        launches.extend([entry] * count)
    doc: dict[str, Any] = {
        _FORMAT_KEY: FORMAT_VERSION,
        "name": name,
        "options": {"scalars": not opts.ignore_scalars, "streams": not opts.ignore_streams},
        "launches": launches,
    }
    if source:
        doc["source"] = source
    doc.update(extra or {})
    return doc


# ---------------------------------------------------------------------------------------------------------
# Text
# ---------------------------------------------------------------------------------------------------------


def _compact(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(", ", ": "), allow_nan=False)


def render_snapshot(doc: Mapping[str, Any]) -> str:
    """The file text: a JSON object with sorted keys, one launch per line, ending with a newline."""
    lines = ["{"]
    keys = sorted(doc)
    for i, key in enumerate(keys):
        comma = "," if i < len(keys) - 1 else ""
        if key == "launches":
            launches = doc[key]
            if not launches:
                lines.append(f'  "launches": []{comma}')
                continue
            lines.append('  "launches": [')
            lines.extend(f"    {_compact(e)}{',' if j < len(launches) - 1 else ''}" for j, e in enumerate(launches))
            lines.append(f"  ]{comma}")
        else:
            lines.append(f"  {_compact(key)}: {_compact(doc[key])}{comma}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def parse_snapshot(text: str, path: str | os.PathLike) -> dict[str, Any]:
    """A snapshot document read back from its text; :class:`SnapshotError` naming ``path`` if it is not one."""
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise SnapshotError(f"{path}: not a launchtrace snapshot (invalid JSON: {exc})") from None
    if not isinstance(doc, dict) or _FORMAT_KEY not in doc:
        raise SnapshotError(f"{path}: not a launchtrace snapshot (no {_FORMAT_KEY!r} key)")
    if doc[_FORMAT_KEY] != FORMAT_VERSION:
        raise SnapshotError(f"{path}: snapshot format {doc[_FORMAT_KEY]!r}, this launchtrace reads {FORMAT_VERSION}")
    launches = doc.get("launches")
    if not isinstance(launches, list):
        raise SnapshotError(f"{path}: 'launches' must be a list")
    if not isinstance(doc.get("options", {}), dict):
        raise SnapshotError(f"{path}: 'options' must be an object")
    for i, entry in enumerate(launches):
        problem = _entry_problem(entry)
        if problem:
            raise SnapshotError(f"{path}: launch {i}: {problem}")
    return doc


def read_snapshot(path: str | os.PathLike) -> dict[str, Any]:
    """The snapshot stored at ``path``; :class:`SnapshotError` naming it when it is missing, unreadable or not
    a snapshot."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SnapshotError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SnapshotError(f"{path}: cannot read the snapshot ({exc.__class__.__name__}: {exc})") from None
    return parse_snapshot(text, path)


def _entry_problem(entry: Any) -> str:
    if not isinstance(entry, dict):
        return "not an object"
    for key, kind in (("op", str), ("kernel", str), ("site", str), ("dim", list), ("buffers", dict)):
        if not isinstance(entry.get(key), kind):
            return f"{key!r} missing or not a {kind.__name__}"
    if not all(isinstance(d, int) for d in entry["dim"]):
        return "'dim' must hold integers"
    if not all(v is None or isinstance(v, str) for v in entry["buffers"].values()):
        return "'buffers' values must be labels or null"
    scalars = entry.get("scalars", {})
    if not isinstance(scalars, dict) or not all(_plain(v) for v in scalars.values()):
        return "'scalars' must be an object of numbers, strings, booleans, nulls or lists of them"
    if not isinstance(entry.get("stream", 0), int) or not isinstance(entry.get("captured", False), bool):
        return "'stream' must be an integer and 'captured' a boolean"
    return ""


def _plain(value: Any) -> bool:
    if isinstance(value, list):
        return all(_plain(v) for v in value)
    return value is None or isinstance(value, (bool, int, float, str))


# ---------------------------------------------------------------------------------------------------------
# Comparison
# ---------------------------------------------------------------------------------------------------------

_SITE = re.compile(r"^(?P<file>.*):(?P<line>\d+) \((?P<function>.*)\)$")


def _site(text: str) -> Site:
    m = _SITE.match(text)
    return Site(m["file"], int(m["line"]), m["function"]) if m else Site(text, 0, "")


def _hashable(value: Any) -> Any:
    return tuple(_hashable(v) for v in value) if isinstance(value, list) else value


def snapshot_records(doc: Mapping[str, Any]) -> list[LaunchRecord]:
    """The launches of a snapshot as records whose buffers are owned by their snapshot labels, so that
    :func:`launchtrace.topology.diff_records` compares them as it compares owned buffers."""
    out = []
    for entry in doc["launches"]:
        arrays, bufs = [], []
        for name, label in sorted(entry["buffers"].items()):  # file order and capture order differ: sort both
            ptr = 1 if label is not None else 0
            arrays.append((name, ptr))
            bufs.append(BufferArg(name, name, ptr, owner=label, offset=0 if label is not None else None))
        scalars = tuple((name, _hashable(v)) for name, v in sorted(entry.get("scalars", {}).items()))
        out.append(
            LaunchRecord(
                op=entry["op"],
                kernel=entry["kernel"],
                dim=tuple(entry["dim"]),
                stream=entry.get("stream"),
                arrays=tuple(arrays),
                scalars=scalars,
                site=_site(entry["site"]),
                buffers=tuple(bufs),
                captured=bool(entry.get("captured", False)),
            )
        )
    return out


def _close(a: Any, b: Any, tol: float) -> bool:
    if isinstance(a, bool) or isinstance(b, bool) or not isinstance(a, (int, float)) or not isinstance(b, (int, float)):
        return a == b
    return abs(a - b) <= tol * max(1.0, abs(a), abs(b))


def _tolerated(entry: DiffEntry, tolerance: Mapping[str, float]) -> DiffEntry | None:
    """``entry`` without the scalar changes that lie within their tolerance (``None`` when nothing is left)."""
    if entry.kind != ChangeKind.CHANGED or not tolerance:
        return entry
    kept = []
    for f in entry.fields:
        tol = tolerance.get(f.name, tolerance.get("*")) if f.field == "scalar" else None
        if tol is None or not _close(f.before, f.after, tol):
            kept.append(f)
    if len(kept) == len(entry.fields):
        return entry
    meaningful = [f for f in kept if f.field != "site"]  # a site alone never makes two launches differ
    return dataclasses.replace(entry, fields=tuple(kept)) if meaningful else None


def compare(stored: Mapping[str, Any], current: Mapping[str, Any], options: SnapshotOptions) -> list[DiffEntry]:
    """The aligned differences from the ``stored`` snapshot to the ``current`` one (``[]``: same topology).

    Scalars are compared when neither ``options`` nor the stored snapshot's own options left them out (likewise
    streams); floats within ``options.float_tolerance`` are equal.
    """
    stored_opts = stored.get("options", {})
    scalars = not options.ignore_scalars and stored_opts.get("scalars", True) is not False
    streams = not options.ignore_streams and stored_opts.get("streams", True) is not False
    entries = diff_records(snapshot_records(stored), snapshot_records(current), None, scalars, streams)
    out = []
    for e in entries:
        kept = _tolerated(e, options.float_tolerance)
        if kept is not None:
            out.append(kept)
    return out


# ---------------------------------------------------------------------------------------------------------
# Files
# ---------------------------------------------------------------------------------------------------------


def write_atomic(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same directory and a rename: a reader (or a
    second pytest worker writing the same file) sees the old file or the new one, never a partial one."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
