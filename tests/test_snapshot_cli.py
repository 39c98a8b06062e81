"""Topology snapshots outside pytest: the format, ``launchtrace snapshot``, ``launchtrace diff --snapshot``, and
atomic writes under two real processes writing one file (pytest-xdist's case, without needing xdist)."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from launchtrace.cli import main
from launchtrace.model import BufferArg, LaunchRecord, ScopeRecord, Site
from launchtrace.snapshot import (
    SnapshotError,
    SnapshotOptions,
    build_snapshot,
    compare,
    parse_snapshot,
    relative_site,
    render_snapshot,
)
from launchtrace.topology import format_entry
from test_analysis_programs import Sim, write_trace_file


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("traces")
    sim = Sim()
    return {v: write_trace_file(folder / f"{v}.jsonl", v, 3, sim) for v in ("base", "dim", "swap", "insert")}


def _rec(kernel: str, ptrs: tuple[int, ...], dt: float = 0.01, line: int = 10) -> LaunchRecord:
    bufs = tuple(BufferArg(i, f"a{i}", p) for i, p in enumerate(ptrs))
    params = (*[f"a{i}" for i in range(len(ptrs))], "dt")
    site = Site("/abs/repo/sim.py", line, "step")
    return LaunchRecord(
        "launch", kernel, (8,), None, tuple((i, p) for i, p in enumerate(ptrs)), ((len(ptrs), dt),), site, params, bufs
    )


def test_the_format_has_no_pointers_or_absolute_paths_and_reads_back() -> None:
    records = [_rec("m.k", (0x7F0000001000, 0x7F0000002000)), _rec("m.k", (0x7F0000002000, 0))]
    doc = build_snapshot(records, name="step", root="/abs/repo")
    text = render_snapshot(doc)
    assert "0x7f" not in text.lower() and str(0x7F0000001000) not in text and "/abs/" not in text
    launches = [json.loads(line.strip().rstrip(",")) for line in text.splitlines() if line.startswith("    {")]
    assert launches[0]["buffers"] == {"a0": "<unowned #0>", "a1": "<unowned #1>"}
    assert launches[1]["buffers"] == {"a0": "<unowned #1>", "a1": None}  # shared buffer kept, null array null
    assert launches[0]["site"] == "sim.py:10 (step)" and launches[0]["scalars"] == {"dt": 0.01}
    assert parse_snapshot(text, "x.json") == json.loads(text)
    assert compare(parse_snapshot(text, "x.json"), doc, SnapshotOptions()) == []


def test_sites_are_shown_not_compared_and_tolerance_is_relative() -> None:
    stored = build_snapshot([_rec("m.k", (1,), 0.01, line=10)], name="s")
    moved = build_snapshot([_rec("m.k", (1,), 0.01, line=99)], name="s")
    assert compare(stored, moved, SnapshotOptions()) == []  # a launch moved to another line: same topology
    changed = build_snapshot([_rec("m.k", (1,), 0.0100001, line=99)], name="s")
    (entry,) = compare(stored, changed, SnapshotOptions())
    assert format_entry(entry) == "#0 m.k (from sim.py:10 (step)): scalar dt 0.01 -> 0.0100001, site " + (
        "sim.py:10 (step) -> sim.py:99 (step)"
    )
    assert compare(stored, changed, SnapshotOptions(float_tolerance={"dt": 1e-4})) == []
    assert compare(stored, changed, SnapshotOptions(float_tolerance={"*": 1e-4})) == []
    assert len(compare(stored, changed, SnapshotOptions(float_tolerance={"dt": 1e-9}))) == 1
    with pytest.raises(ValueError, match=r"float_tolerance\['dt'\] must be a finite number >= 0"):
        SnapshotOptions(float_tolerance={"dt": -1.0})


def test_scopes_inside_the_block_and_streams_by_first_appearance() -> None:
    scopes = {1: ScopeRecord(1, "step", "user"), 2: ScopeRecord(2, "collide", "timer", parent_id=1)}
    records = [
        dataclasses.replace(_rec("m.a", (1,)), scope_id=1, stream=0xBEEF00),
        dataclasses.replace(_rec("m.b", (1,)), scope_id=2, stream=0xDEAD00),
        dataclasses.replace(_rec("m.c", (1,)), scope_id=2, stream=0xBEEF00),
    ]
    doc = build_snapshot(records, scopes, name="s", base_scope=1)
    assert [(e.get("scope"), e["stream"]) for e in doc["launches"]] == [(None, 0), ("collide", 1), ("collide", 0)]
    whole = build_snapshot(records, scopes, name="s")
    assert [e.get("scope") for e in whole["launches"]] == ["step", "step/collide", "step/collide"]
    one_stream = [records[0], dataclasses.replace(records[1], stream=0xBEEF00), records[2]]
    moved = build_snapshot(one_stream, scopes, name="s", base_scope=1)
    (entry,) = compare(doc, moved, SnapshotOptions())
    assert format_entry(entry) == "#1 m.b (from sim.py:10 (step)): stream 1 -> 0"
    assert compare(doc, moved, SnapshotOptions(ignore_streams=True)) == []
    ignored = build_snapshot(records, scopes, name="s", options=SnapshotOptions(ignore_streams=True))
    assert '"stream":' not in render_snapshot(ignored) and ignored["options"] == {"scalars": True, "streams": False}


def test_relative_sites() -> None:
    site = Site("/home/u/proj/pkg/sim.py", 4, "f")
    assert relative_site(site, "/home/u/proj") == "pkg/sim.py:4 (f)"
    assert relative_site(Site("/usr/lib/python3/site-packages/warp/x.py", 1, "g"), "/home/u/proj") == "warp/x.py:1 (g)"
    assert relative_site(Site("/elsewhere/sim.py", 2, "h"), "/home/u/proj") == "sim.py:2 (h)"
    assert relative_site(Site("<stdin>", 1, "<module>"), "/home/u/proj") == "<stdin>:1 (<module>)"


@pytest.mark.parametrize(
    "text",
    [
        "{",
        "[]",
        '{"launchtrace_snapshot": 2, "launches": []}',
        '{"launchtrace_snapshot": 1, "launches": [{"op": 1}]}',
        '{"launchtrace_snapshot": 1, "launches": [], "options": "all"}',
        '{"launchtrace_snapshot": 1, "launches": [{"op": "launch", "kernel": "k", "site": "s", "dim": [1], '
        '"buffers": {}, "scalars": {"x": {"y": 1}}}]}',
        '{"launchtrace_snapshot": 1, "launches": [{"op": "launch", "kernel": "k", "site": "s", "dim": [1], '
        '"buffers": {}, "stream": "s0"}]}',
    ],
)
def test_a_broken_snapshot_is_one_clear_error(text: str, files, tmp_path, capsys) -> None:
    with pytest.raises(SnapshotError, match=r"^bad\.json: "):
        parse_snapshot(text, "bad.json")
    bad = tmp_path / "bad.json"
    bad.write_text(text)
    assert main(["diff", "--snapshot", str(bad), str(files["base"]), "--scope", "step"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"launchtrace diff: error: {bad}: ")


def test_snapshot_command_and_diff_against_it(files, tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)  # the program lies outside the current folder: its sites are base names
    out = tmp_path / "step.json"
    assert main(["snapshot", str(files["base"]), "--scope", "step", "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["scope"] == "step" and doc["source"] == "base.jsonl step #1" and len(doc["launches"]) == 3
    assert main(["diff", "--snapshot", str(out), str(files["base"])]) == 0
    assert capsys.readouterr().out == f"topology: equal: 3 occurrence(s) of 'step' against {out}\n"

    expected = {
        "dim": "  #1 test_analysis_programs.add (from test_analysis_programs.py:74 (step)): dim (64,) -> (32,)",
        "swap": "  #1 test_analysis_programs.add (from test_analysis_programs.py:74 (step)): buffer b sim.v -> sim.alt",
        "insert": "  #1 inserted test_analysis_programs.add dim=(64,) (from test_analysis_programs.py:71 (step))",
    }
    for variant, line in expected.items():
        assert main(["diff", "--snapshot", str(out), str(files[variant])]) == 1
        lines = capsys.readouterr().out.splitlines()
        assert lines[0].startswith("topology: differs") and lines[1] == "scope step 3 occurrences #0-#2: 3 -> " + (
            "4 records" if variant == "insert" else "3 records"
        )
        assert lines[2:] == [line]  # the same change in every occurrence: one line

    assert main(["diff", "--snapshot", str(out), str(files["swap"]), "--format", "json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["equal"] is False and data["counts"]["changed"] == 3
    assert main(["diff", "--snapshot", str(out), str(files["swap"]), "--format", "markdown"]) == 1
    md = capsys.readouterr().out
    assert md.startswith("### launchtrace diff: topology: differs (0 inserted, 0 removed, 3 changed)")
    assert "| step #0-#2 | changed | 1 | `test_analysis_programs.add` | buffer b sim.v -> sim.alt |" in md


def test_snapshot_command_refuses_what_it_should(files, tmp_path, capsys) -> None:
    mine = tmp_path / "notes.json"
    mine.write_text('{"mine": true}\n')
    assert main(["snapshot", str(files["base"]), "--scope", "step", "--out", str(mine)]) == 2
    assert mine.read_text() == '{"mine": true}\n'  # nothing the user owns is overwritten
    assert "exists and is not a launchtrace snapshot; not overwriting it" in capsys.readouterr().err
    assert main(["snapshot", str(files["base"]), "--scope", "nope"]) == 2
    assert capsys.readouterr().err.strip().endswith("scope 'nope' not found in " + str(files["base"]))
    assert main(["snapshot", str(files["base"]), "--scope", "step", "--occurrence", "7"]) == 2
    assert "has 3 occurrence(s), 0..2" in capsys.readouterr().err
    assert main(["diff", "--snapshot", str(mine), str(files["base"])]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not a launchtrace snapshot" in err


WRITER = textwrap.dedent(
    """
    import sys
    from launchtrace.snapshot import write_atomic
    path, tag = sys.argv[1], sys.argv[2]
    text = (tag * 50 + "\\n") * 2000  # about 100 kB: a torn write would show
    for _ in range(200):
        write_atomic(path, text)
    """
)


def test_two_processes_writing_one_snapshot_never_leave_a_torn_file(tmp_path: Path) -> None:
    """What two pytest-xdist workers updating the same snapshot would do, with two real processes: every read
    while they write sees one whole version, and no temporary file is left behind."""
    path = tmp_path / "__launchtrace__" / "m" / "t.step.json"
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), tag]) for tag in ("a", "b")]
    whole = {tag: (tag * 50 + "\n") * 2000 for tag in ("a", "b")}
    seen = set()
    while any(w.poll() is None for w in writers):
        if path.exists():
            text = path.read_text()
            assert text in whole.values(), f"torn read of {len(text)} characters"
            seen.add(text[0])
    assert [w.wait() for w in writers] == [0, 0]
    assert path.read_text() in whole.values() and seen
    assert [p.name for p in path.parent.iterdir()] == ["t.step.json"]
