"""Builds launchtrace's optional C extensions: the hot paths, each standing in for a Python reference.

Everything else is in pyproject.toml. ``optional=True``: where no C compiler is available the install still
succeeds and launchtrace uses the Python references (see launchtrace.native), which the tests compare against:
- _slots: per-launch record and span constructors (reference: launchtrace.fastinit)
- capture/_fastlaunch: the wp.launch capture wrapper (reference: launchtrace.capture.warp.wrap_launch)
- capture/_fastmat: the materializer's launch-template hits (reference: Materializer._launch_flat)
- export/_fastbuild: the span builder's common record (reference: SpanBuilder._on_record)
- otlp/_jsonread: OTLP JSON Lines -> SpanData (reference: launchtrace.otlp.json_fast / json_codec)
- otlp/_jsonenc: SpanData -> OTLP JSON Lines (reference: launchtrace.otlp.encode_jsonl)
- otlp/_protoenc: SpanData -> OTLP protobuf (reference: launchtrace.otlp.encode_proto)
- otlp/_wire2json: OTLP protobuf -> OTLP JSON Lines, for collect (reference: launchtrace.otlp.transcode)
- otlp/_jsoncheck: a JSON syntax check that allocates nothing (reference: launchtrace.otlp.jsoncheck)
Shared headers: _native.h (slot offsets, untracked objects), otlp/_spandata.h (the span classes' field table, checked at import),
otlp/_jsonfmt.h (the JSON text of numbers and bytes, for _jsonenc and _wire2json). The OTLP field names and
numbers the codecs use are in launchtrace.otlp.fields (tests/test_otlp_fields.py checks the C against it).
"""

from pathlib import Path

from setuptools import Extension, setup

NATIVE = (
    "_slots",
    "capture/_fastlaunch",
    "capture/_fastmat",
    "export/_fastbuild",
    "otlp/_jsonread",
    "otlp/_jsonenc",
    "otlp/_protoenc",
    "otlp/_wire2json",
    "otlp/_jsoncheck",
)

setup(
    ext_modules=[
        Extension(
            f"launchtrace.{name.replace('/', '.')}",
            sources=[f"src/launchtrace/{name}.c"],
            depends=[
                "src/launchtrace/_native.h",
                "src/launchtrace/otlp/_spandata.h",
                "src/launchtrace/otlp/_jsonfmt.h",
            ],
            optional=True,
        )
        for name in NATIVE
        if Path(f"src/launchtrace/{name}.c").exists()
    ]
)
