"""The pytest plugin (entry point ``pytest11``): the ``launch_topology`` fixture and ``--launchtrace-update``.

Loaded in every pytest session where launchtrace is installed, so this module imports nothing but pytest: the
snapshot machinery (and Warp) is imported by the fixture, in the tests that use it. ``-p no:launchtrace``
turns the plugin off.

Example::

    def test_step_topology(launch_topology):
        sim = make_sim()
        sim.step()                      # warm-up, not recorded
        with launch_topology("step", owners={"sim": sim}):
            sim.step()                  # recorded, compared with __launchtrace__/<module>/<test>.step.json
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

_SESSION = pytest.StashKey[Any]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("launchtrace", "launch topology snapshots")
    group.addoption(
        "--launchtrace-update",
        action="store_true",
        default=False,
        help="write missing launch topology snapshots and rewrite those that differ",
    )


def _session(config: pytest.Config) -> Any:
    session = config.stash.get(_SESSION, None)
    if session is None:
        from launchtrace.snapshot_session import SnapshotSession

        session = config.stash[_SESSION] = SnapshotSession(config)
    return session


@pytest.fixture
def launch_topology(request: pytest.FixtureRequest) -> Iterator[Any]:
    """``launch_topology(name, *, owners=None, ignore_scalars=None, ignore_streams=None, float_tolerance=None)``:
    a context manager that records the device work of its block and compares it with the stored snapshot
    ``__launchtrace__/<test module>/<test name>.<name>.json`` beside the test file (see docs/topology-in-ci.md).

    Warp is instrumented for the whole test, so that arrays the test allocates before the block (``Sim()``) are
    named by their allocation (``Sim.x``), as ``launchtrace run`` names them."""
    session = _session(request.config)
    with session.instrumented():
        yield session.recorder(request)


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    session = config.stash.get(_SESSION, None)
    if session is not None:
        for line in session.summary_lines():
            terminalreporter.write_line(line)
