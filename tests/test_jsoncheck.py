"""The allocation-free JSON check (``_jsoncheck.c``) against orjson's verdicts and its Python reference."""

from __future__ import annotations

import json

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from launchtrace import native
from launchtrace.otlp.jsoncheck import check_python

compiled = native.load("launchtrace.otlp._jsoncheck")
pytestmark = pytest.mark.skipif(compiled is None, reason="the compiled check is not built")

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=5), kids, max_size=4),
    max_leaves=20,
)  # fmt: skip


def orjson_ok(data: bytes) -> bool:
    try:
        orjson.loads(data)
    except orjson.JSONDecodeError:
        return False
    return True


@settings(max_examples=400, deadline=None)
@given(json_values, st.integers(0, 10_000), st.binary(max_size=3), st.sampled_from(["cut", "insert", "keep"]))
def test_verdicts_match_orjson_and_the_reference(value, where, noise, how) -> None:
    data = orjson.dumps(value)
    at = where % (len(data) + 1)
    if how == "cut":
        data = data[:at]
    elif how == "insert":
        data = data[:at] + noise + data[at:]
    got = compiled.check(data)
    assert (got is None) == orjson_ok(data), (data, got)
    assert (check_python(data) is None) == (got is None), (data, got, check_python(data))
    if got is not None:
        assert 0 <= got[0] <= len(data) and got[2] == (got[0] >= len(data))


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=40))
def test_random_bytes(data: bytes) -> None:
    got = compiled.check(data)
    assert (got is None) == orjson_ok(data), (data, got)
    assert (check_python(data) is None) == (got is None)


def test_depth_is_orjsons_and_lone_surrogates_are_refused() -> None:
    assert compiled.check(b"[" * 1024 + b"]" * 1024) is None
    assert compiled.check(b"[" * 1025 + b"]" * 1025)[1] == "nested deeper than 1024 levels"
    assert not orjson_ok(b"[" * 1025 + b"]" * 1025)
    for bad in (b'"\\ud800"', b'"\\udc00"', b'"\\ud800\\u0041"'):
        assert compiled.check(bad) is not None and not orjson_ok(bad)
    assert compiled.check(b'"\\ud83d\\ude00"') is None


def first_duplicate(data: bytes) -> bool:
    """Whether any object of ``data`` repeats a key (the standard library's pairs hook as the oracle)."""
    found = []

    def hook(pairs: list) -> dict:
        keys = [k for k, _ in pairs]
        if len(set(keys)) < len(keys):
            found.append(keys)
        return {}

    json.loads(data, object_pairs_hook=hook)
    return bool(found)


@settings(max_examples=300, deadline=None)
@given(st.recursive(
    st.integers(0, 3),
    lambda kids: st.lists(kids, max_size=4)
    | st.lists(st.tuples(st.sampled_from("abc"), kids), max_size=4).map(lambda kv: {"__pairs__": kv}),
    max_leaves=15,
))  # fmt: skip
def test_duplicate_keys_are_found_as_the_standard_library_sees_them(value) -> None:
    def dump(v) -> str:
        if isinstance(v, dict):
            return "{" + ",".join(f'"{k}":{dump(x)}' for k, x in v["__pairs__"]) + "}"
        if isinstance(v, list):
            return "[" + ",".join(dump(x) for x in v) + "]"
        return str(v)

    data = dump(value).encode()
    assert (compiled.duplicate_key(data) is not None) == first_duplicate(data), data
