"""Fleet analyses: baselines of what groups of hosts and builds launch, and alerts when one differs.

- :mod:`~.histogram`: the OpenTelemetry exponential histogram, exactly mergeable;
- :mod:`~.occurrences`: one step (scope occurrence) as the fleet analyses see it;
- :mod:`~.records`: representative records <-> the ``launchtrace.v1.Record`` message;
- :mod:`~.baseline`: building and merging ``launchtrace.v1.Baseline``;
- :mod:`~.alerts`: against a baseline, or among peers.

No I/O here (files: :mod:`launchtrace.baselines`; traces: :mod:`launchtrace.sources.stream`).
"""
