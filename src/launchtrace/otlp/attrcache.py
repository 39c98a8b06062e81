"""Caches for encoding span attributes fast, shared by the protobuf and JSON Lines encoders.

Spans from one call site carry the same attribute keys in the same order and mostly the same values; only a
few change from launch to launch (a sequence number, a pointer, a scalar argument). Three levels, each exact:

1. :class:`FieldCache`: the encoded form of one (key, value) pair. Python finds ``1 == True == 1.0``,
   ``0.0 == -0.0`` and ``(1,) == (True,)``, whose encodings differ, so the cache key is the pair itself for
   strings, adds the type for other scalars, and uses ``repr`` for tuples; ``0.0``/``-0.0`` and NaN are never
   cached. A key that missed 256 times in a row (``launchtrace.seq``: new on every span) becomes *volatile*
   and is encoded directly from then on: caching it cost twice its encoding and evicted what repeats.
2. :class:`AttributeBlocks` by identity: the very same attributes tuple object encoded before, when none of
   its values can change in place (a list or dict in it may have been mutated since).
3. :class:`AttributeBlocks` by pair identity: the span builder reuses one tuple of (key, value) pairs per
   call site and layout and appends the few that change (``launchtrace.seq``), so against the previous block
   that began with the very same pair object and has the same length, only the positions holding another
   pair *object* are re-encoded (a pair object is immutable: same key, same value object). This skips
   building the key sequence and hashing it, which costs more than the rest for a 30-attribute span.
4. :class:`AttributeBlocks` by template: against the previous span with the same key sequence, only the
   positions holding another value *object* are re-encoded (through level 1), found at C speed with
   ``map(operator.is_not)``. The same object has the same encoding, so this is exact without comparing
   values; spans built from one call site share most value objects (names, shapes, sites come from caches).
   Lists, dicts and other mutable values are re-encoded every time (tuples are trusted to hold immutable
   values, as :mod:`launchtrace.spans` requires).

Example::

    fields = FieldCache(lambda key, value: encode_key_value(key, value))
    blocks = AttributeBlocks(fields, separator=b"")
    encoded = blocks.block(span.attributes)
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import compress
from operator import is_not, itemgetter
from typing import Any

__all__ = ["AttributeBlocks", "FieldCache"]

_CACHE_LIMIT = 1 << 16
_VOLATILE_AFTER = 256  # misses in a row that make a key volatile (see FieldCache.volatile)
_BLOCK_LIMIT = 1024
_IMMUTABLE = frozenset({str, int, float, bool, bytes, type(None), tuple})  # tuples hold immutable values
_first = itemgetter(0)
_second = itemgetter(1)


class FieldCache:
    """The encoded field of one (key, value) pair, from ``make(key, value)``, cached where that is exact."""

    def __init__(self, make: Callable[[Any, Any], bytes]) -> None:
        self.make = make
        self._cache: dict[Any, bytes] = {}
        # keys whose value is new on almost every span (a sequence number): encoded without the cache, whose
        # look-up, insertion and periodic clearing cost twice the encoding and push out the values that repeat
        self.volatile: set[Any] = set()
        self._misses: dict[Any, int] = {}  # key -> misses in a row

    def __len__(self) -> int:
        return len(self._cache)

    def field(self, kv: tuple) -> bytes:
        value = kv[1]
        if type(kv[0]) is str and kv[0] in self.volatile:
            return self.make(kv[0], value)
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
            key = kv[0]
            misses = self._misses[key] = self._misses.get(key, 0) + 1
            if misses >= _VOLATILE_AFTER:
                self.volatile.add(key)
                if len(self.volatile) > _CACHE_LIMIT:  # keys made up per span: start over
                    self.volatile.clear()
                del self._misses[key]
            if len(cache) > _CACHE_LIMIT:
                cache.clear()
                self._misses.clear()
            encoded = cache[ck] = self.make(key, value)
        elif self._misses:
            self._misses.pop(kv[0], None)
        return encoded


class AttributeBlocks:
    """Whole attribute blocks (the fields joined by ``separator``), reused by identity or by template."""

    def __init__(self, fields: FieldCache, separator: bytes = b"") -> None:
        self.fields = fields
        self.separator = separator
        self._ids: dict[int, tuple[tuple, bytes]] = {}  # id(attributes) -> (the tuple kept alive, block)
        # key sequence -> [the last span's fields, its values, positions holding mutable values]; the values are
        # kept alive, so an object seen at the same position again is the same object, with the same encoding
        # unless it can change in place (lists, dicts: always re-encoded)
        self._templates: dict[tuple, list] = {}
        # id(first pair) -> [the last such block's pairs (kept alive), its fields, positions holding mutable values]
        self._pairs: dict[int, list] = {}

    def block(self, attrs: tuple) -> bytes:
        hit = self._ids.get(id(attrs))
        if hit is not None and hit[0] is attrs:
            return hit[1]
        field = self.fields.field
        if attrs:
            last = self._pairs.get(id(attrs[0]))
            if last is not None and last[0][0] is attrs[0] and len(last[0]) == len(attrs):
                fields, mutable = last[1], last[2]
                for i in compress(range(len(attrs)), map(is_not, attrs, last[0])):
                    fields[i] = field(attrs[i])  # only where the pair is another object
                    if type(attrs[i][1]) not in _IMMUTABLE:
                        mutable.add(i)
                for i in mutable:  # a list or dict may have changed in place: always re-encode
                    fields[i] = field(attrs[i])
                last[0] = attrs
                return self._remember(attrs, self.separator.join(fields), bool(mutable))
        encoded, fields = self._by_template(attrs, field)
        mutable = {i for i, kv in enumerate(attrs) if type(kv[1]) not in _IMMUTABLE}
        if attrs:
            if len(self._pairs) >= _BLOCK_LIMIT:
                self._pairs.clear()
            self._pairs[id(attrs[0])] = [attrs, list(fields), mutable]
        return self._remember(attrs, encoded, bool(mutable))

    def _remember(self, attrs: tuple, encoded: bytes, mutable: bool) -> bytes:
        """Keep ``encoded`` for the very same tuple, unless a value in it can change in place (a list, a dict):
        the same tuple object then does not mean the same encoding (levels 3 and 4 re-encode those values)."""
        if mutable:
            return encoded
        if len(self._ids) >= _BLOCK_LIMIT:
            self._ids.clear()
        self._ids[id(attrs)] = (attrs, encoded)
        return encoded

    def _by_template(self, attrs: tuple, field: Callable[[tuple], bytes]) -> tuple[bytes, list[bytes]]:
        values = list(map(_second, attrs))
        try:
            keys = tuple(map(_first, attrs))
            template = self._templates.get(keys)
        except TypeError:  # an unhashable key: no template
            keys, template = None, None
        if template is not None:
            fields, previous, mutable = template
            for i in compress(range(len(values)), map(is_not, values, previous)):
                fields[i] = field(attrs[i])  # only where the value is another object
                if type(values[i]) not in _IMMUTABLE:
                    mutable.add(i)
            for i in mutable:  # a list or dict may have changed in place: always re-encode
                fields[i] = field(attrs[i])
            template[1] = values
        else:
            fields = [field(kv) for kv in attrs]
            if keys is not None:
                if len(self._templates) >= _BLOCK_LIMIT:
                    self._templates.clear()
                mutable = {i for i, v in enumerate(values) if type(v) not in _IMMUTABLE}
                self._templates[keys] = [list(fields), values, mutable]
        return self.separator.join(fields), fields
