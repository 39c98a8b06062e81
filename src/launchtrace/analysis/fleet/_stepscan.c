/* The fleet baseline's fast path in C: a plain step's signature and times from its spans, and a block of
 * known steps folded into histogram buckets (reference: launchtrace.analysis.fleet.stepscan, in Python).
 *
 * Scanner.scan(spans) reads one trace's SpanData list and returns None (not a step this can vouch for: the
 * caller takes the straightforward path) or (root index, signature bytes, times bytes[, pointer indices]).
 * The signature is a sequence of int64 codes, self-delimiting: the number of record spans, then per record
 * span in issue order (by sequence number, then span order) its attribute count and one code per attribute:
 * an id for a (key, value) pair, -2 * id(key) for a volatile attribute (its value only checked to be an int),
 * -2 * id(key) - 1 for a pointer (a key ending in ".ptr" with an int value); then the pointers' pattern: each
 * pointer's rank in the order pointer values first appear, -1 for a null (0). Ids come from the `intern`
 * callable (Python), which maps values equal with their types equal (1, 1.0 and True apart) to one id and
 * never reuses an id; here an identity table in front of it holds a reference to each object it maps, so an
 * address is never reused while it is in the table. Equal signatures therefore mean equal keys, equal values
 * of every other attribute, and pointers that repeat in the same pattern. Which keys are pointers is checked
 * against the Python plan (launchtrace.analysis.fleet.fast) on a signature's first sight (`verify`).
 *
 * fold(...) turns a block of known steps' times into what a baseline accumulates (see its docstring); the
 * histogram indices are those of histogram.ExpHistogram.add at MAX_SCALE (math.log2 is libm's log2 of the
 * int rounded to a double, as here). Any overflow, or a launch without an end time: None (the Python path).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "../../_native.h"

#define MAX_SCALE 20
#define FIRST_SLOTS 1024
#define MAX_SLOTS (1 << 15)      /* identity table: emptied when half of this is in use */
#define MAX_TABLE_BYTES (1 << 25) /* or when the objects it holds come to about this much (32 MiB) */

/* K_SEQ: the volatile sequence number; K_REFUSE: a key that marks a span no plain record (a folded summary...) */
enum { K_PLAIN = 0, K_VOLATILE = 1, K_PTRKEY = 2, K_SEQ = 3, K_REFUSE = 4 };
#define K_RESERVED 8     /* flag: a key in one of launchtrace's namespaces (conventions._RESERVED_PREFIXES) */
#define K_ROOT_REFUSE 16 /* flag: a key that makes a root no plain step's (a record's, a summary's) */
#define K_ROOT_INT 32 /* flag: a root attribute the rebuild reads as an int and the baseline never sees */
#define K_BASE 7

typedef struct {
    PyObject *obj; /* NULL: empty */
    int64_t id;
    int kind; /* for str keys: K_* */
} IdEntry;

#define MEMO 64 /* attribute positions remembered: the object last seen there and its entry */

typedef struct {
    PyObject *obj; /* not a reference: the table holds it (the memo is emptied with the table) */
    int64_t id;
    int kind;
} Memo;

typedef struct {
    PyObject_HEAD PyTypeObject *span_type;
    Py_ssize_t off_span_id, off_parent, off_status, off_attrs, off_resource, off_start, off_end, off_name;
    PyObject *intern;
    PyObject *volatile_keys;
    PyObject *refuse_keys;
    PyObject *root_refuse_keys;
    PyObject *root_int_keys;
    PyObject *reserved_prefixes; /* tuple of str */
    PyObject *seq_key;
    IdEntry *table;
    size_t mask, count, bytes;
    Memo memo_key[MEMO], memo_pair[MEMO]; /* by attribute position: spans of one trace repeat most of them */
} Scanner;

/* ------------------------------------------------------------------------------- growable int64 buffer */

typedef struct {
    int64_t *v;
    Py_ssize_t n, cap;
} Buf;

static int buf_push(Buf *b, int64_t x) {
    if (b->n == b->cap) {
        Py_ssize_t cap = b->cap ? b->cap * 2 : 256;
        int64_t *v = PyMem_Realloc(b->v, (size_t)cap * sizeof(int64_t));
        if (v == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        b->v = v;
        b->cap = cap;
    }
    b->v[b->n++] = x;
    return 0;
}

static void buf_free(Buf *b) {
    PyMem_Free(b->v);
    b->v = NULL;
    b->n = b->cap = 0;
}

/* ------------------------------------------------------------------------------------- identity table */

static inline size_t ptr_hash(const void *p) {
    uint64_t h = (uint64_t)(uintptr_t)p;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return (size_t)h;
}

/* About how many bytes `o` holds (strs, bytes and tuples of them, a few levels down): what bounds the table. */
static size_t approx_size(PyObject *o, int depth) {
    size_t n = (size_t)Py_TYPE(o)->tp_basicsize;
    if (PyUnicode_Check(o)) return n + (size_t)PyUnicode_GET_LENGTH(o) * PyUnicode_KIND(o);
    if (PyBytes_Check(o)) return n + (size_t)PyBytes_GET_SIZE(o);
    if (PyTuple_Check(o)) {
        n += (size_t)PyTuple_GET_SIZE(o) * sizeof(PyObject *);
        if (depth > 0)
            for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(o); i++) n += approx_size(PyTuple_GET_ITEM(o, i), depth - 1);
    }
    return n;
}

static void table_clear(Scanner *s) {
    memset(s->memo_key, 0, sizeof(s->memo_key));
    memset(s->memo_pair, 0, sizeof(s->memo_pair));
    if (s->table == NULL) return;
    for (size_t i = 0; i <= s->mask; i++) Py_CLEAR(s->table[i].obj);
    s->count = 0;
    s->bytes = 0;
}

static int table_grow(Scanner *s) {
    size_t slots = (s->mask + 1) * 2;
    IdEntry *t = PyMem_Calloc(slots, sizeof(IdEntry));
    if (t == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (size_t i = 0; i <= s->mask; i++) {
        IdEntry *e = &s->table[i];
        if (e->obj == NULL) continue;
        size_t j = ptr_hash(e->obj) & (slots - 1);
        while (t[j].obj != NULL) j = (j + 1) & (slots - 1);
        t[j] = *e;
    }
    PyMem_Free(s->table);
    s->table = t;
    s->mask = slots - 1;
    return 0;
}

/* The entry of `obj`, asking `intern` on a miss; NULL with an exception, or with *declined set (intern gave 0:
 * a value no signature may hold). The entry is valid until the next lookup. */
static IdEntry *lookup(Scanner *s, PyObject *obj, int is_key, int *declined) {
    size_t j = ptr_hash(obj) & s->mask;
    while (s->table[j].obj != NULL) {
        if (s->table[j].obj == obj) return &s->table[j];
        j = (j + 1) & s->mask;
    }
    PyObject *r = PyObject_CallOneArg(s->intern, obj);
    if (r == NULL) return NULL;
    long long id = PyLong_AsLongLong(r);
    Py_DECREF(r);
    if (id == -1 && PyErr_Occurred()) return NULL;
    if (id <= 0) {
        *declined = 1;
        return NULL;
    }
    int kind = K_PLAIN;
    (void)is_key; /* every str gets its kind: the reader hands out one object for equal strings, key or not */
    if (PyUnicode_CheckExact(obj)) {
        int v = PySet_Contains(s->volatile_keys, obj);
        if (v < 0) return NULL;
        int refused = v ? 0 : PySet_Contains(s->refuse_keys, obj);
        if (refused < 0) return NULL;
        if (refused)
            kind = K_REFUSE;
        else if (v) {
            int q = PyUnicode_Compare(obj, s->seq_key);
            if (q == -1 && PyErr_Occurred()) return NULL;
            kind = q == 0 ? K_SEQ : K_VOLATILE;
        }
        else {
            Py_ssize_t n = PyUnicode_GET_LENGTH(obj);
            if (n >= 4 && PyUnicode_READ_CHAR(obj, n - 4) == '.' && PyUnicode_READ_CHAR(obj, n - 3) == 'p' &&
                PyUnicode_READ_CHAR(obj, n - 2) == 't' && PyUnicode_READ_CHAR(obj, n - 1) == 'r')
                kind = K_PTRKEY;
        }
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(s->reserved_prefixes); i++) {
            Py_ssize_t m = PyUnicode_Tailmatch(obj, PyTuple_GET_ITEM(s->reserved_prefixes, i), 0, PY_SSIZE_T_MAX, -1);
            if (m < 0) return NULL;
            if (m) {
                kind |= K_RESERVED;
                break;
            }
        }
        int rr = PySet_Contains(s->root_refuse_keys, obj);
        if (rr < 0) return NULL;
        if (rr) kind |= K_ROOT_REFUSE;
        int ri = PySet_Contains(s->root_int_keys, obj);
        if (ri < 0) return NULL;
        if (ri) kind |= K_ROOT_INT;
    }
    size_t size = approx_size(obj, 4);
    if (s->count * 2 >= s->mask + 1 || s->bytes + size > MAX_TABLE_BYTES) {
        if (s->mask + 1 >= MAX_SLOTS || s->bytes + size > MAX_TABLE_BYTES)
            table_clear(s);
        else if (table_grow(s) < 0)
            return NULL;
        j = ptr_hash(obj) & s->mask;
        while (s->table[j].obj != NULL) j = (j + 1) & s->mask;
    }
    Py_INCREF(obj);
    s->table[j].obj = obj;
    s->table[j].id = id;
    s->table[j].kind = kind;
    s->count++;
    s->bytes += size;
    return &s->table[j];
}

/* ------------------------------------------------------------------------------ small uint64 hash map */

typedef struct {
    uint64_t *keys;
    int64_t *vals;
    unsigned char *used;
    size_t mask;
} U64Map;

static int map_init(U64Map *m, Py_ssize_t n) {
    size_t slots = 16;
    while (slots < (size_t)n * 2 + 2) slots *= 2;
    m->keys = PyMem_Malloc(slots * sizeof(uint64_t));
    m->vals = PyMem_Malloc(slots * sizeof(int64_t));
    m->used = PyMem_Calloc(slots, 1);
    m->mask = slots - 1;
    if (m->keys == NULL || m->vals == NULL || m->used == NULL) {
        PyMem_Free(m->keys);
        PyMem_Free(m->vals);
        PyMem_Free(m->used);
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

static void map_free(U64Map *m) {
    PyMem_Free(m->keys);
    PyMem_Free(m->vals);
    PyMem_Free(m->used);
}

/* Every bit of `key` mixed into the low bits (splitmix64's finalizer): span ids that differ only in their high
 * bytes (sequential ids written big-endian, read as a little-endian word) must not fall in one slot, which made
 * a trace of 100,000 such children quadratic (8.3 s to scan, 0.1 s now). */
static inline uint64_t mix64(uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

/* The value of `key`, or -1 after inserting it with `value`. */
static int64_t map_get_or_put(U64Map *m, uint64_t key, int64_t value) {
    size_t j = (size_t)mix64(key) & m->mask;
    while (m->used[j]) {
        if (m->keys[j] == key) return m->vals[j];
        j = (j + 1) & m->mask;
    }
    m->used[j] = 1;
    m->keys[j] = key;
    m->vals[j] = value;
    return -1;
}

/* ------------------------------------------------------------------------------------------- scanning */

#define SLOT(obj, off) (*(PyObject **)((char *)(obj) + (off)))

/* An exact int that fits int64 into *out; 0: not one. */
static int as_int64(PyObject *o, int64_t *out) {
    if (!PyLong_CheckExact(o)) return 0;
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow || (v == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return 0;
    }
    *out = (int64_t)v;
    return 1;
}

typedef struct {
    int64_t seq;
    Py_ssize_t index; /* in spans */
    Py_ssize_t code_at, code_n; /* the span's codes in `codes` */
    Py_ssize_t ptr_at, ptr_n;   /* its pointer values in `ptrs` */
} Row;

static int row_cmp(const void *a, const void *b) {
    const Row *x = a, *y = b;
    if (x->seq != y->seq) return x->seq < y->seq ? -1 : 1;
    return x->index < y->index ? -1 : (x->index > y->index);
}

/* Returns a new reference, Py_None (declined) or NULL (error). */
static PyObject *scan_spans(Scanner *s, PyObject *spans, int verify) {
    if (!PyList_CheckExact(spans)) Py_RETURN_NONE;
    Py_ssize_t n = PyList_GET_SIZE(spans);
    if (n < 2) Py_RETURN_NONE;
    Py_ssize_t root = -1;
    PyObject *resource = NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *sp = PyList_GET_ITEM(spans, i);
        if (Py_TYPE(sp) != s->span_type) Py_RETURN_NONE;
        PyObject *parent = SLOT(sp, s->off_parent);
        if (parent == NULL) Py_RETURN_NONE;
        if (parent == Py_None) {
            if (root >= 0) Py_RETURN_NONE; /* two roots */
            root = i;
        }
        PyObject *res = SLOT(sp, s->off_resource);
        if (res == NULL || (resource != NULL && res != resource)) Py_RETURN_NONE;
        resource = res;
        PyObject *status = SLOT(sp, s->off_status);
        int64_t code;
        if (status == NULL || !as_int64(status, &code) || code == 2) Py_RETURN_NONE; /* 2: STATUS_ERROR */
    }
    if (root < 0) Py_RETURN_NONE;
    PyObject *root_id = SLOT(PyList_GET_ITEM(spans, root), s->off_span_id);
    if (root_id == NULL || !PyBytes_CheckExact(root_id)) Py_RETURN_NONE;

    PyObject *result = NULL, *ptr_lists = NULL;
    Buf codes = {0}, ptrs = {0}, out = {0};
    Row *rows = PyMem_Calloc((size_t)n, sizeof(Row));
    U64Map ids = {0}, pattern = {0};
    int ids_ok = 0, pattern_ok = 0;
    if (rows == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    if (map_init(&ids, n) < 0) goto error;
    ids_ok = 1;
    if (verify && (ptr_lists = PyList_New(0)) == NULL) goto error;
    Py_ssize_t nrows = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *sp = PyList_GET_ITEM(spans, i);
        PyObject *sid = SLOT(sp, s->off_span_id);
        if (sid == NULL || !PyBytes_CheckExact(sid) || PyBytes_GET_SIZE(sid) != 8) goto declined;
        uint64_t key;
        memcpy(&key, PyBytes_AS_STRING(sid), 8);
        if (map_get_or_put(&ids, key, 0) >= 0) goto declined; /* a span id twice */
        if (i == root) continue;
        PyObject *parent = SLOT(sp, s->off_parent);
        if (!PyBytes_CheckExact(parent) || PyBytes_GET_SIZE(parent) != PyBytes_GET_SIZE(root_id) ||
            memcmp(PyBytes_AS_STRING(parent), PyBytes_AS_STRING(root_id), (size_t)PyBytes_GET_SIZE(root_id)) != 0)
            goto declined;
        PyObject *attrs = SLOT(sp, s->off_attrs);
        if (attrs == NULL || !PyTuple_CheckExact(attrs) || PyTuple_GET_SIZE(attrs) == 0) goto declined;
        int64_t start, end;
        PyObject *so = SLOT(sp, s->off_start), *eo = SLOT(sp, s->off_end);
        if (so == NULL || eo == NULL || !as_int64(so, &start) || !as_int64(eo, &end)) goto declined;
        Row *row = &rows[nrows++];
        row->index = i;
        row->seq = 0;
        row->code_at = codes.n;
        row->ptr_at = ptrs.n;
        PyObject *vlist = NULL;
        if (verify && (vlist = PyList_New(0)) == NULL) goto error;
        if (vlist != NULL && PyList_Append(ptr_lists, vlist) < 0) {
            Py_DECREF(vlist);
            goto error;
        }
        Py_XDECREF(vlist); /* ptr_lists holds it */
        Py_ssize_t na = PyTuple_GET_SIZE(attrs);
        if (buf_push(&codes, na) < 0) goto error;
        for (Py_ssize_t a = 0; a < na; a++) {
            PyObject *pair = PyTuple_GET_ITEM(attrs, a);
            if (!PyTuple_CheckExact(pair) || PyTuple_GET_SIZE(pair) != 2) goto declined;
            PyObject *k = PyTuple_GET_ITEM(pair, 0), *v = PyTuple_GET_ITEM(pair, 1);
            if (!PyUnicode_CheckExact(k)) goto declined;
            int declined = 0;
            int64_t kid, kkind, x;
            Memo *mk = a < MEMO ? &s->memo_key[a] : NULL;
            if (mk != NULL && mk->obj == k) {
                kid = mk->id;
                kkind = mk->kind & K_BASE;
            } else {
                IdEntry *ke = lookup(s, k, 1, &declined);
                if (ke == NULL) {
                    if (declined) goto declined;
                    goto error;
                }
                kid = ke->id;
                kkind = ke->kind & K_BASE;
                if (mk != NULL) *mk = (Memo){ke->obj, ke->id, ke->kind};
            }
            if (kkind == K_REFUSE) goto declined;
            if (kkind == K_VOLATILE || kkind == K_SEQ) {
                if (!PyLong_CheckExact(v)) goto declined; /* the rebuild would read (or refuse) what is no int */
                if (kkind == K_SEQ) {
                    if (!as_int64(v, &x)) goto declined;
                    row->seq = x;
                }
                if (buf_push(&codes, -2 * kid) < 0) goto error;
                if (vlist != NULL) {
                    PyObject *ix = PyLong_FromSsize_t(-1 - a); /* volatile: -1 - index */
                    if (ix == NULL || PyList_Append(vlist, ix) < 0) {
                        Py_XDECREF(ix);
                        goto error;
                    }
                    Py_DECREF(ix);
                }
                continue;
            }
            if (kkind == K_PTRKEY && PyLong_CheckExact(v)) {
                if (!as_int64(v, &x)) goto declined;
                if (buf_push(&codes, -2 * kid - 1) < 0 || buf_push(&ptrs, x) < 0) goto error;
                if (vlist != NULL) {
                    PyObject *ix = PyLong_FromSsize_t(a);
                    if (ix == NULL || PyList_Append(vlist, ix) < 0) {
                        Py_XDECREF(ix);
                        goto error;
                    }
                    Py_DECREF(ix);
                }
                continue;
            }
            Memo *mp = a < MEMO ? &s->memo_pair[a] : NULL;
            int64_t pid;
            if (mp != NULL && mp->obj == pair)
                pid = mp->id;
            else {
                IdEntry *pe = lookup(s, pair, 0, &declined);
                if (pe == NULL) {
                    if (declined) goto declined;
                    goto error;
                }
                pid = pe->id;
                if (mp != NULL) *mp = (Memo){pe->obj, pe->id, pe->kind};
            }
            if (buf_push(&codes, pid) < 0) goto error;
        }
        row->code_n = codes.n - row->code_at;
        row->ptr_n = ptrs.n - row->ptr_at;
        /* the times, kept after the codes (read back below) */
        if (buf_push(&codes, start) < 0 || buf_push(&codes, end) < 0) goto error;
    }
    qsort(rows, (size_t)nrows, sizeof(Row), row_cmp);
    if (buf_push(&out, nrows) < 0) goto error;
    for (Py_ssize_t r = 0; r < nrows; r++)
        for (Py_ssize_t c = 0; c < rows[r].code_n; c++)
            if (buf_push(&out, codes.v[rows[r].code_at + c]) < 0) goto error;
    if (map_init(&pattern, ptrs.n) < 0) goto error;
    pattern_ok = 1;
    int64_t seen = 0;
    for (Py_ssize_t r = 0; r < nrows; r++)
        for (Py_ssize_t p = 0; p < rows[r].ptr_n; p++) {
            int64_t value = ptrs.v[rows[r].ptr_at + p], rank = -1;
            if (value != 0) {
                rank = map_get_or_put(&pattern, (uint64_t)value, seen);
                if (rank < 0) rank = seen++;
            }
            if (buf_push(&out, rank) < 0) goto error;
        }
    /* the root's code: what its rebuild alone can depend on (see root_code in stepscan.py) */
    Buf rc = {0};
    {
        PyObject *rs = PyList_GET_ITEM(spans, root);
        PyObject *name = SLOT(rs, s->off_name), *rattrs = SLOT(rs, s->off_attrs);
        int declined = 0;
        IdEntry *e;
        if (name == NULL || !PyUnicode_CheckExact(name) || rattrs == NULL || !PyTuple_CheckExact(rattrs)) {
            buf_free(&rc);
            goto declined;
        }
        if ((e = lookup(s, name, 0, &declined)) == NULL || buf_push(&rc, e->id) < 0) goto root_fail;
        if ((e = lookup(s, resource, 0, &declined)) == NULL || buf_push(&rc, e->id) < 0) goto root_fail;
        Py_ssize_t na = PyTuple_GET_SIZE(rattrs);
        if (buf_push(&rc, na) < 0) goto root_fail;
        for (Py_ssize_t a = 0; a < na; a++) {
            PyObject *pair = PyTuple_GET_ITEM(rattrs, a);
            if (!PyTuple_CheckExact(pair) || PyTuple_GET_SIZE(pair) != 2 || !PyUnicode_CheckExact(PyTuple_GET_ITEM(pair, 0))) {
                declined = 1;
                goto root_fail;
            }
            PyObject *v = PyTuple_GET_ITEM(pair, 1);
            if ((e = lookup(s, PyTuple_GET_ITEM(pair, 0), 1, &declined)) == NULL) goto root_fail;
            int64_t kid = e->id, kind = e->kind;
            if (kind & K_ROOT_REFUSE) {
                declined = 1;
                goto root_fail;
            }
            int64_t code;
            if (!(kind & K_RESERVED))
                code = -2 * kid - 1; /* a user's attribute: its value is only kept, never read */
            else if ((kind & K_ROOT_INT) && PyLong_CheckExact(v))
                code = -2 * kid; /* an int read as an int: what it is does not change the result */
            else {
                if ((e = lookup(s, pair, 0, &declined)) == NULL) goto root_fail;
                code = e->id;
            }
            if (buf_push(&rc, code) < 0) goto root_fail;
        }
        goto root_done;
    root_fail:
        buf_free(&rc);
        if (declined) goto declined;
        goto error;
    root_done:;
    }
    PyObject *root_code = PyBytes_FromStringAndSize((const char *)rc.v, rc.n * (Py_ssize_t)sizeof(int64_t));
    buf_free(&rc);
    if (root_code == NULL) goto error;
    PyObject *sig = PyBytes_FromStringAndSize((const char *)out.v, out.n * (Py_ssize_t)sizeof(int64_t));
    PyObject *times = PyBytes_FromStringAndSize(NULL, nrows * 2 * (Py_ssize_t)sizeof(int64_t));
    if (sig == NULL || times == NULL) {
        Py_XDECREF(sig);
        Py_XDECREF(times);
        Py_DECREF(root_code);
        goto error;
    }
    int64_t *t = (int64_t *)PyBytes_AS_STRING(times);
    for (Py_ssize_t r = 0; r < nrows; r++) {
        const int64_t *se = &codes.v[rows[r].code_at + rows[r].code_n];
        t[2 * r] = se[0];
        t[2 * r + 1] = se[1];
    }
    if (verify)
        result = Py_BuildValue("(nNNNO)", root, sig, times, root_code, ptr_lists);
    else
        result = Py_BuildValue("(nNNN)", root, sig, times, root_code);
    goto done;
declined:
    result = Py_NewRef(Py_None);
    goto done;
error:
    result = NULL;
done:
    Py_XDECREF(ptr_lists);
    buf_free(&codes);
    buf_free(&ptrs);
    buf_free(&out);
    PyMem_Free(rows);
    if (ids_ok) map_free(&ids);
    if (pattern_ok) map_free(&pattern);
    return result;
}

static PyObject *Scanner_scan(Scanner *self, PyObject *args) {
    PyObject *spans;
    int verify = 0;
    if (!PyArg_ParseTuple(args, "O|p:scan", &spans, &verify)) return NULL;
    return scan_spans(self, spans, verify);
}

static PyObject *Scanner_table_size(Scanner *self, PyObject *Py_UNUSED(ignored)) {
    return PyLong_FromSize_t(self->count);
}

static int Scanner_traverse(Scanner *self, visitproc visit, void *arg) {
    Py_VISIT(self->intern);
    if (self->table != NULL)
        for (size_t i = 0; i <= self->mask; i++) Py_VISIT(self->table[i].obj);
    return 0;
}

static int Scanner_clear_refs(Scanner *self) {
    Py_CLEAR(self->intern);
    table_clear(self);
    return 0;
}

static void Scanner_dealloc(Scanner *self) {
    PyObject_GC_UnTrack(self);
    Scanner_clear_refs(self);
    PyMem_Free(self->table);
    Py_XDECREF(self->span_type);
    Py_XDECREF(self->volatile_keys);
    Py_XDECREF(self->refuse_keys);
    Py_XDECREF(self->root_refuse_keys);
    Py_XDECREF(self->root_int_keys);
    Py_XDECREF(self->reserved_prefixes);
    Py_XDECREF(self->seq_key);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Scanner_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"span_class", "intern",   "volatile",  "seq_key", "refuse",
                             "root_refuse", "root_ints", "reserved", NULL};
    PyObject *cls, *intern, *vol, *seq, *refuse, *root_refuse, *root_ints, *reserved;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOUOOOO:Scanner", kwlist, &cls, &intern, &vol, &seq, &refuse,
                                     &root_refuse, &root_ints, &reserved))
        return NULL;
    int prefixes_ok = PyTuple_CheckExact(reserved);
    for (Py_ssize_t i = 0; prefixes_ok && i < PyTuple_GET_SIZE(reserved); i++)
        prefixes_ok = PyUnicode_CheckExact(PyTuple_GET_ITEM(reserved, i));
    if (!PyType_Check(cls) || !PyCallable_Check(intern) || !PyFrozenSet_CheckExact(vol) ||
        !PyFrozenSet_CheckExact(refuse) || !PyFrozenSet_CheckExact(root_refuse) || !PyFrozenSet_CheckExact(root_ints) ||
        !prefixes_ok) {
        PyErr_SetString(PyExc_TypeError,
                        "Scanner(span class, intern callable, frozenset of volatile keys, seq key, frozenset of "
                        "keys that refuse a span, the same for a root, root int keys, tuple of reserved key prefixes)");
        return NULL;
    }
    PyTypeObject *tp = (PyTypeObject *)cls;
    static const char *names[] = {"span_id", "parent_span_id", "status_code", "attributes",
                                  "resource", "start_ns",       "end_ns",      "name"};
    Py_ssize_t off[8];
    for (int i = 0; i < 8; i++)
        if ((off[i] = lt_slot_offset_s(tp, names[i])) < 0) {
            PyErr_Format(PyExc_TypeError, "%s.%s is not an object slot", tp->tp_name, names[i]);
            return NULL;
        }
    Scanner *self = (Scanner *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    self->table = PyMem_Calloc(FIRST_SLOTS, sizeof(IdEntry));
    if (self->table == NULL) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    self->mask = FIRST_SLOTS - 1;
    self->span_type = (PyTypeObject *)Py_NewRef(cls);
    self->off_span_id = off[0];
    self->off_parent = off[1];
    self->off_status = off[2];
    self->off_attrs = off[3];
    self->off_resource = off[4];
    self->off_start = off[5];
    self->off_end = off[6];
    self->off_name = off[7];
    self->intern = Py_NewRef(intern);
    self->volatile_keys = Py_NewRef(vol);
    self->seq_key = Py_NewRef(seq);
    self->refuse_keys = Py_NewRef(refuse);
    self->root_refuse_keys = Py_NewRef(root_refuse);
    self->root_int_keys = Py_NewRef(root_ints);
    self->reserved_prefixes = Py_NewRef(reserved);
    return (PyObject *)self;
}

static PyMethodDef Scanner_methods[] = {
    {"scan", (PyCFunction)Scanner_scan, METH_VARARGS,
     "scan(spans, verify=False) -> None | (root index, signature, times, root code[, taken per record span])"},
    {"table_size", (PyCFunction)Scanner_table_size, METH_NOARGS, "objects in the identity table"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject ScannerType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "launchtrace.analysis.fleet._stepscan.Scanner",
    .tp_basicsize = sizeof(Scanner),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "A plain step's signature and times from its spans (see the module comment).",
    .tp_new = Scanner_new,
    .tp_dealloc = (destructor)Scanner_dealloc,
    .tp_traverse = (traverseproc)Scanner_traverse,
    .tp_clear = (inquiry)Scanner_clear_refs,
    .tp_methods = Scanner_methods,
};

/* ------------------------------------------------------------------------------------------- folding */

static inline int64_t index_max_scale(int64_t v) { /* v > 0 */
    if ((v & (v - 1)) == 0) return ((int64_t)(63 - __builtin_clzll((unsigned long long)v)) << MAX_SCALE) - 1;
    return (int64_t)ceil(log2((double)v) * (double)(1 << MAX_SCALE)) - 1;
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : (x > y);
}

/* (buckets {index at MAX_SCALE: count}, count, sum, min, max, zero_count) of values[i] with weights[i]
 * (NULL: 1 each); NULL with *overflow set when a sum leaves int64. `scratch` holds n int64. */
static PyObject *hist_part(const int64_t *values, const int64_t *weights, Py_ssize_t n, int64_t *scratch,
                           int *overflow) {
    int64_t count = 0, sum = 0, lo = 0, hi = 0, zeros = 0;
    Py_ssize_t m = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t v = values[i], w = weights ? weights[i] : 1, vw;
        if (i == 0 || v < lo) lo = v;
        if (i == 0 || v > hi) hi = v;
        if (__builtin_add_overflow(count, w, &count) || __builtin_mul_overflow(v, w, &vw) ||
            __builtin_add_overflow(sum, vw, &sum)) {
            *overflow = 1;
            return NULL;
        }
        if (v <= 0)
            zeros += w;
        else
            scratch[m++] = index_max_scale(v);
    }
    PyObject *buckets = PyDict_New();
    if (buckets == NULL) return NULL;
    if (weights == NULL) {
        qsort(scratch, (size_t)m, sizeof(int64_t), cmp_i64);
        for (Py_ssize_t i = 0; i < m;) {
            Py_ssize_t j = i;
            while (j < m && scratch[j] == scratch[i]) j++;
            PyObject *k = PyLong_FromLongLong(scratch[i]), *c = PyLong_FromSsize_t(j - i);
            if (k == NULL || c == NULL || PyDict_SetItem(buckets, k, c) < 0) {
                Py_XDECREF(k);
                Py_XDECREF(c);
                Py_DECREF(buckets);
                return NULL;
            }
            Py_DECREF(k);
            Py_DECREF(c);
            i = j;
        }
    } else { /* weighted: add one by one through the dict */
        Py_ssize_t q = 0;
        for (Py_ssize_t i = 0; i < n; i++) {
            if (values[i] <= 0) continue;
            PyObject *k = PyLong_FromLongLong(scratch[q++]);
            if (k == NULL) {
                Py_DECREF(buckets);
                return NULL;
            }
            PyObject *old = PyDict_GetItemWithError(buckets, k);
            long long before = 0;
            if (old != NULL) before = PyLong_AsLongLong(old);
            if (PyErr_Occurred()) {
                Py_DECREF(k);
                Py_DECREF(buckets);
                return NULL;
            }
            PyObject *c = PyLong_FromLongLong(before + weights[i]);
            if (c == NULL || PyDict_SetItem(buckets, k, c) < 0) {
                Py_XDECREF(c);
                Py_DECREF(k);
                Py_DECREF(buckets);
                return NULL;
            }
            Py_DECREF(c);
            Py_DECREF(k);
        }
    }
    return Py_BuildValue("(NLLLLL)", buckets, (long long)count, (long long)sum, (long long)lo, (long long)hi,
                         (long long)zeros);
}

static PyObject *list_of(const int64_t *v, Py_ssize_t n, Py_ssize_t stride) {
    PyObject *out = PyList_New(n);
    if (out == NULL) return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *x = PyLong_FromLongLong(v[i * stride]);
        if (x == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, i, x);
    }
    return out;
}

/* fold(times, launches, repeats, kernel_of, kernels, positions) -> None | (starts, durations, duration hist,
 * [(totals, hist) per kernel], [(values, hist) per position]). times: int64 (start, end) per launch per step,
 * steps after steps; repeats and kernel_of: int64 per launch (repeat >= 1, kernel index < kernels). */
static PyObject *fold(PyObject *module, PyObject *args) {
    Py_buffer tb, rb, kb;
    Py_ssize_t L, K, P;
    if (!PyArg_ParseTuple(args, "y*ny*y*nn:fold", &tb, &L, &rb, &kb, &K, &P)) return NULL;
    PyObject *result = NULL;
    int64_t *scratch = NULL, *col = NULL, *wcol = NULL, *starts = NULL, *durs = NULL, *tot = NULL, *pos = NULL;
    Py_ssize_t R = 0;
    if (L <= 0 || K <= 0 || P < 0 || P > L || tb.len % (Py_ssize_t)(2 * L * sizeof(int64_t)) != 0 ||
        rb.len != L * (Py_ssize_t)sizeof(int64_t) || kb.len != L * (Py_ssize_t)sizeof(int64_t)) {
        PyErr_SetString(PyExc_ValueError, "fold: inconsistent sizes");
        goto done;
    }
    R = tb.len / (Py_ssize_t)(2 * L * sizeof(int64_t));
    const int64_t *t = tb.buf, *rep = rb.buf, *kof = kb.buf;
    for (Py_ssize_t l = 0; l < L; l++)
        if (rep[l] < 1 || kof[l] < 0 || kof[l] >= K) {
            PyErr_SetString(PyExc_ValueError, "fold: repeat < 1 or kernel index out of range");
            goto done;
        }
    size_t cells = (size_t)(R > 0 ? R : 1) * (size_t)L;
    scratch = PyMem_Malloc(cells * sizeof(int64_t));
    col = PyMem_Malloc(cells * sizeof(int64_t));
    wcol = PyMem_Malloc(cells * sizeof(int64_t));
    starts = PyMem_Malloc((size_t)(R + 1) * sizeof(int64_t));
    durs = PyMem_Malloc((size_t)(R + 1) * sizeof(int64_t));
    tot = PyMem_Calloc((size_t)(R + 1) * (size_t)K, sizeof(int64_t));
    pos = PyMem_Malloc(cells * sizeof(int64_t));
    if (!scratch || !col || !wcol || !starts || !durs || !tot || !pos) {
        PyErr_NoMemory();
        goto done;
    }
    int overflow = 0;
    for (Py_ssize_t r = 0; r < R; r++) {
        const int64_t *row = t + r * 2 * L;
        int64_t s0 = 0, e0 = 0;
        for (Py_ssize_t l = 0; l < L; l++) {
            int64_t s = row[2 * l], e = row[2 * l + 1], one, d;
            if (e <= 0) goto declined; /* untimed: the Python path */
            if (l == 0 || s < s0) s0 = s;
            if (l == 0 || e > e0) e0 = e;
            if (__builtin_sub_overflow(e, s, &one)) goto declined;
            if (one < 0) one = 0;
            if (__builtin_mul_overflow(one, rep[l], &d)) goto declined;
            pos[r * L + l] = d;
            if (__builtin_add_overflow(tot[r * K + kof[l]], d, &tot[r * K + kof[l]])) goto declined;
        }
        int64_t span;
        if (__builtin_sub_overflow(e0, s0, &span)) goto declined;
        starts[r] = s0;
        durs[r] = span > 0 ? span : 0;
    }
    PyObject *dh = hist_part(durs, NULL, R, scratch, &overflow);
    if (dh == NULL) goto maybe_declined;
    PyObject *kernels = PyList_New(K), *positions = PyList_New(P);
    PyObject *st = list_of(starts, R, 1), *du = list_of(durs, R, 1);
    result = Py_BuildValue("(NNNNN)", st, du, dh, kernels, positions);
    if (result == NULL) goto done;
    for (Py_ssize_t k = 0; k < K; k++) {
        Py_ssize_t m = 0;
        for (Py_ssize_t r = 0; r < R; r++)
            for (Py_ssize_t l = 0; l < L; l++)
                if (kof[l] == k) {
                    const int64_t *row = t + r * 2 * L;
                    int64_t one = row[2 * l + 1] - row[2 * l];
                    col[m] = one > 0 ? one : 0;
                    wcol[m++] = rep[l];
                }
        int any_weight = 0;
        for (Py_ssize_t i = 0; i < m; i++) any_weight |= wcol[i] != 1;
        PyObject *h = hist_part(col, any_weight ? wcol : NULL, m, scratch, &overflow);
        if (h == NULL) goto maybe_declined_result;
        PyObject *totals = list_of(tot + k, R, K);
        PyObject *pair = totals ? Py_BuildValue("(NN)", totals, h) : NULL;
        if (pair == NULL) {
            if (totals == NULL) Py_DECREF(h);
            goto error_result;
        }
        PyList_SET_ITEM(kernels, k, pair);
    }
    for (Py_ssize_t p = 0; p < P; p++) {
        for (Py_ssize_t r = 0; r < R; r++) col[r] = pos[r * L + p];
        PyObject *h = hist_part(col, NULL, R, scratch, &overflow);
        if (h == NULL) goto maybe_declined_result;
        PyObject *values = list_of(col, R, 1);
        PyObject *pair = values ? Py_BuildValue("(NN)", values, h) : NULL;
        if (pair == NULL) {
            if (values == NULL) Py_DECREF(h);
            goto error_result;
        }
        PyList_SET_ITEM(positions, p, pair);
    }
    goto done;
maybe_declined_result:
    Py_CLEAR(result);
    if (overflow) goto declined;
    goto done;
error_result:
    Py_CLEAR(result);
    goto done;
maybe_declined:
    if (overflow) goto declined;
    goto done;
declined:
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&tb);
    PyBuffer_Release(&rb);
    PyBuffer_Release(&kb);
    PyMem_Free(scratch);
    PyMem_Free(col);
    PyMem_Free(wcol);
    PyMem_Free(starts);
    PyMem_Free(durs);
    PyMem_Free(tot);
    PyMem_Free(pos);
    return result;
}

static PyObject *bucket_index(PyObject *module, PyObject *arg) {
    int64_t v;
    if (!as_int64(arg, &v) || v <= 0) {
        PyErr_SetString(PyExc_ValueError, "bucket_index: a positive int64");
        return NULL;
    }
    return PyLong_FromLongLong(index_max_scale(v));
}

/* ------------------------------------------------------------------------- RunSteps.values, encoded */

static inline char *put_varint(char *p, uint64_t v) {
    while (v >= 0x80) {
        *p++ = (char)(v | 0x80);
        v >>= 7;
    }
    *p++ = (char)v;
    return p;
}

/* encode_step_values([(start, value), ...]) -> bytes | None: the `values` field (4) of a launchtrace.v1.RunSteps
 * message, one StepValue (fixed64 start_unix_nano = 1, int64 value = 2) per pair, as protobuf encodes it;
 * None when a start is outside uint64 or a value outside int64 (the caller then adds them one by one, and
 * protobuf says what is wrong). Zeros are written out: parsing gives the same message as leaving them unset. */
static PyObject *encode_step_values(PyObject *module, PyObject *pairs) {
    if (!PyList_CheckExact(pairs)) {
        PyErr_SetString(PyExc_TypeError, "encode_step_values: a list of (start, value)");
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(pairs);
    PyObject *out = PyBytes_FromStringAndSize(NULL, n * 22 + 1); /* 1 + 1 + (1 + 8) + (1 + 10) per value */
    if (out == NULL) return NULL;
    char *p = PyBytes_AS_STRING(out);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *pair = PyList_GET_ITEM(pairs, i);
        if (!PyTuple_CheckExact(pair) || PyTuple_GET_SIZE(pair) != 2 || !PyLong_CheckExact(PyTuple_GET_ITEM(pair, 0)) ||
            !PyLong_CheckExact(PyTuple_GET_ITEM(pair, 1)))
            goto declined;
        unsigned long long start = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(pair, 0));
        if (start == (unsigned long long)-1 && PyErr_Occurred()) {
            PyErr_Clear();
            goto declined;
        }
        int64_t value;
        if (!as_int64(PyTuple_GET_ITEM(pair, 1), &value)) goto declined;
        char body[20], *q = body;
        *q++ = 0x09; /* field 1, fixed64 */
        for (int b = 0; b < 8; b++) *q++ = (char)(start >> (8 * b));
        *q++ = 0x10; /* field 2, varint */
        q = put_varint(q, (uint64_t)value);
        *p++ = 0x22; /* RunSteps field 4, length-delimited */
        p = put_varint(p, (uint64_t)(q - body));
        memcpy(p, body, (size_t)(q - body));
        p += q - body;
    }
    if (_PyBytes_Resize(&out, p - PyBytes_AS_STRING(out)) < 0) return NULL;
    return out;
declined:
    Py_DECREF(out);
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"encode_step_values", encode_step_values, METH_O, "RunSteps.values of (start, value) pairs, encoded"},
    {"fold", fold, METH_VARARGS, "fold a block of known steps' times (see the module comment)"},
    {"bucket_index", bucket_index, METH_O, "the histogram bucket index of a positive int64 at MAX_SCALE"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "launchtrace.analysis.fleet._stepscan",
    "A plain step's signature and times from its spans, and blocks of known steps folded (see the C comment).",
    -1, module_methods,
};

PyMODINIT_FUNC PyInit__stepscan(void) {
    if (PyType_Ready(&ScannerType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (PyModule_AddIntConstant(m, "MAX_SCALE", MAX_SCALE) < 0 ||
        PyModule_AddObjectRef(m, "Scanner", (PyObject *)&ScannerType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
