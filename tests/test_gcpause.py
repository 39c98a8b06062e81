"""The collector settings that the readers and ``report`` change for a while are put back as they were."""

from __future__ import annotations

import gc

from launchtrace.gcpause import collector_paused, collector_relaxed


def test_relaxed_collector_runs_rarely_and_is_put_back() -> None:
    before = gc.get_threshold()
    with collector_relaxed(50_000):
        assert gc.get_threshold()[0] == 50_000
        assert gc.get_freeze_count() > 0  # what was alive at the start is out of the collector's runs
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_relaxed_collector_as_a_decorator_still_collects_cycles() -> None:
    @collector_relaxed(1000)
    def make_cycles() -> int:
        for _ in range(5000):
            a: list = []
            a.append(a)  # garbage only the cyclic collector frees
        return gc.get_count()[0]

    assert make_cycles() < 1000  # young collections ran at the new threshold
    assert gc.get_freeze_count() == 0


def test_paused_collector_is_left_as_it_was_found() -> None:
    gc.disable()
    try:
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
