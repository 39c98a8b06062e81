"""Span attribute names launchtrace writes and reads back: the one place they are spelled.

The exporter (:mod:`launchtrace.export.spanbuilder`) writes these names and :mod:`launchtrace.sources.rebuild` reads
them back, so a name changed here changes both sides at once. ``docs/semantic-conventions.md`` is the table of
the same names with type, meaning and an example. Our own names start with ``launchtrace.``; where
OpenTelemetry has a convention (``code.*``, ``thread.*``, ``exception.*``, resource attributes) we use it.

Per-argument names are built by functions, not constants: an array argument is described under its kernel
parameter name (``launchtrace.arg.state.owner``), a scalar argument likewise (``launchtrace.scalar.dt``).

Values are bounded: strings longer than :data:`MAX_VALUE_LENGTH` characters (Tempo's ``max_attribute_bytes``
default) are cut by :func:`bounded`.

Example::

    from launchtrace import conventions as C
    print(C.KERNEL, C.arg_attr("state", C.ARG_OWNER), C.scalar_attr("dt"))
    # launchtrace.kernel launchtrace.arg.state.owner launchtrace.scalar.dt
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

from launchtrace.model import LaunchRecord, Site

__all__ = [
    "ADJOINT",
    "ADJOINT_SUFFIX",
    "API",
    "ARG_ACCESS",
    "ARG_ALLOC",
    "ARG_BYTES",
    "ARG_DTYPE",
    "ARG_FIELDS",
    "ARG_FOREIGN",
    "ARG_NAME",
    "ARG_OFFSET",
    "ARG_OWNER",
    "ARG_PTR",
    "ARG_SHAPE",
    "ARRAY_KEYS",
    "BLOCK_DIM",
    "BYTES",
    "CAPTURED",
    "CODE_DEPRECATED",
    "CODE_FILEPATH",
    "CODE_FILE_PATH",
    "CODE_FUNCTION",
    "CODE_FUNCTION_NAME",
    "CODE_LINENO",
    "CODE_LINE_NUMBER",
    "CODE_NAMESPACE",
    "DEVICE",
    "DEVICE_TIME_DURATION",
    "DEVICE_TIME_END",
    "DEVICE_TIME_START",
    "DIM",
    "DROPPED_SPANS",
    "DROPPED_SPAN_NAME",
    "EVENT_EXCEPTION",
    "EVENT_FOLD_POSITION",
    "EXCEPTION_MESSAGE",
    "EXCEPTION_TYPE",
    "FOLD_COUNT",
    "FOLD_DEVICE_DURATION_COUNT",
    "FOLD_DEVICE_DURATION_MAX",
    "FOLD_DEVICE_DURATION_MEAN",
    "FOLD_DEVICE_DURATION_MIN",
    "FOLD_DEVICE_DURATION_P50",
    "FOLD_DURATION_COUNT",
    "FOLD_DURATION_MAX",
    "FOLD_DURATION_MEAN",
    "FOLD_DURATION_MIN",
    "FOLD_DURATION_P50",
    "FOLD_LAUNCHES",
    "FOLD_PERIOD",
    "FOLD_POSITION",
    "FOLD_SEQ_LAST",
    "GRAPH_ID",
    "GRAPH_LAUNCHES",
    "GRAPH_REPLAY",
    "INTERNAL",
    "KERNEL",
    "LOAD_ATTRIBUTES",
    "LOAD_DEVICE",
    "LOAD_MODULE",
    "LOAD_RESULT",
    "MAX_BLOCKS",
    "MAX_VALUE_LENGTH",
    "METRIC_LAUNCHES",
    "METRIC_LAUNCH_DURATION",
    "METRIC_SCOPE_STEPS",
    "MODULE",
    "MODULE_HASH",
    "OP",
    "PARAMS",
    "PREFIX",
    "RECORD_FIELDS",
    "REPEAT",
    "RESOURCE_DEVICES",
    "RESOURCE_DEVICE_NAMES",
    "RESOURCE_LAUNCHTRACE_VERSION",
    "RESOURCE_WARP_VERSION",
    "SCALAR_KEYS",
    "SCOPE_ATTRIBUTE_KEYS",
    "SCOPE_FINGERPRINT",
    "SCOPE_FOREIGN_POINTERS",
    "SCOPE_ID",
    "SCOPE_INCOMPLETE",
    "SCOPE_INTERNAL",
    "SCOPE_JOINED",
    "SCOPE_KIND",
    "SCOPE_LAUNCHES",
    "SEQ",
    "STATS_FIELDS",
    "STEP_INDEX",
    "STREAM",
    "THREAD_FIELDS",
    "THREAD_ID",
    "THREAD_NAME",
    "arg_attr",
    "arg_labels",
    "arg_stats_attr",
    "bounded",
    "decode_key",
    "encode_key",
    "kernel_title",
    "scalar_attr",
    "scalar_value",
    "scope_user_attr",
]

PREFIX = "launchtrace."
MAX_VALUE_LENGTH = 2048
"""Longest string value written (Tempo's default ``max_attribute_bytes``); longer ones are cut."""

# --- one span per record ---------------------------------------------------------------------------
OP = "launchtrace.op"  # "launch" | "copy" | "fill" | "primitive" | "graph_launch": marks a record span
KERNEL = "launchtrace.kernel"  # "<warp module>.<kernel key>", "wp.copy", ...
MODULE = "launchtrace.module"  # the Warp module of a launched kernel (kernel name up to the last dot)
MODULE_HASH = "launchtrace.module.hash"  # the compiled module's content hash
DIM = "launchtrace.dim"  # int[]: launch dimensions
BLOCK_DIM = "launchtrace.block_dim"
MAX_BLOCKS = "launchtrace.max_blocks"
DEVICE = "launchtrace.device"  # "cpu", "cuda:0"
STREAM = "launchtrace.stream"  # int: the CUDA stream handle passed
API = "launchtrace.api"  # the public entry point: "wp.launch", "wp.clone", ...
INTERNAL = "launchtrace.internal"  # bool: issued by code inside the warp package
ADJOINT = "launchtrace.adjoint"  # bool: an adjoint (backward) launch
CAPTURED = "launchtrace.captured"  # bool: issued while a graph capture was active
GRAPH_ID = "launchtrace.graph.id"  # int: the graph captured into, or replayed (unique across processes)
GRAPH_REPLAY = "launchtrace.graph.replay"  # int (graph launch): which replay of the graph, 1, 2, ... per process
GRAPH_LAUNCHES = "launchtrace.graph.launches"  # int (graph launch): records captured into the graph, so run
BYTES = "launchtrace.bytes"  # int: bytes touched (sum of the array arguments' sizes)
SEQ = "launchtrace.seq"  # int: process-wide order of capture events
REPEAT = "launchtrace.repeat"  # int > 1: a record that itself stands for folded repetitions
PARAMS = "launchtrace.params"  # string[]: the kernel's positional parameter names
ARRAY_KEYS = "launchtrace.array_keys"  # string[]: the array arguments' keys in order ("0", "3.pos")
SCALAR_KEYS = "launchtrace.scalar_keys"  # string[]: the scalar arguments' keys in order
THREAD_ID = "thread.id"
THREAD_NAME = "thread.name"

# OpenTelemetry source-code attributes. The stable names (semconv >= 1.33) are written by default:
# code.function.name is fully qualified ("module.function"), as the stable convention asks. The deprecated
# names are written too only with ExportConfig.deprecated_code_attributes (for old backends); readers take both.
CODE_FILE_PATH = "code.file.path"
CODE_LINE_NUMBER = "code.line.number"
CODE_FUNCTION_NAME = "code.function.name"
CODE_FILEPATH = "code.filepath"  # deprecated: code.file.path
CODE_LINENO = "code.lineno"  # deprecated: code.line.number
CODE_FUNCTION = "code.function"  # deprecated: the last part of code.function.name
CODE_NAMESPACE = "code.namespace"  # deprecated: the first parts of code.function.name
CODE_DEPRECATED = (CODE_FILEPATH, CODE_LINENO, CODE_FUNCTION, CODE_NAMESPACE)

# --- the record <-> span table ------------------------------------------------------------------------
# One row per LaunchRecord field that is one span attribute of its own: (attribute, record field, kind,
# default). The exporter writes the attribute only when the field differs from the default; the rebuild
# restores the default when the attribute is absent. Kinds: "int" (a 64-bit int), "int64" (any int: beyond
# 64 bits written as its decimal string), "str", "bool"; a default of None means "written when set".
# Adding such a field to the record takes one row here and its line in docs/semantic-conventions.md.
# The rows are in the order the attributes are written (after launchtrace.op/.kernel/.dim/.module).
RECORD_FIELDS: tuple[tuple[str, str, str, Any], ...] = (
    (BLOCK_DIM, "block_dim", "int", None),
    (MAX_BLOCKS, "max_blocks", "int", 0),
    (DEVICE, "device", "str", ""),
    (STREAM, "stream", "int64", None),
    (API, "api", "str", ""),
    (INTERNAL, "internal", "bool", False),
    (ADJOINT, "adjoint", "bool", False),
    (CAPTURED, "captured", "bool", False),
    (GRAPH_ID, "graph_id", "int64", None),
    (GRAPH_LAUNCHES, "graph_launches", "int", None),
    (MODULE_HASH, "module_hash", "str", ""),
    (REPEAT, "repeat", "int", 1),
)
"""Record fields that are one span attribute each (see the comment above)."""
THREAD_FIELDS: tuple[tuple[str, str, str, Any], ...] = (
    (THREAD_ID, "thread", "int", ...),  # ...: always written
    (THREAD_NAME, "thread_name", "str", ""),
)
"""Fields of records and scopes alike: the thread that issued them (after ``launchtrace.seq``)."""

# --- per array argument: launchtrace.arg.<parameter name>.<field> ------------------------------------
ARG_NAME = "name"  # the argument's recorded name, only when it differs from the parameter name
ARG_PTR = "ptr"  # int: device pointer (not stable across runs; owner + offset are)
ARG_OWNER = "owner"  # string: owner label from launchtrace.own(...)
ARG_OFFSET = "offset"  # int: byte offset inside the owner
ARG_SHAPE = "shape"  # int[]
ARG_DTYPE = "dtype"  # string: "float32", "vec3f"
ARG_BYTES = "bytes"  # int
ARG_FOREIGN = "foreign"  # bool: no owner covers the pointer although owners are registered
ARG_ACCESS = "access"  # "r" | "w" | "rw"
ARG_ALLOC = "alloc"  # string: unowned: the allocation's label, "State.x#1 (springs.py:41)" (run-stable identity)
ARG_FIELDS = (
    ARG_PTR,
    ARG_OWNER,
    ARG_OFFSET,
    ARG_SHAPE,
    ARG_DTYPE,
    ARG_BYTES,
    ARG_FOREIGN,
    ARG_ACCESS,
    ARG_NAME,
    ARG_ALLOC,
)

# --- optional measurements (off by default: value_stats, device_timing settings) ---------------------------
STATS_FIELDS = ("mean", "std", "min", "max", "skipped")
"""Value statistics of a written array argument: ``launchtrace.arg.<param>.stats.<field>`` (see
:func:`arg_stats_attr`): mean / std (double), min / max (double, or int for integer arrays), skipped (string:
why there are none: ``too_large``, ``dtype``, ``error``)."""
DEVICE_TIME_START = "launchtrace.device_time.start_ns"  # int: when the CUDA device began the launch (host clock)
DEVICE_TIME_END = "launchtrace.device_time.end_ns"  # int: when it finished (host clock)
DEVICE_TIME_DURATION = "launchtrace.device_time.duration_ns"  # int: elapsed between the two CUDA events

# --- scope spans --------------------------------------------------------------------------------------------
SCOPE_KIND = "launchtrace.scope.kind"  # "tape" | "timer" | "user" | "step" | "load": marks a scope span
SCOPE_ID = "launchtrace.scope.id"  # int: the scope's id in the capture (unique per process)
SCOPE_FINGERPRINT = "launchtrace.scope.fingerprint"  # hex: topology of everything that ran under the scope
SCOPE_LAUNCHES = "launchtrace.scope.launches"  # int: records under the scope (nested scopes included)
SCOPE_FOREIGN_POINTERS = "launchtrace.scope.foreign_pointers"  # int: distinct foreign pointers under it
SCOPE_INCOMPLETE = "launchtrace.scope.incomplete"  # bool: still open when the exporter flushed
SCOPE_JOINED = "launchtrace.scope.joined"  # bool: a root whose parent is the application's span (not ours)
SCOPE_INTERNAL = "launchtrace.scope.internal"  # bool: one of Warp's own timers
SCOPE_ATTRIBUTE_KEYS = "launchtrace.scope.attribute_keys"  # string[]: which attributes the user passed
STEP_INDEX = "launchtrace.step.index"  # int: n-th synthetic step root of this name

# --- module loads and Tape passes (issue 23; scope spans of kind "load" / "tape") ---------------------------
# span names: "warp.module.load" (kind "load"), "tape.forward" / "tape.backward" (kind "tape", where no other
# scope covers the Tape pass): launchtrace.capture.tapeload
LOAD_MODULE = "launchtrace.load.module"  # string: the Warp module loaded ("__main__", "warp.fem.utils", ...)
LOAD_DEVICE = "launchtrace.load.device"  # string: the device it was loaded for ("cpu", "cuda:0")
LOAD_RESULT = "launchtrace.load.result"  # string: "compiled" (built now), "cached" (kernel cache hit), "error"
LOAD_ATTRIBUTES = (LOAD_MODULE, LOAD_DEVICE, LOAD_RESULT)  # written under their own names, not as user ones
ADJOINT_SUFFIX = " (adjoint)"  # appended to an adjoint launch's span name and to its rows and titles

# --- folded summary spans -----------------------------------------------------------------------------------
FOLD_COUNT = "launchtrace.fold.count"  # int: repetitions of the sequence; marks a summary span
FOLD_PERIOD = "launchtrace.fold.period"  # int: records per repetition (1..8)
FOLD_LAUNCHES = "launchtrace.fold.launches"  # int: count * period
FOLD_SEQ_LAST = "launchtrace.fold.seq_last"  # int: seq of the last record folded (the first's is in its event)
FOLD_KERNELS = "launchtrace.fold.kernels"  # string[]: the sequence's distinct launchtrace.kernel values, in order
# a summary span also carries launchtrace.op / launchtrace.kernel of its first launch (first record if none is one)
EVENT_FOLD_POSITION = "launchtrace.fold.position"  # one event per position: its record attributes + stats
FOLD_POSITION = "launchtrace.fold.index"  # int: the position of an event within the sequence
FOLD_DURATION_COUNT = "launchtrace.fold.duration.count"  # int: samples behind the statistics
FOLD_DURATION_MIN = "launchtrace.fold.duration.min_ns"
FOLD_DURATION_MEAN = "launchtrace.fold.duration.mean_ns"
FOLD_DURATION_MAX = "launchtrace.fold.duration.max_ns"
FOLD_DURATION_P50 = "launchtrace.fold.duration.p50_ns"
# the same statistics of the device times of that position (device_timing on, CUDA): host times are not device times
FOLD_DEVICE_DURATION_COUNT = "launchtrace.fold.device_duration.count"  # int: launches of the position with one
FOLD_DEVICE_DURATION_MIN = "launchtrace.fold.device_duration.min_ns"
FOLD_DEVICE_DURATION_MEAN = "launchtrace.fold.device_duration.mean_ns"
FOLD_DEVICE_DURATION_MAX = "launchtrace.fold.device_duration.max_ns"
FOLD_DEVICE_DURATION_P50 = "launchtrace.fold.device_duration.p50_ns"

# --- a trace cut by the span budget -------------------------------------------------------------------------
DROPPED_SPAN_NAME = "launchtrace.dropped"
DROPPED_SPANS = "launchtrace.dropped.spans"  # int: spans of this trace left out by the budget

# --- errors (OpenTelemetry exception event) -----------------------------------------------------------------
EVENT_EXCEPTION = "exception"
EXCEPTION_TYPE = "exception.type"
EXCEPTION_MESSAGE = "exception.message"

# --- metrics (launchtrace.export.metrics): names of the instruments, not of span attributes ------------------
METRIC_LAUNCHES = "launchtrace.launches"  # counter: device operations, exact under sampling and folding
METRIC_LAUNCH_DURATION = "launchtrace.launch.duration"  # histogram: host duration of each device operation
METRIC_SCOPE_STEPS = "launchtrace.scope.steps"  # counter: scope occurrences (steps)

# --- resource -----------------------------------------------------------------------------------------------
RESOURCE_WARP_VERSION = "launchtrace.warp.version"
RESOURCE_LAUNCHTRACE_VERSION = "launchtrace.version"
RESOURCE_DEVICES = "launchtrace.devices"  # string[]: Warp device aliases ("cpu", "cuda:0")
RESOURCE_DEVICE_NAMES = "launchtrace.device.names"  # string[]: their names, same order


def arg_attr(label: str, field: str) -> str:
    """The attribute name of ``field`` of the array argument with parameter name ``label``."""
    return f"launchtrace.arg.{label}.{field}"


def arg_stats_attr(label: str, field: str) -> str:
    """The attribute name of value statistic ``field`` (one of :data:`STATS_FIELDS`) of array argument ``label``."""
    return f"launchtrace.arg.{label}.stats.{field}"


def scalar_attr(label: str) -> str:
    """The attribute name of the scalar argument with parameter name ``label``."""
    return f"launchtrace.scalar.{label}"


_RESERVED_PREFIXES = (PREFIX, "code.", "thread.", "exception.")


def kernel_title(kernel: str, adjoint: bool = False) -> str:
    """What people read for a record's kernel: its name, with :data:`ADJOINT_SUFFIX` for an adjoint launch
    (span names, summary rows, report, graph titles), so ``repulsion``'s forward and adjoint launches are two
    rows, not one."""
    return kernel + ADJOINT_SUFFIX if adjoint else kernel


def scope_user_attr(key: object) -> str:
    """Where a user's scope attribute ``key`` is written: under its own name, unless the name is one of
    ours (``launchtrace.*``, ``code.*``, ``thread.*``, ``exception.*``): then under
    ``launchtrace.scope.attr.<key>``."""
    key = str(key)
    return f"launchtrace.scope.attr.{key}" if key.startswith(_RESERVED_PREFIXES) else key


def encode_key(key: Any) -> str:
    """An argument key as a string: ``3`` -> ``"3"``, ``"3.pos"`` stays (struct fields always hold a dot)."""
    return str(key)


def decode_key(text: str) -> Any:
    """The inverse of :func:`encode_key`: ``"3"`` -> ``3``, ``"3.pos"`` -> ``"3.pos"``."""
    if text.isdigit() and text.isascii():
        return int(text)
    return text


def bounded(value: str, limit: int = MAX_VALUE_LENGTH) -> str:
    """``value`` cut to ``limit`` characters (backends drop or truncate longer values themselves)."""
    return value if len(value) <= limit else value[:limit]


_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def scalar_value(value: Any) -> Any:
    """A scalar argument as an OTLP attribute value, keeping its type where OTLP has one.

    ``bool``, ``int`` (64-bit), ``float``, ``str`` and tuples of those stay as they are (tuples become
    arrays); NaN becomes ``"nan"`` as in the record model; anything else (an int beyond 64 bits, ``None``,
    an object) becomes its ``repr``.
    """
    if isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        return value if _INT64_MIN <= value <= _INT64_MAX else repr(value)
    if isinstance(value, float):
        return "nan" if math.isnan(value) else value
    if isinstance(value, tuple | list):
        return tuple(scalar_value(v) for v in value)
    return repr(value)


def _unique(names: list[str], tag: str) -> tuple[str, ...]:
    """Labels made unique and non-empty deterministically: a repeat or an empty name gets ``#<tag><i>``."""
    seen: set[str] = set()
    out = []
    for i, name in enumerate(names):
        label = name if name and name not in seen else f"{name}#{tag}{i}"
        seen.add(label)
        out.append(label)
    return tuple(out)


_PROBE_SITE = Site("<unknown>", 0, "<unknown>")


@lru_cache(maxsize=4096)
def arg_labels(params: tuple, array_keys: tuple, scalar_keys: tuple) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Attribute labels of the array and scalar arguments: their parameter names, made unique.

    ``array_keys`` / ``scalar_keys`` are the encoded keys (:func:`encode_key`). Both the exporter and the
    rebuilder derive the labels from ``launchtrace.params`` and the key lists alone, so they always agree.
    """
    probe = LaunchRecord("launch", "", (), None, (), (), _PROBE_SITE, params=tuple(params))
    arrays = _unique([probe.arg_name(decode_key(k)) for k in array_keys], "a")
    scalars = _unique([probe.arg_name(decode_key(k)) for k in scalar_keys], "s")
    return arrays, scalars
