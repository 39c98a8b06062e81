/* The wp.launch capture wrapper in C: launchtrace.capture.warp.wrap_launch's common path, compiled.
 *
 * Why: the Python wrapper that records a launch adds a large fraction of a bare CPU launch of a small kernel
 * in Warp's Python (45 lines of bytecode per launch; figures in docs/capture.md). This object does the same work for
 * the common call (wp.launch(kernel, dim, inputs=[arrays and plain scalars], outputs=[...], device=None|str|Device))
 * and hands every other call, before running it, to the Python wrapper it was given (`fallback`), which stays the
 * definition: recording off, a Tape active, measurements on, other keywords, struct or vector arguments, anything that
 * is not a list or tuple. The event it queues is the Python wrapper's flat event, item for item;
 * tests/test_fastlaunch.py checks the two wrappers queue equal events for the same calls, and every capture test runs
 * through this one when it is built.
 *
 * Since the first version (before and after: docs/capture.md, "How it stays cheap") it is called the way
 * Warp's own function is (vectorcall: no keyword dict is built), builds the event tuple in place, reads the thread's
 * state through its slots (the state object remembered in the thread's own state dict), module attributes from
 * the module dicts, and remembers the last call site's line, kernels / dtypes / devices' handle ids and each
 * subscription's queue.
 *
 * Nothing here may break the program: a failure while building the event is reported once through the
 * Python `warn` callable and the launch's result is returned unchanged; an exception from the launch itself is
 * recorded through `failed` and re-raised unchanged.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <frameobject.h>
#include <structmember.h>
#include <pthread.h>
#include <stddef.h>
#include <time.h>

#include "../_native.h"
#include "_rawevent.h"

#define HANDLE_CACHE 8
#define MAX_SUBS 8 /* subscriptions remembered; more than that are looked up on every call */
#define N_TINY_EVENT 10 /* (FRAMEWORK, seq, tid, decode, call, run, t0, t1, scope, error): tinygrad_decode's layout */

/* A value read from a dict (a module's, or hotpath._USER_MODULE) and the dict's version tag when it was read. */
typedef struct {
    PyObject *dict;  /* borrowed: the module dicts and user_module are kept alive by the Launcher */
    uint64_t tag;    /* 0: nothing remembered */
    PyObject *value; /* strong */
} DictCache;

enum { DC_SUBS, DC_RUNTIME, DC_PROBES, DC_SITE, DC_COUNT };

#define ARR_CACHE 64 /* by address: ARR_WAYS ways, ARR_CACHE / ARR_WAYS sets */
#define ARR_WAYS 4

typedef struct {
    PyObject *obj;     /* the array's address when remembered (compared only; the weak reference says if alive) */
    PyObject *ref;     /* weakref.ref(array) */
    PyObject *vals[5]; /* ptr (0 for none), shape, dtype id, capacity (0 for none), device id */
} ArrSlot;

/* The subscriptions of the bus._subs tuple last seen (the bus replaces the tuple when one comes or goes): each
 * one's queue (a deque, never replaced), its bound append and its capacity (fixed). */
typedef struct {
    PyObject *seen;
    Py_ssize_t n;
    PyObject *queues[MAX_SUBS];
    PyObject *appends[MAX_SUBS];
    Py_ssize_t capacities[MAX_SUBS];
} SubsCache;

#define N_LAUNCHER_REFS 17

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall; /* called as Warp's function is: positional arguments and keyword names */
    PyObject *dict;        /* __dict__: functools-style identity (__name__, __wrapped__, ...) */
    union { /* what __init__ is given, in its order: by name, and as one array for init, traverse and clear */
        struct {
            PyObject *original;    /* Warp's launch */
            PyObject *fallback;    /* the Python wrapper: every call this object does not handle */
            PyObject *local;       /* capture.state._local (threading.local, .st: the thread's state) */
            PyObject *bus;         /* the capture.bus module (._subs) */
            PyObject *warp_mod;    /* the capture.warp module (._PROBES) */
            PyObject *ctx;         /* warp._src.context (.runtime.tape) */
            PyObject *next_seq;    /* bus.next_seq */
            PyObject *user_module; /* hotpath._USER_MODULE: id(code) -> (code, module) */
            PyObject *handles;     /* hotpath.HANDLES: id -> object, kept alive */
            PyObject *array_type;  /* warp array */
            PyObject *device_type; /* warp Device */
            PyObject *find_site;   /* hotpath.find_site(frame) -> (code, line, module, caller) */
            PyObject *failed;      /* warp._record_failed_launch(exc, t0, frame, *args, **kwargs) */
            PyObject *warn;        /* hotpath._warn_once(what) */
            PyObject *record;      /* bus.RECORD */
            PyObject *arr;         /* hotpath.ARR */
            PyObject *flat;        /* hotpath.FLAT */
        };
        PyObject *refs[N_LAUNCHER_REFS];
    };
    /* what the common call reads, found once: capture.state.ThreadState's slot offsets (busy, stack,
     * capture_graph, tid; st_type NULL until known, or when the state object is of another type), and the
     * last few kernels / dtypes / devices with their handle ids (hotpath.HANDLES keeps them alive for good,
     * so an address seen there is never another object's) */
    PyTypeObject *st_type;
    Py_ssize_t st_offsets[4];
    PyObject *handle_objs[HANDLE_CACHE]; /* borrowed: kept alive by `handles` */
    PyObject *handle_ids[HANDLE_CACHE];
    int handle_next;
    SubsCache subs;
    /* the call site's line last computed: for (code, instruction offset) it never changes */
    PyObject *line_code;
    int line_lasti;
    PyObject *line;
    /* module attributes and the call site's user_module entry, each remembered with the version tag of the
     * dict it came from (CPython changes a dict's tag on every change to it, PEP 509): see dict_cached() */
    DictCache attrs[DC_COUNT];
    /* the thread's state object, remembered with the thread state's id (unique for the interpreter's life) */
    uint64_t st_thread;
    PyObject *st_cached;
    /* each recent wp.array argument's event values (ptr, shape, dtype id, capacity, device id), remembered
     * with a weak reference to the array: see array_values() */
    ArrSlot arr_cache[ARR_CACHE];
    unsigned arr_next; /* the way a miss takes when every way holds a live array */
} Launcher;

static PyObject *s_st, *s_busy, *s_subs, *s_probes, *s_runtime, *s_tape, *s_stack, *s_capture_graph, *s_tid;
static PyObject *s_offer, *s_queue, *s_capacity, *s_append, *s_full, *s_ptr, *s_shape, *s_dtype, *s_capacity_attr;
static PyObject *s_device, *s_kernel, *s_dim, *s_inputs, *s_outputs, *s_record_tape, *s_launch;
static PyObject *s_state_key, *c_zero, *s_src, *s_op, *s_tinygrad;

enum { ST_BUSY, ST_STACK, ST_CAPTURE_GRAPH, ST_TID };

/* module.name as a new reference: straight from the module's dict (what a module attribute read finds first),
 * else the usual attribute look-up (and its AttributeError). */
static PyObject *module_attr(PyObject *module, PyObject *name) {
    if (PyModule_CheckExact(module)) {
        PyObject *v = PyDict_GetItemWithError(PyModule_GetDict(module), name); /* borrowed */
        if (v != NULL) return Py_NewRef(v);
        if (PyErr_Occurred()) return NULL;
    }
    return PyObject_GetAttr(module, name);
}

/* dict[name] (new reference; NULL with no exception when absent), remembered with the dict's version tag.
 *
 * Why: three module attributes and the call site's entry were four dict look-ups per launch. A dict's
 * version tag (PEP 509) changes whenever the dict changes, so an unchanged tag means the same value: exact.
 * CPython 3.12 deprecates the tag; there, and on any build without it, this is a plain look-up. */
static PyObject *dict_cached(DictCache *c, PyObject *dict, PyObject *name) {
#if PY_VERSION_HEX < 0x030C0000
    uint64_t tag = ((PyDictObject *)dict)->ma_version_tag;
    if (c->tag != 0 && c->dict == dict && c->tag == tag) return Py_NewRef(c->value);
#endif
    PyObject *v = PyDict_GetItemWithError(dict, name); /* borrowed */
    if (v == NULL) return NULL;
    Py_INCREF(v);
#if PY_VERSION_HEX < 0x030C0000
    Py_INCREF(v);
    Py_XSETREF(c->value, v);
    c->dict = dict;
    c->tag = tag;
#endif
    return v;
}

static void dict_cache_clear(DictCache *c) {
    Py_CLEAR(c->value);
    c->dict = NULL;
    c->tag = 0;
}

/* module.name (new reference) through `c` when it is a plain module, else module_attr(). */
static PyObject *module_attr_cached(DictCache *c, PyObject *module, PyObject *name) {
    if (PyModule_CheckExact(module)) {
        PyObject *v = dict_cached(c, PyModule_GetDict(module), name);
        if (v != NULL || PyErr_Occurred()) return v;
    }
    return module_attr(module, name);
}

/* This thread's capture.state.ThreadState (new reference): `local.st`, remembered in the thread's own state
 * dict (cleared by Python when the thread ends) next to the `local` it came from, so later calls skip the
 * threading.local look-up. `local.st` is set once per thread and never replaced. The last thread's is also
 * remembered by the thread state's id, which the interpreter never gives to another thread. */
static PyObject *thread_state_slow(PyObject *local);

static PyObject *thread_state(Launcher *self) {
    uint64_t id = PyThreadState_GetID(PyThreadState_Get());
    if (self->st_cached != NULL && self->st_thread == id) return Py_NewRef(self->st_cached);
    PyObject *st = thread_state_slow(self->local);
    if (st != NULL) {
        Py_XSETREF(self->st_cached, Py_NewRef(st));
        self->st_thread = id;
    }
    return st;
}

static PyObject *thread_state_slow(PyObject *local) {
    PyObject *d = PyThreadState_GetDict(); /* borrowed; NULL when there is none */
    if (d != NULL) {
        PyObject *hit = PyDict_GetItemWithError(d, s_state_key);
        if (hit != NULL && PyTuple_CheckExact(hit) && PyTuple_GET_SIZE(hit) == 2 &&
            PyTuple_GET_ITEM(hit, 0) == local) {
            PyObject *st = PyTuple_GET_ITEM(hit, 1);
            return Py_NewRef(st);
        }
        if (PyErr_Occurred()) return NULL;
    }
    PyObject *st = PyObject_GetAttr(local, s_st);
    if (st != NULL && d != NULL) {
        PyObject *pair = PyTuple_Pack(2, local, st);
        if (pair == NULL || PyDict_SetItem(d, s_state_key, pair) < 0) PyErr_Clear();
        Py_XDECREF(pair);
    }
    return st;
}

/* Whether `st` has the ThreadState layout found earlier (found now if not yet known). */
static int st_known(Launcher *self, PyObject *st) {
    if (Py_TYPE(st) == self->st_type) return 1;
    if (self->st_type != NULL) return 0;
    PyObject *names[4] = {s_busy, s_stack, s_capture_graph, s_tid};
    for (int i = 0; i < 4; i++)
        if ((self->st_offsets[i] = lt_slot_offset(Py_TYPE(st), names[i])) < 0) return 0;
    Py_INCREF(Py_TYPE(st));
    self->st_type = Py_TYPE(st);
    return 1;
}

/* st.<field> as a new reference (through its slot when the layout is known). */
static PyObject *st_get(Launcher *self, PyObject *st, int field) {
    if (st_known(self, st)) {
        PyObject *v = *(PyObject **)((char *)st + self->st_offsets[field]);
        if (v != NULL) return Py_NewRef(v);
    }
    PyObject *names[4] = {s_busy, s_stack, s_capture_graph, s_tid};
    return PyObject_GetAttr(st, names[field]);
}

/* st.busy = value (a bool); 0 or -1. */
static int st_set_busy(Launcher *self, PyObject *st, PyObject *value) {
    if (st_known(self, st)) {
        PyObject **slot = (PyObject **)((char *)st + self->st_offsets[ST_BUSY]);
        PyObject *old = *slot;
        Py_INCREF(value);
        *slot = value;
        Py_XDECREF(old); /* a bool: nothing runs */
        return 0;
    }
    return PyObject_SetAttr(st, s_busy, value);
}

static long long clock_ns(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}
#define now_ns() clock_ns(CLOCK_REALTIME) /* time.time_ns()'s clock on Linux */
#define mono_ns() clock_ns(CLOCK_MONOTONIC)

/* 1 when v is a value the flat event holds as is: int, float, bool, str, None (exact types). */
static int is_plain(PyObject *v) {
    return v == Py_None || PyLong_CheckExact(v) || PyFloat_CheckExact(v) || PyBool_Check(v) ||
           PyUnicode_CheckExact(v);
}

/* handles[id(obj)] = obj unless present; the id as a new int, or NULL. */
static PyObject *handle(Launcher *self, PyObject *obj) {
    for (int i = 0; i < HANDLE_CACHE; i++) {
        if (self->handle_objs[i] == obj) {
            Py_INCREF(self->handle_ids[i]);
            return self->handle_ids[i];
        }
    }
    PyObject *key = PyLong_FromVoidPtr(obj);
    if (key == NULL) return NULL;
    int has = PyDict_Contains(self->handles, key);
    if (has < 0 || (has == 0 && PyDict_SetItem(self->handles, key, obj) < 0)) {
        Py_DECREF(key);
        return NULL;
    }
    int i = self->handle_next;
    self->handle_next = (i + 1) % HANDLE_CACHE;
    Py_INCREF(key);
    Py_XSETREF(self->handle_ids[i], key);
    self->handle_objs[i] = obj;
    return key;
}

/* The keywords the flat path knows, in the order of wp.launch's parameters. */
enum { KW_KERNEL, KW_DIM, KW_INPUTS, KW_OUTPUTS, KW_RECORD_TAPE, KW_DEVICE, KW_COUNT };

/* One call's arguments as the vectorcall protocol passes them: nargs positional ones, then one value per name
 * in kwnames (NULL when there are none). Read in place: no tuple or dict is made for a recorded call. The
 * keywords are matched to the flat path's names once per call (read_keywords): `kw` holds each one's value
 * (borrowed) or NULL, `flat` whether every keyword is among them. */
typedef struct {
    PyObject *const *args;
    Py_ssize_t nargs;
    PyObject *kwnames;
    PyObject *kw[KW_COUNT];
    int flat;
} Call;

/* Whether keyword name `key` is `name` (interned). Names in compiled calls are interned, and two interned
 * strings are equal only when they are the same object: the comparison runs only for a name made at run time
 * (f(**{"inp" + "uts": ...})). It was about 20 string comparisons per launch. */
static int same_name(PyObject *key, PyObject *name) {
    if (key == name) return 1;
    if (!PyUnicode_Check(key) || PyUnicode_CHECK_INTERNED(key)) return 0;
    return PyUnicode_Compare(key, name) == 0;
}

/* Fill c->kw and c->flat from the call's keyword names: one pass (the wrapper asked for keywords by name up
 * to ten times per launch, each a walk over the names). */
static void read_keywords(Call *c) {
    for (int i = 0; i < KW_COUNT; i++) c->kw[i] = NULL;
    c->flat = 1;
    if (c->kwnames == NULL) return;
    PyObject *names[KW_COUNT] = {s_kernel, s_dim, s_inputs, s_outputs, s_record_tape, s_device};
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(c->kwnames); k++) {
        PyObject *key = PyTuple_GET_ITEM(c->kwnames, k);
        int found = -1;
        for (int i = 0; i < KW_COUNT && found < 0; i++)
            if (key == names[i]) found = i;
        for (int i = 0; i < KW_COUNT && found < 0; i++)
            if (same_name(key, names[i])) found = i;
        if (found < 0) {
            c->flat = 0;
        } else if (c->kw[found] == NULL) {
            c->kw[found] = c->args[c->nargs + k];
        }
    }
}

/* The keyword argument `which` (KW_...), or NULL (borrowed; never an error). */
static PyObject *keyword(const Call *c, int which) { return c->kw[which]; }

/* Positional argument i if there are enough, else keyword `which`, else NULL (borrowed). */
static PyObject *argument(const Call *c, Py_ssize_t i, int which) { return c->nargs > i ? c->args[i] : c->kw[which]; }

/* A list or tuple of arrays and plain values: its length, or -1 when the flat path does not take it. */
static Py_ssize_t values_ok(Launcher *self, PyObject *seq) {
    if (seq == NULL || seq == Py_None) return 0;
    if (!PyList_CheckExact(seq) && !PyTuple_CheckExact(seq)) return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *v = items[i];
        if ((PyObject *)Py_TYPE(v) != self->array_type && !is_plain(v)) return -1;
    }
    return n;
}

/* How many event items the values of `seq` take: six per array, one per plain value. */
static Py_ssize_t values_size(Launcher *self, PyObject *seq) {
    if (seq == NULL || seq == Py_None) return 0;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq), size = 0;
    PyObject **items = PySequence_Fast_ITEMS(seq);
    for (Py_ssize_t i = 0; i < n; i++) size += (PyObject *)Py_TYPE(items[i]) == self->array_type ? 6 : 1;
    return size;
}

/* A queued launch event that is not a tuple: the same items, in an object outside the cycle collector.
 *
 * Why: a tuple is allocated as a GC object, and every one that stays queued raises the collector's young
 * generation count until it collects (CPython's threshold: 700 allocations); survivors of those collections
 * pile up until a full collection of the program's whole heap, which the launching thread pays for (how long
 * and how often: docs/capture.md). An Event is plain memory: queuing it costs the collector nothing. It is made only
 * when every item is out of the cycle collector already (atomic values, or tuples of them: lt_acyclic's rule, the rule
 * under which the tuple used to be untracked), so no reference cycle can pass through it; otherwise the event is the
 * tracked tuple, as before. Subscription.drain_raw turns Events into tuples (expand() below) before anyone reads them,
 * so every consumer still sees the flat tuple; an Event also reads like one (len, [i]) for code that peeks at the
 * queue. */
typedef LtEvent Event; /* the layout: _rawevent.h */

static PyTypeObject EventType;

static Event *event_new(Py_ssize_t n) {
    Event *e = PyObject_NewVar(Event, &EventType, n);
    if (e != NULL) memset(e->items, 0, (size_t)n * sizeof(PyObject *));
    return e;
}

static void Event_dealloc(Event *self) {
    for (Py_ssize_t i = 0; i < Py_SIZE(self); i++) Py_XDECREF(self->items[i]);
    PyObject_Free(self);
}

static Py_ssize_t Event_length(Event *self) { return Py_SIZE(self); }

static PyObject *Event_item(Event *self, Py_ssize_t i) {
    if (i < 0 || i >= Py_SIZE(self) || self->items[i] == NULL) {
        PyErr_SetString(PyExc_IndexError, "event index out of range");
        return NULL;
    }
    Py_INCREF(self->items[i]);
    return self->items[i];
}

/* The event's items as a tuple, left out of the cycle collector when every item is (a launch's always are;
 * the tinygrad hooks' events hold the call and its run, which the collector tracks: their tuple stays
 * tracked, as a tuple made in Python would be). */
static PyObject *event_tuple(Event *e) {
    PyObject *t = PyTuple_New(Py_SIZE(e));
    if (t == NULL) return NULL;
    int acyclic = 1;
    for (Py_ssize_t i = 0; i < Py_SIZE(e); i++) {
        PyObject *v = e->items[i] ? e->items[i] : Py_None;
        Py_INCREF(v);
        PyTuple_SET_ITEM(t, i, v);
        if (acyclic) acyclic = lt_acyclic(v, 1);
    }
    if (acyclic) PyObject_GC_UnTrack(t);
    return t;
}

/* event_tuple for an Event only the caller's list holds (it goes right after): its references move into the
 * tuple instead of being taken and then released (two reference count changes per item: for a kernel with 8
 * arrays, 140 of them per launch). */
static PyObject *event_tuple_take(Event *e) {
    PyObject *t = PyTuple_New(Py_SIZE(e));
    if (t == NULL) return NULL;
    int acyclic = 1;
    for (Py_ssize_t i = 0; i < Py_SIZE(e); i++) {
        PyObject *v = e->items[i];
        if (v == NULL) {
            v = Py_None;
            Py_INCREF(v);
        }
        e->items[i] = NULL;
        PyTuple_SET_ITEM(t, i, v);
        if (acyclic) acyclic = lt_acyclic(v, 1);
    }
    Py_SET_SIZE(e, 0); /* empty now: its release has nothing to walk */
    if (acyclic) PyObject_GC_UnTrack(t);
    return t;
}

static PySequenceMethods Event_as_sequence = {
    .sq_length = (lenfunc)Event_length,
    .sq_item = (ssizeargfunc)Event_item,
};

static PyTypeObject EventType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "launchtrace.capture._fastlaunch.Event",
    .tp_basicsize = offsetof(Event, items),
    .tp_itemsize = sizeof(PyObject *),
    .tp_flags = Py_TPFLAGS_DEFAULT, /* no Py_TPFLAGS_HAVE_GC: the point of the type */
    .tp_doc = "A queued launch event outside the cycle collector; expand() makes it the flat tuple.",
    .tp_dealloc = (destructor)Event_dealloc,
    .tp_as_sequence = &Event_as_sequence,
};

/* expand(events: list) -> None: every Event in the list replaced by its tuple, in place. */
static PyObject *expand(PyObject *Py_UNUSED(module), PyObject *events) {
    if (!PyList_Check(events)) {
        PyErr_SetString(PyExc_TypeError, "expand() takes a list");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(events); i++) {
        PyObject *v = PyList_GET_ITEM(events, i);
        if (Py_TYPE(v) != &EventType) continue;
        PyObject *t = Py_REFCNT(v) == 1 ? event_tuple_take((Event *)v) : event_tuple((Event *)v);
        if (t == NULL) return NULL;
        PyList_SET_ITEM(events, i, t);
        Py_DECREF(v);
    }
    Py_RETURN_NONE;
}

/* Put `v` (a new reference is taken) at e->items[*pos], then advance; -1 (RuntimeError) past the end, which
 * only a list changed while it was read could cause. */
static int put(Event *e, Py_ssize_t *pos, PyObject *v) {
    if (*pos >= Py_SIZE(e)) {
        PyErr_SetString(PyExc_RuntimeError, "launch arguments changed while recorded");
        return -1;
    }
    Py_INCREF(v);
    e->items[*pos] = v;
    (*pos)++;
    return 0;
}

static void arr_slot_clear(ArrSlot *slot) {
    slot->obj = NULL;
    Py_CLEAR(slot->ref);
    for (int k = 0; k < 5; k++) Py_CLEAR(slot->vals[k]);
}

static PyObject *weak_target(PyObject *ref) { /* borrowed; Py_None once the object is gone */
#if PY_VERSION_HEX >= 0x030D0000
    PyObject *obj = NULL;
    if (PyWeakref_GetRef(ref, &obj) <= 0) {
        PyErr_Clear();
        return Py_None;
    }
    Py_DECREF(obj); /* the caller holds the array itself */
    return obj;
#else
    return PyWeakref_GET_OBJECT(ref);
#endif
}

/* The event values of wp.array `v` (ptr or 0, shape, dtype id, capacity or 0, device id), borrowed from the
 * cache slot that now holds them; NULL with an exception set.
 *
 * Why: five attribute reads per array argument were the wrapper's largest single cost.
 * Warp sets these five attributes only while constructing an array (warp/_src/types.py, array._init_*), so a
 * live array's values never change; a slot is used only while its weak reference still points at this very
 * object, so an address reused by a new array is read afresh. Setting `ptr` or `shape` on a live wp.array by
 * hand is not something Warp supports, and would be missed here. */
static PyObject **array_values(Launcher *self, PyObject *v) {
    /* ARR_WAYS slots from a multiplicative hash of the address: a kernel's arrays, allocated one after another
     * at addresses a fixed size apart, all fell into two or three slots of the plain `address % 64` and pushed
     * each other out (8 arrays: 1,800 instructions per launch more, bench_instructions) */
    size_t home = (size_t)((((uint64_t)(uintptr_t)v >> 4) * 0x9E3779B97F4A7C15ULL) >> 58) & ~(size_t)(ARR_WAYS - 1);
    ArrSlot *slot = NULL;
    for (int w = 0; w < ARR_WAYS; w++) {
        ArrSlot *s = &self->arr_cache[home + w];
        if (s->obj == v && s->ref != NULL && weak_target(s->ref) == v) return s->vals;
        if (slot == NULL && (s->ref == NULL || weak_target(s->ref) == Py_None)) slot = s; /* free, or its array died */
    }
    if (slot == NULL) slot = &self->arr_cache[home + (self->arr_next++ % ARR_WAYS)]; /* all live: one in turn */
    PyObject *ptr = PyObject_GetAttr(v, s_ptr);
    PyObject *shape = ptr ? PyObject_GetAttr(v, s_shape) : NULL;
    PyObject *dtype = shape ? PyObject_GetAttr(v, s_dtype) : NULL;
    PyObject *cap = dtype ? PyObject_GetAttr(v, s_capacity_attr) : NULL;
    PyObject *device = cap ? PyObject_GetAttr(v, s_device) : NULL;
    PyObject *did = device ? handle(self, dtype) : NULL;
    PyObject *vid = did ? handle(self, device) : NULL;
    PyObject **out = NULL;
    if (vid != NULL) {
        int ptr_true = PyObject_IsTrue(ptr), cap_true = PyObject_IsTrue(cap);
        if (ptr_true >= 0 && cap_true >= 0) {
            arr_slot_clear(slot);
            slot->ref = PyWeakref_NewRef(v, NULL);
            if (slot->ref == NULL) PyErr_Clear(); /* no weak references: used for this call, never hit */
            slot->obj = v;
            PyObject *vals[5] = {ptr_true ? ptr : c_zero, shape, did, cap_true ? cap : c_zero, vid};
            for (int k = 0; k < 5; k++) {
                Py_INCREF(vals[k]);
                slot->vals[k] = vals[k];
            }
            out = slot->vals;
        }
    }
    Py_XDECREF(ptr);
    Py_XDECREF(shape);
    Py_XDECREF(dtype);
    Py_XDECREF(cap);
    Py_XDECREF(device);
    Py_XDECREF(did);
    Py_XDECREF(vid);
    return out;
}

/* Put the event's values for `seq` into `event` from *pos (values_size items); 0 or -1 with an exception set.
 * On an error the items not yet put are NULL, which deallocating the event allows. */
static int put_values(Launcher *self, Event *event, Py_ssize_t *pos, PyObject *seq) {
    if (seq == NULL || seq == Py_None) return 0;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *v = items[i];
        if ((PyObject *)Py_TYPE(v) != self->array_type) {
            if (put(event, pos, v) < 0) return -1;
            continue;
        }
        PyObject **vals = array_values(self, v);
        if (vals == NULL) return -1;
        int rc = put(event, pos, self->arr);
        for (int k = 0; k < 5 && rc == 0; k++) rc = put(event, pos, vals[k]);
        if (rc < 0) return -1;
    }
    return 0;
}

static void forget_subs(SubsCache *c) {
    for (Py_ssize_t i = 0; i < c->n; i++) {
        Py_CLEAR(c->queues[i]);
        Py_CLEAR(c->appends[i]);
    }
    c->n = 0;
    Py_CLEAR(c->seen);
}

static int visit_subs(SubsCache *c, visitproc visit, void *arg) {
    Py_VISIT(c->seen);
    for (Py_ssize_t i = 0; i < c->n; i++) {
        Py_VISIT(c->queues[i]);
        Py_VISIT(c->appends[i]);
    }
    return 0;
}

/* Remember `subs`' queues, appends and capacities (0), or leave nothing remembered (-1 with an exception set;
 * 0 with more subscriptions than MAX_SUBS). */
static int remember_subs(SubsCache *c, PyObject *subs) {
    forget_subs(c);
    Py_ssize_t n = PyTuple_GET_SIZE(subs);
    if (n > MAX_SUBS) return 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *sub = PyTuple_GET_ITEM(subs, i);
        PyObject *q = PyObject_GetAttr(sub, s_queue);
        PyObject *cap = q ? PyObject_GetAttr(sub, s_capacity) : NULL;
        PyObject *append = cap ? PyObject_GetAttr(q, s_append) : NULL;
        Py_ssize_t limit = append ? PyLong_AsSsize_t(cap) : -1;
        Py_XDECREF(cap);
        if (append == NULL || (limit == -1 && PyErr_Occurred())) {
            Py_XDECREF(q);
            Py_XDECREF(append);
            forget_subs(c);
            return -1;
        }
        c->queues[i] = q;
        c->appends[i] = append;
        c->capacities[i] = limit;
        c->n = i + 1;
    }
    Py_INCREF(subs);
    c->seen = subs;
    return 0;
}

/* -- pauses in the launches, watched without the GIL ----------------------------------------------------------
 *
 * The export worker waits for a pause in the launches before it builds spans (launchtrace.export.pipeline).
 * Watching for one from Python meant waking periodically and taking the GIL each time; a thread asking for the
 * GIL makes the launching thread hand it over at its next check and signal a waiter at every release (every
 * ctypes call of a launch) until it does, a cost to the launching thread per wake that adds up over a long
 * burst of launches (docs/export.md#speed). Here the worker waits outside the GIL on a condition variable, reading the
 * time of the last queued event (stored by every recorded launch, and by touch() from the Python paths), and comes back
 * only when no event came for `gap`, when its deadline passes, or when wake() is called (a flush, stopping, a queue
 * past half full). wake_count() taken before the worker looks at its flags closes the race with a wake() that lands
 * between that look and the wait. */
static pthread_mutex_t pause_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pause_cv = PTHREAD_COND_INITIALIZER;
static long long last_event_ns;        /* CLOCK_REALTIME ns of the last queued event (atomic access) */
static unsigned long long wake_counter; /* under pause_mu */

static void note_event(long long t) { __atomic_store_n(&last_event_ns, t, __ATOMIC_RELAXED); }

static void wake_waiters(void) {
    pthread_mutex_lock(&pause_mu);
    wake_counter++;
    pthread_cond_broadcast(&pause_cv);
    pthread_mutex_unlock(&pause_mu);
}

static void pause_after_fork_child(void) { /* another thread may have held them at fork(): made afresh */
    pthread_mutex_init(&pause_mu, NULL);
    pthread_cond_init(&pause_cv, NULL);
}

static PyObject *py_touch(PyObject *Py_UNUSED(module), PyObject *Py_UNUSED(unused)) {
    note_event(now_ns());
    Py_RETURN_NONE;
}

static PyObject *py_wake(PyObject *Py_UNUSED(module), PyObject *Py_UNUSED(unused)) {
    wake_waiters(); /* the mutex is only ever held for a few instructions, never around the GIL */
    Py_RETURN_NONE;
}

static PyObject *py_wake_count(PyObject *Py_UNUSED(module), PyObject *Py_UNUSED(unused)) {
    pthread_mutex_lock(&pause_mu); /* never held for long: no GIL release needed */
    unsigned long long n = wake_counter;
    pthread_mutex_unlock(&pause_mu);
    return PyLong_FromUnsignedLongLong(n);
}

/* wait_for_pause(gap_s, timeout_s, token[, first_s]) -> "pause" | "timeout" | "woken", without the GIL: after
 * first_s (0 by default; a wake ends that too), until no event came for gap_s, or timeout_s from the call. */
static PyObject *py_wait_for_pause(PyObject *Py_UNUSED(module), PyObject *args) {
    double gap_s, timeout_s, first_s = 0.0;
    unsigned long long token;
    if (!PyArg_ParseTuple(args, "ddK|d", &gap_s, &timeout_s, &token, &first_s)) return NULL;
    if (!(gap_s > 0.0) || !(timeout_s >= 0.0) || !(first_s >= 0.0) || gap_s > 3600.0 || timeout_s > 86400.0 ||
        first_s > 86400.0) {
        PyErr_SetString(PyExc_ValueError, "gap_s must be in (0, 3600], timeout_s and first_s in [0, 86400]");
        return NULL;
    }
    long long start = mono_ns();
    long long gap = (long long)(gap_s * 1e9), deadline = start + (long long)(timeout_s * 1e9);
    long long first_end = start + (long long)(first_s * 1e9);
    if (first_end > deadline) first_end = deadline;
    const char *why;
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&pause_mu);
    for (;;) {
        if (wake_counter != token) {
            why = "woken";
            break;
        }
        long long mono = mono_ns(), now = now_ns();
        long long left = deadline - mono;
        if (left <= 0) {
            why = "timeout";
            break;
        }
        long long step;
        if (mono < first_end) {
            step = first_end - mono; /* the first wait: launching or not */
        } else {
            long long since = now - __atomic_load_n(&last_event_ns, __ATOMIC_RELAXED);
            if (since >= gap) {
                why = "pause";
                break;
            }
            step = since < 0 ? gap : gap - since; /* until this event's gap ends (a clock step back: one gap) */
        }
        if (step > left) step = left;
        long long until = now + step;
        struct timespec ts = {(time_t)(until / 1000000000LL), (long)(until % 1000000000LL)};
        pthread_cond_timedwait(&pause_cv, &pause_mu, &ts); /* CLOCK_REALTIME, as now_ns() */
    }
    pthread_mutex_unlock(&pause_mu);
    Py_END_ALLOW_THREADS
    return PyUnicode_FromString(why);
}

/* Queue `event` on every subscription (sub.full(event) where one is full); 0 or -1 with an exception set. More
 * subscriptions than MAX_SUBS (never remembered): bus.offer, which does the same in Python. */
static int queue_event(SubsCache *c, PyObject *bus, PyObject *subs, PyObject *event) {
    if (subs != c->seen && remember_subs(c, subs) < 0) return -1;
    if (subs != c->seen) {
        PyObject *offer = module_attr(bus, s_offer);
        PyObject *r = offer ? PyObject_CallOneArg(offer, event) : NULL;
        Py_XDECREF(offer);
        Py_XDECREF(r);
        return r ? 0 : -1;
    }
    for (Py_ssize_t i = 0; i < c->n; i++) {
        Py_ssize_t len = PyObject_Length(c->queues[i]);
        if (len < 0) return -1;
        PyObject *r = len < c->capacities[i] ? PyObject_CallOneArg(c->appends[i], event)
                                             : PyObject_CallMethodOneArg(PyTuple_GET_ITEM(subs, i), s_full, event);
        if (len == c->capacities[i] / 2) wake_waiters(); /* past half full: the worker exports now */
        if (r == NULL) return -1;
        Py_DECREF(r);
    }
    return 0;
}

/* Build the flat event and queue it for every subscription; 0 or -1 with an exception set. */
static int record(Launcher *self, PyObject *st, PyObject *subs, const Call *c, long long t0,
                  long long t1) {
    int rc = -1;
    PyObject *site = NULL, *code = NULL, *module = NULL, *caller = NULL, *line = NULL;
    PyObject *event = NULL, *seq = NULL, *tid = NULL, *stack = NULL, *graph = NULL;
    PyObject *kid = NULL, *device_id = NULL, *n_inputs = NULL, *t0o = NULL, *t1o = NULL;
    PyFrameObject *frame = PyEval_GetFrame(); /* the caller's frame (borrowed): this call made none */
    if (frame == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "no Python frame");
        return -1;
    }
    PyCodeObject *fcode = PyFrame_GetCode(frame);
    PyObject *hit = NULL; /* user_module[id(fcode)], borrowed: the cache keeps a reference */
    DictCache *site_cache = &self->attrs[DC_SITE];
    if (site_cache->tag != 0 && site_cache->value != NULL && PyTuple_CheckExact(site_cache->value) &&
        PyTuple_GET_SIZE(site_cache->value) == 2 && PyTuple_GET_ITEM(site_cache->value, 0) == (PyObject *)fcode) {
#if PY_VERSION_HEX < 0x030C0000
        if (((PyDictObject *)self->user_module)->ma_version_tag == site_cache->tag) hit = site_cache->value;
#endif
    }
    if (hit == NULL) { /* the look-up itself; its answer remembered for the next launch from this code */
        PyObject *code_id = PyLong_FromVoidPtr(fcode);
        hit = code_id ? PyDict_GetItemWithError(self->user_module, code_id) : NULL; /* borrowed */
        Py_XDECREF(code_id);
#if PY_VERSION_HEX < 0x030C0000
        if (hit != NULL) {
            Py_INCREF(hit);
            Py_XSETREF(site_cache->value, hit);
            site_cache->dict = self->user_module;
            site_cache->tag = ((PyDictObject *)self->user_module)->ma_version_tag;
        }
#endif
    }
    if (hit != NULL && PyTuple_Check(hit) && PyTuple_GET_SIZE(hit) == 2 &&
        PyTuple_GET_ITEM(hit, 0) == (PyObject *)fcode) {
        code = (PyObject *)fcode;
        Py_INCREF(code);
        caller = code;
        Py_INCREF(caller);
        module = PyTuple_GET_ITEM(hit, 1);
        Py_INCREF(module);
#if PY_VERSION_HEX >= 0x030B0000
        int lasti = PyFrame_GetLasti(frame);
        if (self->line != NULL && self->line_code == code && self->line_lasti == lasti) {
            line = self->line;
            Py_INCREF(line);
        } else if ((line = PyLong_FromLong(PyFrame_GetLineNumber(frame))) != NULL) {
            Py_INCREF(code);
            Py_XSETREF(self->line_code, code);
            self->line_lasti = lasti;
            Py_INCREF(line);
            Py_XSETREF(self->line, line);
        }
#else
        line = PyLong_FromLong(PyFrame_GetLineNumber(frame));
#endif
    } else if (!PyErr_Occurred()) {
        site = PyObject_CallOneArg(self->find_site, (PyObject *)frame);
        if (site != NULL && PyTuple_Check(site) && PyTuple_GET_SIZE(site) == 4) {
            code = PyTuple_GET_ITEM(site, 0);
            line = PyTuple_GET_ITEM(site, 1);
            module = PyTuple_GET_ITEM(site, 2);
            caller = PyTuple_GET_ITEM(site, 3);
            Py_INCREF(code);
            Py_INCREF(line);
            Py_INCREF(module);
            Py_INCREF(caller);
        } else if (site != NULL) {
            PyErr_SetString(PyExc_TypeError, "find_site returned no (code, line, module, caller)");
        }
    }
    Py_DECREF(fcode);
    if (line == NULL) goto done;

    stack = st_get(self, st, ST_STACK);
    graph = stack ? st_get(self, st, ST_CAPTURE_GRAPH) : NULL;
    tid = graph ? st_get(self, st, ST_TID) : NULL;
    seq = tid ? PyObject_CallNoArgs(self->next_seq) : NULL;
    if (seq == NULL) goto done;
    PyObject *scope = (PyList_Check(stack) && PyList_GET_SIZE(stack)) ? PyList_GET_ITEM(stack, PyList_GET_SIZE(stack) - 1)
                                                                     : Py_None;
    PyObject *kernel = argument(c, 0, KW_KERNEL);
    PyObject *dim = argument(c, 1, KW_DIM);
    PyObject *inputs = argument(c, 2, KW_INPUTS);
    PyObject *outputs = argument(c, 3, KW_OUTPUTS);
    PyObject *device = keyword(c, KW_DEVICE);
    if (kernel == NULL) {
        PyErr_SetString(PyExc_TypeError, "no kernel");
        goto done;
    }
    if (inputs != NULL && inputs != Py_None && !PyObject_IsTrue(inputs)) inputs = NULL; /* `or ()` */
    if (outputs != NULL && outputs != Py_None && !PyObject_IsTrue(outputs)) outputs = NULL;
    kid = handle(self, kernel);
    if (kid == NULL) goto done;
    if (device != NULL && device != Py_None && (PyObject *)Py_TYPE(device) == self->device_type) {
        device_id = handle(self, device);
        if (device_id == NULL) goto done;
    } else {
        device_id = device ? device : Py_None;
        Py_INCREF(device_id);
    }
    n_inputs = PyLong_FromSsize_t(inputs && inputs != Py_None ? PySequence_Fast_GET_SIZE(inputs) : 0);
    t0o = PyLong_FromLongLong(t0);
    t1o = PyLong_FromLongLong(t1);
    if (n_inputs == NULL || t0o == NULL || t1o == NULL) goto done;
    PyObject *head[N_FLAT_HEAD];
    head[EV_KIND] = self->record;
    head[EV_SEQ] = seq;
    head[EV_TID] = tid;
    head[EV_ENTRY] = s_launch;
    head[EV_PAYLOAD] = self->flat;
    head[EV_CODE] = code;
    head[EV_LINE] = line;
    head[EV_MODULE] = module;
    head[EV_CALLER] = caller;
    head[EV_T0] = t0o;
    head[EV_T1] = t1o;
    head[EV_SCOPE] = scope;
    head[EV_GRAPH] = graph;
    head[EV_ERROR] = Py_None;
    head[EV_KERNEL] = kid;
    head[EV_DIM] = dim ? dim : Py_None;
    head[EV_N_INPUTS] = n_inputs;
    head[EV_DEVICE] = device_id;
    Event *ev = event_new(N_FLAT_HEAD + values_size(self, inputs) + values_size(self, outputs));
    event = (PyObject *)ev;
    if (ev == NULL) goto done;
    Py_ssize_t pos = 0;
    for (int i = 0; i < N_FLAT_HEAD; i++) (void)put(ev, &pos, head[i]); /* N_FLAT_HEAD or more items: cannot fail */
    if (put_values(self, ev, &pos, inputs) < 0 || put_values(self, ev, &pos, outputs) < 0) goto done;
    if (pos != Py_SIZE(ev)) {
        PyErr_SetString(PyExc_RuntimeError, "launch arguments changed while recorded");
        goto done;
    }
    int acyclic = 1; /* every item out of the cycle collector (a tuple of atomic values is taken out here) */
    for (Py_ssize_t i = 0; i < pos && acyclic; i++) acyclic = lt_acyclic(ev->items[i], 1);
    if (!acyclic) { /* an item the collector tracks (dims as a list, ...): the tracked tuple, as it always was */
        PyObject *t = PyTuple_New(pos);
        if (t == NULL) goto done;
        for (Py_ssize_t i = 0; i < pos; i++) {
            PyTuple_SET_ITEM(t, i, ev->items[i]); /* the reference moves to the tuple */
            ev->items[i] = NULL;
        }
        Py_SETREF(event, t);
    }
    if (queue_event(&self->subs, self->bus, subs, event) < 0) goto done;
    note_event(t1);
    rc = 0;
done:
    Py_XDECREF(site);
    Py_XDECREF(code);
    Py_XDECREF(module);
    Py_XDECREF(caller);
    Py_XDECREF(line);
    Py_XDECREF(event);
    Py_XDECREF(seq);
    Py_XDECREF(tid);
    Py_XDECREF(stack);
    Py_XDECREF(graph);
    Py_XDECREF(kid);
    Py_XDECREF(device_id);
    Py_XDECREF(n_inputs);
    Py_XDECREF(t0o);
    Py_XDECREF(t1o);
    return rc;
}

/* Whether this call takes the compiled path: recording on, no Tape, no measurements, the flat call shape.
 * 1 yes (st and subs set, new references), 2 not recorded and nothing to do but run it (nobody listens, or
 * inside another recorded call, and no Tape), 0 the Python wrapper decides, -1 error. */
static int common_call(Launcher *self, const Call *c, PyObject **st_out, PyObject **subs_out) {
    PyObject *subs = module_attr_cached(&self->attrs[DC_SUBS], self->bus, s_subs);
    if (subs == NULL) return -1;
    int listening = PyTuple_Check(subs) && PyTuple_GET_SIZE(subs) > 0;
    PyObject *st = listening ? thread_state(self) : NULL;
    PyObject *busy = st ? st_get(self, st, ST_BUSY) : NULL;
    PyObject *runtime = module_attr_cached(&self->attrs[DC_RUNTIME], self->ctx, s_runtime);
    PyObject *tape = runtime ? PyObject_GetAttr(runtime, s_tape) : NULL;
    PyObject *probes = NULL;
    int ok = -1;
    if (tape != NULL && (!listening || busy == Py_True)) {
        ok = tape == Py_None ? 2 : 0; /* the Python wrapper fixes the Tape's caller record */
    } else if (tape != NULL && busy != NULL && (probes = module_attr_cached(&self->attrs[DC_PROBES], self->warp_mod, s_probes)) != NULL) {
        ok = busy == Py_False && probes == Py_False && tape == Py_None && c->nargs <= 4 && c->flat;
        if (ok) {
            PyObject *device = keyword(c, KW_DEVICE);
            if (device != NULL && device != Py_None && !PyUnicode_CheckExact(device) &&
                (PyObject *)Py_TYPE(device) != self->device_type)
                ok = 0;
        }
        if (ok == 1 && (values_ok(self, argument(c, 2, KW_INPUTS)) < 0 || values_ok(self, argument(c, 3, KW_OUTPUTS)) < 0))
            ok = 0;
    }
    Py_XDECREF(busy);
    Py_XDECREF(probes);
    Py_XDECREF(runtime);
    Py_XDECREF(tape);
    if (ok == 1) {
        *st_out = st;
        *subs_out = subs;
        return 1;
    }
    Py_XDECREF(st);
    Py_DECREF(subs);
    return ok;
}

static PyObject *Launcher_vectorcall(Launcher *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    Call call = {.args = args, .nargs = PyVectorcall_NARGS(nargsf), .kwnames = kwnames && PyTuple_GET_SIZE(kwnames) ? kwnames : NULL};
    read_keywords(&call);
    const Call *c = &call;
    PyObject *st = NULL, *subs = NULL;
    int common = common_call(self, c, &st, &subs);
    if (common == 2) return PyObject_Vectorcall(self->original, args, nargsf, kwnames);
    if (common <= 0) {
        PyErr_Clear(); /* an unexpected state: the Python wrapper decides, as it would have anyway */
        return PyObject_Vectorcall(self->fallback, args, nargsf, kwnames);
    }
    if (st_set_busy(self, st, Py_True) < 0) {
        Py_DECREF(st);
        Py_DECREF(subs);
        PyErr_Clear();
        return PyObject_Vectorcall(self->fallback, args, nargsf, kwnames);
    }
    long long t0 = now_ns();
    PyObject *result = PyObject_Vectorcall(self->original, args, nargsf, kwnames);
    long long t1 = now_ns();
    PyObject *etype, *evalue, *etb;
    PyErr_Fetch(&etype, &evalue, &etb);
    if (st_set_busy(self, st, Py_False) < 0) PyErr_Clear();
    if (result == NULL) { /* the launch raised: record it as failed, then raise it unchanged */
        PyFrameObject *frame = PyEval_GetFrame(); /* the caller's, as before the call */
        PyErr_NormalizeException(&etype, &evalue, &etb);
        if (etb != NULL && evalue != NULL) PyException_SetTraceback(evalue, etb);
        Py_ssize_t n = c->nargs + (kwnames ? PyTuple_GET_SIZE(kwnames) : 0);
        PyObject *t0o = PyLong_FromLongLong(t0), **full = PyMem_Malloc((size_t)(n + 3) * sizeof(PyObject *));
        if (t0o != NULL && full != NULL) { /* failed(error, t0, frame, *args, **kwargs) */
            full[0] = evalue ? evalue : Py_None;
            full[1] = t0o;
            full[2] = frame ? (PyObject *)frame : Py_None;
            memcpy(full + 3, args, (size_t)n * sizeof(PyObject *));
            Py_XDECREF(PyObject_Vectorcall(self->failed, full, (size_t)c->nargs + 3, kwnames));
        }
        PyMem_Free(full);
        Py_XDECREF(t0o);
        PyErr_Clear();
        PyErr_Restore(etype, evalue, etb);
        Py_DECREF(st);
        Py_DECREF(subs);
        return NULL;
    }
    if (result == Py_None && record(self, st, subs, c, t0, t1) < 0) {
        PyErr_Clear();
        PyObject *r = PyObject_CallOneArg(self->warn, s_launch);
        Py_XDECREF(r);
        PyErr_Clear();
    }
    Py_DECREF(st);
    Py_DECREF(subs);
    return result;
}

/* Drop everything remembered between calls (subscriptions, call site, layouts, handles, module attributes,
 * thread state, arrays). */
static void forget_caches(Launcher *self) {
    forget_subs(&self->subs);
    Py_CLEAR(self->line_code);
    Py_CLEAR(self->line);
    Py_CLEAR(self->st_type);
    for (int i = 0; i < HANDLE_CACHE; i++) {
        Py_CLEAR(self->handle_ids[i]);
        self->handle_objs[i] = NULL;
    }
    for (int i = 0; i < DC_COUNT; i++) dict_cache_clear(&self->attrs[i]);
    Py_CLEAR(self->st_cached);
    self->st_thread = 0;
    for (int i = 0; i < ARR_CACHE; i++) arr_slot_clear(&self->arr_cache[i]);
}

static int Launcher_init(Launcher *self, PyObject *args, PyObject *kwds) {
    static char *names[] = {"original", "fallback", "local", "bus", "warp_module", "ctx", "next_seq",
                            "user_module", "handles", "array_type", "device_type", "find_site", "failed",
                            "warn", "record", "arr", "flat", NULL};
    PyObject *v[N_LAUNCHER_REFS];
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOOOOOO!O!OOOOOOOO", names, &v[0], &v[1], &v[2], &v[3], &v[4],
                                     &v[5], &v[6], &PyDict_Type, &v[7], &PyDict_Type, &v[8], &v[9], &v[10],
                                     &v[11], &v[12], &v[13], &v[14], &v[15], &v[16]))
        return -1;
    for (int i = 0; i < N_LAUNCHER_REFS; i++) Py_XSETREF(self->refs[i], Py_NewRef(v[i]));
    self->vectorcall = (vectorcallfunc)Launcher_vectorcall;
    forget_caches(self);
    return 0;
}

static int Launcher_traverse(Launcher *self, visitproc visit, void *arg) {
    Py_VISIT(self->dict);
    for (int i = 0; i < N_LAUNCHER_REFS; i++) Py_VISIT(self->refs[i]);
    Py_VISIT(self->st_type);
    Py_VISIT(self->line_code);
    for (int i = 0; i < DC_COUNT; i++) Py_VISIT(self->attrs[i].value);
    Py_VISIT(self->st_cached);
    for (int i = 0; i < ARR_CACHE; i++) {
        Py_VISIT(self->arr_cache[i].ref);
        for (int k = 0; k < 5; k++) Py_VISIT(self->arr_cache[i].vals[k]);
    }
    return visit_subs(&self->subs, visit, arg);
}

static int Launcher_clear(Launcher *self) {
    Py_CLEAR(self->dict);
    for (int i = 0; i < N_LAUNCHER_REFS; i++) Py_CLEAR(self->refs[i]);
    forget_caches(self);
    return 0;
}

static void gc_dealloc(PyObject *self) { /* Launcher's and TinyHook's */
    PyObject_GC_UnTrack(self);
    Py_TYPE(self)->tp_clear(self);
    Py_TYPE(self)->tp_free(self);
}

/* binds like a function when stored on a class, so it stays a drop-in for Warp's launch function */
static PyGetSetDef Launcher_getset[] = {LT_DICT_GETSET};

static PyTypeObject LauncherType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "launchtrace.capture._fastlaunch.Launcher",
    .tp_basicsize = sizeof(Launcher),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "wp.launch's capture wrapper, compiled (see the module source).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Launcher_init,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(Launcher, vectorcall),
    .tp_traverse = (traverseproc)Launcher_traverse,
    .tp_clear = (inquiry)Launcher_clear,
    .tp_dealloc = gc_dealloc,
    .tp_dictoffset = offsetof(Launcher, dict),
    .tp_descr_get = lt_bind_like_function,
    .tp_getset = Launcher_getset,
};

/* -- tinygrad's executor hook (capture/tinygrad.py installs it as pm_exec.rewrite) -----------------------------
 *
 * Why: the Python hook costs about 5,300 instructions a kernel and 19,000 a run_linear (docs/tinygrad.md#cost).
 * This object takes the common call, a kernel or copy (call.src[0].op PROGRAM or COPY): it finds the call's run
 * (the one remembered; for a new run_linear, the user's frame walked to and the run made here as the Python hook's
 * begin() makes it), times the call and queues the Python hook's event, item for item, as an Event. Every other
 * call goes to the Python hook (`fallback`) before running: keywords, nothing subscribed, graph batches, anything
 * unexpected. */
enum { TH_INNER, TH_FALLBACK, TH_BUS, TH_SEQS, TH_PROGRAM, TH_COPY, TH_FRAMEWORK, TH_DECODE, TH_FAILED, TH_WARN,
       TH_SITES, TH_SKIP_NEW, TH_LOCAL, TH_RUN, TH_NAMES, TH_APIS, TH_UOP, TH_REFS, /* given; remembered: */
       TH_LAST_CTX = TH_REFS, TH_LAST_RUN, TH_STACK, TH_TID, TH_ALL }; /* TH_LAST_CTX: a weakref, the hook its callback */
enum { RUN_INPUTS, RUN_VAR_VALS, RUN_API, RUN_STACK, RUN_TID, RUN_CODE, RUN_LASTI, RUN_MODULE, RUN_SIZE }; /* a _Run */

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *dict; /* __dict__: functools-style identity (__wrapped__, __name__, ...) */
    PyObject *refs[TH_ALL];
    uint64_t st_thread; /* the thread whose ThreadState's stack and tid are remembered (neither changes) */
    Py_ssize_t src_off, op_off; /* UOp's src and op slots, read per kernel (-1: by the usual look-up) */
    SubsCache subs;
} TinyHook;


/* tinygrad._user_frame in C (a new reference; NULL, maybe without an exception, where the Python hook decides):
 * the innermost frame outside tinygrad, contextlib and launchtrace, through the same per-code cache `sites`
 * (id(code) -> (code, skip?); a miss asks skip_new(code)), from run_linear's frame (this call made none). */
#define IS_PAIR(t) ((t) != NULL && PyTuple_CheckExact(t) && PyTuple_GET_SIZE(t) == 2)

static PyObject *tiny_user_frame(PyObject *sites, PyObject *skip_new) {
    PyObject *first = (PyObject *)PyEval_GetFrame(), *f = Py_XNewRef(first);
    while (f != NULL) {
        PyObject *code = (PyObject *)PyFrame_GetCode((PyFrameObject *)f), *key = PyLong_FromVoidPtr(code);
        PyObject *hit = key ? Py_XNewRef(PyDict_GetItemWithError(sites, key)) : NULL;
        if (!IS_PAIR(hit) || PyTuple_GET_ITEM(hit, 0) != code)
            Py_XSETREF(hit, PyErr_Occurred() ? NULL : PyObject_CallOneArg(skip_new, code));
        int skip = IS_PAIR(hit) ? PyObject_IsTrue(PyTuple_GET_ITEM(hit, 1)) : -1;
        Py_XDECREF(key);
        Py_XDECREF(hit);
        Py_DECREF(code);
        if (skip <= 0) {
            if (skip < 0) Py_CLEAR(f);
            return f;
        }
        Py_SETREF(f, (PyObject *)PyFrame_GetBack((PyFrameObject *)f));
    }
    return Py_XNewRef(first); /* every frame passed over: run_linear's own, as the Python hook does */
}

/* The Python hook's begin(ctx, frame) for a context recorded as usual (cache not False, both flags bools, its
 * variable values a dict), once per run_linear (most of a one-kernel jit call's recording in Python): a new _Run
 * (a tuple: names[0:5] are the context's attributes read, apis the kinds of work and the default module),
 * remembered with a weak reference to ctx whose callback is this hook. NULL, maybe with an exception, for any
 * other context: the Python hook decides (BEAM's, for one). */
#if PY_VERSION_HEX >= 0x030B0000 /* PyFrame_GetGlobals, PyFrame_GetLasti (capture/tinygrad.py uses no TinyHook before) */
static PyObject *tiny_begin(TinyHook *self, PyObject *ctx, PyObject *frame) {
    PyObject **r = self->refs, *v[12] = {NULL}, *run = NULL, *apis = r[TH_APIS];
    uint64_t thread = PyThreadState_GetID(PyThreadState_Get());
    int got = 0;
    while (got < 5 && (v[got] = PyObject_GetAttr(ctx, PyTuple_GET_ITEM(r[TH_NAMES], got))) != NULL) got++;
    if (got == 5 && (r[TH_TID] == NULL || self->st_thread != thread)) { /* another thread's: this one's state */
        PyObject *st = thread_state_slow(r[TH_LOCAL]), *stack = st ? PyObject_GetAttr(st, s_stack) : NULL;
        PyObject *tid = stack ? PyObject_GetAttr(st, s_tid) : NULL;
        Py_XDECREF(st);
        Py_XSETREF(r[TH_STACK], stack);
        Py_XSETREF(r[TH_TID], tid);
        self->st_thread = tid ? thread : 0;
    }
    if (got == 5 && v[0] != Py_False && PyBool_Check(v[1]) && PyBool_Check(v[2]) && PyDict_CheckExact(v[3]) &&
        r[TH_TID] != NULL && (v[10] = Py_NewRef(r[TH_STACK])) && (v[11] = Py_NewRef(r[TH_TID])) && /* held: a */
        (v[5] = PyFrame_GetGlobals((PyFrameObject *)frame)) && /* collection below may let another thread replace them */
        (v[6] = Py_XNewRef(PyDict_GetItemWithError(v[5], PyTuple_GET_ITEM(r[TH_NAMES], 5))), !PyErr_Occurred()) &&
        (v[7] = PyDict_GET_SIZE(v[3]) ? PyDict_Copy(v[3]) : Py_NewRef(Py_None)) &&
        (v[8] = PyLong_FromLong(PyFrame_GetLasti((PyFrameObject *)frame))) &&
        (v[9] = PyWeakref_NewRef(ctx, (PyObject *)self)) &&
        (run = PyType_GenericAlloc((PyTypeObject *)r[TH_RUN], RUN_SIZE))) {
        PyObject *code = (PyObject *)PyFrame_GetCode((PyFrameObject *)frame), *items[RUN_SIZE] = {v[4], v[7],
            PyTuple_GET_ITEM(apis, v[1] == Py_False ? 0 : v[2] == Py_True ? 1 : 2), v[10], v[11], code, v[8],
            v[6] ? v[6] : PyTuple_GET_ITEM(apis, 3)};
        for (int i = 0; i < RUN_SIZE; i++) PyTuple_SET_ITEM(run, i, Py_NewRef(items[i]));
        Py_DECREF(code);
        Py_XSETREF(r[TH_LAST_CTX], Py_NewRef(v[9]));
        Py_XSETREF(r[TH_LAST_RUN], Py_NewRef(run)); /* both set before the last run is let go */
    }
    for (int i = 0; i < 12; i++) Py_XDECREF(v[i]);
    return run;
}
#else
#define tiny_begin(self, ctx, frame) NULL
#endif

/* The run of ctx's run_linear (new reference): the one remembered, else a new one from the user's frame; NULL (maybe
 * without an exception) where the Python hook decides. */
static PyObject *tiny_run(TinyHook *self, PyObject *ctx) {
    PyObject **r = self->refs;
    if (r[TH_LAST_RUN] != NULL && weak_target(r[TH_LAST_CTX]) == ctx) return Py_NewRef(r[TH_LAST_RUN]);
    PyObject *frame = tiny_user_frame(r[TH_SITES], r[TH_SKIP_NEW]), *run = frame ? tiny_begin(self, ctx, frame) : NULL;
    Py_XDECREF(frame);
    return run;
}

#define UOP_ATTR(o, off, name) (Py_TYPE(o) == (PyTypeObject *)r[TH_UOP] && self->off > 0 && *(PyObject **)((char *)(o) + \
    self->off) ? Py_NewRef(*(PyObject **)((char *)(o) + self->off)) : PyObject_GetAttr(o, name))
static PyObject *TinyHook_vectorcall(TinyHook *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    PyObject **r = self->refs, *subs = NULL, *src = NULL, *op = NULL, *run = NULL;
    if (!kwnames && PyVectorcall_NARGS(nargsf) == 1 && PyWeakref_CheckRef(args[0])) { /* the weakref's callback: */
        if (args[0] == r[TH_LAST_CTX]) Py_CLEAR(r[TH_LAST_RUN]); /* the last run's context died: let the run go */
        Py_RETURN_NONE;
    }
    if (kwnames || PyVectorcall_NARGS(nargsf) != 2 || args[1] == Py_None ||
        (subs = module_attr(r[TH_BUS], s_subs)) == NULL || !PyTuple_CheckExact(subs) || PyTuple_GET_SIZE(subs) == 0 ||
        (src = UOP_ATTR(args[0], src_off, s_src)) == NULL || !PyTuple_CheckExact(src) || PyTuple_GET_SIZE(src) == 0 ||
        (op = UOP_ATTR(PyTuple_GET_ITEM(src, 0), op_off, s_op)) == NULL || (op != r[TH_PROGRAM] && op != r[TH_COPY]) ||
        (run = tiny_run(self, args[1])) == NULL) { /* held: the call may start another run_linear */
        PyErr_Clear(); /* the Python hook decides, as it would have anyway (BEAM's runs, for one) */
        Py_XDECREF(run);
        Py_XDECREF(subs);
        Py_XDECREF(src);
        Py_XDECREF(op);
        return PyObject_Vectorcall(r[TH_FALLBACK], args, nargsf, kwnames);
    }
    Py_DECREF(src);
    Py_DECREF(op);
    long long t0 = now_ns();
    PyObject *result = PyObject_Vectorcall(r[TH_INNER], args, 2, NULL);
    long long t1 = now_ns();
    PyObject *seq = NULL, *t0o = PyLong_FromLongLong(t0), *t1o = NULL, *x = NULL;
    if (result == NULL) { /* recorded as failed by the Python hook, then raised unchanged */
        PyObject *etype, *evalue, *etb;
        PyErr_Fetch(&etype, &evalue, &etb);
        PyErr_NormalizeException(&etype, &evalue, &etb);
        if (etb != NULL && evalue != NULL) PyException_SetTraceback(evalue, etb);
        x = t0o ? PyObject_CallFunctionObjArgs(r[TH_FAILED], args[0], run, t0o, evalue ? evalue : Py_None, NULL) : NULL;
        PyErr_Clear();
        PyErr_Restore(etype, evalue, etb);
    } else {
        Event *e = NULL;
        if (PyTuple_Check(run) && PyTuple_GET_SIZE(run) == RUN_SIZE && (seq = PyIter_Next(r[TH_SEQS])) != NULL &&
            (t1o = PyLong_FromLongLong(t1)) != NULL && t0o != NULL && (e = event_new(N_TINY_EVENT)) != NULL) {
            PyObject *stack = PyTuple_GET_ITEM(run, RUN_STACK);
            Py_ssize_t depth = PyList_Check(stack) ? PyList_GET_SIZE(stack) : 0;
            PyObject *items[N_TINY_EVENT] = {r[TH_FRAMEWORK], seq, PyTuple_GET_ITEM(run, RUN_TID), r[TH_DECODE], args[0],
                                             run, t0o, t1o, depth ? PyList_GET_ITEM(stack, depth - 1) : Py_None, Py_None};
            for (int i = 0; i < N_TINY_EVENT; i++) e->items[i] = Py_NewRef(items[i]);
        }
        if (e == NULL || queue_event(&self->subs, r[TH_BUS], subs, (PyObject *)e) < 0) {
            PyErr_Clear();
            x = PyObject_CallOneArg(r[TH_WARN], s_tinygrad); /* reported once; the result stands */
        } else note_event(t1);
        Py_XDECREF(e);
    }
    if (result != NULL) PyErr_Clear();
    Py_XDECREF(x);
    Py_XDECREF(seq);
    Py_XDECREF(t0o);
    Py_XDECREF(t1o);
    Py_DECREF(run);
    Py_DECREF(subs);
    return result;
}

static int TinyHook_init(TinyHook *self, PyObject *args, PyObject *kwds) {
    PyObject *const *v = PySequence_Fast_ITEMS(args);
    if (kwds || PyTuple_GET_SIZE(args) != TH_REFS || !PyDict_Check(v[TH_SITES]) || !PyType_Check(v[TH_UOP]) ||
        !PyType_Check(v[TH_RUN]) || !PyType_IsSubtype((PyTypeObject *)v[TH_RUN], &PyTuple_Type) ||
        !PyTuple_Check(v[TH_NAMES]) || PyTuple_GET_SIZE(v[TH_NAMES]) != 6 || !PyTuple_Check(v[TH_APIS]) ||
        PyTuple_GET_SIZE(v[TH_APIS]) != 4) {
        PyErr_SetString(PyExc_TypeError, "TinyHook() takes its 17 arguments by position (see the module source)");
        return -1;
    }
    for (int i = 0; i < TH_REFS; i++) Py_XSETREF(self->refs[i], Py_NewRef(v[i]));
    self->src_off = lt_slot_offset((PyTypeObject *)v[TH_UOP], s_src); /* -1 where not a plain slot */
    self->op_off = lt_slot_offset((PyTypeObject *)v[TH_UOP], s_op);
    self->vectorcall = (vectorcallfunc)TinyHook_vectorcall;
    return 0;
}

static int TinyHook_traverse(TinyHook *self, visitproc visit, void *arg) {
    Py_VISIT(self->dict);
    for (int i = 0; i < TH_ALL; i++) Py_VISIT(self->refs[i]);
    return visit_subs(&self->subs, visit, arg);
}

static int TinyHook_clear(TinyHook *self) {
    Py_CLEAR(self->dict);
    for (int i = 0; i < TH_ALL; i++) Py_CLEAR(self->refs[i]);
    forget_subs(&self->subs);
    return 0;
}

static PyTypeObject TinyHookType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "launchtrace.capture._fastlaunch.TinyHook",
    .tp_basicsize = sizeof(TinyHook),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "TinyHook(inner, fallback, bus, seqs, program, copy, framework, decode, failed, warn, sites, skip_new, "
              "local, run_type, names, apis, uop_type): tinygrad's pm_exec.rewrite hook, compiled.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)TinyHook_init,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(TinyHook, vectorcall),
    .tp_traverse = (traverseproc)TinyHook_traverse,
    .tp_clear = (inquiry)TinyHook_clear,
    .tp_dealloc = gc_dealloc,
    .tp_dictoffset = offsetof(TinyHook, dict),
    .tp_getset = Launcher_getset,
};

/* event(*items): the items as a queued Event rather than a tuple, for a Python hook on the launching thread
 * (capture/tinygrad.py): a tuple holding tracked objects (the call, its run) is walked by every collection of the
 * cycle collector while it waits in the queue; an Event is not (it holds its items until drained: no cycle can
 * pass through it). */
static PyObject *py_event(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs) {
    Event *e = event_new(nargs);
    if (e == NULL) return NULL;
    for (Py_ssize_t i = 0; i < nargs; i++) e->items[i] = Py_NewRef(args[i]);
    return (PyObject *)e;
}

static PyMethodDef module_methods[] = {
    {"expand", expand, METH_O, "expand(events: list) -> None\n\nEvery queued Event in the list replaced by its flat tuple."},
    {"event", (PyCFunction)(void (*)(void))py_event, METH_FASTCALL, "event(*items) -> Event\n\nThe items as an Event to queue (outside the cycle collector)."},
    {"touch", py_touch, METH_NOARGS, "touch() -> None\n\nAn event was just queued (by a Python path): the launches go on."},
    {"wake", py_wake, METH_NOARGS, "wake() -> None\n\nEnd every wait_for_pause() now (a flush, stopping, a queue past half full)."},
    {"wake_count", py_wake_count, METH_NOARGS, "wake_count() -> int\n\nThe token for wait_for_pause(): wake() calls so far."},
    {"wait_for_pause", py_wait_for_pause, METH_VARARGS,
     "wait_for_pause(gap_s, timeout_s, token, first_s=0) -> 'pause' | 'timeout' | 'woken'\n\nWait, without the GIL, "
     "at least first_s, then until no event was queued for gap_s; timeout_s ends it, and so does a wake() since "
     "wake_count() gave token."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fastlaunch", "wp.launch's and tinygrad's capture wrappers in C.", -1,
                                    module_methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__fastlaunch(void) {
    INTERN(s_st, "st");
    INTERN(s_busy, "busy");
    INTERN(s_subs, "_subs");
    INTERN(s_probes, "_PROBES");
    INTERN(s_runtime, "runtime");
    INTERN(s_tape, "tape");
    INTERN(s_stack, "stack");
    INTERN(s_capture_graph, "capture_graph");
    INTERN(s_tid, "tid");
    INTERN(s_queue, "queue");
    INTERN(s_capacity, "capacity");
    INTERN(s_append, "append");
    INTERN(s_full, "full");
    INTERN(s_offer, "offer");
    INTERN(s_src, "src");
    INTERN(s_op, "op");
    INTERN(s_tinygrad, "tinygrad");
    INTERN(s_ptr, "ptr");
    INTERN(s_shape, "shape");
    INTERN(s_dtype, "dtype");
    INTERN(s_capacity_attr, "capacity");
    INTERN(s_device, "device");
    INTERN(s_kernel, "kernel");
    INTERN(s_dim, "dim");
    INTERN(s_inputs, "inputs");
    INTERN(s_outputs, "outputs");
    INTERN(s_record_tape, "record_tape");
    INTERN(s_launch, "launch");
    INTERN(s_state_key, "launchtrace.capture._fastlaunch.state");
    if ((c_zero = PyLong_FromLong(0)) == NULL) return NULL;
    if (pthread_atfork(NULL, NULL, pause_after_fork_child) != 0) {
        PyErr_SetString(PyExc_RuntimeError, "pthread_atfork failed");
        return NULL;
    }
    if (PyType_Ready(&LauncherType) < 0 || PyType_Ready(&EventType) < 0 || PyType_Ready(&TinyHookType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (lt_add_type(m, "Event", &EventType) < 0) return NULL;
    if (lt_add_type(m, "Launcher", &LauncherType) < 0 || lt_add_type(m, "TinyHook", &TinyHookType) < 0) return NULL;
    PyObject *fields = lt_record_fields(); /* the layout it builds: launchtrace.rawevent checks it */
    if (lt_module_add(m, "RECORD_FIELDS", fields) < 0) return NULL;
    return m;
}
