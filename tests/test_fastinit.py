"""launchtrace.fastinit's constructors and copiers build exactly what the dataclass builds.

Compiled (one allocation, one store per slot) or the dataclass's own, the object must be an ordinary frozen
instance: same type, equal field for field (compared by ``repr`` too, so ``1`` / ``1.0`` / ``True`` count as
different), same hash, immutable, picklable, tracked by the garbage collector like one made by ``cls(...)``.
Every test runs twice: with the compiled makers (``launchtrace._slots``, where built) and without them (the
dataclass's own constructor and ``dataclasses.replace``, the library the compiled makers are checked against).
"""

from __future__ import annotations

import dataclasses
import gc
import pickle
import sys
import weakref

import pytest

from launchtrace import native
from launchtrace.fastinit import slot_constructor, slot_copier
from launchtrace.model import BufferArg, LaunchRecord, Site
from launchtrace.spans import SpanData, SpanEvent


def _fields(obj: object) -> list[tuple[str, str]]:
    return [(f.name, repr(getattr(obj, f.name))) for f in dataclasses.fields(obj)]


def _same(made: object, reference: object) -> None:
    assert type(made) is type(reference)
    assert _fields(made) == _fields(reference)
    assert made == reference and hash(made) == hash(reference)
    values = [getattr(made, f.name) for f in dataclasses.fields(made)]
    if gc.is_tracked(made):
        assert gc.is_tracked(reference)
    else:  # the compiled makers leave an object out of the cycle collector only when none of its values is in it
        assert not any(gc.is_tracked(v) for v in values)
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


@pytest.fixture(params=["compiled", "python"], autouse=True)
def maker_kind(request, monkeypatch):
    """Both makers: the compiled one is taken unless ``LAUNCHTRACE_PURE_PYTHON`` is set (read when made)."""
    if request.param == "python":
        monkeypatch.setenv("LAUNCHTRACE_PURE_PYTHON", "1")
    else:
        monkeypatch.delenv("LAUNCHTRACE_PURE_PYTHON", raising=False)
    return request.param


def test_the_compiled_makers_are_used_for_the_hot_dataclasses(maker_kind):
    """Where ``_slots`` is built, the positional constructors and copiers are its types (the speed-up would
    otherwise be silent); ``LAUNCHTRACE_PURE_PYTHON`` gives the library's (``cls(...)``, ``dataclasses.replace``)."""
    compiled = native.load("launchtrace._slots")
    made = [
        slot_constructor(SpanData, ("trace_id", "span_id", "parent_span_id", "name")),
        slot_copier(LaunchRecord, ("seq",)),
    ]
    if maker_kind == "python" or compiled is None:
        assert all(type(m).__name__ == "function" for m in made)
    else:
        assert [type(m) for m in made] == [compiled.Constructor, compiled.Copier]


def test_constructor_with_every_field_equals_the_dataclass():
    _same(slot_constructor(SpanData, tuple(SPAN))(*SPAN.values()), SpanData(**SPAN))
    head = ("trace_id", "span_id", "parent_span_id", "name")
    _same(
        slot_constructor(SpanData, head)(b"\x01" * 16, b"\x02" * 8, None, "n"),
        SpanData(b"\x01" * 16, b"\x02" * 8, None, "n"),
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
def test_classes_with_a_weakref_slot_or_a_base_make_the_same_objects(cls):
    """A weakref slot (not a plain object slot: the dataclass's constructor) or a base class; same results."""
    _same(slot_constructor(cls, ("a", "b"))(1, "y"), cls(1, "y"))
    _same(slot_constructor(cls, ("a",))(1), cls(1))
    _same(slot_copier(cls, ("b",))(cls(1), "z"), cls(1, "z"))


def test_wrong_calls_raise_like_the_python_functions():
    """Wrong argument counts, keywords and a base of another class raise ``TypeError``, compiled or not;
    nothing is made."""
    new = slot_constructor(SpanData, ("trace_id", "span_id", "parent_span_id", "name"))
    copy = slot_copier(LaunchRecord, ("seq",))
    with pytest.raises(TypeError):
        new(b"", b"", None)
    with pytest.raises(TypeError):
        new(b"", b"", None, "n", "extra")
    with pytest.raises(TypeError):
        new(b"", b"", None, name="n")
    with pytest.raises(TypeError):
        copy(LaunchRecord(**RECORD))
    with pytest.raises((TypeError, AttributeError)):
        copy(SpanData(**SPAN), 1)


def test_a_copy_of_a_base_with_an_unset_field_raises_attribute_error():
    """A base whose slots were never set (``object.__new__``) cannot be copied: ``AttributeError``, as reading
    the field would raise, and no half-made object is returned."""
    copy = slot_copier(LaunchRecord, ("seq",))
    with pytest.raises(AttributeError):
        copy(object.__new__(LaunchRecord), 1)


def test_made_objects_hold_their_values_and_release_them():
    """Reference counts: a made object holds one reference per field value and drops it when it dies."""
    value = object()
    before = sys.getrefcount(value)
    new = slot_constructor(SpanData, ("trace_id", "span_id", "parent_span_id", "name", "attributes"))
    spans = [new(b"\x01" * 16, b"\x02" * 8, None, "n", value) for _ in range(100)]
    copies = [slot_copier(SpanData, ("name",))(s, "m") for s in spans]
    assert sys.getrefcount(value) == before + 200
    del spans, copies
    gc.collect()
    assert sys.getrefcount(value) == before


def test_a_default_factory_takes_the_dataclass_constructor():
    """A field filled by a default factory needs a call per object: the dataclass's own constructor makes it."""

    @dataclasses.dataclass(frozen=True, slots=True)
    class WithFactory:
        a: int
        b: list = dataclasses.field(default_factory=list)

    new = slot_constructor(WithFactory, ("a",))
    assert type(new).__name__ == "function"
    one, two = new(1), new(2)
    assert one.b == [] and one.b is not two.b


def test_compiled_makers_untrack_only_what_cannot_be_in_a_cycle(maker_kind):
    """An object whose values are all atomic (or tuples of them) is left out of the cycle collector by the
    compiled makers (``cls(...)``, their fallback, leaves it in); one holding a list (mutable,
    tracked) stays in with either, and so does a cycle through it, which the collector then frees."""
    new = slot_constructor(SpanData, ("trace_id", "span_id", "parent_span_id", "name", "attributes"))
    atomic = new(b"\x01" * 16, b"\x02" * 8, None, "n", (("a", 1), ("b", (1, 2.0, "x"))))
    if maker_kind == "compiled" and native.load("launchtrace._slots") is not None:
        assert not gc.is_tracked(atomic) and not gc.is_tracked(atomic.attributes)
    else:  # cls(...) leaves that to the collector
        assert gc.is_tracked(atomic)

    class Holder(list):  # a list that a weak reference can watch
        pass

    holder = Holder()
    cyclic = new(b"\x01" * 16, b"\x02" * 8, None, "n", (("a", holder),))
    assert gc.is_tracked(cyclic) and gc.is_tracked(cyclic.attributes)
    holder.append(cyclic)  # a cycle: span -> attributes -> pair -> list -> span
    probe = weakref.ref(holder)
    del holder, cyclic
    gc.collect()
    assert probe() is None
