"""``diff`` streamed (issue 25): the same answer as ``diff_traces`` over the lists, or none at all.

Real Warp programs on the CPU written as OTLP JSON Lines: the analyzer tests' program (``base``, an inserted
launch, a changed scalar, the same program again) and ``test_steps``' programs (a scoped run with unscoped work
before and after, written in order or latest trace first; zero-code timers).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from launchtrace.analysis.diff import diff_traces
from launchtrace.analysis.diff_stream import diff_streamed
from launchtrace.analysis.values import became_non_finite
from launchtrace.cli import main
from launchtrace.sources.loading import load_traces
from test_analysis_programs import Sim, write_trace_file
from test_steps import _stepped, _write, _zero_code


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("diffstream")
    sim = Sim()
    out = {v: write_trace_file(folder / f"{v}.jsonl", v, 4, sim) for v in ("base", "insert", "scalar", "dim")}
    out["again"] = write_trace_file(folder / "again.jsonl", "base", 4, sim)
    out["short"] = write_trace_file(folder / "short.jsonl", "base", 2, sim)
    out["stepped"] = _write(folder / "stepped.jsonl", _stepped)
    out["stepped2"] = _write(folder / "stepped2.jsonl", _stepped, reverse=False)
    out["zero"] = _write(folder / "zero.jsonl", _zero_code, reverse=False)
    lines = out["stepped2"].read_text(encoding="utf-8").splitlines(keepends=True)
    out["late"] = folder / "late.jsonl"  # the unscoped work's trace ends last, as the exporter writes it
    out["late"].write_text("".join(lines[1:] + lines[:1]), encoding="utf-8")
    return out


def _as_listed(a: Path, b: Path, **options):
    ta, tb = load_traces([a]), load_traces([b])
    return diff_traces(ta, tb, **options), became_non_finite(ta, tb)


def _same(streamed, listed) -> None:
    assert streamed is not None, "the stream gave up where it should have answered"
    (result, bad), (want, want_bad) = streamed, listed
    assert repr(result.segments) == repr(want.segments)
    assert repr(result.timing) == repr(want.timing)  # NaN medians compare by repr
    assert (result.warmup, result.drift, result.options) == (want.warmup, want.drift, want.options)
    assert (result.runs_a, result.runs_b) == (want.runs_a, want.runs_b)
    assert [dataclasses.astuple(x)[:7] for x in bad] == [dataclasses.astuple(x)[:7] for x in want_bad]


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("base", "again"),
        ("base", "insert"),
        ("base", "scalar"),
        ("insert", "dim"),
        ("base", "short"),  # B has fewer steps: A's last two are removed
        ("short", "base"),
        ("stepped2", "stepped2"),  # unscoped work before and after the steps, in a trace of its own
        ("late", "stepped2"),  # ... which arrives last but holds the first step
        ("stepped2", "late"),
        ("base", "stepped2"),  # nothing in common
    ],
)
def test_a_streamed_diff_equals_the_diff_of_the_lists(files, a, b) -> None:
    _same(diff_streamed([files[a]], [files[b]]), _as_listed(files[a], files[b]))


@pytest.mark.parametrize(
    "options", [{"scope": "step"}, {"ignore_scalars": True}, {"raw_pointers": True}, {"absolute": True}]
)
def test_options_give_the_same_answer_streamed(files, options) -> None:
    _same(
        diff_streamed([files["base"]], [files["scalar"]], **options),
        _as_listed(files["base"], files["scalar"], **options),
    )


def test_several_runs_a_side_are_left_to_the_lists(files, capsys) -> None:
    """Runs pair k-th with k-th and the shorter side repeats its last: the stream declines, the command
    answers from the lists."""
    assert diff_streamed([files["base"], files["again"]], [files["scalar"]]) is None
    assert main(["diff", str(files["base"]), str(files["again"]), "--against", str(files["scalar"])]) == 1
    assert "timing: per-step totals of 2 runs (A) against 1 run (B)" in capsys.readouterr().out


def test_zero_code_runs_are_left_to_the_lists(files) -> None:
    """Inferred steps are repetitions of timers in several traces (issue 26): the lists cut them."""
    assert diff_streamed([files["zero"]], [files["zero"]]) is None
    assert diff_streamed([files["zero"]], [files["zero"]], scope="simulate") is not None  # no inference asked


def test_steps_out_of_their_start_order_are_left_to_the_lists(files, capsys) -> None:
    """A file whose traces were written latest first (as a collector may hand them on): step numbers would
    follow arrival, so the stream declines, and the command's answer is the lists' one."""
    assert diff_streamed([files["stepped"]], [files["stepped2"]]) is None
    assert main(["diff", str(files["stepped"]), str(files["stepped2"]), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    want, _ = _as_listed(files["stepped"], files["stepped2"])
    assert [(s["name"], s["occurrence"]) for s in data["segments"]] == [(s.name, s.occurrence) for s in want.segments]
    assert len(data["timing"]) == len(want.timing)
