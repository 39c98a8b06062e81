"""check-static on real Warp programs (CPU): each way a scope can vary is named in the seed's terms."""

from __future__ import annotations

import numpy as np
import warp as wp

import launchtrace
from launchtrace.analysis.static import Reason, check_static
from launchtrace.testing import trace_launches
from test_analysis_programs import DEVICE, N, Sim, add, run_program, scale

STEPS = 4


def _trace(body) -> object:
    sim = Sim()
    keep: list = []
    with trace_launches() as trace:
        for k in range(STEPS):
            with launchtrace.scope("step"):
                body(sim, k, keep)
    return trace.to_data()


def _reasons(report) -> set[tuple[Reason, str, bool]]:
    return {(f.reason, f.name, f.breaks) for f in report.findings}


def test_a_repeated_identical_step_is_static() -> None:
    report = check_static(run_program("base", STEPS), "step")
    assert (report.occurrences, report.static, report.findings) == (STEPS, True, ())


def test_varying_dims_and_scalars_are_named() -> None:
    def body(sim, k, keep):
        wp.launch(scale, dim=N, inputs=[sim.x, float(k)], outputs=[sim.tmp], device=DEVICE)
        wp.launch(add, dim=N - k, inputs=[sim.tmp, sim.v], outputs=[sim.out], device=DEVICE)

    report = check_static(_trace(body), "step")
    assert not report.static
    assert _reasons(report) == {(Reason.SCALARS, "s", True), (Reason.DIMS, "", True)}
    assert all(f.occurrences == STEPS - 1 for f in report.findings)
    dims = next(f for f in report.findings if f.reason == Reason.DIMS)
    assert dims.position == 1 and dims.example == "(64,) -> (63,)"


def test_a_buffer_allocated_per_call_is_named() -> None:
    def body(sim, k, keep):
        scratch = wp.zeros(N, dtype=float, device=DEVICE)
        keep.append(scratch)  # alive, so the next allocation cannot reuse its address
        wp.launch(scale, dim=N, inputs=[sim.x, 0.5], outputs=[scratch], device=DEVICE)

    report = check_static(_trace(body), "step")
    assert not report.static
    assert _reasons(report) == {(Reason.ALLOCATED, "y", True), (Reason.FOREIGN, "y", True)}


def test_ping_pong_between_owned_buffers_is_varying_buffers() -> None:
    def body(sim, k, keep):
        src, dst = (sim.x, sim.alt) if k % 2 == 0 else (sim.alt, sim.x)
        wp.launch(scale, dim=N, inputs=[src, 0.5], outputs=[dst], device=DEVICE)

    report = check_static(_trace(body), "step")
    assert _reasons(report) == {(Reason.BUFFERS, "x", True), (Reason.BUFFERS, "y", True)}


def test_a_stable_foreign_buffer_is_only_a_warning() -> None:
    shared = wp.array(np.ones(N, dtype=np.float32), dtype=float, device=DEVICE)  # nobody owns it

    def body(sim, k, keep):
        wp.launch(add, dim=N, inputs=[sim.x, shared], outputs=[sim.out], device=DEVICE)

    report = check_static(_trace(body), "step")
    assert report.static
    assert _reasons(report) == {(Reason.FOREIGN, "b", False)}
    assert report.findings[0].occurrences == STEPS


def test_a_launch_issued_only_sometimes_is_varying_launches() -> None:
    def body(sim, k, keep):
        wp.launch(scale, dim=N, inputs=[sim.x, 0.5], outputs=[sim.tmp], device=DEVICE)
        if k == 2:
            wp.launch(add, dim=N, inputs=[sim.tmp, sim.v], outputs=[sim.out], device=DEVICE)

    report = check_static(_trace(body), "step")
    assert _reasons(report) == {(Reason.LAUNCHES, "", True)}
    assert report.findings[0].example.startswith("inserted ") and report.findings[0].occurrences == 1


def test_a_missing_scope_has_no_occurrences() -> None:
    report = check_static(run_program("base", 2), "nope")
    assert (report.occurrences, report.static) == (0, False)


def test_leading_occurrences_unlike_all_the_rest_are_skipped_as_warm_up_and_said() -> None:
    """The first step also initialises (one more launch): skipped as warm-up, named, and the scope is static;
    a scope that never settles skips nothing."""

    def body(sim, k, keep):
        if k == 0:
            wp.launch(scale, dim=N, inputs=[sim.v, 0.0], outputs=[sim.alt], device=DEVICE)
        wp.launch(add, dim=N, inputs=[sim.x, sim.v], outputs=[sim.out], device=DEVICE)

    report = check_static(_trace(body), "step")
    assert (report.static, report.warmup, report.findings) == (True, 1, ())
    assert report.notes == (
        "skipped the first 1 occurrence as warm-up (unlike every later occurrence; #0: 2 launches, "
        "then 1 launches every time)",
    )

    def unsettled(sim, k, keep):
        wp.launch(add, dim=N - k, inputs=[sim.x, sim.v], outputs=[sim.out], device=DEVICE)

    never = check_static(_trace(unsettled), "step")
    assert (never.static, never.warmup, never.notes) == (False, 0, ())
    assert {f.occurrences for f in never.findings} == {STEPS - 1}


def test_a_launch_given_another_dtype_in_one_occurrence_is_varying_dtypes_and_raised() -> None:
    """The diff compares dtypes and whether a call raised beside the topology key: ``check-static`` names both
    (it stopped with a KeyError on them)."""
    ints = wp.zeros(N, dtype=int, device=DEVICE)

    def body(sim, k, keep):
        try:  # an int array where the kernel takes floats: Warp raises before anything runs
            wp.launch(scale, dim=N, inputs=[ints if k == 2 else sim.x, 2.0], outputs=[sim.tmp], device=DEVICE)
        except RuntimeError:
            pass

    report = check_static(_trace(body), "step")
    assert not report.static
    found = {(f.reason, f.name, f.example, f.occurrences) for f in report.findings}
    assert {(Reason.DTYPES, "x", "float32 -> int32", 1), (Reason.RAISED, "", "no -> RuntimeError", 1)} <= found
    assert {f.reason for f in report.findings} <= {Reason.DTYPES, Reason.RAISED, Reason.BUFFERS, Reason.FOREIGN}
