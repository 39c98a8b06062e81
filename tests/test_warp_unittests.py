"""Warp's own unit tests pass the same with launchtrace exporting as without (CPU device).

A CI-sized subset of ``scripts/run_warp_unittests.py --all`` (its table is in docs/reliability.md): each
module's unittest suites run twice in fresh processes, bare and with ``launchtrace.start_export`` active for
every test (Warp patched, every launch exported), and every test's outcome must be the same.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MODULES = ["test_launch", "test_copy", "test_tape", "test_indexedarray"]


def _runner():
    spec = importlib.util.spec_from_file_location("run_warp_unittests", REPO / "scripts" / "run_warp_unittests.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_warp_unit_tests_have_the_same_outcomes_with_export_active() -> None:
    _, same, rows = _runner().compare(MODULES, timeout=600)
    for row in rows:
        assert row["tests"] > 0 and row["passed_bare"] > 0, row
        assert not row["differ"], row
        assert row["export"]["exported"] > 0 and row["export"]["dropped"] == 0, row
    assert same
