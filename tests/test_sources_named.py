"""The one grammar of sources (docs/sources.md): a file, a folder, or ``jaeger+URL`` / ``tempo+URL`` with pull's
query options in the URL; the earlier ``--from KIND URL`` still works, with one warning line."""

from __future__ import annotations

import argparse
import re
import shutil
from pathlib import Path

import pytest

from conftest import FIXTURES
from launchtrace import capture
from launchtrace.cli import main
from launchtrace.cli._fleet import source_kind
from launchtrace.cli._sources import backend_args
from launchtrace.errors import UserError
from launchtrace.sources.named import parse_backend

JAEGER_DOC = FIXTURES / "jaeger_otlp_rich_traces.json"


def test_backend_names_parse_with_their_options() -> None:
    name = parse_backend("jaeger+http://127.0.0.1:16686/?service=sim&since=1h&trace_id=ab&trace-id=cd")
    assert (name.kind, name.url) == ("jaeger", "http://127.0.0.1:16686")
    assert name.options == (("service", "sim"), ("since", "1h"), ("trace-id", "ab"), ("trace-id", "cd"))
    assert parse_backend("tempo+https://tempo:3200/prefix").url == "https://tempo:3200/prefix"
    for path in ("run.jsonl", "runs/", "jaeger.jsonl", "jaeger+notaurl", "/tmp/x+http://y"):
        assert parse_backend(path) is None, path


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("http://127.0.0.1:16686", "say which backend: jaeger+http://127.0.0.1:16686 or tempo+"),
        ("jaeger+http://h:1?servce=x", "unknown option 'servce'"),
        ("jaeger+http://:16686", "no host"),
    ],
)
def test_bad_backend_names_are_one_clear_error(text: str, message: str) -> None:
    with pytest.raises(UserError, match=re.escape(message)):
        parse_backend(text)


def test_url_options_win_over_the_command_line() -> None:
    args = argparse.Namespace(service="cli", limit=20, trace_id=["x"], protobuf=False, since=None)
    merged = backend_args(parse_backend("tempo+http://t:3200?service=url&limit=5&protobuf=1&trace-id=a"), args)
    assert (merged.kind, merged.source, merged.service, merged.limit, merged.protobuf) == (
        "tempo",
        "http://t:3200",
        "url",
        5,
        True,
    )
    assert merged.trace_id == ["a"] and merged.since is None and args.service == "cli"
    with pytest.raises(UserError, match="limit='many' is not a number"):
        backend_args(parse_backend("jaeger+http://j:1?limit=many"), args)


def test_the_earlier_from_kind_spelling_still_works_with_one_warning(tmp_path: Path, capsys) -> None:
    new, old = tmp_path / "new.jsonl", tmp_path / "old.jsonl"
    assert main(["pull", str(JAEGER_DOC), "--out", str(new), "--quiet"]) == 0
    assert "deprecated" not in capsys.readouterr().err
    assert main(["pull", "--from", "file", str(JAEGER_DOC), "--out", str(old), "--quiet"]) == 0
    err = capsys.readouterr().err
    assert err.startswith(f"launchtrace: warning: --from file {JAEGER_DOC} is deprecated; write {JAEGER_DOC}")
    assert new.read_bytes() == old.read_bytes()
    assert main(["pull", "--from", str(JAEGER_DOC), "--out", str(new), "--quiet"]) == 0  # --from SOURCE is new
    assert "deprecated" not in capsys.readouterr().err
    args = argparse.Namespace(source_spec=["jaeger", "http://j:16686"], service="s", trace_id=[], limit=20)
    assert source_kind(args) == ("jaeger", ["http://j:16686"])
    assert "--from jaeger http://j:16686 is deprecated; write --from jaeger+http://j:16686" in capsys.readouterr().err
    assert source_kind(args) == ("jaeger", ["http://j:16686"])  # asked again: no second warning
    assert capsys.readouterr().err == ""


def test_every_analyzer_takes_a_folder_and_refuses_a_bare_url(tmp_path: Path, capsys) -> None:
    folder = tmp_path / "runs"
    folder.mkdir()
    demo = tmp_path / "demo.jsonl"
    try:
        assert main(["demo", "--out", str(demo)]) == 0
    finally:
        capture.uninstrument()  # the demo, run in this process, leaves Warp instrumented as a program would
    shutil.copy(demo, folder / "a.jsonl")
    capsys.readouterr()
    assert main(["summary", str(folder), "--format", "json"]) == 0
    assert main(["summary", str(demo), "--format", "json"]) == 0
    by_folder, by_file = capsys.readouterr().out.split("\n}\n")[:2]
    assert by_folder.strip() == by_file.strip() and '"records": 0' not in by_file
    for command in ("summary", "check-static", "dataflow", "chrome-trace", "report", "graph"):
        extra = {"check-static": ["--scope", "step"], "chrome-trace": ["--out", "-"], "report": ["--out", "x.html"]}
        extra["graph"] = ["--out", str(tmp_path / "g")]
        assert main([command, "http://127.0.0.1:9", *extra.get(command, [])]) == 2, command
        assert "say which backend" in capsys.readouterr().err
