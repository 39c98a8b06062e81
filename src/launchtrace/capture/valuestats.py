"""Value statistics of the arrays a launch wrote, computed right after it (the ``value_stats`` setting).

Which arrays: the kernel's array parameters that it writes (``"w"`` or ``"rw"``), known as the materializer
knows them: from Warp's code generator where it tracked reads and writes, else from the kernel's syntax tree
(:mod:`launchtrace.capture.access`), else Warp's ``outputs=`` split. Only plain ``wp.array`` arguments (not
indexed or fabric arrays, not struct fields), and not adjoint launches.

What: exactly Warp's ``ArrayStatsVisitor`` (``warp/_src/tape.py``): numpy's ``mean()``, ``std()``, ``min()`` and
``max()`` of ``array.numpy()``, so over every scalar (vector and matrix components flattened together), in the
array's own precision, NaN propagating into all four. On CUDA ``numpy()`` synchronizes and copies to the host:
that is the price of turning this on. An array of more than ``max_elements`` scalars gets no numbers but
``skipped="too_large"`` (never sampled: a sample could miss the one NaN), one of structs ``"dtype"``.
"""

from __future__ import annotations

from typing import Any

from launchtrace.capture.access import kernel_access
from launchtrace.capture.hotpath import _warn_once
from launchtrace.model import ValueStats

__all__ = ["MAX_ELEMENTS", "array_stats", "written_positions"]

MAX_ELEMENTS = 10_000_000
"""Default cap on the scalars of one array (``value_stats_max_elements``): 40 MB of float32."""

_written: dict[tuple, tuple[Any, tuple[int, ...]]] = {}


def written_positions(kernel: Any, n_inputs: int, n_values: int) -> tuple[int, ...]:
    """Positions (over ``inputs + outputs``) of the parameters ``kernel`` writes; cached per kernel and layout."""
    key = (id(kernel), n_inputs, n_values)
    hit = _written.get(key)
    if hit is not None and hit[0] is kernel:
        return hit[1]
    args = getattr(getattr(kernel, "adj", None), "args", None) or ()
    flags = [(bool(getattr(a, "is_read", False)), bool(getattr(a, "is_write", False))) for a in args]
    labels = [str(getattr(a, "label", i)) for i, a in enumerate(args)]
    codegen = any(r or w for r, w in flags)  # Warp tracked access (verify_autograd_array_access): best
    syntax = None if codegen else kernel_access(kernel)
    positions = []
    for i in range(n_values):
        if codegen:
            written = i < len(flags) and flags[i][1]
        elif syntax is not None:
            written = i < len(labels) and "w" in syntax.get(labels[i], "")
        else:
            written = i >= n_inputs
        if written:
            positions.append(i)
    if len(_written) > 4096:
        _written.clear()
    _written[key] = (kernel, tuple(positions))
    return tuple(positions)


def array_stats(key: Any, arr: Any, max_elements: int) -> ValueStats | None:
    """The statistics of ``arr`` now, as ``ArrayStatsVisitor`` computes them; ``None`` for an empty array.

    Never raises: a failure gives ``skipped="error"`` and is logged once."""
    try:
        return _stats(key, arr, max_elements)
    except Exception:
        _warn_once("value statistics")
        return ValueStats(key, skipped="error")


def _stats(key: Any, arr: Any, max_elements: int) -> ValueStats | None:
    import numpy as np

    dtype = arr.dtype
    count = int(arr.size) * int(getattr(dtype, "_length_", 1) or 1)
    if count == 0:
        return None
    if not isinstance(dtype, type):  # a wp.struct dtype: a structured numpy array, no statistics
        return ValueStats(key, skipped="dtype")
    if count > max_elements:
        return ValueStats(key, skipped="too_large")
    values = arr.numpy()
    if values.dtype.kind not in "biuf" or _is_raw_bfloat16(dtype, values):
        return ValueStats(key, skipped="dtype")
    with np.errstate(all="ignore"):  # inf - inf in std: NaN, as numpy gives it, without a warning
        mean, std, lo, hi = values.mean(), values.std(), values.min(), values.max()
    return ValueStats(key, float(mean), float(std), _plain(lo), _plain(hi))


def _plain(value: Any) -> float | int:
    """A numpy scalar as a Python one: ints stay ints (bools become 0 / 1), the rest floats."""
    return int(value) if value.dtype.kind in "biu" else float(value)


def _is_raw_bfloat16(dtype: Any, values: Any) -> bool:
    """``numpy()`` gives bfloat16 as raw uint16 bits when ``ml_dtypes`` is missing: no meaningful numbers."""
    scalar = getattr(dtype, "_wp_scalar_type_", dtype)
    return getattr(scalar, "__name__", "") == "bfloat16" and values.dtype.kind != "f"
