"""launchtrace.fastinit's generated constructors and copiers build exactly what the dataclass builds.

They create an instance of a same-layout twin class and re-class it (or set slots through descriptors where no
twin can be made); whatever the path, the object must be an ordinary frozen instance: same type, equal field for
field (compared by ``repr`` too, so ``1`` / ``1.0`` / ``True`` count as different), same hash, immutable,
picklable, tracked by the garbage collector like one made by ``cls(...)``.
"""

from __future__ import annotations

import dataclasses
import gc
import pickle

import pytest

from launchtrace.fastinit import _twin, slot_constructor, slot_copier
from launchtrace.model import BufferArg, LaunchRecord, Site
from launchtrace.spans import SpanData, SpanEvent


def _fields(obj: object) -> list[tuple[str, str]]:
    return [(f.name, repr(getattr(obj, f.name))) for f in dataclasses.fields(obj)]


def _same(made: object, reference: object) -> None:
    assert type(made) is type(reference)
    assert _fields(made) == _fields(reference)
    assert made == reference and hash(made) == hash(reference)
    assert gc.is_tracked(made) == gc.is_tracked(reference)
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.__setattr__(dataclasses.fields(made)[0].name, "changed")
    assert pickle.loads(pickle.dumps(made)) == reference


SPAN = dict(
    trace_id=b"\x01" * 16, span_id=b"\x02" * 8, parent_span_id=None, name="k", start_ns=1, end_ns=2,
    attributes=(("a", 1), ("b", 1.0), ("c", True)), kind=2, status_code=2, status_message="m",
    events=(SpanEvent("e", 3, (("x", "y"),)),), links=(), trace_state="t", flags=1, dropped_attributes_count=4,
    dropped_events_count=5, dropped_links_count=6, resource=(("service.name", "s"),), resource_schema_url="u",
    scope_name="launchtrace", scope_version="0.1", scope_attributes=(("d", 1),), schema_url="w",
)  # fmt: skip
RECORD = dict(
    op="launch", kernel="m.k", dim=(4,), stream=None, arrays=((0, 16),), scalars=((1, 0.5), (2, -0.0)),
    site=Site("f.py", 3, "main", "m"), params=("x", "s", "t"),
    buffers=(BufferArg(0, "x", 16, (4,), "float32", 16, "sim.x", 0, False, "r"),), block_dim=256, thread=7,
    thread_name="MainThread", start_ns=1, end_ns=2, graph_id=3, captured=True, api="wp.launch", seq=9,
)  # fmt: skip


@pytest.mark.parametrize("cls", [SpanData, LaunchRecord, BufferArg, SpanEvent])
def test_the_twin_class_is_used_for_the_hot_dataclasses(cls):
    """The fast path is really taken for the classes made per launch (else the speed-up would be silent)."""
    assert _twin(cls) is not None


def test_constructor_with_every_field_equals_the_dataclass():
    _same(slot_constructor(SpanData)(*SPAN.values()), SpanData(**SPAN))
    _same(
        slot_constructor(SpanData)(b"\x01" * 16, b"\x02" * 8, None, "n"), SpanData(b"\x01" * 16, b"\x02" * 8, None, "n")
    )


def test_constructor_of_a_subset_fills_the_defaults():
    passed = tuple(RECORD)
    _same(slot_constructor(LaunchRecord, passed)(*RECORD.values()), LaunchRecord(**RECORD))
    with pytest.raises(TypeError, match="no field"):
        slot_constructor(LaunchRecord, ("nope",))


def test_copier_equals_dataclasses_replace():
    base = LaunchRecord(**RECORD)
    copy = slot_copier(LaunchRecord, ("start_ns", "end_ns", "seq", "template"))
    made = copy(base, 10, 20, 30, base)
    _same(made, dataclasses.replace(base, start_ns=10, end_ns=20, seq=30, template=base))
    assert made.template is base and made.buffers is base.buffers  # shared, not copied
    _same(slot_copier(SpanData, ())(SpanData(**SPAN)), SpanData(**SPAN))  # nothing changed: an equal copy


@dataclasses.dataclass(frozen=True, slots=True, weakref_slot=True)
class _WithWeakref:
    a: int
    b: str = "x"


@dataclasses.dataclass(frozen=True, slots=True)
class _Base:
    a: int


@dataclasses.dataclass(frozen=True, slots=True)
class _Derived(_Base):
    b: str = "x"


@pytest.mark.parametrize("cls", [_WithWeakref, _Derived])
def test_classes_without_a_twin_take_the_descriptor_path(cls):
    """A weakref slot or a base class: no twin (re-classing would be refused or unsafe); same results."""
    assert _twin(cls) is None
    _same(slot_constructor(cls)(1, "y"), cls(1, "y"))
    _same(slot_copier(cls, ("b",))(cls(1), "z"), cls(1, "z"))
