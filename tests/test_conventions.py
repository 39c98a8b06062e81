"""The attribute conventions: one module of names, the docs table in step with it, values bounded and typed."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from launchtrace import conventions as C

DOC = Path(__file__).resolve().parents[1] / "docs" / "semantic-conventions.md"


def _constant_names() -> dict[str, str]:
    return {k: v for k, v in vars(C).items() if k.isupper() and isinstance(v, str) and "." in v and k != "PREFIX"}


def test_constants_are_unique_and_ours_are_prefixed():
    names = _constant_names()
    values = list(names.values())
    assert len(values) == len(set(values)), "two constants spell the same attribute"
    otel = ("code.", "thread.", "exception")
    for const, value in names.items():
        assert value.startswith((C.PREFIX, *otel)), f"{const}={value!r} is neither ours nor OpenTelemetry's"


def test_both_generations_of_code_attributes_exist():
    assert {C.CODE_FILEPATH, C.CODE_LINENO, C.CODE_FUNCTION, C.CODE_NAMESPACE} == {
        "code.filepath",
        "code.lineno",
        "code.function",
        "code.namespace",
    }
    assert (C.CODE_FILE_PATH, C.CODE_LINE_NUMBER, C.CODE_FUNCTION_NAME) == (
        "code.file.path",
        "code.line.number",
        "code.function.name",
    )


def test_every_constant_is_in_the_docs_table():
    """docs/semantic-conventions.md lists every attribute name this module defines (and no stale ones)."""
    text = DOC.read_text(encoding="utf-8")
    documented = set(re.findall(r"^\| `([^`]+)` \|", text, flags=re.M))
    names = set(_constant_names().values())
    fixed = {n for n in names if "<" not in n}
    missing = sorted(fixed - documented)
    assert not missing, f"not documented: {missing}"
    for field in C.ARG_FIELDS:
        assert C.arg_attr("<param>", field) in documented
    assert C.scalar_attr("<param>") in documented
    stale = sorted(
        d
        for d in documented - names
        if "<" not in d and not d.startswith(("host.", "process.", "os.", "service.", "telemetry."))
    )
    assert not stale, f"documented but not defined: {stale}"


def test_keys_round_trip():
    for key in (0, 3, 17, "3.pos", "0.a.b"):
        assert C.decode_key(C.encode_key(key)) == key
    assert isinstance(C.decode_key("12"), int)


def test_bounded_cuts_at_the_limit():
    assert C.bounded("x" * 2048) == "x" * 2048
    assert C.bounded("x" * 5000) == "x" * 2048
    assert C.bounded("abcdef", 3) == "abc"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (True, True),
        (3, 3),
        (0.25, 0.25),
        ("s", "s"),
        ((1.0, 2.0, 3.0), (1.0, 2.0, 3.0)),
        ([1, 2], (1, 2)),
        (float("nan"), "nan"),
        (2**70, repr(2**70)),
        (None, "None"),
    ],
)
def test_scalar_values_keep_their_otlp_type(value, expected):
    got = C.scalar_value(value)
    assert got == expected and type(got) is type(expected)


def test_scalar_value_nan_inside_a_vector():
    got = C.scalar_value((1.0, math.nan))
    assert got == (1.0, "nan")


def test_user_scope_attributes_never_shadow_ours():
    assert C.scope_user_attr("step") == "step"
    assert C.scope_user_attr("launchtrace.op") == "launchtrace.scope.attr.launchtrace.op"
    assert C.scope_user_attr("code.lineno") == "launchtrace.scope.attr.code.lineno"


def test_arg_labels_are_parameter_names_made_unique():
    arrays, scalars = C.arg_labels(("x", "state", "dt"), ("0", "1.pos", "1.vel"), ("2", "1.mass"))
    assert arrays == ("x", "state.pos", "state.vel")
    assert scalars == ("dt", "state.mass")
    # no parameter names: the key itself; a repeated name gets a deterministic suffix
    arrays, scalars = C.arg_labels((), ("0", "1"), ("2",))
    assert arrays == ("0", "1") and scalars == ("2",)
    arrays, _ = C.arg_labels(("a", "a"), ("0", "1"), ())
    assert arrays == ("a", "a#a1")
