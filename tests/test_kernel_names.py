"""Kernel names read as the code was written: a kernel made inside a function is named by the function's dotted
name, not Warp's mangled key, and each instance a ``module="unique"`` factory makes keeps its own name."""

from __future__ import annotations

import re

import warp as wp

from launchtrace.testing import trace_launches


@wp.kernel
def plain(x: wp.array(dtype=float)):
    x[wp.tid()] = 1.0


@wp.kernel(module="unique")
def top_unique(x: wp.array(dtype=float)):
    x[wp.tid()] = 2.0


def make_axpy(k: float):
    @wp.kernel(module="unique")
    def axpy(x: wp.array(dtype=float)):
        x[wp.tid()] = x[wp.tid()] + wp.float32(k)

    return axpy


def make_nested():
    @wp.kernel
    def inner(x: wp.array(dtype=float)):
        x[wp.tid()] = 3.0

    return inner


def test_kernels_are_named_as_written_and_factory_instances_apart() -> None:
    x = wp.zeros(4, dtype=float, device="cpu")
    kernels = [plain, top_unique, make_axpy(1.0), make_axpy(2.0), make_nested()]
    with trace_launches() as trace:
        for k in kernels:
            wp.launch(k, dim=4, inputs=[x], device="cpu")
    names = [r.kernel for r in trace.records]
    mod = __name__
    assert names[0] == f"{mod}.plain"
    assert re.fullmatch(rf"{mod}\.top_unique#[0-9a-f]{{8}}", names[1]), names[1]
    for name in names[2:4]:
        assert re.fullmatch(rf"{mod}\.make_axpy\.<locals>\.axpy#[0-9a-f]{{8}}", name), name
    assert names[2] != names[3]  # two instances (k=1, k=2): two kernels
    assert names[4] == f"{mod}.make_nested.<locals>.inner"
    assert not any("__locals__" in n for n in names)
    assert make_axpy(1.0).module.name.endswith(names[2].rsplit("#", 1)[1])  # Warp's own hash, stable for equal code


def make_scaler(factor: float):
    @wp.kernel
    def scale_k(x: wp.array(dtype=float)):
        x[wp.tid()] = x[wp.tid()] * factor

    return scale_k


def test_closure_instances_in_one_module_keep_names_of_their_own() -> None:
    """``make_scaler(0.5)`` and ``make_scaler(2.0)`` (no ``module="unique"``) are two kernels of one module under
    one key: they were one name, so a changed factor diffed as equal. Each carries Warp's kernel hash; equal
    code and values give the same name; a launch that raised before the module was built gets it too."""
    x = wp.zeros(4, dtype=float, device="cpu")
    fresh = make_scaler(7.0)
    kernels = (make_scaler(0.5), make_scaler(2.0), make_scaler(0.5), fresh)
    with trace_launches() as trace:
        try:
            wp.launch(fresh, dim=4, inputs=[x, x], device="cpu")  # raises before the module is built
        except RuntimeError:
            pass
        for k in kernels:
            wp.launch(k, dim=4, inputs=[x], device="cpu")
    names = [r.kernel for r in trace.records]
    pattern = rf"{__name__}\.make_scaler\.<locals>\.scale_k#[0-9a-f]{{8}}"
    assert all(re.fullmatch(pattern, n) for n in names[1:]), names
    assert names[1] != names[2] and names[1] == names[3] and names[4] not in names[1:4]
    assert names[0] == names[4] and trace.records[0].error  # named once its module is built (read after the run)
    assert names[2].endswith("#" + kernels[1].get_mangled_name().rsplit("_", 1)[1])  # Warp's own hash
