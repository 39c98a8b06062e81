/* SpanData -> one OTLP JSON Lines line, in C (without a compiler: launchtrace.otlp.json_codec.encode_line).
 *
 * Why: the export worker shares the GIL with the thread that launches kernels, so every microsecond it spends
 * encoding is taken from the user's loop. The Python encoder costs several times what this one does per
 * launch span (docs/export.md#speed); this one writes the same bytes directly into one growable buffer, reading
 * SpanData's slots by offset (member descriptors looked up once, when the Encoder is made).
 *
 * json_codec.encode_line is the definition. The output here is byte for byte what it writes for the same spans:
 * orjson's string escaping (the short escapes \b \t \n \f \r \" \\, \u00xx for other control characters, all
 * else as UTF-8), orjson's float text (the shortest round-trip digits, laid out as orjson lays them out),
 * int64 attribute values as decimal strings and larger ones as stringValue, bytes as padded base64, lone
 * surrogates as '?' (what json_codec.encode_line writes). Values of other
 * types go through json_codec.encode_any_value, as in Python. Whatever this file does not handle (a field of an
 * unexpected type, ints beyond 64 bits in span fields, deep nesting, a re-entrant call) raises Unsupported
 * before anything is returned, and the caller encodes that batch with the Python encoder.
 * tests/test_jsonenc_native.py compares the two encoders' bytes over generated spans.
 *
 * Cache: span attribute blocks, keyed by (first pair object, length). The span builder reuses one tuple of
 * pairs per call site and appends the few that change, so against the previous block with the same first pair
 * only the positions holding another pair object are encoded again (a pair is immutable; values that can
 * change in place, lists, dicts and other objects, are encoded every time). At most BLOCK_LIMIT blocks are
 * kept (all dropped when full), each holding its last attributes tuple alive so identity stays meaningful.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include "../_native.h"
#include "_jsonfmt.h"
#include "_jsonkeys.h"
#include "_spandata.h"
#include <stdint.h>
#include <string.h>

#define BLOCK_LIMIT 1024
#define BLOCK_SLOTS 2048 /* open addressing, at most half full */
#define MAX_DEPTH 40     /* nested values; deeper ones go to the Python encoder (orjson's limit is 255 levels) */
#define FLOAT_CACHE 256

static PyObject *Unsupported; /* exception: this batch is for the Python encoder */
static PyObject *Identity;    /* f(x) -> x, the "encode" handed to group_spans */

/* ------------------------------------------------------------------------------------------ buffer */

/* bytes being written: PyMem memory, or (line != NULL) the storage of the bytes object that will be returned, so
 * a line of megabytes is not copied once more at the end */
typedef struct {
    char *p;
    Py_ssize_t len, cap;
    PyObject *line;
} Buf;

/* room for `extra` more bytes; exact: just that (a reservation for the rest of a batch), else doubling */
static int buf_grow(Buf *b, Py_ssize_t extra, int exact) {
    if (extra < 0 || extra > PY_SSIZE_T_MAX - b->len) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t need = b->len + extra;
    if (need <= b->cap) return 0;
    Py_ssize_t cap = b->cap ? b->cap : 64;
    while (cap < need) {
        if (exact || cap > PY_SSIZE_T_MAX / 2) {
            cap = need;
            break;
        }
        cap *= 2;
    }
    if (b->line != NULL) {
        if (_PyBytes_Resize(&b->line, cap) < 0) { /* frees the object and sets b->line to NULL */
            b->p = NULL;
            b->len = b->cap = 0;
            return -1;
        }
        b->p = PyBytes_AS_STRING(b->line);
    } else if (lt_resize_buffer(&b->p, cap) < 0) {
        return -1;
    }
    b->cap = cap;
    return 0;
}

static inline int buf_reserve(Buf *b, Py_ssize_t extra) {
    return extra <= b->cap - b->len ? 0 : buf_grow(b, extra, 0);
}

static int put(Buf *b, const char *s, Py_ssize_t n) {
    if (buf_reserve(b, n) < 0) return -1;
    memcpy(b->p + b->len, s, (size_t)n);
    b->len += n;
    return 0;
}

#define PUTS(b, lit) put((b), (lit), (Py_ssize_t)(sizeof(lit) - 1))

static int put_char(Buf *b, char c) {
    if (buf_reserve(b, 1) < 0) return -1;
    b->p[b->len++] = c;
    return 0;
}

/* for a PyMem buffer only (a line's storage goes with its bytes object) */
static void buf_free(Buf *b) {
    PyMem_Free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

/* u's decimal digits, after a '-' when `minus` */
static int put_u64(Buf *b, unsigned long long u, int minus) {
    char tmp[24];
    char *start = jf_u64_digits(tmp + 24, u);
    if (minus) *--start = '-';
    return put(b, start, tmp + 24 - start);
}
#define put_i64(b, v) put_u64((b), (v) < 0 ? 0ULL - (unsigned long long)(v) : (unsigned long long)(v), (v) < 0)

static int put_hex(Buf *b, PyObject *bytes) {
    Py_ssize_t n = PyBytes_GET_SIZE(bytes);
    if (n > PY_SSIZE_T_MAX / 2 || buf_reserve(b, 2 * n) < 0) {
        if (!PyErr_Occurred()) PyErr_NoMemory();
        return -1;
    }
    jf_hex(b->p + b->len, (const uint8_t *)PyBytes_AS_STRING(bytes), (size_t)n);
    b->len += 2 * n;
    return 0;
}

/* '"' + standard base64 with padding (base64.b64encode) + '"' */
static int put_b64(Buf *b, const unsigned char *s, Py_ssize_t n) {
    if (n > (PY_SSIZE_T_MAX - 8) / 4 * 3 || buf_reserve(b, (Py_ssize_t)jf_b64_len((size_t)n) + 2) < 0) {
        if (!PyErr_Occurred()) PyErr_NoMemory();
        return -1;
    }
    char *o = b->p + b->len;
    *o++ = '"';
    o = jf_b64(o, s, (size_t)n);
    *o++ = '"';
    b->len = o - b->p;
    return 0;
}

/* ------------------------------------------------------------------------------------------ strings */

/* a JSON string for a str (any subclass: its characters); lone surrogates become '?' */
static int put_str(Buf *b, PyObject *s) {
#if PY_VERSION_HEX < 0x030C0000
    if (PyUnicode_READY(s) < 0) return -1;
#endif
    Py_ssize_t n = PyUnicode_GET_LENGTH(s);
    if (n > (PY_SSIZE_T_MAX - 2) / 6 || buf_reserve(b, 6 * n + 2) < 0) {
        if (!PyErr_Occurred()) PyErr_NoMemory();
        return -1;
    }
    char *o = b->p + b->len;
    *o++ = '"';
    if (PyUnicode_IS_ASCII(s)) {
        o += jf_escape_utf8(o, PyUnicode_1BYTE_DATA(s), (size_t)n); /* ASCII is valid UTF-8: never -1 */
    } else {
        int kind = PyUnicode_KIND(s);
        const void *d = PyUnicode_DATA(s);
        for (Py_ssize_t i = 0; i < n; i++) {
            Py_UCS4 c = PyUnicode_READ(kind, d, i);
            if (c < 0x80) {
                o += jf_esc_ascii(o, c);
            } else if (c < 0x800) {
                *o++ = (char)(0xC0 | (c >> 6));
                *o++ = (char)(0x80 | (c & 0x3F));
            } else if (c >= 0xD800 && c <= 0xDFFF) {
                *o++ = '?'; /* str.encode("utf-8", "replace"), as json_codec.encode_line writes them */
            } else if (c < 0x10000) {
                *o++ = (char)(0xE0 | (c >> 12));
                *o++ = (char)(0x80 | ((c >> 6) & 0x3F));
                *o++ = (char)(0x80 | (c & 0x3F));
            } else {
                *o++ = (char)(0xF0 | (c >> 18));
                *o++ = (char)(0x80 | ((c >> 12) & 0x3F));
                *o++ = (char)(0x80 | ((c >> 6) & 0x3F));
                *o++ = (char)(0x80 | (c & 0x3F));
            }
        }
    }
    *o++ = '"';
    b->len = o - b->p;
    return 0;
}

/* ------------------------------------------------------------------------------------------ floats */

typedef struct {
    uint64_t bits;
    char len; /* 0: empty slot */
    char text[31];
} FloatText;

static int unsupported(const char *what);

/* orjson's text for a finite double: Python's shortest round-trip digits (repr) laid out by jf_layout
 * (_jsonfmt.h); -1 with an exception set on failure. */
static int format_double(double v, char *out, size_t outsize) {
    if (outsize < JF_DOUBLE_MAX) return unsupported("no room for a float");
    char *r = PyOS_double_to_string(v, 'r', 0, 0, NULL);
    if (r == NULL) return -1;
    const char *p = r;
    int neg = 0;
    if (*p == '-') {
        neg = 1;
        p++;
    }
    char digits[32];
    int nd = 0, intdigits = 0, seen_point = 0;
    long exp10 = 0;
    for (; *p && *p != 'e' && *p != 'E'; p++) {
        if (*p == '.') {
            seen_point = 1;
        } else if (*p >= '0' && *p <= '9') {
            if (nd < 30) digits[nd++] = *p;
            if (!seen_point) intdigits++;
        }
    }
    if (*p == 'e' || *p == 'E') exp10 = strtol(p + 1, NULL, 10);
    PyMem_Free(r);
    long point = intdigits + exp10; /* value = 0.digits * 10^point */
    int start = 0;
    while (start < nd && digits[start] == '0') {
        start++;
        point--;
    }
    while (nd > start && digits[nd - 1] == '0') nd--;
    if (nd == start) { /* zero */
        memcpy(out, neg ? "-0.0" : "0.0", 4 + (size_t)neg - 1);
        return 3 + neg;
    }
    if (nd - start > 17) return unsupported("more float digits than a double has");
    return jf_layout(out, neg, digits + start, nd - start, (int)(point - 1));
}

/* ------------------------------------------------------------------------------------------ encoder */


typedef struct {
    PyObject *first; /* the first pair (strong); NULL: empty slot */
    Py_ssize_t n;
    PyObject *attrs;     /* the attributes tuple the fragments were encoded from (strong); NULL: stale */
    Buf *frags;          /* n encoded {"key":..,"value":..} */
    unsigned char *redo; /* n flags: encode again every time (values that can change in place) */
} Block;

typedef struct {
    PyObject_HEAD
    PyTypeObject *span_type, *event_type, *link_type;
    PyObject *encode_any_value; /* json_codec.encode_any_value */
    PyObject *group_spans;      /* json_codec.group_spans */
    Py_ssize_t span_off[N_SPANDATA_FIELDS], event_off[N_EVENT_FIELDS], link_off[N_LINK_FIELDS];
    Block *blocks; /* BLOCK_SLOTS */
    Py_ssize_t nblocks;
    int busy;
    Py_ssize_t bytes_per_span; /* for the first allocation of the next line */
    FloatText floats[FLOAT_CACHE];
} Encoder;

#define SLOT(obj, off) (*(PyObject **)((char *)(obj) + (off)))

static int unsupported(const char *what) {
    PyErr_SetString(Unsupported, what);
    return -1;
}

/* a slot's value (borrowed), or NULL with Unsupported set (unset slot) */
static inline PyObject *field(PyObject *obj, Py_ssize_t off) {
    PyObject *v = SLOT(obj, off);
    if (v == NULL) unsupported("unset field");
    return v;
}

/* v == 0, for an exact int */
static int int_is_zero(PyObject *v) {
    int overflow;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    return x == 0 && !overflow;
}

/* an integer field written as decimal digits: int64 or uint64 (timestamps are fixed64), else Unsupported */
static int put_int_field(Buf *b, PyObject *v) {
    if (!PyLong_CheckExact(v)) return unsupported("integer field of another type");
    int overflow;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (x == -1 && PyErr_Occurred()) return -1;
    if (!overflow) return put_i64(b, x);
    if (overflow < 0) return unsupported("integer field beyond 64 bits");
    unsigned long long u = PyLong_AsUnsignedLongLong(v);
    if (u == (unsigned long long)-1 && PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_OverflowError)) return -1;
        PyErr_Clear();
        return unsupported("integer field beyond 64 bits");
    }
    return put_u64(b, u, 0);
}

/* Field `off` of `obj` (borrowed) when it is exactly of `type`, else NULL with `what` reported unsupported. */
static PyObject *typed_field(PyObject *obj, Py_ssize_t off, PyTypeObject *type, const char *what) {
    PyObject *v = field(obj, off);
    if (v != NULL && !Py_IS_TYPE(v, type)) {
        unsupported(what);
        return NULL;
    }
    return v;
}
#define str_field(obj, off) typed_field(obj, off, &PyUnicode_Type, "string field of another type")
#define tuple_field(obj, off) typed_field(obj, off, &PyTuple_Type, "tuple field of another type")
#define bytes_field(obj, off) typed_field(obj, off, &PyBytes_Type, "id of another type than bytes")

static int put_float(Encoder *self, Buf *b, double v) {
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    FloatText *slot = &self->floats[(bits ^ (bits >> 29) ^ (bits >> 47)) % FLOAT_CACHE];
    if (slot->len == 0 || slot->bits != bits) {
        int n = format_double(v, slot->text, sizeof slot->text);
        if (n < 0) {
            slot->len = 0;
            return -1;
        }
        slot->bits = bits;
        slot->len = (char)n;
    }
    return put(b, slot->text, slot->len);
}

static int put_value(Encoder *self, Buf *b, PyObject *v, int depth);

/* a str for a key: itself when a str, else str(key) (new reference) */
static PyObject *key_text(PyObject *key) {
    if (PyUnicode_CheckExact(key)) return Py_NewRef(key);
    return PyObject_Str(key);
}

/* {"key":<key>,"value":<AnyValue>} */
static int put_pair(Encoder *self, Buf *b, PyObject *key, PyObject *value, int depth) {
    PyObject *k = key_text(key);
    if (k == NULL) return -1;
    int rc = PUTS(b, "{\"" JK_KEY "\":") < 0 || put_str(b, k) < 0 || PUTS(b, ",\"" JK_VALUE "\":") < 0 ||
                     put_value(self, b, value, depth) < 0 || put_char(b, '}') < 0
                 ? -1
                 : 0;
    Py_DECREF(k);
    return rc;
}

/* orjson's text for what json_codec.encode_any_value returns: dicts with str keys, lists, str, bool, float,
 * int64, None */
static int put_plain(Encoder *self, Buf *b, PyObject *v, int depth) {
    if (depth > MAX_DEPTH) return unsupported("nested too deeply");
    if (PyUnicode_CheckExact(v)) return put_str(b, v);
    if (v == Py_True) return PUTS(b, "true");
    if (v == Py_False) return PUTS(b, "false");
    if (v == Py_None) return PUTS(b, "null");
    if (PyFloat_CheckExact(v)) {
        double d = PyFloat_AS_DOUBLE(v);
        if (d != d || d - d != 0.0) return PUTS(b, "null"); /* orjson: NaN and infinities as null */
        return put_float(self, b, d);
    }
    if (PyLong_CheckExact(v)) return put_int_field(b, v);
    if (PyDict_CheckExact(v)) {
        if (put_char(b, '{') < 0) return -1;
        Py_ssize_t pos = 0, i = 0;
        PyObject *k, *x;
        while (PyDict_Next(v, &pos, &k, &x)) {
            if (!PyUnicode_CheckExact(k)) return unsupported("dict key of another type");
            Py_INCREF(x);
            int rc = (i++ && put_char(b, ',') < 0) || put_str(b, k) < 0 || put_char(b, ':') < 0 ||
                     put_plain(self, b, x, depth + 1) < 0;
            Py_DECREF(x);
            if (rc) return -1;
        }
        return put_char(b, '}');
    }
    if (PyList_CheckExact(v)) {
        if (put_char(b, '[') < 0) return -1;
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(v); i++) {
            PyObject *x = PyList_GET_ITEM(v, i);
            Py_INCREF(x);
            int rc = (i && put_char(b, ',') < 0) || put_plain(self, b, x, depth + 1) < 0;
            Py_DECREF(x);
            if (rc) return -1;
        }
        return put_char(b, ']');
    }
    return unsupported("encode_any_value returned another type");
}

/* {"arrayValue":{"values":[...]}} for a tuple or list */
static int put_array(Encoder *self, Buf *b, PyObject *v, int depth) {
    if (PUTS(b, "{\"" JK_ARRAY_VALUE "\":{\"" JK_VALUES "\":[") < 0) return -1;
    int is_list = PyList_CheckExact(v);
    for (Py_ssize_t i = 0; i < (is_list ? PyList_GET_SIZE(v) : PyTuple_GET_SIZE(v)); i++) {
        PyObject *x = is_list ? PyList_GET_ITEM(v, i) : PyTuple_GET_ITEM(v, i);
        Py_INCREF(x); /* a list may change under a callback (str() of an element) */
        int rc = (i && put_char(b, ',') < 0) || put_value(self, b, x, depth + 1) < 0;
        Py_DECREF(x);
        if (rc) return -1;
    }
    return PUTS(b, "]}}");
}

/* {"kvlistValue":{"values":[{"key":..,"value":..},...]}} for a dict */
static int put_kvlist(Encoder *self, Buf *b, PyObject *v, int depth) {
    if (PUTS(b, "{\"" JK_KVLIST_VALUE "\":{\"" JK_VALUES "\":[") < 0) return -1;
    Py_ssize_t pos = 0, i = 0;
    PyObject *k, *x;
    Py_INCREF(v);
    while (PyDict_Next(v, &pos, &k, &x)) {
        Py_INCREF(k);
        Py_INCREF(x);
        int rc = (i++ && put_char(b, ',') < 0) || put_pair(self, b, k, x, depth + 1) < 0;
        Py_DECREF(k);
        Py_DECREF(x);
        if (rc) {
            Py_DECREF(v);
            return -1;
        }
    }
    Py_DECREF(v);
    return PUTS(b, "]}}");
}

/* an OTLP/JSON AnyValue, as json_codec.encode_any_value + orjson write it */
static int put_value(Encoder *self, Buf *b, PyObject *v, int depth) {
    if (depth > MAX_DEPTH) return unsupported("nested too deeply");
    PyTypeObject *t = Py_TYPE(v);
    if (t == &PyUnicode_Type) {
        return PUTS(b, "{\"" JK_STRING_VALUE "\":") < 0 || put_str(b, v) < 0 || put_char(b, '}') < 0 ? -1 : 0;
    }
    if (t == &PyLong_Type) {
        int overflow;
        long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (x == -1 && PyErr_Occurred()) return -1;
        if (!overflow) {
            return PUTS(b, "{\"" JK_INT_VALUE "\":\"") < 0 || put_i64(b, x) < 0 || PUTS(b, "\"}") < 0 ? -1 : 0;
        }
        PyObject *s = PyObject_Str(v); /* beyond int64: a decimal string, as the protobuf encoder writes it */
        if (s == NULL) return -1;
        int rc = PUTS(b, "{\"" JK_STRING_VALUE "\":") < 0 || put_str(b, s) < 0 || put_char(b, '}') < 0 ? -1 : 0;
        Py_DECREF(s);
        return rc;
    }
    if (t == &PyBool_Type) return v == Py_True ? PUTS(b, "{\"" JK_BOOL_VALUE "\":true}") : PUTS(b, "{\"" JK_BOOL_VALUE "\":false}");
    if (t == &PyFloat_Type) {
        double d = PyFloat_AS_DOUBLE(v);
        if (d != d) return PUTS(b, "{\"" JK_DOUBLE_VALUE "\":\"NaN\"}");
        if (d - d != 0.0)
            return d > 0 ? PUTS(b, "{\"" JK_DOUBLE_VALUE "\":\"Infinity\"}") : PUTS(b, "{\"" JK_DOUBLE_VALUE "\":\"-Infinity\"}");
        return PUTS(b, "{\"" JK_DOUBLE_VALUE "\":") < 0 || put_float(self, b, d) < 0 || put_char(b, '}') < 0 ? -1 : 0;
    }
    if (t == &PyBytes_Type) {
        return PUTS(b, "{\"" JK_BYTES_VALUE "\":") < 0 ||
                       put_b64(b, (const unsigned char *)PyBytes_AS_STRING(v), PyBytes_GET_SIZE(v)) < 0 ||
                       put_char(b, '}') < 0
                   ? -1
                   : 0;
    }
    if (t == &PyByteArray_Type) {
        PyObject *copy = PyBytes_FromObject(v); /* bytes(v), as the codec does */
        if (copy == NULL) return -1;
        int rc = PUTS(b, "{\"" JK_BYTES_VALUE "\":") < 0 ||
                         put_b64(b, (const unsigned char *)PyBytes_AS_STRING(copy), PyBytes_GET_SIZE(copy)) < 0 ||
                         put_char(b, '}') < 0
                     ? -1
                     : 0;
        Py_DECREF(copy);
        return rc;
    }
    if (t == &PyTuple_Type || t == &PyList_Type) return put_array(self, b, v, depth);
    if (t == &PyDict_Type) return put_kvlist(self, b, v, depth);
    if (v == Py_None) return PUTS(b, "{}");
    /* numpy scalars, subclasses, other objects: the codec decides, this writes its dict */
    PyObject *d = PyObject_CallOneArg(self->encode_any_value, v);
    if (d == NULL) return -1;
    int rc = put_plain(self, b, d, depth + 1);
    Py_DECREF(d);
    return rc;
}

/* encoded on every use: a value that can change in place, or a key that is not a plain str */
static int needs_redo(PyObject *pair) {
    PyObject *k = PyTuple_GET_ITEM(pair, 0), *v = PyTuple_GET_ITEM(pair, 1);
    PyTypeObject *t = Py_TYPE(v);
    return !PyUnicode_CheckExact(k) ||
           !(t == &PyUnicode_Type || t == &PyLong_Type || t == &PyFloat_Type || t == &PyBool_Type ||
             t == &PyBytes_Type || t == &PyTuple_Type || v == Py_None);
}

static int check_pair(PyObject *pair) {
    if (!PyTuple_CheckExact(pair) || PyTuple_GET_SIZE(pair) != 2)
        return unsupported("attribute not a (key, value) tuple");
    return 0;
}

/* attributes joined by ',', without caching (resources, scopes, events, links) */
static int put_attrs_direct(Encoder *self, Buf *b, PyObject *attrs) {
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(attrs); i++) {
        PyObject *pair = PyTuple_GET_ITEM(attrs, i);
        if (check_pair(pair) < 0 || (i && put_char(b, ',') < 0) ||
            put_pair(self, b, PyTuple_GET_ITEM(pair, 0), PyTuple_GET_ITEM(pair, 1), 0) < 0)
            return -1;
    }
    return 0;
}

static void block_clear(Block *blk) {
    if (blk->frags != NULL) {
        for (Py_ssize_t i = 0; i < blk->n; i++) buf_free(&blk->frags[i]);
        PyMem_Free(blk->frags);
    }
    PyMem_Free(blk->redo);
    Py_CLEAR(blk->attrs);
    Py_CLEAR(blk->first);
    blk->frags = NULL;
    blk->redo = NULL;
    blk->n = 0;
}

static void blocks_clear(Encoder *self) {
    if (self->blocks == NULL) return;
    for (Py_ssize_t i = 0; i < BLOCK_SLOTS; i++) {
        if (self->blocks[i].first != NULL) block_clear(&self->blocks[i]);
    }
    self->nblocks = 0;
}

/* the block for (first pair, n): found, or a new empty one; NULL on memory error */
static Block *block_for(Encoder *self, PyObject *first, Py_ssize_t n) {
    size_t h = ((size_t)(uintptr_t)first >> 4) * (size_t)0x9E3779B97F4A7C15ULL ^ (size_t)n;
    for (;;) {
        for (size_t i = 0; i < BLOCK_SLOTS; i++) {
            Block *blk = &self->blocks[(h + i) % BLOCK_SLOTS];
            if (blk->first == first && blk->n == n) return blk;
            if (blk->first == NULL) {
                if (self->nblocks >= BLOCK_LIMIT) break;
                blk->frags = PyMem_Calloc((size_t)n, sizeof(Buf));
                blk->redo = PyMem_Calloc((size_t)n, 1);
                if (blk->frags == NULL || blk->redo == NULL) {
                    PyMem_Free(blk->frags);
                    PyMem_Free(blk->redo);
                    blk->frags = NULL;
                    blk->redo = NULL;
                    PyErr_NoMemory();
                    return NULL;
                }
                Py_INCREF(first);
                blk->first = first;
                blk->n = n;
                blk->attrs = NULL;
                self->nblocks++;
                return blk;
            }
        }
        blocks_clear(self); /* full: start over */
    }
}

/* span attributes joined by ',', through the block cache */
static int put_attrs_cached(Encoder *self, Buf *b, PyObject *attrs) {
    Py_ssize_t n = PyTuple_GET_SIZE(attrs);
    PyObject *first = PyTuple_GET_ITEM(attrs, 0);
    if (check_pair(first) < 0) return -1;
    Block *blk = block_for(self, first, n);
    if (blk == NULL) return -1;
    PyObject *prev = blk->attrs; /* kept alive by the block until replaced below */
    blk->attrs = NULL;           /* stale while the fragments are being updated */
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *pair = PyTuple_GET_ITEM(attrs, i);
        if (prev != NULL && pair == PyTuple_GET_ITEM(prev, i) && !blk->redo[i]) continue;
        Buf *f = &blk->frags[i];
        f->len = 0;
        if (check_pair(pair) < 0 ||
            put_pair(self, f, PyTuple_GET_ITEM(pair, 0), PyTuple_GET_ITEM(pair, 1), 0) < 0) {
            Py_XDECREF(prev);
            return -1;
        }
        blk->redo[i] = (unsigned char)needs_redo(pair);
    }
    Py_INCREF(attrs);
    blk->attrs = attrs;
    Py_XDECREF(prev);
    Py_ssize_t total = n;
    for (Py_ssize_t i = 0; i < n; i++) total += blk->frags[i].len;
    if (buf_reserve(b, total) < 0) return -1;
    char *o = b->p + b->len;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (i) *o++ = ',';
        memcpy(o, blk->frags[i].p, (size_t)blk->frags[i].len);
        o += blk->frags[i].len;
    }
    b->len = o - b->p;
    return 0;
}

/* ,"name":value for an integer field when it is not 0 */
static int put_count(Buf *b, PyObject *obj, Py_ssize_t off, const char *prefix, Py_ssize_t plen) {
    PyObject *v = field(obj, off);
    if (v == NULL) return -1;
    if (!PyLong_CheckExact(v)) return unsupported("integer field of another type");
    if (int_is_zero(v)) return 0;
    return put(b, prefix, plen) < 0 || put_int_field(b, v) < 0 ? -1 : 0;
}
#define PUT_COUNT(b, obj, off, lit) put_count((b), (obj), (off), (lit), (Py_ssize_t)(sizeof(lit) - 1))

/* ,"attributes":[...] when `attrs` (a tuple) is not empty; `cached`: a span's, through the per-call-site texts */
static int put_attributes(Encoder *self, Buf *b, PyObject *attrs, int cached) {
    if (PyTuple_GET_SIZE(attrs) == 0) return 0;
    Py_INCREF(attrs);
    int rc = PUTS(b, ",\"" JK_ATTRIBUTES "\":[") < 0 ||
             (cached ? put_attrs_cached(self, b, attrs) : put_attrs_direct(self, b, attrs)) < 0 || put_char(b, ']') < 0;
    Py_DECREF(attrs);
    return rc ? -1 : 0;
}

static int put_event(Encoder *self, Buf *b, PyObject *e) {
    if (Py_TYPE(e) != self->event_type) return unsupported("event of another type");
    PyObject *name, *attrs, *t;
    if ((t = field(e, self->event_off[E_TIME])) == NULL || PUTS(b, "{\"" JK_TIME_UNIX_NANO "\":\"") < 0 ||
        put_int_field(b, t) < 0 || PUTS(b, "\",\"" JK_NAME "\":") < 0 ||
        (name = str_field(e, self->event_off[E_NAME])) == NULL ||
        put_str(b, name) < 0 || (attrs = tuple_field(e, self->event_off[E_ATTRS])) == NULL ||
        put_attributes(self, b, attrs, 0) < 0)
        return -1;
    if (PUT_COUNT(b, e, self->event_off[E_DROPPED], ",\"" JK_DROPPED_ATTRIBUTES_COUNT "\":") < 0) return -1;
    return put_char(b, '}');
}

static int put_link(Encoder *self, Buf *b, PyObject *k) {
    if (Py_TYPE(k) != self->link_type) return unsupported("link of another type");
    PyObject *v;
    if (PUTS(b, "{\"" JK_TRACE_ID "\":\"") < 0 || (v = bytes_field(k, self->link_off[L_TRACE_ID])) == NULL ||
        put_hex(b, v) < 0 || PUTS(b, "\",\"" JK_SPAN_ID "\":\"") < 0 ||
        (v = bytes_field(k, self->link_off[L_SPAN_ID])) == NULL ||
        put_hex(b, v) < 0 || put_char(b, '"') < 0 || (v = str_field(k, self->link_off[L_TRACE_STATE])) == NULL)
        return -1;
    if (PyUnicode_GET_LENGTH(v) && (PUTS(b, ",\"" JK_TRACE_STATE "\":") < 0 || put_str(b, v) < 0)) return -1;
    if ((v = tuple_field(k, self->link_off[L_ATTRS])) == NULL || put_attributes(self, b, v, 0) < 0) return -1;
    if (PUT_COUNT(b, k, self->link_off[L_DROPPED], ",\"" JK_DROPPED_ATTRIBUTES_COUNT "\":") < 0 ||
        PUT_COUNT(b, k, self->link_off[L_FLAGS], ",\"" JK_FLAGS "\":") < 0)
        return -1;
    return put_char(b, '}');
}

/* a tuple of events or links, as ,"<what>":[...] when not empty */
static int put_list(Encoder *self, Buf *b, PyObject *span, Py_ssize_t off, const char *prefix, Py_ssize_t plen,
                    int (*one)(Encoder *, Buf *, PyObject *)) {
    PyObject *items = tuple_field(span, off);
    if (items == NULL) return -1;
    if (PyTuple_GET_SIZE(items) == 0) return 0;
    Py_INCREF(items);
    int rc = put(b, prefix, plen);
    for (Py_ssize_t i = 0; rc == 0 && i < PyTuple_GET_SIZE(items); i++) {
        PyObject *x = PyTuple_GET_ITEM(items, i);
        rc = (i && put_char(b, ',') < 0) || one(self, b, x) < 0 ? -1 : 0;
    }
    Py_DECREF(items);
    return rc < 0 ? -1 : put_char(b, ']');
}

/* one span, as json_codec.encode_line writes it; every field is read just before it is written */
static int put_span(Encoder *self, Buf *b, PyObject *s) {
    const Py_ssize_t *off = self->span_off;
    if (Py_TYPE(s) != self->span_type) return unsupported("span of another type");
    PyObject *v, *code;
    if (PUTS(b, "{\"" JK_TRACE_ID "\":\"") < 0 || (v = bytes_field(s, off[F_TRACE_ID])) == NULL || put_hex(b, v) < 0 ||
        PUTS(b, "\",\"" JK_SPAN_ID "\":\"") < 0 || (v = bytes_field(s, off[F_SPAN_ID])) == NULL || put_hex(b, v) < 0 ||
        put_char(b, '"') < 0 || (v = str_field(s, off[F_TRACE_STATE])) == NULL)
        return -1;
    if (PyUnicode_GET_LENGTH(v) && (PUTS(b, ",\"" JK_TRACE_STATE "\":") < 0 || put_str(b, v) < 0)) return -1;
    if ((v = field(s, off[F_PARENT])) == NULL) return -1;
    if (v != Py_None) {
        if (!PyBytes_CheckExact(v)) return unsupported("parent id of another type than bytes");
        if (PyBytes_GET_SIZE(v) && (PUTS(b, ",\"" JK_PARENT_SPAN_ID "\":\"") < 0 || put_hex(b, v) < 0 || put_char(b, '"') < 0))
            return -1;
    }
    if (PUT_COUNT(b, s, off[F_FLAGS], ",\"" JK_FLAGS "\":") < 0 || (v = str_field(s, off[F_NAME])) == NULL ||
        PUTS(b, ",\"" JK_NAME "\":") < 0 || put_str(b, v) < 0 || PUT_COUNT(b, s, off[F_KIND], ",\"" JK_KIND "\":") < 0 ||
        (v = field(s, off[F_START])) == NULL || PUTS(b, ",\"" JK_START_TIME_UNIX_NANO "\":\"") < 0 || put_int_field(b, v) < 0 ||
        (v = field(s, off[F_END])) == NULL || PUTS(b, "\",\"" JK_END_TIME_UNIX_NANO "\":\"") < 0 || put_int_field(b, v) < 0 ||
        put_char(b, '"') < 0 || (v = tuple_field(s, off[F_ATTRS])) == NULL || put_attributes(self, b, v, 1) < 0)
        return -1;
    if (PUT_COUNT(b, s, off[F_DROPPED_ATTRS], ",\"" JK_DROPPED_ATTRIBUTES_COUNT "\":") < 0 ||
        put_list(self, b, s, off[F_EVENTS], ",\"" JK_EVENTS "\":[", sizeof(",\"" JK_EVENTS "\":[") - 1, put_event) < 0 ||
        PUT_COUNT(b, s, off[F_DROPPED_EVENTS], ",\"" JK_DROPPED_EVENTS_COUNT "\":") < 0 ||
        put_list(self, b, s, off[F_LINKS], ",\"" JK_LINKS "\":[", sizeof(",\"" JK_LINKS "\":[") - 1, put_link) < 0 ||
        PUT_COUNT(b, s, off[F_DROPPED_LINKS], ",\"" JK_DROPPED_LINKS_COUNT "\":") < 0 ||
        (v = str_field(s, off[F_STATUS_MSG])) == NULL || (code = field(s, off[F_STATUS_CODE])) == NULL)
        return -1;
    if (!PyLong_CheckExact(code)) return unsupported("integer field of another type");
    int has_code = !int_is_zero(code);
    if (has_code || PyUnicode_GET_LENGTH(v)) {
        if (PUTS(b, ",\"" JK_STATUS "\":{") < 0) return -1;
        if (PyUnicode_GET_LENGTH(v) && (PUTS(b, "\"" JK_MESSAGE "\":") < 0 || put_str(b, v) < 0)) return -1;
        if (has_code &&
            ((PyUnicode_GET_LENGTH(v) && put_char(b, ',') < 0) || PUTS(b, "\"" JK_CODE "\":") < 0 ||
             put_int_field(b, code) < 0))
            return -1;
        if (put_char(b, '}') < 0) return -1;
    }
    return put_char(b, '}');
}

/* ,"schemaUrl":"..." when not empty */
static int put_schema(Buf *b, PyObject *span, Py_ssize_t off) {
    PyObject *v = str_field(span, off);
    if (v == NULL) return -1;
    if (PyUnicode_GET_LENGTH(v) == 0) return 0;
    return PUTS(b, ",\"" JK_SCHEMA_URL "\":") < 0 || put_str(b, v) < 0 ? -1 : 0;
}

/* {"resource":{...},"scopeSpans":[ for the resource of span `first` */
static int open_resource(Encoder *self, Buf *b, PyObject *first) {
    PyObject *attrs = tuple_field(first, self->span_off[F_RESOURCE]);
    if (attrs == NULL || PUTS(b, "{\"" JK_RESOURCE "\":") < 0) return -1;
    if (PyTuple_GET_SIZE(attrs) == 0) return PUTS(b, "{},\"" JK_SCOPE_SPANS "\":[");
    Py_INCREF(attrs);
    int rc = PUTS(b, "{\"" JK_ATTRIBUTES "\":[") < 0 || put_attrs_direct(self, b, attrs) < 0 ||
             PUTS(b, "]},\"" JK_SCOPE_SPANS "\":[") < 0;
    Py_DECREF(attrs);
    return rc ? -1 : 0;
}

/* {"scope":{...},"spans":[ for the scope of span `first` */
static int open_scope(Encoder *self, Buf *b, PyObject *first) {
    const Py_ssize_t *off = self->span_off;
    PyObject *name = str_field(first, off[F_SCOPE_NAME]), *version, *attrs;
    if (name == NULL || (version = str_field(first, off[F_SCOPE_VERSION])) == NULL ||
        (attrs = tuple_field(first, off[F_SCOPE_ATTRS])) == NULL || PUTS(b, "{\"" JK_SCOPE "\":{") < 0)
        return -1;
    int any = 0;
    if (PyUnicode_GET_LENGTH(name)) {
        if (PUTS(b, "\"" JK_NAME "\":") < 0 || put_str(b, name) < 0) return -1;
        any = 1;
    }
    if (PyUnicode_GET_LENGTH(version)) {
        if ((any && put_char(b, ',') < 0) || PUTS(b, "\"" JK_VERSION "\":") < 0 || put_str(b, version) < 0) return -1;
        any = 1;
    }
    if (PyTuple_GET_SIZE(attrs)) {
        Py_INCREF(attrs);
        int rc = (any && put_char(b, ',') < 0) || PUTS(b, "\"" JK_ATTRIBUTES "\":[") < 0 ||
                 put_attrs_direct(self, b, attrs) < 0 || put_char(b, ']') < 0;
        Py_DECREF(attrs);
        if (rc) return -1;
    }
    return PUTS(b, "},\"" JK_SPANS "\":[");
}

/* every span's group fields are the very objects of the first span's: one resource, one scope */
static int one_group(Encoder *self, PyObject *spans) {
    static const int group_fields[] = {F_RESOURCE, F_SCOPE_ATTRS, F_SCOPE_NAME, F_SCOPE_VERSION,
                                       F_RESOURCE_SCHEMA, F_SCHEMA_URL};
    Py_ssize_t n = PyTuple_GET_SIZE(spans);
    PyObject *first = PyTuple_GET_ITEM(spans, 0);
    if (Py_TYPE(first) != self->span_type) return unsupported("span of another type");
    for (Py_ssize_t i = 1; i < n; i++) {
        PyObject *s = PyTuple_GET_ITEM(spans, i);
        if (Py_TYPE(s) != self->span_type) return unsupported("span of another type");
        for (int f = 0; f < 6; f++) {
            Py_ssize_t off = self->span_off[group_fields[f]];
            if (SLOT(s, off) != SLOT(first, off)) return 0;
        }
    }
    return 1;
}

/* the spans of one scope group: a list (from group_spans) or the batch tuple */
static int put_spans(Encoder *self, Buf *b, PyObject *spans) {
    int is_list = PyList_CheckExact(spans);
    Py_ssize_t start = b->len;
    for (Py_ssize_t i = 0; i < (is_list ? PyList_GET_SIZE(spans) : PyTuple_GET_SIZE(spans)); i++) {
        PyObject *s = is_list ? PyList_GET_ITEM(spans, i) : PyTuple_GET_ITEM(spans, i);
        Py_INCREF(s);
        int rc = (i && put_char(b, ',') < 0) || put_span(self, b, s) < 0;
        Py_DECREF(s);
        if (rc) return -1;
        if (i == 0) { /* room for the others at the first one's size (+1/8 when growing: a realloc copies the
                       * whole buffer, 1,900 instructions per span), unless it is huge: fewer reallocations */
            Py_ssize_t one = b->len - start + 1;
            Py_ssize_t rest = (is_list ? PyList_GET_SIZE(spans) : PyTuple_GET_SIZE(spans)) - 1;
            if (one <= 16384 && rest > 0 && rest <= PY_SSIZE_T_MAX / 2 / 16384 && one * rest > b->cap - b->len &&
                buf_grow(b, (one + one / 8) * rest, 1) < 0)
                return -1;
        }
    }
    return 0;
}

static int put_groups(Encoder *self, Buf *b, PyObject *spans) {
    int one = one_group(self, spans);
    if (one < 0) return -1;
    PyObject *first = PyTuple_GET_ITEM(spans, 0);
    if (one) {
        return open_resource(self, b, first) < 0 || open_scope(self, b, first) < 0 || put_spans(self, b, spans) < 0 ||
                       put_char(b, ']') < 0 || put_schema(b, first, self->span_off[F_SCHEMA_URL]) < 0 ||
                       PUTS(b, "}]") < 0 || put_schema(b, first, self->span_off[F_RESOURCE_SCHEMA]) < 0 ||
                       put_char(b, '}') < 0
                   ? -1
                   : 0;
    }
    /* several groups: json_codec.group_spans decides them, exactly as for the Python encoder */
    PyObject *groups = PyObject_CallFunctionObjArgs(self->group_spans, spans, Identity, NULL);
    if (groups == NULL) return -1;
    int rc = 0;
    if (!PyList_CheckExact(groups)) rc = unsupported("group_spans returned another type");
    for (Py_ssize_t r = 0; rc == 0 && r < PyList_GET_SIZE(groups); r++) {
        PyObject *g = PyList_GET_ITEM(groups, r);
        if (!PyTuple_CheckExact(g) || PyTuple_GET_SIZE(g) != 2 || !PyList_CheckExact(PyTuple_GET_ITEM(g, 1))) {
            rc = unsupported("group_spans returned another shape");
            break;
        }
        PyObject *rfirst = PyTuple_GET_ITEM(g, 0), *scopes = PyTuple_GET_ITEM(g, 1);
        if (Py_TYPE(rfirst) != self->span_type) {
            rc = unsupported("span of another type");
            break;
        }
        if ((r && put_char(b, ',') < 0) || open_resource(self, b, rfirst) < 0) {
            rc = -1;
            break;
        }
        for (Py_ssize_t k = 0; rc == 0 && k < PyList_GET_SIZE(scopes); k++) {
            PyObject *sg = PyList_GET_ITEM(scopes, k);
            if (!PyTuple_CheckExact(sg) || PyTuple_GET_SIZE(sg) != 2 || !PyList_CheckExact(PyTuple_GET_ITEM(sg, 1)) ||
                Py_TYPE(PyTuple_GET_ITEM(sg, 0)) != self->span_type) {
                rc = unsupported("group_spans returned another shape");
                break;
            }
            PyObject *sfirst = PyTuple_GET_ITEM(sg, 0);
            if ((k && put_char(b, ',') < 0) || open_scope(self, b, sfirst) < 0 ||
                put_spans(self, b, PyTuple_GET_ITEM(sg, 1)) < 0 || put_char(b, ']') < 0 ||
                put_schema(b, sfirst, self->span_off[F_SCHEMA_URL]) < 0 || put_char(b, '}') < 0)
                rc = -1;
        }
        if (rc == 0 && (put_char(b, ']') < 0 || put_schema(b, rfirst, self->span_off[F_RESOURCE_SCHEMA]) < 0 ||
                        put_char(b, '}') < 0))
            rc = -1;
    }
    Py_DECREF(groups);
    return rc;
}

static PyObject *Encoder_encode(Encoder *self, PyObject *arg) {
    if (self->busy) return unsupported("re-entrant call"), NULL;
    PyObject *spans = PySequence_Tuple(arg); /* a snapshot: a list could change under a callback */
    if (spans == NULL) return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(spans);
    /* room for the line at the last batch's size per span (at most 16 KiB each: a batch of huge spans must not
     * make every later one allocate as much); the buffer grows past it where needed */
    Py_ssize_t per_span = self->bytes_per_span < 16384 ? self->bytes_per_span : 16384;
    if (n > PY_SSIZE_T_MAX / 4 / (per_span + 1)) {
        Py_DECREF(spans);
        return PyErr_NoMemory();
    }
    Buf b = {NULL, 0, 0, PyBytes_FromStringAndSize(NULL, per_span * n + 64)};
    if (b.line == NULL) {
        Py_DECREF(spans);
        return NULL;
    }
    b.p = PyBytes_AS_STRING(b.line);
    b.cap = per_span * n + 64;
    PyObject *result = NULL;
    self->busy = 1;
    if (PUTS(&b, "{\"" JK_RESOURCE_SPANS "\":[") == 0 && (n == 0 || put_groups(self, &b, spans) == 0) &&
        PUTS(&b, "]}\n") == 0 && _PyBytes_Resize(&b.line, b.len) == 0) {
        result = b.line; /* the buffer becomes the line */
        b.line = NULL;
        if (n) self->bytes_per_span = b.len / n + 16;
    }
    self->busy = 0;
    Py_XDECREF(b.line); /* on failure (NULL where a failed resize has freed it already) */
    Py_DECREF(spans);
    return result;
}

static PyObject *Encoder_cached_blocks(Encoder *self, void *Py_UNUSED(closure)) {
    return PyLong_FromSsize_t(self->nblocks);
}

static PyObject *Encoder_clear(Encoder *self, PyObject *Py_UNUSED(unused)) {
    if (self->busy) return unsupported("re-entrant call"), NULL;
    blocks_clear(self);
    memset(self->floats, 0, sizeof self->floats);
    Py_RETURN_NONE;
}

/* the slot offsets of cls's fields (member descriptors of a slotted class) */
static int offsets(PyObject *cls, const char *const *names, int n, Py_ssize_t *out) {
    if (!PyType_Check(cls)) {
        PyErr_SetString(PyExc_TypeError, "expected a class");
        return -1;
    }
    for (int i = 0; i < n; i++) {
        if ((out[i] = lt_slot_offset_s((PyTypeObject *)cls, names[i])) < 0) {
            PyErr_Format(PyExc_TypeError, "%R.%s is not a slot", cls, names[i]);
            return -1;
        }
    }
    return 0;
}

static PyObject *Encoder_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"span_type", "event_type", "link_type", "encode_any_value", "group_spans", NULL};
    PyObject *span_type, *event_type, *link_type, *encode_any_value, *group_spans;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOOO:Encoder", kwlist, &span_type, &event_type, &link_type,
                                     &encode_any_value, &group_spans))
        return NULL;
    Encoder *self = (Encoder *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    if (offsets(span_type, SPANDATA_FIELDS, N_SPANDATA_FIELDS, self->span_off) < 0 ||
        offsets(event_type, EVENT_FIELDS, N_EVENT_FIELDS, self->event_off) < 0 ||
        offsets(link_type, LINK_FIELDS, N_LINK_FIELDS, self->link_off) < 0) {
        Py_DECREF(self);
        return NULL;
    }
    self->blocks = PyMem_Calloc(BLOCK_SLOTS, sizeof(Block));
    if (self->blocks == NULL) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    Py_INCREF(span_type);
    self->span_type = (PyTypeObject *)span_type;
    Py_INCREF(event_type);
    self->event_type = (PyTypeObject *)event_type;
    Py_INCREF(link_type);
    self->link_type = (PyTypeObject *)link_type;
    Py_INCREF(encode_any_value);
    self->encode_any_value = encode_any_value;
    Py_INCREF(group_spans);
    self->group_spans = group_spans;
    self->bytes_per_span = 256;
    return (PyObject *)self;
}

static int Encoder_traverse(Encoder *self, visitproc visit, void *arg) {
    Py_VISIT(self->span_type);
    Py_VISIT(self->event_type);
    Py_VISIT(self->link_type);
    Py_VISIT(self->encode_any_value);
    Py_VISIT(self->group_spans);
    if (self->blocks != NULL) {
        for (Py_ssize_t i = 0; i < BLOCK_SLOTS; i++) {
            Py_VISIT(self->blocks[i].first);
            Py_VISIT(self->blocks[i].attrs);
        }
    }
    return 0;
}

static int Encoder_clear_refs(Encoder *self) {
    if (!self->busy) blocks_clear(self);
    Py_CLEAR(self->span_type);
    Py_CLEAR(self->event_type);
    Py_CLEAR(self->link_type);
    Py_CLEAR(self->encode_any_value);
    Py_CLEAR(self->group_spans);
    return 0;
}

static void Encoder_dealloc(Encoder *self) {
    PyObject_GC_UnTrack(self);
    Encoder_clear_refs(self);
    blocks_clear(self);
    PyMem_Free(self->blocks);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef Encoder_methods[] = {
    {"encode", (PyCFunction)Encoder_encode, METH_O,
     "encode(spans) -> bytes: one OTLP JSON Lines line (with its newline) holding spans."},
    {"clear", (PyCFunction)Encoder_clear, METH_NOARGS, "clear(): drop the caches."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Encoder_getset[] = {
    {"cached_blocks", (getter)Encoder_cached_blocks, NULL, "attribute blocks held in the cache", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject EncoderType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "launchtrace.otlp._jsonenc.Encoder",
    .tp_basicsize = sizeof(Encoder),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Encoder(span_type, event_type, link_type, encode_any_value, group_spans): SpanData batches as OTLP "
              "JSON Lines, byte for byte as launchtrace.otlp.json_codec.encode_line writes them.",
    .tp_new = Encoder_new,
    .tp_dealloc = (destructor)Encoder_dealloc,
    .tp_traverse = (traverseproc)Encoder_traverse,
    .tp_clear = (inquiry)Encoder_clear_refs,
    .tp_methods = Encoder_methods,
    .tp_getset = Encoder_getset,
};

static PyObject *identity(PyObject *Py_UNUSED(module), PyObject *x) {
    return Py_NewRef(x);
}

static PyMethodDef identity_def = {"identity", identity, METH_O, "identity(x) -> x"};

/* the float text this module writes for x (for tests: it must equal orjson.dumps(x)) */
static PyObject *format_float(PyObject *Py_UNUSED(module), PyObject *x) {
    double d = PyFloat_AsDouble(x);
    if (d == -1.0 && PyErr_Occurred()) return NULL;
    if (d != d || d - d != 0.0) {
        PyErr_SetString(PyExc_ValueError, "not finite");
        return NULL;
    }
    char text[32];
    int n = format_double(d, text, sizeof text);
    if (n < 0) return NULL;
    return PyBytes_FromStringAndSize(text, n);
}

static PyMethodDef module_methods[] = {
    {"format_float", format_float, METH_O, "format_float(x) -> bytes: the JSON text written for a finite float."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "launchtrace.otlp._jsonenc",
    "SpanData -> OTLP JSON Lines, compiled (without a compiler: launchtrace.otlp.json_codec.encode_line).", -1, module_methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__jsonenc(void) {
    jf_hex_init();
    if (PyType_Ready(&EncoderType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module_def);
    if (m == NULL) return NULL;
    Unsupported = PyErr_NewExceptionWithDoc("launchtrace.otlp._jsonenc.Unsupported",
                                            "A batch this encoder leaves to the Python encoder.", NULL, NULL);
    Identity = PyCFunction_New(&identity_def, NULL);
    if (Unsupported == NULL || Identity == NULL || PyModule_AddObjectRef(m, "Unsupported", Unsupported) < 0 ||
        PyModule_AddObjectRef(m, "Encoder", (PyObject *)&EncoderType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
