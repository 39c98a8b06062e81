"""The switches of :mod:`launchtrace.native`: every compiled part is built where CI requires it, and a missing
one is an error there rather than a quiet fallback."""

from __future__ import annotations

from pathlib import Path

import pytest

from launchtrace import native

SRC = Path(__file__).resolve().parents[1] / "src" / "launchtrace"


@pytest.mark.parametrize("part", native.COMPILED)
def test_every_compiled_part_has_its_source(part):
    assert (SRC / f"{part}.c").is_file()


@pytest.mark.parametrize("part", native.COMPILED)
def test_every_compiled_part_loads_where_built(part):
    """Under ``LAUNCHTRACE_REQUIRE_NATIVE=1`` (CI) a part that is not built fails here instead of skipping."""
    module = native.load("launchtrace." + part.replace("/", "."))
    if module is None:
        assert not native.require_native()
        pytest.skip(f"{part} is not built here (or pure Python is asked for)")
    assert module.__name__.endswith(part.rsplit("/", 1)[-1])


def test_a_missing_part_is_none_by_default_and_an_error_when_required(monkeypatch):
    monkeypatch.delenv("LAUNCHTRACE_PURE_PYTHON", raising=False)
    monkeypatch.delenv("LAUNCHTRACE_REQUIRE_NATIVE", raising=False)
    assert native.load("launchtrace._no_such_part") is None
    monkeypatch.setenv("LAUNCHTRACE_REQUIRE_NATIVE", "1")
    with pytest.raises(ImportError, match="LAUNCHTRACE_REQUIRE_NATIVE"):
        native.load("launchtrace._no_such_part")
    monkeypatch.setenv("LAUNCHTRACE_PURE_PYTHON", "1")  # pure Python, asked for, wins
    assert native.load("launchtrace._no_such_part") is None
    assert native.load("launchtrace.otlp._jsonread") is None


def test_setup_builds_the_same_list_non_optionally_when_required(monkeypatch):
    """``setup.py`` reads :data:`native.COMPILED` and the switch; run its extension list without building."""
    import setuptools

    seen: dict = {}
    monkeypatch.setattr(setuptools, "setup", lambda **kw: seen.update(kw))
    import runpy

    for required, optional in (("1", False), ("0", True)):
        monkeypatch.setenv("LAUNCHTRACE_REQUIRE_NATIVE", required)
        runpy.run_path(str(SRC.parents[1] / "setup.py"))
        names = [ext.name for ext in seen["ext_modules"]]
        assert names == ["launchtrace." + p.replace("/", ".") for p in native.COMPILED]
        assert {ext.optional for ext in seen["ext_modules"]} == {optional}
