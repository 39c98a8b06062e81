"""Owners of tinygrad buffers: ``launchtrace.own(model, "net")`` for a tinygrad model or optimizer.

Names come from ``tinygrad.nn.state.get_state_dict`` (``net.l1.weight``; an optimizer gives ``opt.params.0``,
``opt.lr``, ...). A tinygrad parameter stays lazy until the kernel that initialises it runs (usually inside the
first training step), so :meth:`TinygradOwners.own` keeps a weak reference to each *tensor* and labels its
``Buffer`` (``tensor.uop.base.realized``) as soon as one appears, which the decoder asks when it meets a buffer
it does not know. Buffers are keyed by the ``Buffer`` object in a ``WeakKeyDictionary`` (tinygrad's allocator
reuses a freed address at once, so an address says nothing), and labels only apply to records made after
``own`` (by sequence number). A buffer reachable under two labels keeps the first (``own(net)`` then
``own(opt)``: the parameters stay ``net.*``, the optimizer's own state becomes ``opt.*``). A view of an owned
buffer (a jit arena slice) resolves to the owner plus its byte offset.

Example::

    launchtrace.own(net, "net")
    launchtrace.own(opt, "opt")
    # records of the training step: BufferArg.owner == "net.l1.weight", offset 0
"""

from __future__ import annotations

import sys
import threading
import weakref
from typing import Any

from launchtrace import rawevent

__all__ = ["OWNERS", "TinygradOwners", "is_tinygrad_object"]


def is_tinygrad_object(obj: Any) -> bool:
    """Whether ``obj`` may hold tinygrad tensors worth walking (tinygrad is imported, and it is not Warp's)."""
    return "tinygrad" in sys.modules and not type(obj).__module__.startswith("warp")


class TinygradOwners:
    """Labels of tinygrad buffers, weakly held, asked by the decoder with a record's sequence number."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._buffers: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # Buffer -> (label, born, root)
        self._pending: list[tuple[weakref.ref, str, int, str]] = []  # (tensor, label, born, root): not realized
        self._roots: dict[str, int] = {}  # root label -> seq of own(); gone once disowned
        self.version = 0  # moves on every change: the decoder's cached answers hold while it stays

    def own(self, obj: Any, label: str) -> int:
        """Label the tensors reachable from ``obj`` as ``"<label>.<state dict name>"``; returns how many."""
        from tinygrad import Tensor
        from tinygrad.nn.state import get_state_dict

        try:
            state = {"": obj} if isinstance(obj, Tensor) else get_state_dict(obj)
        except Exception:
            return 0
        born = rawevent.next_seq()
        with self._lock:
            self.version += 1
            self._roots.setdefault(label, born)
            for name, tensor in state.items():
                path = f"{label}.{name}" if name else label
                buf = _realized(tensor)
                if buf is not None:
                    self._add(buf, path, born, label)
                else:
                    self._pending.append((weakref.ref(tensor), path, born, label))
        return len(state)

    def disown(self, obj_or_label: Any) -> int:
        """End the labels under root ``label`` (or of the tensors reachable from ``obj``); returns how many."""
        with self._lock:
            self.version += 1
            if isinstance(obj_or_label, str):
                root = obj_or_label
                self._roots.pop(root, None)
                gone = [b for b, v in self._buffers.items() if v[2] == root]
                before = len(self._pending)
                self._pending = [p for p in self._pending if p[3] != root]
                for b in gone:
                    del self._buffers[b]
                return len(gone) + before - len(self._pending)
        from tinygrad import Tensor
        from tinygrad.nn.state import get_state_dict

        try:
            state = {"": obj_or_label} if isinstance(obj_or_label, Tensor) else get_state_dict(obj_or_label)
        except Exception:
            return 0
        ended = 0
        with self._lock:
            self.version += 1
            tensors = {id(t): t for t in state.values()}
            self._pending = [p for p in self._pending if id(p[0]()) not in tensors]
            for t in tensors.values():
                buf = _realized(t)
                if buf is not None and self._buffers.pop(buf, None) is not None:
                    ended += 1
        return ended

    def clear(self) -> None:
        with self._lock:
            self.version += 1
            self._buffers = weakref.WeakKeyDictionary()
            self._pending = []
            self._roots = {}

    def _add(self, buf: Any, label: str, born: int, root: str) -> None:
        if buf not in self._buffers:  # the first label wins
            try:
                self._buffers[buf] = (label, born, root)
                self.version += 1
            except TypeError:
                pass

    def adopt(self) -> None:
        """Label the buffers of pending tensors that have been realized since."""
        with self._lock:
            keep = []
            for entry in self._pending:
                tensor = entry[0]()
                if tensor is None:
                    continue
                buf = _realized(tensor)
                if buf is None:
                    keep.append(entry)
                else:
                    self._add(buf, entry[1], entry[2], entry[3])
            self._pending = keep

    def __len__(self) -> int:
        return len(self._buffers) + len(self._pending)

    def locate(self, buf: Any, seq: int) -> tuple[str, int] | None:
        """``(label, byte offset)`` of tinygrad ``Buffer`` ``buf`` for a record made at ``seq``, or ``None``."""
        if not self._buffers and not self._pending:
            return None
        hit = self._lookup(buf, seq)
        if hit is None and self._pending:
            self.adopt()
            hit = self._lookup(buf, seq)
        return hit

    def _lookup(self, buf: Any, seq: int) -> tuple[str, int] | None:
        entry = self._buffers.get(buf)
        if entry is not None and entry[1] <= seq:
            return entry[0], 0
        base = getattr(buf, "_base", None)
        if base is not None:
            entry = self._buffers.get(base)
            if entry is not None and entry[1] <= seq:
                return entry[0], int(buf.offset or 0)
        return None

    def answer(self, buf: Any, seq: int) -> tuple[str | None, int | None, bool]:
        """``(owner, offset, foreign)`` as :class:`~launchtrace.model.BufferArg` carries them."""
        if not self._roots:
            return None, None, False
        hit = self.locate(buf, seq)
        if hit is not None:
            return hit[0], hit[1], False
        return None, None, any(born <= seq for born in tuple(self._roots.values()))  # a snapshot: own() may run


def _realized(tensor: Any) -> Any:
    try:
        return tensor.uop.base.realized
    except Exception:
        return None


OWNERS = TinygradOwners()
"""The process-wide registry of tinygrad owners the tinygrad decoder asks."""
