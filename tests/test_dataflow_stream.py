"""``dataflow`` streamed (issue 25): the whole-run views printed as from the lists, without holding the runs.

Real Warp programs on the CPU: ``test_steps``' scoped run (written in order, latest trace first, and with the
unscoped work's trace last, as the exporter writes it), its zero-code timers, the analyzer tests' program, and
``tests/race_program.py`` (two threads, a hazard) run under the real exporter.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from launchtrace.analysis.dataflow import build_dataflow
from launchtrace.analysis.dataflow_stream import stream_dataflow
from launchtrace.analysis.runs import views
from launchtrace.cli import main
from launchtrace.cli._analyzer import write_json
from launchtrace.cli.dataflow import _json, _text
from launchtrace.render.escape import terminal_lines
from launchtrace.sources.each import Traces
from launchtrace.sources.loading import load_traces
from test_analysis_programs import Sim, write_trace_file
from test_steps import _stepped, _write, _zero_code

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("flowstream")
    out = {
        "stepped": _write(folder / "stepped.jsonl", _stepped),  # latest trace first: every trace is late
        "in-order": _write(folder / "in-order.jsonl", _stepped, reverse=False),
        "zero": _write(folder / "zero.jsonl", _zero_code),
        "base": write_trace_file(folder / "base.jsonl", "base", 3, Sim()),
    }
    lines = out["in-order"].read_text(encoding="utf-8").splitlines(keepends=True)
    out["late"] = folder / "late.jsonl"  # the unscoped work's trace last, as the exporter writes it
    out["late"].write_text("".join(lines[1:] + lines[:1]), encoding="utf-8")
    race = folder / "race.jsonl"
    subprocess.run([sys.executable, str(HERE / "race_program.py"), str(race)], check=True, timeout=300)
    out["race"] = race
    return out


def _listed(paths: list[Path], fmt: str, edges: bool = False) -> str:
    flows = [(v.label, build_dataflow(v.data, v.graphs)) for v in views(load_traces(paths))]
    if fmt == "json":
        return json_text([_json(label, f) for label, f in flows])
    return terminal_lines([line for label, f in flows for line in _text(label, f, edges)])


def json_text(data) -> str:
    import io
    from contextlib import redirect_stdout

    buf = io.StringIO()
    with redirect_stdout(buf):
        write_json(data, None)
    return buf.getvalue()


@pytest.mark.parametrize("name", ["stepped", "in-order", "late", "zero", "base", "race"])
@pytest.mark.parametrize("fmt", ["text", "json", "edges"])
def test_streamed_dataflow_prints_what_the_lists_print(files, name, fmt, capsys) -> None:
    argv = ["dataflow", str(files[name])] + (["--format", "json"] if fmt == "json" else [])
    argv += ["--edges"] if fmt == "edges" else []
    main(argv)
    assert capsys.readouterr().out == _listed([files[name]], "json" if fmt == "json" else "text", fmt == "edges")


def test_several_runs_print_in_their_order(files, capsys) -> None:
    paths = [files["late"], files["base"], files["race"]]  # three files: three runs
    main(["dataflow", *map(str, paths)])
    assert capsys.readouterr().out == _listed(paths, "text")


def test_the_race_is_found_streamed(files, capsys) -> None:
    assert main(["dataflow", str(files["race"]), "--fail-on-hazard"]) == 1
    assert "HAZARD" in capsys.readouterr().out


def test_records_wait_for_their_turn_a_few_traces_at_a_time(files, tmp_path) -> None:
    """Forty copies of the scoped run in one process: the records waiting in the heap stay a few traces'
    worth (the unscoped work's trace of each copy is read ahead when due), not the run."""
    text = files["late"].read_text(encoding="utf-8")
    many = tmp_path / "many.jsonl"
    with many.open("w", encoding="utf-8") as f:
        for c in range(40):  # new trace ids and seqs past the previous copy's, one resource: one long run
            copy = text.replace('"traceId":"', f'"traceId":"{c:08x}')
            f.write(_shift_seq(copy, c * 1000))
    flows = stream_dataflow(Traces([many]))
    assert flows is not None and len(flows) == 1
    per_copy = sum(len(t) for t in load_traces(files["late"]))
    assert flows[0].n == 40 * per_copy
    assert flows[0].waiting <= 3 * per_copy  # not 40 copies
    for flow in flows:
        flow.close()


def _shift_seq(text: str, by: int) -> str:
    import re

    def shift(m: re.Match) -> str:
        return m.group(1) + str(int(m.group(2)) + by) + m.group(3)

    text = re.sub(r'("traceId":"[0-9a-f]{8})[0-9a-f]{8}', lambda m: m.group(1), text)  # keep 32 hex digits
    return re.sub(r'("launchtrace\.seq","value":\{"intValue":")(\d+)(")', shift, text)


def test_rows_the_output_does_not_list_are_counted_not_kept(files) -> None:
    """The text output lists no records or accesses (and edges only with ``--edges``): those rows are counted,
    the same counts as when they are kept, and the kept ones read back as they were added."""
    kept = stream_dataflow(Traces([files["race"]]))
    counted = stream_dataflow(Traces([files["race"]]), rows=("edges",))
    assert kept is not None and counted is not None
    for a, b in zip(kept, counted, strict=True):
        assert (a.records.count, a.accesses.count, a.edges.count) == (b.records.count, b.accesses.count, b.edges.count)
        assert a.accesses.count > 0 and list(a.edges) == list(b.edges)
        assert [r["index"] for r in a.records] == list(range(a.n))
        with pytest.raises(ValueError, match="counted, not kept"):
            list(b.accesses)
        a.close()
        b.close()


def test_only_rebuilds_the_traces_asked_for(files, monkeypatch) -> None:
    """The reader of late traces rebuilds only those (``Traces.only``): the same traces, at the same arrivals,
    as iterating; before a first read through it answers by iterating."""
    import launchtrace.sources.each as each

    paths = [files["late"], files["base"], files["race"]]
    every = [(key.arrival, trace) for key, trace in Traces(paths)]
    wanted = {0, 2, len(every) - 1}
    fresh = Traces(paths)
    assert [(a, t.records) for a, t in fresh.only(wanted)] == [(a, t.records) for a, t in every if a in wanted]
    source = Traces(paths)
    for _ in source:
        pass
    rebuilt = []
    real = each._rebuilt

    def counting(where, spans):
        rebuilt.append(where)
        return real(where, spans)

    monkeypatch.setattr(each, "_rebuilt", counting)
    picked = list(source.only(wanted))
    assert [(a, t.records, t.attributes) for a, t in picked] == [
        (a, t.records, t.attributes) for a, t in every if a in wanted
    ]
    assert len(rebuilt) == len(wanted)  # not every trace of the input


@pytest.mark.parametrize("keep", [0, 7, 40, 16384])
@pytest.mark.parametrize("name", ["stepped", "late", "many"])
def test_late_traces_kept_or_read_again_print_the_same(files, tmp_path, name, keep, monkeypatch, capsys) -> None:
    """Late traces come from the first read where they fit in ``_KEEP_LATE`` records, the others from
    a third reader (started only when one of those is due): the output is the lists' whichever way, ``--edges``
    and JSON too (``stepped``: every trace late, written latest first; ``many``: forty copies of ``late``)."""
    import launchtrace.analysis.dataflow_stream as flow_stream

    path = files.get(name)
    if path is None:
        text = files["late"].read_text(encoding="utf-8")
        path = tmp_path / "many.jsonl"
        path.write_text(
            "".join(_shift_seq(text.replace('"traceId":"', f'"traceId":"{c:08x}'), c * 1000) for c in range(40))
        )
    monkeypatch.setattr(flow_stream, "_KEEP_LATE", keep)
    readers = []
    real_only = Traces.only

    def counting(self, wanted):
        readers.append(len(wanted))
        return real_only(self, wanted)

    monkeypatch.setattr(Traces, "only", counting)
    for fmt in ("text", "json", "edges"):
        argv = ["dataflow", str(path)] + (["--format", "json"] if fmt == "json" else [])
        main(argv + (["--edges"] if fmt == "edges" else []))
        assert capsys.readouterr().out == _listed([path], "json" if fmt == "json" else "text", fmt == "edges")
    if keep == 0:
        assert readers and all(readers)  # nothing kept: every late trace read again
    if keep == 16384:
        assert readers == []  # every late trace kept: no third read
