"""Names from other people's traces (kernels, scopes, files) reach the terminal inert: every text output of
``summary``, ``diff``, ``dataflow`` and ``check-static`` escapes control characters, so a name can neither
forge an output line (``FORGED: 0 problems``) nor send escape sequences (screen clear, window title).

The trace is hand-built records put through the exporter's span builder and encoder into a real file, read
back by the commands: a real program cannot name a kernel with a newline, someone else's file can."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from launchtrace.cli import main
from launchtrace.export.config import ExportConfig
from launchtrace.export.spanbuilder import SpanBuilder
from launchtrace.model import BufferArg, LaunchRecord, ScopeRecord, Site
from launchtrace.otlp.json_codec import encode_line

EVIL = "k\nFORGED: 0 problems\x1b[2J\x1b]0;pwned\x07\r\u2028end"
EVIL_SCOPE = "step\nFORGED: scope\x1b[31m"
EVIL_FILE = "/tmp/x.py\nFORGED: file\x1b[H"


def _events(kernel: str, scope: str, file: str, steps: int = 8) -> list:
    site = Site(file, 3, "f\nFORGED: function")
    events, t, seq = [], 1_000_000, 0
    for k in range(steps):
        seq += 1
        sc = ScopeRecord(k + 1, scope, "user", start_ns=t, seq=seq, site=site)
        events.append(("scope_begin", sc))
        for j in range(2):
            seq += 1
            buf = BufferArg(0, "x", 0x1000, (4,), "float32", 16, owner=f"sim.{kernel}", offset=0, access="rw")
            rec = LaunchRecord(
                "launch", kernel, (4,), None, ((0, 0x1000),), ((1, j),), site,
                params=("x", "n"), buffers=(buf,), start_ns=t, end_ns=t + 50_000, scope_id=k + 1, seq=seq,
            )  # fmt: skip
            events.append(("record", rec))
            t += 60_000
        events.append(("scope_end", dataclasses.replace(sc, end_ns=t)))
        t += 10_000
    return events


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("terminal")
    out = {}
    for name, kernel in (("benign", "m.k"), ("hostile", EVIL)):
        builder = SpanBuilder(ExportConfig.resolve(fold=False))
        spans = builder.feed(_events(kernel, EVIL_SCOPE if kernel == EVIL else "step", EVIL_FILE)) + builder.flush()
        out[name] = d / f"{name}.jsonl"
        out[name].write_text(encode_line(spans) + "\n", encoding="utf-8")
    return out


def _assert_inert(text: str) -> None:
    assert "\x1b" not in text and "\x07" not in text and "\r" not in text and "\u2028" not in text
    assert not any(line.startswith("FORGED") for line in text.splitlines()), text


@pytest.mark.parametrize(
    "argv",
    [
        ["summary", "{hostile}"],
        ["diff", "{benign}", "{hostile}"],
        ["diff", "{hostile}", "{hostile}"],
        ["diff", "{benign}", "{hostile}", "--format", "markdown"],
        ["dataflow", "{hostile}", "--edges"],
        ["check-static", "{hostile}", "--scope", EVIL_SCOPE],
        ["check-static", "{hostile}", "--scope", "nope"],
    ],
)
def test_text_outputs_escape_control_characters(files, capsys, argv) -> None:
    rc = main([a.format(**{k: str(v) for k, v in files.items()}) for a in argv])
    out = capsys.readouterr()
    assert rc in (0, 1, 2), out.err
    _assert_inert(out.out)
    _assert_inert(out.err)
    text = out.out + out.err
    assert "\\x1b" in text or "\\n" in text  # escaped, visibly, not dropped


def test_the_names_are_still_there_escaped(files, capsys) -> None:
    assert main(["summary", str(files["hostile"])]) == 0
    out = capsys.readouterr().out
    assert "k\\nFORGED: 0 problems\\x1b[2J\\x1b]0;pwned\\x07\\r\\u2028end" in out
    assert main(["check-static", str(files["hostile"]), "--scope", "nope"]) == 2
    err = capsys.readouterr().err
    assert "step\\nFORGED: scope\\x1b[31m" in err and len(err.strip().splitlines()) == 1


def test_bad_numbers_are_one_line_errors(files, capsys) -> None:
    for argv, what in (
        (["summary", str(files["benign"]), "--top", "-3"], "--top"),
        (["diff", str(files["benign"]), str(files["benign"]), "--alpha", "2"], "--alpha"),
        (["diff", str(files["benign"]), str(files["benign"]), "--alpha", "nan"], "--alpha"),
        (["diff", str(files["benign"]), str(files["benign"]), "--min-samples", "-1"], "--min-steps"),
        (["diff", str(files["benign"]), str(files["benign"]), "--min-runs", "1"], "--min-runs"),
        (["diff", str(files["benign"]), str(files["benign"]), "--min-change", "-0.1"], "--min-change"),
    ):
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and what in err and "error" in err, err


def test_singular_and_nested_scopes_in_check_static(files, tmp_path, capsys) -> None:
    builder = SpanBuilder(ExportConfig.resolve(fold=False))
    events = _events("m.k", "step", "/tmp/p.py", steps=1)
    # a nested scope inside the one step
    inner = ScopeRecord(99, "inner", "timer", parent_id=1, start_ns=1_000_001, seq=100)
    events.insert(1, ("scope_begin", inner))
    events.insert(2, ("scope_end", dataclasses.replace(inner, end_ns=1_000_002)))
    path = tmp_path / "one.jsonl"
    path.write_text(encode_line(builder.feed(events) + builder.flush()) + "\n", encoding="utf-8")
    assert main(["check-static", str(path), "--scope", "step"]) == 1
    assert "scope 'step': 1 occurrence, only one occurrence" in capsys.readouterr().out
    assert main(["check-static", str(path), "--scope", "nope"]) == 2
    assert "scopes seen: 'inner', 'step'" in capsys.readouterr().err


def test_check_static_names_only_the_programs_scopes_when_none_repeats(tmp_path, capsys) -> None:
    """A real run with one long step: the error listed Warp's module loads as a scope to pick
    (``scopes seen: 'bigstep', 'warp.module.load'``), which no step can be."""
    import subprocess
    import sys
    from pathlib import Path

    tests = Path(__file__).resolve().parent
    script = tmp_path / "one_step.py"
    script.write_text(
        f"import sys; sys.path.insert(0, {str(tests)!r})\n"
        "import warp as wp, warp_programs\n"
        "sim = warp_programs.Sim()\n"
        "with wp.ScopedTimer('bigstep', print=False):\n"
        "    for _ in range(3):\n"
        "        sim.step()\n",
        encoding="utf-8",
    )
    out = tmp_path / "one.jsonl"
    done = subprocess.run(
        [sys.executable, "-m", "launchtrace", "run", "--out", str(out), str(script)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert '"warp.module.load"' in out.read_text()  # the load is in the file
    assert main(["check-static", str(out)]) == 2
    assert "(scopes seen: 'bigstep')" in capsys.readouterr().err
