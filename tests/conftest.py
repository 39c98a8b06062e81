"""Shared fixtures: Warp on the CPU device, quiet, and instrumentation that never leaks between tests."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("WARP_CACHE_PATH", str(Path.home() / ".cache" / "warp"))

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
FIXTURES = SHARED / "fixtures" / "upstream"


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
