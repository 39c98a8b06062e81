/* tinygrad's executor hook in C: launchtrace.capture.tinygrad's per-kernel path, compiled.
 *
 * Why: the Python hook (launchtrace.capture.tinygrad._make_python_hook) costs about 6,500 instructions per kernel
 * (a Python frame, attribute reads, two clock calls, the event tuple, bus.offer), and its queued event tuples
 * are objects the cycle collector tracks: they stay alive until the consumer drains them, so the collector runs
 * more often during a jitted step and walks them each time (docs/tinygrad.md#cost). This object does the same
 * for a kernel or a copy (a CALL whose first source is a PROGRAM or a COPY): it finds the run_linear's shared run
 * (through weak references to its context and the run, as the Python hook does), times the original call and
 * queues the same event, item for item: (FRAMEWORK, seq, tid, decode, call, run, t0, t1, scope, error), but as
 * capture/_fastlaunch.c's Event (plain memory, outside the collector; Subscription.drain_raw makes it the tuple).
 * No reference cycle can pass through a queued event: nothing it holds (the call UOp, the run with the inputs and
 * the thread's state, the decode function) refers to a subscription's queue except through the bus module's
 * open subscriptions, which are alive anyway; a closed subscription's queue is freed by reference counting.
 *
 * Everything else goes to the Python hook it was given (`fallback`), which stays the definition: a graph
 * runner's batch (CUSTOM_FUNCTION), keyword arguments, anything unexpected. A new run (once per run_linear) is
 * made here as the Python `new_run(ctx, frame)` the Python hook uses makes it (the kind of work, a copy of the
 * variable values, the user's frame found through the same per-code cache, the thread's state), and by that
 * function itself for BEAM runs or anything unexpected.
 * tests/test_tinygrad_native.py checks both hooks give the same records.
 *
 * Nothing here may break the program: a failure while recording is reported once through `warn` and the
 * result is returned unchanged; an exception from the original call is recorded and re-raised unchanged.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <frameobject.h>
#include <stddef.h>
#include <time.h>

#include "../_native.h"
#include "_rawevent.h"

#define MAX_SUBS 8 /* subscriptions remembered; more than that are looked up on every call */
#define N_EVENT 10 /* (FRAMEWORK, seq, tid, decode, call, run, t0, t1, scope, error): tinygrad_decode's layout */

static LtCaptureAPI *capi;
static PyObject *s_subs, *s_src, *s_op, *s_st, *s_stack, *s_tid, *s_queue, *s_capacity, *s_append, *s_full;
static PyObject *s_tinygrad, *s_cache, *s_update_stats, *s_jit, *s_var_vals, *s_input_uops, *s_name;

enum { RUN_API, RUN_CODE, RUN_INPUTS, RUN_LASTI, RUN_MODULE, RUN_ST, RUN_VAR_VALS, RUN_SLOTS };
static const char *const RUN_FIELDS[RUN_SLOTS] = {"api", "code", "inputs", "lasti", "module", "st", "var_vals"};

/* A plain slotted class's slot, read by offset once its layout is known. */
typedef struct {
    PyTypeObject *type; /* strong; NULL until known */
    Py_ssize_t offset;
} Slot;

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *dict;      /* __dict__: functools-style identity (__wrapped__, __name__, ...) */
    PyObject *inner;     /* what pm_exec.rewrite was (tinygrad's bound method, or someone's wrapper) */
    PyObject *fallback;  /* the Python hook: every call this object does not record itself */
    PyObject *bus;       /* the capture.bus module (._subs) */
    PyObject *new_run;   /* tinygrad._run_for(ctx, frame) -> _Run | None */
    PyObject *warn;      /* hotpath._warn_once(what) */
    PyObject *decode;    /* tinygrad_decode.decode_event */
    PyObject *framework; /* rawevent.FRAMEWORK */
    PyObject *next_seq;  /* bus.next_seq */
    PyObject *program, *copy, *custom; /* Ops.PROGRAM, Ops.COPY, Ops.CUSTOM_FUNCTION */
    /* a new run, made here as _run_for makes it: */
    PyObject *run_type;   /* tinygrad._Run (a plain slotted class: its slots are set by offset) */
    PyObject *site_cache; /* tinygrad._SITE_CACHE: id(code) -> (code, skip?) */
    PyObject *skip_new;   /* tinygrad._skip_new(code) -> (code, skip?), on a miss */
    PyObject *local;      /* capture.state._local (.st: the thread's state) */
    PyObject *api_realize, *api_jit, *api_internal;
    Py_ssize_t run_offsets[7]; /* _Run's slots, in RUN_* order; run_offsets[0] 0 when unknown */
    uint64_t st_thread;        /* the last thread's state object, with the thread state's id (never reused) */
    PyObject *st_cached;
    Slot uop_src, uop_op, run_st, st_stack, st_tid;
    /* the last run_linear's context and run, weakly: one run per context, and neither kept alive here */
    PyObject *last_ctx, *last_run;
    /* the subscriptions of the bus._subs tuple last seen: each one's queue, its bound append, its capacity */
    PyObject *subs_seen;
    Py_ssize_t n_subs_seen;
    PyObject *sub_queues[MAX_SUBS];
    PyObject *sub_appends[MAX_SUBS];
    Py_ssize_t sub_capacities[MAX_SUBS];
} Hook;

/* obj.<name> as a new reference: through the slot's offset when obj is of the type whose layout is known
 * (found on first use), else the usual attribute look-up. */
static PyObject *slot_get(Slot *slot, PyObject *obj, PyObject *name) {
    PyTypeObject *type = Py_TYPE(obj);
    if (slot->type == NULL) {
        Py_ssize_t off = lt_slot_offset(type, name);
        if (off > 0) {
            Py_INCREF(type);
            slot->type = type;
            slot->offset = off;
        }
    }
    if (slot->type == type) {
        PyObject *v = *(PyObject **)((char *)obj + slot->offset);
        if (v != NULL) {
            Py_INCREF(v);
            return v;
        }
    }
    return PyObject_GetAttr(obj, name);
}

static long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts); /* time.time_ns()'s clock on Linux */
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static PyObject *weak_target(PyObject *ref) { /* borrowed; Py_None once the object is gone */
    if (ref == NULL) return Py_None;
#if PY_VERSION_HEX >= 0x030D0000
    PyObject *obj = NULL;
    if (PyWeakref_GetRef(ref, &obj) <= 0) {
        PyErr_Clear();
        return Py_None;
    }
    Py_DECREF(obj); /* the caller holds a reference to what it compares it with */
    return obj;
#else
    return PyWeakref_GET_OBJECT(ref);
#endif
}

static void forget_subs(Hook *self) {
    for (Py_ssize_t i = 0; i < self->n_subs_seen; i++) {
        Py_CLEAR(self->sub_queues[i]);
        Py_CLEAR(self->sub_appends[i]);
    }
    self->n_subs_seen = 0;
    Py_CLEAR(self->subs_seen);
}

/* Remember `subs`' queues, appends and capacities (0), or nothing (-1 with an exception set; 0 with more
 * subscriptions than MAX_SUBS, looked up on every call then). */
static int remember_subs(Hook *self, PyObject *subs) {
    forget_subs(self);
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
            forget_subs(self);
            return -1;
        }
        self->sub_queues[i] = q;
        self->sub_appends[i] = append;
        self->sub_capacities[i] = limit;
        self->n_subs_seen = i + 1;
    }
    Py_INCREF(subs);
    self->subs_seen = subs;
    return 0;
}

/* Queue `event` on every subscription as bus.offer does (sub.full(event) where one is full, a wake where one
 * passes half full); 0 or -1 with an exception set. */
static int queue_event(Hook *self, PyObject *subs, PyObject *event) {
    if (subs != self->subs_seen && remember_subs(self, subs) < 0) return -1;
    Py_ssize_t n_subs = PyTuple_GET_SIZE(subs);
    for (Py_ssize_t i = 0; i < n_subs; i++) {
        PyObject *sub = PyTuple_GET_ITEM(subs, i), *q, *append;
        Py_ssize_t limit;
        if (subs == self->subs_seen) {
            q = self->sub_queues[i];
            append = self->sub_appends[i];
            limit = self->sub_capacities[i];
            Py_INCREF(q);
            Py_INCREF(append);
        } else {
            q = PyObject_GetAttr(sub, s_queue);
            PyObject *cap = q ? PyObject_GetAttr(sub, s_capacity) : NULL;
            append = cap ? PyObject_GetAttr(q, s_append) : NULL;
            limit = append ? PyLong_AsSsize_t(cap) : -1;
            Py_XDECREF(cap);
            if (append == NULL || (limit == -1 && PyErr_Occurred())) {
                Py_XDECREF(q);
                Py_XDECREF(append);
                return -1;
            }
        }
        Py_ssize_t len = PyObject_Length(q);
        PyObject *r = NULL;
        if (len >= 0) {
            r = len < limit ? PyObject_CallOneArg(append, event) : PyObject_CallMethodOneArg(sub, s_full, event);
            if (len == limit / 2) capi->wake(); /* past half full: the worker exports now */
        }
        Py_DECREF(q);
        Py_DECREF(append);
        if (r == NULL) return -1;
        Py_DECREF(r);
    }
    return 0;
}

/* Build the event and queue it; 0 or -1 with an exception set. `error` is borrowed (None or a str). */
static int record(Hook *self, PyObject *subs, PyObject *call, PyObject *run, PyObject *st, long long t0,
                  long long t1, PyObject *error) {
    PyObject *stack = slot_get(&self->st_stack, st, s_stack);
    PyObject *tid = stack ? slot_get(&self->st_tid, st, s_tid) : NULL;
    PyObject *seq = tid ? PyObject_CallNoArgs(self->next_seq) : NULL;
    PyObject *t0o = seq ? PyLong_FromLongLong(t0) : NULL;
    PyObject *t1o = t0o ? PyLong_FromLongLong(t1) : NULL;
    LtEvent *ev = t1o ? PyObject_NewVar(LtEvent, capi->event_type, N_EVENT) : NULL;
    int rc = -1;
    if (ev != NULL) {
        memset(ev->items, 0, N_EVENT * sizeof(PyObject *));
        PyObject *scope = Py_None; /* st.stack[-1] if st.stack else None: the stack is a list */
        if (!PyList_Check(stack)) {
            PyErr_SetString(PyExc_TypeError, "the thread's scope stack is not a list");
        } else {
            if (PyList_GET_SIZE(stack) > 0) scope = PyList_GET_ITEM(stack, PyList_GET_SIZE(stack) - 1);
            PyObject *items[N_EVENT] = {self->framework, seq, tid, self->decode, call, run, t0o, t1o, scope, error};
            for (int i = 0; i < N_EVENT; i++) {
                Py_INCREF(items[i]);
                ev->items[i] = items[i];
            }
            if (queue_event(self, subs, (PyObject *)ev) == 0) {
                capi->note_event(t1);
                rc = 0;
            }
        }
        Py_DECREF(ev);
    }
    Py_XDECREF(stack);
    Py_XDECREF(tid);
    Py_XDECREF(seq);
    Py_XDECREF(t0o);
    Py_XDECREF(t1o);
    return rc;
}

static void warn_once(Hook *self) {
    PyObject *r = PyObject_CallOneArg(self->warn, s_tinygrad);
    Py_XDECREF(r);
    PyErr_Clear();
}

/* The innermost frame outside tinygrad, contextlib and launchtrace from `frame` on (a new reference), as
 * tinygrad._user_frame finds it, through the same cache; NULL with an error set. */
static PyObject *user_frame(Hook *self, PyFrameObject *frame) {
    PyFrameObject *f = (PyFrameObject *)Py_NewRef(frame); /* `frame` itself is borrowed */
    while (f != NULL) {
        PyCodeObject *code = PyFrame_GetCode(f);
        PyObject *key = PyLong_FromVoidPtr(code);
        PyObject *hit = key ? PyDict_GetItemWithError(self->site_cache, key) : NULL; /* borrowed */
        Py_XDECREF(key);
        int skip = -1;
        if (hit != NULL && PyTuple_CheckExact(hit) && PyTuple_GET_SIZE(hit) == 2 &&
            PyTuple_GET_ITEM(hit, 0) == (PyObject *)code) {
            skip = PyObject_IsTrue(PyTuple_GET_ITEM(hit, 1));
        } else if (!PyErr_Occurred()) {
            PyObject *made = PyObject_CallOneArg(self->skip_new, (PyObject *)code);
            if (made != NULL && PyTuple_Check(made) && PyTuple_GET_SIZE(made) == 2)
                skip = PyObject_IsTrue(PyTuple_GET_ITEM(made, 1));
            else if (made != NULL)
                PyErr_SetString(PyExc_TypeError, "_skip_new returned no (code, skip)");
            Py_XDECREF(made);
        }
        Py_DECREF(code);
        if (skip < 0) {
            Py_DECREF(f);
            return NULL;
        }
        if (!skip) return (PyObject *)f;
        PyFrameObject *back = PyFrame_GetBack(f);
        Py_DECREF(f);
        f = back;
    }
    return Py_NewRef(frame); /* every frame skipped: the first one, as the Python loop does */
}

/* This thread's capture.state.ThreadState (new reference): `local.st`, set once per thread, never replaced. */
static PyObject *thread_state(Hook *self) {
    uint64_t id = PyThreadState_GetID(PyThreadState_Get());
    if (self->st_cached == NULL || self->st_thread != id) {
        PyObject *st = PyObject_GetAttr(self->local, s_st);
        if (st == NULL) return NULL;
        Py_XSETREF(self->st_cached, st);
        self->st_thread = id;
    }
    Py_INCREF(self->st_cached);
    return self->st_cached;
}

/* The offsets of _Run's slots (1), or 0 when it is not the plain slotted class expected (the Python side then
 * makes every run). */
static int run_layout(Hook *self) {
    if (self->run_offsets[0] > 0) return 1;
    if (!PyType_Check(self->run_type)) return 0;
    Py_ssize_t off[RUN_SLOTS];
    for (int i = 0; i < RUN_SLOTS; i++)
        if ((off[i] = lt_slot_offset_s((PyTypeObject *)self->run_type, RUN_FIELDS[i])) <= 0) return 0;
    for (int i = 0; i < RUN_SLOTS; i++) self->run_offsets[i] = off[i];
    return 1;
}

/* A new run of `ctx` as tinygrad._run_for(ctx, frame) makes it (a new reference), Py_None (new) when its work
 * is not recorded, NULL with an error set. BEAM runs (ctx.cache is False), a context that is not the usual
 * dataclass, and a _Run of another layout go to the Python function itself. */
static PyObject *new_run(Hook *self, PyObject *ctx, PyFrameObject *frame) {
    PyObject *cache = NULL, *stats = NULL, *jit = NULL, *vv = NULL, *inputs = NULL, *copied = NULL;
    PyObject *st = NULL, *site = NULL, *globals = NULL, *module = NULL, *lasti = NULL, *run = NULL;
    PyObject *api = NULL;
    int python = frame == NULL || !run_layout(self);
    if (!python) {
        cache = PyObject_GetAttr(ctx, s_cache);
        python = cache == NULL || cache == Py_False;
    }
    if (python) {
        PyErr_Clear();
        Py_XDECREF(cache);
        return PyObject_CallFunctionObjArgs(self->new_run, ctx, frame ? (PyObject *)frame : Py_None, NULL);
    }
    stats = PyObject_GetAttr(ctx, s_update_stats);
    int update = stats ? PyObject_IsTrue(stats) : -1;
    jit = update >= 0 ? PyObject_GetAttr(ctx, s_jit) : NULL;
    int jitted = jit ? PyObject_IsTrue(jit) : -1;
    if (jitted < 0) goto done;
    api = !update ? self->api_internal : jitted ? self->api_jit : self->api_realize;
    vv = PyObject_GetAttr(ctx, s_var_vals);
    int any = vv ? PyObject_IsTrue(vv) : -1;
    if (any < 0) goto done;
    copied = !any ? Py_NewRef(Py_None) : PyDict_CheckExact(vv) ? PyDict_Copy(vv) : PyObject_CallOneArg((PyObject *)&PyDict_Type, vv);
    inputs = copied ? PyObject_GetAttr(ctx, s_input_uops) : NULL;
    st = inputs ? thread_state(self) : NULL;
    site = st ? user_frame(self, frame) : NULL;
    if (site == NULL) goto done;
    PyFrameObject *sf = (PyFrameObject *)site;
    globals = PyFrame_GetGlobals(sf);
    module = globals ? PyDict_GetItemWithError(globals, s_name) : NULL; /* borrowed */
    if (module == NULL && PyErr_Occurred()) goto done;
    module = module ? Py_NewRef(module) : PyUnicode_FromString(""); /* f_globals.get("__name__", "") */
    lasti = module ? PyLong_FromLong(PyFrame_GetLasti(sf)) : NULL;
    if (lasti == NULL) goto done;
    run = ((PyTypeObject *)self->run_type)->tp_alloc((PyTypeObject *)self->run_type, 0);
    if (run == NULL) goto done;
    PyObject *code = (PyObject *)PyFrame_GetCode(sf); /* new */
    PyObject *values[RUN_SLOTS] = {api, code, inputs, lasti, module, st, copied};
    for (int i = 0; i < RUN_SLOTS; i++) {
        Py_INCREF(values[i]);
        *(PyObject **)((char *)run + self->run_offsets[i]) = values[i];
    }
    Py_DECREF(code);
done:
    Py_XDECREF(cache);
    Py_XDECREF(stats);
    Py_XDECREF(jit);
    Py_XDECREF(vv);
    Py_XDECREF(copied);
    Py_XDECREF(inputs);
    Py_XDECREF(st);
    Py_XDECREF(site);
    Py_XDECREF(globals);
    Py_XDECREF(module);
    Py_XDECREF(lasti);
    return run;
}

/* The run of `ctx` (a new reference), Py_None (new) when its work is not recorded, NULL with an error set. */
static PyObject *run_of(Hook *self, PyObject *ctx) {
    PyObject *run = weak_target(self->last_run);
    if (run != Py_None && weak_target(self->last_ctx) == ctx) {
        Py_INCREF(run);
        return run;
    }
    PyFrameObject *frame = PyEval_GetFrame(); /* run_linear's (borrowed): this call made no frame */
    run = new_run(self, ctx, frame);
    if (run == NULL || run == Py_None) return run;
    PyObject *ctx_ref = PyWeakref_NewRef(ctx, NULL);
    PyObject *run_ref = ctx_ref ? PyWeakref_NewRef(run, NULL) : NULL;
    if (run_ref == NULL) { /* not weakly referenceable: this run serves this call only */
        PyErr_Clear();
        Py_XDECREF(ctx_ref);
        return run;
    }
    Py_XSETREF(self->last_ctx, ctx_ref); /* both set with no Python code in between: one pair */
    Py_XSETREF(self->last_run, run_ref);
    return run;
}

static PyObject *Hook_vectorcall(Hook *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs != 2 || (kwnames != NULL && PyTuple_GET_SIZE(kwnames) > 0))
        return PyObject_Vectorcall(self->fallback, args, nargsf, kwnames);
    PyObject *call = args[0], *ctx = args[1];
    PyObject *subs = PyDict_GetItemWithError(PyModule_GetDict(self->bus), s_subs); /* borrowed */
    if (subs == NULL || !PyTuple_CheckExact(subs)) {
        PyErr_Clear();
        return PyObject_Vectorcall(self->fallback, args, nargsf, kwnames);
    }
    if (PyTuple_GET_SIZE(subs) == 0 || ctx == Py_None) return PyObject_Vectorcall(self->inner, args, nargsf, NULL);
    PyObject *src = slot_get(&self->uop_src, call, s_src);
    PyObject *op = NULL;
    if (src != NULL && PyTuple_Check(src) && PyTuple_GET_SIZE(src) > 0)
        op = slot_get(&self->uop_op, PyTuple_GET_ITEM(src, 0), s_op);
    Py_XDECREF(src);
    if (op == NULL) { /* not the call shape known here: the Python hook decides */
        PyErr_Clear();
        return PyObject_Vectorcall(self->fallback, args, nargsf, kwnames);
    }
    Py_DECREF(op); /* compared by identity only: the Ops members live as long as the module */
    if (op != self->program && op != self->copy) {
        PyObject *to = op == self->custom ? self->fallback : self->inner; /* a graph batch: the Python hook */
        return PyObject_Vectorcall(to, args, nargsf, NULL);
    }
    Py_INCREF(subs);
    PyObject *run = run_of(self, ctx);
    PyObject *st = run != NULL && run != Py_None ? slot_get(&self->run_st, run, s_st) : NULL;
    if (st == NULL) {
        if (run == NULL || run != Py_None) warn_once(self); /* an error: reported once */
        Py_XDECREF(run);
        Py_DECREF(subs);
        PyErr_Clear();
        return PyObject_Vectorcall(self->inner, args, nargsf, NULL);
    }
    long long t0 = now_ns();
    PyObject *result = PyObject_Vectorcall(self->inner, args, nargsf, NULL);
    long long t1 = now_ns();
    if (result == NULL) { /* the call raised: record it with the error, then raise it unchanged */
        PyObject *etype, *evalue, *etb;
        PyErr_Fetch(&etype, &evalue, &etb);
        PyErr_NormalizeException(&etype, &evalue, &etb);
        if (etb != NULL && evalue != NULL) PyException_SetTraceback(evalue, etb);
        PyObject *name = evalue ? PyType_GetName(Py_TYPE(evalue)) : NULL;
        PyObject *error = name ? PyUnicode_FromFormat("%U: %S", name, evalue) : NULL;
        if (error == NULL || record(self, subs, call, run, st, t0, t1, error) < 0) warn_once(self);
        Py_XDECREF(name);
        Py_XDECREF(error);
        PyErr_Clear();
        PyErr_Restore(etype, evalue, etb);
    } else if (record(self, subs, call, run, st, t0, t1, Py_None) < 0) {
        warn_once(self);
    }
    Py_DECREF(st);
    Py_DECREF(run);
    Py_DECREF(subs);
    return result;
}

static int Hook_init(Hook *self, PyObject *args, PyObject *kwds) {
    static char *names[] = {"inner", "fallback", "bus", "new_run", "warn", "decode", "framework", "next_seq",
                            "program", "copy", "custom", "run_type", "site_cache", "skip_new", "local",
                            "api_realize", "api_jit", "api_internal", NULL};
    PyObject *v[18];
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOO!OOOOOOOOOO!OOOOO", names, &v[0], &v[1], &PyModule_Type, &v[2],
                                     &v[3], &v[4], &v[5], &v[6], &v[7], &v[8], &v[9], &v[10], &v[11], &PyDict_Type,
                                     &v[12], &v[13], &v[14], &v[15], &v[16], &v[17]))
        return -1;
    PyObject **slots[18] = {&self->inner,       &self->fallback,   &self->bus,         &self->new_run,
                            &self->warn,        &self->decode,     &self->framework,   &self->next_seq,
                            &self->program,     &self->copy,       &self->custom,      &self->run_type,
                            &self->site_cache,  &self->skip_new,   &self->local,       &self->api_realize,
                            &self->api_jit,     &self->api_internal};
    self->run_offsets[0] = 0;
    Py_CLEAR(self->st_cached);
    for (int i = 0; i < 18; i++) {
        Py_INCREF(v[i]);
        Py_XSETREF(*slots[i], v[i]);
    }
    self->vectorcall = (vectorcallfunc)Hook_vectorcall;
    return 0;
}

static void clear_slot(Slot *slot) {
    Py_CLEAR(slot->type);
    slot->offset = 0;
}

static int Hook_traverse(Hook *self, visitproc visit, void *arg) {
    Py_VISIT(self->dict);
    Py_VISIT(self->inner);
    Py_VISIT(self->fallback);
    Py_VISIT(self->bus);
    Py_VISIT(self->new_run);
    Py_VISIT(self->warn);
    Py_VISIT(self->decode);
    Py_VISIT(self->framework);
    Py_VISIT(self->next_seq);
    Py_VISIT(self->program);
    Py_VISIT(self->copy);
    Py_VISIT(self->custom);
    Py_VISIT(self->run_type);
    Py_VISIT(self->site_cache);
    Py_VISIT(self->skip_new);
    Py_VISIT(self->local);
    Py_VISIT(self->api_realize);
    Py_VISIT(self->api_jit);
    Py_VISIT(self->api_internal);
    Py_VISIT(self->st_cached);
    Slot *s[5] = {&self->uop_src, &self->uop_op, &self->run_st, &self->st_stack, &self->st_tid};
    for (int i = 0; i < 5; i++) Py_VISIT(s[i]->type);
    Py_VISIT(self->last_ctx);
    Py_VISIT(self->last_run);
    Py_VISIT(self->subs_seen);
    for (Py_ssize_t i = 0; i < self->n_subs_seen; i++) {
        Py_VISIT(self->sub_queues[i]);
        Py_VISIT(self->sub_appends[i]);
    }
    return 0;
}

static int Hook_clear(Hook *self) {
    Py_CLEAR(self->dict);
    Py_CLEAR(self->inner);
    Py_CLEAR(self->fallback);
    Py_CLEAR(self->bus);
    Py_CLEAR(self->new_run);
    Py_CLEAR(self->warn);
    Py_CLEAR(self->decode);
    Py_CLEAR(self->framework);
    Py_CLEAR(self->next_seq);
    Py_CLEAR(self->program);
    Py_CLEAR(self->copy);
    Py_CLEAR(self->custom);
    Py_CLEAR(self->run_type);
    Py_CLEAR(self->site_cache);
    Py_CLEAR(self->skip_new);
    Py_CLEAR(self->local);
    Py_CLEAR(self->api_realize);
    Py_CLEAR(self->api_jit);
    Py_CLEAR(self->api_internal);
    Py_CLEAR(self->st_cached);
    Slot *s[5] = {&self->uop_src, &self->uop_op, &self->run_st, &self->st_stack, &self->st_tid};
    for (int i = 0; i < 5; i++) clear_slot(s[i]);
    Py_CLEAR(self->last_ctx);
    Py_CLEAR(self->last_run);
    forget_subs(self);
    return 0;
}

static void Hook_dealloc(Hook *self) {
    PyObject_GC_UnTrack(self);
    Hook_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* binds like a function when stored on a class, so it stays a drop-in for a method */
static PyGetSetDef Hook_getset[] = {LT_DICT_GETSET};

static PyTypeObject HookType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "launchtrace.capture._tinyhook.Hook",
    .tp_basicsize = sizeof(Hook),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "tinygrad's pm_exec.rewrite wrapper, compiled (see the module source).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Hook_init,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(Hook, vectorcall),
    .tp_traverse = (traverseproc)Hook_traverse,
    .tp_clear = (inquiry)Hook_clear,
    .tp_dealloc = (destructor)Hook_dealloc,
    .tp_dictoffset = offsetof(Hook, dict),
    .tp_descr_get = lt_bind_like_function,
    .tp_getset = Hook_getset,
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_tinyhook", "tinygrad's executor hook in C.", -1,
                                    NULL, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__tinyhook(void) {
    INTERN(s_subs, "_subs");
    INTERN(s_src, "src");
    INTERN(s_op, "op");
    INTERN(s_st, "st");
    INTERN(s_stack, "stack");
    INTERN(s_tid, "tid");
    INTERN(s_queue, "queue");
    INTERN(s_capacity, "capacity");
    INTERN(s_append, "append");
    INTERN(s_full, "full");
    INTERN(s_tinygrad, "tinygrad");
    INTERN(s_cache, "cache");
    INTERN(s_update_stats, "update_stats");
    INTERN(s_jit, "jit");
    INTERN(s_var_vals, "var_vals");
    INTERN(s_input_uops, "input_uops");
    INTERN(s_name, "__name__");
    PyObject *fastlaunch = PyImport_ImportModule("launchtrace.capture._fastlaunch"); /* the Event type's home */
    if (fastlaunch == NULL) return NULL;
    Py_DECREF(fastlaunch); /* sys.modules keeps it */
    capi = (LtCaptureAPI *)PyCapsule_Import(LT_CAPTURE_API_NAME, 0);
    if (capi == NULL) return NULL;
    if (PyType_Ready(&HookType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (lt_add_type(m, "Hook", &HookType) < 0) return NULL;
    PyObject *n = PyLong_FromLong(N_EVENT); /* the event's length: launchtrace.capture.tinygrad checks it */
    if (lt_module_add(m, "EVENT_LENGTH", n) < 0) return NULL;
    return m;
}
