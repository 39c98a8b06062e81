"""Analyses: functions from traces to tables (frozen dataclasses with documented columns and units).

- :mod:`~launchtrace.analysis.diff`: aligned topology diff of two traces or sets of traces, with timing;
- :mod:`~launchtrace.analysis.static`: is a scope's launch topology the same every time (graph-capturable)?
- :mod:`~launchtrace.analysis.dataflow`: read/write sets, RAW/WAR/WAW edges, critical path, hazards;
- :mod:`~launchtrace.analysis.stats`: percentiles, the Mann-Whitney U test, per-kernel statistics.

No I/O here: callers hand in :class:`~launchtrace.model.TraceData` (see
:func:`launchtrace.sources.loading.load_traces`).

Example::

    from launchtrace.analysis.diff import diff_traces
    print(diff_traces(before, after).counts)
"""
