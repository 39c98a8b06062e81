"""Property-based fuzzing (hypothesis) of every command that takes a trace file: ``pull --from file``,
``diff``, ``check-static``, ``graph``, ``report``, ``chrome-trace``, ``summary``, ``dataflow``, ``snapshot``.

Inputs are a real Warp run's export and the upstream fixtures with parts broken (wrong types, deleted and
duplicated nodes, hostile values), gzip and truncation of those, and random bytes. The contract: the command
runs in-process through ``launchtrace.cli.main`` and either succeeds (exit 0) or prints one line
``launchtrace <command>: error: ...`` and exits 2; nothing ever escapes as a traceback.
"""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from launchtrace import conventions as C
from launchtrace.cli import main
from test_fuzz_readers import FIXTURES, _real_export_lines, as_lines, broken_documents

FUZZ = settings(
    max_examples=int(os.environ.get("LAUNCHTRACE_FUZZ_EXAMPLES", "25")),
    deadline=None,
    phases=(Phase.explicit, Phase.reuse, Phase.generate),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
)


VERDICTS = {"diff", "check-static"}
"""Commands whose exit code 1 is an answer (the traces differ; the topology is not static), as with diff(1)."""


@pytest.fixture(scope="module")
def seeds(warp_cpu) -> dict[str, object]:
    docs: dict[str, object] = {"launchtrace-export": _real_export_lines()}
    for name in (
        "otlp_file_exporter_spec_traces.jsonl",
        "jaeger_v1_trace_ui_model.json",
        "tempo_v1_batches_trace.json",
    ):
        text = (FIXTURES / name).read_text()
        docs[name] = (
            [orjson.loads(ln) for ln in text.splitlines() if ln.strip()] if name.endswith("l") else orjson.loads(text)
        )
    return docs


@pytest.fixture(scope="module")
def good_file(seeds, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("good") / "good.jsonl"
    path.write_bytes(as_lines(seeds["launchtrace-export"]))
    return path


def commands(path: Path, good: Path, out: Path) -> dict[str, list[str]]:
    return {
        "pull": ["pull", str(path), "--out", str(out / "pulled.jsonl")],
        "diff": ["diff", str(good), str(path)],
        "check-static": ["check-static", str(path), "--scope", "step"],
        "graph": ["graph", str(path), "--out", str(out / "graphs"), "--formats", ""],
        "report": ["report", str(path), "--out", str(out / "report.html")],
        "chrome-trace": ["chrome-trace", str(path), "--out", str(out / "chrome.json")],
        "summary": ["summary", str(path)],
        "dataflow": ["dataflow", str(path)],
        "snapshot": ["snapshot", str(path), "--scope", "step", "--out", str(out / "step.json")],
    }


def assert_clean(name: str, argv: list[str], capsys) -> int:
    rc = main(argv)
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err, (name, captured.err[-2000:])
    assert rc in ((0, 1, 2) if name in VERDICTS else (0, 2)), (name, rc, captured.err[-500:])
    lines = captured.err.rstrip("\n").splitlines()
    assert all(line.isprintable() for line in lines), (name, captured.err[-500:])  # nothing from the file breaks a line
    if rc == 2:  # one error line; pull also lists each problem it skipped past, one line each
        errors = [ln for ln in lines if ln.startswith(f"launchtrace {name}: error: ")]
        listed = name == "pull" and any(ln.startswith("  error: ") for ln in lines)
        assert len(errors) == 1 or listed, (name, captured.err[-500:])
    return rc


@FUZZ
@given(data=st.data())
def test_every_command_on_broken_or_random_files_is_ok_or_one_clean_error(
    seeds, good_file, tmp_path_factory, capsys, data
) -> None:
    kind = data.draw(st.sampled_from(["broken", "broken", "broken-gz", "truncated", "bytes"]))
    if kind == "bytes":
        payload = data.draw(st.binary(max_size=300))
    else:
        _, doc = data.draw(broken_documents(seeds))
        payload = as_lines(doc)
        if kind == "truncated":
            payload = payload[: data.draw(st.integers(0, len(payload)))]
        elif kind == "broken-gz":
            payload = gzip.compress(payload)
    work = tmp_path_factory.mktemp("cmd")
    path = work / "input.jsonl"
    path.write_bytes(payload)
    for name, argv in commands(path, good_file, work).items():
        assert_clean(name, argv, capsys)


def test_a_summary_span_claiming_a_trillion_repetitions_is_not_expanded(seeds, tmp_path, capsys) -> None:
    """A tiny file whose folded summary claims 10**12 repetitions must not make a command expand them all
    (minutes of CPU and all the memory): it answers quickly, from the repetition count."""
    lines = seeds["launchtrace-export"]
    hits = 0
    for line in lines:
        for rs in line["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for span in ss["spans"]:
                    for attr in span.get("attributes", []):
                        if attr["key"] == C.FOLD_COUNT:
                            attr["value"] = {"intValue": str(10**12)}
                            hits += 1
    assert hits, "the seed run must hold a folded summary span"
    path = tmp_path / "huge.jsonl"
    path.write_bytes(as_lines(lines))
    for name, argv in commands(path, path, tmp_path).items():
        assert_clean(name, argv, capsys)


def test_missing_and_unreadable_paths_are_one_line_errors(tmp_path, good_file, capsys) -> None:
    missing = tmp_path / "nope.jsonl"
    folder = tmp_path / "empty"
    folder.mkdir()
    for target in (missing, folder):
        for name, argv in commands(target, good_file, tmp_path).items():
            assert assert_clean(name, argv, capsys) == 2
