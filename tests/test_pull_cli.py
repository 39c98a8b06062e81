"""``launchtrace pull`` end to end: files, and Jaeger / Tempo played by a loopback HTTP server.

No Jaeger or Tempo can run here; ``tests.loopback_http.Backend`` serves their real response bodies at their
real paths. The output is read back with the file reader to show it is OTLP JSON Lines holding the spans.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson

from conftest import upstream_fixtures
from launchtrace.cli import main
from launchtrace.sources.files import read_spans
from loopback_http import Answer, Backend, free_port

FIXTURES = upstream_fixtures()


def pull(*argv: str) -> int:
    return main(["pull", *argv])


def test_file_to_jsonl_and_back(tmp_path, capsys):
    out = tmp_path / "out.jsonl"
    assert pull(str(FIXTURES / "jaeger_otlp_rich_traces.json"), "--out", str(out)) == 0
    original = read_spans(FIXTURES / "jaeger_otlp_rich_traces.json")
    back = read_spans(out)
    assert back.format == "otlp-jsonl" and sorted(back.spans, key=repr) == sorted(original.spans, key=repr)
    assert len(out.read_text().splitlines()) == 2, "one line per trace"
    err = capsys.readouterr().err
    assert f"pulled 4 spans in 2 traces from {FIXTURES / 'jaeger_otlp_rich_traces.json'} (otlp-json)" in err
    assert "0 errors, 4 warnings; skipped 0 spans" in err and "parent 0000000000000003 is not in the trace" in err


def test_trace_id_filter_on_a_file(tmp_path):
    out = tmp_path / "out.jsonl"
    src = FIXTURES / "jaeger_otlp_rich_traces.json"
    assert pull(str(src), "--trace-id", "00000000000000020000000000000000", "--out", str(out)) == 0
    assert {s.trace_id.hex() for s in read_spans(out).spans} == {"00000000000000020000000000000000"}


def test_malformed_file_exit_2_names_file_and_line_and_keeps_the_valid_rest(tmp_path, capsys):
    good = orjson.dumps(
        {
            "resourceSpans": [
                {
                    "scopeSpans": [
                        {
                            "spans": [
                                {
                                    "traceId": "5b8efff798038103d269b633813fc700",
                                    "spanId": "eee19b7ec3c1b100",
                                    "name": "ok",
                                }
                            ]
                        }
                    ]
                }
            ]
        }
    ).decode()
    bad = tmp_path / "bad.jsonl"
    bad.write_text(good + "\n" + good[:30] + "\n" + good.replace("ok", "again").replace('"name"', '"kind":9,"name"'))
    out = tmp_path / "out.jsonl"
    assert pull(str(bad), "--out", str(out)) == 2
    err = capsys.readouterr().err
    assert f"  error: {bad}:2: truncated line: unexpected end of data: line 1 column 31 (char 30)" in err
    assert f"  error: {bad}:3: resourceSpans[0].scopeSpans[0].spans[0]: span 'eee19b7ec3c1b100'" in err
    assert "unknown span kind 9" in err and "2 errors, 0 warnings; skipped 1 span, 1 line" in err
    assert "Traceback" not in err
    assert [s.name for s in read_spans(out).spans] == ["ok"]


def test_strict_and_bad_arguments_are_one_line_errors_without_traceback(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"resourceSpans": [\n')
    out = tmp_path / "out.jsonl"
    out.write_text('{"resourceSpans": []}\n')  # a previous pull's spans (a file of anything else is refused)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    for argv, expected in (
        (["--strict"], f"launchtrace pull: error: {bad}:1: "),
        (["--service", "x"], "launchtrace pull: error: --service/--operation/--query/--attribute/--since/--until"),
    ):
        proc = subprocess.run(
            [sys.executable, "-m", "launchtrace", "pull", str(bad), "--out", str(out), *argv],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.startswith(expected) and proc.stderr.count("\n") == 1, proc.stderr
    assert out.read_text() == '{"resourceSpans": []}\n', "nothing already written is lost"


def test_jaeger_search_with_token_from_env_and_headers(tmp_path, capsys, monkeypatch):
    rich = orjson.loads((FIXTURES / "jaeger_otlp_rich_traces.json").read_bytes())
    monkeypatch.setenv("LAUNCHTRACE_TOKEN", "tok-123")
    out = tmp_path / "j.jsonl"
    with Backend() as b:
        b.routes["/api/v3/traces"] = Answer(200, orjson.dumps({"result": rich}))
        window = ("--since", "2017-01-26T21:00:00Z", "--until", "2017-01-26T22:00:00Z")
        rc = pull("jaeger+" + b.url, "--service", "service-x", *window, "--limit", "2",
                  "--header", "X-Team=gpu", "--out", str(out))  # fmt: skip
    assert rc == 0
    seen = b.seen[0]
    assert seen.headers["authorization"] == "Bearer tok-123" and seen.headers["x-team"] == "gpu"
    assert seen.query["query.start_time_min"] == ["2017-01-26T21:00:00.000000000Z"]
    assert len(read_spans(out).spans) == 4
    assert "tok-123" not in capsys.readouterr().err


def test_tempo_search_progress_and_summary(tmp_path, capsys):
    v2 = (FIXTURES / "tempo-agpl/tempo_v2_trace_by_id_response_docs.json").read_bytes()
    out = tmp_path / "t.jsonl"
    with Backend() as b:
        b.routes["/api/search"] = Answer(200, (FIXTURES / "tempo-agpl/tempo_search_response_docs.json").read_bytes())
        b.routes["/api/v2/traces/5b8efff798038103d269b633813fc700"] = Answer(200, v2)
        rc = pull("tempo+" + b.url, "--query", '{ name = "I am a span!" }', "--out", str(out))
    assert rc == 0
    err = capsys.readouterr().err
    assert f"pulled 1 span in 1 trace from {b.url} (tempo) -> {out}" in err
    (s,) = read_spans(out).spans
    assert s.trace_id.hex() == "5b8efff798038103d269b633813fc700"


def test_tempo_many_trace_ids_show_progress(tmp_path, capsys):
    v2 = (FIXTURES / "tempo-agpl/tempo_v2_trace_by_id_response_docs.json").read_bytes()
    out = tmp_path / "t.jsonl"
    with Backend() as b:
        b.routes["/api/v2/traces/5b8efff798038103d269b633813fc700"] = Answer(200, v2)
        ids = ["5b8efff798038103d269b633813fc700", "W47/95gDgQPSabYzgT/HAA==", "abc"]
        rc = pull("tempo+" + b.url, *[a for i in ids for a in ("--trace-id", i)], "--out", str(out))
    assert rc == 0
    err = capsys.readouterr().err
    assert "fetched 3/3 traces" in err and "trace 00000000000000000000000000000abc not found" in err
    assert "identical duplicate dropped" in err, "the same trace asked twice (hex and base64)"


def test_backend_down_is_one_line_and_keeps_the_old_output(tmp_path, capsys):
    out = tmp_path / "keep.jsonl"
    out.write_text('{"resourceSpans": []}\n')  # the spans of an earlier pull
    url = f"http://127.0.0.1:{free_port()}"
    assert pull("jaeger+" + url, "--trace-id", "1", "--retries", "0", "--out", str(out)) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"launchtrace pull: error: {url}/api/v3/traces/{'0' * 31}1: cannot connect (")
    assert err.count("\n") == 1 and out.read_text() == '{"resourceSpans": []}\n'


def test_jaeger_by_ids_shows_progress_and_options_for_other_sources_are_refused(tmp_path, capsys):
    out = tmp_path / "j.jsonl"
    with Backend() as b:
        b.routes["/api/v3/traces/" + "0" * 31 + "1"] = Answer(
            200, (FIXTURES / "jaeger_apiv3_GetTrace.json").read_bytes()
        )
        assert pull("jaeger+" + b.url, "--trace-id", "1", "--trace-id", "2", "--out", str(out)) == 0
        err = capsys.readouterr().err
        assert "fetched 2/2 traces" in err and "trace 00000000000000000000000000000002 not found" in err
        assert pull("jaeger+" + b.url, "--protobuf", "--trace-id", "1", "--out", str(out)) == 2
        assert "--protobuf is for tempo" in capsys.readouterr().err
    src = str(FIXTURES / "otlp_examples_trace.json")
    assert pull(src, "--api", "v1", "--out", str(out)) == 2
    assert "--api and --protobuf are for jaeger and tempo" in capsys.readouterr().err
