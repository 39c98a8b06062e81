"""OTLP encodings of :class:`~launchtrace.spans.SpanData`: ids, OTLP/JSON (both ways), protobuf decoding.

Submodules are imported where used (``from launchtrace.otlp.json_codec import encode_line``), so importing
this package costs nothing.
"""
