/* Slot-level constructors for launchtrace's frozen, slotted dataclasses, compiled.
 *
 * Why: the capture materializer copies a LaunchRecord (27 fields) and the span builder makes a SpanData (23
 * fields) once per launch; the dataclass's own __init__ (one object.__setattr__ per field, looked up by
 * name) costs a noticeable share of the export worker's whole budget per launch. Here each is one allocation
 * and one pointer store per field.
 *
 * It makes an instance of the class (its tp_alloc, as object.__new__ does) and stores each field's value in
 * its slot (the offset of the class's own member descriptor for that field, as descriptor.__set__ does). Only
 * plain object slots (T_OBJECT_EX member descriptors of the class or a base) are accepted; launchtrace.fastinit
 * falls back to cls(...) / dataclasses.replace for anything else, and where this module is not built.
 * tests/test_fastinit.py compares it against those.
 *
 * Left out of the cycle collector: a made object whose field values are all out of it already (atomic values,
 * or tuples whose items are, recursively, which are then untracked as CPython's collector would untrack them
 * on its next pass) cannot be part of a reference cycle, and is untracked at once, as CPython does for such
 * tuples and dicts. The export worker makes several of these per launch and keeps a batch of them alive for a
 * moment; left tracked, they fill the young generations and push old objects into full collections that walk
 * the whole program's heap (measured: a fifth of the export's cost). The classes are frozen: nothing changes
 * a field after it is made (object.__setattr__ on a made object is not supported).
 *
 *   Constructor(cls, descriptors, sources, defaults)   sources[i] >= 0: positional argument i; -1: defaults[i]
 *   Copier(cls, descriptors, sources)                  copy(base, *values): sources[i] >= 0: values[i], -1:
 *                                                      base's value (base must be an instance of exactly cls)
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stddef.h>

#include "_native.h"

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyTypeObject *cls;
    Py_ssize_t n_fields;
    Py_ssize_t n_args; /* positional arguments taken (after `base` for a copier) */
    Py_ssize_t *offsets;
    Py_ssize_t *sources;
    PyObject *defaults; /* tuple, one per field (None where a source is an argument); NULL for a copier */
    int copier;
} Maker;


static PyObject *Maker_vectorcall(Maker *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    Py_ssize_t skip = self->copier ? 1 : 0;
    if ((kwnames != NULL && PyTuple_GET_SIZE(kwnames)) || nargs != self->n_args + skip) {
        PyErr_Format(PyExc_TypeError, "%s() takes exactly %zd positional arguments (%zd given)",
                     self->copier ? "copy" : "new", self->n_args + skip, nargs);
        return NULL;
    }
    PyObject *base = NULL;
    if (self->copier) {
        base = args[0];
        if (Py_TYPE(base) != self->cls) {
            PyErr_Format(PyExc_TypeError, "copy() needs a %s, not %s", self->cls->tp_name, Py_TYPE(base)->tp_name);
            return NULL;
        }
    }
    PyObject *obj = self->cls->tp_alloc(self->cls, 0);
    if (obj == NULL) return NULL;
    for (Py_ssize_t i = 0; i < self->n_fields; i++) {
        Py_ssize_t src = self->sources[i];
        PyObject *v;
        if (src >= 0) v = args[skip + src];
        else if (base != NULL) v = *(PyObject **)((char *)base + self->offsets[i]);
        else v = PyTuple_GET_ITEM(self->defaults, i);
        if (v == NULL) { /* attrgetter's AttributeError; the half-made object goes (its unset slots are NULL) */
            Py_DECREF(obj);
            PyErr_SetString(PyExc_AttributeError, "copy(): a field of the base object is not set");
            return NULL;
        }
        Py_INCREF(v);
        *(PyObject **)((char *)obj + self->offsets[i]) = v;
    }
    int untrack = PyObject_IS_GC(obj);
    /* a copy of an untracked base: the base's values passed this check when it was made (only this module
     * untracks these objects, and their fields never change), so only the new values are looked at */
    int from_untracked = base != NULL && !PyObject_GC_IsTracked(base);
    for (Py_ssize_t i = 0; i < self->n_fields && untrack; i++)
        if (!from_untracked || self->sources[i] >= 0)
            untrack = lt_acyclic(*(PyObject **)((char *)obj + self->offsets[i]), LT_ACYCLIC_DEPTH);
    if (untrack) PyObject_GC_UnTrack(obj);
    return obj;
}

static int Maker_setup(Maker *self, PyObject *cls, PyObject *descriptors, PyObject *sources, PyObject *defaults,
                       int copier) {
    if (!PyType_Check(cls) || !PyTuple_Check(descriptors) || !PyTuple_Check(sources) ||
        PyTuple_GET_SIZE(sources) != PyTuple_GET_SIZE(descriptors) ||
        (defaults != NULL && (!PyTuple_Check(defaults) || PyTuple_GET_SIZE(defaults) != PyTuple_GET_SIZE(sources)))) {
        PyErr_SetString(PyExc_TypeError, "expected (cls, descriptors, sources[, defaults]) of equal lengths");
        return -1;
    }
    PyTypeObject *type = (PyTypeObject *)cls;
    if (type->tp_alloc == NULL || type->tp_dictoffset != 0) {
        PyErr_SetString(PyExc_TypeError, "only classes with slots and no __dict__");
        return -1;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(descriptors);
    self->offsets = PyMem_Calloc(n ? n : 1, sizeof(Py_ssize_t));
    self->sources = PyMem_Calloc(n ? n : 1, sizeof(Py_ssize_t));
    if (self->offsets == NULL || self->sources == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t n_args = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t off = lt_member_offset(type, PyTuple_GET_ITEM(descriptors, i));
        if (off < 0) {
            PyErr_SetString(PyExc_TypeError, "a field is not a plain object slot of the class");
            return -1;
        }
        for (Py_ssize_t j = 0; j < i; j++) {
            if (self->offsets[j] == off) {
                PyErr_SetString(PyExc_TypeError, "two fields share a slot");
                return -1;
            }
        }
        Py_ssize_t src = PyLong_AsSsize_t(PyTuple_GET_ITEM(sources, i));
        if (src == -1 && PyErr_Occurred()) return -1;
        if (src < -1 || src >= n) {
            PyErr_SetString(PyExc_ValueError, "a source index is out of range");
            return -1;
        }
        self->offsets[i] = off;
        self->sources[i] = src;
        if (src >= 0) n_args++;
    }
    /* the argument indexes must be 0..n_args-1, each once */
    for (Py_ssize_t k = 0; k < n_args; k++) {
        int seen = 0;
        for (Py_ssize_t i = 0; i < n; i++) seen += self->sources[i] == k;
        if (seen != 1) {
            PyErr_SetString(PyExc_ValueError, "the argument indexes must be 0..n-1, each once");
            return -1;
        }
    }
    Py_INCREF(cls);
    self->cls = type;
    self->n_fields = n;
    self->n_args = n_args;
    self->copier = copier;
    Py_XINCREF(defaults);
    self->defaults = defaults;
    self->vectorcall = (vectorcallfunc)Maker_vectorcall;
    return 0;
}

static PyTypeObject ConstructorType, CopierType;

static PyObject *Maker_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    PyObject *cls, *descriptors, *sources, *defaults = NULL;
    int copier = type == &CopierType;
    if (kwds != NULL && PyDict_GET_SIZE(kwds)) {
        PyErr_SetString(PyExc_TypeError, "positional arguments only");
        return NULL;
    }
    if (copier ? !PyArg_ParseTuple(args, "OOO", &cls, &descriptors, &sources)
               : !PyArg_ParseTuple(args, "OOOO", &cls, &descriptors, &sources, &defaults))
        return NULL;
    Maker *self = (Maker *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    if (Maker_setup(self, cls, descriptors, sources, defaults, copier) < 0) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

static int Maker_traverse(Maker *self, visitproc visit, void *arg) {
    Py_VISIT(self->cls);
    Py_VISIT(self->defaults);
    return 0;
}

static int Maker_clear(Maker *self) {
    Py_CLEAR(self->cls);
    Py_CLEAR(self->defaults);
    return 0;
}

static void Maker_dealloc(Maker *self) {
    PyObject_GC_UnTrack(self);
    Maker_clear(self);
    PyMem_Free(self->offsets);
    PyMem_Free(self->sources);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

#define MAKER_TYPE(NAME, DOC)                                                                            \
    static PyTypeObject NAME##Type = {                                                                   \
        PyVarObject_HEAD_INIT(NULL, 0).tp_name = "launchtrace._slots." #NAME,                            \
        .tp_basicsize = sizeof(Maker),                                                                   \
        .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,                \
        .tp_doc = DOC,                                                                                   \
        .tp_new = Maker_new,                                                                             \
        .tp_call = PyVectorcall_Call,                                                                    \
        .tp_vectorcall_offset = offsetof(Maker, vectorcall),                                             \
        .tp_traverse = (traverseproc)Maker_traverse,                                                     \
        .tp_clear = (inquiry)Maker_clear,                                                                \
        .tp_dealloc = (destructor)Maker_dealloc,                                                         \
    }

MAKER_TYPE(Constructor, "new(*values): an instance with each slot set from an argument or a default.");
MAKER_TYPE(Copier, "copy(base, *values): base's class and slots, some slots replaced by the values.");

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_slots",
                                    "Slot-level constructors for frozen slotted dataclasses.", -1,
                                    NULL, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__slots(void) {
    if (PyType_Ready(&ConstructorType) < 0 || PyType_Ready(&CopierType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    Py_INCREF(&ConstructorType);
    Py_INCREF(&CopierType);
    if (PyModule_AddObject(m, "Constructor", (PyObject *)&ConstructorType) < 0 ||
        PyModule_AddObject(m, "Copier", (PyObject *)&CopierType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
