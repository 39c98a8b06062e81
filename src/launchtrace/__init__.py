"""launchtrace: OpenTelemetry for GPU compute written in NVIDIA Warp.

Every piece of device work a Warp program issues (kernel launches, copies, fills, native primitives, graph
replays) becomes a record, and records become OpenTelemetry spans. Scopes (``wp.Tape`` scopes,
``wp.ScopedTimer``, :func:`scope`) become parent spans; buffer owners (:func:`own`) become span attributes.

Example (spans to ``launches.jsonl``; to the collector at ``OTEL_EXPORTER_OTLP_ENDPOINT`` when that is set)::

    import launchtrace
    launchtrace.start_export(file_path="launches.jsonl")  # patches Warp too
    with launchtrace.scope("step", step=0):
        wp.launch(integrate, dim=n, inputs=[x, v, dt])
    launchtrace.stop_export()  # flush and close; launchtrace.flush() only flushes

Without changing the program: ``launchtrace run program.py`` (see ``docs/zero-code.md``). ``instrument()``
alone patches Warp for in-process analysis (:func:`trace_launches`) and exports nothing.

Names are imported lazily so that ``import launchtrace`` stays cheap for the CLI readers.

PYTEST_DONT_REWRITE: the package ships a pytest plugin (``launchtrace.pytest_plugin``), so pytest marks it for
assertion rewriting and would warn in every session where it was imported before pytest (``launchtrace run -m
pytest``); this marker says there is nothing here to rewrite.
"""

from __future__ import annotations

from launchtrace._lazy import lazy_names

_LAZY = {
    "__version__": "launchtrace._version",
    # capture
    "instrument": "launchtrace.capture",
    "uninstrument": "launchtrace.capture",
    "is_instrumented": "launchtrace.capture",
    "scope": "launchtrace.capture",
    # ownership
    "own": "launchtrace.ownership",
    "disown": "launchtrace.ownership",
    "BufferSet": "launchtrace.ownership",
    "buffers_of": "launchtrace.ownership",
    # testing API (seed-compatible)
    "trace_launches": "launchtrace.testing",
    "LaunchTrace": "launchtrace.testing",
    # model
    "LaunchRecord": "launchtrace.model",
    "ScopeRecord": "launchtrace.model",
    "Site": "launchtrace.model",
    # export
    "configure": "launchtrace.export",
    "start_export": "launchtrace.export",
    "start_metrics": "launchtrace.export",
    "stop_export": "launchtrace.export",
    "flush": "launchtrace.export",
    "stats": "launchtrace.export",
}

__all__ = sorted(_LAZY)

__getattr__, __dir__ = lazy_names(__name__, _LAZY, globals())
