"""Per-trace sampling: the standard ``OTEL_TRACES_SAMPLER`` decision plus "every N-th step in full".

The decision is made once per trace (one outermost scope instance, or one synthetic step), when its root
begins, by the OpenTelemetry SDK's own sampler classes, so ``traceidratio`` keeps exactly the traces the SDK
would keep for the same trace id. ``sample_every=N`` additionally keeps the 1st, (N+1)-th, ... trace of each
root name whatever the sampler says, and keeps it in full: no folding for that trace.

Example::

    sampler = TraceSampler("traceidratio", 0.1, sample_every=100)
    decision = sampler.decide(trace_id=b"\\x01" * 16, name="step")
    print(decision.sampled, decision.full)
"""

from __future__ import annotations

import dataclasses
from typing import Any

from opentelemetry.sdk.trace import sampling as otel_sampling

__all__ = ["Decision", "TraceSampler"]

_MAX_NAMES = 10_000


@dataclasses.dataclass(frozen=True, slots=True)
class Decision:
    """Whether a trace is exported, and whether in full (folding off for it)."""

    sampled: bool
    full: bool = False


class TraceSampler:
    """Decides per trace; ``sampler`` is an ``OTEL_TRACES_SAMPLER`` name, ``ratio`` its argument, or an SDK
    ``Sampler`` object (a ``TracerProvider``'s) used as it is."""

    def __init__(
        self,
        sampler: str | otel_sampling.Sampler = "parentbased_always_on",
        ratio: float | None = None,
        sample_every: int = 0,
    ):
        if sample_every < 0:
            raise ValueError(f"sample_every must be >= 0, got {sample_every!r}")
        if isinstance(sampler, otel_sampling.Sampler):
            chosen = sampler
        else:
            known = otel_sampling._KNOWN_SAMPLERS  # the SDK's own name -> sampler table
            if sampler not in known:
                raise ValueError(f"sampler must be one of {', '.join(sorted(known))}, got {sampler!r}")
            chosen = known[sampler]
            if sampler in ("traceidratio", "parentbased_traceidratio"):
                chosen = chosen(1.0 if ratio is None else ratio)
        self._sampler: otel_sampling.Sampler = chosen
        self._every = sample_every
        self._seen: dict[str, int] = {}
        self.description = self._sampler.get_description()

    def decide(self, trace_id: bytes, name: str, parent: tuple[bytes, bytes, int] | None = None) -> Decision:
        """The decision for a new trace whose root span is called ``name``; ``parent``: the application's
        span it joins (``(trace_id, span_id, trace_flags)``), whose own decision ``parentbased_*`` follow."""
        index = self._seen.get(name, 0)
        if index == 0 and len(self._seen) >= _MAX_NAMES:  # root names made per step ("step 17"): stay bounded
            self._seen.clear()
        self._seen[name] = index + 1
        if self._every and index % self._every == 0:
            return Decision(True, True)
        result = self._sampler.should_sample(_parent_context(parent), int.from_bytes(trace_id, "big"), name)
        return Decision(result.decision.is_sampled())


def _parent_context(parent: tuple[bytes, bytes, int] | None) -> Any:
    """The SDK context holding ``parent`` as its (non-recording) current span, for ``should_sample``."""
    if parent is None:
        return None
    from opentelemetry import trace

    span_context = trace.SpanContext(
        int.from_bytes(parent[0], "big"),
        int.from_bytes(parent[1], "big"),
        is_remote=False,
        trace_flags=trace.TraceFlags(parent[2]),
    )
    return trace.set_span_in_context(trace.NonRecordingSpan(span_context))
