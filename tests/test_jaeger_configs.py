"""Every Jaeger config under deploy/ passes the real ``jaeger validate --config`` (Jaeger v2, tests/jaeger_live.py),
and validate can fail: a broken copy is refused, naming the bad key."""

from __future__ import annotations

import subprocess
from pathlib import Path

from jaeger_live import ROOT, jaeger_binary


def validate(binary: str, path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([binary, "validate", "--config", str(path)], capture_output=True, text=True, timeout=60)


def jaeger_configs() -> list[Path]:
    """The deploy files that are Jaeger configs (they name Jaeger's own extensions)."""
    return sorted(p for p in (ROOT / "deploy").rglob("*.yaml") if "jaeger_storage:" in p.read_text())


def test_every_jaeger_config_under_deploy_passes_jaeger_validate() -> None:
    binary = jaeger_binary()
    configs = jaeger_configs()
    assert {p.name for p in configs} >= {"jaeger.yaml", "collector-tail-sampling.yaml"}, configs
    for path in configs:
        proc = validate(binary, path)
        assert proc.returncode == 0, f"{path}: {proc.stdout[-1000:]} {proc.stderr[-2000:]}"


def test_validate_refuses_a_broken_config(tmp_path: Path) -> None:
    (config,) = [p for p in jaeger_configs() if p.name == "collector-tail-sampling.yaml"]
    bad = tmp_path / "broken.yaml"
    bad.write_text(config.read_text().replace("max_traces: 100000", "max_traces: many"))
    proc = validate(jaeger_binary(), bad)
    assert proc.returncode != 0 and "max_traces" in proc.stdout + proc.stderr
