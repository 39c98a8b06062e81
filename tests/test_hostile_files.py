"""Every command that reads a trace file, on files that are not trace files (issue 13).

``/dev/zero`` (endless), 4 KiB of zeros, UTF-16 text, a long single line that is not JSON, nesting past
what the writer can encode, integers past 64 bits and duplicate keys. The contract: a clear answer in
bounded time and memory, one line when the file as a whole is refused.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from launchtrace.cli import main
from launchtrace.errors import UserError
from launchtrace.sources.files import read_spans
from test_fuzz_commands import commands

TRACE = "5b8efff798038103d269b633813fc60c"


def span_line(attrs: list | None = None, **span: object) -> bytes:
    sp = {"traceId": TRACE, "spanId": "eee19b7ec3c1b174", "name": "s", "attributes": attrs or [], **span}
    doc = {"resourceSpans": [{"scopeSpans": [{"spans": [sp]}]}]}
    return json.dumps(doc, separators=(",", ":")).encode() + b"\n"  # orjson writes < 255 levels


def run_cli(argv: list[str], timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "launchtrace", *argv], capture_output=True, text=True, timeout=timeout)


def one_error_line(name: str, proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 2, (name, proc.returncode, proc.stderr[-500:])
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"launchtrace {name}: error: "), (name, proc.stderr[-800:])
    return lines[0]


def test_dev_zero_ends_with_one_line_in_every_command(tmp_path: Path) -> None:
    for name, argv in commands(Path("/dev/zero"), Path("/dev/zero"), tmp_path).items():
        line = one_error_line(name, run_cli(argv))
        assert "/dev/zero" in line and "zero bytes" in line, line


@pytest.mark.parametrize("size", [4096, 1, 64])
def test_a_file_of_zeros_is_refused_not_read_as_empty(tmp_path: Path, size: int, capsys) -> None:
    path = tmp_path / "zeros.pb"
    path.write_bytes(bytes(size))
    with pytest.raises(UserError, match="zero bytes"):
        read_spans(path)
    for name, argv in commands(path, path, tmp_path).items():  # in-process: these end even when read wrongly
        assert main(argv) == 2, name
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"launchtrace {name}: error: "), (name, lines)
        assert "zero bytes" in lines[0]


def test_zero_length_messages_end_a_length_prefixed_file(tmp_path: Path) -> None:
    from launchtrace.otlp.encode_proto import encode_spans
    from launchtrace.spans import SpanData

    msg = encode_spans([SpanData(bytes.fromhex(TRACE), b"\x01" * 8, None, "s", 1, 2, ())])
    path = tmp_path / "framed.pb"
    path.write_bytes(len(msg).to_bytes(4, "big") + msg + bytes(4) * 1000)
    result = read_spans(path)
    assert len(result.spans) == 1
    assert result.errors == 1 and "length 0" in str(result.problems[0])


@pytest.mark.parametrize(
    "encoding,bom", [("utf-16", ""), ("utf-16-le", ""), ("utf-16-be", ""), ("utf-32", ""), ("utf-8", "\ufeff")]
)
def test_utf16_and_utf32_files_are_named_as_such(tmp_path: Path, encoding: str, bom: str) -> None:
    text = bom + (span_line() + span_line(spanId="eee19b7ec3c1b175")).decode()
    path = tmp_path / "t.jsonl"
    path.write_bytes(text.encode(encoding))
    if encoding == "utf-8":  # a UTF-8 byte order mark is read through
        assert read_spans(path).spans
        return
    with pytest.raises(UserError) as err:
        read_spans(path)
    assert encoding[:6].upper() in str(err.value), err.value
    assert "iconv" in str(err.value)
    rc = main(["summary", str(path)])
    assert rc == 2


RSS_SCRIPT = """
import sys
def vmhwm():  # this process's own peak (ru_maxrss would include the parent's: Linux keeps it across exec)
    return next(int(ln.split()[1]) * 1024 for ln in open("/proc/self/status") if ln.startswith("VmHWM:"))
from launchtrace.sources.files import read_spans
base = vmhwm()
r = read_spans(sys.argv[1])
print(len(r.spans), r.errors, vmhwm() - base)
print(r.problems[0] if r.problems else "")
"""


@pytest.mark.parametrize("shape", ["numbers", "string"])
def test_a_long_invalid_line_costs_at_most_about_its_size(tmp_path: Path, shape: str) -> None:
    size = 100 << 20
    path = tmp_path / "bad.jsonl"
    with path.open("wb") as f:  # one line, broken at its very end
        if shape == "numbers":
            f.write(b'{"resourceSpans":[')
            f.write(b"1," * (size // 2))
            f.write(b"}\n")
        else:
            f.write(b'{"resourceSpans":[{"name":"')
            f.write(b"x" * size)
            f.write(b'"}}\n')
    proc = subprocess.run([sys.executable, "-c", RSS_SCRIPT, str(path)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    counts, problem = proc.stdout.splitlines()
    spans, errors, grown = (int(x) for x in counts.split())
    print(f"{shape}: a {size >> 20} MiB invalid line: peak RSS +{grown / 2**20:.0f} MiB ({problem})")
    assert spans == 0 and errors == 1
    assert "over the 64 MiB that one is read up to; not read" in problem and ":1:" in problem
    assert grown < 2.2 * size, f"{grown >> 20} MiB for a {size >> 20} MiB line"


def test_attributes_nested_100_levels_do_not_crash_the_writer(tmp_path: Path, capsys) -> None:
    value: dict = {"stringValue": "leaf"}
    for _ in range(100):
        value = {"arrayValue": {"values": [value]}}
    path = tmp_path / "deep.jsonl"
    path.write_bytes(span_line([{"key": "deep", "value": value}, {"key": "ok", "value": {"intValue": "3"}}]))
    out = tmp_path / "out.jsonl"
    rc = main(["pull", str(path), "--out", str(out)])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert rc == 0, err
    assert "nested deeper than" in err  # a warning says what was flattened
    back = read_spans(out)
    assert len(back.spans) == 1 and dict(back.spans[0].attributes)["ok"] == 3


def test_an_integer_past_64_bits_written_as_a_string_is_a_warning(tmp_path: Path, capsys) -> None:
    path = tmp_path / "big.jsonl"
    path.write_bytes(span_line([{"key": "n", "value": {"intValue": "1" * 30}}]))
    out = tmp_path / "out.jsonl"
    assert main(["pull", str(path), "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "warning: " in err and "attribute 'n': integer 111111111111111111111111111111 is past 64 bits" in err, err
    assert dict(read_spans(out).spans[0].attributes)["n"] == "1" * 30


@pytest.mark.parametrize("pure", [False, True])
def test_duplicate_keys_keep_the_last_value_with_or_without_the_compiled_reader(tmp_path: Path, monkeypatch, pure):
    """As orjson and msgspec read them (and the protobuf JSON mapping's parsers): the last value is kept, the same
    with the compiled reader and without it (``LAUNCHTRACE_PURE_PYTHON=1``)."""
    if pure:
        monkeypatch.setenv("LAUNCHTRACE_PURE_PYTHON", "1")
    path = tmp_path / "dup.jsonl"
    line = span_line().replace(b'"name":"s"', b'"name":"first","name":"second"')
    path.write_bytes(line)
    result = read_spans(path)
    assert [s.name for s in result.spans] == ["second"]
    assert not result.problems
