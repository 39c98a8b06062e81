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
