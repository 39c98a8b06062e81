/* JSON syntax check that allocates nothing: for launchtrace.otlp.jsoncheck (the Python reference there).
 *
 * Why: orjson (yyjson) builds its whole document before it can say a long line is broken; a 50 MB line of
 * small numbers with a stray '}' at the end cost 450 MB to be told so. Lines past a threshold are checked
 * here first (about 1 GB/s, no memory), and only valid ones are parsed.
 *
 * check(buffer) -> None when the bytes are one JSON value (RFC 8259, UTF-8, surrounding whitespace allowed,
 * nesting up to MAX_DEPTH like orjson), else (offset, message, truncated) for the first fault.
 * duplicate_key(buffer) -> the first key given twice in one object (orjson keeps the last silently), compared
 * as raw bytes with up to MAX_COMPARED earlier keys of its object (bounded time on hostile objects).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#define MAX_DEPTH 1024

typedef struct {
    const unsigned char *s, *p, *end;
    const char *err;
    int truncated;
    /* duplicate keys (when keys != NULL): the keys of the open objects, each object's from its base */
    Py_ssize_t (*keys)[2]; /* (offset, length) of the raw key bytes, quotes excluded */
    Py_ssize_t nkeys, cap;
    Py_ssize_t dup_at, dup_len; /* the first key seen twice in one object; dup_at -1: none */
    int nomem;
} C;

#define MAX_COMPARED 32 /* a key is compared with at most this many earlier keys of its object */

static void note_key(C *c, Py_ssize_t base, Py_ssize_t at, Py_ssize_t len) {
    if (c->keys == NULL || c->dup_at >= 0) return;
    Py_ssize_t from = c->nkeys - MAX_COMPARED > base ? c->nkeys - MAX_COMPARED : base;
    for (Py_ssize_t i = from; i < c->nkeys; i++)
        if (c->keys[i][1] == len && memcmp(c->s + c->keys[i][0], c->s + at, (size_t)len) == 0) {
            c->dup_at = at;
            c->dup_len = len;
            return;
        }
    if (c->nkeys == c->cap) {
        Py_ssize_t cap = c->cap ? c->cap * 2 : 64;
        void *grown = realloc(c->keys, (size_t)cap * sizeof(c->keys[0]));
        if (grown == NULL) { c->nomem = 1; return; }
        c->keys = grown;
        c->cap = cap;
    }
    c->keys[c->nkeys][0] = at;
    c->keys[c->nkeys][1] = len;
    c->nkeys++;
}

static int fail(C *c, const char *msg) {
    if (c->err == NULL) {
        c->err = msg;
        c->truncated = c->p >= c->end;
    }
    return -1;
}

static inline void ws(C *c) {
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r')) c->p++;
}

static int utf8(C *c) { /* c->p at a byte >= 0x80 */
    const unsigned char *p = c->p;
    Py_ssize_t left = c->end - p;
    unsigned b = p[0];
    int n;
    uint32_t cp;
    if (b >= 0xC2 && b <= 0xDF) { n = 2; cp = b & 0x1F; }
    else if (b >= 0xE0 && b <= 0xEF) { n = 3; cp = b & 0x0F; }
    else if (b >= 0xF0 && b <= 0xF4) { n = 4; cp = b & 0x07; }
    else return fail(c, "invalid UTF-8");
    if (left < n) { c->p = c->end; return fail(c, "unexpected end of data in a string"); }
    for (int i = 1; i < n; i++) {
        if ((p[i] & 0xC0) != 0x80) return fail(c, "invalid UTF-8");
        cp = (cp << 6) | (p[i] & 0x3F);
    }
    if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)) || (cp >= 0xD800 && cp <= 0xDFFF))
        return fail(c, "invalid UTF-8");
    c->p += n;
    return 0;
}

static inline int hexval(unsigned ch) {
    if (ch >= '0' && ch <= '9') return (int)(ch - '0');
    if (ch >= 'a' && ch <= 'f') return (int)(ch - 'a' + 10);
    if (ch >= 'A' && ch <= 'F') return (int)(ch - 'A' + 10);
    return -1;
}

static int hex4(C *c, unsigned *out) { /* c->p after "\u" */
    if (c->end - c->p < 4) { c->p = c->end; return fail(c, "unexpected end of data in a \\u escape"); }
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hexval(c->p[i]);
        if (h < 0) return fail(c, "invalid \\u escape");
        v = (v << 4) | (unsigned)h;
    }
    c->p += 4;
    *out = v;
    return 0;
}

static int string(C *c) { /* c->p at the opening quote */
    c->p++;
    while (1) {
        while (c->p < c->end && *c->p >= 0x20 && *c->p != '"' && *c->p != '\\' && *c->p < 0x80) c->p++;
        if (c->p >= c->end) return fail(c, "unexpected end of data in a string");
        unsigned ch = *c->p;
        if (ch == '"') { c->p++; return 0; }
        if (ch < 0x20) return fail(c, "control character in a string");
        if (ch >= 0x80) { if (utf8(c) < 0) return -1; continue; }
        c->p++; /* backslash */
        if (c->p >= c->end) return fail(c, "unexpected end of data in a string");
        ch = *c->p++;
        if (ch == 'u') {
            unsigned v;
            if (hex4(c, &v) < 0) return -1;
            if (v >= 0xDC00 && v <= 0xDFFF) return fail(c, "lone trailing surrogate in a \\u escape");
            if (v >= 0xD800 && v <= 0xDBFF) {
                if (c->end - c->p < 2) { c->p = c->end; return fail(c, "unexpected end of data in a \\u escape"); }
                if (c->p[0] != '\\' || c->p[1] != 'u') return fail(c, "lone leading surrogate in a \\u escape");
                c->p += 2;
                if (hex4(c, &v) < 0) return -1;
                if (v < 0xDC00 || v > 0xDFFF) return fail(c, "lone leading surrogate in a \\u escape");
            }
        } else if (!(ch == '"' || ch == '\\' || ch == '/' || ch == 'b' || ch == 'f' || ch == 'n' || ch == 'r' ||
                     ch == 't')) {
            c->p--;
            return fail(c, "invalid escape in a string");
        }
    }
}

static inline int is_digit(C *c) { return c->p < c->end && *c->p >= '0' && *c->p <= '9'; }

static int number(C *c) {
    if (c->p < c->end && *c->p == '-') c->p++;
    if (!is_digit(c)) return fail(c, c->p >= c->end ? "unexpected end of data in a number" : "invalid number");
    if (*c->p == '0') c->p++;
    else while (is_digit(c)) c->p++;
    if (c->p < c->end && *c->p == '.') {
        c->p++;
        if (!is_digit(c)) return fail(c, c->p >= c->end ? "unexpected end of data in a number" : "invalid number");
        while (is_digit(c)) c->p++;
    }
    if (c->p < c->end && (*c->p == 'e' || *c->p == 'E')) {
        c->p++;
        if (c->p < c->end && (*c->p == '+' || *c->p == '-')) c->p++;
        if (!is_digit(c)) return fail(c, c->p >= c->end ? "unexpected end of data in a number" : "invalid number");
        while (is_digit(c)) c->p++;
    }
    return 0;
}

static int word(C *c, const char *w, Py_ssize_t n) {
    Py_ssize_t left = c->end - c->p;
    Py_ssize_t k = left < n ? left : n;
    if (memcmp(c->p, w, (size_t)k) != 0) return fail(c, "unexpected character");
    if (left < n) { c->p = c->end; return fail(c, "unexpected end of data"); }
    c->p += n;
    return 0;
}

/* One value, iteratively: stack[i] is 1 for an object, 0 for an array. */
static int value(C *c) {
    unsigned char stack[MAX_DEPTH];
    Py_ssize_t bases[MAX_DEPTH]; /* where each open object's keys start in c->keys */
    int depth = 0;
    while (1) {
        ws(c);
        if (c->p >= c->end) return fail(c, "unexpected end of data");
        unsigned ch = *c->p;
        if (ch == '{' || ch == '[') {
            if (depth == MAX_DEPTH) return fail(c, "nested deeper than 1024 levels");
            bases[depth] = c->nkeys;
            stack[depth++] = ch == '{';
            c->p++;
            ws(c);
            if (c->p >= c->end) return fail(c, "unexpected end of data");
            if (*c->p == (ch == '{' ? '}' : ']')) { c->p++; depth--; c->nkeys = bases[depth]; goto after; }
            if (ch == '{') goto key;
            continue;
        }
        if (ch == '"') { if (string(c) < 0) return -1; }
        else if (ch == '-' || (ch >= '0' && ch <= '9')) { if (number(c) < 0) return -1; }
        else if (ch == 't') { if (word(c, "true", 4) < 0) return -1; }
        else if (ch == 'f') { if (word(c, "false", 5) < 0) return -1; }
        else if (ch == 'n') { if (word(c, "null", 4) < 0) return -1; }
        else return fail(c, "unexpected character");
    after:
        while (1) {
            if (depth == 0) return 0;
            ws(c);
            if (c->p >= c->end) return fail(c, "unexpected end of data");
            ch = *c->p;
            int is_obj = stack[depth - 1];
            if (ch == ',') {
                c->p++;
                if (is_obj) goto key;
                break; /* next array item */
            }
            if (ch == (is_obj ? '}' : ']')) { c->p++; depth--; c->nkeys = bases[depth]; continue; }
            return fail(c, is_obj ? "expected ',' or '}'" : "expected ',' or ']'");
        }
        continue;
    key:
        ws(c);
        if (c->p >= c->end) return fail(c, "unexpected end of data");
        if (*c->p != '"') return fail(c, "expected a key (a string)");
        {
            const unsigned char *k = c->p;
            if (string(c) < 0) return -1;
            note_key(c, bases[depth - 1], k + 1 - c->s, c->p - k - 2);
        }
        ws(c);
        if (c->p >= c->end) return fail(c, "unexpected end of data");
        if (*c->p != ':') return fail(c, "expected ':'");
        c->p++;
    }
}

static PyObject *duplicate_key(PyObject *self, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    C c = {view.buf, view.buf, (const unsigned char *)view.buf + view.len, NULL, 0, NULL, 0, 0, -1, 0, 0};
    c.keys = malloc(64 * sizeof(c.keys[0]));
    c.cap = c.keys ? 64 : 0;
    Py_BEGIN_ALLOW_THREADS
    (void)value(&c);
    Py_END_ALLOW_THREADS
    free(c.keys);
    PyObject *out;
    if (c.keys == NULL || c.nomem)
        out = PyErr_NoMemory();
    else if (c.dup_at < 0)
        out = Py_NewRef(Py_None);
    else
        out = Py_BuildValue("(ny#)", c.dup_at, (const char *)c.s + c.dup_at, c.dup_len);
    PyBuffer_Release(&view);
    return out;
}

static PyObject *check(PyObject *self, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    C c = {view.buf, view.buf, (const unsigned char *)view.buf + view.len, NULL, 0, NULL, 0, 0, -1, 0, 0};
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = value(&c);
    if (rc == 0) {
        ws(&c);
        if (c.p < c.end) rc = fail(&c, "trailing data after the value");
    }
    Py_END_ALLOW_THREADS
    Py_ssize_t offset = c.p - c.s;
    PyBuffer_Release(&view);
    if (rc == 0) Py_RETURN_NONE;
    return Py_BuildValue("(nsO)", offset, c.err, c.truncated ? Py_True : Py_False);
}

static PyMethodDef methods[] = {
    {"check", check, METH_O, "check(buffer) -> None, or (offset, message, truncated) at the first fault."},
    {"duplicate_key", duplicate_key, METH_O,
     "duplicate_key(buffer) -> None, or (offset, raw key bytes) of the first key given twice in one object."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_jsoncheck",
    .m_doc = "A JSON syntax check that allocates nothing (reference: launchtrace.otlp.jsoncheck).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__jsoncheck(void) { return PyModule_Create(&module); }
