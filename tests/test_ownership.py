"""BufferSet, buffers_of and the owner registry, with real wp.arrays on the CPU device."""

from __future__ import annotations

import dataclasses
import gc
import threading
import types
import weakref

import numpy as np
import pytest
import warp as wp
from hypothesis import given, settings
from hypothesis import strategies as st

from launchtrace.capture import bus
from launchtrace.ownership import BufferSet, OwnerRegistry, array_extent, buffers_of

wp.config.quiet = True
DEVICE = "cpu"


def arr(n: int = 16, dtype=float) -> wp.array:
    return wp.zeros(n, dtype=dtype, device=DEVICE)


# -- BufferSet ----------------------------------------------------------------------------------------------


def test_bufferset_locate_contains_len_labels() -> None:
    x, v = arr(16), arr(8)
    s = BufferSet().add(x, "x").add(v, "v")
    assert s.locate(x.ptr) == ("x", 0)
    assert s.locate(x.ptr + 63) == ("x", 63)
    assert s.locate(x.ptr + 64) != ("x", 64)
    assert v.ptr + 4 in s and 12345 not in s
    assert len(s) == 2 and sorted(s.labels()) == ["v", "x"]
    assert BufferSet().add(wp.array(dtype=float), "null").labels() == []  # a null array is ignored


def test_bufferset_innermost_wins_for_views() -> None:
    x = arr(100)
    view = x[10:20]
    s = BufferSet().add(x, "x").add(view, "x.view")
    assert s.locate(x.ptr + 40 + 8) == ("x.view", 8)
    assert s.locate(x.ptr + 4) == ("x", 4)
    assert s.locate(x.ptr + 80) == ("x", 80)


def test_array_extent_of_strided_view_stays_inside_parent() -> None:
    grid = wp.zeros((10, 10), dtype=float, device=DEVICE)
    column = grid[:, 2]
    ptr, size = array_extent(column)
    assert ptr == grid.ptr + 8 and size == 9 * 40 + 4
    assert ptr + size <= grid.ptr + grid.capacity


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 500), st.integers(1, 120)), min_size=1, max_size=30), st.data())
def test_bufferset_locate_matches_brute_force(ranges: list, data: st.DataObject) -> None:
    s = BufferSet()
    for i, (start, size) in enumerate(ranges):
        s.add_range(start, size, f"b{i}")
    for ptr in data.draw(st.lists(st.integers(0, 650), max_size=40)):
        hits = [
            (size, -i, f"b{i}", ptr - start) for i, (start, size) in enumerate(ranges) if start <= ptr < start + size
        ]
        expected = (min(hits)[2], min(hits)[3]) if hits else None  # smallest range, latest added on ties
        assert s.locate(ptr) == expected


# -- buffers_of ---------------------------------------------------------------------------------------------


@wp.struct
class Params:
    gravity: wp.array(dtype=float)
    scale: float


@dataclasses.dataclass
class Config:
    table: wp.array


class Slotted:
    __slots__ = ("buf", "n")

    def __init__(self, buf: wp.array) -> None:
        self.buf, self.n = buf, 3


class Sim:
    def __init__(self) -> None:
        self.x = arr()
        self.params = Params()
        self.params.gravity = arr(3)
        self.params.scale = 1.0
        self.config = Config(arr(4))
        self.slotted = Slotted(arr(5))
        self.by_name = {"scratch": arr(6)}
        self.history = [arr(7), (arr(8),)]
        self.indexed = wp.indexedarray(arr(9), [wp.array([0, 1], dtype=int, device=DEVICE)])
        hidden = arr(10)
        self.kernel_fn = lambda: hidden
        self.method = self.step
        self.numpy_data = np.zeros(4)
        self.device = wp.get_device(DEVICE)

    def step(self) -> None:
        pass


GLOBAL_ARRAY = None


def test_buffers_of_reaches_every_kind_of_container_with_paths() -> None:
    sim = Sim()
    labels = set(buffers_of(sim, root="sim").labels())
    assert labels == {
        "sim.x",
        "sim.params.gravity",
        "sim.config.table",
        "sim.slotted.buf",
        "sim.by_name['scratch']",
        "sim.history[0]",
        "sim.history[1][0]",
        "sim.indexed.data",
        "sim.kernel_fn.<hidden>",
    }


def test_buffers_of_does_not_enter_globals_modules_or_numpy() -> None:
    global GLOBAL_ARRAY
    GLOBAL_ARRAY = arr(3)

    def uses_global() -> wp.array:
        return GLOBAL_ARRAY

    holder = types.SimpleNamespace(fn=uses_global, mod=np, data=np.arange(4))
    assert buffers_of(holder).labels() == []


def test_buffers_of_roots_and_depth() -> None:
    a, b = types.SimpleNamespace(x=arr()), types.SimpleNamespace(y=arr())
    assert sorted(buffers_of(a, b).labels()) == ["obj0.x", "obj1.y"]
    assert sorted(buffers_of(a, b, root="gen").labels()) == ["gen0.x", "gen1.y"]
    assert sorted(buffers_of(a, b, root=["p", "q"]).labels()) == ["p.x", "q.y"]
    deep = types.SimpleNamespace(l1=types.SimpleNamespace(l2=types.SimpleNamespace(z=arr())))
    assert buffers_of(deep, root="d").labels() == ["d.l1.l2.z"]
    assert buffers_of(deep, root="d", max_depth=1).labels() == []
    with pytest.raises(ValueError, match="root"):
        buffers_of(a, b, root=["only-one"])


def test_buffers_of_survives_cycles() -> None:
    a = types.SimpleNamespace(x=arr())
    a.self_ref = a
    a.items = [a, {"again": a}]
    assert buffers_of(a, root="a").labels() == ["a.x"]


# -- the owner registry -------------------------------------------------------------------------------------


@pytest.fixture
def reg() -> OwnerRegistry:
    return OwnerRegistry()


def test_own_labels_and_locates_at_seq(reg: OwnerRegistry) -> None:
    sim = Sim()
    before = bus.next_seq()
    owned = reg.own(sim, "sim")
    now = bus.next_seq()
    assert "sim.params.gravity" in owned.labels()
    assert reg.locate(sim.x.ptr + 8, now) == ("sim.x", 8)
    assert reg.locate(sim.x.ptr + 8, before) is None  # not owned yet at that seq
    assert reg.any_at(now) and not reg.any_at(before)
    assert reg.locate(arr().ptr, now) is None


def test_registry_keeps_no_array_alive(reg: OwnerRegistry) -> None:
    holder = types.SimpleNamespace(x=arr())
    ref = weakref.ref(holder.x)
    reg.own(holder, "h")
    del holder
    gc.collect()
    assert ref() is None


def test_freed_then_reused_address_is_not_mislabelled(reg: OwnerRegistry) -> None:
    """Arrays carved out of one pool (as a mempool or arena hands freed blocks out again): the second array
    gets exactly the first one's address after the first died."""
    keeper = types.SimpleNamespace(k=arr(50))
    reg.own(keeper, "keep")
    pool = arr(2000)
    owned = types.SimpleNamespace(buf=wp.array(ptr=pool.ptr, dtype=float, shape=(1000,), device=DEVICE))
    reg.own(owned, "gen")
    seq_alive = bus.next_seq()
    assert reg.locate(pool.ptr + 12, seq_alive) == ("gen.buf", 12)
    del owned
    gc.collect()
    reused = wp.array(ptr=pool.ptr, dtype=float, shape=(1000,), device=DEVICE)
    seq_after = bus.next_seq()
    assert reg.locate(reused.ptr + 12, seq_after) is None  # the new array is not "gen.buf"
    assert reg.any_at(seq_after)  # ... and, since "keep" is still owned, it counts as foreign
    assert reg.locate(reused.ptr + 12, seq_alive) == ("gen.buf", 12)  # a record made before the free keeps it


def test_label_ends_when_malloc_frees_the_array(reg: OwnerRegistry) -> None:
    holder = types.SimpleNamespace(buf=arr(1000))
    reg.own(holder, "gen")
    ptr = holder.buf.ptr
    seq_alive = bus.next_seq()
    del holder
    gc.collect()
    assert reg.locate(ptr, bus.next_seq()) is None
    assert reg.locate(ptr, seq_alive) == ("gen.buf", 0)
    assert not reg.any_at(bus.next_seq())  # its only array died: nothing is owned any more


def test_disown_by_label_and_by_object(reg: OwnerRegistry) -> None:
    a, b = types.SimpleNamespace(x=arr()), types.SimpleNamespace(y=arr())
    reg.own(a, "a")
    reg.own(b, "b")
    s1 = bus.next_seq()
    assert reg.disown("a") == 1
    assert reg.disown(b) == 1
    s2 = bus.next_seq()
    assert reg.locate(a.x.ptr, s1) == ("a.x", 0) and reg.locate(a.x.ptr, s2) is None
    assert reg.locate(b.y.ptr, s1) == ("b.y", 0) and reg.locate(b.y.ptr, s2) is None
    assert reg.any_at(s1) and not reg.any_at(s2)
    assert reg.disown("a") == 0  # already ended


def test_own_twice_does_not_duplicate_and_rejects_bad_labels(reg: OwnerRegistry) -> None:
    a = types.SimpleNamespace(x=arr())
    reg.own(a, "a")
    reg.own(a, "a")
    assert reg.live_labels() == ["a.x"]
    with pytest.raises(ValueError, match="label"):
        reg.own(a, "")


def test_prune_drops_only_entries_nothing_can_still_refer_to(reg: OwnerRegistry) -> None:
    reg.grace_s = 0.0
    live = types.SimpleNamespace(x=arr())
    reg.own(live, "live")
    doomed = [types.SimpleNamespace(x=arr()) for _ in range(5)]
    for i, d in enumerate(doomed):
        reg.own(d, f"d{i}")
    sub = bus.subscribe()  # an open subscription with a pending event older than the deaths
    sub.queue.append((bus.RECORD, bus.next_seq(), threading.get_ident()))
    del doomed, d
    gc.collect()
    assert len(reg) == 6
    assert reg.prune() == 0  # a pending event predates the deaths: keep them
    sub.queue.clear()
    sub.close()
    assert reg.prune() == 5
    assert reg.live_labels() == ["live.x"] and len(reg) == 1
    assert reg.locate(live.x.ptr, bus.next_seq()) == ("live.x", 0)


def test_registry_under_concurrent_own_free_and_locate(reg: OwnerRegistry) -> None:
    keep = types.SimpleNamespace(x=arr(32))
    reg.own(keep, "keep")
    errors: list[BaseException] = []
    stop = threading.Event()

    def churn() -> None:
        try:
            for i in range(150):
                tmp = types.SimpleNamespace(t=arr(8))
                reg.own(tmp, f"t{i}")
                if i % 3 == 0:
                    reg.disown(f"t{i}")
                del tmp
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    def read() -> None:
        try:
            while not stop.is_set():
                assert reg.locate(keep.x.ptr + 4, bus.next_seq()) == ("keep.x", 4)
                reg.any_at(bus.next_seq())
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    readers = [threading.Thread(target=read) for _ in range(2)]
    writers = [threading.Thread(target=churn) for _ in range(2)]
    for t in readers + writers:
        t.start()
    for t in writers:
        t.join()
    stop.set()
    for t in readers:
        t.join()
    assert errors == []
    assert set(reg.live_labels()) == {"keep.x"}


def test_module_level_own_feeds_the_singleton() -> None:
    import launchtrace

    holder = types.SimpleNamespace(x=arr())
    launchtrace.own(holder, "singleton-test")
    from launchtrace.ownership import OWNERS

    assert OWNERS.locate(holder.x.ptr, bus.next_seq()) == ("singleton-test.x", 0)
    assert launchtrace.disown("singleton-test") == 1


OPS = st.lists(
    st.one_of(
        st.tuples(st.just("own"), st.integers(0, 7), st.integers(1, 6), st.sampled_from(["a", "b", "c"])),
        st.tuples(st.just("free"), st.integers(0, 20)),
        st.tuples(st.just("disown"), st.sampled_from(["a", "b", "c"])),
        st.tuples(st.just("reown"), st.integers(0, 20), st.sampled_from(["a", "b", "c"])),
    ),
    max_size=25,
)


@settings(max_examples=60, deadline=None)
@given(OPS)
def test_registry_matches_a_naive_model_at_every_past_seq(ops: list) -> None:
    """Arrays carved out of one pool at chosen offsets (so addresses are reused on purpose), owned, freed and
    disowned in random order; at the end, every look-up at every past checkpoint must match a naive model that
    keeps the full history: innermost live range wins, the latest registration among equal ranges."""
    reg = OwnerRegistry()
    pool = arr(64)
    arrays: dict[int, wp.array] = {}
    model: list[dict] = []  # entries in registration order: start, end, label, array id, alive flag
    checkpoints: list[tuple[int, list[tuple[int, int, str, int]]]] = []
    made = 0
    for op in ops:
        if op[0] == "own":
            _, slot, length, label = op
            a = wp.array(ptr=pool.ptr + 4 * slot, dtype=float, shape=(length,), device=DEVICE)
            arrays[made] = a
            reg.own(types.SimpleNamespace(buf=a), label)
            model.append(
                {
                    "start": a.ptr,
                    "end": a.ptr + 4 * length,
                    "label": f"{label}.buf",
                    "root": label,
                    "id": made,
                    "live": True,
                }
            )
            made += 1
            del a  # only `arrays` may keep it alive
        elif op[0] == "reown" and op[1] in arrays:
            a = arrays[op[1]]
            reg.own(types.SimpleNamespace(buf=a), op[2])
            label = f"{op[2]}.buf"
            same_range = [m for m in model if (m["start"], m["end"]) == (a.ptr, a.ptr + a.capacity)]
            if not any(m["live"] and m["id"] == op[1] and m["label"] == label for m in same_range[-8:]):
                model.append(
                    {
                        "start": a.ptr,
                        "end": a.ptr + a.capacity,
                        "label": label,
                        "root": op[2],
                        "id": op[1],
                        "live": True,
                    }
                )
            del a
        elif op[0] == "free" and op[1] in arrays:
            del arrays[op[1]]
            gc.collect()
            for m in model:
                if m["id"] == op[1]:
                    m["live"] = False
        elif op[0] == "disown":
            reg.disown(op[1])
            for m in model:
                if m["root"] == op[1]:
                    m["live"] = False
        live = [(i, m["start"], m["end"], m["label"]) for i, m in enumerate(model) if m["live"]]
        checkpoints.append((bus.next_seq(), live))
    for seq, live in checkpoints:
        for slot in range(16):
            ptr = pool.ptr + 4 * slot
            hits = [(end - start, -i, label, ptr - start) for i, start, end, label in live if start <= ptr < end]
            expected = (min(hits)[2], min(hits)[3]) if hits else None
            assert reg.locate(ptr, seq) == expected, (seq, slot)
