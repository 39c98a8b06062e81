"""launchtrace's own protobuf schema: generated code reproducible, baseline files refused in one line when bad."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from launchtrace.analysis.fleet.baseline import MAGIC, SCHEMA_VERSION
from launchtrace.baselines import END, read_baseline, write_baseline
from launchtrace.errors import UserError
from launchtrace.v1 import baseline_pb2 as pb

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import gen_proto  # noqa: E402


def test_generated_code_is_what_the_pinned_protoc_writes(tmp_path: Path) -> None:
    """Regenerating from proto/ with grpcio-tools 1.63.2 (installed by .ci/run beside the project) gives the
    committed files byte for byte, and every schema has its generated module."""
    version = gen_proto.installed_version(gen_proto.tools_dir())
    assert version == gen_proto.GRPC_TOOLS_VERSION, (
        f"install the pinned generator: python -m pip install --no-deps --target {gen_proto.tools_dir()} "
        f"grpcio-tools=={gen_proto.GRPC_TOOLS_VERSION}"
    )
    written = gen_proto.generate(tmp_path)
    assert written, "no .proto files found"
    for rel in written:
        assert (tmp_path / rel).read_bytes() == (ROOT / "src" / rel).read_bytes(), f"{rel} is stale: regenerate"
    committed = sorted(p.relative_to(ROOT / "src") for p in (ROOT / "src" / "launchtrace" / "v1").glob("*_pb2.py"))
    assert committed == sorted(written)


def test_generated_code_loads_on_this_runtime() -> None:
    """The gencode (5.26.1) loads on the installed protobuf runtime and round-trips a message."""
    msg = pb.Baseline(magic=MAGIC, schema_version=SCHEMA_VERSION, group_by=["host.name"])
    msg.groups.add(values=["h1"]).scopes.add(name="step", steps=3)
    assert pb.Baseline.FromString(msg.SerializeToString()) == msg
    assert "Protobuf Python Version: 5.26.1" in Path(pb.__file__).read_text()


def _valid(tmp_path: Path) -> Path:
    path = tmp_path / "base.pb"
    msg = pb.Baseline(magic=MAGIC, schema_version=SCHEMA_VERSION, group_by=["host.name"])
    msg.groups.add(values=["h1"], traces=4).scopes.add(name="step", steps=4)
    write_baseline(msg, path)
    return path


def test_written_file_reads_back(tmp_path: Path) -> None:
    back = read_baseline(_valid(tmp_path))
    assert back.end == END and back.groups[0].values == ["h1"]


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda data: b"", "the file is empty"),
        (lambda data: b'{"resourceSpans": []}\n', "not a launchtrace baseline"),
        (lambda data: b"\xff\xfe\x00garbage\x01\x02", "not a launchtrace baseline"),
        (lambda data: data[: len(data) - 5], "launchtrace baseline"),  # cut short: damaged or no end marker
        (lambda data: data[: data.index(b"launchtrace.baseline.end") - 2], "truncated"),  # cut at a field boundary
        (lambda data: _foreign(), "no 'launchtrace.baseline' marker"),
        (lambda data: _newer(), "newer than this launchtrace reads"),
    ],
)
def test_bad_files_are_refused_in_one_line(tmp_path: Path, make, expected: str) -> None:
    path = _valid(tmp_path)
    path.write_bytes(make(path.read_bytes()))
    with pytest.raises(UserError) as err:
        read_baseline(path)
    assert expected in str(err.value) and "\n" not in str(err.value)


def _foreign() -> bytes:
    """Another protobuf message altogether: an OTLP TracesData with one span."""
    from opentelemetry.proto.trace.v1 import trace_pb2

    data = trace_pb2.TracesData()
    data.resource_spans.add().scope_spans.add().spans.add(name="x", trace_id=b"\x01" * 16, span_id=b"\x02" * 8)
    return data.SerializeToString()


def _newer() -> bytes:
    msg = pb.Baseline(magic=MAGIC, schema_version=SCHEMA_VERSION + 1, end=END)
    return msg.SerializeToString()


@pytest.mark.parametrize("kind", ["garbage", "truncated", "foreign", "newer"])
def test_commands_exit_2_with_one_line(tmp_path: Path, kind: str) -> None:
    path = _valid(tmp_path)
    data = path.read_bytes()
    path.write_bytes(
        {
            "garbage": b"\x08\x96\x01\x12\xff",
            "truncated": data[: len(data) // 2],
            "foreign": _foreign(),
            "newer": _newer(),
        }[kind]
    )
    spans = tmp_path / "spans.jsonl"
    spans.write_text("")
    for argv in (
        ["alert", "--baseline", str(path), "--from", str(spans), "--quiet"],
        ["baseline", "merge", str(path), str(path), "--out", str(tmp_path / "c.pb")],
    ):
        proc = subprocess.run([sys.executable, "-m", "launchtrace", *argv], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and str(path) in lines[0], proc.stderr
