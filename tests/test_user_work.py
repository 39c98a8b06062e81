"""User work is user work: every public Warp entry point called from user code, through the real exporter.

Each call below is one of Warp 1.19's public device-work entry points, called from this file; several are
implemented by Warp through another patched one (``wp.launch_tiled`` calls ``wp.launch``, ``array.assign``
calls ``wp.copy``, an indexed array's ``zero_`` calls its ``fill_``). Each must come out as exactly one record,
not ``internal``, sited at this file's line (found by its ``# entry:`` tag, not written down twice), in the
exported span and in ``trace_launches()``. Work Warp's own code issues without such a call (``wp.zeros``'
fill, ``wp.clone``'s copy, ``Tape.backward``) stays ``internal``. Run through the compiled launch wrapper and
the Python one (``LAUNCHTRACE_PURE_PYTHON=1``), which must agree.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import warp as wp

import launchtrace.capture as capture
import launchtrace.export as export
from launchtrace import conventions as C
from launchtrace.sources.files import read_spans
from launchtrace.testing import trace_launches

N = 8
HERE = Path(__file__).resolve()


@wp.kernel
def double(a: wp.array(dtype=float), b: wp.array(dtype=float)):
    i = wp.tid()
    b[i] = a[i] * 2.0


@wp.kernel
def tiled(a: wp.array(dtype=float), b: wp.array(dtype=float)):
    i, _j = wp.tid()
    b[i] = a[i] + 1.0


def _entry_lines() -> dict[str, int]:
    """``{tag: line}`` of the ``# entry: <tag>`` comments in this file."""
    lines = {}
    for number, text in enumerate(HERE.read_text().splitlines(), start=1):
        found = re.search(r"# entry: (\S+)$", text)
        if found and "re.search" not in text:
            lines[found.group(1)] = number
    return lines


# (tag, op, kernel, api) of each public entry point, in the order user_program calls them
EXPECTED = [
    ("launch", "launch", f"{__name__}.double", "wp.launch"),
    ("launch_tiled", "launch", f"{__name__}.tiled", "wp.launch_tiled"),
    ("Launch.launch", "launch", f"{__name__}.double", "wp.Launch.launch"),
    ("copy", "copy", "wp.copy", "wp.copy"),
    ("assign", "copy", "wp.array.assign", "wp.array.assign"),
    ("fill_", "fill", "wp.fill", "wp.array.fill_"),
    ("zero_", "fill", "wp.zero", "wp.array.zero_"),
    ("indexed.fill_", "fill", "wp.fill", "wp.array.fill_"),
    ("indexed.zero_", "fill", "wp.zero", "wp.array.zero_"),
    ("indexed.assign", "copy", "wp.array.assign", "wp.array.assign"),
    ("array_sum", "primitive", "warp.utils.array_sum", "warp.utils.array_sum"),
    ("array_inner", "primitive", "warp.utils.array_inner", "warp.utils.array_inner"),
    ("array_scan", "primitive", "warp.utils.array_scan", "warp.utils.array_scan"),
    ("radix_sort_pairs", "primitive", "warp.utils.radix_sort_pairs", "warp.utils.radix_sort_pairs"),
    ("segmented_sort_pairs", "primitive", "warp.utils.segmented_sort_pairs", "warp.utils.segmented_sort_pairs"),
    ("runlength_encode", "primitive", "warp.utils.runlength_encode", "warp.utils.runlength_encode"),
    ("capture_launch", "graph_launch", "wp.capture_launch", "wp.capture_launch"),
]
# Warp's own work, between the entries: (tag, op, api)
INTERNAL = [("zeros", "fill", "wp.array.zero_"), ("clone", "copy", "wp.clone")]


class Arrays:
    def __init__(self) -> None:
        self.a = wp.array(np.arange(N, dtype=np.float32), dtype=float, device="cpu")
        self.b = wp.empty(N, dtype=float, device="cpu")
        self.s = wp.empty(1, dtype=float, device="cpu")
        self.keys = wp.array(np.array([3, 1, 2, 0] * 4, dtype=np.int32), device="cpu")  # room for 2 * count
        self.values = wp.array(np.arange(16, dtype=np.int32), device="cpu")
        self.starts = wp.array(np.array([0, 4], dtype=np.int32), device="cpu")
        self.ends = wp.array(np.array([4, 8], dtype=np.int32), device="cpu")
        self.runs = wp.array(np.array([1, 1, 2, 2, 2, 3, 3, 3], dtype=np.int32), device="cpu")
        self.run_values = wp.empty(N, dtype=wp.int32, device="cpu")
        self.run_lengths = wp.empty(N, dtype=wp.int32, device="cpu")
        self.run_count = wp.empty(1, dtype=wp.int32, device="cpu")
        self.index = wp.array(np.array([1, 3], dtype=np.int32), device="cpu")
        self.pair = wp.array(np.array([4.0, 5.0], dtype=np.float32), dtype=float, device="cpu")
        wp.launch(double, dim=N, inputs=[self.a, self.b], device="cpu")  # compiled outside the traces
        wp.launch_tiled(tiled, dim=[N], inputs=[self.a, self.b], block_dim=1, device="cpu")
        with wp.ScopedCapture(device="cpu") as cap:
            wp.launch(double, dim=N, inputs=[self.a, self.b], device="cpu")
        self.graph = cap.graph


def user_program(x: Arrays) -> None:
    """Each public entry point once, from user code; two pieces of Warp's own work between them."""
    wp.launch(double, dim=N, inputs=[x.a, x.b], device="cpu")  # entry: launch
    wp.launch_tiled(tiled, dim=[N], inputs=[x.a, x.b], block_dim=1, device="cpu")  # entry: launch_tiled
    cmd = wp.launch(double, dim=N, inputs=[x.a, x.b], device="cpu", record_cmd=True)
    cmd.launch()  # entry: Launch.launch
    wp.copy(x.b, x.a)  # entry: copy
    x.b.assign(x.a)  # entry: assign
    x.b.fill_(3.0)  # entry: fill_
    x.b.zero_()  # entry: zero_
    indexed = wp.indexedarray(x.b, [x.index])
    indexed.fill_(5.0)  # entry: indexed.fill_
    indexed.zero_()  # entry: indexed.zero_
    indexed.assign(x.pair)  # entry: indexed.assign
    wp.zeros(N, dtype=float, device="cpu")  # internal: zeros
    wp.clone(x.a)  # internal: clone
    wp.utils.array_sum(x.a, out=x.s)  # entry: array_sum
    wp.utils.array_inner(x.a, x.a, out=x.s)  # entry: array_inner
    wp.utils.array_scan(x.a, x.b)  # entry: array_scan
    wp.utils.radix_sort_pairs(x.keys, x.values, N)  # entry: radix_sort_pairs
    wp.utils.segmented_sort_pairs(x.keys, x.values, N, x.starts, x.ends)  # entry: segmented_sort_pairs
    wp.utils.runlength_encode(x.runs, x.run_values, x.run_lengths, x.run_count)  # entry: runlength_encode
    wp.capture_launch(x.graph)  # entry: capture_launch


@pytest.fixture(params=["compiled", "python"])
def wrapper(request, monkeypatch, warp_cpu):
    """The launch wrapper the test runs through (chosen when Warp is instrumented)."""
    capture.uninstrument()
    if request.param == "python":
        monkeypatch.setenv("LAUNCHTRACE_PURE_PYTHON", "1")
    else:
        monkeypatch.delenv("LAUNCHTRACE_PURE_PYTHON", raising=False)
    yield request.param
    export.stop_export(20)
    capture.uninstrument()


def test_every_public_entry_point_is_user_work_in_spans_and_trace_launches(tmp_path: Path, wrapper: str) -> None:
    x = Arrays()
    path = tmp_path / "user.jsonl"
    export.start_export(file_path=str(path), truncate=True, fold=False)
    with trace_launches() as user, trace_launches(include_warp=True) as everything:
        user_program(x)
    assert export.stop_export(20).dropped == 0
    np.testing.assert_array_equal(x.b.numpy(), 2 * np.arange(N, dtype=np.float32))  # the replay ran `double`

    lines = _entry_lines()
    expected = [(op, kernel, api, lines[tag]) for tag, op, kernel, api in EXPECTED]
    # trace_launches(): each entry point once, in order, not internal, at the user's line
    assert [(r.op, r.kernel, r.api, r.site.line) for r in user] == expected
    assert all(not r.internal and r.site.file == str(HERE) for r in user)
    assert [r.site.function for r in user] == ["user_program"] * len(EXPECTED)
    # with Warp's own work: the same plus the two internal records, marked and sited at the user's line
    internal = [r for r in everything if r.internal]
    by_line = {line: tag for tag, line in _internal_lines().items()}
    assert [(by_line.get(r.site.line), r.op, r.api) for r in internal] == INTERNAL
    assert [r.seq for r in everything if not r.internal] == [r.seq for r in user]

    # the exported spans say the same
    read = read_spans(path)
    assert not read.problems
    spans = sorted((s for s in read.spans if s.attribute(C.OP)), key=lambda s: s.attribute(C.SEQ))
    assert [s.attribute(C.SEQ) for s in spans] == [r.seq for r in everything]
    got = [
        (s.attribute(C.OP), s.name, s.attribute(C.API), s.attribute(C.CODE_LINE_NUMBER))
        for s in spans
        if not s.attribute(C.INTERNAL)
    ]
    assert got == expected
    for span in spans:
        assert span.attribute(C.CODE_FILE_PATH) == str(HERE)
        assert span.attribute(C.CODE_FUNCTION_NAME) == f"{__name__}.user_program"
    assert [(s.attribute(C.OP), s.attribute(C.API)) for s in spans if s.attribute(C.INTERNAL)] == [
        (op, api) for _, op, api in INTERNAL
    ]


def _internal_lines() -> dict[str, int]:
    lines = {}
    for number, text in enumerate(HERE.read_text().splitlines(), start=1):
        found = re.search(r"# internal: (\S+)$", text)
        if found and "re.search" not in text:
            lines[found.group(1)] = number
    return lines


def launch_tiled(x: Arrays) -> None:
    """A user function that happens to share a Warp entry point's name."""
    wp.launch(double, dim=N, inputs=[x.a, x.b], device="cpu")


def test_a_user_function_named_like_an_entry_point_is_not_mistaken_for_it(wrapper: str) -> None:
    x = Arrays()
    with trace_launches() as trace:
        launch_tiled(x)
    (rec,) = trace
    assert (rec.api, rec.internal, rec.site.function) == ("wp.launch", False, "launch_tiled")


def test_entry_points_called_by_warp_itself_stay_internal(wrapper: str) -> None:
    """``Tape.backward`` seeds the gradient with a fill and copies through ``wp.copy``'s adjoint: Warp's own."""
    a = wp.array(np.arange(N, dtype=np.float32), dtype=float, device="cpu", requires_grad=True)
    b = wp.zeros(N, dtype=float, device="cpu", requires_grad=True)
    wp.launch(double, dim=N, inputs=[a, b], device="cpu")
    with trace_launches(include_warp=True) as trace:
        tape = wp.Tape()
        with tape:
            wp.launch(double, dim=N, inputs=[a, b], device="cpu")
        tape.backward(grads={b: wp.ones(N, dtype=float, device="cpu")})
        tape.zero()
    np.testing.assert_array_equal(a.grad.numpy(), np.zeros(N, dtype=np.float32))  # zeroed by tape.zero()
    user = [r for r in trace if not r.internal]
    assert [(r.op, r.api) for r in user] == [("launch", "wp.launch")]
    warp_own = [r for r in trace if r.internal]
    assert ("launch", "wp.Tape.backward") in [(r.op, r.api) for r in warp_own]
    assert any(r.op == "fill" for r in warp_own)  # wp.ones' fill, tape.zero()'s fills
    assert all(r.site.file == str(HERE) for r in trace)
