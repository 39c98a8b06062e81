/* The raw capture event's record layout as the compiled capture parts see it: the positions of its fields in
 * the flat tuple (capture/_fastlaunch.c builds it, capture/_fastmat.c reads it). The same table, by name, is
 * launchtrace/rawevent.py's RECORD_FIELDS; each module publishes this one as RECORD_FIELDS and the Python side
 * compares the two when it loads the module (rawevent.check_compiled), so a field moved in one place and not
 * the other fails there, loudly, instead of mislabelling every record.
 *
 * A nested record has the first N_RECORD fields; a flat launch (wp.launch's common call, EV_PAYLOAD the FLAT
 * marker) has all N_FLAT_HEAD, followed by its argument values from EV_VALUES on. */
#ifndef LAUNCHTRACE_RAWEVENT_H
#define LAUNCHTRACE_RAWEVENT_H
#include <Python.h>

enum {
    EV_KIND,
    EV_SEQ,
    EV_TID,
    EV_ENTRY,
    EV_PAYLOAD,
    EV_CODE,
    EV_LINE,
    EV_MODULE,
    EV_CALLER,
    EV_T0,
    EV_T1,
    EV_SCOPE,
    EV_GRAPH,
    EV_ERROR,
    N_RECORD, /* the fields of a nested record; a flat launch's follow */
    EV_KERNEL = N_RECORD,
    EV_DIM,
    EV_N_INPUTS,
    EV_DEVICE,
    N_FLAT_HEAD,
    EV_VALUES = N_FLAT_HEAD
};
static const char *const RECORD_FIELDS[N_FLAT_HEAD] = {
    "kind", "seq",   "tid",   "entry", "payload", "code",   "line",     "module", "caller",
    "t0",   "t1",    "scope", "graph", "error",   "kernel", "dim",      "n_inputs", "device",
};

/* RECORD_FIELDS as a tuple of str, for the module's attribute of that name (NULL with an exception set). */
static inline PyObject *lt_record_fields(void) {
    PyObject *t = PyTuple_New(N_FLAT_HEAD);
    for (Py_ssize_t i = 0; t != NULL && i < N_FLAT_HEAD; i++) {
        PyObject *s = PyUnicode_InternFromString(RECORD_FIELDS[i]);
        if (s == NULL) Py_CLEAR(t);
        else PyTuple_SET_ITEM(t, i, s);
    }
    return t;
}

/* A queued event that is not a tuple: the same items in plain memory, outside the cycle collector
 * (capture/_fastlaunch.c's Event type, the only type of this layout; Subscription.drain_raw turns each into its
 * tuple). */
typedef struct {
    PyObject_VAR_HEAD
    PyObject *items[1];
} LtEvent;

#endif
