"""Capture under what Warp's own examples do that small tests miss, checked against Warp's own launch log.

Found by the examples sweep (``optim/example_diffray``): the adjoint launch of a kernel that takes a
``wp.struct`` holding arrays (``Tape.backward``) failed to materialise (its adjoint key ``adj:0.field``) and
was lost from the export. Here the same shape on the CPU: every launch Warp logs is exported, with the
struct's adjoint fields named by parameter. Capture marks ``Tape.backward``'s adjoint launches internal; the
exporter keeps internal records by default, so the export runs with its default settings.
"""

from __future__ import annotations

from pathlib import Path

import warp as wp

import launchtrace.capture as capture
import launchtrace.export as export
from launchtrace.sources.files import read_spans
from launchtrace.sources.rebuild import rebuild
from warp_programs import LaunchLog


@wp.struct
class Mesh:
    points: wp.array(dtype=float)
    scale: float


@wp.kernel
def weigh(mesh: Mesh, out: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(out, 0, mesh.points[i] * mesh.scale)


def test_adjoint_launch_of_a_struct_argument_kernel_is_exported(warp_cpu, tmp_path: Path) -> None:
    mesh = Mesh()
    mesh.points = wp.array([1.0, 2.0, 3.0], dtype=float, requires_grad=True, device="cpu")
    mesh.scale = 2.0
    out = wp.zeros(1, dtype=float, requires_grad=True, device="cpu")
    wp.launch(weigh, dim=3, inputs=[mesh, out], device="cpu")  # compile
    out.zero_()
    path = tmp_path / "tape.jsonl"
    log = LaunchLog()
    export.start_export(file_path=str(path), truncate=True, fold=False)
    wp.set_logger(log)
    wp.config.print_launches = True
    try:
        tape = wp.Tape()
        with tape:
            wp.launch(weigh, dim=3, inputs=[mesh, out], device="cpu")
        tape.backward(out)
    finally:
        wp.config.print_launches = False
        wp.set_logger(None)
        final = export.stop_export(20)
        capture.uninstrument()
    assert list(mesh.points.grad.numpy()) == [2.0, 2.0, 2.0]  # the program's result
    records = [r for r in rebuild(read_spans(path).spans).records() if r.op == "launch"]
    assert len(records) == len(log.kernels) == 2 and final.dropped == 0
    adjoint = [r for r in records if r.adjoint]
    assert len(adjoint) == 1
    names = {b.name or adjoint[0].arg_name(b.key) for b in adjoint[0].buffers}
    assert {"mesh.points", "adj_mesh.points", "out", "adj_out"} <= names, names
