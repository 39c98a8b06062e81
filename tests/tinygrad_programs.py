"""tinygrad programs the tinygrad capture tests and benchmark run (CPU device, settings from the internals note).

``configure_env`` must run before tinygrad is imported: tinygrad reads ``CACHEDB``, ``DEV`` and ``PARALLEL``
once at import.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any


def configure_env(device: str = "CPU") -> None:
    """The environment the tests run tinygrad in: a private compile cache, one device, no compile workers."""
    os.environ.setdefault("CACHEDB", os.path.join(tempfile.gettempdir(), "launchtrace-tinygrad-cache.db"))
    os.environ["DEV"] = device
    os.environ["PARALLEL"] = "0"
    for name in ("HCQ2", "BEAM", "JITBEAM", "VIZ", "PROFILE", "DEBUG"):
        os.environ.pop(name, None)
    if device == "NULL":
        os.environ["NULL_ALLOW_COPYOUT"] = "1"


class MLP:
    """A small MLP (8-16-4)."""

    def __init__(self, n_in: int = 8, hidden: int = 16, n_out: int = 4) -> None:
        from tinygrad import nn

        self.l1 = nn.Linear(n_in, hidden)
        self.l2 = nn.Linear(hidden, n_out)

    def __call__(self, x: Any) -> Any:
        return self.l2(self.l1(x).relu())


def make_training(seed: int = 0, lr: float = 0.1) -> tuple[MLP, Any, Any]:
    """``(model, optimizer, jitted step)``; ``step(x, y)`` returns the loss tensor."""
    from tinygrad import Tensor, TinyJit, nn
    from tinygrad.helpers import Context

    Tensor.manual_seed(seed)
    model = MLP()
    opt = nn.optim.SGD(nn.state.get_parameters(model), lr=lr)

    @TinyJit
    def step(x: Any, y: Any) -> Any:
        with Context(TRAINING=1):
            opt.zero_grad()
            loss = model(x).sparse_categorical_crossentropy(y).backward()
            opt.step()
        return loss.realize()

    return model, opt, step


def batch(n: int = 4, seed: int = 1) -> tuple[Any, Any]:
    """A fixed, realized batch: ``(x [n, 8] float, y [n] int)``."""
    import numpy as np
    from tinygrad import Tensor

    rng = np.random.default_rng(seed)
    x = Tensor(rng.standard_normal((n, 8)).astype(np.float32)).realize()
    y = Tensor(rng.integers(0, 4, n).astype(np.int32)).realize()
    return x, y


def a_kernel_call() -> tuple[Any, Any]:
    """A real jit replay's kernel call and its context, as tinygrad passes them to ``pm_exec.rewrite`` (with no
    hook of ours in place: call ``launchtrace.uninstrument()`` first)."""
    from tinygrad import Tensor, TinyJit
    from tinygrad.engine import realize

    seen = []
    original = realize.pm_exec.rewrite

    def grab(call: Any, ctx: Any = None) -> Any:
        seen.append((call, ctx))
        return original(call, ctx)

    a = Tensor.ones(16).contiguous().realize()

    @TinyJit
    def add(t: Any) -> Any:
        return (t * 2).realize()

    realize.pm_exec.rewrite = grab
    try:
        for _ in range(3):
            add(a)
    finally:
        del realize.pm_exec.rewrite
    return seen[-1]
