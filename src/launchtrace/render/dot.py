"""Graphviz DOT of a trace's dataflow, in the style of Warp's ``Tape.visualize``.

Kernels (and copies, fills) are nodes with one port per array argument; a read-after-write draws an edge
from the writer's port to the reader's port; buffers are ellipses named by owner label, drawn where their
first value comes from outside the trace and where their last value leaves it; scopes are clusters; a
sequence of records or scopes repeated back to back is drawn once inside a "repeated Nx" cluster; hazards
(see :mod:`launchtrace.analysis.dataflow`) are red dashed edges. With ``status`` (from a diff), launches are
coloured added / changed, and ``removed`` records are drawn in red in a cluster of their own. Work captured
into a CUDA graph is drawn inside a purple "captured into graph G" cluster (it ran at each replay, not where it
was recorded); a replay (``wp.capture_launch``) is a node saying which graph it ran, with a port per buffer
its graph touches. A launch's title marks an adjoint launch (``repulsion (adjoint)``).

Size: at most ``max_records`` record nodes are drawn (repeats collapse first, so a repeated step costs one
block); the rest are listed in an index node by kernel and count, and the picture is capped at
``MAX_INCHES`` so Graphviz never reaches its 32767-pixel limit.

Node ids are generated here (``r12``, ``b3``, ``cluster_s4``); every string from the trace goes through
:mod:`launchtrace.render.escape`, so markup or DOT syntax in a kernel, scope or attribute is inert text.

Example::

    from launchtrace.analysis.dataflow import build_dataflow
    from launchtrace.render.dot import render_dot
    text = render_dot(trace, build_dataflow(trace), hide_readonly=True)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable, Mapping, Sequence

from launchtrace.analysis.dataflow import Dataflow, EdgeKind
from launchtrace.conventions import kernel_title
from launchtrace.model import LaunchRecord, TraceData
from launchtrace.render.escape import dot_html, dot_quoted
from launchtrace.topology import find_repeats, topology_key

__all__ = ["MAX_INCHES", "MAX_RECORDS", "STATUS_COLORS", "render_dot"]

MAX_RECORDS = 120  # record nodes drawn at most; the rest go to an index node
MAX_INCHES = 80  # the picture's largest side (Graphviz scales down beyond it): 5760 px at 72 dpi
_INDEX_ROWS = 12

STATUS_COLORS = {"added": "#b7e4a8", "changed": "#ffd27f", "removed": "#f4a6a6", "": "#e8e8e8"}
_MAX_SCALARS = 6


@dataclasses.dataclass
class _Tree:
    """A container (the top level or one scope) with its children in issue order."""

    scope_id: int | None
    name: str
    children: list  # of int (record index) or _Tree
    first: int = 0
    graph: int | None = None  # a cluster of the records captured into this graph


def _build_tree(trace: TraceData) -> _Tree:
    nodes: dict[int | None, _Tree] = {None: _Tree(None, "", [])}

    def node(scope_id: int | None) -> _Tree:
        if scope_id in nodes:
            return nodes[scope_id]
        if scope_id not in trace.scopes:
            return nodes[None]
        scope = trace.scopes[scope_id]
        tree = _Tree(scope_id, scope.name, [])
        nodes[scope_id] = tree
        parent = node(scope.parent_id) if scope.parent_id != scope_id else nodes[None]
        parent.children.append(tree)
        return tree

    captured: dict[tuple, _Tree] = {}
    for i, rec in enumerate(trace.records):
        parent = node(rec.scope_id)
        if rec.captured and rec.graph_id is not None:
            key = (id(parent), rec.graph_id)
            if key not in captured:
                captured[key] = _Tree(None, f"captured into graph {rec.graph_id}", [], graph=rec.graph_id)
                parent.children.append(captured[key])
            parent = captured[key]
        parent.children.append(i)

    def settle(tree: _Tree) -> int:
        firsts = [c if isinstance(c, int) else settle(c) for c in tree.children]
        tree.first = min(firsts, default=0)
        order = sorted(range(len(tree.children)), key=lambda k: firsts[k])
        tree.children = [tree.children[k] for k in order]
        return tree.first

    settle(nodes[None])
    return nodes[None]


@dataclasses.dataclass(frozen=True, slots=True)
class Run:
    """``children[start : start + length]`` drawn once for ``count`` back-to-back repetitions."""

    start: int
    length: int
    count: int


def find_runs(keys: Sequence[Hashable], max_period: int = 16) -> list[Run]:
    """Cover ``keys`` with runs from :func:`launchtrace.topology.find_repeats` (single items in between)."""
    out: list[Run] = []
    i = 0
    for start, period, count in find_repeats(keys, max_period=max_period):
        out.extend(Run(k, 1, 1) for k in range(i, start))
        out.append(Run(start, period, count))
        i = start + period * count
    out.extend(Run(k, 1, 1) for k in range(i, len(keys)))
    return out


def _item_key(trace: TraceData, item) -> Hashable:
    if isinstance(item, int):
        return topology_key(trace.records[item], scalars=False, streams=True)
    return ("scope", item.name, tuple(_item_key(trace, c) for c in item.children))


def _records_under(item) -> list[int]:
    if isinstance(item, int):
        return [item]
    out: list[int] = []
    for c in item.children:
        out.extend(_records_under(c))
    return out


class _Emitter:
    def __init__(
        self,
        trace: TraceData,
        flow: Dataflow,
        hide_readonly: bool,
        status: Mapping[int, str],
        collapse: bool,
        runs: Callable[[Sequence[Hashable]], list[Run]],
        max_records: int = MAX_RECORDS,
    ) -> None:
        self.trace, self.flow, self.hide_readonly, self.status = trace, flow, hide_readonly, status
        self.collapse, self.runs = collapse, runs
        self.max_records = max_records
        self.drawn = 0
        self.hidden: list[int] = []  # records past the cap: listed in the index node
        self.lines: list[str] = []
        self.rep: dict[int, int] = {}  # record index -> record drawn for it (itself or its first repetition)
        self.repeats: dict[int, int] = {}  # a later repetition -> its first (drawn, unless past the cap)
        self.stands_for: dict[int, list[tuple]] = {}  # a first repetition -> the scalars of every record it stands for
        self.clusters = 0

    def emit_tree(self, tree: _Tree, indent: int) -> None:
        pad = "  " * indent
        boxed = tree.scope_id is not None or tree.graph is not None
        if boxed:
            self.clusters += 1
            self.lines.append(f"{pad}subgraph cluster_s{self.clusters} {{")
            if tree.graph is not None:
                label = tree.name + " (runs at each replay)"
                self.lines.append(f'{pad}  label={dot_quoted(label)}; style="dashed,rounded"; color="#8040c0";')
            else:
                self.lines.append(f'{pad}  label={dot_quoted(tree.name)}; style=rounded; color="#7a7a7a";')
            indent += 1
        keys = [_item_key(self.trace, c) for c in tree.children] if self.collapse else []
        runs = self.runs(keys) if self.collapse else [Run(k, 1, 1) for k in range(len(tree.children))]
        for run in runs:
            block = tree.children[run.start : run.start + run.length]
            if run.count > 1:
                self.clusters += 1
                pad2 = "  " * indent
                self.lines.append(f"{pad2}subgraph cluster_s{self.clusters} {{")
                self.lines.append(f'{pad2}  label="repeated {run.count}x"; style="dashed,rounded"; color="#3060c0";')
                first = [r for item in block for r in _records_under(item)]
                for rep in range(1, run.count):
                    later = tree.children[run.start + rep * run.length : run.start + (rep + 1) * run.length]
                    for a, b in zip(first, [r for item in later for r in _records_under(item)]):
                        self.repeats[b] = a
                        self._stands_for(a).extend(self.stands_for.pop(b, None) or [self.trace.records[b].scalars])
            for item in block:
                if isinstance(item, int):
                    self.emit_record(item, indent + (run.count > 1))
                else:
                    self.emit_tree(item, indent + (run.count > 1))
            if run.count > 1:
                self.lines.append("  " * indent + "}")
        if boxed:
            self.lines.append("  " * (indent - 1) + "}")

    def emit_record(self, i: int, indent: int) -> None:
        if self.drawn >= self.max_records:
            self.hidden.append(i)
            return
        self.drawn += 1
        self.rep.setdefault(i, i)
        varying = varying_scalars(self.stands_for[i]) if i in self.stands_for else {}
        node = _record_node(f"r{i}", self.trace.records[i], self.status.get(i, ""), self.flow.accesses_of(i), varying)
        self.lines.append("  " * indent + node)

    def _stands_for(self, i: int) -> list[tuple]:
        """The scalars of the records that record ``i`` is drawn for (itself, its repetitions, theirs: a block
        repeated inside a repeated block), filled as the repetitions are found, outer blocks first."""
        found = self.stands_for.get(i)
        if found is None:
            found = self.stands_for[i] = [self.trace.records[i].scalars]
        return found


def varying_scalars(per_repetition: Sequence[tuple]) -> dict:
    """The scalars of one record drawn for a repeated block (one ``scalars`` tuple per repetition) that take more
    than one value: key -> what the node shows instead of the first value (``0.0 .. 0.39 (40 values)``), so a
    block collapsed with a time-varying argument does not show the first repetition's value as everyone's."""
    values: dict = {}
    for scalars in per_repetition:
        for key, value in scalars:
            values.setdefault(key, {}).setdefault(repr(value), value)
    out = {}
    for key, distinct in values.items():
        if len(distinct) < 2:
            continue
        nums = [v for v in distinct.values() if isinstance(v, (int, float)) and not isinstance(v, bool)]
        if len(nums) == len(distinct) and all(v == v for v in nums):  # numbers, no NaN: a range
            out[key] = f"{min(nums)!r} .. {max(nums)!r} ({len(distinct)} values)"
        else:
            out[key] = f"varies ({len(distinct)} values)"
    return out


def _record_node(node_id: str, rec: LaunchRecord, status: str, accesses, varying: Mapping | None = None) -> str:
    color = STATUS_COLORS.get(status, STATUS_COLORS[""])
    rows = [
        f'<TR><TD COLSPAN="2" BGCOLOR="{color}"><B>{dot_html(kernel_title(rec.kernel, rec.adjoint))}</B></TD></TR>',
        f'<TR><TD COLSPAN="2">{dot_html(str(rec.op))} dim={dot_html(tuple(rec.dim))}'
        + (f" [{dot_html(status)}]" if status else "")
        + "</TD></TR>",
    ]
    if rec.op == "graph_launch" and rec.graph_id is not None:
        rows.append(f'<TR><TD COLSPAN="2">replays graph {dot_html(rec.graph_id)}</TD></TR>')
    elif rec.captured:
        rows.append('<TR><TD COLSPAN="2">captured, not run here</TD></TR>')
    for j, acc in enumerate(accesses):
        rows.append(
            f'<TR><TD PORT="i{j}" ALIGN="LEFT">{dot_html(acc.name)}</TD>'
            f'<TD PORT="o{j}" ALIGN="LEFT">{dot_html(acc.region.label)} ({acc.mode})</TD></TR>'
        )
    for key, value in rec.scalars[:_MAX_SCALARS]:
        rows.append(
            f'<TR><TD ALIGN="LEFT">{dot_html(rec.arg_name(key))}</TD>'
            f'<TD ALIGN="LEFT">{dot_html(varying[key] if varying and key in varying else repr(value))}</TD></TR>'
        )
    if len(rec.scalars) > _MAX_SCALARS:
        rows.append(f'<TR><TD COLSPAN="2">+{len(rec.scalars) - _MAX_SCALARS} more</TD></TR>')
    table = '<TABLE BORDER="0" CELLBORDER="1" CELLSPACING="0" CELLPADDING="3">' + "".join(rows) + "</TABLE>"
    return f"{node_id} [label=<{table}>, tooltip={dot_quoted(rec.site)}];"


def _port(flow: Dataflow, i: int, label: str, want: str) -> str:
    for j, acc in enumerate(flow.accesses_of(i)):
        if acc.region.label == label and want in acc.mode:
            return str(j)
    return "0"


def _edges(em: _Emitter, flow: Dataflow) -> list[str]:
    out: list[str] = []
    seen: set[tuple] = set()
    written = {a.region.label for a in flow.accesses if a.writes}
    read_from_trace: set[tuple[int, str]] = set()
    for e in flow.edges:
        if e.kind != EdgeKind.RAW:
            continue
        read_from_trace.add((e.dst, e.buffer))
        if e.src not in em.rep or e.dst not in em.rep:
            continue  # past the size cap: in the index node
        src, dst = em.rep[e.src], em.rep[e.dst]
        if src == dst:
            continue
        sp, dp = _port(flow, e.src, e.buffer, "w"), _port(flow, e.dst, e.buffer, "r")
        key = (src, sp, dst, dp)
        if key in seen:
            continue
        seen.add(key)
        attrs = f"tooltip={dot_quoted(e.buffer)}"
        if src > dst:  # carried from one repetition to the next
            attrs += ', style=dashed, constraint=false, color="#3060c0"'
        out.append(f"  r{src}:o{sp}:e -> r{dst}:i{dp}:w [{attrs}];")
    buffers: dict[tuple[str, str], str] = {}

    def buffer_node(label: str, side: str) -> str:
        if (label, side) not in buffers:
            node_id = buffers[(label, side)] = f"b{side}{len(buffers)}"
            fill = "#d0e4ff" if label in written else "#eeeeee"
            out.append(f'  {node_id} [label={dot_quoted(label)}, shape=ellipse, style=filled, fillcolor="{fill}"];')
        return buffers[(label, side)]

    last_writer: dict[str, tuple[int, str]] = {}
    for i in range(len(flow.records)):
        if i not in em.rep:
            continue
        for j, acc in enumerate(flow.accesses_of(i)):
            label = acc.region.label
            from_outside = acc.reads and (i, label) not in read_from_trace and em.rep.get(i, i) == i
            if from_outside and not (em.hide_readonly and label not in written) and ("in", label, i, j) not in seen:
                seen.add(("in", label, i, j))
                out.append(f"  {buffer_node(label, 'i')} -> r{i}:i{j}:w;")
            if acc.writes:
                last_writer[label] = (em.rep.get(i, i), _port(flow, i, label, "w"))
    for label, (i, port) in last_writer.items():
        out.append(f"  r{i}:o{port}:e -> {buffer_node(label, 'o')};")
    for h in flow.hazards:
        if h.edge.src not in em.rep or h.edge.dst not in em.rep:
            continue
        src, dst = em.rep[h.edge.src], em.rep[h.edge.dst]
        out.append(
            f"  r{src} -> r{dst} [color=red, style=dashed, penwidth=2, constraint=false, "
            f"label={dot_quoted('hazard ' + str(h.edge.kind))}, tooltip={dot_quoted(h.reason)}];"
        )
    return out


def _index_node(trace: TraceData, hidden: Sequence[int], cap: int) -> list[str]:
    """The records past the size cap, by kernel and count, as one note (nothing when all were drawn)."""
    if not hidden:
        return []
    counts: dict[str, int] = {}
    for i in hidden:
        rec = trace.records[i]
        name = kernel_title(rec.kernel, rec.adjoint)
        counts[name] = counts.get(name, 0) + max(1, rec.repeat)
    ranked = sorted(counts.items(), key=lambda kv: -kv[1])
    rows = [f'<TR><TD ALIGN="LEFT"><B>{len(hidden)} more records not drawn (cap: {cap} nodes)</B></TD></TR>']
    rows += [f'<TR><TD ALIGN="LEFT">{dot_html(name)} x{n}</TD></TR>' for name, n in ranked[:_INDEX_ROWS]]
    if len(ranked) > _INDEX_ROWS:
        rows.append(f'<TR><TD ALIGN="LEFT">and {len(ranked) - _INDEX_ROWS} more kernels</TD></TR>')
    table = '<TABLE BORDER="1" CELLBORDER="0" CELLSPACING="0" CELLPADDING="3" BGCOLOR="#fff8d0">' + "".join(rows)
    return [f"  index [label=<{table}</TABLE>>];"]


def render_dot(
    trace: TraceData,
    flow: Dataflow,
    *,
    hide_readonly: bool = False,
    collapse_repeats: bool = True,
    status: Mapping[int, str] | None = None,
    removed: Sequence[LaunchRecord] = (),
    direction: str = "LR",
    runs: Callable[[Sequence[Hashable]], list[Run]] = find_runs,
    title: str = "",
    max_records: int = MAX_RECORDS,
) -> str:
    """The DOT text of ``trace``'s dataflow ``flow`` (see the module docstring).

    ``status`` maps a record index to ``"added"`` or ``"changed"``; ``removed`` are records (of the other
    side of a diff) drawn apart in red; ``title`` labels the picture (e.g. "step: 60 occurrences").

    Example::

        text = render_dot(trace, build_dataflow(trace))
        open("graph.dot", "w").write(text)
    """
    if direction not in ("LR", "TB", "RL", "BT"):
        raise ValueError(f"direction must be LR, TB, RL or BT, got {direction!r}")
    em = _Emitter(trace, flow, hide_readonly, status or {}, collapse_repeats, runs, max(1, max_records))
    em.emit_tree(_build_tree(trace), 1)
    for later, first in em.repeats.items():  # repetitions of a drawn block are drawn by it
        if first in em.rep:
            em.rep[later] = em.rep[first]
    em.hidden = [i for i in em.hidden if i not in em.rep]
    lines = [
        'digraph "launchtrace" {',
        f'  graph [rankdir={direction}, fontname="Helvetica,Arial,sans-serif", tooltip=" "'
        + f', size="{MAX_INCHES},{MAX_INCHES}"'
        + (f", label={dot_quoted(title)}, labelloc=t, fontsize=18" if title else "")
        + "];",
        '  node [shape=plaintext, fontname="Helvetica,Arial,sans-serif", tooltip=" "];',
        '  edge [fontname="Helvetica,Arial,sans-serif", tooltip=" "];',
        *em.lines,
        *_edges(em, flow),
        *_index_node(trace, em.hidden, max_records),
    ]
    if removed:
        lines.append('  subgraph cluster_removed {\n    label="removed"; color=red; style=dashed;')
        for k, rec in enumerate(removed):
            lines.append("    " + _record_node(f"x{k}", rec, "removed", ()))
        lines.append("  }")
    lines.append("}")
    return "\n".join(lines) + "\n"
