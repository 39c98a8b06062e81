"""The compiled reader of the common OTLP JSON line, or no answer: the line is then read the general way.

:func:`launchtrace.otlp.json_codec.decode_traces_data` needs the line as dicts, and ``orjson.loads`` alone,
building a dict and a string per attribute, costs more per span than the whole compiled reader
(``launchtrace.otlp._jsonread``, built by :func:`launchtrace.native.load`): a hand-written strict JSON parser in
C for this one line shape that builds the spans directly (see the comment at the top of ``_jsonread.c``).

Its contract: for any line it returns exactly what the general decoder returns (the same spans, equal field for
field, and no problems) or ``None``, and the caller then reads the line the general way (``orjson.loads`` and
``decode_traces_data``), which reports whatever is wrong as it always did. There is no Python copy of it (issue
26): where it is not built, or ``LAUNCHTRACE_PURE_PYTHON=1``, every line goes the general way, which gives the
same spans and problems, only slower. ``tests/test_jsonread_native.py`` checks it against the general decoder.

Example::

    from launchtrace.otlp.json_fast import FastLineDecoder
    decoder = FastLineDecoder()        # one per file: the compiled reader's caches live here
    spans = decoder.decode(line)       # list[SpanData], or None: read the line with decode_traces_data
"""

from __future__ import annotations

from typing import Any

from launchtrace import native
from launchtrace.otlp.ids import decode_id
from launchtrace.otlp.json_codec import KIND_NAMES, STATUS_NAMES, _dec_bytes
from launchtrace.spans import SpanData, SpanEvent, SpanLink

__all__ = ["FastLineDecoder", "compiled_decoder"]


def compiled_decoder(id_encoding: str = "auto") -> Any:
    """The compiled reader's decoder (``decode(line) -> list[SpanData] | None``), or ``None`` where it is not
    built, ``LAUNCHTRACE_PURE_PYTHON`` is set, or it does not accept these span classes (a field added to them
    and not to it: it checks their slots rather than fill them wrongly)."""
    module = native.load("launchtrace.otlp._jsonread")
    if module is None:
        return None
    try:
        return module.Decoder(
            SpanData, SpanEvent, SpanLink, decode_id, _dec_bytes, KIND_NAMES, STATUS_NAMES, id_encoding
        )
    except TypeError:
        return None


class FastLineDecoder:
    """Decodes common OTLP JSON lines to spans by the compiled reader (module docstring); one per file or stream.

    ``compiled`` is the compiled decoder, or ``None`` where there is none: then :meth:`decode` answers nothing.
    """

    def __init__(self, id_encoding: str = "auto") -> None:
        self.id_encoding = id_encoding
        self.compiled = compiled_decoder(id_encoding)

    def decode(self, line: bytes | memoryview) -> list[SpanData] | None:
        """The spans of one JSON line, exactly as the general decoder reads them, or ``None``: ask it instead.

        A memoryview (a line of a read buffer) is read in place."""
        return None if self.compiled is None else self.compiled.decode(line)
