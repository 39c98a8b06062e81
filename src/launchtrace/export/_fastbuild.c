/* The span builder's common record, compiled: a run of launch records to spans in one C loop.
 *
 * Why: with folding off every launch becomes a span, and SpanBuilder._on_record's Python (node look-up,
 * fold-key id, the topology digest of every enclosing span, the budget, the attributes, a random span id,
 * the SpanData) was the largest part of what the export worker may spend per launch (docs/export.md#speed).
 *
 * records(view, events, start) walks events[start:] and handles each ("record", rec) event that is the
 * common case exactly as SpanBuilder._on_record does, returning the index of the first event it leaves to
 * Python (or len(events)). `view` is the builder's SpanBuilder.compiled_view, a CompiledView (a tuple whose
 * members are listed, in order, by the V_ enum below and VIEW_FIELDS; the Python side checks the two agree
 * when it loads this module): its whole interface to the builder. Of the objects it is handed it reads only
 * these public attributes: a record's scope_id, template, error, repeat, probes, thread, start_ns, end_ns,
 * kernel, seq; a node's (_Node) trace, folder, records, first_start, launches, lines, last_end, parent,
 * span_id, and its flush_lines(); a trace's (_Trace) sampled, used, stream_until, id; a folder's enabled; the
 * span ids' (a _SpanIds) ready list, and its take() when it is empty.
 * The common case, every condition checked before anything is changed:
 *   - the record's node is an open scope (view.scopes / .aliases by scope id) or, with no scope, the
 *     thread's open step root (view.steps) that neither its count nor its time window closes;
 *   - the node's trace is sampled and its spans still stream one per record (trace.used < trace.stream_until:
 *     its budget, or with fold="auto" the switch point past which the trace folds);
 *   - the record is a copy of a template whose fold-key id the builder already knows (view.template_keys),
 *     no error, repeat 1, no probes; its topology line is cached with no foreign pointers (view.lines), its
 *     static attributes are cached (view.attrs); the node's folder is disabled; the kernel name fits the
 *     attribute length limit (view.limit).
 * Then, as the Python does: the step root's record count, every ancestor's launch count, topology line (hashed
 * LINES_PER_UPDATE at a time by flush_lines) and last end, the trace's budget, and the span (static attributes +
 * the sequence number, a span id from view.ids) appended to view.out. Anything else (a scope event, a new key,
 * folding on, a trace at its switch point or out of budget, any error while looking) goes to Python, which stays
 * the definition.
 * tests/test_spanbuilder.py runs through both and compares the spans.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "../_native.h"

static PyObject *s_scope_id, *s_template, *s_error, *s_repeat, *s_probes, *s_thread, *s_start_ns, *s_end_ns;
static PyObject *s_trace, *s_sampled, *s_used, *s_stream_until, *s_folder, *s_enabled, *s_records, *s_first_start;
static PyObject *s_launches, *s_lines, *s_last_end, *s_parent, *s_span_id, *s_id, *s_kernel, *s_seq;
static PyObject *s_flush_lines, *s_take, *s_ready, *s_record;
#define LINES_PER_UPDATE 16 /* spanbuilder._LINES_PER_UPDATE */
static PyObject *c_zero, *c_one, *c_empty_tuple, *c_empty_str;

/* SpanBuilder.compiled_view's members, in order (launchtrace.export.spanbuilder.CompiledView). */
enum {
    V_SCOPES,
    V_ALIASES,
    V_STEPS,
    V_TEMPLATE_KEYS,
    V_LINES,
    V_ATTRS,
    V_OUT,
    V_IDS,
    V_RESOURCE,
    V_STEP_MAX,
    V_STEP_WINDOW_NS,
    V_LIMIT,
    V_MAKE_SPAN,
    V_SEQ_KEY,
    V_SCOPE_NAME,
    V_VERSION,
    N_VIEW
};
static const char *const VIEW_FIELDS[N_VIEW] = {
    "scopes",   "aliases",  "steps",          "template_keys", "lines",     "attrs",    "out",      "ids",
    "resource", "step_max", "step_window_ns", "limit",         "make_span", "seq_key", "scope_name", "version",
};

typedef struct {
    PyObject *scopes, *aliases, *steps, *template_keys, *lines, *attrs, *out, *ids, *resource;
    PyObject *make_span, *seq_key, *scope_name, *version;
    PyObject *step_max, *step_window_ns;
    Py_ssize_t limit;
    PyObject *hit[4]; /* the last template, its key, line and static attributes: no table changes during a call */
    PyObject *ok_node; /* the last node found sampled and not folding */
} State;

/* New reference to obj.name, or NULL (exception set). */
#define GET(obj, name) PyObject_GetAttr((obj), (name))

/* Slots read through their offsets: the records, nodes and traces are plain slotted classes, and a slot read is a
 * pointer load where PyObject_GetAttr is a type look-up and a descriptor call (24 reads per record were 3,800
 * instructions, bench_instructions). Exactly what the attribute look-up gives: used only for a class with the
 * generic getattr/setattr whose `name` is a plain object slot (lt_slot_offset), else the look-up itself. One
 * class remembered per kind (the builder hands one class of each). */
typedef struct {
    PyTypeObject *type; /* strong; NULL: nothing remembered */
    int readable, writable;
    Py_ssize_t off[16];
} Layout;

enum { R_ERROR, R_REPEAT, R_PROBES, R_TEMPLATE, R_KERNEL, R_SCOPE_ID, R_START_NS, R_THREAD, R_END_NS, R_SEQ, N_R };
enum { N_TRACE, N_FOLDER, N_RECORDS, N_FIRST_START, N_LAUNCHES, N_LINES, N_LAST_END, N_PARENT, N_SPAN_ID, N_N };
enum { T_SAMPLED, T_USED, T_STREAM_UNTIL, T_ID, N_T };
enum { I_READY, N_I };
static PyObject **rec_names[N_R] = {&s_error,    &s_repeat,   &s_probes, &s_template, &s_kernel,
                                    &s_scope_id, &s_start_ns, &s_thread, &s_end_ns,   &s_seq};
static PyObject **node_names[N_N] = {&s_trace,  &s_folder,   &s_records, &s_first_start, &s_launches,
                                     &s_lines, &s_last_end, &s_parent,  &s_span_id};
static PyObject **trace_names[N_T] = {&s_sampled, &s_used, &s_stream_until, &s_id};
static PyObject **ids_names[N_I] = {&s_ready};
static Layout rec_layout, node_layout, trace_layout, ids_layout;

/* `obj`'s layout (its class's slot offsets for `names`), made and remembered when its class is new. */
static Layout *layout_new(Layout *l, PyObject *obj, PyObject **names[], int n) {
    PyTypeObject *t = Py_TYPE(obj);
    Py_INCREF(t);
    Py_XSETREF(l->type, t);
    l->readable = t->tp_getattro == PyObject_GenericGetAttr;
    l->writable = l->readable && t->tp_setattro == PyObject_GenericSetAttr;
    for (int i = 0; i < n; i++) {
        l->off[i] = lt_slot_offset(t, *names[i]);
        if (l->off[i] < 0) l->readable = l->writable = 0;
    }
    return l;
}

static inline Layout *layout_of(Layout *l, PyObject *obj, PyObject **names[], int n) {
    return l->type == Py_TYPE(obj) ? l : layout_new(l, obj, names, n);
}

/* New reference to field `i` (named names[i]) of `obj`, or NULL with an exception set. */
static inline PyObject *field(Layout *l, PyObject *obj, int i, PyObject *name) {
    if (l->type == Py_TYPE(obj) && l->readable) {
        PyObject *v = *(PyObject **)((char *)obj + l->off[i]);
        if (v == NULL) {
            PyErr_SetObject(PyExc_AttributeError, name);
            return NULL;
        }
        return Py_NewRef(v);
    }
    return GET(obj, name);
}

/* obj.name = value through the slot (as the member descriptor stores it); 0 or -1. */
static inline int set_field(Layout *l, PyObject *obj, int i, PyObject *name, PyObject *value) {
    if (l->type == Py_TYPE(obj) && l->writable) {
        PyObject **slot = (PyObject **)((char *)obj + l->off[i]);
        Py_INCREF(value);
        Py_XSETREF(*slot, value);
        return 0;
    }
    return PyObject_SetAttr(obj, name, value);
}

#define REC(i, name) field(layout_of(&rec_layout, rec, rec_names, N_R), rec, (i), (name))
#define NODE(obj, i, name) field(layout_of(&node_layout, (obj), node_names, N_N), (obj), (i), (name))
#define TRACE(i, name) field(layout_of(&trace_layout, trace, trace_names, N_T), trace, (i), (name))

/* The next span id of `ids` (spanbuilder._SpanIds) as its take() gives it: the last of its ready list, taken off
 * it; a new draw is take()'s own. */
static PyObject *take_id(PyObject *ids) {
    PyObject *ready = field(layout_of(&ids_layout, ids, ids_names, N_I), ids, I_READY, s_ready), *id = NULL;
    Py_ssize_t n = ready != NULL && PyList_CheckExact(ready) ? PyList_GET_SIZE(ready) : 0;
    if (n > 0) {
        id = Py_NewRef(PyList_GET_ITEM(ready, n - 1));
        if (PyList_SetSlice(ready, n - 1, n, NULL) < 0) Py_CLEAR(id);
    } else if (ready != NULL) {
        id = PyObject_CallMethodNoArgs(ids, s_take);
    }
    Py_XDECREF(ready);
    return id;
}

/* 1 with *x = `a` when `a` is an int that fits a long long (compared and added in C, not through int objects:
 * 400 instructions per record), else 0 and no error set. */
static int as_ll(PyObject *a, long long *x) {
    int overflow;
    if (!PyLong_CheckExact(a) || ((*x = PyLong_AsLongLongAndOverflow(a, &overflow)) == -1 && PyErr_Occurred()))
        return (PyErr_Clear(), 0);
    return !overflow;
}

/* 1 when `a < b` for two Python ints, 0 when not, -1 on error. */
static int less(PyObject *a, PyObject *b) {
    long long x, y;
    return as_ll(a, &x) && as_ll(b, &y) ? x < y : PyObject_RichCompareBool(a, b, Py_LT);
}

/* Increment integer field `i` (named `name`) of `obj` by one; 0 or -1. */
static int add_one(Layout *l, PyObject *obj, int i, PyObject *name) {
    PyObject *v = field(l, obj, i, name);
    if (v == NULL) return -1;
    long long x;
    PyObject *w = as_ll(v, &x) && x < LLONG_MAX ? PyLong_FromLongLong(x + 1) : PyNumber_Add(v, c_one);
    Py_DECREF(v);
    if (w == NULL) return -1;
    int rc = set_field(l, obj, i, name, w);
    Py_DECREF(w);
    return rc;
}

/* 1 handled; 0 left to Python, nothing changed (an error while looking included); -1 an error while changing
 * the builder's state (the record half accounted, as a Python exception at that point would leave it). */
static int one(State *st, PyObject *event) {
    int rc = 0, changing = 0;
    PyObject *rec, *node = NULL, *step = NULL, *trace = NULL, *v = NULL, *template = NULL, *key = NULL;
    PyObject *line = NULL, *static_attrs = NULL, *folder = NULL, *kernel = NULL, *used = NULL, *until = NULL;
    PyObject *start = NULL, *end = NULL, *seq = NULL, *attrs = NULL, *span_id = NULL, *span = NULL;
    PyObject *trace_id = NULL, *parent_id = NULL;
    if (!PyTuple_CheckExact(event) || PyTuple_GET_SIZE(event) != 2) return 0;
    PyObject *kind = PyTuple_GET_ITEM(event, 0);
    if (kind != s_record) {
        int same = PyUnicode_Check(kind) ? PyUnicode_Compare(kind, s_record) == 0 : 0;
        if (!same) return 0;
    }
    rec = PyTuple_GET_ITEM(event, 1);

    /* the record: a template copy, no error, repeat 1, no probes */
    if ((v = REC(R_ERROR, s_error)) == NULL) goto error;
    if (v != Py_None) goto leave;
    Py_CLEAR(v);
    if ((v = REC(R_REPEAT, s_repeat)) == NULL) goto error;
    if (!PyLong_CheckExact(v) || PyLong_AsLong(v) != 1) goto leave;
    Py_CLEAR(v);
    if ((v = REC(R_PROBES, s_probes)) == NULL) goto error;
    if (!PyTuple_CheckExact(v) || PyTuple_GET_SIZE(v) != 0) goto leave;
    Py_CLEAR(v);
    if ((template = REC(R_TEMPLATE, s_template)) == NULL) goto error;
    if (template == Py_None) goto leave;
    if (template == st->hit[0]) { /* a copy of the last record's template (three dict look-ups, 550 instructions) */
        key = Py_NewRef(st->hit[1]);
        line = Py_NewRef(st->hit[2]);
        static_attrs = Py_NewRef(st->hit[3]);
    } else {
        PyObject *tid = PyLong_FromVoidPtr(template);
        if (tid == NULL) goto error;
        PyObject *hit = PyDict_GetItemWithError(st->template_keys, tid); /* borrowed */
        Py_DECREF(tid);
        if (hit == NULL) {
            if (PyErr_Occurred()) goto error;
            goto leave;
        }
        if (!PyTuple_CheckExact(hit) || PyTuple_GET_SIZE(hit) != 2 || PyTuple_GET_ITEM(hit, 0) != template) goto leave;
        key = Py_NewRef(PyTuple_GET_ITEM(hit, 1));
        PyObject *cached = PyDict_GetItemWithError(st->lines, key); /* (line, foreign pointers) */
        if (cached == NULL) {
            if (PyErr_Occurred()) goto error;
            goto leave;
        }
        if (!PyTuple_CheckExact(cached) || PyTuple_GET_SIZE(cached) != 2 ||
            !PyTuple_CheckExact(PyTuple_GET_ITEM(cached, 1)) || PyTuple_GET_SIZE(PyTuple_GET_ITEM(cached, 1)) != 0)
            goto leave;
        line = Py_NewRef(PyTuple_GET_ITEM(cached, 0));
        static_attrs = PyDict_GetItemWithError(st->attrs, key);
        if (static_attrs == NULL) {
            if (PyErr_Occurred()) goto error;
            goto leave;
        }
        if (!PyTuple_CheckExact(static_attrs)) {
            static_attrs = NULL;
            goto leave;
        }
        Py_INCREF(static_attrs);
        PyObject *found[4] = {template, key, line, static_attrs};
        for (int k = 0; k < 4; k++) Py_XSETREF(st->hit[k], Py_NewRef(found[k]));
    }
    if ((kernel = REC(R_KERNEL, s_kernel)) == NULL) goto error;
    if (!PyUnicode_Check(kernel) || PyUnicode_GET_LENGTH(kernel) > st->limit) goto leave;

    /* its node: an open scope, or the thread's open step root */
    if ((v = REC(R_SCOPE_ID, s_scope_id)) == NULL) goto error;
    if ((start = REC(R_START_NS, s_start_ns)) == NULL) goto error;
    if (v != Py_None) {
        node = PyDict_GetItemWithError(st->scopes, v);
        if (node == NULL && !PyErr_Occurred()) node = PyDict_GetItemWithError(st->aliases, v);
        if (node == NULL || node == Py_None) {
            node = NULL;
            if (PyErr_Occurred()) goto error;
            goto leave;
        }
        Py_INCREF(node);
    } else {
        PyObject *thread = REC(R_THREAD, s_thread);
        if (thread == NULL) goto error;
        step = PyDict_GetItemWithError(st->steps, thread);
        Py_DECREF(thread);
        if (step == NULL) {
            if (PyErr_Occurred()) goto error;
            goto leave;
        }
        Py_INCREF(step);
        PyObject *records = NODE(step, N_RECORDS, s_records);
        if (records == NULL) goto error;
        int below = less(records, st->step_max);
        Py_DECREF(records);
        if (below < 0) goto error;
        if (!below) goto leave;
        PyObject *first = NODE(step, N_FIRST_START, s_first_start), *age = NULL;
        long long s0, f0, w0, d;
        int young = -1;
        if (first != NULL && as_ll(start, &s0) && as_ll(first, &f0) && as_ll(st->step_window_ns, &w0) &&
            !__builtin_sub_overflow(s0, f0, &d))
            young = d < w0;
        else if (first != NULL && (age = PyNumber_Subtract(start, first)) != NULL)
            young = less(age, st->step_window_ns);
        Py_XDECREF(first);
        Py_XDECREF(age);
        if (young < 0) goto error;
        if (!young) goto leave;
        node = step;
        Py_INCREF(node);
    }
    Py_CLEAR(v);
    if ((trace = NODE(node, N_TRACE, s_trace)) == NULL) goto error;
    if (node != st->ok_node) { /* its trace sampled, its folder off: neither changes during a call */
        if ((v = TRACE(T_SAMPLED, s_sampled)) == NULL) goto error;
        if (v != Py_True) goto leave;
        Py_CLEAR(v);
        if ((folder = NODE(node, N_FOLDER, s_folder)) == NULL) goto error;
        if ((v = GET(folder, s_enabled)) == NULL) goto error;
        if (v != Py_False) goto leave;
        Py_CLEAR(v);
        Py_XSETREF(st->ok_node, Py_NewRef(node));
    }
    if ((used = TRACE(T_USED, s_used)) == NULL || (until = TRACE(T_STREAM_UNTIL, s_stream_until)) == NULL) goto error;
    {
        int room = less(used, until);
        if (room < 0) goto error;
        if (!room) goto leave;
    }
    if ((end = REC(R_END_NS, s_end_ns)) == NULL || (seq = REC(R_SEQ, s_seq)) == NULL) goto error;
    if ((trace_id = TRACE(T_ID, s_id)) == NULL || (parent_id = NODE(node, N_SPAN_ID, s_span_id)) == NULL) goto error;

    /* everything checked: build what can fail before changing anything */
    {
        Py_ssize_t n = PyTuple_GET_SIZE(static_attrs);
        PyObject *pair = PyTuple_Pack(2, st->seq_key, seq);
        if (pair == NULL) goto error;
        attrs = PyTuple_New(n + 1);
        if (attrs == NULL) {
            Py_DECREF(pair);
            goto error;
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *item = PyTuple_GET_ITEM(static_attrs, i);
            Py_INCREF(item);
            PyTuple_SET_ITEM(attrs, i, item);
        }
        PyTuple_SET_ITEM(attrs, n, pair);
        /* out of the cycle collector now when it can be (lt_acyclic's rule; the static part is one untracked
         * tuple after its first use), so make_span's own check is one look instead of one per attribute */
        if (!PyType_IS_GC(Py_TYPE(seq)) && lt_acyclic(static_attrs, LT_ACYCLIC_DEPTH)) {
            PyObject_GC_UnTrack(pair);
            PyObject_GC_UnTrack(attrs);
        }
        if ((span_id = take_id(st->ids)) == NULL) goto error;
        PyObject *args[14] = {trace_id,  span_id,     parent_id,     kernel,        start,
                              end,       attrs,       c_zero,        c_empty_str,   c_empty_tuple,
                              c_empty_tuple, st->resource, st->scope_name, st->version};
        span = PyObject_Vectorcall(st->make_span, args, 14, NULL);
        if (span == NULL) goto error;
    }

    /* the changes, in _on_record's order; an error from here on is one Python would have met as well */
    changing = 1;
    if (step != NULL && add_one(&node_layout, step, N_RECORDS, s_records) < 0) goto error;
    for (PyObject *n = node; n != Py_None;) {
        layout_of(&node_layout, n, node_names, N_N);
        if (add_one(&node_layout, n, N_LAUNCHES, s_launches) < 0) goto error;
        PyObject *lines = field(&node_layout, n, N_LINES, s_lines), *r = NULL;
        if (lines != NULL && PyList_Append(lines, line) == 0)
            r = PyList_GET_SIZE(lines) < LINES_PER_UPDATE ? Py_NewRef(Py_None)
                                                          : PyObject_CallMethodNoArgs(n, s_flush_lines);
        Py_XDECREF(lines);
        if (r == NULL) goto error;
        Py_DECREF(r);
        PyObject *last = field(&node_layout, n, N_LAST_END, s_last_end);
        if (last == NULL) goto error;
        int later = less(last, end);
        Py_DECREF(last);
        if (later < 0 || (later && set_field(&node_layout, n, N_LAST_END, s_last_end, end) < 0)) goto error;
        PyObject *parent = field(&node_layout, n, N_PARENT, s_parent);
        if (parent == NULL) goto error;
        Py_DECREF(parent); /* borrowed from here: n's parent outlives the loop, n holds it */
        n = parent;
    }
    if (add_one(&trace_layout, trace, T_USED, s_used) < 0) goto error;
    if (PyList_Append(st->out, span) < 0) goto error;
    rc = 1;
    goto done;
leave:
    rc = 0;
    goto done;
error:
    if (changing) {
        rc = -1;
    } else { /* nothing changed yet: Python takes this record, and meets (and reports) the trouble itself */
        PyErr_Clear();
        rc = 0;
    }
done:;
    PyObject *refs[] = {v,     node, step, trace, template, key,  line, static_attrs, folder,   kernel,
                        used,  until, start, end, seq,     attrs, span_id, span,      trace_id, parent_id};
    for (size_t k = 0; k < sizeof(refs) / sizeof(refs[0]); k++) Py_XDECREF(refs[k]);
    return rc;
}

static void state_clear(State *st) {
    PyObject **all[] = {&st->scopes,    &st->aliases,  &st->steps,    &st->template_keys, &st->lines,
                        &st->attrs,     &st->out,      &st->ids,      &st->resource,      &st->make_span,
                        &st->seq_key,   &st->scope_name, &st->version, &st->step_max,     &st->step_window_ns};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) Py_CLEAR(*all[i]);
    for (int k = 0; k < 4; k++) Py_CLEAR(st->hit[k]);
    Py_CLEAR(st->ok_node);
}

/* The view's members (new references) into `st`; 0, or -1 with TypeError when `view` is not a CompiledView. */
static int state_load(State *st, PyObject *view) {
    memset(st, 0, sizeof(*st));
    if (!PyTuple_Check(view) || PyTuple_GET_SIZE(view) != N_VIEW) {
        PyErr_SetString(PyExc_TypeError, "records(): not a SpanBuilder.compiled_view");
        return -1;
    }
    PyObject **slots[N_VIEW] = {
        [V_SCOPES] = &st->scopes, [V_ALIASES] = &st->aliases, [V_STEPS] = &st->steps,
        [V_TEMPLATE_KEYS] = &st->template_keys, [V_LINES] = &st->lines, [V_ATTRS] = &st->attrs, [V_OUT] = &st->out,
        [V_IDS] = &st->ids, [V_RESOURCE] = &st->resource, [V_STEP_MAX] = &st->step_max,
        [V_STEP_WINDOW_NS] = &st->step_window_ns, [V_LIMIT] = NULL, /* read as a C integer below */
        [V_MAKE_SPAN] = &st->make_span, [V_SEQ_KEY] = &st->seq_key, [V_SCOPE_NAME] = &st->scope_name,
        [V_VERSION] = &st->version};
    for (int i = 0; i < N_VIEW; i++) {
        if (slots[i] == NULL) continue;
        *slots[i] = PyTuple_GET_ITEM(view, i);
        Py_INCREF(*slots[i]);
    }
    if (!PyDict_CheckExact(st->scopes) || !PyDict_CheckExact(st->aliases) || !PyDict_CheckExact(st->steps) ||
        !PyDict_CheckExact(st->template_keys) || !PyDict_CheckExact(st->lines) || !PyDict_CheckExact(st->attrs) ||
        !PyList_CheckExact(st->out)) {
        PyErr_SetString(PyExc_TypeError, "records(): not a SpanBuilder.compiled_view");
        goto fail;
    }
    st->limit = PyLong_AsSsize_t(PyTuple_GET_ITEM(view, V_LIMIT));
    if (st->limit == -1 && PyErr_Occurred()) goto fail;
    return 0;
fail:
    state_clear(st);
    return -1;
}

static PyObject *records(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3 || !PyList_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "records(view: SpanBuilder.compiled_view, events: list, start: int)");
        return NULL;
    }
    Py_ssize_t i = PyLong_AsSsize_t(args[2]);
    if (i == -1 && PyErr_Occurred()) return NULL;
    State st;
    if (state_load(&st, args[0]) < 0) return NULL;
    PyObject *events = args[1];
    for (; i < PyList_GET_SIZE(events); i++) {
        PyObject *e = PyList_GET_ITEM(events, i);
        Py_INCREF(e);
        int r = one(&st, e);
        Py_DECREF(e);
        if (r < 0) {
            state_clear(&st);
            return NULL;
        }
        if (r == 0) break;
    }
    state_clear(&st);
    return PyLong_FromSsize_t(i);
}

static PyMethodDef methods[] = {
    {"records", (PyCFunction)(void (*)(void))records, METH_FASTCALL,
     "Build the spans of the run of common records from events[start]; the index of the first other event."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fastbuild", "The span builder's common record, compiled.",
                                    -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__fastbuild(void) {
    INTERN(s_scope_id, "scope_id");
    INTERN(s_template, "template");
    INTERN(s_error, "error");
    INTERN(s_repeat, "repeat");
    INTERN(s_probes, "probes");
    INTERN(s_thread, "thread");
    INTERN(s_start_ns, "start_ns");
    INTERN(s_end_ns, "end_ns");
    INTERN(s_trace, "trace");
    INTERN(s_sampled, "sampled");
    INTERN(s_used, "used");
    INTERN(s_stream_until, "stream_until");
    INTERN(s_folder, "folder");
    INTERN(s_enabled, "enabled");
    INTERN(s_records, "records");
    INTERN(s_first_start, "first_start");
    INTERN(s_launches, "launches");
    INTERN(s_lines, "lines");
    INTERN(s_last_end, "last_end");
    INTERN(s_parent, "parent");
    INTERN(s_span_id, "span_id");
    INTERN(s_id, "id");
    INTERN(s_kernel, "kernel");
    INTERN(s_seq, "seq");
    INTERN(s_flush_lines, "flush_lines");
    INTERN(s_take, "take");
    INTERN(s_ready, "ready");
    INTERN(s_record, "record");
    if ((c_zero = PyLong_FromLong(0)) == NULL || (c_one = PyLong_FromLong(1)) == NULL ||
        (c_empty_tuple = PyTuple_New(0)) == NULL ||
        (c_empty_str = PyUnicode_FromString("")) == NULL)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    PyObject *fields = m ? PyTuple_New(N_VIEW) : NULL; /* the view it reads: spanbuilder.py checks it */
    for (Py_ssize_t i = 0; fields != NULL && i < N_VIEW; i++) {
        PyObject *name = PyUnicode_InternFromString(VIEW_FIELDS[i]);
        if (name == NULL) Py_CLEAR(fields);
        else PyTuple_SET_ITEM(fields, i, name);
    }
    if (lt_module_add(m, "VIEW_FIELDS", fields) < 0) return NULL;
    return m;
}
