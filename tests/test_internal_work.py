"""The device work Warp issues itself is exported by default: real CPU kernels, the real pipeline and file sink.

``Tape.backward``'s adjoint launches, the launches inside ``warp.sparse`` and ``warp.fem``, the fills of
``wp.zeros`` and ``Tape.zero`` are issued by code inside the warp package (``LaunchRecord.internal``). They are
device work like any other: hiding them hid a whole backward pass from the trace. Here each program runs with
the exporter's default settings and every check has an oracle outside the exporter: Warp's own launch log
(``print_launches``: one line per ``wp.launch``, adjoints included) for "each launch exactly once", and a
second subscription to the capture bus for the fills, copies and primitives that log does not show.

The analyzers read these records as they read the user's: they count in a scope's topology
(``check-static``, ``diff``) and in ``summary``.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
import warp as wp
from warp import fem, sparse

import launchtrace
import launchtrace.capture as capture
import launchtrace.export as export
from launchtrace import conventions as C
from launchtrace import topology
from launchtrace.capture import bus
from launchtrace.cli import main
from launchtrace.export.config import ExportConfig
from launchtrace.sources.files import read_spans
from launchtrace.sources.rebuild import rebuild
from warp_programs import LaunchLog, scale, square_sum, warp_key

N = 8
STEPS = 4


@pytest.fixture(autouse=True)
def _default_settings(monkeypatch, warp_cpu):
    """The exporter as a user gets it: no ``LAUNCHTRACE_*`` setting from the environment."""
    monkeypatch.delenv("LAUNCHTRACE_INCLUDE_INTERNAL", raising=False)
    assert ExportConfig.resolve(file_path="x").include_internal is False
    yield
    export.stop_export(20)
    capture.uninstrument()


class Exported:
    """What one exported run left: the spans read back from the file, the records a second bus subscription
    saw, and the kernels Warp's own launch log printed."""

    spans: list
    records: list
    logged: list[str]

    def op_spans(self) -> list:
        """The record spans (not scopes), in issue order."""
        return sorted((s for s in self.spans if s.attribute(C.OP)), key=lambda s: s.attribute(C.SEQ))

    def scope(self, name: str):
        (span,) = [s for s in self.spans if s.name == name and s.attribute(C.SCOPE_KIND)]
        return span


@contextlib.contextmanager
def exporting(path: Path) -> Iterator[Exported]:
    """Export the block to ``path`` with the default settings, under Warp's launch log and a bus subscription."""
    out = Exported()
    log = LaunchLog()
    export.start_export(file_path=str(path), truncate=True)
    sub = bus.subscribe(thread=threading.get_ident())
    wp.set_logger(log)
    wp.config.print_launches = True
    try:
        yield out
    finally:
        wp.config.print_launches = False
        wp.set_logger(None)
        sub.close()
        final = export.stop_export(20)
        capture.uninstrument()
    assert final.dropped == 0 and sub.dropped == 0
    read = read_spans(path)
    assert not read.problems
    out.spans = read.spans
    out.records = [item for kind, item in sub.drain() if kind == "record"]
    out.logged = log.kernels


def check_each_record_once(run: Exported) -> None:
    """Every record the bus saw is exported once (by seq), and the launches are exactly Warp's log lines."""
    ops = run.op_spans()
    assert [s.attribute(C.SEQ) for s in ops] == [r.seq for r in run.records]
    launches = [s for s in ops if s.attribute(C.OP) == "launch"]
    names = [s.name.removesuffix(C.ADJOINT_SUFFIX) for s in launches]
    assert len(names) == len(run.logged), (names, run.logged)
    assert all(warp_key(n).endswith(f"__{k}") for n, k in zip(names, run.logged)), (names, run.logged)
    assert all(s.name.endswith(C.ADJOINT_SUFFIX) == bool(s.attribute(C.ADJOINT)) for s in launches)
    for span, rec in zip(ops, run.records):
        assert span.name == C.kernel_title(rec.kernel, rec.adjoint) and bool(span.attribute(C.INTERNAL)) == rec.internal


# -- Tape.backward -------------------------------------------------------------------------------------------


def test_tape_backward_exports_each_adjoint_launch_once_under_the_users_scope_and_line(tmp_path: Path) -> None:
    x = wp.array(np.arange(N, dtype=np.float32), dtype=float, device="cpu", requires_grad=True)
    y = wp.zeros(N, dtype=float, device="cpu", requires_grad=True)
    loss = wp.zeros(1, dtype=float, device="cpu", requires_grad=True)
    wp.launch(scale, dim=N, inputs=[x, y, 2.0], device="cpu")  # compile outside the export
    wp.launch(square_sum, dim=N, inputs=[y, loss], device="cpu")
    loss.zero_()
    with exporting(tmp_path / "tape.jsonl") as run:
        with launchtrace.scope("train"):
            tape = wp.Tape()
            with tape:
                wp.launch(scale, dim=N, inputs=[x, y, 2.0], device="cpu")
                wp.launch(square_sum, dim=N, inputs=[y, loss], device="cpu")
            backward_line = sys._getframe().f_lineno + 1
            tape.backward(loss)
    # the program's result: d/dx sum((2x)^2) = 8x
    np.testing.assert_allclose(x.grad.numpy(), 8 * np.arange(N, dtype=np.float32))
    check_each_record_once(run)
    assert run.logged == ["scale", "square_sum", "square_sum", "scale"]  # forward, then the adjoints reversed
    ops = run.op_spans()
    adjoint = [s for s in ops if s.attribute(C.ADJOINT)]
    assert [s.name.rsplit(".", 1)[1] for s in adjoint] == ["square_sum (adjoint)", "scale (adjoint)"]
    assert all(s.attribute(C.INTERNAL) is True for s in adjoint)
    forward = [s for s in ops if not s.attribute(C.INTERNAL)]
    assert [s.name.rsplit(".", 1)[1] for s in forward] == ["scale", "square_sum"]
    seed = [s for s in ops if s.attribute(C.INTERNAL) and not s.attribute(C.ADJOINT)]
    assert [s.attribute(C.OP) for s in seed] == ["fill"]  # backward seeds loss.grad with 1
    train = run.scope("train")
    for span in ops:
        assert span.parent_span_id == train.span_id and span.trace_id == train.trace_id
    for span in adjoint + seed:  # sited at the user's backward call, not inside Warp
        assert span.attribute(C.CODE_FILE_PATH) == __file__
        assert span.attribute(C.CODE_LINE_NUMBER) == backward_line
        assert span.attribute(C.CODE_FUNCTION_NAME) == f"{__name__}.{sys._getframe().f_code.co_name}"
    assert train.attribute(C.SCOPE_LAUNCHES) == len(ops)
    rebuilt = rebuild(run.spans).records()
    assert [(r.seq, r.adjoint, r.internal) for r in rebuilt] == [(r.seq, r.adjoint, r.internal) for r in run.records]
    assert train.attribute(C.SCOPE_FINGERPRINT) == topology.fingerprint(rebuilt)


# -- warp.sparse and warp.fem ---------------------------------------------------------------------------------


@fem.integrand
def _mass_form(s: fem.Sample, u: fem.Field, v: fem.Field):
    return u(s) * v(s)


def sparse_program() -> Callable[[], np.ndarray]:
    """A matrix from triplets times a vector: a fill, a native primitive and two launches inside warp.sparse."""
    rows = wp.array(np.array([0, 1, 2, 3, 0], dtype=np.int32), device="cpu")
    cols = wp.array(np.array([0, 1, 2, 3, 3], dtype=np.int32), device="cpu")
    vals = wp.array(np.array([1, 2, 3, 4, 5], dtype=np.float32), device="cpu")
    x = wp.array(np.ones(4, dtype=np.float32), device="cpu")
    y = wp.zeros(4, dtype=float, device="cpu")

    def run() -> np.ndarray:
        matrix = sparse.bsr_from_triplets(4, 4, rows, cols, vals)
        sparse.bsr_mv(matrix, x, y)
        return y.numpy().copy()

    return run


def fem_program() -> Callable[[], np.ndarray]:
    """A mass matrix over a 4x4 grid: warp.fem's integration kernels, scans and the BSR assembly."""
    geo = fem.Grid2D(res=wp.vec2i(4))
    space = fem.make_polynomial_space(geo, degree=1)
    domain = fem.Cells(geo)
    test = fem.make_test(space, domain=domain)
    trial = fem.make_trial(space, domain=domain)

    def run() -> np.ndarray:
        matrix = fem.integrate(_mass_form, fields={"u": trial, "v": test})
        nnz = int(matrix.offsets.numpy()[matrix.nrow])  # the blocks in use (``nnz`` is an upper bound here)
        return np.concatenate([matrix.columns.numpy()[:nnz], matrix.values.numpy()[:nnz]])

    return run


@pytest.mark.parametrize("make", [sparse_program, fem_program], ids=["sparse", "fem"])
def test_warp_library_launches_are_exported_once_each_under_the_users_scope(make, tmp_path: Path) -> None:
    program = make()
    expected = program()  # compiles, and gives the result of a run without export
    with exporting(tmp_path / "lib.jsonl") as run:
        with launchtrace.scope("solve"):
            result = program()
    np.testing.assert_array_equal(result, expected)
    check_each_record_once(run)
    ops = run.op_spans()
    assert any(s.attribute(C.OP) == "launch" for s in ops)
    assert all(s.attribute(C.INTERNAL) is True for s in ops)  # the user's code called no wp.launch itself
    solve = run.scope("solve")
    assert all(s.parent_span_id == solve.span_id and s.trace_id == solve.trace_id for s in ops)
    assert solve.attribute(C.SCOPE_LAUNCHES) == len(ops)
    # sited at the user's lines that called into the library (the body of ``run``), not inside Warp
    body, first = inspect.getsourcelines(program)
    assert {(s.attribute(C.CODE_FILE_PATH), s.attribute(C.CODE_FUNCTION_NAME)) for s in ops} == {
        (__file__, f"{__name__}.run")
    }
    assert all(first < s.attribute(C.CODE_LINE_NUMBER) < first + len(body) for s in ops)


# -- what the analyzers make of them -----------------------------------------------------------------------------


def train(x: wp.array, y: wp.array, loss: wp.array, backward: Callable[[int], bool]) -> None:
    """``STEPS`` scoped training steps; ``backward(i)`` says whether step ``i`` runs the backward pass."""
    for i in range(STEPS):
        with launchtrace.scope("step", i=i):
            loss.zero_()
            tape = wp.Tape()
            with tape:
                wp.launch(scale, dim=N, inputs=[x, y, 2.0], device="cpu")
                wp.launch(square_sum, dim=N, inputs=[y, loss], device="cpu")
            if backward(i):
                tape.backward(loss)
            tape.zero()


def by_scope(records: list) -> list[list]:
    """Records grouped by their scope, in order (one group per step)."""
    groups: dict[int, list] = {}
    for r in records:
        groups.setdefault(r.scope_id, []).append(r)
    return list(groups.values())


def test_analyzers_count_internal_records_in_topology_and_summary(tmp_path: Path, capsys) -> None:
    x = wp.array(np.arange(N, dtype=np.float32), dtype=float, device="cpu", requires_grad=True)
    y = wp.zeros(N, dtype=float, device="cpu", requires_grad=True)
    loss = wp.zeros(1, dtype=float, device="cpu", requires_grad=True)
    train(x, y, loss, lambda i: True)  # compile outside the exports
    runs: dict[str, Exported] = {}
    schedules = {"forward": lambda i: False, "train": lambda i: True, "mixed": lambda i: i % 2 == 1}
    for name, backward in schedules.items():
        with exporting(tmp_path / f"{name}.jsonl") as runs[name]:
            train(x, y, loss, backward)
        check_each_record_once(runs[name])
    path = {name: str(tmp_path / f"{name}.jsonl") for name in runs}

    steps = by_scope(runs["train"].records)
    assert len(steps) == STEPS
    backward_work = [(i, r.kernel) for i, r in enumerate(steps[0]) if r.internal]
    assert any(r.adjoint for r in steps[0]) and all(r.internal for r in steps[0] if r.adjoint)
    assert all([(i, r.kernel) for i, r in enumerate(s) if r.internal] == backward_work for s in steps)

    # the scope's own summary: every record under it, internal ones included, in its topology fingerprint
    step_spans = {
        name: sorted((s for s in run.spans if s.name == "step"), key=lambda s: s.attribute(C.SEQ))
        for name, run in runs.items()
    }
    assert [s.attribute(C.SCOPE_LAUNCHES) for s in step_spans["train"]] == [len(s) for s in steps]
    prints = {name: {s.attribute(C.SCOPE_FINGERPRINT) for s in spans} for name, spans in step_spans.items()}
    assert len(prints["train"]) == len(prints["forward"]) == 1 and prints["train"] != prints["forward"]
    assert prints["mixed"] == prints["train"] | prints["forward"]

    # check-static: a backward pass every step is static; one every other step is not, at its internal records
    assert main(["check-static", path["train"], "--scope", "step", "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["occurrences"], report["static"], report["findings"]) == (STEPS, True, [])
    assert main(["check-static", path["mixed"], "--scope", "step", "--format", "json"]) == 1
    findings = json.loads(capsys.readouterr().out)["findings"]
    assert [(f["position"], f["kernel"]) for f in findings] == backward_work
    assert {(f["reason"], f["occurrences"]) for f in findings} == {("varying launches", STEPS // 2)}

    # diff: forward-only against training inserts exactly the backward pass's records in every step
    assert main(["diff", path["forward"], path["train"], "--scope", "step", "--format", "json"]) == 1
    diff = json.loads(capsys.readouterr().out)
    assert diff["counts"] == {"inserted": STEPS * len(backward_work), "removed": 0, "changed": 0, "moved": 0}
    for segment in diff["segments"]:
        assert [(e["kind"], e["index_b"], e["kernel"]) for e in segment["entries"]] == [
            ("inserted", i, kernel) for i, kernel in backward_work
        ]

    # summary: per kernel, the adjoint launches (rows of their own) and Warp's fills count with the user's
    assert main(["summary", path["train"], "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)["kernels"]
    counts = {(row["kernel"], row["op"]): row["count"] for row in rows}
    assert counts == Counter((C.kernel_title(r.kernel, r.adjoint), str(r.op)) for r in runs["train"].records)
    assert any(kernel.endswith(C.ADJOINT_SUFFIX) for kernel, _ in counts)
    launches: Counter = Counter()
    for (kernel, op), n in counts.items():
        if op == "launch":
            launches[kernel.removesuffix(C.ADJOINT_SUFFIX).rsplit(".", 1)[1]] += n
    assert launches == Counter(runs["train"].logged)  # forward and adjoint, as Warp's log counts them
