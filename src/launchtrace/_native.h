/* What launchtrace's C extensions share (header only): reading the slots of plain slotted classes, leaving
 * objects that cannot be part of a reference cycle out of the cycle collector, as CPython does, and growing an
 * output buffer.
 *
 * Slots. The records, spans and state objects the extensions read per launch are plain slotted classes; a slot
 * read through its offset is a pointer load instead of the generic attribute look-up.
 * lt_member_offset / lt_slot_offset give an offset only for what a plain object slot guarantees (a member
 * descriptor of type T_OBJECT_EX, writable, of the class or a base, inside the instance), else -1: the caller
 * then uses the usual attribute look-up, or refuses the class.
 *
 * Cycles. CPython untracks a tuple whose items are all untracked when its collector next looks at it; the
 * objects the capture and export paths make per launch (events, records, spans, their attribute tuples) are
 * such objects, but they stay alive just long enough (queued for the export worker, or in a batch) to be
 * promoted to the old generation, and then push the collector into full collections that walk the whole
 * program's heap. lt_acyclic untracks them when they are made: the same rule, applied earlier.
 *
 * Module init: interning names and adding objects to the module, with the same error handling everywhere.
 */
#ifndef LAUNCHTRACE_NATIVE_H
#define LAUNCHTRACE_NATIVE_H
#include <Python.h>
#include <structmember.h>

/* The offset of member descriptor `d` when it is a plain object slot of `type` (or of a base), else -1. */
static inline Py_ssize_t lt_member_offset(PyTypeObject *type, PyObject *d) {
    if (!Py_IS_TYPE(d, &PyMemberDescr_Type) || !PyType_IsSubtype(type, PyDescr_TYPE(d))) return -1;
    PyMemberDef *m = ((PyMemberDescrObject *)d)->d_member;
    if (m->type != T_OBJECT_EX || (m->flags & READONLY)) return -1;
    if (m->offset < (Py_ssize_t)sizeof(PyObject) || m->offset + (Py_ssize_t)sizeof(PyObject *) > type->tp_basicsize)
        return -1;
    return m->offset;
}

/* The offset of `type`'s plain object slot `name` (what type.name resolves to), else -1; never an error. */
static inline Py_ssize_t lt_slot_offset(PyTypeObject *type, PyObject *name) {
    PyObject *d = PyObject_GetAttr((PyObject *)type, name);
    Py_ssize_t off = d ? lt_member_offset(type, d) : -1;
    Py_XDECREF(d);
    PyErr_Clear();
    return off;
}

/* lt_slot_offset by a C string name. */
static inline Py_ssize_t lt_slot_offset_s(PyTypeObject *type, const char *name) {
    PyObject *d = PyObject_GetAttrString((PyObject *)type, name);
    Py_ssize_t off = d ? lt_member_offset(type, d) : -1;
    Py_XDECREF(d);
    PyErr_Clear();
    return off;
}

#define LT_ACYCLIC_DEPTH 4 /* e.g. attributes -> (key, value) -> array value -> items */

/* Whether `obj` is out of the cycle collector or can be: not tracked, or an exact tuple whose items all are
 * (checked `depth` levels down); such a tuple is untracked on the way. Tuples are immutable, so an untracked
 * one stays unable to reach a tracked object. */
static inline int lt_acyclic(PyObject *obj, int depth) {
    if (!PyType_IS_GC(Py_TYPE(obj)) || !PyObject_GC_IsTracked(obj)) return 1; /* ints, strs...: no call */
    if (!PyTuple_CheckExact(obj) || depth == 0) return 0;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(obj); i++)
        if (!lt_acyclic(PyTuple_GET_ITEM(obj, i), depth - 1)) return 0;
    PyObject_GC_UnTrack(obj);
    return 1;
}

/* Resizes the PyMem buffer *p to `size` bytes (the grow path of the encoders' output buffers): 0, or -1 with
 * MemoryError set and *p left as it was (still owned by the caller). */
static inline int lt_resize_buffer(char **p, Py_ssize_t size) {
    char *q = PyMem_Realloc(*p, (size_t)size);
    if (q == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    *p = q;
    return 0;
}

/* Module init. INTERN interns `text` into the static `var`, returning NULL from PyInit_ when it cannot;
 * lt_module_add adds `obj` (a new reference, stolen even on failure; NULL when making it failed) to the module
 * `m` as `name`: 0, or -1 with `m` released, and PyInit_ then returns NULL; lt_add_type adds a static type. */
#define INTERN(var, text)                                                  \
    do {                                                                   \
        if ((var = PyUnicode_InternFromString(text)) == NULL) return NULL; \
    } while (0)

static inline int lt_module_add(PyObject *m, const char *name, PyObject *obj) {
    if (obj == NULL || PyModule_AddObject(m, name, obj) < 0) {
        Py_XDECREF(obj);
        Py_XDECREF(m);
        return -1;
    }
    return 0;
}

static inline int lt_add_type(PyObject *m, const char *name, PyTypeObject *type) {
    Py_INCREF(type);
    return lt_module_add(m, name, (PyObject *)type);
}

/* Compiled wrappers standing in for a Python function (wp.launch's, tinygrad's pm_exec.rewrite's): the
 * tp_descr_get that binds like a function when the wrapper is stored on a class, and the `__dict__` getset
 * (a function has one: functools.wraps and users set attributes on it). */
static inline PyObject *lt_bind_like_function(PyObject *self, PyObject *obj, PyObject *Py_UNUSED(type)) {
    return obj == NULL || obj == Py_None ? Py_NewRef(self) : PyMethod_New(self, obj);
}

#define LT_DICT_GETSET \
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL}, {NULL, NULL, NULL, NULL, NULL}

#endif
