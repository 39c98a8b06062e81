/* The capture materializer's launch-template hits, compiled: a run of repeated launches in one C loop.
 *
 * Why: in a loop that launches the same kernels again and again, almost every capture event is a copy of an
 * earlier one of the same drain in all but its times, scope and sequence number (see
 * launchtrace.capture.materialize.Materializer._launch_flat, the reference). Finding that earlier record costs
 * a 30-item key tuple built with star-unpacking and map(type, ...) in Python, a large share of the export
 * worker's budget per launch (docs/export.md#speed); here it is one tuple built in place.
 *
 * template_hits(raw, start, out, templates, registry, version, since, thread_names, copy, record_tag, flat_tag)
 *   `registry` is None or materialize.LABELS.version_dicts(): the owner and allocation registries' instance dicts,
 *   whose "_version" entries are what LABELS.changed() returns (read here per event without calling back into
 *   Python: the call was 2,500 of the 8,000 instructions this loop cost per launch, bench_instructions).
 *   Walks raw[start:], appending ("record", copy(proto, t0, t1, scope, seq, proto)) to `out` for each event
 *   that is a hit exactly as _launch_flat decides one, and returns the index of the first event that is not
 *   (or len(raw)): the Python materializer handles that event (a miss adds its template), then calls again.
 *   The key is _launch_flat's: (tid, id(code), line, module, id(caller), *tail, *map(type, tail)) with
 *   tail = event[EV_GRAPH:] (positions from _rawevent.h). The same conditions send an event back to Python:
 *   not a flat record, an error, an owner registry whose change tick is not `version` (templates must be
 *   dropped first), a sequence number before `since`, an unhashable key, no template, a template made by
 *   other code objects or another thread name; and any error while looking at an event (the Python path meets it too, and reports it). Only wrong
 *   arguments raise, before anything is appended. tests/test_materialize_fast.py checks both paths build
 *   equal records.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "../_native.h"

#include "_rawevent.h"

static PyObject *s_version, *s_thread_name, *s_record, *s_empty;

/* The last hit: a launch from the same call site with the same argument objects as the last one is the same
 * template, without building and hashing its key (half of this loop's cost per launch). Exact: the templates
 * dict has not changed since (its version tag, CPython < 3.12), and an event whose key items are the very
 * objects of the last key has an equal key (tuple equality compares identical items as equal), so the dict
 * look-up would find the same entry. */
static PyObject *last_key, *last_hit; /* strong */
static PyObject *last_templates;      /* borrowed: compared only, with its version tag */
static uint64_t last_tag;

/* 1 when `e`'s key would be last_key: same tid, line, module, tail objects and length (code and caller ids are
 * the hit's own objects, checked by the caller). */
static int same_as_last(PyObject *e, PyObject *templates) {
#if PY_VERSION_HEX < 0x030C0000
    if (last_key == NULL || templates != last_templates || ((PyDictObject *)templates)->ma_version_tag != last_tag)
        return 0;
    Py_ssize_t n_tail = PyTuple_GET_SIZE(e) - EV_GRAPH;
    if (PyTuple_GET_SIZE(last_key) != 5 + 2 * n_tail || PyTuple_GET_ITEM(last_key, 0) != PyTuple_GET_ITEM(e, EV_TID) ||
        PyTuple_GET_ITEM(last_key, 2) != PyTuple_GET_ITEM(e, EV_LINE) ||
        PyTuple_GET_ITEM(last_key, 3) != PyTuple_GET_ITEM(e, EV_MODULE))
        return 0;
    for (Py_ssize_t i = 0; i < n_tail; i++)
        if (PyTuple_GET_ITEM(last_key, 5 + i) != PyTuple_GET_ITEM(e, EV_GRAPH + i)) return 0;
    return 1;
#else
    (void)e;
    (void)templates;
    return 0;
#endif
}

static void remember(PyObject *key, PyObject *hit, PyObject *templates) {
#if PY_VERSION_HEX < 0x030C0000
    Py_INCREF(key);
    Py_INCREF(hit);
    Py_XSETREF(last_key, key);
    Py_XSETREF(last_hit, hit);
    last_templates = templates;
    last_tag = ((PyDictObject *)templates)->ma_version_tag;
#else
    (void)key;
    (void)hit;
    (void)templates;
#endif
}

/* New reference to proto.thread_name: through its slot when the records' class has a plain one (remembered per
 * class; a pointer load where the attribute look-up was 160 instructions per launch), else the look-up. */
static PyTypeObject *name_type;
static Py_ssize_t name_offset = -1;

static PyObject *thread_name_of(PyObject *proto) {
    PyTypeObject *t = Py_TYPE(proto);
    if (t != name_type) {
        Py_INCREF(t);
        Py_XSETREF(name_type, t);
        name_offset = t->tp_getattro == PyObject_GenericGetAttr ? lt_slot_offset(t, s_thread_name) : -1;
    }
    if (name_offset >= 0) {
        PyObject *v = *(PyObject **)((char *)proto + name_offset);
        if (v != NULL) return Py_NewRef(v);
    }
    return PyObject_GetAttr(proto, s_thread_name);
}

/* 1 when every registry's "_version" (dicts: LABELS.version_dicts()) is still version[i]; 0 not; -1 error. */
static int registries_same(PyObject *dicts, PyObject *version) {
    if (!PyTuple_CheckExact(dicts) || !PyTuple_CheckExact(version) || PyTuple_GET_SIZE(dicts) != PyTuple_GET_SIZE(version))
        return 0;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(dicts); i++) {
        PyObject *d = PyTuple_GET_ITEM(dicts, i);
        if (!PyDict_Check(d)) return 0;
        PyObject *now = PyDict_GetItemWithError(d, s_version); /* borrowed */
        if (now == NULL) return PyErr_Occurred() ? -1 : 0;
        PyObject *then = PyTuple_GET_ITEM(version, i);
        if (now != then) {
            int same = PyObject_RichCompareBool(now, then, Py_EQ);
            if (same <= 0) return same;
        }
    }
    return 1;
}

/* The template key of flat event `e` (a tuple of more than EV_GRAPH items), or NULL with an exception set. */
static PyObject *template_key(PyObject *e) {
    Py_ssize_t n = PyTuple_GET_SIZE(e), n_tail = n - EV_GRAPH;
    PyObject *key = PyTuple_New(5 + 2 * n_tail);
    if (key == NULL) return NULL;
    PyObject *tid = PyTuple_GET_ITEM(e, EV_TID), *line = PyTuple_GET_ITEM(e, EV_LINE);
    PyObject *module = PyTuple_GET_ITEM(e, EV_MODULE);
    PyObject *code_id = PyLong_FromVoidPtr(PyTuple_GET_ITEM(e, EV_CODE));
    PyObject *caller_id = code_id ? PyLong_FromVoidPtr(PyTuple_GET_ITEM(e, EV_CALLER)) : NULL;
    if (caller_id == NULL) {
        Py_XDECREF(code_id);
        Py_DECREF(key);
        return NULL;
    }
    Py_INCREF(tid);
    Py_INCREF(line);
    Py_INCREF(module);
    PyTuple_SET_ITEM(key, 0, tid);
    PyTuple_SET_ITEM(key, 1, code_id);
    PyTuple_SET_ITEM(key, 2, line);
    PyTuple_SET_ITEM(key, 3, module);
    PyTuple_SET_ITEM(key, 4, caller_id);
    for (Py_ssize_t i = 0; i < n_tail; i++) {
        PyObject *v = PyTuple_GET_ITEM(e, EV_GRAPH + i);
        PyObject *t = (PyObject *)Py_TYPE(v);
        Py_INCREF(v);
        Py_INCREF(t);
        PyTuple_SET_ITEM(key, 5 + i, v);
        PyTuple_SET_ITEM(key, 5 + n_tail + i, t);
    }
    return key;
}

/* 1: `e` was a hit and its record is appended to `out`; 0: not a hit (Python takes it); -1: error. */
static int one(PyObject *e, PyObject *out, PyObject *templates, PyObject *registry, PyObject *version,
               long long since, PyObject *thread_names, PyObject *copy, PyObject *record_tag, PyObject *flat_tag) {
    if (!PyTuple_CheckExact(e) || PyTuple_GET_SIZE(e) < N_FLAT_HEAD) return 0;
    if (PyTuple_GET_ITEM(e, EV_KIND) != record_tag || PyTuple_GET_ITEM(e, EV_PAYLOAD) != flat_tag) return 0;
    if (PyTuple_GET_ITEM(e, EV_ERROR) != Py_None) return 0; /* an error: unique, and rare */
    PyObject *seq = PyTuple_GET_ITEM(e, EV_SEQ);
    if (registry != Py_None) {
        int same = registries_same(registry, version);
        if (same <= 0) return same; /* moved: Python drops the templates first */
        if (!PyLong_CheckExact(seq)) return 0;
        int overflow = 0;
        long long s = PyLong_AsLongLongAndOverflow(seq, &overflow);
        if (overflow || (s == -1 && PyErr_Occurred()) || s < since) {
            PyErr_Clear();
            return 0;
        }
    }
    PyObject *hit; /* borrowed */
    if (same_as_last(e, templates)) {
        hit = last_hit;
    } else {
        PyObject *key = template_key(e);
        if (key == NULL) return -1;
        hit = PyDict_GetItemWithError(templates, key);
        if (hit == NULL) {
            Py_DECREF(key);
            if (PyErr_Occurred()) {
                if (!PyErr_ExceptionMatches(PyExc_TypeError)) return -1;
                PyErr_Clear(); /* an unhashable part: Python builds it without a template */
            }
            return 0;
        }
        if (PyTuple_CheckExact(hit) && PyTuple_GET_SIZE(hit) == 3) remember(key, hit, templates);
        Py_DECREF(key);
    }
    if (!PyTuple_CheckExact(hit) || PyTuple_GET_SIZE(hit) != 3) return 0;
    PyObject *proto = PyTuple_GET_ITEM(hit, 0);
    if (PyTuple_GET_ITEM(hit, 1) != PyTuple_GET_ITEM(e, EV_CODE) ||
        PyTuple_GET_ITEM(hit, 2) != PyTuple_GET_ITEM(e, EV_CALLER))
        return 0;
    PyObject *name = PyDict_GetItemWithError(thread_names, PyTuple_GET_ITEM(e, EV_TID)); /* borrowed */
    if (name == NULL && PyErr_Occurred()) return -1;
    PyObject *proto_name = thread_name_of(proto);
    if (proto_name == NULL) return -1;
    PyObject *want = name ? name : s_empty;
    int same = proto_name == want ? 1 : PyObject_RichCompareBool(proto_name, want, Py_EQ);
    Py_DECREF(proto_name);
    if (same <= 0) return same;
    PyObject *args[6] = {proto, PyTuple_GET_ITEM(e, EV_T0), PyTuple_GET_ITEM(e, EV_T1), PyTuple_GET_ITEM(e, EV_SCOPE),
                         seq, proto};
    PyObject *rec = PyObject_Vectorcall(copy, args, 6, NULL);
    if (rec == NULL) return -1;
    PyObject *item = PyTuple_Pack(2, s_record, rec);
    if (item != NULL && !PyObject_GC_IsTracked(rec)) PyObject_GC_UnTrack(item); /* as the collector would */
    Py_DECREF(rec);
    if (item == NULL) return -1;
    int rc = PyList_Append(out, item);
    Py_DECREF(item);
    return rc < 0 ? -1 : 1;
}

static PyObject *template_hits(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 11 || !PyList_Check(args[0]) || !PyList_Check(args[2]) || !PyDict_Check(args[3]) ||
        !PyDict_Check(args[7])) {
        PyErr_SetString(PyExc_TypeError,
                        "template_hits(raw: list, start, out: list, templates: dict, registry, version, since, "
                        "thread_names: dict, copy, record_tag, flat_tag)");
        return NULL;
    }
    PyObject *raw = args[0], *out = args[2], *templates = args[3], *registry = args[4], *version = args[5];
    Py_ssize_t i = PyLong_AsSsize_t(args[1]);
    long long since = PyLong_AsLongLong(args[6]);
    if (PyErr_Occurred()) return NULL;
    for (; i < PyList_GET_SIZE(raw); i++) {
        PyObject *e = PyList_GET_ITEM(raw, i);
        Py_INCREF(e); /* the list may change while registry.changed() runs Python code */
        int r = one(e, out, templates, registry, version, since, args[7], args[8], args[9], args[10]);
        Py_DECREF(e);
        if (r < 0) PyErr_Clear(); /* the Python path meets the same trouble with this event, and reports it */
        if (r <= 0) break;
    }
    return PyLong_FromSsize_t(i);
}

static PyMethodDef methods[] = {
    {"template_hits", (PyCFunction)(void (*)(void))template_hits, METH_FASTCALL,
     "Materialise the run of launch-template hits from raw[start]; the index of the first other event."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fastmat", "Launch-template hits, compiled.", -1,
                                    methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__fastmat(void) {
    if ((s_version = PyUnicode_InternFromString("_version")) == NULL) return NULL;
    if ((s_thread_name = PyUnicode_InternFromString("thread_name")) == NULL) return NULL;
    if ((s_record = PyUnicode_InternFromString("record")) == NULL) return NULL;
    if ((s_empty = PyUnicode_FromString("")) == NULL) return NULL;
    PyObject *m = PyModule_Create(&module);
    PyObject *fields = m ? lt_record_fields() : NULL; /* the layout it reads: launchtrace.rawevent checks it */
    if (lt_module_add(m, "RECORD_FIELDS", fields) < 0) return NULL;
    return m;
}
