/* Leaving objects that cannot be part of a reference cycle out of the cycle collector, as CPython does.
 *
 * CPython untracks a tuple whose items are all untracked when its collector next looks at it; the objects the
 * capture and export paths make per launch (events, records, spans, their attribute tuples) are such objects,
 * but they stay alive just long enough (queued for the export worker, or in a batch) to be promoted to the old
 * generation, and then push the collector into full collections that walk the whole program's heap. Untracking
 * them when they are made is the same rule applied earlier. Shared by launchtrace's C extensions (header only).
 */
#ifndef LAUNCHTRACE_ACYCLIC_H
#define LAUNCHTRACE_ACYCLIC_H
#include <Python.h>

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

#endif
