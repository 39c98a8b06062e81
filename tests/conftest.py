"""Shared fixtures: Warp on the CPU device, quiet, and instrumentation that never leaks between tests."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("WARP_CACHE_PATH", str(Path.home() / ".cache" / "warp"))

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
FIXTURES = SHARED / "fixtures" / "upstream"


def upstream_fixtures() -> Path:
    """``../shared/fixtures/upstream`` (real backend responses, read in place, never copied in), or a loud error.

    The one place tests find them: a test module that reads or globs them calls this at import, so a checkout
    without ``../shared`` fails at collection instead of collecting nothing and passing.
    """
    if not (FIXTURES / "README.md").is_file():
        raise RuntimeError(
            f"the upstream fixtures are missing: {FIXTURES} (the tests read real backend responses from "
            "../shared/fixtures/upstream beside the checkout; see README.md, Development)"
        )
    return FIXTURES


# Modules whose tests run real servers, subprocesses, Warp's own examples, soak loops or many-example fuzzing:
# marked ``slow`` so ``pytest -m "not slow"`` is a development loop of under three minutes (README.md,
# Development). CI runs everything. A module belongs here when it takes over ~10 s alone on the 2-core machine.
SLOW_MODULES = frozenset(
    {
        "test_crash_loss.py",
        "test_deploy.py",
        "test_docs_commands.py",
        "test_e2e_otlp.py",
        "test_fleet_alerts.py",
        "test_fork.py",
        "test_fuzz_commands.py",
        "test_fuzz_readers.py",
        "test_hostile_collect.py",
        "test_hostile_files.py",
        "test_hostile_pull.py",
        "test_jaeger_live.py",
        "test_jaeger_live_big.py",
        "test_jaeger_live_collector.py",
        "test_jaeger_live_errors.py",
        "test_prometheus_rules.py",
        "test_reliability_capture.py",
        "test_reliability_sinks.py",
        "test_reliability_soak.py",
        "test_reliability_threads.py",
        "test_render_html.py",
        "test_run_children.py",
        "test_security_tls.py",
        "test_tinygrad.py",
        "test_tinygrad_hook.py",
        "test_warp_examples.py",
        "test_warp_unittests.py",
    }
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.name in SLOW_MODULES:
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def warp_cpu():
    """Warp, initialised once, quiet."""
    import warp as wp

    wp.config.quiet = True
    wp.init()
    return wp


@pytest.fixture
def instrumented(warp_cpu):
    """Warp patched for the test's duration; restored afterwards whatever happens."""
    import launchtrace.capture as capture

    capture.instrument()
    yield capture
    capture.uninstrument()


from jaeger_live import jaeger  # noqa: E402, F401  (the real Jaeger, one per test run: tests/jaeger_live.py)
