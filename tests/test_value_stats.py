"""value_stats: statistics of the arrays a launch writes, from real CPU kernels, through to exported spans."""

from __future__ import annotations

import dataclasses
import logging
import math

import numpy as np
import pytest
import warp as wp

from launchtrace import conventions as C
from launchtrace.capture import hotpath, probes, valuestats
from launchtrace.capture import warp as capture_warp
from launchtrace.export.spanattrs import record_attributes
from launchtrace.model import ValueStats
from launchtrace.testing import trace_launches

wp.config.quiet = True

N = 64


@wp.kernel
def scale_into(x: wp.array(dtype=float), s: float, y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] * s


@wp.kernel
def spin_vectors(v: wp.array(dtype=wp.vec3), out: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    out[i] = wp.vec3(v[i][1], -v[i][0], v[i][2] * 2.0)


@wp.kernel
def count_up(n: wp.array(dtype=wp.int32), step: int):
    i = wp.tid()
    n[i] = n[i] + step * i


@wp.kernel
def poison(y: wp.array(dtype=float), where: int):
    i = wp.tid()
    if i == where:
        y[i] = wp.nan
    else:
        y[i] = float(i)


@wp.struct
class Particle:
    pos: wp.vec3
    mass: float


@wp.kernel
def set_particles(p: wp.array(dtype=Particle)):
    i = wp.tid()
    q = Particle()
    q.mass = float(i)
    p[i] = q


@pytest.fixture
def measured(instrumented):
    """Instrumented Warp with value statistics on; every probe setting restored afterwards."""
    probes.configure(value_stats=True)
    yield probes
    probes.configure(value_stats=False, device_timing=False, max_elements=valuestats.MAX_ELEMENTS)


def _numpy_stats(values: np.ndarray) -> tuple:
    return (values.mean(), values.std(), values.min(), values.max())


def _as_tuple(s: ValueStats) -> tuple:
    return (s.mean, s.std, s.min, s.max)


def _same(a: tuple, b: tuple) -> bool:
    return all((math.isnan(x) and math.isnan(y)) or x == y for x, y in zip(a, b))


def _inputs(seed: int = 0) -> tuple:
    rng = np.random.default_rng(seed)
    x = wp.array(rng.normal(size=N).astype(np.float32), dtype=float)
    v = wp.array(rng.normal(size=(N, 3)).astype(np.float32), dtype=wp.vec3)
    return x, v


def test_stats_of_written_arrays_equal_numpy_of_their_values(measured):
    x, v = _inputs()
    y = wp.zeros(N, dtype=float)
    out = wp.zeros(N, dtype=wp.vec3)
    counts = wp.array(np.arange(N, dtype=np.int32), dtype=wp.int32)
    with trace_launches() as trace:
        wp.launch(scale_into, dim=N, inputs=[x, 2.5, y])  # y passed in inputs=, written: the syntax tree says so
        wp.launch(spin_vectors, dim=N, inputs=[v], outputs=[out])
        wp.launch(count_up, dim=N, inputs=[counts, 3])  # read and written
    recs = list(trace)
    assert [[p.key for p in r.probes] for r in recs] == [[2], [1], [0]]  # only the written arrays
    for rec, arr in zip(recs, (y, out, counts)):
        (stats,) = rec.probes
        assert _same(_as_tuple(stats), _numpy_stats(arr.numpy()))  # vec3: all components flattened together
    assert all(isinstance(v, int) for v in (recs[2].probes[0].min, recs[2].probes[0].max))
    assert recs[2].probes[0].max == int(counts.numpy().max())


def test_stats_are_those_of_warps_array_stats_visitor(measured):
    """The numbers are Warp's own: ``ArrayStatsVisitor`` over a real ``wp.Tape`` of the same launches."""
    from warp._src.tape import ArrayStatsVisitor, visit_tape

    x, v = _inputs(1)
    y = wp.zeros(N, dtype=float)
    out = wp.zeros(N, dtype=wp.vec3)
    nan = wp.zeros(N, dtype=float)
    with trace_launches() as trace, wp.Tape() as tape:
        wp.launch(scale_into, dim=N, inputs=[x, -1.5], outputs=[y])
        wp.launch(spin_vectors, dim=N, inputs=[v], outputs=[out])
        wp.launch(poison, dim=N, inputs=[], outputs=[nan, 7])
    visitor = ArrayStatsVisitor()
    visit_tape(tape, visitor)
    assert len(visitor.array_value_stats) == 3
    for rec, theirs, arr in zip(trace, visitor.array_value_stats, (y, out, nan)):
        (ours,) = rec.probes
        assert _same(_as_tuple(ours), tuple(theirs[arr.ptr]))
    assert all(math.isnan(v) for v in _as_tuple(trace[2].probes[0]))  # one NaN: all four NaN, as numpy


def test_values_are_taken_right_after_each_launch(measured):
    counts = wp.zeros(N, dtype=wp.int32)
    with trace_launches() as trace:
        for step in (1, 2, 3):
            wp.launch(count_up, dim=N, inputs=[counts, step])
    sums = np.cumsum([1, 2, 3])
    expected = [(s * np.arange(N)).mean() for s in sums]
    assert [r.probes[0].mean for r in trace] == pytest.approx(expected)


def test_nothing_is_measured_when_off(instrumented):
    assert capture_warp._PROBES is False
    x, _ = _inputs()
    y = wp.zeros(N, dtype=float)
    with trace_launches() as trace:
        wp.launch(scale_into, dim=N, inputs=[x, 2.0, y])
    (rec,) = trace
    assert rec.probes == ()
    assert not [k for k, _ in record_attributes(rec) if ".stats." in k]


def test_records_are_the_same_with_stats_on_except_the_stats(instrumented):
    """Site, api, arguments, owners: the measuring path records what the fast path records."""
    x, v = _inputs()
    y = wp.zeros(N, dtype=float)
    out = wp.zeros(N, dtype=wp.vec3)

    def run():
        with trace_launches() as trace:
            wp.launch(scale_into, dim=N, inputs=[x, 2.0, y])
            wp.launch(spin_vectors, N, [v], [out], device="cpu", block_dim=64)
        return list(trace)

    plain = run()
    probes.configure(value_stats=True)
    try:
        measured = run()
    finally:
        probes.configure(value_stats=False)
    strip = {"start_ns": 0, "end_ns": 0, "seq": 0, "probes": (), "site": None}
    for a, b in zip(plain, measured):
        assert dataclasses.replace(a, **strip) == dataclasses.replace(b, **strip)
        assert (a.site.file, a.site.function) == (b.site.file, b.site.function)
        assert b.probes and not a.probes


def test_too_large_arrays_are_skipped_and_marked(measured):
    measured.configure(max_elements=N * 3 - 1)  # the vec3 output has N * 3 scalars: one too many
    x, v = _inputs()
    y = wp.zeros(N, dtype=float)
    out = wp.zeros(N, dtype=wp.vec3)
    before = probes.stats().stats_skipped
    with trace_launches() as trace:
        wp.launch(scale_into, dim=N, inputs=[x, 2.0, y])
        wp.launch(spin_vectors, dim=N, inputs=[v], outputs=[out])
    assert trace[0].probes[0].skipped == "" and trace[0].probes[0].mean is not None
    assert trace[1].probes == (ValueStats(1, skipped="too_large"),)
    assert probes.stats().stats_skipped == before + 1
    attrs = dict(record_attributes(trace[1]))
    assert attrs[C.arg_stats_attr("out", "skipped")] == "too_large"
    assert C.arg_stats_attr("out", "mean") not in attrs


def test_struct_arrays_are_marked_dtype(measured):
    particles = wp.zeros(8, dtype=Particle)
    with trace_launches() as trace:
        wp.launch(set_particles, dim=8, inputs=[particles])
    assert trace[0].probes == (ValueStats(0, skipped="dtype"),)


def test_a_failure_never_reaches_the_program(measured, monkeypatch, caplog):
    """Fault injection (``_stats`` made to raise): the launch runs, the record says ``error``, one warning."""

    def broken(*args, **kwargs):
        raise RuntimeError("injected")

    monkeypatch.setattr(valuestats, "_stats", broken)
    monkeypatch.setattr(hotpath, "_failures_logged", set())  # the one warn-once helper's memory, fresh
    x, _ = _inputs()
    y = wp.zeros(N, dtype=float)
    with caplog.at_level(logging.WARNING, logger="launchtrace.capture"), trace_launches() as trace:
        for _ in range(3):
            wp.launch(scale_into, dim=N, inputs=[x, 2.0, y])
    np.testing.assert_array_equal(y.numpy(), x.numpy() * 2.0)
    assert [r.probes for r in trace] == [(ValueStats(2, skipped="error"),)] * 3
    assert len([r for r in caplog.records if "capture failed in value statistics" in r.getMessage()]) == 1


def test_failed_launches_and_recorded_commands_behave_as_without_stats(measured):
    x, _ = _inputs()
    y = wp.zeros(N, dtype=float)
    with trace_launches() as trace:
        with pytest.raises(RuntimeError):
            wp.launch(scale_into, dim=N, inputs=[x, 2.0])  # a missing argument: Warp raises, as always
        cmd = wp.launch(scale_into, dim=N, inputs=[x, 2.0, y], record_cmd=True)
    assert isinstance(cmd, wp.Launch)
    (rec,) = trace
    assert rec.error is not None and rec.error.startswith("RuntimeError") and rec.probes == ()


def test_the_tape_still_names_the_programs_line(measured):
    x, _ = _inputs()
    y = wp.zeros(N, dtype=float)
    with wp.Tape() as tape:
        wp.launch(scale_into, dim=N, inputs=[x, 2.0, y])
    caller = tape.launches[-1][-1]["caller"]
    assert caller["file"] == __file__ and caller["func"] == "test_the_tape_still_names_the_programs_line"


def test_stats_flow_into_exported_spans_through_the_file_sink(warp_cpu, tmp_path):
    from launchtrace import export
    from launchtrace.sources.files import read_spans

    path = tmp_path / "spans.jsonl"
    x, _ = _inputs(3)
    same = wp.zeros(N, dtype=float)
    growing = wp.zeros(N, dtype=wp.int32)
    export.start_export(file_path=str(path), value_stats=True, export_interval_s=0.05, truncate=True, fold="always")
    try:
        assert capture_warp._PROBES is True
        for _ in range(4):
            wp.launch(scale_into, dim=N, inputs=[x, 2.0, same])  # the same values each time: these fold
        for _step in range(4):
            wp.launch(count_up, dim=N, inputs=[growing, 1])  # different values each time: these do not
    finally:
        export.stop_export()
    assert capture_warp._PROBES is False  # stop_export turned the measurement off again
    spans = read_spans(str(path)).spans
    grow = [s for s in spans if s.name.endswith("count_up")]
    assert len(grow) == 4
    expected_means = [((k + 1) * np.arange(N)).mean() for k in range(4)]
    assert [s.attribute(C.arg_stats_attr("n", "mean")) for s in grow] == pytest.approx(expected_means)
    assert [s.attribute(C.arg_stats_attr("n", "max")) for s in grow] == [(k + 1) * (N - 1) for k in range(4)]
    (fold,) = [s for s in spans if s.attribute(C.FOLD_COUNT) == 4]
    event = dict(fold.events[0].attributes)
    want = _numpy_stats(same.numpy())
    got = tuple(event[C.arg_stats_attr("y", f)] for f in ("mean", "std", "min", "max"))
    assert got == pytest.approx(tuple(float(v) for v in want))


def test_environment_variable_turns_it_on(warp_cpu, tmp_path, monkeypatch):
    from launchtrace import export
    from launchtrace.export.config import LAUNCHTRACE_VALUE_STATS, LAUNCHTRACE_VALUE_STATS_MAX_ELEMENTS

    monkeypatch.setenv(LAUNCHTRACE_VALUE_STATS, "1")
    monkeypatch.setenv(LAUNCHTRACE_VALUE_STATS_MAX_ELEMENTS, "5")
    pipeline = export.start_export(file_path=str(tmp_path / "s.jsonl"), truncate=True)
    try:
        assert pipeline.config.value_stats and pipeline.config.value_stats_max_elements == 5
        assert probes.stats().value_stats and probes.stats().max_elements == 5
    finally:
        export.stop_export()
        probes.configure(max_elements=valuestats.MAX_ELEMENTS)
    assert not probes.stats().value_stats


def test_bad_settings_are_one_clear_error(warp_cpu):
    from launchtrace.export.config import ExportConfig

    with pytest.raises(ValueError, match="value_stats_max_elements must be a positive int"):
        ExportConfig.resolve(value_stats_max_elements=0)
    with pytest.raises(ValueError, match="max_elements must be a positive int"):
        probes.configure(max_elements=-1)


def test_launchtrace_run_takes_the_flags(tmp_path):
    """``launchtrace run --value-stats --device-timing`` as a real subprocess: stats on the spans; on the CPU
    device no device times (host time is exact)."""
    import subprocess
    import sys
    import textwrap
    from pathlib import Path

    from launchtrace.sources.files import read_spans

    program = tmp_path / "prog.py"
    program.write_text(
        textwrap.dedent(
            """
            import numpy as np
            import warp as wp

            wp.config.quiet = True

            @wp.kernel
            def ramp(y: wp.array(dtype=float), s: float):
                i = wp.tid()
                y[i] = s * float(i)

            y = wp.zeros(10, dtype=float)
            wp.launch(ramp, dim=10, inputs=[y, 0.5])
            np.save("values.npy", y.numpy())
            """
        )
    )
    out = tmp_path / "spans.jsonl"
    launchtrace_bin = Path(sys.executable).parent / "launchtrace"
    cmd = [str(launchtrace_bin), "run", "--value-stats", "--device-timing", "--out", str(out), str(program)]
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    (span,) = [s for s in read_spans(str(out)).spans if s.name.endswith("ramp")]
    values = np.load(tmp_path / "values.npy")
    assert span.attribute(C.arg_stats_attr("y", "mean")) == pytest.approx(float(values.mean()))
    assert span.attribute(C.arg_stats_attr("y", "max")) == pytest.approx(float(values.max()))
    assert span.attribute(C.DEVICE_TIME_START) is None


def test_rebuilt_records_carry_the_measurements_back(measured):
    """capture -> spans -> OTLP/JSON line -> spans -> records: the probes come back equal (NaN as NaN)."""
    import json

    from launchtrace.export.config import ExportConfig
    from launchtrace.export.spanbuilder import SpanBuilder
    from launchtrace.model import DeviceTime
    from launchtrace.otlp.json_codec import decode_traces_data, encode_line
    from launchtrace.sources.rebuild import rebuild

    x, v = _inputs(4)
    y = wp.zeros(N, dtype=float)
    out = wp.zeros(N, dtype=wp.vec3)
    counts = wp.zeros(N, dtype=wp.int32)
    with trace_launches() as trace:
        wp.launch(scale_into, dim=N, inputs=[x, 2.0, y])
        wp.launch(poison, dim=N, inputs=[y, 3])
        wp.launch(count_up, dim=N, inputs=[counts, 2])
        measured.configure(max_elements=N)
        wp.launch(spin_vectors, dim=N, inputs=[v], outputs=[out])
    records = list(trace)
    records[0] = dataclasses.replace(records[0], probes=(DeviceTime(1_000, 5_500), *records[0].probes))
    builder = SpanBuilder(ExportConfig.resolve(fold=False))
    spans = builder.feed([("record", r) for r in records]) + builder.flush()
    decoded, problems = decode_traces_data(json.loads(encode_line(spans)))
    assert not problems
    result = rebuild(decoded)
    (data,) = result.traces.values()
    back = sorted(data.records, key=lambda r: r.seq)
    assert [[type(p).__name__ for p in r.probes] for r in back] == [
        ["DeviceTime", "ValueStats"],
        ["ValueStats"],
        ["ValueStats"],
        ["ValueStats"],
    ]
    for ours, theirs in zip(records, back):
        for a, b in zip(ours.probes, theirs.probes):
            if isinstance(a, ValueStats) and not a.skipped:
                assert a.key == b.key and _same(_as_tuple(a), _as_tuple(b))
                assert [type(n) for n in (a.min, a.max)] == [type(n) for n in (b.min, b.max)]
            else:
                assert a == b
    assert back[3].probes == (ValueStats(1, skipped="too_large"),)


def test_every_statistic_is_in_the_conventions_table():
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[1] / "docs" / "semantic-conventions.md").read_text(encoding="utf-8")
    for field in C.STATS_FIELDS:
        assert f"| `{C.arg_stats_attr('<param>', field)}` |" in doc
