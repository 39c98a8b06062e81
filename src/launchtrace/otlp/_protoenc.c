/* SpanData -> the bytes of an OTLP ExportTraceServiceRequest, compiled (launchtrace.otlp.encode_proto picks it).
 *
 * Why: the Python encoder's cost per launch span caps OTLP/gRPC export well below what the channel and the
 * receiver carry, before the channel does any work (docs/export.md, "Encoders"). This writes the same protobuf bytes,
 * byte for byte, from the same SpanData objects: fields read by slot offset (member descriptors looked up once),
 * strings through the UTF-8 that CPython keeps inside each str, numbers written straight into one growing buffer.
 *
 * Without a compiler the generated protobuf classes do this work (encode_proto.request_message, whose docstring
 * gives the conversion rules); tests/test_protoenc_native.py checks that these bytes parse to the message the
 * library builds for random spans of every value type.
 *
 * Caches, each exact and bounded:
 * - attribute blocks, in a table of 1,024 slots indexed by the identity of the block's first (key, value)
 *   pair: the last attributes tuple seen there is kept alive with its encoding and the end of each pair's
 *   field. The very same tuple is copied whole; a tuple that begins with the same pair object (the span
 *   builder reuses one tuple of pairs per call site and appends the few that change) copies the field of
 *   every pair that is the same object at the same position and encodes only the others. Only pairs whose
 *   encoding cannot change are reused: a str key and a value that is str, int, float, bool, bytes, None or a
 *   tuple of those; lists, dicts and other objects are encoded every time.
 * - the encoded Resource and InstrumentationScope, by the same grouping keys as the Python encoder (cleared
 *   past 1,024 entries).
 * Names and (key, value) pairs are not cached by value: copying the str's own UTF-8 costs less than a look-up.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include <structmember.h>

#include "../_native.h"
#include "_otlpfields.h"
#include "_spandata.h"

/* a field's wire tag, from the field table (_otlpfields.h): TAG(SPAN_NAME) is Span.name's one-byte tag,
 * TAGS(SPAN_FLAGS) its bytes and their count (put_fixed's arguments) */
#define TAG(field) PB_TAG1(PB_##field##_TAG)
#define TAGS(field) PB_##field##_TAG, (int)PB_TAG_LEN(PB_##field##_TAG)

#define N_SLOTS 1024 /* attribute block table (a power of two) */
#define GROUP_CACHE_LIMIT 1024
#define IMMUTABLE_DEPTH 8 /* tuples nested deeper than this are treated as mutable (encoded every time) */

/* ---------------------------------------------------------------------------------------------- buffer */
typedef struct {
    char *p;
    Py_ssize_t len, cap;
} Buf;

static int buf_grow(Buf *b, Py_ssize_t extra) {
    if (extra > PY_SSIZE_T_MAX / 2 - b->len) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t need = b->len + extra;
    if (need <= b->cap) return 0;
    Py_ssize_t cap = b->cap ? b->cap : 1 << 16;
    while (cap < need) cap *= 2;
    if (lt_resize_buffer(&b->p, cap) < 0) return -1;
    b->cap = cap;
    return 0;
}

#define RESERVE(b, n) (((b)->cap - (b)->len >= (Py_ssize_t)(n)) ? 0 : buf_grow((b), (Py_ssize_t)(n)))

static inline int varint_size(uint64_t v) {
    int n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static inline char *put_varint(char *p, uint64_t v) {
    while (v >= 0x80) {
        *p++ = (char)((v & 0x7F) | 0x80);
        v >>= 7;
    }
    *p++ = (char)v;
    return p;
}

static int put_raw(Buf *b, const char *data, Py_ssize_t n) {
    if (RESERVE(b, n) < 0) return -1;
    memcpy(b->p + b->len, data, (size_t)n);
    b->len += n;
    return 0;
}

/* A tag byte and a varint value. */
static int put_tag_varint(Buf *b, unsigned char tag, uint64_t v) {
    if (RESERVE(b, 11) < 0) return -1;
    char *p = b->p + b->len;
    *p++ = (char)tag;
    b->len = put_varint(p, v) - b->p;
    return 0;
}

/* Tag bytes, then `width` bytes of v, little-endian (fixed64 and fixed32 fields). */
static int put_fixed(Buf *b, const char *tag, int taglen, uint64_t v, int width) {
    if (RESERVE(b, taglen + width) < 0) return -1;
    char *p = b->p + b->len;
    memcpy(p, tag, (size_t)taglen);
    p += taglen;
    for (int i = 0; i < width; i++) p[i] = (char)((v >> (8 * i)) & 0xFF);
    b->len += taglen + width;
    return 0;
}

/* A length-delimited field: tag, length, data. */
static int put_field(Buf *b, unsigned char tag, const char *data, Py_ssize_t n) {
    if (RESERVE(b, 11 + n) < 0) return -1;
    char *p = b->p + b->len;
    *p++ = (char)tag;
    p = put_varint(p, (uint64_t)n);
    memcpy(p, data, (size_t)n);
    b->len = (p - b->p) + n;
    return 0;
}

/* Opens a length-delimited field whose body is written next: the tag and `reserve` bytes for the length.
 * *mark is where the length goes; end_field() writes it (moving the body when its varint is another size). */
static int begin_field(Buf *b, unsigned char tag, int reserve, Py_ssize_t *mark) {
    if (RESERVE(b, 1 + reserve) < 0) return -1;
    b->p[b->len++] = (char)tag;
    *mark = b->len;
    b->len += reserve;
    return 0;
}

static int end_field(Buf *b, Py_ssize_t mark, int reserve) {
    Py_ssize_t body = mark + reserve;
    uint64_t n = (uint64_t)(b->len - body);
    int need = varint_size(n);
    if (need != reserve) {
        if (need > reserve && RESERVE(b, need - reserve) < 0) return -1;
        memmove(b->p + mark + need, b->p + body, (size_t)n);
        b->len += need - reserve;
    }
    put_varint(b->p + mark, n);
    return 0;
}

/* ------------------------------------------------------------------------------------------ conversions */
static PyObject *s_repr_marker; /* "\0repr": the grouping key of an unhashable tuple is ("\0repr", repr) */
static PyObject *s_name, *s_time_ns, *s_attributes, *s_dropped_attributes_count, *s_trace_id, *s_span_id,
    *s_trace_state, *s_flags;

/* A str as UTF-8, lone surrogates replaced by '?'. *tmp receives a bytes object to release when the
 * replacing path was needed (NULL otherwise). NULL with an exception on failure. */
static const char *utf8(PyObject *s, Py_ssize_t *n, PyObject **tmp) {
    *tmp = NULL;
    if (!PyUnicode_Check(s)) {
        PyErr_Format(PyExc_TypeError, "expected str, got %.100s", Py_TYPE(s)->tp_name);
        return NULL;
    }
    const char *u = PyUnicode_AsUTF8AndSize(s, n);
    if (u != NULL) return u;
    if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) return NULL;
    PyErr_Clear();
    *tmp = PyUnicode_AsEncodedString(s, "utf-8", "replace");
    if (*tmp == NULL) return NULL;
    *n = PyBytes_GET_SIZE(*tmp);
    return PyBytes_AS_STRING(*tmp);
}

static int put_str_field(Buf *b, unsigned char tag, PyObject *s) {
    Py_ssize_t n;
    PyObject *tmp;
    const char *u = utf8(s, &n, &tmp);
    if (u == NULL) return -1;
    int rc = put_field(b, tag, u, n);
    Py_XDECREF(tmp);
    return rc;
}

/* The field of str(o) (o itself when it is a str exactly). */
static int put_str_of(Buf *b, unsigned char tag, PyObject *o) {
    if (PyUnicode_CheckExact(o)) return put_str_field(b, tag, o);
    PyObject *s = PyObject_Str(o);
    if (s == NULL) return -1;
    int rc = put_str_field(b, tag, s);
    Py_DECREF(s);
    return rc;
}

/* Python truthiness, without a call for the common exact types. */
static inline int truthy(PyObject *o) {
    if (o == Py_None || o == Py_False) return 0;
    if (o == Py_True) return 1;
    if (PyUnicode_CheckExact(o)) return PyUnicode_GET_LENGTH(o) != 0;
    if (PyBytes_CheckExact(o)) return PyBytes_GET_SIZE(o) != 0;
    if (PyTuple_CheckExact(o)) return PyTuple_GET_SIZE(o) != 0;
    return PyObject_IsTrue(o);
}

/* A str field when `s` is true (a non-empty str), as the Python encoder's `if s: _field(tag, _utf8(s))`. */
static int put_str_if(Buf *b, unsigned char tag, PyObject *s) {
    int t = truthy(s);
    if (t <= 0) return t;
    return put_str_field(b, tag, s);
}

/* A bytes field from any bytes-like object; skipped when empty and skip_empty is set. */
static int put_bytes_field(Buf *b, unsigned char tag, PyObject *o, int skip_empty) {
    if (PyBytes_Check(o)) {
        if (skip_empty && PyBytes_GET_SIZE(o) == 0) return 0;
        return put_field(b, tag, PyBytes_AS_STRING(o), PyBytes_GET_SIZE(o));
    }
    Py_buffer view;
    if (PyObject_GetBuffer(o, &view, PyBUF_SIMPLE) < 0) return -1;
    int rc = (skip_empty && view.len == 0) ? 0 : put_field(b, tag, view.buf, view.len);
    PyBuffer_Release(&view);
    return rc;
}

/* A non-negative integer below 2**64 (ints and objects with __index__), as the unsigned fields need. */
static int as_u64(PyObject *o, uint64_t *out) {
    PyObject *i = PyNumber_Index(o);
    if (i == NULL) return -1;
    int overflow;
    long long small = PyLong_AsLongLongAndOverflow(i, &overflow);
    if (small == -1 && PyErr_Occurred()) {
        Py_DECREF(i);
        return -1;
    }
    if (overflow == 0) {
        Py_DECREF(i);
        if (small < 0) {
            PyErr_SetString(PyExc_ValueError, "negative value for an unsigned OTLP field");
            return -1;
        }
        *out = (uint64_t)small;
        return 0;
    }
    if (overflow < 0) {
        Py_DECREF(i);
        PyErr_SetString(PyExc_ValueError, "negative value for an unsigned OTLP field");
        return -1;
    }
    unsigned long long big = PyLong_AsUnsignedLongLong(i);
    Py_DECREF(i);
    if (big == (unsigned long long)-1 && PyErr_Occurred()) return -1;
    *out = (uint64_t)big;
    return 0;
}

/* `if value: tag + varint(value)` */
static int put_varint_if(Buf *b, unsigned char tag, PyObject *o) {
    int t = truthy(o);
    if (t <= 0) return t;
    uint64_t v;
    if (as_u64(o, &v) < 0) return -1;
    return put_tag_varint(b, tag, v);
}

/* `if value: tag + fixed(width)` */
static int put_fixed_if(Buf *b, const char *tag, int taglen, PyObject *o, int width) {
    int t = truthy(o);
    if (t <= 0) return t;
    uint64_t v;
    if (as_u64(o, &v) < 0) return -1;
    if (width == 4 && v > 0xFFFFFFFFu) {
        PyErr_SetString(PyExc_OverflowError, "value does not fit a fixed32 OTLP field");
        return -1;
    }
    return put_fixed(b, tag, taglen, v, width);
}

/* ------------------------------------------------------------------------------------- attribute values */
static int key_value_body(Buf *b, PyObject *key, PyObject *value);

/* The body of an AnyValue for `v` (rules in encode_proto's docstring, in the same order of checks). */
static int any_value(Buf *b, PyObject *v) {
    if (PyUnicode_CheckExact(v)) return put_str_field(b, TAG(ANY_VALUE_STRING_VALUE), v);
    if (PyBool_Check(v)) {
        if (RESERVE(b, 2) < 0) return -1;
        b->p[b->len++] = TAG(ANY_VALUE_BOOL_VALUE);
        b->p[b->len++] = v == Py_True ? 1 : 0;
        return 0;
    }
    if (PyLong_CheckExact(v)) {
        int overflow;
        long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (x == -1 && PyErr_Occurred()) return -1;
        if (overflow) return put_str_of(b, TAG(ANY_VALUE_STRING_VALUE), v); /* outside int64: its decimal string */
        return put_tag_varint(b, TAG(ANY_VALUE_INT_VALUE), (uint64_t)x);
    }
    if (PyFloat_CheckExact(v)) {
        if (RESERVE(b, 9) < 0) return -1;
        b->p[b->len] = TAG(ANY_VALUE_DOUBLE_VALUE);
        if (PyFloat_Pack8(PyFloat_AS_DOUBLE(v), b->p + b->len + 1, 1) < 0) return -1;
        b->len += 9;
        return 0;
    }
    if (PyBytes_CheckExact(v))
        return put_field(b, TAG(ANY_VALUE_BYTES_VALUE), PyBytes_AS_STRING(v), PyBytes_GET_SIZE(v));
    int rc = -1;
    Py_ssize_t outer, inner;
    if (Py_EnterRecursiveCall(" while encoding an OTLP attribute value")) return -1;
    if (PyTuple_CheckExact(v) || PyList_CheckExact(v)) {
        if (begin_field(b, TAG(ANY_VALUE_ARRAY_VALUE), 1, &outer) < 0) goto done;
        /* a list may change while str() of an element runs: read its current size each time, hold the item */
        for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(v); i++) {
            PyObject *item = PySequence_Fast_GET_ITEM(v, i);
            Py_INCREF(item);
            int r = begin_field(b, TAG(ARRAY_VALUE_VALUES), 1, &inner);
            if (r == 0) r = any_value(b, item);
            if (r == 0) r = end_field(b, inner, 1);
            Py_DECREF(item);
            if (r < 0) goto done;
        }
        rc = end_field(b, outer, 1);
    } else if (PyDict_CheckExact(v)) {
        if (begin_field(b, TAG(ANY_VALUE_KVLIST_VALUE), 1, &outer) < 0) goto done;
        PyObject *key, *value;
        Py_ssize_t pos = 0;
        while (PyDict_Next(v, &pos, &key, &value)) {
            Py_INCREF(key);
            Py_INCREF(value);
            int r = begin_field(b, TAG(KEY_VALUE_LIST_VALUES), 1, &inner);
            if (r == 0) r = key_value_body(b, key, value);
            if (r == 0) r = end_field(b, inner, 1);
            Py_DECREF(key);
            Py_DECREF(value);
            if (r < 0) goto done;
        }
        rc = end_field(b, outer, 1);
    } else {
        /* subclasses (numpy floats, enums) are converted to their base type; anything else becomes str() */
        PyObject *conv;
        if (PyUnicode_Check(v))
            conv = PyObject_Str(v);
        else if (PyLong_Check(v))
            conv = PyNumber_Long(v);
        else if (PyFloat_Check(v))
            conv = PyNumber_Float(v);
        else if (PyTuple_Check(v) || PyList_Check(v))
            conv = PySequence_Tuple(v);
        else {
            rc = put_str_of(b, TAG(ANY_VALUE_STRING_VALUE), v);
            goto done;
        }
        if (conv == NULL) goto done;
        rc = any_value(b, conv);
        Py_DECREF(conv);
    }
done:
    Py_LeaveRecursiveCall();
    return rc;
}

/* The body of a KeyValue: key (str(key)) and value. */
static int key_value_body(Buf *b, PyObject *key, PyObject *value) {
    Py_ssize_t mark;
    if (put_str_of(b, TAG(KEY_VALUE_KEY), key) < 0) return -1;
    if (begin_field(b, TAG(KEY_VALUE_VALUE), 1, &mark) < 0) return -1;
    if (any_value(b, value) < 0) return -1;
    return end_field(b, mark, 1);
}

/* One (key, value) pair as a KeyValue field with `tag`. */
static int put_pair(Buf *b, unsigned char tag, PyObject *pair) {
    PyObject *key, *value, *fast = NULL;
    if (PyTuple_CheckExact(pair) && PyTuple_GET_SIZE(pair) == 2) {
        key = PyTuple_GET_ITEM(pair, 0);
        value = PyTuple_GET_ITEM(pair, 1);
    } else {
        fast = PySequence_Fast(pair, "an attribute must be a (key, value) pair");
        if (fast == NULL) return -1;
        if (PySequence_Fast_GET_SIZE(fast) != 2) {
            Py_DECREF(fast);
            PyErr_SetString(PyExc_ValueError, "an attribute must be a (key, value) pair");
            return -1;
        }
        key = PySequence_Fast_GET_ITEM(fast, 0);
        value = PySequence_Fast_GET_ITEM(fast, 1);
    }
    Py_ssize_t mark;
    int rc = begin_field(b, tag, 1, &mark);
    if (rc == 0) rc = key_value_body(b, key, value);
    if (rc == 0) rc = end_field(b, mark, 1);
    Py_XDECREF(fast);
    return rc;
}

/* Repeated KeyValue fields with `tag`, uncached (resource, scope, events, links, non-tuple attributes). */
static int put_attributes(Buf *b, unsigned char tag, PyObject *attrs) {
    PyObject *fast = PySequence_Fast(attrs, "attributes must be a sequence of (key, value) pairs");
    if (fast == NULL) return -1;
    int rc = 0;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(fast) && rc == 0; i++) {
        PyObject *pair = PySequence_Fast_GET_ITEM(fast, i);
        Py_INCREF(pair);
        rc = put_pair(b, tag, pair);
        Py_DECREF(pair);
    }
    Py_DECREF(fast);
    return rc;
}

/* 1 when v's encoding depends on nothing but its identity (it cannot change in place). */
static int immutable_value(PyObject *v, int depth) {
    if (PyUnicode_CheckExact(v) || PyLong_CheckExact(v) || PyFloat_CheckExact(v) || PyBool_Check(v) ||
        PyBytes_CheckExact(v) || v == Py_None)
        return 1;
    if (PyTuple_CheckExact(v) && depth < IMMUTABLE_DEPTH) {
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(v); i++)
            if (!immutable_value(PyTuple_GET_ITEM(v, i), depth + 1)) return 0;
        return 1;
    }
    return 0;
}

static int reusable_pair(PyObject *pair) {
    return PyTuple_CheckExact(pair) && PyTuple_GET_SIZE(pair) == 2 &&
           PyUnicode_CheckExact(PyTuple_GET_ITEM(pair, 0)) && immutable_value(PyTuple_GET_ITEM(pair, 1), 0);
}

/* ---------------------------------------------------------------------------------------------- encoder */
static PyObject *field_names[N_SPANDATA_FIELDS];

/* One slot of the attribute block table (see the header comment). */
typedef struct {
    PyObject *attrs;     /* the last attributes tuple stored here (strong), or NULL */
    char *enc;           /* its encoded block */
    Py_ssize_t *ends;    /* ends[i]: end of pair i's field in enc */
    unsigned char *keep; /* keep[i]: pair i's field may be reused for the same pair object */
    Py_ssize_t n, cap, enc_len, enc_cap;
    int all_keep;
} Block;

typedef struct {
    PyObject_HEAD
    PyTypeObject *span_type; /* SpanData: its fields are read by slot offset */
    Py_ssize_t offsets[N_SPANDATA_FIELDS];
    PyObject *resources; /* grouping key -> ResourceSpans.resource field */
    PyObject *scopes;    /* grouping key -> ScopeSpans.scope field */
    Block *blocks;       /* N_SLOTS */
    Py_ssize_t *tmp_ends;
    unsigned char *tmp_keep;
    Py_ssize_t tmp_cap;
    Buf out;
    int busy;
    Py_ssize_t block_hits, pair_reuses, pairs_encoded; /* counters for the tests */
} Encoder;

/* Field i of span s as a new reference: by slot offset for SpanData itself, else by attribute. */
static PyObject *getf(Encoder *self, PyObject *s, int i) {
    if (Py_TYPE(s) == self->span_type && self->offsets[i] >= 0) {
        PyObject *v = *(PyObject **)((char *)s + self->offsets[i]);
        if (v != NULL) return Py_NewRef(v);
    }
    return PyObject_GetAttr(s, field_names[i]);
}

static void block_clear(Block *e) {
    Py_CLEAR(e->attrs);
    e->n = 0;
    e->enc_len = 0;
    e->all_keep = 0;
}

static void block_free(Block *e) {
    block_clear(e);
    PyMem_Free(e->enc);
    PyMem_Free(e->ends);
    PyMem_Free(e->keep);
    e->enc = NULL;
    e->ends = NULL;
    e->keep = NULL;
    e->cap = e->enc_cap = 0;
}

/* Per-pair arrays ends[] and keep[] grown to hold n pairs (the scratch ones and each block's); -1: MemoryError. */
static int grow_pairs(Py_ssize_t **ends, unsigned char **keep, Py_ssize_t *cap, Py_ssize_t n) {
    if (n <= *cap) return 0;
    Py_ssize_t *grown = PyMem_Realloc(*ends, (size_t)n * sizeof(Py_ssize_t));
    if (grown != NULL) *ends = grown;
    unsigned char *k = grown != NULL ? PyMem_Realloc(*keep, (size_t)n) : NULL;
    if (k == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    *keep = k;
    *cap = n;
    return 0;
}

static inline size_t slot_of(PyObject *first) {
    uintptr_t h = (uintptr_t)first;
    return (size_t)((h >> 4) ^ (h >> 14)) & (N_SLOTS - 1);
}

/* Stores the block just written at out[start:] for `attrs` in slot e (the tuple is kept alive). */
static int block_store(Encoder *self, Block *e, PyObject *attrs, Py_ssize_t start, int all_keep) {
    Py_ssize_t n = PyTuple_GET_SIZE(attrs), len = self->out.len - start;
    if (grow_pairs(&e->ends, &e->keep, &e->cap, n) < 0) goto fail;
    if (len > e->enc_cap) {
        char *enc = PyMem_Realloc(e->enc, (size_t)len);
        if (enc == NULL) goto fail;
        e->enc = enc;
        e->enc_cap = len;
    }
    memcpy(e->enc, self->out.p + start, (size_t)len);
    memcpy(e->ends, self->tmp_ends, (size_t)n * sizeof(Py_ssize_t));
    memcpy(e->keep, self->tmp_keep, (size_t)n);
    e->enc_len = len;
    e->n = n;
    e->all_keep = all_keep;
    PyObject *old = e->attrs;
    Py_INCREF(attrs);
    e->attrs = attrs;
    Py_XDECREF(old); /* last: its deallocation may run arbitrary code */
    return 0;
fail:
    block_clear(e);
    PyErr_NoMemory();
    return -1;
}

/* The Span.attributes fields of `attrs`, through the block table. */
static int put_span_attributes(Encoder *self, PyObject *attrs) {
    Buf *b = &self->out;
    if (!PyTuple_CheckExact(attrs)) return put_attributes(b, TAG(SPAN_ATTRIBUTES), attrs);
    Py_ssize_t n = PyTuple_GET_SIZE(attrs);
    if (n == 0) return 0;
    Block *e = &self->blocks[slot_of(PyTuple_GET_ITEM(attrs, 0))];
    if (e->attrs == attrs && e->all_keep) {
        self->block_hits++;
        return put_raw(b, e->enc, e->enc_len);
    }
    PyObject *prev = NULL;
    Py_ssize_t prev_n = 0;
    if (e->attrs != NULL && e->n > 0 && PyTuple_GET_ITEM(e->attrs, 0) == PyTuple_GET_ITEM(attrs, 0)) {
        prev = e->attrs;
        prev_n = e->n;
        Py_INCREF(prev); /* encoding below may run Python code; keep the old pairs alive meanwhile */
    }
    int rc = -1, all_keep = 1;
    if (grow_pairs(&self->tmp_ends, &self->tmp_keep, &self->tmp_cap, n) < 0) goto done;
    Py_ssize_t start = b->len, run_from = 0, run_len = 0; /* reused fields are copied in runs */
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *pair = PyTuple_GET_ITEM(attrs, i);
        if (prev != NULL && i < prev_n && PyTuple_GET_ITEM(prev, i) == pair && e->keep[i] && e->attrs == prev) {
            Py_ssize_t from = i ? e->ends[i - 1] : 0;
            if (run_len && run_from + run_len == from) {
                run_len += e->ends[i] - from;
            } else {
                if (run_len && put_raw(b, e->enc + run_from, run_len) < 0) goto done;
                run_from = from;
                run_len = e->ends[i] - from;
            }
            self->tmp_keep[i] = 1;
            self->pair_reuses++;
        } else {
            if (run_len && put_raw(b, e->enc + run_from, run_len) < 0) goto done;
            run_len = 0;
            if (put_pair(b, TAG(SPAN_ATTRIBUTES), pair) < 0) goto done;
            self->tmp_keep[i] = (unsigned char)reusable_pair(pair);
            all_keep &= self->tmp_keep[i];
            self->pairs_encoded++;
        }
        self->tmp_ends[i] = b->len - start + run_len;
    }
    if (run_len && put_raw(b, e->enc + run_from, run_len) < 0) goto done;
    rc = block_store(self, e, attrs, start, all_keep);
done:
    Py_XDECREF(prev);
    return rc;
}

/* f[i] = o.<names[i]> for i < n as new references (f starts all NULL; drop_all releases it either way). */
static int get_all(PyObject *o, PyObject **names, PyObject **f, int n) {
    for (int i = 0; i < n; i++)
        if ((f[i] = PyObject_GetAttr(o, names[i])) == NULL) return -1;
    return 0;
}
static void drop_all(PyObject **f, int n) {
    for (int i = 0; i < n; i++) Py_XDECREF(f[i]);
}

static int put_event(Buf *b, PyObject *ev) {
    PyObject *f[4] = {NULL, NULL, NULL, NULL};
    PyObject *names[4] = {s_time_ns, s_name, s_attributes, s_dropped_attributes_count};
    int rc = get_all(ev, names, f, 4) < 0 || put_fixed_if(b, TAGS(SPAN_EVENT_TIME_UNIX_NANO), f[0], 8) < 0 ||
             put_str_if(b, TAG(SPAN_EVENT_NAME), f[1]) < 0 || put_attributes(b, TAG(SPAN_EVENT_ATTRIBUTES), f[2]) < 0 ||
             put_varint_if(b, TAG(SPAN_EVENT_DROPPED_ATTRIBUTES_COUNT), f[3]) < 0;
    drop_all(f, 4);
    return -rc;
}

static int put_link(Buf *b, PyObject *link) {
    PyObject *f[6] = {NULL, NULL, NULL, NULL, NULL, NULL};
    PyObject *names[6] = {s_trace_id, s_span_id, s_trace_state, s_attributes, s_dropped_attributes_count, s_flags};
    int rc = -1, t;
    if (get_all(link, names, f, 6) < 0) goto done;
    if ((t = truthy(f[0])) < 0 || (t && put_bytes_field(b, TAG(SPAN_LINK_TRACE_ID), f[0], 0) < 0)) goto done;
    if ((t = truthy(f[1])) < 0 || (t && put_bytes_field(b, TAG(SPAN_LINK_SPAN_ID), f[1], 0) < 0)) goto done;
    if (put_str_if(b, TAG(SPAN_LINK_TRACE_STATE), f[2]) < 0 || put_attributes(b, TAG(SPAN_LINK_ATTRIBUTES), f[3]) < 0 ||
        put_varint_if(b, TAG(SPAN_LINK_DROPPED_ATTRIBUTES_COUNT), f[4]) < 0 ||
        put_fixed_if(b, TAGS(SPAN_LINK_FLAGS), f[5], 4) < 0)
        goto done;
    rc = 0;
done:
    drop_all(f, 6);
    return rc;
}

/* Each element of `seq` as a length-delimited field with `tag`, its body from put(). */
static int put_each(Buf *b, unsigned char tag, PyObject *seq, int (*put)(Buf *, PyObject *)) {
    int t = truthy(seq);
    if (t <= 0) return t;
    PyObject *fast = PySequence_Fast(seq, "events and links must be sequences");
    if (fast == NULL) return -1;
    int rc = 0;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(fast) && rc == 0; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(fast, i);
        Py_ssize_t mark;
        Py_INCREF(item);
        rc = begin_field(b, tag, 1, &mark);
        if (rc == 0) rc = put(b, item);
        if (rc == 0) rc = end_field(b, mark, 1);
        Py_DECREF(item);
    }
    Py_DECREF(fast);
    return rc;
}

/* The body of one Span, fields in the order of their numbers (as the Python encoder writes them). */
static int put_span(Encoder *self, PyObject *s) {
    Buf *b = &self->out;
    PyObject *f[N_SPAN_MESSAGE_FIELDS];
    int rc = -1, t, n = 0;
    for (; n < N_SPAN_MESSAGE_FIELDS; n++)
        if ((f[n] = getf(self, s, n)) == NULL) goto done;
    if (put_bytes_field(b, TAG(SPAN_TRACE_ID), f[F_TRACE_ID], 1) < 0 ||
        put_bytes_field(b, TAG(SPAN_SPAN_ID), f[F_SPAN_ID], 1) < 0)
        goto done;
    if (put_str_if(b, TAG(SPAN_TRACE_STATE), f[F_TRACE_STATE]) < 0) goto done;
    if (f[F_PARENT] != Py_None) {
        if ((t = truthy(f[F_PARENT])) < 0 || (t && put_bytes_field(b, TAG(SPAN_PARENT_SPAN_ID), f[F_PARENT], 0) < 0))
            goto done;
    }
    if (put_str_if(b, TAG(SPAN_NAME), f[F_NAME]) < 0 || put_varint_if(b, TAG(SPAN_KIND), f[F_KIND]) < 0) goto done;
    if (put_fixed_if(b, TAGS(SPAN_START_TIME_UNIX_NANO), f[F_START], 8) < 0 ||
        put_fixed_if(b, TAGS(SPAN_END_TIME_UNIX_NANO), f[F_END], 8) < 0)
        goto done;
    if ((t = truthy(f[F_ATTRS])) < 0 || (t && put_span_attributes(self, f[F_ATTRS]) < 0)) goto done;
    if (put_varint_if(b, TAG(SPAN_DROPPED_ATTRIBUTES_COUNT), f[F_DROPPED_ATTRS]) < 0 ||
        put_each(b, TAG(SPAN_EVENTS), f[F_EVENTS], put_event) < 0 ||
        put_varint_if(b, TAG(SPAN_DROPPED_EVENTS_COUNT), f[F_DROPPED_EVENTS]) < 0 ||
        put_each(b, TAG(SPAN_LINKS), f[F_LINKS], put_link) < 0 ||
        put_varint_if(b, TAG(SPAN_DROPPED_LINKS_COUNT), f[F_DROPPED_LINKS]) < 0)
        goto done;
    int code = truthy(f[F_STATUS_CODE]), msg = truthy(f[F_STATUS_MSG]);
    if (code < 0 || msg < 0) goto done;
    if (code || msg) {
        Py_ssize_t mark;
        if (begin_field(b, TAG(SPAN_STATUS), 1, &mark) < 0) goto done;
        if (msg && put_str_field(b, TAG(STATUS_MESSAGE), f[F_STATUS_MSG]) < 0) goto done;
        if (code && put_varint_if(b, TAG(STATUS_CODE), f[F_STATUS_CODE]) < 0) goto done;
        if (end_field(b, mark, 1) < 0) goto done;
    }
    if (put_fixed_if(b, TAGS(SPAN_FLAGS), f[F_FLAGS], 4) < 0) goto done;
    rc = 0;
done:
    for (int i = 0; i < n; i++) Py_DECREF(f[i]);
    return rc;
}

/* --------------------------------------------------------------------------------------------- grouping */
/* The value itself when hashable, else ("\0repr", repr(value)) (the Python encoder's _hashable). */
static PyObject *hashable(PyObject *v) {
    if (PyObject_Hash(v) == -1 && PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_TypeError)) return NULL;
        PyErr_Clear();
        PyObject *r = PyObject_Repr(v);
        if (r == NULL) return NULL;
        PyObject *t = PyTuple_Pack(2, s_repr_marker, r);
        Py_DECREF(r);
        return t;
    }
    return Py_NewRef(v);
}

/* by_id[id(v)], computed by hashable() on the first look-up; a new reference. */
static PyObject *key_by_id(PyObject *by_id, PyObject *v) {
    PyObject *id = PyLong_FromVoidPtr(v);
    if (id == NULL) return NULL;
    PyObject *k = PyDict_GetItemWithError(by_id, id);
    if (k != NULL) {
        Py_INCREF(k);
    } else if (!PyErr_Occurred() && (k = hashable(v)) != NULL && PyDict_SetItem(by_id, id, k) < 0) {
        Py_CLEAR(k);
    }
    Py_DECREF(id);
    return k;
}

/* d.setdefault(key, factory()) as a borrowed reference. */
static PyObject *setdefault_new(PyObject *d, PyObject *key, PyObject *(*factory)(void)) {
    PyObject *v = PyDict_GetItemWithError(d, key);
    if (v != NULL || PyErr_Occurred()) return v;
    PyObject *made = factory();
    if (made == NULL) return NULL;
    int rc = PyDict_SetItem(d, key, made);
    Py_DECREF(made);
    return rc < 0 ? NULL : made; /* the dict holds it */
}

static PyObject *new_list(void) { return PyList_New(0); }

/* The scope fields (name, version, schema urls) of spans a and b are equal (the Python _same_scope). */
static int same_scope(Encoder *self, PyObject *a, PyObject *b) {
    static const int fields[4] = {F_SCOPE_NAME, F_SCOPE_VERSION, F_SCHEMA_URL, F_RESOURCE_SCHEMA};
    for (int i = 0; i < 4; i++) {
        PyObject *x = getf(self, a, fields[i]);
        if (x == NULL) return -1;
        PyObject *y = getf(self, b, fields[i]);
        if (y == NULL) {
            Py_DECREF(x);
            return -1;
        }
        int eq = PyObject_RichCompareBool(x, y, Py_EQ);
        Py_DECREF(x);
        Py_DECREF(y);
        if (eq <= 0) return eq;
    }
    return 1;
}

/* {resource key: {scope key: [spans]}} in order of first appearance (encode_proto._group). */
static PyObject *group(Encoder *self, PyObject *spans) {
    PyObject *groups = PyDict_New(), *by_id = PyDict_New();
    PyObject *last_r = NULL, *last_s = NULL, *last_list = NULL, *prev = NULL; /* strong */
    PyObject *r = NULL, *sc = NULL, *rk = NULL, *sk = NULL, *rkey = NULL, *skey = NULL, *f[4] = {0};
    if (groups == NULL || by_id == NULL) goto fail;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(spans); i++) {
        PyObject *s = PySequence_Fast_GET_ITEM(spans, i);
        if ((r = getf(self, s, F_RESOURCE)) == NULL || (sc = getf(self, s, F_SCOPE_ATTRS)) == NULL) goto fail;
        if (r == last_r && sc == last_s && last_list != NULL) {
            int same = same_scope(self, s, prev);
            if (same < 0) goto fail;
            if (same) {
                if (PyList_Append(last_list, s) < 0) goto fail;
                Py_SETREF(prev, Py_NewRef(s));
                Py_CLEAR(r);
                Py_CLEAR(sc);
                continue;
            }
        }
        if ((rk = key_by_id(by_id, r)) == NULL || (sk = key_by_id(by_id, sc)) == NULL) goto fail;
        static const int fs[4] = {F_RESOURCE_SCHEMA, F_SCOPE_NAME, F_SCOPE_VERSION, F_SCHEMA_URL};
        for (int k = 0; k < 4; k++)
            if ((f[k] = getf(self, s, fs[k])) == NULL) goto fail;
        if ((rkey = PyTuple_Pack(2, rk, f[0])) == NULL || (skey = PyTuple_Pack(4, f[1], f[2], sk, f[3])) == NULL)
            goto fail;
        PyObject *scopes = setdefault_new(groups, rkey, PyDict_New);
        PyObject *list = scopes ? setdefault_new(scopes, skey, new_list) : NULL;
        if (list == NULL || PyList_Append(list, s) < 0) goto fail;
        Py_XSETREF(last_list, Py_NewRef(list));
        Py_XSETREF(prev, Py_NewRef(s));
        Py_XSETREF(last_r, r);
        Py_XSETREF(last_s, sc);
        r = sc = NULL;
        Py_CLEAR(rk);
        Py_CLEAR(sk);
        Py_CLEAR(rkey);
        Py_CLEAR(skey);
        for (int k = 0; k < 4; k++) Py_CLEAR(f[k]);
    }
    Py_DECREF(by_id);
    Py_XDECREF(last_r);
    Py_XDECREF(last_s);
    Py_XDECREF(last_list);
    Py_XDECREF(prev);
    return groups;
fail:
    Py_XDECREF(groups);
    Py_XDECREF(by_id);
    Py_XDECREF(last_r);
    Py_XDECREF(last_s);
    Py_XDECREF(last_list);
    Py_XDECREF(prev);
    Py_XDECREF(r);
    Py_XDECREF(sc);
    Py_XDECREF(rk);
    Py_XDECREF(sk);
    Py_XDECREF(rkey);
    Py_XDECREF(skey);
    for (int k = 0; k < 4; k++) Py_XDECREF(f[k]);
    return NULL;
}

/* The cached field for `key` in `cache` (resources or scopes), made by make(span) on a miss; borrowed. Its tag
 * is ResourceSpans.resource's, which is ScopeSpans.scope's too. */
_Static_assert(PB_RESOURCE_SPANS_RESOURCE == PB_SCOPE_SPANS_SCOPE, "ResourceSpans.resource and ScopeSpans.scope");
static PyObject *cached_field(Encoder *self, PyObject *cache, PyObject *key, PyObject *span,
                              int (*make)(Encoder *, Buf *, PyObject *)) {
    PyObject *field = PyDict_GetItemWithError(cache, key);
    if (field != NULL || PyErr_Occurred()) return field;
    Buf tmp = {NULL, 0, 0};
    Py_ssize_t mark;
    if (begin_field(&tmp, TAG(RESOURCE_SPANS_RESOURCE), 1, &mark) < 0 || make(self, &tmp, span) < 0 ||
        end_field(&tmp, mark, 1) < 0) {
        PyMem_Free(tmp.p);
        return NULL;
    }
    field = PyBytes_FromStringAndSize(tmp.p, tmp.len);
    PyMem_Free(tmp.p);
    if (field == NULL) return NULL;
    if (PyDict_GET_SIZE(cache) > GROUP_CACHE_LIMIT) PyDict_Clear(cache);
    int rc = PyDict_SetItem(cache, key, field);
    Py_DECREF(field);
    return rc < 0 ? NULL : field; /* the dict holds it */
}

static int make_resource(Encoder *self, Buf *b, PyObject *span) {
    PyObject *r = getf(self, span, F_RESOURCE);
    if (r == NULL) return -1;
    int rc = put_attributes(b, TAG(RESOURCE_ATTRIBUTES), r);
    Py_DECREF(r);
    return rc;
}

static int make_scope(Encoder *self, Buf *b, PyObject *span) {
    PyObject *f[3] = {getf(self, span, F_SCOPE_NAME), NULL, NULL};
    int rc = f[0] == NULL || (f[1] = getf(self, span, F_SCOPE_VERSION)) == NULL ||
             (f[2] = getf(self, span, F_SCOPE_ATTRS)) == NULL ||
             put_str_if(b, TAG(INSTRUMENTATION_SCOPE_NAME), f[0]) < 0 ||
             put_str_if(b, TAG(INSTRUMENTATION_SCOPE_VERSION), f[1]) < 0 ||
             put_attributes(b, TAG(INSTRUMENTATION_SCOPE_ATTRIBUTES), f[2]) < 0;
    drop_all(f, 3);
    return -rc;
}

/* `if span.<field>: tag + str` for a grouping field, as a new bytes object (empty when the field is empty). */
static PyObject *group_str_field(Encoder *self, unsigned char tag, PyObject *span, int field) {
    PyObject *v = getf(self, span, field);
    if (v == NULL) return NULL;
    Buf tmp = {NULL, 0, 0};
    PyObject *out = NULL;
    if (put_str_if(&tmp, tag, v) == 0) out = PyBytes_FromStringAndSize(tmp.p ? tmp.p : "", tmp.len);
    PyMem_Free(tmp.p);
    Py_DECREF(v);
    return out;
}

/* One ScopeSpans (or, with `resource` set, the ResourceSpans that opens before it) while assembling. */
typedef struct {
    PyObject *head;   /* the resource field (ResourceSpans) or scope field (ScopeSpans) */
    PyObject *tail;   /* the schema_url field, possibly empty */
    Py_ssize_t start, end; /* ScopeSpans: its spans' fields in self->out */
    Py_ssize_t len;        /* the message's length */
    int resource;          /* 1: a ResourceSpans record, followed by its ScopeSpans records */
} Part;

static void parts_free(Part *parts, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_XDECREF(parts[i].head);
        Py_XDECREF(parts[i].tail);
    }
    PyMem_Free(parts);
}

static inline Py_ssize_t field_size(Py_ssize_t len) { return 1 + varint_size((uint64_t)len) + len; }

/* The request: every group's spans are written to self->out first, then the whole message is assembled in
 * one bytes object (headers, whose lengths are known by then, around the span sections: no body is moved). */
static PyObject *encode_groups(Encoder *self, PyObject *groups) {
    Buf *b = &self->out;
    PyObject *rkey, *scopes, *skey, *members, *result = NULL;
    Py_ssize_t rpos = 0, n = 0, cap = 0;
    Part *parts = NULL;
    while (PyDict_Next(groups, &rpos, &rkey, &scopes)) {
        Py_ssize_t spos = 0;
        if (n + PyDict_GET_SIZE(scopes) + 1 > cap) {
            Py_ssize_t want = (n + PyDict_GET_SIZE(scopes) + 1) * 2;
            Part *grown = PyMem_Realloc(parts, (size_t)want * sizeof(Part));
            if (grown == NULL) {
                PyErr_NoMemory();
                goto done;
            }
            parts = grown;
            cap = want;
        }
        if (!PyDict_Next(scopes, &spos, &skey, &members)) continue; /* never empty */
        PyObject *first = PyList_GET_ITEM(members, 0);
        Part *r = &parts[n++];
        memset(r, 0, sizeof(Part));
        r->resource = 1;
        if ((r->head = cached_field(self, self->resources, rkey, first, make_resource)) == NULL) goto done;
        Py_INCREF(r->head);
        r->tail = group_str_field(self, TAG(RESOURCE_SPANS_SCHEMA_URL), first, F_RESOURCE_SCHEMA);
        if (r->tail == NULL) goto done;
        r->len = PyBytes_GET_SIZE(r->head) + PyBytes_GET_SIZE(r->tail);
        spos = 0;
        while (PyDict_Next(scopes, &spos, &skey, &members)) {
            PyObject *head = PyList_GET_ITEM(members, 0);
            Part *sp = &parts[n++];
            memset(sp, 0, sizeof(Part));
            if ((sp->head = cached_field(self, self->scopes, skey, head, make_scope)) == NULL) goto done;
            Py_INCREF(sp->head);
            if ((sp->tail = group_str_field(self, TAG(SCOPE_SPANS_SCHEMA_URL), head, F_SCHEMA_URL)) == NULL) goto done;
            sp->start = b->len;
            for (Py_ssize_t i = 0; i < PyList_GET_SIZE(members); i++) {
                Py_ssize_t mark;
                if (begin_field(b, TAG(SCOPE_SPANS_SPANS), 2, &mark) < 0 ||
                    put_span(self, PyList_GET_ITEM(members, i)) < 0 ||
                    end_field(b, mark, 2) < 0)
                    goto done;
            }
            sp->end = b->len;
            sp->len = PyBytes_GET_SIZE(sp->head) + (sp->end - sp->start) + PyBytes_GET_SIZE(sp->tail);
            r->len += field_size(sp->len);
        }
    }
    Py_ssize_t total = 0;
    for (Py_ssize_t i = 0; i < n; i++)
        if (parts[i].resource) total += field_size(parts[i].len);
    if ((result = PyBytes_FromStringAndSize(NULL, total)) == NULL) goto done;
    char *p = PyBytes_AS_STRING(result);
    PyObject *resource_tail = NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        Part *x = &parts[i];
        if (x->resource) {
            if (resource_tail != NULL) { /* the previous ResourceSpans' schema_url */
                memcpy(p, PyBytes_AS_STRING(resource_tail), (size_t)PyBytes_GET_SIZE(resource_tail));
                p += PyBytes_GET_SIZE(resource_tail);
            }
            resource_tail = x->tail;
            *p++ = TAG(TRACES_DATA_RESOURCE_SPANS);
        } else {
            *p++ = TAG(RESOURCE_SPANS_SCOPE_SPANS);
        }
        p = put_varint(p, (uint64_t)x->len);
        memcpy(p, PyBytes_AS_STRING(x->head), (size_t)PyBytes_GET_SIZE(x->head));
        p += PyBytes_GET_SIZE(x->head);
        if (!x->resource) {
            memcpy(p, b->p + x->start, (size_t)(x->end - x->start));
            p += x->end - x->start;
            memcpy(p, PyBytes_AS_STRING(x->tail), (size_t)PyBytes_GET_SIZE(x->tail));
            p += PyBytes_GET_SIZE(x->tail);
        }
    }
    if (resource_tail != NULL) {
        memcpy(p, PyBytes_AS_STRING(resource_tail), (size_t)PyBytes_GET_SIZE(resource_tail));
        p += PyBytes_GET_SIZE(resource_tail);
    }
    if (p != PyBytes_AS_STRING(result) + total) { /* cannot happen: the lengths above add up */
        Py_CLEAR(result);
        PyErr_SetString(PyExc_SystemError, "_protoenc: request length mismatch");
    }
done:
    parts_free(parts, n);
    return result;
}

static int check_ready(Encoder *self) {
    if (self->blocks == NULL || self->resources == NULL || self->scopes == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Encoder.__init__ was not called");
        return -1;
    }
    return 0;
}

static PyObject *Encoder_encode(Encoder *self, PyObject *spans) {
    if (check_ready(self) < 0) return NULL;
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "ProtoEncoder.encode re-entered (one encoder per thread)");
        return NULL;
    }
    PyObject *fast = PySequence_Fast(spans, "spans must be a sequence");
    if (fast == NULL) return NULL;
    self->busy = 1;
    self->out.len = 0;
    PyObject *result = NULL, *groups = group(self, fast);
    if (groups != NULL) result = encode_groups(self, groups);
    Py_XDECREF(groups);
    Py_DECREF(fast);
    if (self->out.cap > (1 << 24)) { /* an unusually large batch: do not keep its buffer */
        PyMem_Free(self->out.p);
        self->out.p = NULL;
        self->out.cap = 0;
    }
    self->out.len = 0;
    self->busy = 0;
    return result;
}

static PyObject *Encoder_cache_info(Encoder *self, PyObject *Py_UNUSED(ignored)) {
    if (check_ready(self) < 0) return NULL;
    Py_ssize_t used = 0;
    for (int i = 0; i < N_SLOTS; i++) used += self->blocks[i].attrs != NULL;
    return Py_BuildValue("{sn,sn,sn,sn,sn,sn,si}", "blocks", used, "resources", PyDict_GET_SIZE(self->resources),
                         "scopes", PyDict_GET_SIZE(self->scopes), "block_hits", self->block_hits, "pair_reuses",
                         self->pair_reuses, "pairs_encoded", self->pairs_encoded, "block_slots", N_SLOTS);
}

static PyObject *Encoder_clear_caches(Encoder *self, PyObject *Py_UNUSED(ignored)) {
    if (check_ready(self) < 0) return NULL;
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "the encoder is busy");
        return NULL;
    }
    for (int i = 0; i < N_SLOTS; i++) block_clear(&self->blocks[i]);
    PyDict_Clear(self->resources);
    PyDict_Clear(self->scopes);
    Py_RETURN_NONE;
}

static int Encoder_init(Encoder *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"span_type", NULL};
    PyObject *type;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!:Encoder", kwlist, &PyType_Type, &type)) return -1;
    if (self->blocks != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Encoder is already initialised");
        return -1;
    }
    Py_INCREF(type);
    self->span_type = (PyTypeObject *)type;
    for (int i = 0; i < N_SPANDATA_FIELDS; i++) {
        /* -1: read by getattr (which raises AttributeError for a field the class lacks) */
        self->offsets[i] = lt_slot_offset((PyTypeObject *)type, field_names[i]);
    }
    if ((self->resources = PyDict_New()) == NULL || (self->scopes = PyDict_New()) == NULL) return -1;
    self->blocks = PyMem_Calloc(N_SLOTS, sizeof(Block));
    if (self->blocks == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

static int Encoder_traverse(Encoder *self, visitproc visit, void *arg) {
    Py_VISIT(self->span_type);
    Py_VISIT(self->resources);
    Py_VISIT(self->scopes);
    if (self->blocks != NULL)
        for (int i = 0; i < N_SLOTS; i++) Py_VISIT(self->blocks[i].attrs);
    return 0;
}

static int Encoder_clear(Encoder *self) {
    Py_CLEAR(self->span_type);
    Py_CLEAR(self->resources);
    Py_CLEAR(self->scopes);
    if (self->blocks != NULL)
        for (int i = 0; i < N_SLOTS; i++) block_clear(&self->blocks[i]);
    return 0;
}

static void Encoder_dealloc(Encoder *self) {
    PyObject_GC_UnTrack(self);
    Encoder_clear(self);
    if (self->blocks != NULL) {
        for (int i = 0; i < N_SLOTS; i++) block_free(&self->blocks[i]);
        PyMem_Free(self->blocks);
    }
    PyMem_Free(self->tmp_ends);
    PyMem_Free(self->tmp_keep);
    PyMem_Free(self->out.p);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef Encoder_methods[] = {
    {"encode", (PyCFunction)Encoder_encode, METH_O,
     "encode(spans) -> bytes of an ExportTraceServiceRequest (parses to encode_proto.request_message(spans))."},
    {"cache_info", (PyCFunction)Encoder_cache_info, METH_NOARGS, "Sizes and hit counters of the caches."},
    {"clear_caches", (PyCFunction)Encoder_clear_caches, METH_NOARGS, "Forget every cached block and field."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject EncoderType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "launchtrace.otlp._protoenc.Encoder",
    .tp_basicsize = sizeof(Encoder),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Encoder(span_type): SpanData -> OTLP protobuf bytes, compiled (see the module source).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Encoder_init,
    .tp_traverse = (traverseproc)Encoder_traverse,
    .tp_clear = (inquiry)Encoder_clear,
    .tp_dealloc = (destructor)Encoder_dealloc,
    .tp_methods = Encoder_methods,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, .m_name = "_protoenc", .m_doc = "SpanData -> OTLP protobuf, in C.", .m_size = -1};

PyMODINIT_FUNC PyInit__protoenc(void) {
    for (int i = 0; i < N_SPANDATA_FIELDS; i++) INTERN(field_names[i], SPANDATA_FIELDS[i]);
    INTERN(s_name, "name");
    INTERN(s_time_ns, "time_ns");
    INTERN(s_attributes, "attributes");
    INTERN(s_dropped_attributes_count, "dropped_attributes_count");
    INTERN(s_trace_id, "trace_id");
    INTERN(s_span_id, "span_id");
    INTERN(s_trace_state, "trace_state");
    INTERN(s_flags, "flags");
    if ((s_repr_marker = PyUnicode_FromStringAndSize("\0repr", 5)) == NULL) return NULL;
    if (PyType_Ready(&EncoderType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (lt_add_type(m, "Encoder", &EncoderType) < 0) return NULL;
    return m;
}
