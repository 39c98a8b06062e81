"""``summary`` streamed (issue 25): one trace at a time, the same figures as the list-based functions.

The traces are real Warp programs on the CPU written as OTLP JSON Lines (``test_steps``' writer: traces latest
first, as a collector may hand them on), so the stream meets them out of ``load_traces``' order.
"""

from __future__ import annotations

import gc
import json
import random
import re
import weakref
from pathlib import Path

import pytest

from launchtrace.analysis.diff import inferred_segments, step_series
from launchtrace.analysis.loads import module_loads
from launchtrace.analysis.replays import with_replay_counts
from launchtrace.analysis.stats import add_step_values, kernel_stats, scope_stats
from launchtrace.analysis.summary_state import SummaryState
from launchtrace.cli import main
from launchtrace.sources.each import TraceKey, Traces, first_time
from launchtrace.sources.loading import load_traces
from launchtrace.steps import infer_steps, occurrences, split_runs
from test_steps import _stepped, _write, _zero_code


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("stream")
    return {
        "stepped": _write(folder / "stepped.jsonl", _stepped),
        "zero": _write(folder / "zero.jsonl", _zero_code),
        "zero-in-order": _write(folder / "zero-in-order.jsonl", _zero_code, reverse=False),
    }


def _listed(traces):
    """What ``summary`` printed before it streamed: the list-based functions over every trace."""
    inferred = [i for i in (infer_steps(occurrences(run)) for run in split_runs(traces)) if i is not None]
    steps = [[r for o in step for r in o.records] for i in inferred for step in i.steps] if inferred else None
    rows = with_replay_counts(kernel_stats(traces, steps), traces)
    return rows, scope_stats(traces), module_loads(traces), [(i.unit, len(i.steps), i.how) for i in inferred]


def _streamed(pairs):
    state = SummaryState()
    for key, trace in pairs:
        state.add(key, trace)
    r = state.result()
    return r.kernels, r.scopes, r.loads, [(i.unit, i.steps, i.how) for i in r.inferred]


def _same(a, b) -> None:
    """Equal, NaN included (the rows hold NaN where a percentile has no values)."""
    assert json.dumps(repr(a)) == json.dumps(repr(b))


@pytest.mark.parametrize("name", ["stepped", "zero", "zero-in-order"])
def test_streamed_figures_equal_the_list_based_ones(files, name) -> None:
    traces = load_traces(files[name])
    pairs = list(Traces([files[name]]))
    assert len(pairs) == len(traces)
    assert [k.arrival for k, _ in pairs] == list(range(len(pairs)))
    expected = _listed(traces)
    _same(_streamed(pairs), expected)
    if name.startswith("zero"):
        assert expected[3] and expected[3][0][1] == 4  # the steps were inferred, and that took the stream too


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_order_traces_arrive_in_changes_nothing(files, seed) -> None:
    """A stream gives traces as their roots end; the figures follow ``load_traces``' order whatever it is."""
    traces = load_traces(files["zero"]) + load_traces(files["stepped"])  # two sources, two runs
    keys = [TraceKey(0 if t < 8 else 1, first_time(tr), t) for t, tr in enumerate(traces)]
    pairs = list(zip(keys, traces))
    random.Random(seed).shuffle(pairs)
    pairs = [(k._replace(arrival=i), tr) for i, (k, tr) in enumerate(pairs)]
    _same(_streamed(pairs), _listed(traces))


def test_summary_prints_what_it_printed_from_the_list(files, capsys) -> None:
    """The command's JSON, field by field, against the list-based figures."""
    path = files["zero"]
    assert main(["summary", str(path), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    rows, scopes, loads, inferred = _listed(load_traces(path))
    assert data["traces"] == 8 and data["records"] == sum(len(t) for t in load_traces(path))
    assert [(k["kernel"], k["count"], k["total_ns"], k["steps"]) for k in data["kernels"]] == [
        (r.kernel, r.count, r.total_ns, r.steps) for r in rows
    ]
    assert [(s["path"], s["count"], s["total_ns"], s["warmup"]) for s in data["scopes"]] == [
        (s.path, s.count, s.total_ns, s.warmup) for s in scopes
    ]
    assert data["loads"]["count"] == loads.count
    assert [(tuple(i["unit"]), i["steps"], i["how"]) for i in data["inferred_steps"]] == inferred


def _many(src: Path, dst: Path, copies: int) -> Path:
    """``copies`` of ``src``'s traces with new trace ids (one run: the resource is kept)."""
    text = src.read_text(encoding="utf-8")
    with dst.open("w", encoding="utf-8") as f:
        for c in range(copies):
            f.write(re.sub(r'"traceId":"([0-9a-f]{8})', f'"traceId":"{c:08x}', text))
    return dst


def test_summary_holds_one_trace_at_a_time(files, tmp_path) -> None:
    """The state keeps figures, not traces: of 200 traces read, no more than two are alive at any moment."""
    path = _many(files["stepped"], tmp_path / "many.jsonl", 40)
    state = SummaryState()
    alive: list[weakref.ref] = []
    most = 0
    for n, (key, trace) in enumerate(Traces([path])):
        state.add(key, trace)
        alive.append(weakref.ref(trace))
        del trace
        if n % 20 == 19:
            gc.collect()
            most = max(most, sum(1 for r in alive if r() is not None))
    assert n + 1 == 40 * len(load_traces(files["stepped"]))
    assert most <= 2
    assert state.result().traces == n + 1


def test_spans_after_their_root_are_left_out_with_a_warning(files, tmp_path, caplog) -> None:
    """A stream completes a trace at its root; spans of it that come later (no launchtrace writer puts them so)
    are not counted, and a warning says how many."""
    lines = files["stepped"].read_text(encoding="utf-8").splitlines()
    doc = json.loads(lines[0])
    spans = doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
    roots = [s for s in spans if not s.get("parentSpanId")]
    kids = [s for s in spans if s.get("parentSpanId")]
    assert roots and kids
    first, second = json.loads(lines[0]), json.loads(lines[0])
    first["resourceSpans"][0]["scopeSpans"][0]["spans"] = roots
    second["resourceSpans"][0]["scopeSpans"][0]["spans"] = kids
    path = tmp_path / "late.jsonl"
    path.write_text(json.dumps(first) + "\n" + json.dumps(second) + "\n", encoding="utf-8")
    with caplog.at_level("WARNING"):
        traces = [t for _, t in Traces([path])]
    assert sum(len(t) for t in traces) == 0
    assert f"{len(kids)} spans arrived after their trace's root and were left out" in caplog.text


def _series_kernel_values(traces, segs=None) -> dict[str, list[float]]:
    """The kernel groups of ``diff.step_series`` as ``add_step_values`` used to take them."""
    out: dict[str, list[float]] = {}
    _, values, _ = step_series(traces, None, segs)
    for (kind, _step, name), per in values.items():
        if kind == "kernel":
            out.setdefault(name, []).extend(per.values())
    return out


@pytest.mark.parametrize("name", ["stepped", "zero", "zero-in-order"])
def test_the_kernel_step_values_are_step_series_kernel_groups(files, name) -> None:
    """``add_step_values`` works out only the kernel groups now: the same values, in the same order, whole
    runs, one trace at a time (as ``summary`` feeds it) and a zero-code run's inferred steps."""
    traces = load_traces([str(files[name])])
    whole: dict[str, list[float]] = {}
    add_step_values(whole, traces)
    assert whole and whole == _series_kernel_values(traces)
    for trace in traces:
        segs = [o for o in occurrences(trace) if o.records]
        one: dict[str, list[float]] = {}
        add_step_values(one, [trace], segs)
        assert one == _series_kernel_values([trace], segs)
    inferred = inferred_segments(traces)
    if name.startswith("zero"):
        assert inferred
    if inferred:
        steps: dict[str, list[float]] = {}
        add_step_values(steps, traces, inferred)
        assert steps and steps == _series_kernel_values(traces, inferred)
