"""What the pytest plugin costs a session that does not use ``launch_topology`` (issue 28: "nothing measurable").

Method (shared/notes/measuring.md): ratios against a baseline measured alternately (A B A B ..., ``--pairs``
pairs after one warm-up pair), reported as the median with min and max; absolute medians printed too.

- import: ``python -X importtime -c "import launchtrace.pytest_plugin"``, the plugin's own cumulative import
  time (the ``launchtrace`` package and the plugin module; pytest itself is already imported in a session);
- session: ``pytest`` over ``--tests`` trivial tests in a temporary folder, with the plugin loaded (its entry
  point) against ``-p no:launchtrace``, each a fresh process.

    python benchmarks/bench_snapshot_plugin.py [--pairs 10] [--tests 200]
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def plugin_import_us() -> tuple[int, int]:
    """``(launchtrace package, launchtrace.pytest_plugin)`` cumulative import microseconds, from -X importtime."""
    code = "import pytest; import launchtrace.pytest_plugin"
    err = subprocess.run([sys.executable, "-X", "importtime", "-c", code], capture_output=True, text=True).stderr
    found = {}
    for line in err.splitlines():
        m = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|\s*(\S+)$", line)
        if m and m[3].strip() in ("launchtrace", "launchtrace.pytest_plugin"):
            found[m[3].strip()] = int(m[2])
    return found.get("launchtrace", 0), found.get("launchtrace.pytest_plugin", 0)


def session_s(folder: Path, plugin: bool) -> float:
    args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(folder)]
    if not plugin:
        args[4:4] = ["-p", "no:launchtrace"]
    start = time.perf_counter()
    subprocess.run(args, capture_output=True, check=True, cwd=folder)
    return time.perf_counter() - start


def _summary(ratios: list[float]) -> str:
    return f"median {statistics.median(ratios):.3f} (min {min(ratios):.3f}, max {max(ratios):.3f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=10)
    parser.add_argument("--tests", type=int, default=200)
    args = parser.parse_args()
    print(f"python {platform.python_version()}, load {os.getloadavg()[0]:.2f}, {args.pairs} pairs")

    imports = [plugin_import_us() for _ in range(args.pairs)]
    pkg = statistics.median(i[0] for i in imports)
    plug = statistics.median(i[1] for i in imports)
    print(f"import (cumulative, -X importtime): launchtrace {pkg:.0f} us, launchtrace.pytest_plugin {plug:.0f} us")

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        body = "".join(f"def test_{i}():\n    assert {i} == {i}\n\n" for i in range(args.tests))
        (folder / "test_plain.py").write_text(body)
        session_s(folder, True), session_s(folder, False)  # warm-up: pyc files, disk cache
        with_plugin, without = [], []
        for _ in range(args.pairs):
            without.append(session_s(folder, False))
            with_plugin.append(session_s(folder, True))
    ratios = [a / b for a, b in zip(with_plugin, without)]
    print(
        f"session of {args.tests} plain tests: with plugin {statistics.median(with_plugin) * 1e3:.0f} ms, "
        f"-p no:launchtrace {statistics.median(without) * 1e3:.0f} ms; ratio {_summary(ratios)}"
    )
    print(f"load after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
