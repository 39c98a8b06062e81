"""Fold modes on real Warp programs (CPU): lossless by default, folded only past the span budget, findable.

The program is cloth-like: ping-pong position buffers, a fill of the force buffer, a spring kernel and an
integrator per substep, an energy reduction per step, each step its own scope. Every count is checked against
the records a second bus subscription saw, and every folded trace is rebuilt and compared with them.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import warp as wp

import launchtrace
from launchtrace import conventions as C
from launchtrace import topology
from launchtrace.capture import bus
from launchtrace.export.config import ExportConfig
from launchtrace.export.pipeline import ExportPipeline
from launchtrace.export.spanbuilder import AUTO_FOLD_SWITCH
from launchtrace.sources.rebuild import rebuild
from test_pipeline import file_spans

SUBSTEPS = 4


@wp.kernel
def springs(pos: wp.array(dtype=wp.vec3), force: wp.array(dtype=wp.vec3), k: float):
    i = wp.tid()
    j = (i + 1) % pos.shape[0]
    d = pos[j] - pos[i]
    wp.atomic_add(force, i, k * d)
    wp.atomic_sub(force, j, k * d)


@wp.kernel
def integrate(
    pos: wp.array(dtype=wp.vec3),
    vel: wp.array(dtype=wp.vec3),
    force: wp.array(dtype=wp.vec3),
    out: wp.array(dtype=wp.vec3),
    dt: float,
):
    i = wp.tid()
    vel[i] = vel[i] + force[i] * dt
    out[i] = pos[i] + vel[i] * dt


@wp.kernel
def energy(vel: wp.array(dtype=wp.vec3), total: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(total, 0, 0.5 * wp.dot(vel[i], vel[i]))


class Cloth:
    """Ping-pong buffers: ``integrate`` reads one position buffer and writes the other, so a substep's launches
    repeat with period 2 substeps (and fold with period 6 records)."""

    def __init__(self, n: int = 64) -> None:
        self.pos = [wp.zeros(n, dtype=wp.vec3, device="cpu"), wp.zeros(n, dtype=wp.vec3, device="cpu")]
        self.vel = wp.zeros(n, dtype=wp.vec3, device="cpu")
        self.force = wp.zeros(n, dtype=wp.vec3, device="cpu")
        self.total = wp.zeros(1, dtype=float, device="cpu")
        self.n = n
        self.cur = 0

    def substep(self) -> None:
        src, dst = self.pos[self.cur], self.pos[1 - self.cur]
        self.force.zero_()
        wp.launch(springs, dim=self.n, inputs=[src, self.force, 10.0], device="cpu")
        wp.launch(integrate, dim=self.n, inputs=[src, self.vel, self.force, dst, 0.001], device="cpu")
        self.cur = 1 - self.cur

    def step(self) -> None:
        for _ in range(SUBSTEPS):
            self.substep()
        self.total.zero_()
        wp.launch(energy, dim=self.n, inputs=[self.vel, self.total], device="cpu")


KERNELS = {springs.key, integrate.key, energy.key}


@pytest.fixture
def cloth(instrumented):
    c = Cloth()
    c.step()  # compile outside the measured part
    return c


def export_run(tmp_path: Path, program, **settings) -> tuple[list, list, object]:
    """Run ``program`` under a started pipeline; the spans in the file, the records seen, the final stats."""
    config = ExportConfig.resolve(file_path=str(tmp_path / "spans.jsonl"), export_interval_s=0.05, **settings)
    pipeline = ExportPipeline(config, truncate=True).start()
    with bus.subscribe(capacity=10**6) as sub:
        program()
        assert pipeline.flush(60)
        records = [item for kind, item in sub.drain() if kind == "record"]
    stats = pipeline.stop()
    return file_spans(tmp_path / "spans.jsonl"), records, stats


def record_spans(spans: list) -> list:
    return [s for s in spans if s.attribute(C.OP) is not None and s.attribute(C.FOLD_COUNT) is None]


def summary_spans(spans: list) -> list:
    return [s for s in spans if s.attribute(C.FOLD_COUNT) is not None]


def short(kernel: str) -> str:
    """A kernel's key without its module (``tests.test_fold_modes.springs`` -> ``springs``); ``wp.zero`` stays."""
    return kernel if kernel.startswith("wp.") else kernel.rsplit(".", 1)[-1]


def steps(cloth: Cloth, n: int):
    def program() -> None:
        with launchtrace.scope("simulate"):
            for i in range(n):
                with launchtrace.scope("step", i=i):
                    cloth.step()

    return program


def test_the_default_exports_a_cloth_program_in_full_one_span_per_launch(tmp_path: Path, cloth: Cloth) -> None:
    spans, records, stats = export_run(tmp_path, steps(cloth, 10))
    assert len(records) == 10 * (3 * SUBSTEPS + 2)
    singles = record_spans(spans)
    assert summary_spans(spans) == []
    assert sorted(s.attribute(C.SEQ) for s in singles) == sorted(r.seq for r in records)
    names = {s.name for s in spans}
    assert {short(n) for n in names} >= KERNELS | {"wp.zero", "simulate", "step"}
    for kernel in KERNELS:  # findable by operation name and by launchtrace.kernel
        by_kernel = [s for s in singles if short(s.attribute(C.KERNEL)) == kernel]
        assert len(by_kernel) == sum(1 for r in records if short(r.kernel) == kernel) > 0
    assert (stats.folded_records, stats.summary_spans, stats.dropped) == (0, 0, 0)
    assert stats.exported == len(spans) == len(records) + 10 + 1


def test_a_loop_of_ten_thousand_steps_stays_within_the_budget_with_its_topology(tmp_path: Path, instrumented) -> None:
    """10,000 iterations of a ping-pong substep (a fill and two kernels) in one scope (30,000 records, fifteen
    budgets), then one full step: the trace keeps its first spans individually up to its switch point, folds
    the rest because it would not fit, stays within 2,000 spans, drops nothing, and rebuilds to the captured
    topology with every repetition counted."""
    cloth = Cloth(8)
    cloth.substep()

    def program() -> None:
        with launchtrace.scope("train"):
            for _ in range(10_000):
                cloth.substep()  # fill, springs, integrate
            cloth.step()

    spans, records, stats = export_run(tmp_path, program)
    assert len(records) == 10_000 * 3 + 3 * SUBSTEPS + 2
    assert len(spans) <= 2000 and len({s.trace_id for s in spans}) == 1
    switch = int((2000 - 2) * AUTO_FOLD_SWITCH)
    plain = sorted(s.attribute(C.SEQ) for s in record_spans(spans))
    assert plain[:switch] == [r.seq for r in records[:switch]]  # the loop's first spans, one per record
    assert stats.dropped == 0 and stats.folded_records > len(records) - switch - 200
    assert stats.summary_spans == len(summary_spans(spans))
    assert stats.folded_records + len(record_spans(spans)) == len(records)
    result = rebuild(spans)
    assert result.warnings == [] and result.skipped == 0
    rebuilt = sorted(result.records(), key=lambda r: r.seq)
    assert topology.topology_keys(rebuilt) == topology.topology_keys(records)
    train = next(s for s in spans if s.name == "train")
    assert train.attribute(C.SCOPE_LAUNCHES) == len(records)
    assert train.attribute(C.SCOPE_FINGERPRINT) == topology.fingerprint(records)


def test_summary_spans_are_named_after_their_kernels_and_carry_them(tmp_path: Path, cloth: Cloth) -> None:
    """fold="always": the substep sequence (fill, springs, integrate, twice for the ping-pong) folds into one
    summary span per step, named after its first launch (springs, not the fill), with the kernel attributes."""
    spans, records, stats = export_run(tmp_path, steps(cloth, 3), fold="always")
    summaries = summary_spans(spans)
    assert len(summaries) == 3 and stats.summary_spans == 3
    for s in summaries:
        first = s.attribute(C.KERNEL)
        assert short(first) == springs.key and s.attribute(C.OP) == "launch"
        assert s.name == f"{first} x{SUBSTEPS // 2} (+2 kernels)"
        assert [short(k) for k in s.attribute(C.FOLD_KERNELS)] == ["wp.zero", springs.key, integrate.key]
    assert stats.folded_records == 3 * 3 * SUBSTEPS == sum(s.attribute(C.FOLD_LAUNCHES) for s in summaries)
    rebuilt = sorted(rebuild(spans).records(), key=lambda r: r.seq)
    assert topology.topology_keys(rebuilt) == topology.topology_keys(records)


def test_fold_off_never_folds_and_cuts_a_trace_past_its_budget(tmp_path: Path, cloth: Cloth) -> None:
    spans, records, stats = export_run(tmp_path, steps(cloth, 10), fold="off", span_budget=50)
    assert summary_spans(spans) == [] and stats.folded_records == 0
    assert len(spans) == 50 and stats.dropped_budget == len(records) + 10 - 48  # 10 step scopes; root, dropped kept
    (dropped,) = [s for s in spans if s.name == C.DROPPED_SPAN_NAME]
    assert dropped.attribute(C.DROPPED_SPANS) == stats.dropped_budget


def test_auto_folds_only_the_trace_that_would_pass_its_budget(tmp_path: Path, cloth: Cloth) -> None:
    """Two traces: a short one that fits (exported in full) and a long one that does not (its first spans
    individually, up to the switch point, the rest folded)."""

    def program() -> None:
        with launchtrace.scope("short"):
            cloth.step()
        with launchtrace.scope("long"):
            for _ in range(10):
                cloth.step()

    spans, records, stats = export_run(tmp_path, program, span_budget=120)
    by_root = {s.name: s.trace_id for s in spans if s.name in ("short", "long")}
    short_spans = [s for s in spans if s.trace_id == by_root["short"]]
    long_spans = [s for s in spans if s.trace_id == by_root["long"]]
    assert summary_spans(short_spans) == [] and len(record_spans(short_spans)) == 3 * SUBSTEPS + 2
    assert summary_spans(long_spans) and len(long_spans) <= 120 and stats.dropped == 0
    switch = int((120 - 2) * AUTO_FOLD_SWITCH)  # spans of the long trace written before it folds
    long_records = [r for r in records if r.seq > max(s.attribute(C.SEQ) for s in record_spans(short_spans))]
    long_plain = sorted(s.attribute(C.SEQ) for s in record_spans(long_spans))
    scopes_begun = -(-switch // (3 * SUBSTEPS + 3))  # a step: its scope span and 3 * SUBSTEPS + 2 launches
    first = [r.seq for r in long_records[: switch - scopes_begun]]
    assert long_plain[: len(first)] == first
    assert min(s.start_ns for s in summary_spans(long_spans)) > max(
        s.start_ns for s in record_spans(long_spans) if s.attribute(C.SEQ) in set(first)
    )
    assert stats.folded_records + len(record_spans(spans)) == len(records)


def test_fold_mode_from_the_environment(tmp_path: Path, cloth: Cloth, monkeypatch) -> None:
    monkeypatch.setenv("LAUNCHTRACE_FOLD", "always")
    spans, _, stats = export_run(tmp_path, steps(cloth, 2))
    assert len(summary_spans(spans)) == 2 == stats.summary_spans
    with pytest.raises(ValueError, match="fold"):
        ExportConfig.resolve(fold="sometimes")


def test_run_and_demo_print_folded_counts_next_to_exported_and_dropped(tmp_path: Path) -> None:
    out = tmp_path / "demo.jsonl"
    demo = [sys.executable, "-m", "launchtrace", "demo", "--steps", "3", "--out", str(out)]
    default = subprocess.run(demo, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert default.returncode == 0, default.stderr
    assert "(0 records folded into 0 summary spans), dropped 0" in default.stdout
    always = subprocess.run([*demo, "--fold", "always"], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert always.returncode == 0, always.stderr
    line = next(x for x in always.stdout.splitlines() if x.startswith("exported"))
    folded = int(line.split("(")[1].split()[0])
    assert folded > 0 and " summary spans), dropped 0" in line
    program = tmp_path / "prog.py"
    program.write_text(
        "import warp as wp\nwp.config.quiet = True\nx = wp.zeros(4, device='cpu')\nfor _ in range(10):\n    x.zero_()\n"
    )
    run = [sys.executable, "-m", "launchtrace", "run", "--out", str(tmp_path / "r.jsonl"), "--fold", "always"]
    proc = subprocess.run([*run, str(program)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "(10 records folded into 1 summary spans, 0 dropped)" in proc.stderr
    bad = subprocess.run([*run[:-1], "sometimes", str(program)], capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2 and "--fold" in bad.stderr
