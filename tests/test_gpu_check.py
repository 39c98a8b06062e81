"""``scripts/gpu_check.sh`` without a GPU: it says so in one line and exits 2 before running anything.

No GPU exists on the machines these tests run on, so the script's GPU path is not exercised here (see
docs/reliability.md). The second case puts a stand-in ``nvidia-smi`` (a shell script printing a GPU's CSV
line) on ``PATH``: a real one cannot run without a GPU, and the case checks the script's next guard, Warp
itself finding no CUDA device.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "gpu_check.sh"


def _run(path: str, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": path, "GPU_CHECK_SKIP_INSTALL": "1", "PYTHON": sys.executable}
    return subprocess.run(["bash", str(SCRIPT)], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)


def test_no_nvidia_smi_is_one_clear_line_and_exit_2(tmp_path: Path) -> None:
    proc = _run("/usr/bin:/bin", tmp_path)
    assert proc.returncode == 2
    assert proc.stderr == "gpu_check: no NVIDIA GPU here (nvidia-smi not found); nothing run\n"
    assert "pytest" not in proc.stdout


def test_a_gpu_warp_cannot_use_stops_before_the_checks(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "nvidia-smi"
    fake.write_text(
        "#!/bin/sh\n"
        "echo 'index, name, driver_version, memory.total [MiB], compute_cap'\n"
        "echo '0, Stand-in GPU, 0, 0 MiB, 9.0'\n"
    )
    fake.chmod(0o755)
    proc = _run(f"{bin_dir}:/usr/bin:/bin", tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Stand-in GPU" in proc.stdout  # the GPU is named first
    assert "gpu_check: Warp sees no CUDA device" in proc.stderr
    assert "== pytest -m gpu" not in proc.stdout
