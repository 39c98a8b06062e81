"""check-static on a real tinygrad jitted training step (CPU): the jit's eager first call is skipped as warm-up
and said, the inputs it swaps in on every call are reported as jit inputs (by design), not as per-call
allocations, and the scope is static."""

# ruff: noqa: E402  (tinygrad reads its environment at import: tp.configure_env() runs before the imports below)
from __future__ import annotations

import pytest

import tinygrad_programs as tp

tp.configure_env("CPU")
tinygrad = pytest.importorskip("tinygrad")

import numpy as np
from tinygrad import Tensor

import launchtrace
from launchtrace.analysis.static import Reason, check_static
from launchtrace.testing import trace_launches


@pytest.fixture
def instrumented():
    newly = launchtrace.instrument()
    yield
    if newly:
        launchtrace.uninstrument()


def test_a_jitted_step_with_fresh_inputs_is_static_after_its_warm_up(instrumented) -> None:
    _model, _opt, step = tp.make_training(seed=3)
    rng = np.random.default_rng(0)
    with trace_launches() as trace:
        for _ in range(6):
            x = Tensor(rng.standard_normal((4, 8)).astype(np.float32)).realize()
            y = Tensor(rng.integers(0, 4, 4).astype(np.int32)).realize()
            with launchtrace.scope("step"):
                step(x, y).numpy()
    report = check_static([trace.to_data()], "step")
    assert report.static and report.occurrences == 6 and report.warmup == 1, report.findings
    assert report.notes[0].startswith("skipped the first 1 occurrence as warm-up (a tinygrad JIT's eager first call;")
    assert report.findings and {f.reason for f in report.findings} == {Reason.JIT_INPUT}
    assert not any(f.breaks for f in report.findings)
    assert {f.name for f in report.findings} <= {"data1", "data2", "data4"}
