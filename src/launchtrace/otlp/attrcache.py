"""Caches for encoding span attributes fast, shared by the protobuf and JSON Lines encoders.

Spans from one call site carry the same attribute keys in the same order and mostly the same values; only a
few change from launch to launch (a sequence number, a pointer, a scalar argument). Three levels, each exact:

1. :class:`FieldCache`: the encoded form of one (key, value) pair. Python finds ``1 == True == 1.0``,
   ``0.0 == -0.0`` and ``(1,) == (True,)``, whose encodings differ, so the cache key is the pair itself for
   strings, adds the type for other scalars, and uses ``repr`` for tuples; ``0.0``/``-0.0`` and NaN are never
   cached.
2. :class:`AttributeBlocks` by identity: the very same attributes tuple object encoded before.
3. :class:`AttributeBlocks` by template: for the previous span with the same key sequence and the same value
   types, only the positions whose value changed are re-encoded, compared with C-level ``map(operator.ne)``.
   Positions of types where equality does not imply an identical encoding (floats, tuples, lists, dicts,
   anything but ``str``/``int``/``bool``/``bytes``/``None``) are always re-encoded through level 1.

Example::

    fields = FieldCache(lambda key, value: encode_key_value(key, value))
    blocks = AttributeBlocks(fields, separator=b"")
    encoded = blocks.block(span.attributes)
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import compress
from operator import itemgetter, ne
from typing import Any

__all__ = ["AttributeBlocks", "FieldCache"]

_CACHE_LIMIT = 1 << 16
_BLOCK_LIMIT = 1024
_EXACT_TYPES = frozenset({str, int, bool, bytes, type(None)})  # == between equal types means same encoding
_first = itemgetter(0)
_second = itemgetter(1)


class FieldCache:
    """The encoded field of one (key, value) pair, from ``make(key, value)``, cached where that is exact."""

    def __init__(self, make: Callable[[Any, Any], bytes]) -> None:
        self.make = make
        self._cache: dict[Any, bytes] = {}

    def __len__(self) -> int:
        return len(self._cache)

    def field(self, kv: tuple) -> bytes:
        value = kv[1]
        t = type(value)
        if t is str:
            ck: Any = kv
        elif t is int or t is bool:
            ck = (kv[0], value, t)
        elif t is tuple:
            ck = (kv[0], repr(value), t)
        elif t is float and value != 0.0 and value == value:
            ck = (kv[0], value, t)
        else:
            return self.make(kv[0], value)
        cache = self._cache
        encoded = cache.get(ck)
        if encoded is None:
            if len(cache) > _CACHE_LIMIT:
                cache.clear()
            encoded = cache[ck] = self.make(kv[0], value)
        return encoded


class _Template:
    __slots__ = ("fields", "suspects", "types", "values")

    def __init__(self, types: list, values: list, fields: list, suspects: list) -> None:
        self.types = types
        self.values = values
        self.fields = fields
        self.suspects = suspects


class AttributeBlocks:
    """Whole attribute blocks (the fields joined by ``separator``), reused by identity or by template."""

    def __init__(self, fields: FieldCache, separator: bytes = b"") -> None:
        self.fields = fields
        self.separator = separator
        self._ids: dict[int, tuple[tuple, bytes]] = {}  # id(attributes) -> (the tuple kept alive, block)
        self._templates: dict[tuple, _Template] = {}  # key sequence -> the last span's state

    def block(self, attrs: tuple) -> bytes:
        hit = self._ids.get(id(attrs))
        if hit is not None and hit[0] is attrs:
            return hit[1]
        field = self.fields.field
        try:
            keys = tuple(map(_first, attrs))
            template = self._templates.get(keys)
        except TypeError:  # an unhashable key: no template
            keys, template = None, None
        values = list(map(_second, attrs))
        types = list(map(type, values))
        if template is not None and template.types == types:
            fields = template.fields
            try:
                changed = list(compress(range(len(values)), map(ne, values, template.values)))
            except (TypeError, ValueError):  # a value whose != is not a plain bool (an array)
                changed = range(len(values))
            for i in changed:
                fields[i] = field(attrs[i])
            for i in template.suspects:
                fields[i] = field(attrs[i])
            template.values = values
        else:
            fields = [field(kv) for kv in attrs]
            if keys is not None:
                if len(self._templates) >= _BLOCK_LIMIT:
                    self._templates.clear()
                suspects = [i for i, t in enumerate(types) if t not in _EXACT_TYPES]
                self._templates[keys] = _Template(types, values, list(fields), suspects)
        encoded = self.separator.join(fields)
        if len(self._ids) >= _BLOCK_LIMIT:
            self._ids.clear()
        self._ids[id(attrs)] = (attrs, encoded)
        return encoded
