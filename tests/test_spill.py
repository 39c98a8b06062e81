"""One wide trace's records written out to a temporary file (issue 25): :mod:`launchtrace.sources.spill`.

Every comparison runs on real files (``launchtrace demo`` runs, a folded step, ``test_steps``' scoped and zero-code
programs, and a wide trace of ``benchmarks/scale_inputs.py``) twice: as spans, and with every trace made wide and
its records written out after a few (``SPILL_AT`` and ``CHUNK`` made small, so one trace is many sorted runs of
many chunks). The rebuilt records (every field, fold included), scopes, attributes and logged problems must be the
same, in the same order, and so must what ``summary`` prints (text and JSON) and the steps it cuts. The broken
traces of ``test_wide`` (duplicates, cycles, no root, joined launches, unreadable values, equal sequence numbers)
are checked the same way, and the temporary files must be closed afterwards, also when a reader fails.
"""

from __future__ import annotations

import gc
import subprocess
import sys
import tempfile
import weakref
from pathlib import Path

import pytest

from launchtrace.cli import main
from launchtrace.model import LaunchRecord
from launchtrace.sources import spill, wide
from launchtrace.sources.stream import TraceStream
from launchtrace.steps import occurrences
from test_wide import BROKEN, _batch_stream, _broken, _one_trace, files, randomly_broken  # noqa: F401 (files: the fixture)

ROOT = Path(__file__).resolve().parent.parent
NAMES = ["demo", "stats", "folded", "stepped", "zero"]


@pytest.fixture(scope="module", autouse=True)
def _instrumentation_as_found():
    """The demo runs of ``test_wide``'s ``files`` leave Warp instrumented: undone after this module, so a later
    module that expects it off (``test_testing_api``) finds it as it was."""
    from launchtrace import capture

    before = capture.is_instrumented()
    yield
    if not before and capture.is_instrumented():
        capture.uninstrument()


@pytest.fixture(scope="module")
def wide_file(files: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:  # noqa: F811
    """One trace of a step root and 3,000 launch children, the root written last (``scale_inputs --shape wide``
    from the demo run)."""
    out = tmp_path_factory.mktemp("spill") / "wide.jsonl"
    script = ROOT / "benchmarks" / "scale_inputs.py"
    args = [str(out), "--shape", "wide", "--spans", "3000", "--source", str(files["demo"])]
    subprocess.run([sys.executable, str(script), *args], check=True, capture_output=True)
    return out


def _state(trace) -> tuple:
    """Everything of a rebuilt trace, in order (``fold`` is not compared by ``==``: it is listed)."""
    records = list(trace.records)
    assert len(trace.records) == len(records) and bool(trace.records) == bool(records)
    return (
        records,
        [r.fold for r in records],
        [repr(r.scalars) for r in records],  # 1, True and 1.0 told apart
        list(trace.scopes.items()),
        list(trace.attributes.items()),
    )


def _streamed(stream: TraceStream, spill: bool = False) -> tuple[list, list[str], int]:
    stream.spill = spill  # as Traces(..., spill=True) sets it for summary
    traces = [_state(t) for t in stream]
    return traces, [str(p) for p in stream.log.problems], stream.spans


def _spilling(monkeypatch: pytest.MonkeyPatch, at: int = 5, chunk: int = 3) -> list:
    """Every trace wide, its records written out past ``at``, in chunks of ``chunk``; the files made."""
    monkeypatch.setattr(wide, "WIDE_AT", 1)
    monkeypatch.setattr(spill, "SPILL_AT", at)
    monkeypatch.setattr(spill, "CHUNK", chunk)
    monkeypatch.setattr(spill, "_ZEROS", [0] * chunk)
    made: list = []
    original = tempfile.TemporaryFile

    def recorded(*args, **kwargs):
        file = original(*args, **kwargs)
        made.append(weakref.ref(file))  # not the file: holding it would keep it open
        return file

    monkeypatch.setattr(tempfile, "TemporaryFile", recorded)
    return made


def _both(make, monkeypatch: pytest.MonkeyPatch, at: int = 1) -> tuple[tuple, tuple, list]:
    """The stream read as spans, then with every trace wide and spilled past ``at`` records; and the temporary
    files made."""
    monkeypatch.setattr(wide, "WIDE_AT", 10**9)
    as_spans = _streamed(make())
    made = _spilling(monkeypatch, at)
    as_spilled = _streamed(make(), spill=True)
    return as_spans, as_spilled, made


def _all_closed(made: list) -> bool:
    """Whether every temporary file made is closed (an unnamed file is gone once closed)."""
    gc.collect()
    return all(ref() is None or ref().closed for ref in made)


@pytest.mark.parametrize("at", [1, 5])
@pytest.mark.parametrize("name", NAMES)
def test_real_files_rebuild_the_same_spilled(files, name: str, at: int, monkeypatch) -> None:  # noqa: F811
    as_spans, as_spilled, made = _both(lambda: TraceStream.from_paths([files[name]]), monkeypatch, at)
    assert made or at > 1  # records were written out (every trace of these files holds fewer than 5)
    assert as_spans[0] and as_spilled == as_spans
    assert _all_closed(made)


def test_the_wide_file_rebuilds_the_same_spilled(wide_file: Path, monkeypatch) -> None:
    as_spans, as_spilled, made = _both(lambda: TraceStream.from_paths([wide_file]), monkeypatch)
    assert len(made) == 1 and len(as_spans[0][0][0]) == 3000, (len(made), len(as_spans[0][0][0]))
    assert as_spilled == as_spans
    assert _all_closed(made)


@pytest.mark.parametrize("how", BROKEN)
def test_broken_traces_rebuild_the_same_spilled(files: dict[str, Path], how: str, monkeypatch) -> None:  # noqa: F811
    spans = _broken(_one_trace(files), how)
    as_spans, as_spilled, made = _both(_batch_stream(spans), monkeypatch)
    assert made and as_spilled == as_spans


@pytest.mark.parametrize("runs", [16, 2])
def test_random_breakage_rebuilds_the_same_spilled(files, runs: int, monkeypatch) -> None:  # noqa: F811
    """``runs``: sorted runs of one level merged into one (2: runs of runs of runs, merged in the file)."""
    monkeypatch.setattr(spill, "MAX_RUNS", runs)
    for spans in randomly_broken(_one_trace(files), seed=26, count=25):  # runs out of order: merged
        as_spans, as_spilled, _made = _both(_batch_stream(spans), monkeypatch)
        assert as_spilled == as_spans


def _cut(path: Path) -> list[tuple]:
    out = []
    for trace in TraceStream.from_paths([path]):
        for o in occurrences(trace):
            out.append((o.name, o.index, o.trace, o.start_ns, o.end_ns, list(o.records), o.scope_id, o.scopes))
            assert len(o.records) == len(out[-1][5]) and bool(o.records) == bool(out[-1][5])
    return out


@pytest.mark.parametrize("name", [*NAMES, "wide"])
def test_steps_and_summary_are_the_same_spilled(files, wide_file, name, monkeypatch, capsys) -> None:  # noqa: F811
    """The steps cut (each step's records written to the file as they come) and ``summary``'s text and JSON."""
    path = wide_file if name == "wide" else files[name]

    def outputs() -> tuple:
        printed = []
        for form in ("text", "json"):
            assert main(["summary", str(path), "--format", form]) == 0
            printed.append(capsys.readouterr().out)
        return _cut(path), printed

    monkeypatch.setattr(wide, "WIDE_AT", 10**9)
    as_spans = outputs()
    made = _spilling(monkeypatch, at=1 if name != "wide" else 7, chunk=4)
    assert outputs() == as_spans
    assert made and _all_closed(made)


def test_one_step_known_without_reading_is_cut_the_same(wide_file: Path, monkeypatch) -> None:
    """A spilled trace whose launches all lie in its root's scope is cut without a pass over its records
    (``steps._one_step``): the same steps as the pass over them, and as the list."""
    from launchtrace import steps

    monkeypatch.setattr(wide, "WIDE_AT", 10**9)
    as_list = _cut(wide_file)
    _spilling(monkeypatch, at=7, chunk=4)

    def spilled_cut() -> list[tuple]:
        out = []
        stream = TraceStream.from_paths([wide_file])
        stream.spill = True
        for trace in stream:
            assert trace.records.scope_ids() is not None
            for o in occurrences(trace):
                out.append((o.name, o.index, o.trace, o.start_ns, o.end_ns, list(o.records), o.scope_id, o.scopes))
        return out

    assert spilled_cut() == as_list
    monkeypatch.setattr(steps, "_one_step", lambda *args: None)
    assert spilled_cut() == as_list


def test_only_readers_that_ask_get_spilled_records(files, wide_file: Path, monkeypatch) -> None:  # noqa: F811
    """The views read a stream as it comes: their wide traces' records stay lists; ``summary``'s (``Traces(...,
    spill=True)``) do not, nor those of ``baseline build`` and ``alert``, which set the stream's ``spill``."""
    from launchtrace.sources.each import Traces

    made = _spilling(monkeypatch, at=7, chunk=4)
    assert all(type(t.records) is list for t in TraceStream.from_paths([wide_file]))
    assert all(type(t.records) is list for _, t in Traces([wide_file, files["demo"]]))
    assert not made
    spilled = [t.records for _, t in Traces([wide_file], spill=True)]
    assert len(spilled) == 1 and type(spilled[0]) is spill.SpilledRecords.__subclasses__()[0]
    assert made and len(list(spilled[0])) == 3000


def test_no_temporary_file_holds_the_records_in_memory(wide_file: Path, monkeypatch, capsys) -> None:
    """Where no temporary file can be made (a full or read-only ``$TMPDIR``), ``summary`` holds the records as
    before and prints the same."""
    monkeypatch.setattr(wide, "WIDE_AT", 10**9)
    assert main(["summary", str(wide_file)]) == 0
    expected = capsys.readouterr().out
    _spilling(monkeypatch, at=7, chunk=4)

    def unwritable(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(tempfile, "TemporaryFile", unwritable)
    from launchtrace.sources.each import Traces

    assert all(type(t.records) is list for _, t in Traces([wide_file], spill=True))
    assert main(["summary", str(wide_file)]) == 0
    assert capsys.readouterr().out == expected


class _Full:
    """A file on a full disk: every write fails."""

    def __init__(self, file) -> None:
        self.file = file

    def __getattr__(self, name: str):
        return getattr(self.file, name)

    def write(self, data: bytes) -> int:
        raise OSError(28, "No space left on device")


def test_a_full_disk_is_said_and_leaves_no_file_open(wide_file: Path, monkeypatch, capsys) -> None:
    made = _spilling(monkeypatch, at=100, chunk=10)
    written = []
    original = spill.SpillFile.open

    def filling(self):
        file = original(self)
        written.append(1)
        return file if len(written) <= 20 else _Full(file)  # the disk fills up after 20 chunks

    monkeypatch.setattr(spill.SpillFile, "open", filling)
    assert main(["summary", str(wide_file)]) == 2
    assert "No space left on device" in capsys.readouterr().err
    assert made and _all_closed(made)


def test_a_failing_reader_leaves_no_file_open(wide_file: Path, monkeypatch) -> None:
    from launchtrace.analysis import summary_state

    made = _spilling(monkeypatch, at=100, chunk=10)

    def failing(self, key, trace, occs=None):
        for n, _rec in enumerate(trace.records):
            if n == 150:
                raise RuntimeError("reader failed")

    monkeypatch.setattr(summary_state.SummaryState, "add", failing)
    with pytest.raises(RuntimeError, match="reader failed"):
        main(["summary", str(wide_file)])
    assert made and _all_closed(made)


def test_records_marshal_cannot_write_are_pickled(files: dict[str, Path], monkeypatch) -> None:  # noqa: F811
    """A value ``marshal`` does not write (a subclass of int), and records past ``MAX_BASES`` distinct calls,
    come back the same."""

    records = [r for t in TraceStream.from_paths([files["demo"]]) for r in t.records][:40]
    records[3] = records[3].__class__(**{**_fields(records[3]), "thread": Odd(7)})
    monkeypatch.setattr(spill, "MAX_BASES", 2)
    store = spill.SpillFile()
    chunks = [store.write(list(range(at, at + 8)), records[at : at + 8]) for at in range(0, 40, 8)]
    back = [r for c in chunks for r in store.read(c)[1]]
    numbers = [n for c in chunks for n in store.read(c)[0]]
    assert back == records and numbers == list(range(40))
    assert type(back[3].thread) is Odd
    assert [repr(r.scalars) for r in back] == [repr(r.scalars) for r in records]
    store.close()


class Odd(int):
    """An int ``marshal`` does not write (pickle does)."""


def test_records_neither_can_write_stay_in_memory(files: dict[str, Path]) -> None:  # noqa: F811
    class Local(int):  # pickle cannot find it by name
        pass

    records = [r for t in TraceStream.from_paths([files["demo"]]) for r in t.records][:6]
    records[2] = records[2].__class__(**{**_fields(records[2]), "thread": Local(3)})
    store = spill.SpillFile()
    chunk = store.write(list(range(6)), records)
    assert store.read(chunk)[1] == records and type(store.read(chunk)[1][2].thread) is Local
    store.close()


def _fields(rec: LaunchRecord) -> dict:
    return {name: getattr(rec, name) for name in rec.__slots__}


def _fleet_outputs(paths: dict[str, Path], out: Path) -> dict[str, bytes]:
    """``baseline build``'s file of each input, ``alert`` (text) of each against its own baseline and against
    another program's (new topologies: their representatives diffed), and ``alert --format json`` among peers
    (every trace a group) of all inputs together."""
    got: dict[str, bytes] = {}
    names = list(paths)
    for name in names:
        base = out / f"{name}.pb"
        assert main(["baseline", "build", "--from", str(paths[name]), "--out", str(base), "--quiet"]) == 0
        got[f"baseline {name}"] = base.read_bytes()
    for i, name in enumerate(names):
        for other in (name, names[(i + 1) % len(names)]):
            text = out / "alert.txt"
            args = ["alert", "--baseline", str(out / f"{other}.pb"), "--from", str(paths[name]), "--quiet"]
            assert main([*args, "--out", str(text)]) in (0, 1)
            got[f"alert {name} against {other}"] = text.read_bytes()
    peers = out / "peers.json"
    args = ["alert", *(x for p in paths.values() for x in ("--from", str(p))), "--group-by", "trace_id"]
    assert main([*args, "--format", "json", "--quiet", "--out", str(peers)]) in (0, 1)
    got["peers"] = peers.read_bytes()
    return got


def test_baseline_and_alert_are_the_same_spilled(files, wide_file, monkeypatch, tmp_path) -> None:  # noqa: F811
    """``baseline build`` and ``alert`` read their steps from the temporary file (renamed as they are read, the
    samples as arrays, a big representative spliced straight from the file): the baseline files, ``alert``'s text
    against a baseline and its JSON among peers the same to the byte as from lists; remembered calls forgotten
    and worked out again along the way."""
    from launchtrace.analysis import segments
    from launchtrace.analysis.fleet import baseline, records

    paths = {**{n: files[n] for n in NAMES}, "wide": wide_file}
    monkeypatch.setattr(wide, "WIDE_AT", 10**9)
    as_lists = _fleet_outputs(paths, tmp_path)  # the same paths both times: alert's header names the baseline
    made = _spilling(monkeypatch, at=7, chunk=4)
    monkeypatch.setattr(baseline, "SPLICE_AT", 5)  # the wide file's representative and the demo's spliced
    monkeypatch.setattr(segments, "MADE_MAX", 3)
    monkeypatch.setattr(records, "MADE_MAX", 3)
    as_spilled = _fleet_outputs(paths, tmp_path)
    assert list(as_spilled) == list(as_lists)
    for key in as_lists:
        assert as_spilled[key] == as_lists[key], key
    assert made and _all_closed(made)
    drifted = [key for key, text in as_lists.items() if b"topology_drift" in text]
    assert drifted, "no new topology's representative was diffed"


def test_record_bytes_of_records_read_back_tell_values_apart(files: dict[str, Path]) -> None:  # noqa: F811
    """``iter_record_bytes`` (the splice of a spilled representative) remembers a call by the values of its dims
    and scalars, not by their identity (each record read back holds new ones, their ids reused once let go):
    ``1``, ``True`` and ``1.0``, ``0.0`` and ``-0.0``, another dim, each made into its own bytes, as alone."""
    from launchtrace.analysis.fleet.records import iter_record_bytes, record_bytes
    from launchtrace.fastinit import slot_copier

    copy = slot_copier(LaunchRecord, ("dim", "scalars"))
    base = next(r for t in TraceStream.from_paths([files["demo"]]) for r in t.records if r.scalars)
    key = base.scalars[0][0]
    variants = [((64,), 1), ((64,), True), ((64,), 1.0), ((64,), -0.0), ((64,), 0.0), ((32,), 1)] * 3

    def read_back():  # new objects each time, let go before the next: as records read from a spill file
        for dim, value in variants:
            yield copy(base, tuple(list(dim)), tuple((k, v) for k, v in ((key, value),)))

    alone = [record_bytes([copy(base, dim, ((key, value),))])[0] for dim, value in variants]
    assert len(set(alone)) == 6
    assert list(iter_record_bytes(read_back())) == alone
