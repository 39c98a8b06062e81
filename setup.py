"""Builds launchtrace's optional C extensions: the hot paths, each standing in for a Python reference.

Everything else is in pyproject.toml. Optional: where no C compiler is available the install still succeeds and
launchtrace uses the Python references (see launchtrace.native), which the tests compare against. With
``LAUNCHTRACE_REQUIRE_NATIVE=1`` (CI) every extension must build, or the install fails. The list of extensions is
``launchtrace.native.COMPILED``:
- _slots: per-launch record and span constructors (reference: launchtrace.fastinit)
- capture/_fastlaunch: the wp.launch capture wrapper (reference: launchtrace.capture.warp.wrap_launch)
- capture/_fastmat: the materializer's launch-template hits (reference: Materializer._launch_flat)
- export/_fastbuild: the span builder's common record (reference: SpanBuilder._on_record)
- otlp/_jsonread: OTLP JSON Lines -> SpanData (reference: launchtrace.otlp.json_fast / json_codec)
- otlp/_jsonenc: SpanData -> OTLP JSON Lines (fallback and reference: launchtrace.otlp.json_codec.encode_line)
- otlp/_protoenc: SpanData -> OTLP protobuf (fallback and reference: the opentelemetry-proto classes, encode_proto)
Shared headers (every extension depends on them): _native.h (slot offsets, leaving acyclic objects out of the
cycle collector), capture/_rawevent.h (the capture event's record layout, checked against launchtrace.rawevent
at load), otlp/_spandata.h (SpanData's fields, looked up by name), otlp/_jsonfmt.h (the JSON text of strings,
numbers and bytes, for _jsonenc), otlp/_jsonkeys.h (the OTLP/JSON keys) and otlp/_otlpfields.h
(the protobuf field numbers and wire tags), both generated from the field table launchtrace.otlp.fields by
scripts/gen_otlp_keys.py; tests/test_otlp_fields.py checks the C against the table.
"""

import runpy
from pathlib import Path

from setuptools import Extension, setup

# One list of the compiled parts, and one reading of the switch, shared with the package (launchtrace.native).
_native = runpy.run_path(str(Path(__file__).parent / "src" / "launchtrace" / "native.py"))
REQUIRED = _native["require_native"]()

setup(
    ext_modules=[
        Extension(
            f"launchtrace.{name.replace('/', '.')}",
            sources=[f"src/launchtrace/{name}.c"],
            depends=[
                "src/launchtrace/_native.h",
                "src/launchtrace/otlp/_spandata.h",
                "src/launchtrace/capture/_rawevent.h",
                "src/launchtrace/otlp/_jsonfmt.h",
                "src/launchtrace/otlp/_jsonkeys.h",
                "src/launchtrace/otlp/_otlpfields.h",
            ],
            optional=not REQUIRED,
        )
        for name in _native["COMPILED"]
        if REQUIRED or Path(f"src/launchtrace/{name}.c").exists()
    ]
)
