"""One trace too wide to hold as spans (issue 25): :class:`launchtrace.sources.wide.WideTrace` rebuilds what the
spans rebuild.

The traces are real: ``launchtrace demo`` runs (plain, and with value statistics), a step folded into summary
spans, and ``test_steps``' scoped and zero-code programs, on Warp's CPU device. Each is streamed twice, as spans
(``wide=False``) and with every trace of more than one span made wide (``WIDE_AT`` set to 1), and the rebuilt
traces must be equal to the last field, in the same order, with the same problems logged. Then spans of one real
trace are broken on purpose (duplicates identical and not, parent cycles, no root, a missing parent, a launch
under a launch, a joined launch, an unreadable value, equal sequence numbers), by hand and at random, and both ways
must still agree.
"""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import pytest
import warp as wp

import launchtrace
from launchtrace import conventions as C
from launchtrace.cli import main
from launchtrace.sources import wide
from launchtrace.sources.files import read_spans
from launchtrace.sources.stream import TraceStream
from launchtrace.spans import SpanData
from test_analysis_programs import DEVICE, N, Sim, add, scale
from test_steps import _stepped, _write, _zero_code


def _repeating(sim: Sim) -> None:
    """A step that launches the same two kernels 40 times: folded into a summary span when exported so."""
    with launchtrace.scope("step"):
        for _ in range(40):
            wp.launch(scale, dim=N, inputs=[sim.x, 0.5], outputs=[sim.tmp], device=DEVICE)
            wp.launch(add, dim=N, inputs=[sim.tmp, sim.v], outputs=[sim.out], device=DEVICE)
        wp.copy(sim.x, sim.out)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory, warp_cpu) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("wide")
    plain, stats = folder / "demo.jsonl", folder / "stats.jsonl"
    assert main(["demo", "--steps", "4", "--particles", "64", "--fold", "off", "--out", str(plain)]) == 0
    assert main(["demo", "--steps", "3", "--particles", "64", "--value-stats", "--out", str(stats)]) == 0
    return {
        "demo": plain,
        "stats": stats,
        "folded": _write(folder / "folded.jsonl", _repeating, reverse=False, fold="always"),
        "stepped": _write(folder / "stepped.jsonl", _stepped),
        "zero": _write(folder / "zero.jsonl", _zero_code),
    }


def _state(trace) -> tuple:
    """Everything of a rebuilt trace, in order (``fold`` is not compared by ``==``: it is listed)."""
    return (
        trace.records,
        [r.fold for r in trace.records],
        list(trace.scopes.items()),
        list(trace.attributes.items()),
    )


def _streamed(stream: TraceStream) -> tuple[list, list[str], int]:
    traces = [_state(t) for t in stream]
    return traces, [str(p) for p in stream.log.problems], stream.spans


def _both(make, monkeypatch: pytest.MonkeyPatch) -> tuple[tuple, tuple, int]:
    """The stream read as spans, then with every trace wide; and how many traces were wide."""
    monkeypatch.setattr(wide, "WIDE_AT", 10**9)
    as_spans = _streamed(make())
    made = []
    original = wide.WideTrace.__init__

    def counting(self, *args, **kwargs):
        made.append(1)
        original(self, *args, **kwargs)

    monkeypatch.setattr(wide, "WIDE_AT", 1)
    monkeypatch.setattr(wide.WideTrace, "__init__", counting)
    as_wide = _streamed(make())
    return as_spans, as_wide, len(made)


@pytest.mark.parametrize("name", ["demo", "stats", "folded", "stepped", "zero"])
def test_real_files_rebuild_the_same_wide(files: dict[str, Path], name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    as_spans, as_wide, made = _both(lambda: TraceStream.from_paths([files[name]]), monkeypatch)
    assert made >= 1  # the wide path was taken
    assert as_spans[0] and as_wide == as_spans
    if name == "folded":  # fold summaries expanded among launches read into records
        folds = [fold for trace in as_wide[0] for fold in trace[1]]
        assert any(f is not None for f in folds) and any(f is None for f in folds)
    if name == "stats":  # value statistics read with the records
        assert any(r.probes for trace in as_wide[0] for r in trace[0])


def _one_trace(files: dict[str, Path]) -> list[SpanData]:
    """The spans of the demo's largest trace (a step: a scope root and its launches)."""
    spans = read_spans(files["demo"]).spans
    by_trace: dict[bytes, list[SpanData]] = {}
    for s in spans:
        by_trace.setdefault(s.trace_id, []).append(s)
    return max(by_trace.values(), key=len)


def _batch_stream(spans: list[SpanData]):
    return lambda: TraceStream.from_span_batches(lambda log: iter([list(spans)]), "test")


def _launches(spans: list[SpanData]) -> list[int]:
    return [i for i, s in enumerate(spans) if s.attribute(C.OP) is not None]


def _with_attr(span: SpanData, key: str, value) -> SpanData:
    attrs = (*((k, v) for k, v in span.attributes if k != key), (key, value))
    return dataclasses.replace(span, attributes=attrs)


def _broken(spans: list[SpanData], how: str, rng: random.Random | None = None) -> list[SpanData]:
    """``spans`` broken as ``how`` says, on the second and third launch spans (or two at random)."""
    spans = list(spans)
    launches = _launches(spans)
    a, b = rng.sample(launches, 2) if rng else launches[1:3]
    root = next((i for i, s in enumerate(spans) if s.parent_span_id is None), None)
    if root is None and how in ("duplicate root", "no root", "cycle, no root", "root first"):
        return spans
    if how == "identical duplicate":
        spans.append(spans[a])
    elif how == "different duplicate":
        spans.append(dataclasses.replace(spans[a], end_ns=spans[a].end_ns + 1))
    elif how == "duplicate root":
        spans.insert(0, dataclasses.replace(spans[root], name="again"))
    elif how == "cycle":
        spans[a] = dataclasses.replace(spans[a], parent_span_id=spans[b].span_id)
        spans[b] = dataclasses.replace(spans[b], parent_span_id=spans[a].span_id)
    elif how == "no root":
        del spans[root]
    elif how == "cycle, no root":  # the structure check looks for cycles only where no root is
        spans[a] = dataclasses.replace(spans[a], parent_span_id=spans[b].span_id)
        spans[b] = dataclasses.replace(spans[b], parent_span_id=spans[a].span_id)
        del spans[root]
    elif how == "launch under a launch":
        spans[b] = dataclasses.replace(spans[b], parent_span_id=spans[a].span_id)
    elif how == "joined launch":
        spans[a] = _with_attr(spans[a], C.SCOPE_JOINED, True)
        spans[b] = dataclasses.replace(_with_attr(spans[b], C.SCOPE_JOINED, True), parent_span_id=spans[a].span_id)
    elif how == "missing parent":
        spans[a] = dataclasses.replace(spans[a], parent_span_id=b"\x01" * 8)
    elif how == "unreadable value":
        spans[a] = _with_attr(spans[a], C.SEQ, "not a number")
    elif how == "same seq":
        spans[b] = _with_attr(spans[b], C.SEQ, spans[a].attribute(C.SEQ))
    elif how == "root first":
        spans.insert(0, spans.pop(root))
    return spans


BROKEN = [
    "identical duplicate",
    "different duplicate",
    "duplicate root",
    "cycle",
    "no root",
    "cycle, no root",
    "launch under a launch",
    "joined launch",
    "missing parent",
    "unreadable value",
    "same seq",
    "root first",
]


@pytest.mark.parametrize("how", BROKEN)
def test_broken_traces_rebuild_the_same_wide(files: dict[str, Path], how: str, monkeypatch) -> None:
    spans = _broken(_one_trace(files), how)
    as_spans, as_wide, made = _both(_batch_stream(spans), monkeypatch)
    assert made == 1
    assert as_wide == as_spans
    if how in ("different duplicate", "cycle, no root"):  # the structure check's problems, logged the same way
        assert as_wide[1]


@pytest.mark.parametrize("searches", [64, 0])
def test_random_breakage_rebuilds_the_same_wide(files: dict[str, Path], searches: int, monkeypatch) -> None:
    """``searches``: parents looked up in the launch ids' bytes before every launch is put in a dict (0: at once)."""
    monkeypatch.setattr(wide, "_SEARCHES", searches)
    for spans in randomly_broken(_one_trace(files), seed=25, count=40):
        as_spans, as_wide, _made = _both(_batch_stream(spans), monkeypatch)
        assert as_wide == as_spans


def randomly_broken(base: list, *, seed: int, count: int):
    """``count`` copies of ``base`` broken one to four ways from :data:`BROKEN` at random and shuffled (a wide
    trace's spans out of order)."""
    rng = random.Random(seed)
    for _ in range(count):
        spans = list(base)
        for _ in range(rng.randint(1, 4)):
            spans = _broken(spans, rng.choice(BROKEN), rng)
        rng.shuffle(spans)
        yield spans


def test_a_wide_trace_lets_its_launch_spans_go(files: dict[str, Path], monkeypatch) -> None:
    """Past WIDE_AT, a launch span is kept as its record and a few numbers, not as the span."""
    monkeypatch.setattr(wide, "WIDE_AT", 1)
    spans = _one_trace(files)
    stream = TraceStream.from_span_batches(lambda log: iter([list(spans)]), "test")
    (held,) = list(stream.span_lists(wide=True))
    assert isinstance(held, wide.WideTrace)
    assert len(held) == len(spans)
    launches = len(_launches(spans))
    assert len(held.records) == launches and len(held.raw) == len(spans) - launches
    assert not any(s.attribute(C.OP) is not None and s.attribute(C.SCOPE_KIND) is None for s in held.raw)


@pytest.mark.parametrize("name", ["demo", "stats", "folded", "stepped", "zero"])
def test_a_baseline_with_spliced_representatives_is_the_same_file(files, name, tmp_path, monkeypatch) -> None:
    """``baseline build`` writes a huge step's representative as bytes beside the message (issue 25); with every
    representative written so, the file is the whole message's, to the byte."""
    from launchtrace.analysis.fleet import baseline
    from launchtrace.baselines import read_baseline, write_baseline

    def built(spliced: dict | None) -> bytes:
        builder = baseline.BaselineBuilder(("service.name", "host.name"))
        builder.add_stream(TraceStream.from_paths([files[name]]))
        out = tmp_path / ("spliced.pb" if spliced is not None else "whole.pb")
        size = write_baseline(builder.to_proto(spliced), out, spliced)
        assert size == out.stat().st_size
        return out.read_bytes()

    whole = built(None)
    monkeypatch.setattr(baseline, "SPLICE_AT", 0)
    spliced: dict = {}
    assert built(spliced) == whole
    assert spliced  # every representative was spliced
    assert read_baseline(tmp_path / "spliced.pb").groups[0].scopes[0].topologies[0].representative
