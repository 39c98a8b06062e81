/* The wp.launch capture wrapper in C: launchtrace.capture.warp.wrap_launch's common path, compiled.
 *
 * Why: a bare CPU launch of a small kernel costs about 20 us in Warp's Python; the Python wrapper that records
 * it costs about 9 us more (45 lines of bytecode per launch). This object does the same work for the common
 * call (wp.launch(kernel, dim, inputs=[arrays and plain scalars], outputs=[...], device=None|str|Device)) and
 * hands every other call, before running it, to the Python wrapper it was given (`fallback`), which stays the
 * definition: recording off, a Tape active, measurements on, other keywords, struct or vector arguments,
 * anything that is not a list or tuple. The event it queues is the Python wrapper's flat event, item for item;
 * tests/test_fastlaunch.py checks the two wrappers queue equal events for the same calls, and every capture
 * test runs through this one when it is built.
 *
 * Nothing here may break the program: a failure while building the event is reported once through the
 * Python `warn` callable and the launch's result is returned unchanged; an exception from the launch itself is
 * recorded through `failed` and re-raised unchanged.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <frameobject.h>
#include <stddef.h>
#include <time.h>

#include "../_acyclic.h"

typedef struct {
    PyObject_HEAD
    PyObject *dict;        /* __dict__: functools-style identity (__name__, __wrapped__, ...) */
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
    PyObject *failed;      /* warp._record_failed_launch(args, kwargs, exc, t0, frame) */
    PyObject *warn;        /* hotpath._warn_once(what) */
    PyObject *record;      /* bus.RECORD */
    PyObject *arr;         /* hotpath.ARR */
    PyObject *flat;        /* hotpath.FLAT */
} Launcher;

static PyObject *s_st, *s_busy, *s_subs, *s_probes, *s_runtime, *s_tape, *s_stack, *s_capture_graph, *s_tid;
static PyObject *s_queue, *s_capacity, *s_append, *s_full, *s_ptr, *s_shape, *s_dtype, *s_capacity_attr;
static PyObject *s_device, *s_kernel, *s_dim, *s_inputs, *s_outputs, *s_record_tape, *s_launch;

static long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts); /* time.time_ns()'s clock on Linux */
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* 1 when v is a value the flat event holds as is: int, float, bool, str, None (exact types). */
static int is_plain(PyObject *v) {
    return v == Py_None || PyLong_CheckExact(v) || PyFloat_CheckExact(v) || PyBool_Check(v) ||
           PyUnicode_CheckExact(v);
}

/* handles[id(obj)] = obj unless present; the id as a new int, or NULL. */
static PyObject *handle(Launcher *self, PyObject *obj) {
    PyObject *key = PyLong_FromVoidPtr(obj);
    if (key == NULL) return NULL;
    int has = PyDict_Contains(self->handles, key);
    if (has < 0 || (has == 0 && PyDict_SetItem(self->handles, key, obj) < 0)) {
        Py_DECREF(key);
        return NULL;
    }
    return key;
}

/* kwargs keys all among those of the flat path (kernel, dim, inputs, outputs, record_tape, device). */
static int flat_keywords(PyObject *kwargs) {
    if (kwargs == NULL) return 1;
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(kwargs, &pos, &key, &value)) {
        int ok = 0;
        PyObject *names[] = {s_kernel, s_dim, s_inputs, s_outputs, s_record_tape, s_device};
        for (int i = 0; i < 6 && !ok; i++) {
            int eq = PyUnicode_Check(key) ? PyUnicode_Compare(key, names[i]) == 0 : 0;
            ok = eq;
        }
        if (!ok) return 0;
    }
    return 1;
}

/* args[i] if there are enough positional arguments, else kwargs[name], else NULL (borrowed). */
static PyObject *argument(PyObject *args, PyObject *kwargs, Py_ssize_t i, PyObject *name) {
    if (PyTuple_GET_SIZE(args) > i) return PyTuple_GET_ITEM(args, i);
    return kwargs ? PyDict_GetItemWithError(kwargs, name) : NULL;
}

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

/* Append the event's values for `seq` to list `out`; 0 or -1 with an exception set. */
static int append_values(Launcher *self, PyObject *out, PyObject *seq) {
    if (seq == NULL || seq == Py_None) return 0;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *v = items[i];
        if ((PyObject *)Py_TYPE(v) != self->array_type) {
            if (PyList_Append(out, v) < 0) return -1;
            continue;
        }
        PyObject *ptr = PyObject_GetAttr(v, s_ptr);
        PyObject *shape = ptr ? PyObject_GetAttr(v, s_shape) : NULL;
        PyObject *dtype = shape ? PyObject_GetAttr(v, s_dtype) : NULL;
        PyObject *cap = dtype ? PyObject_GetAttr(v, s_capacity_attr) : NULL;
        PyObject *device = cap ? PyObject_GetAttr(v, s_device) : NULL;
        PyObject *did = device ? handle(self, dtype) : NULL;
        PyObject *vid = did ? handle(self, device) : NULL;
        int rc = -1;
        if (vid != NULL) {
            int ptr_true = PyObject_IsTrue(ptr), cap_true = PyObject_IsTrue(cap);
            if (ptr_true >= 0 && cap_true >= 0) {
                PyObject *zero = PyLong_FromLong(0);
                PyObject *parts[6] = {self->arr, ptr_true ? ptr : zero, shape, did, cap_true ? cap : zero, vid};
                rc = 0;
                for (int k = 0; k < 6 && rc == 0; k++) rc = PyList_Append(out, parts[k]);
                Py_XDECREF(zero);
            }
        }
        Py_XDECREF(ptr);
        Py_XDECREF(shape);
        Py_XDECREF(dtype);
        Py_XDECREF(cap);
        Py_XDECREF(device);
        Py_XDECREF(did);
        Py_XDECREF(vid);
        if (rc < 0) return -1;
    }
    return 0;
}

/* Build the flat event and queue it for every subscription; 0 or -1 with an exception set. */
static int record(Launcher *self, PyObject *st, PyObject *subs, PyObject *args, PyObject *kwargs, long long t0,
                  long long t1) {
    int rc = -1;
    PyObject *site = NULL, *code = NULL, *module = NULL, *caller = NULL, *line = NULL;
    PyObject *out = NULL, *event = NULL, *seq = NULL, *tid = NULL, *stack = NULL, *graph = NULL;
    PyObject *kid = NULL, *device_id = NULL, *n_inputs = NULL, *t0o = NULL, *t1o = NULL;
    PyFrameObject *frame = PyEval_GetFrame(); /* the caller's frame (borrowed): this call made none */
    if (frame == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "no Python frame");
        return -1;
    }
    PyCodeObject *fcode = PyFrame_GetCode(frame);
    PyObject *code_id = PyLong_FromVoidPtr(fcode);
    PyObject *hit = code_id ? PyDict_GetItemWithError(self->user_module, code_id) : NULL; /* borrowed */
    Py_XDECREF(code_id);
    if (hit != NULL && PyTuple_Check(hit) && PyTuple_GET_SIZE(hit) == 2 &&
        PyTuple_GET_ITEM(hit, 0) == (PyObject *)fcode) {
        code = (PyObject *)fcode;
        Py_INCREF(code);
        caller = code;
        Py_INCREF(caller);
        module = PyTuple_GET_ITEM(hit, 1);
        Py_INCREF(module);
        line = PyLong_FromLong(PyFrame_GetLineNumber(frame));
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

    stack = PyObject_GetAttr(st, s_stack);
    graph = stack ? PyObject_GetAttr(st, s_capture_graph) : NULL;
    tid = graph ? PyObject_GetAttr(st, s_tid) : NULL;
    seq = tid ? PyObject_CallNoArgs(self->next_seq) : NULL;
    if (seq == NULL) goto done;
    PyObject *scope = (PyList_Check(stack) && PyList_GET_SIZE(stack)) ? PyList_GET_ITEM(stack, PyList_GET_SIZE(stack) - 1)
                                                                     : Py_None;
    PyObject *kernel = argument(args, kwargs, 0, s_kernel);
    PyObject *dim = argument(args, kwargs, 1, s_dim);
    PyObject *inputs = argument(args, kwargs, 2, s_inputs);
    PyObject *outputs = argument(args, kwargs, 3, s_outputs);
    PyObject *device = kwargs ? PyDict_GetItemWithError(kwargs, s_device) : NULL;
    if (PyErr_Occurred() || kernel == NULL) goto done;
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
    PyObject *head[18] = {self->record, seq,  tid,   s_launch, self->flat, code, line, module,  caller,
                          t0o,          t1o,  scope, graph, Py_None,  kid,        dim ? dim : Py_None,
                          n_inputs,     device_id};
    out = PyList_New(18);
    if (out == NULL) goto done;
    for (int i = 0; i < 18; i++) {
        Py_INCREF(head[i]);
        PyList_SET_ITEM(out, i, head[i]);
    }
    if (append_values(self, out, inputs) < 0 || append_values(self, out, outputs) < 0) goto done;
    event = PyList_AsTuple(out);
    if (event == NULL) goto done;
    (void)lt_acyclic(event, 2); /* out of the cycle collector unless an item is in it (dims as a list, ...) */
    Py_ssize_t n_subs = PyTuple_GET_SIZE(subs);
    for (Py_ssize_t i = 0; i < n_subs; i++) {
        PyObject *sub = PyTuple_GET_ITEM(subs, i);
        PyObject *q = PyObject_GetAttr(sub, s_queue);
        PyObject *cap = q ? PyObject_GetAttr(sub, s_capacity) : NULL;
        if (cap == NULL) {
            Py_XDECREF(q);
            goto done;
        }
        Py_ssize_t len = PyObject_Length(q);
        Py_ssize_t limit = PyLong_AsSsize_t(cap);
        PyObject *r = NULL;
        if (len >= 0 && !(limit == -1 && PyErr_Occurred()))
            r = len < limit ? PyObject_CallMethodOneArg(q, s_append, event)
                            : PyObject_CallMethodOneArg(sub, s_full, event);
        Py_DECREF(q);
        Py_DECREF(cap);
        if (r == NULL) goto done;
        Py_DECREF(r);
    }
    rc = 0;
done:
    Py_XDECREF(site);
    Py_XDECREF(code);
    Py_XDECREF(module);
    Py_XDECREF(caller);
    Py_XDECREF(line);
    Py_XDECREF(out);
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
static int common_call(Launcher *self, PyObject *args, PyObject *kwargs, PyObject **st_out, PyObject **subs_out) {
    PyObject *subs = PyObject_GetAttr(self->bus, s_subs);
    if (subs == NULL) return -1;
    int listening = PyTuple_Check(subs) && PyTuple_GET_SIZE(subs) > 0;
    PyObject *st = listening ? PyObject_GetAttr(self->local, s_st) : NULL;
    PyObject *busy = st ? PyObject_GetAttr(st, s_busy) : NULL;
    PyObject *runtime = PyObject_GetAttr(self->ctx, s_runtime);
    PyObject *tape = runtime ? PyObject_GetAttr(runtime, s_tape) : NULL;
    PyObject *probes = NULL;
    int ok = -1;
    if (tape != NULL && (!listening || busy == Py_True)) {
        ok = tape == Py_None ? 2 : 0; /* the Python wrapper fixes the Tape's caller record */
    } else if (tape != NULL && busy != NULL && (probes = PyObject_GetAttr(self->warp_mod, s_probes)) != NULL) {
        ok = busy == Py_False && probes == Py_False && tape == Py_None && PyTuple_GET_SIZE(args) <= 4 &&
             flat_keywords(kwargs);
        if (ok) {
            PyObject *device = kwargs ? PyDict_GetItemWithError(kwargs, s_device) : NULL;
            if (PyErr_Occurred()) ok = -1;
            else if (device != NULL && device != Py_None && !PyUnicode_CheckExact(device) &&
                     (PyObject *)Py_TYPE(device) != self->device_type)
                ok = 0;
        }
        if (ok == 1) {
            PyObject *inputs = argument(args, kwargs, 2, s_inputs);
            PyObject *outputs = inputs || !PyErr_Occurred() ? argument(args, kwargs, 3, s_outputs) : NULL;
            if (PyErr_Occurred()) ok = -1;
            else if (values_ok(self, inputs) < 0 || values_ok(self, outputs) < 0) ok = 0;
        }
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

static PyObject *Launcher_call(Launcher *self, PyObject *args, PyObject *kwargs) {
    PyObject *st = NULL, *subs = NULL;
    int common = common_call(self, args, kwargs, &st, &subs);
    if (common == 2) return PyObject_Call(self->original, args, kwargs);
    if (common <= 0) {
        PyErr_Clear(); /* an unexpected state: the Python wrapper decides, as it would have anyway */
        return PyObject_Call(self->fallback, args, kwargs);
    }
    PyFrameObject *frame = PyEval_GetFrame();
    if (PyObject_SetAttr(st, s_busy, Py_True) < 0) {
        Py_DECREF(st);
        Py_DECREF(subs);
        PyErr_Clear();
        return PyObject_Call(self->fallback, args, kwargs);
    }
    long long t0 = now_ns();
    PyObject *result = PyObject_Call(self->original, args, kwargs);
    long long t1 = now_ns();
    PyObject *etype, *evalue, *etb;
    PyErr_Fetch(&etype, &evalue, &etb);
    if (PyObject_SetAttr(st, s_busy, Py_False) < 0) PyErr_Clear();
    if (result == NULL) { /* the launch raised: record it as failed, then raise it unchanged */
        PyErr_NormalizeException(&etype, &evalue, &etb);
        if (etb != NULL && evalue != NULL) PyException_SetTraceback(evalue, etb);
        PyObject *t0o = PyLong_FromLongLong(t0);
        PyObject *kw = kwargs ? (Py_INCREF(kwargs), kwargs) : PyDict_New(); /* the Python side reads a dict */
        PyObject *r = t0o && kw ? PyObject_CallFunctionObjArgs(self->failed, args, kw, evalue ? evalue : Py_None,
                                                               t0o, frame ? (PyObject *)frame : Py_None, NULL)
                                : NULL;
        Py_XDECREF(kw);
        Py_XDECREF(t0o);
        Py_XDECREF(r);
        PyErr_Clear();
        PyErr_Restore(etype, evalue, etb);
        Py_DECREF(st);
        Py_DECREF(subs);
        return NULL;
    }
    if (result == Py_None && record(self, st, subs, args, kwargs, t0, t1) < 0) {
        PyErr_Clear();
        PyObject *r = PyObject_CallOneArg(self->warn, s_launch);
        Py_XDECREF(r);
        PyErr_Clear();
    }
    Py_DECREF(st);
    Py_DECREF(subs);
    return result;
}

static int Launcher_init(Launcher *self, PyObject *args, PyObject *kwds) {
    static char *names[] = {"original", "fallback", "local", "bus", "warp_module", "ctx", "next_seq",
                            "user_module", "handles", "array_type", "device_type", "find_site", "failed",
                            "warn", "record", "arr", "flat", NULL};
    PyObject *v[17];
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOOOOOO!O!OOOOOOOO", names, &v[0], &v[1], &v[2], &v[3], &v[4],
                                     &v[5], &v[6], &PyDict_Type, &v[7], &PyDict_Type, &v[8], &v[9], &v[10],
                                     &v[11], &v[12], &v[13], &v[14], &v[15], &v[16]))
        return -1;
    PyObject **slots[17] = {&self->original, &self->fallback,  &self->local,     &self->bus,   &self->warp_mod,
                            &self->ctx,      &self->next_seq,  &self->user_module, &self->handles,
                            &self->array_type, &self->device_type, &self->find_site, &self->failed, &self->warn,
                            &self->record,   &self->arr,       &self->flat};
    for (int i = 0; i < 17; i++) {
        Py_INCREF(v[i]);
        Py_XSETREF(*slots[i], v[i]);
    }
    return 0;
}

static int Launcher_traverse(Launcher *self, visitproc visit, void *arg) {
    Py_VISIT(self->dict);
    Py_VISIT(self->original);
    Py_VISIT(self->fallback);
    Py_VISIT(self->local);
    Py_VISIT(self->bus);
    Py_VISIT(self->warp_mod);
    Py_VISIT(self->ctx);
    Py_VISIT(self->next_seq);
    Py_VISIT(self->user_module);
    Py_VISIT(self->handles);
    Py_VISIT(self->array_type);
    Py_VISIT(self->device_type);
    Py_VISIT(self->find_site);
    Py_VISIT(self->failed);
    Py_VISIT(self->warn);
    Py_VISIT(self->record);
    Py_VISIT(self->arr);
    Py_VISIT(self->flat);
    return 0;
}

static int Launcher_clear(Launcher *self) {
    Py_CLEAR(self->dict);
    Py_CLEAR(self->original);
    Py_CLEAR(self->fallback);
    Py_CLEAR(self->local);
    Py_CLEAR(self->bus);
    Py_CLEAR(self->warp_mod);
    Py_CLEAR(self->ctx);
    Py_CLEAR(self->next_seq);
    Py_CLEAR(self->user_module);
    Py_CLEAR(self->handles);
    Py_CLEAR(self->array_type);
    Py_CLEAR(self->device_type);
    Py_CLEAR(self->find_site);
    Py_CLEAR(self->failed);
    Py_CLEAR(self->warn);
    Py_CLEAR(self->record);
    Py_CLEAR(self->arr);
    Py_CLEAR(self->flat);
    return 0;
}

static void Launcher_dealloc(Launcher *self) {
    PyObject_GC_UnTrack(self);
    Launcher_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Launcher_get(PyObject *self, PyObject *obj, PyObject *type) {
    /* bind like a function when stored on a class, so it stays a drop-in for Warp's launch function */
    if (obj == NULL || obj == Py_None) {
        Py_INCREF(self);
        return self;
    }
    return PyMethod_New(self, obj);
}

static PyGetSetDef Launcher_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict},
    {NULL},
};

static PyTypeObject LauncherType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "launchtrace.capture._fastlaunch.Launcher",
    .tp_basicsize = sizeof(Launcher),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "wp.launch's capture wrapper, compiled (see the module source).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Launcher_init,
    .tp_call = (ternaryfunc)Launcher_call,
    .tp_traverse = (traverseproc)Launcher_traverse,
    .tp_clear = (inquiry)Launcher_clear,
    .tp_dealloc = (destructor)Launcher_dealloc,
    .tp_dictoffset = offsetof(Launcher, dict),
    .tp_descr_get = Launcher_get,
    .tp_getset = Launcher_getset,
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fastlaunch", "wp.launch's capture wrapper in C.", -1};

#define INTERN(var, text)                                         \
    do {                                                          \
        if ((var = PyUnicode_InternFromString(text)) == NULL) return NULL; \
    } while (0)

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
    if (PyType_Ready(&LauncherType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    Py_INCREF(&LauncherType);
    if (PyModule_AddObject(m, "Launcher", (PyObject *)&LauncherType) < 0) {
        Py_DECREF(&LauncherType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
