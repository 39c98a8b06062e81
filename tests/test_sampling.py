"""Per-trace sampling: the SDK's own samplers decide once per trace; every N-th root is kept in full."""

from __future__ import annotations

import random

import pytest
from opentelemetry.sdk.trace.sampling import TraceIdRatioBased

from launchtrace.export.sampling import TraceSampler


def _ids(n: int, seed: int = 1) -> list[bytes]:
    rng = random.Random(seed)
    return [rng.getrandbits(128).to_bytes(16, "big") for _ in range(n)]


def test_always_on_and_off():
    on, off = TraceSampler("always_on"), TraceSampler("always_off")
    for tid in _ids(20):
        assert on.decide(tid, "step").sampled
        assert not off.decide(tid, "step").sampled


def test_traceidratio_agrees_with_the_sdk_for_each_trace_id():
    ours = TraceSampler("traceidratio", 0.3)
    sdk = TraceIdRatioBased(0.3)
    kept = 0
    for tid in _ids(2000):
        expected = sdk.should_sample(None, int.from_bytes(tid, "big"), "step").decision.is_sampled()
        got = ours.decide(tid, "step").sampled
        assert got == expected
        kept += got
    assert 450 < kept < 750  # about 30 % of 2000


def test_parentbased_ratio_without_parent_uses_the_ratio():
    ours = TraceSampler("parentbased_traceidratio", 0.0)
    assert not any(ours.decide(t, "x").sampled for t in _ids(50))
    assert all(TraceSampler("parentbased_always_on").decide(t, "x").sampled for t in _ids(5))
    assert not any(TraceSampler("parentbased_always_off").decide(t, "x").sampled for t in _ids(5))


def test_every_nth_root_of_a_name_is_kept_in_full():
    sampler = TraceSampler("always_off", sample_every=3)
    decisions = [sampler.decide(t, "step") for t in _ids(9)]
    assert [d.sampled for d in decisions] == [True, False, False] * 3
    assert all(d.full for d in decisions if d.sampled)
    # counted per root name
    assert sampler.decide(_ids(1, 7)[0], "other").sampled


def test_bad_arguments_raise():
    with pytest.raises(ValueError, match="sampler"):
        TraceSampler("sometimes")
    with pytest.raises(ValueError, match="sample_every"):
        TraceSampler("always_on", sample_every=-1)
