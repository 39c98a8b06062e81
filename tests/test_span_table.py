"""The record <-> span table (``conventions.RECORD_FIELDS``, ``THREAD_FIELDS``) drives both directions: each
row is written only when its field differs from the record model's default, and read back to the same value.
Records go through the real span builder and the real rebuild."""

from __future__ import annotations

import dataclasses

import pytest

from launchtrace import conventions as C
from launchtrace.export.config import ExportConfig
from launchtrace.export.spanattrs import record_attributes
from launchtrace.export.spanbuilder import SpanBuilder
from launchtrace.model import LaunchRecord, Site
from launchtrace.sources.rebuild import rebuild

BASE = LaunchRecord("launch", "sim.k", (4,), None, (), (), Site("a.py", 1, "f", "m"), start_ns=5, end_ns=9, seq=3)
SET = {  # a value other than the default, per field of the table
    "block_dim": 128,
    "max_blocks": 4,
    "device": "cuda:1",
    "stream": 2**63 + 5,  # beyond 64 bits: written as its decimal string
    "api": "wp.launch",
    "internal": True,
    "adjoint": True,
    "captured": True,
    "graph_id": 77,
    "graph_launches": 3,
    "module_hash": "abc123",
    "repeat": 6,
    "thread": 42,
    "thread_name": "worker",
}


def test_the_table_names_every_field_once_and_only_real_fields() -> None:
    rows = C.RECORD_FIELDS + C.THREAD_FIELDS
    fields = {f.name for f in dataclasses.fields(LaunchRecord)}
    assert [r[1] for r in rows] == list(SET) and set(SET) <= fields
    assert len({r[0] for r in rows}) == len(rows)
    assert all(getattr(BASE, field) == default for _, field, _, default in rows if default is not ...)


@pytest.mark.parametrize("field", list(SET))
def test_each_row_is_written_only_when_set_and_read_back(field: str) -> None:
    key = next(r[0] for r in C.RECORD_FIELDS + C.THREAD_FIELDS if r[1] == field)
    always = field == "thread"
    assert (key in dict(record_attributes(BASE))) == always
    rec = dataclasses.replace(BASE, **{field: SET[field]})
    assert key in dict(record_attributes(rec))
    builder = SpanBuilder(ExportConfig.resolve(env={}, file_path="x", fold=False), resource=(("service.name", "t"),))
    spans = builder.feed([("record", rec)], now_ns=0) + builder.flush(now_ns=10**18)
    (trace,) = rebuild(spans).traces.values()
    (back,) = trace.records
    assert getattr(back, field) == SET[field]
