"""Call sites in the stable OpenTelemetry ``code.*`` names, the deprecated ones only on request, both read back.

Spans are built by the real span builder from hand-made capture events and read back by the real rebuild; the
old-style spans are what launchtrace wrote before (and what other writers may still write).
"""

from __future__ import annotations

import dataclasses

import pytest

from launchtrace import conventions as C
from launchtrace.export.config import ExportConfig
from launchtrace.export.spanattrs import site_attributes
from launchtrace.export.spanbuilder import SpanBuilder
from launchtrace.model import LaunchRecord, ScopeRecord, Site
from launchtrace.sources.rebuild import rebuild

SITES = [
    Site("/w/sim.py", 12, "step", "pkg.sim"),
    Site("train.py", 3, "<module>", ""),
    Site("<unknown>", 0, "<unknown>"),
]


def _spans(site: Site, deprecated: bool) -> list:
    scope = ScopeRecord(1, "step", "user", start_ns=10, end_ns=90, seq=1, site=site)
    rec = LaunchRecord("launch", "sim.k", (4,), None, (), (), site, start_ns=20, end_ns=30, scope_id=1, seq=2)
    config = ExportConfig.resolve(env={}, file_path="x", fold=False, deprecated_code_attributes=deprecated)
    builder = SpanBuilder(config, resource=(("service.name", "t"),))
    events = [("scope_begin", scope), ("record", rec), ("scope_end", scope)]
    return builder.feed(events, now_ns=0) + builder.flush(now_ns=10**18)


@pytest.mark.parametrize("site", SITES, ids=str)
@pytest.mark.parametrize("deprecated", [False, True])
def test_sites_round_trip_in_either_generation(site: Site, deprecated: bool) -> None:
    spans = _spans(site, deprecated)
    keys = {k for s in spans for k, _ in s.attributes}
    assert {C.CODE_FILE_PATH, C.CODE_LINE_NUMBER, C.CODE_FUNCTION_NAME} <= keys
    assert bool(set(C.CODE_DEPRECATED) & keys) == deprecated
    (trace,) = rebuild(spans).traces.values()
    assert [r.site for r in trace.records] == [site]
    assert [s.site for s in trace.scopes.values()] == [site]


def test_the_stable_function_name_is_fully_qualified() -> None:
    attrs = dict(site_attributes(Site("/w/sim.py", 12, "step", "pkg.sim")))
    assert attrs == {C.CODE_FILE_PATH: "/w/sim.py", C.CODE_LINE_NUMBER: 12, C.CODE_FUNCTION_NAME: "pkg.sim.step"}


@pytest.mark.parametrize(
    "written",
    [
        # launchtrace before: both generations, the function unqualified beside code.namespace
        {C.CODE_FILEPATH: "a.py", C.CODE_LINENO: 7, C.CODE_FUNCTION: "f", C.CODE_NAMESPACE: "m.n",
         C.CODE_FILE_PATH: "a.py", C.CODE_LINE_NUMBER: 7, C.CODE_FUNCTION_NAME: "f"},
        # an old backend's writer: the deprecated names only
        {C.CODE_FILEPATH: "a.py", C.CODE_LINENO: 7, C.CODE_FUNCTION: "f", C.CODE_NAMESPACE: "m.n"},
        # the stable names only
        {C.CODE_FILE_PATH: "a.py", C.CODE_LINE_NUMBER: 7, C.CODE_FUNCTION_NAME: "m.n.f"},
    ],
)  # fmt: skip
def test_every_generation_reads_back_to_one_site(written: dict) -> None:
    spans = _spans(Site("x.py", 1, "g", "z"), deprecated=False)
    code = set(C.CODE_DEPRECATED) | {C.CODE_FILE_PATH, C.CODE_LINE_NUMBER, C.CODE_FUNCTION_NAME}
    spans = [
        dataclasses.replace(s, attributes=(*((k, v) for k, v in s.attributes if k not in code), *written.items()))
        for s in spans
    ]
    (trace,) = rebuild(spans).traces.values()
    assert {r.site for r in trace.records} == {Site("a.py", 7, "f", "m.n")}
