"""Folded data is never passed off as measured: ``summary`` and ``diff`` on one real run (CPU) exported twice,
with folding off, always and by default (``fold="off"`` / ``"always"`` / ``"auto"``: lossless under the span
budget), the span builder fed the very same capture events.

Figures that a summary span records exactly (count, total = count x mean, max, the per-step totals) agree with
the unfolded export within the mean's integer rounding; the ones it cannot (a per-launch p50 over summaries,
any per-launch p95) are marked as from summaries or left out, never invented.
"""

from __future__ import annotations

import json
import math
import threading
from pathlib import Path

import numpy as np
import pytest
import warp as wp

import launchtrace
from launchtrace.analysis.diff import diff_traces
from launchtrace.analysis.stats import kernel_stats, scope_stats
from launchtrace.capture import bus
from launchtrace.cli import main
from launchtrace.export.config import ExportConfig
from launchtrace.export.spanbuilder import SpanBuilder
from launchtrace.otlp.json_codec import encode_line
from launchtrace.sources.files import read_spans
from launchtrace.sources.loading import load_traces
from launchtrace.sources.rebuild import rebuild
from launchtrace.testing import trace_launches

STEPS = 12
REPEATS = 6
N = 256


@wp.kernel
def relax(x: wp.array(dtype=float), n: int, y: wp.array(dtype=float)):
    i = wp.tid()
    v = x[i]
    for _k in range(n):
        v = wp.cos(v) * 0.5 + 0.1
    y[i] = v


@wp.kernel
def once(y: wp.array(dtype=float), x: wp.array(dtype=float)):
    i = wp.tid()
    x[i] = y[i] * 0.5


def _events() -> list:
    x = wp.full(N, 0.5, dtype=float, device="cpu")
    y = wp.zeros(N, dtype=float, device="cpu")
    wp.launch(relax, dim=N, inputs=[x, 10, y], device="cpu")  # compile outside the capture
    wp.launch(once, dim=N, inputs=[y, x], device="cpu")
    with trace_launches():  # holds the instrumentation
        sub = bus.subscribe(thread=threading.get_ident())
        for k in range(STEPS):
            with launchtrace.scope("step", step=k):
                with wp.ScopedTimer("inner", print=False):
                    for _ in range(REPEATS):  # identical launches: one summary span when folded
                        wp.launch(relax, dim=N, inputs=[x, 200, y], device="cpu")
                wp.launch(once, dim=N, inputs=[y, x], device="cpu")
        sub.close()
        return sub.drain()


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> dict:
    events = _events()
    folder = tmp_path_factory.mktemp("fold")
    out = {"records": [item for kind, item in events if kind == "record"]}
    for name, fold in (("unfolded", "off"), ("folded", "always"), ("auto", "auto")):
        builder = SpanBuilder(ExportConfig.resolve(fold=fold))
        spans = builder.feed(events) + builder.flush()
        path = folder / f"{name}.jsonl"
        path.write_text(encode_line(spans) + "\n", encoding="utf-8")
        out[name] = path
    return out


def _by_kernel(path: Path) -> dict:
    return {r.kernel.rsplit(".", 1)[-1]: r for r in kernel_stats(load_traces(path))}


def test_the_folded_export_really_folds(exported) -> None:
    folded = load_traces(exported["folded"])
    relax_recs = [r for t in folded for r in t.records if r.kernel.endswith(".relax")]
    assert len(relax_recs) == STEPS * REPEATS
    assert all(r.fold is not None and r.fold.count == REPEATS for r in relax_recs)
    assert len({(r.fold.span_id, r.fold.position) for r in relax_recs}) == STEPS  # one summary span a step
    unfolded = load_traces(exported["unfolded"])
    assert all(r.fold is None for t in unfolded for r in t.records)


def test_summary_figures_agree_where_summaries_record_them(exported) -> None:
    measured = [r.duration_ns for r in exported["records"] if r.kernel.endswith(".relax")]
    plain, folded = _by_kernel(exported["unfolded"]), _by_kernel(exported["folded"])
    a, b = plain["relax"], folded["relax"]
    assert a.count == b.count == STEPS * REPEATS
    assert a.folded == 0 and b.folded == STEPS * REPEATS
    assert abs(a.total_ns - b.total_ns) <= b.count  # count x mean, the mean rounded to a nanosecond
    assert a.max_ns == b.max_ns == max(measured)  # the recorded maximum, not the largest of copied means
    assert b.max_from_summaries and not a.max_from_summaries
    assert a.p95_ns == pytest.approx(float(np.percentile(measured, 95)))
    assert math.isnan(b.p95_ns)  # no summary records a p95: not invented
    assert b.p50_from_summaries and not a.p50_from_summaries
    assert min(measured) <= b.p50_ns <= max(measured)
    # per step: the kernel's total in each step is exact from the summaries too
    assert a.steps == b.steps == STEPS
    for q in ("step_p50_ns", "step_p95_ns", "step_max_ns"):
        assert getattr(b, q) == pytest.approx(getattr(a, q), abs=REPEATS)
    # the unfolded launch is measured either way
    assert plain["once"] == folded["once"]
    # scopes are never folded: time per scope is the same
    assert scope_stats(load_traces(exported["unfolded"])) == scope_stats(load_traces(exported["folded"]))


def test_summary_counts_each_folded_position_once_expanded_or_not(exported) -> None:
    expanded = kernel_stats(load_traces(exported["folded"]))
    kept = list(rebuild(read_spans(exported["folded"]).spans, expand=False).traces.values())
    assert all(r.repeat == REPEATS for t in kept for r in t.records if r.kernel.endswith(".relax"))
    assert kernel_stats(kept) == expanded


def test_summary_text_marks_figures_from_summaries(exported, capsys) -> None:
    assert main(["summary", str(exported["unfolded"])]) == 0
    plain = capsys.readouterr().out
    assert "*" not in plain and "fold summaries" not in plain
    assert main(["summary", str(exported["folded"])]) == 0
    text = capsys.readouterr().out
    row = next(line for line in text.splitlines() if ".relax" in line)
    assert row.count("*") == 2 and " - " in row  # p50 and max marked, p95 left out
    assert f"* from fold summaries ({STEPS * REPEATS} of {STEPS * (REPEATS + 1)} launches were folded)" in text
    assert "step/inner" in text and "time per scope" in text
    assert main(["summary", str(exported["folded"]), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    relax_row = next(r for r in data["kernels"] if r["kernel"].endswith(".relax"))
    assert relax_row["p95_ns"] is None and relax_row["folded"] == STEPS * REPEATS
    assert {s["path"] for s in data["scopes"]} == {"step", "step/inner"}


def test_diff_uses_recorded_totals_not_copies_of_a_mean(exported) -> None:
    plain, folded = load_traces(exported["unfolded"]), load_traces(exported["folded"])
    result = diff_traces(plain, folded)
    assert result.equal  # folding changes no topology
    rows = {(t.kind, t.name.rsplit(".", 1)[-1]): t for t in result.timing}
    relax_row = rows[("kernel", "relax")]
    assert relax_row.launches_a == relax_row.launches_b == STEPS * REPEATS
    assert relax_row.folded_a == 0 and relax_row.folded_b == STEPS * REPEATS
    # the same measurements: per-step totals equal within the mean's rounding, so no change at all
    assert abs(relax_row.median_a_ns - relax_row.median_b_ns) <= REPEATS
    assert abs(relax_row.verdict.effect) < 1e-3 and not relax_row.verdict.significant
    # one value per step (minus warm-up), never one per copied launch
    assert relax_row.verdict.n_steps_b <= STEPS and relax_row.verdict.n_steps_b == relax_row.verdict.n_steps_a
    assert not any(t.verdict.significant for t in result.timing)
    text_rows = [line for line in _diff_text(plain, folded).splitlines() if "relax" in line]
    assert any(f"fold summaries, recorded totals used: 0/{STEPS * REPEATS}" in line for line in text_rows)


def _diff_text(a, b) -> str:
    from launchtrace.render.diff_text import diff_as_text

    return diff_as_text(diff_traces(a, b))


def test_the_default_folding_changes_no_figure(exported) -> None:
    """``auto`` folds only what it can fold without loss under the budget; whatever it did, the consumers'
    figures agree with the unfolded export where summaries record them."""
    plain, auto = _by_kernel(exported["unfolded"]), _by_kernel(exported["auto"])
    for name in ("relax", "once"):
        a, b = plain[name], auto[name]
        assert a.count == b.count and abs(a.total_ns - b.total_ns) <= b.count and a.max_ns == b.max_ns
        assert a.step_p50_ns == pytest.approx(b.step_p50_ns, abs=REPEATS)
    result = diff_traces(load_traces(exported["unfolded"]), load_traces(exported["auto"]))
    assert result.equal and not any(t.verdict.significant for t in result.timing)
