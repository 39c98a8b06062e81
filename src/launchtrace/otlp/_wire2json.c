/* OTLP protobuf traces -> one OTLP JSON Lines line, in C: launchtrace.otlp.transcode's conversion, compiled.
 *
 * Why: `launchtrace collect` writes every request it receives as JSON. The Python conversion (a walk over the
 * wire bytes with caches, or json_format itself) costs more per launch span than a fast exporter spends
 * sending it, so the receiver's writer fell behind (docs/export.md#speed). This walks the serialized
 * ExportTraceServiceRequest (or TracesData: the same wire layout) once and writes the JSON directly, without building a
 * message.
 *
 * The definition is json_format.MessageToDict(use_integers_for_enums=True) with the span and link ids turned
 * from base64 into hex, dumped by orjson (launchtrace.otlp.transcode.reference_line): default-valued fields
 * left out (except oneof members and present sub-messages), 64-bit integers as decimal strings, enums as
 * integers, camelCase names, bytes as base64, doubles as orjson writes them (shortest round-trip digits) with
 * NaN / Infinity / -Infinity as strings, strings escaped as orjson escapes them.
 *
 * Anything this walk is not certain json_format writes the same way gives None, and the caller takes the
 * Python path (which parses the bytes with the protobuf library, and rejects them if they are malformed): a
 * field number or wire type the OTLP trace messages do not have, a singular field sent twice (protobuf would
 * merge it or keep the last), two members of a oneof, a bool other than 0 or 1, a 32-bit field whose varint
 * does not fit 32 bits, a varint over 10 bytes, a length past its message's end, invalid UTF-8 in a string,
 * nesting deeper than MAX_DEPTH. So every accepted input is one the protobuf library accepts too, and the
 * span count returned is the number of spans it would see. tests/test_wire2json_native.py checks the line
 * against the reference over generated requests, and that truncated and mutated bytes never give wrong JSON.
 *
 * The walk runs without the GIL for large inputs (a bytes object is immutable): the gRPC threads and the
 * writer can then convert at the same time.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "_jsonfmt.h"
#include "_jsonkeys.h"
#include "_otlpfields.h"

enum { OK = 0, UNSURE = 1, NOMEM = 2 };

#if defined(__GNUC__)
#define INLINE static inline __attribute__((always_inline))
#else
#define INLINE static inline
#endif

#define MAX_DEPTH 40       /* message nesting (request = 1); deeper: the Python path decides */
#define RELEASE_GIL_AT 4096 /* inputs this large are walked without the GIL */

#define TRY(x)                                                                                                       \
    do {                                                                                                             \
        int rc_ = (x);                                                                                               \
        if (rc_)                                                                                                     \
            return rc_;                                                                                              \
    } while (0)

/* -- output ------------------------------------------------------------------------------------------------- */

typedef struct {
    int write;        /* 0: scan only (validate and count spans, write nothing) */
    char *buf;        /* malloc'd: no GIL needed to grow it */
    size_t len, cap;
    Py_ssize_t spans; /* spans seen so far */
    uint64_t dbits[4]; /* the last doubles formatted (bit patterns; 0 = empty: +0.0 is never formatted) */
    char dtext[4][32];
    uint8_t dlen[4];
    unsigned dnext;
} Out;

static int grow_slow(Out *o, size_t need) {
    size_t cap = o->cap ? o->cap : 256;
    while (cap - o->len < need) {
        if (cap > SIZE_MAX / 2)
            return NOMEM;
        cap *= 2;
    }
    char *b = realloc(o->buf, cap);
    if (b == NULL)
        return NOMEM;
    o->buf = b;
    o->cap = cap;
    return OK;
}

/* Room for need more bytes. */
INLINE int grow(Out *o, size_t need) { return o->cap - o->len >= need ? OK : grow_slow(o, need); }

INLINE int put(Out *o, const char *s, size_t n) {
    if (!o->write)
        return OK;
    TRY(grow(o, n));
    memcpy(o->buf + o->len, s, n);
    o->len += n;
    return OK;
}

#define PUTS(o, lit) put((o), (lit), sizeof(lit) - 1)

/* `,"name":` (the comma unless it is the object's first field); `*count` counts the fields written. */
INLINE int key(Out *o, int *count, const char *name, size_t n) {
    if (!o->write)
        return OK;
    TRY(grow(o, n + 1));
    if ((*count)++)
        o->buf[o->len++] = ',';
    memcpy(o->buf + o->len, name, n);
    o->len += n;
    return OK;
}

#define KEY(lit) TRY(key(o, &nf, "\"" lit "\":", sizeof("\"" lit "\":") - 1))

static int put_u64(Out *o, uint64_t v) {
    if (!o->write)
        return OK;
    char tmp[24];
    char *start = jf_u64_digits(tmp + 24, v);
    return put(o, start, (size_t)(tmp + 24 - start));
}

static int put_i64(Out *o, int64_t v) {
    if (v < 0) {
        TRY(PUTS(o, "-"));
        return put_u64(o, (uint64_t)0 - (uint64_t)v);
    }
    return put_u64(o, (uint64_t)v);
}

/* A protobuf string as a JSON string, escaped as orjson escapes (_jsonfmt.h); invalid UTF-8: UNSURE (protobuf
 * rejects it). */
static int put_str(Out *o, const uint8_t *s, size_t n) {
    if (jf_plain(s, n)) { /* most keys and values */
        if (!o->write)
            return OK;
        TRY(grow(o, n + 2));
        char *w = o->buf + o->len;
        *w = '"';
        memcpy(w + 1, s, n);
        w[n + 1] = '"';
        o->len += n + 2;
        return OK;
    }
    if (!o->write)
        return jf_escape_utf8(NULL, s, n) < 0 ? UNSURE : OK;
    if (n > (SIZE_MAX - 2) / 6)
        return NOMEM;
    TRY(grow(o, 6 * n + 2));
    char *w = o->buf + o->len;
    *w++ = '"';
    ptrdiff_t k = jf_escape_utf8(w, s, n);
    if (k < 0)
        return UNSURE;
    w[k] = '"';
    o->len += (size_t)k + 2;
    return OK;
}

/* An id (bytes) as a JSON string of lower-case hex: OTLP/JSON's form of trace and span ids. */
static int put_hex(Out *o, const uint8_t *s, size_t n) {
    if (!o->write)
        return OK;
    if (n > (SIZE_MAX - 2) / 2)
        return NOMEM;
    TRY(grow(o, 2 * n + 2));
    char *w = o->buf + o->len;
    *w++ = '"';
    w = jf_hex(w, s, n);
    *w++ = '"';
    o->len = (size_t)(w - o->buf);
    return OK;
}

/* bytes as a JSON string of standard base64 with padding (json_format's base64.b64encode). */
static int put_b64(Out *o, const uint8_t *s, size_t n) {
    if (!o->write)
        return OK;
    if (n > (SIZE_MAX - 8) / 2)
        return NOMEM;
    TRY(grow(o, jf_b64_len(n) + 2));
    char *w = o->buf + o->len;
    *w++ = '"';
    w = jf_b64(w, s, n);
    *w++ = '"';
    o->len = (size_t)(w - o->buf);
    return OK;
}

/* -- doubles ------------------------------------------------------------------------------------------------ */

/* A double field as json_format + orjson write it: a number, or "NaN" / "Infinity" / "-Infinity". */
static int put_double(Out *o, double x) {
    if (!o->write)
        return OK;
    if (isnan(x))
        return PUTS(o, "\"NaN\"");
    if (isinf(x))
        return x > 0 ? PUTS(o, "\"Infinity\"") : PUTS(o, "\"-Infinity\"");
    if (x == 0)
        return signbit(x) ? PUTS(o, "-0.0") : PUTS(o, "0.0");
    uint64_t bits;
    memcpy(&bits, &x, sizeof bits);
    for (int i = 0; i < 4; i++) /* a request repeats its doubles (a launch's scalar argument): format once */
        if (o->dbits[i] == bits)
            return put(o, o->dtext[i], o->dlen[i]);
    char tmp[40];
    size_t n = jf_format_double(x, tmp);
    if (n == 0 || n > sizeof o->dtext[0])
        return UNSURE;
    unsigned slot = o->dnext++ & 3;
    o->dbits[slot] = bits;
    memcpy(o->dtext[slot], tmp, n);
    o->dlen[slot] = (uint8_t)n;
    return put(o, tmp, n);
}

/* -- reading the wire format -------------------------------------------------------------------------------- */

typedef struct {
    uint32_t field;
    int wt;              /* wire type: 0 varint, 1 fixed64, 2 length-delimited, 5 fixed32 */
    uint64_t v;          /* varint / fixed64 / fixed32 value */
    const uint8_t *p;    /* length-delimited payload */
    size_t n;
} Field;

/* The varint at *pp (at most 10 bytes, the 10th holding one bit), *pp moved past it. */
INLINE int varint(const uint8_t **pp, const uint8_t *end, uint64_t *out) {
    const uint8_t *p = *pp;
    if (p < end && *p < 0x80) { /* one byte: tags, lengths under 128, small values */
        *out = *p;
        *pp = p + 1;
        return OK;
    }
    uint64_t v = 0;
    for (int i = 0; i < 10; i++) {
        if (p >= end)
            return UNSURE;
        uint8_t b = *p++;
        if (i == 9 && b > 1)
            return UNSURE;
        v |= (uint64_t)(b & 0x7F) << (7 * i);
        if (!(b & 0x80)) {
            *pp = p;
            *out = v;
            return OK;
        }
    }
    return UNSURE;
}

INLINE uint64_t le(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

/* The field at *pp (tag and value, every length checked against end), *pp moved past it. */
INLINE int next(const uint8_t **pp, const uint8_t *end, Field *f) {
    uint64_t tag;
    TRY(varint(pp, end, &tag));
    if (tag > UINT32_MAX || (tag >> 3) == 0)
        return UNSURE;
    f->field = (uint32_t)(tag >> 3);
    f->wt = (int)(tag & 7);
    f->v = 0;
    f->p = NULL;
    f->n = 0;
    const uint8_t *p = *pp;
    switch (f->wt) {
    case 0:
        return varint(pp, end, &f->v);
    case 1:
        if (end - p < 8)
            return UNSURE;
        f->v = le(p, 8);
        *pp = p + 8;
        return OK;
    case 5:
        if (end - p < 4)
            return UNSURE;
        f->v = le(p, 4);
        *pp = p + 4;
        return OK;
    case 2: {
        uint64_t n;
        TRY(varint(pp, end, &n));
        p = *pp;
        if (n > (uint64_t)(end - p))
            return UNSURE;
        f->p = p;
        f->n = (size_t)n;
        *pp = p + n;
        return OK;
    }
    default: /* groups (3, 4) and the invalid 6, 7 */
        return UNSURE;
    }
}

/* A singular field: seen at most once (twice: protobuf merges or keeps the last, left to the Python path). */
typedef struct {
    int set;
    uint64_t v;
    const uint8_t *p;
    size_t n;
} One;

static int once(One *one, const Field *f, int wt) {
    if (one->set || f->wt != wt)
        return UNSURE;
    one->set = 1;
    one->v = f->v;
    one->p = f->p;
    one->n = f->n;
    return OK;
}

/* A repeated length-delimited field: where its first occurrence starts and its last ends, and how many. */
typedef struct {
    const uint8_t *first, *end;
    size_t count;
} Rep;

static int rep(Rep *r, const Field *f, const uint8_t *tag_at, const uint8_t *after) {
    if (f->wt != 2)
        return UNSURE;
    if (r->count++ == 0)
        r->first = tag_at;
    r->end = after;
    return OK;
}

/* An int32 / enum field's varint: non-negative, or a negative value sign-extended to 64 bits. */
static int i32(uint64_t v, int64_t *out) {
    if (v <= INT32_MAX)
        *out = (int64_t)v;
    else if (v >= 0xFFFFFFFF80000000ULL)
        *out = (int64_t)v;
    else
        return UNSURE;
    return OK;
}

typedef int (*Emit)(Out *, const uint8_t *, size_t, int);

/* `[a,b,...]`: each occurrence of `field` in the range r, written by fn. */
static int put_rep(Out *o, const Rep *r, uint32_t field, Emit fn, int depth) {
    const uint8_t *p = r->first;
    Field f;
    int first = 1;
    TRY(PUTS(o, "["));
    while (p < r->end) {
        TRY(next(&p, r->end, &f));
        if (f.field != field)
            continue;
        if (!first)
            TRY(PUTS(o, ","));
        first = 0;
        TRY(fn(o, f.p, f.n, depth));
    }
    return PUTS(o, "]");
}

/* A repeated string field: `["a","b"]`. */
static int put_rep_str(Out *o, const Rep *r, uint32_t field) {
    const uint8_t *p = r->first;
    Field f;
    int first = 1;
    TRY(PUTS(o, "["));
    while (p < r->end) {
        TRY(next(&p, r->end, &f));
        if (f.field != field)
            continue;
        if (!first)
            TRY(PUTS(o, ","));
        first = 0;
        TRY(put_str(o, f.p, f.n));
    }
    return PUTS(o, "]");
}

/* -- the messages ------------------------------------------------------------------------------------------- */

static int key_value(Out *o, const uint8_t *p, size_t n, int depth);

/* AnyValue: one oneof member, or none (`{}`). */
static int any_value(Out *o, const uint8_t *p, size_t n, int depth) {
    if (depth > MAX_DEPTH)
        return UNSURE;
    /* the usual: a short string */
    if (n >= 2 && p[0] == PB_TAG1(PB_ANY_VALUE_STRING_VALUE_TAG) && p[1] < 0x80 && (size_t)p[1] + 2 == n) {
        TRY(PUTS(o, "{\"" JK_STRING_VALUE "\":"));
        TRY(put_str(o, p + 2, p[1]));
        return PUTS(o, "}");
    }
    const uint8_t *end = p + n;
    Field f, val = {0};
    int have = 0;
    while (p < end) {
        TRY(next(&p, end, &f));
        if (have) /* a second member (or the same one again): protobuf keeps the last */
            return UNSURE;
        have = 1;
        val = f;
    }
    if (!have)
        return PUTS(o, "{}");
    switch (val.field) {
    case PB_ANY_VALUE_STRING_VALUE:
        if (val.wt != 2)
            return UNSURE;
        TRY(PUTS(o, "{\"" JK_STRING_VALUE "\":"));
        TRY(put_str(o, val.p, val.n));
        return PUTS(o, "}");
    case PB_ANY_VALUE_BOOL_VALUE:
        if (val.wt != 0 || val.v > 1)
            return UNSURE;
        return val.v ? PUTS(o, "{\"" JK_BOOL_VALUE "\":true}") : PUTS(o, "{\"" JK_BOOL_VALUE "\":false}");
    case PB_ANY_VALUE_INT_VALUE:
        if (val.wt != 0)
            return UNSURE;
        TRY(PUTS(o, "{\"" JK_INT_VALUE "\":\""));
        TRY(put_i64(o, (int64_t)val.v));
        return PUTS(o, "\"}");
    case PB_ANY_VALUE_DOUBLE_VALUE: {
        if (val.wt != 1)
            return UNSURE;
        double d;
        memcpy(&d, &val.v, sizeof d);
        TRY(PUTS(o, "{\"" JK_DOUBLE_VALUE "\":"));
        TRY(put_double(o, d));
        return PUTS(o, "}");
    }
    case PB_ANY_VALUE_ARRAY_VALUE:
    case PB_ANY_VALUE_KVLIST_VALUE: {
        if (val.wt != 2)
            return UNSURE;
        if (depth + 1 > MAX_DEPTH)
            return UNSURE;
        /* ArrayValue / KeyValueList: values repeated (AnyValue / KeyValue), nothing else */
        _Static_assert(PB_ARRAY_VALUE_VALUES == PB_KEY_VALUE_LIST_VALUES, "ArrayValue's values and KeyValueList's");
        const uint8_t *q = val.p, *qend = val.p + val.n;
        Rep values;
        values.first = values.end = NULL; /* no {0}: gcc zeroes 24 bytes with a slow rep stos here */
        values.count = 0;
        while (q < qend) {
            const uint8_t *at = q;
            TRY(next(&q, qend, &f));
            if (f.field != PB_ARRAY_VALUE_VALUES)
                return UNSURE;
            TRY(rep(&values, &f, at, q));
        }
        int array = val.field == PB_ANY_VALUE_ARRAY_VALUE;
        TRY(array ? PUTS(o, "{\"" JK_ARRAY_VALUE "\":{") : PUTS(o, "{\"" JK_KVLIST_VALUE "\":{"));
        if (values.count) {
            TRY(PUTS(o, "\"" JK_VALUES "\":"));
            TRY(put_rep(o, &values, PB_ARRAY_VALUE_VALUES, array ? any_value : key_value, depth + 2));
        }
        return PUTS(o, "}}");
    }
    case PB_ANY_VALUE_BYTES_VALUE:
        if (val.wt != 2)
            return UNSURE;
        TRY(PUTS(o, "{\"" JK_BYTES_VALUE "\":"));
        TRY(put_b64(o, val.p, val.n));
        return PUTS(o, "}");
    case PB_ANY_VALUE_STRING_VALUE_STRINDEX: {
        int64_t i;
        if (val.wt != 0)
            return UNSURE;
        TRY(i32(val.v, &i));
        TRY(PUTS(o, "{\"" JK_STRING_VALUE_STRINDEX "\":"));
        TRY(put_i64(o, i));
        return PUTS(o, "}");
    }
    default:
        return UNSURE;
    }
}

/* KeyValue: key, value (present: written even when empty), keyStrindex. */
static int key_value(Out *o, const uint8_t *p, size_t n, int depth) {
    if (depth > MAX_DEPTH)
        return UNSURE;
    /* The usual attribute, exactly a non-empty key then a value, both under 128 bytes: no field loop. */
    if (n >= 4 && p[0] == PB_TAG1(PB_KEY_VALUE_KEY_TAG) && p[1] > 0 && p[1] < 0x80 && (size_t)p[1] + 4 <= n) {
        const uint8_t *v = p + 2 + p[1];
        if (v[0] == PB_TAG1(PB_KEY_VALUE_VALUE_TAG) && v[1] < 0x80 && (size_t)(v + 2 + v[1] - p) == n) {
            TRY(PUTS(o, "{\"" JK_KEY "\":"));
            TRY(put_str(o, p + 2, p[1]));
            TRY(PUTS(o, ",\"" JK_VALUE "\":"));
            TRY(any_value(o, v + 2, v[1], depth + 1));
            return PUTS(o, "}");
        }
    }
    const uint8_t *end = p + n;
    Field f;
    One k = {0}, v = {0}, strindex = {0};
    while (p < end) {
        TRY(next(&p, end, &f));
        switch (f.field) {
        case PB_KEY_VALUE_KEY: TRY(once(&k, &f, 2)); break;
        case PB_KEY_VALUE_VALUE: TRY(once(&v, &f, 2)); break;
        case PB_KEY_VALUE_KEY_STRINDEX: TRY(once(&strindex, &f, 0)); break;
        default: return UNSURE;
        }
    }
    int nf = 0;
    TRY(PUTS(o, "{"));
    if (k.n) {
        KEY(JK_KEY);
        TRY(put_str(o, k.p, k.n));
    }
    if (v.set) {
        KEY(JK_VALUE);
        TRY(any_value(o, v.p, v.n, depth + 1));
    }
    if (strindex.set) {
        int64_t i;
        TRY(i32(strindex.v, &i));
        if (i) {
            KEY(JK_KEY_STRINDEX);
            TRY(put_i64(o, i));
        }
    }
    return PUTS(o, "}");
}

/* The common tail of Resource / InstrumentationScope / Event / Link: attributes and their dropped count. */
static int put_attributes(Out *o, int *count, const Rep *attrs, uint32_t field, int depth) {
    if (!attrs->count)
        return OK;
    TRY(key(o, count, "\"" JK_ATTRIBUTES "\":", sizeof("\"" JK_ATTRIBUTES "\":") - 1));
    return put_rep(o, attrs, field, key_value, depth + 1);
}

static int put_count(Out *o, int *count, const char *name, size_t len, const One *one) {
    if (!one->set)
        return OK;
    if (one->v > UINT32_MAX) /* protobuf would truncate it: left to the Python path */
        return UNSURE;
    if (!one->v)
        return OK;
    TRY(key(o, count, name, len));
    return put_u64(o, one->v);
}

#define COUNT(lit, one) TRY(put_count(o, &nf, "\"" lit "\":", sizeof("\"" lit "\":") - 1, &(one)))

/* EntityRef: schemaUrl, type, idKeys, descriptionKeys. */
static int entity_ref(Out *o, const uint8_t *p, size_t n, int depth) {
    if (depth > MAX_DEPTH)
        return UNSURE;
    const uint8_t *end = p + n;
    Field f;
    One schema = {0}, type = {0};
    Rep ids = {0}, descs = {0};
    while (p < end) {
        const uint8_t *at = p;
        TRY(next(&p, end, &f));
        switch (f.field) {
        case PB_ENTITY_REF_SCHEMA_URL: TRY(once(&schema, &f, 2)); break;
        case PB_ENTITY_REF_TYPE: TRY(once(&type, &f, 2)); break;
        case PB_ENTITY_REF_ID_KEYS: TRY(rep(&ids, &f, at, p)); break;
        case PB_ENTITY_REF_DESCRIPTION_KEYS: TRY(rep(&descs, &f, at, p)); break;
        default: return UNSURE;
        }
    }
    int nf = 0;
    TRY(PUTS(o, "{"));
    if (schema.n) {
        KEY(JK_SCHEMA_URL);
        TRY(put_str(o, schema.p, schema.n));
    }
    if (type.n) {
        KEY(JK_TYPE);
        TRY(put_str(o, type.p, type.n));
    }
    if (ids.count) {
        KEY(JK_ID_KEYS);
        TRY(put_rep_str(o, &ids, PB_ENTITY_REF_ID_KEYS));
    }
    if (descs.count) {
        KEY(JK_DESCRIPTION_KEYS);
        TRY(put_rep_str(o, &descs, PB_ENTITY_REF_DESCRIPTION_KEYS));
    }
    return PUTS(o, "}");
}

/* Resource: attributes, droppedAttributesCount, entityRefs. */
static int resource(Out *o, const uint8_t *p, size_t n, int depth) {
    if (depth > MAX_DEPTH)
        return UNSURE;
    const uint8_t *end = p + n;
    Field f;
    One dropped = {0};
    Rep attrs = {0}, refs = {0};
    while (p < end) {
        const uint8_t *at = p;
        TRY(next(&p, end, &f));
        switch (f.field) {
        case PB_RESOURCE_ATTRIBUTES: TRY(rep(&attrs, &f, at, p)); break;
        case PB_RESOURCE_DROPPED_ATTRIBUTES_COUNT: TRY(once(&dropped, &f, 0)); break;
        case PB_RESOURCE_ENTITY_REFS: TRY(rep(&refs, &f, at, p)); break;
        default: return UNSURE;
        }
    }
    int nf = 0;
    TRY(PUTS(o, "{"));
    TRY(put_attributes(o, &nf, &attrs, PB_RESOURCE_ATTRIBUTES, depth));
    COUNT(JK_DROPPED_ATTRIBUTES_COUNT, dropped);
    if (refs.count) {
        KEY(JK_ENTITY_REFS);
        TRY(put_rep(o, &refs, PB_RESOURCE_ENTITY_REFS, entity_ref, depth + 1));
    }
    return PUTS(o, "}");
}

/* InstrumentationScope: name, version, attributes, droppedAttributesCount. */
static int scope(Out *o, const uint8_t *p, size_t n, int depth) {
    if (depth > MAX_DEPTH)
        return UNSURE;
    const uint8_t *end = p + n;
    Field f;
    One name = {0}, version = {0}, dropped = {0};
    Rep attrs = {0};
    while (p < end) {
        const uint8_t *at = p;
        TRY(next(&p, end, &f));
        switch (f.field) {
        case PB_INSTRUMENTATION_SCOPE_NAME: TRY(once(&name, &f, 2)); break;
        case PB_INSTRUMENTATION_SCOPE_VERSION: TRY(once(&version, &f, 2)); break;
        case PB_INSTRUMENTATION_SCOPE_ATTRIBUTES: TRY(rep(&attrs, &f, at, p)); break;
        case PB_INSTRUMENTATION_SCOPE_DROPPED_ATTRIBUTES_COUNT: TRY(once(&dropped, &f, 0)); break;
        default: return UNSURE;
        }
    }
    int nf = 0;
    TRY(PUTS(o, "{"));
    if (name.n) {
        KEY(JK_NAME);
        TRY(put_str(o, name.p, name.n));
    }
    if (version.n) {
        KEY(JK_VERSION);
        TRY(put_str(o, version.p, version.n));
    }
    TRY(put_attributes(o, &nf, &attrs, PB_INSTRUMENTATION_SCOPE_ATTRIBUTES, depth));
    COUNT(JK_DROPPED_ATTRIBUTES_COUNT, dropped);
    return PUTS(o, "}");
}

/* Span.Event: timeUnixNano, name, attributes, droppedAttributesCount. */
static int span_event(Out *o, const uint8_t *p, size_t n, int depth) {
    if (depth > MAX_DEPTH)
        return UNSURE;
    const uint8_t *end = p + n;
    Field f;
    One time = {0}, name = {0}, dropped = {0};
    Rep attrs = {0};
    while (p < end) {
        const uint8_t *at = p;
        TRY(next(&p, end, &f));
        switch (f.field) {
        case PB_SPAN_EVENT_TIME_UNIX_NANO: TRY(once(&time, &f, 1)); break;
        case PB_SPAN_EVENT_NAME: TRY(once(&name, &f, 2)); break;
        case PB_SPAN_EVENT_ATTRIBUTES: TRY(rep(&attrs, &f, at, p)); break;
        case PB_SPAN_EVENT_DROPPED_ATTRIBUTES_COUNT: TRY(once(&dropped, &f, 0)); break;
        default: return UNSURE;
        }
    }
    int nf = 0;
    TRY(PUTS(o, "{"));
    if (time.v) {
        KEY(JK_TIME_UNIX_NANO);
        TRY(PUTS(o, "\""));
        TRY(put_u64(o, time.v));
        TRY(PUTS(o, "\""));
    }
    if (name.n) {
        KEY(JK_NAME);
        TRY(put_str(o, name.p, name.n));
    }
    TRY(put_attributes(o, &nf, &attrs, PB_SPAN_EVENT_ATTRIBUTES, depth));
    COUNT(JK_DROPPED_ATTRIBUTES_COUNT, dropped);
    return PUTS(o, "}");
}

/* Span.Link: traceId, spanId (hex), traceState, attributes, droppedAttributesCount, flags. */
static int span_link(Out *o, const uint8_t *p, size_t n, int depth) {
    if (depth > MAX_DEPTH)
        return UNSURE;
    const uint8_t *end = p + n;
    Field f;
    One trace = {0}, span = {0}, state = {0}, dropped = {0}, flags = {0};
    Rep attrs = {0};
    while (p < end) {
        const uint8_t *at = p;
        TRY(next(&p, end, &f));
        switch (f.field) {
        case PB_SPAN_LINK_TRACE_ID: TRY(once(&trace, &f, 2)); break;
        case PB_SPAN_LINK_SPAN_ID: TRY(once(&span, &f, 2)); break;
        case PB_SPAN_LINK_TRACE_STATE: TRY(once(&state, &f, 2)); break;
        case PB_SPAN_LINK_ATTRIBUTES: TRY(rep(&attrs, &f, at, p)); break;
        case PB_SPAN_LINK_DROPPED_ATTRIBUTES_COUNT: TRY(once(&dropped, &f, 0)); break;
        case PB_SPAN_LINK_FLAGS: TRY(once(&flags, &f, 5)); break;
        default: return UNSURE;
        }
    }
    int nf = 0;
    TRY(PUTS(o, "{"));
    if (trace.n) {
        KEY(JK_TRACE_ID);
        TRY(put_hex(o, trace.p, trace.n));
    }
    if (span.n) {
        KEY(JK_SPAN_ID);
        TRY(put_hex(o, span.p, span.n));
    }
    if (state.n) {
        KEY(JK_TRACE_STATE);
        TRY(put_str(o, state.p, state.n));
    }
    TRY(put_attributes(o, &nf, &attrs, PB_SPAN_LINK_ATTRIBUTES, depth));
    COUNT(JK_DROPPED_ATTRIBUTES_COUNT, dropped);
    if (flags.v) {
        KEY(JK_FLAGS);
        TRY(put_u64(o, flags.v));
    }
    return PUTS(o, "}");
}

/* Status: message, code. */
static int span_status(Out *o, const uint8_t *p, size_t n, int depth) {
    if (depth > MAX_DEPTH)
        return UNSURE;
    const uint8_t *end = p + n;
    Field f;
    One message = {0}, code = {0};
    while (p < end) {
        TRY(next(&p, end, &f));
        switch (f.field) {
        case PB_STATUS_MESSAGE: TRY(once(&message, &f, 2)); break;
        case PB_STATUS_CODE: TRY(once(&code, &f, 0)); break;
        default: return UNSURE; /* 1 is the reserved deprecated_code */
        }
    }
    int nf = 0;
    TRY(PUTS(o, "{"));
    if (message.n) {
        KEY(JK_MESSAGE);
        TRY(put_str(o, message.p, message.n));
    }
    if (code.set) {
        int64_t c;
        TRY(i32(code.v, &c));
        if (c) {
            KEY(JK_CODE);
            TRY(put_i64(o, c));
        }
    }
    return PUTS(o, "}");
}

/* Span, fields in declaration order (as launchtrace.otlp.transcode writes them). */
static int span(Out *o, const uint8_t *p, size_t n, int depth) {
    if (depth > MAX_DEPTH)
        return UNSURE;
    const uint8_t *end = p + n;
    Field f;
    One trace = {0}, span_id = {0}, state = {0}, parent = {0}, name = {0}, kind = {0}, start = {0}, stop = {0};
    One dropped_attrs = {0}, dropped_events = {0}, dropped_links = {0}, st = {0}, flags = {0};
    Rep attrs = {0}, events = {0}, links = {0};
    while (p < end) {
        const uint8_t *at = p;
        TRY(next(&p, end, &f));
        switch (f.field) {
        case PB_SPAN_TRACE_ID: TRY(once(&trace, &f, 2)); break;
        case PB_SPAN_SPAN_ID: TRY(once(&span_id, &f, 2)); break;
        case PB_SPAN_TRACE_STATE: TRY(once(&state, &f, 2)); break;
        case PB_SPAN_PARENT_SPAN_ID: TRY(once(&parent, &f, 2)); break;
        case PB_SPAN_NAME: TRY(once(&name, &f, 2)); break;
        case PB_SPAN_KIND: TRY(once(&kind, &f, 0)); break;
        case PB_SPAN_START_TIME_UNIX_NANO: TRY(once(&start, &f, 1)); break;
        case PB_SPAN_END_TIME_UNIX_NANO: TRY(once(&stop, &f, 1)); break;
        case PB_SPAN_ATTRIBUTES: TRY(rep(&attrs, &f, at, p)); break;
        case PB_SPAN_DROPPED_ATTRIBUTES_COUNT: TRY(once(&dropped_attrs, &f, 0)); break;
        case PB_SPAN_EVENTS: TRY(rep(&events, &f, at, p)); break;
        case PB_SPAN_DROPPED_EVENTS_COUNT: TRY(once(&dropped_events, &f, 0)); break;
        case PB_SPAN_LINKS: TRY(rep(&links, &f, at, p)); break;
        case PB_SPAN_DROPPED_LINKS_COUNT: TRY(once(&dropped_links, &f, 0)); break;
        case PB_SPAN_STATUS: TRY(once(&st, &f, 2)); break;
        case PB_SPAN_FLAGS: TRY(once(&flags, &f, 5)); break;
        default: return UNSURE;
        }
    }
    /* a span without a 16-byte trace id and an 8-byte span id: the Python path decides (and refuses it) */
    if (trace.n != 16 || span_id.n != 8)
        return UNSURE;
    int nf = 0;
    TRY(PUTS(o, "{"));
    if (trace.n) {
        KEY(JK_TRACE_ID);
        TRY(put_hex(o, trace.p, trace.n));
    }
    if (span_id.n) {
        KEY(JK_SPAN_ID);
        TRY(put_hex(o, span_id.p, span_id.n));
    }
    if (state.n) {
        KEY(JK_TRACE_STATE);
        TRY(put_str(o, state.p, state.n));
    }
    if (parent.n) {
        KEY(JK_PARENT_SPAN_ID);
        TRY(put_hex(o, parent.p, parent.n));
    }
    if (flags.v) {
        KEY(JK_FLAGS);
        TRY(put_u64(o, flags.v));
    }
    if (name.n) {
        KEY(JK_NAME);
        TRY(put_str(o, name.p, name.n));
    }
    if (kind.set) {
        int64_t k;
        TRY(i32(kind.v, &k));
        if (k) {
            KEY(JK_KIND);
            TRY(put_i64(o, k));
        }
    }
    if (start.v) {
        KEY(JK_START_TIME_UNIX_NANO);
        TRY(PUTS(o, "\""));
        TRY(put_u64(o, start.v));
        TRY(PUTS(o, "\""));
    }
    if (stop.v) {
        KEY(JK_END_TIME_UNIX_NANO);
        TRY(PUTS(o, "\""));
        TRY(put_u64(o, stop.v));
        TRY(PUTS(o, "\""));
    }
    TRY(put_attributes(o, &nf, &attrs, PB_SPAN_ATTRIBUTES, depth));
    COUNT(JK_DROPPED_ATTRIBUTES_COUNT, dropped_attrs);
    if (events.count) {
        KEY(JK_EVENTS);
        TRY(put_rep(o, &events, PB_SPAN_EVENTS, span_event, depth + 1));
    }
    COUNT(JK_DROPPED_EVENTS_COUNT, dropped_events);
    if (links.count) {
        KEY(JK_LINKS);
        TRY(put_rep(o, &links, PB_SPAN_LINKS, span_link, depth + 1));
    }
    COUNT(JK_DROPPED_LINKS_COUNT, dropped_links);
    if (st.set) {
        KEY(JK_STATUS);
        TRY(span_status(o, st.p, st.n, depth + 1));
    }
    o->spans++;
    return PUTS(o, "}");
}

static int scope_spans(Out *o, const uint8_t *p, size_t n, int depth);

/* ResourceSpans (resource, scopeSpans) and ScopeSpans (scope, spans): the same shape, with schemaUrl, and the
 * same field numbers (named by ResourceSpans' below). */
_Static_assert(PB_SCOPE_SPANS_SCOPE == PB_RESOURCE_SPANS_RESOURCE &&
                   PB_SCOPE_SPANS_SPANS == PB_RESOURCE_SPANS_SCOPE_SPANS &&
                   PB_SCOPE_SPANS_SCHEMA_URL == PB_RESOURCE_SPANS_SCHEMA_URL,
               "ScopeSpans and ResourceSpans no longer share their field numbers");
static int group(Out *o, const uint8_t *p, size_t n, int depth, int is_resource) {
    if (depth > MAX_DEPTH)
        return UNSURE;
    const uint8_t *end = p + n;
    Field f;
    One head = {0}, schema = {0};
    Rep items = {0};
    while (p < end) {
        const uint8_t *at = p;
        TRY(next(&p, end, &f));
        switch (f.field) {
        case PB_RESOURCE_SPANS_RESOURCE: TRY(once(&head, &f, 2)); break;
        case PB_RESOURCE_SPANS_SCOPE_SPANS: TRY(rep(&items, &f, at, p)); break;
        case PB_RESOURCE_SPANS_SCHEMA_URL: TRY(once(&schema, &f, 2)); break;
        default: return UNSURE;
        }
    }
    int nf = 0;
    TRY(PUTS(o, "{"));
    if (head.set) {
        if (is_resource) {
            KEY(JK_RESOURCE);
            TRY(resource(o, head.p, head.n, depth + 1));
        } else {
            KEY(JK_SCOPE);
            TRY(scope(o, head.p, head.n, depth + 1));
        }
    }
    if (items.count) {
        if (is_resource)
            KEY(JK_SCOPE_SPANS);
        else
            KEY(JK_SPANS);
        TRY(put_rep(o, &items, PB_RESOURCE_SPANS_SCOPE_SPANS, is_resource ? scope_spans : span, depth + 1));
    }
    if (schema.n) {
        KEY(JK_SCHEMA_URL);
        TRY(put_str(o, schema.p, schema.n));
    }
    return PUTS(o, "}");
}

static int scope_spans(Out *o, const uint8_t *p, size_t n, int depth) { return group(o, p, n, depth, 0); }

static int resource_spans(Out *o, const uint8_t *p, size_t n, int depth) { return group(o, p, n, depth, 1); }

/* ExportTraceServiceRequest / TracesData: resourceSpans, repeated (field 1 in both). */
static int request(Out *o, const uint8_t *p, size_t n) {
    const uint8_t *end = p + n;
    Field f;
    Rep items = {0};
    while (p < end) {
        const uint8_t *at = p;
        TRY(next(&p, end, &f));
        if (f.field != PB_TRACES_DATA_RESOURCE_SPANS)
            return UNSURE;
        TRY(rep(&items, &f, at, p));
    }
    TRY(PUTS(o, "{\"" JK_RESOURCE_SPANS "\":"));
    if (items.count)
        TRY(put_rep(o, &items, PB_TRACES_DATA_RESOURCE_SPANS, resource_spans, 2));
    else
        TRY(PUTS(o, "[]"));
    return PUTS(o, "}\n");
}

/* -- Python ------------------------------------------------------------------------------------------------- */

#define POOL 4                     /* output buffers kept between calls */
#define KEEP_SCRATCH (16u << 20)   /* the largest kept */

/* Output buffers kept between calls: a fresh malloc of a request's size (megabytes) is a fresh mmap, and
 * faulting in and zeroing its pages cost more than the walk. Taken and given back with the GIL held (the walk
 * itself runs without it), so no other lock is needed; at most POOL of them, each at most KEEP_SCRATCH. */
static char *pool_buf[POOL];
static size_t pool_cap[POOL];
static int pool_n;

/* Walk data (bytes-like): the line (write) or only the span count; None when the Python path must decide. */
static PyObject *walk(PyObject *data, int write) {
    Py_buffer view;
    if (PyObject_GetBuffer(data, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    Out o = {.write = write};
    size_t n = (size_t)view.len;
    int rc = OK;
    if (write) {
        if (pool_n > 0) { /* owned by o until given back below */
            pool_n--;
            o.buf = pool_buf[pool_n];
            o.cap = pool_cap[pool_n];
        }
        rc = grow(&o, n < SIZE_MAX / 4 ? 3 * n + 64 : n);
    }
    if (rc == OK) {
        if (PyBytes_CheckExact(data) && n >= RELEASE_GIL_AT) {
            Py_BEGIN_ALLOW_THREADS rc = request(&o, view.buf, n);
            Py_END_ALLOW_THREADS
        } else {
            rc = request(&o, view.buf, n);
        }
    }
    PyBuffer_Release(&view);
    PyObject *line = NULL;
    if (rc == OK && write)
        line = PyBytes_FromStringAndSize(o.buf, (Py_ssize_t)o.len);
    if (o.buf != NULL) {
        if (o.cap <= KEEP_SCRATCH && pool_n < POOL) {
            pool_buf[pool_n] = o.buf;
            pool_cap[pool_n] = o.cap;
            pool_n++;
        } else {
            free(o.buf);
        }
    }
    if (rc == NOMEM)
        return PyErr_NoMemory();
    if (rc != OK)
        Py_RETURN_NONE;
    if (!write)
        return PyLong_FromSsize_t(o.spans);
    if (line == NULL)
        return NULL;
    return Py_BuildValue("(Nn)", line, o.spans);
}

static PyObject *py_transcode(PyObject *self, PyObject *data) {
    (void)self;
    return walk(data, 1);
}

static PyObject *py_count(PyObject *self, PyObject *data) {
    (void)self;
    return walk(data, 0);
}

static PyObject *py_format_double(PyObject *self, PyObject *arg) {
    (void)self;
    double x = PyFloat_AsDouble(arg);
    if (x == -1.0 && PyErr_Occurred())
        return NULL;
    Out o = {.write = 1};
    int rc = put_double(&o, x);
    if (rc != OK) {
        free(o.buf);
        if (rc == NOMEM)
            return PyErr_NoMemory();
        Py_RETURN_NONE;
    }
    PyObject *out = PyBytes_FromStringAndSize(o.buf, (Py_ssize_t)o.len);
    free(o.buf);
    return out;
}

static PyMethodDef methods[] = {
    {"transcode", py_transcode, METH_O,
     "transcode(data) -> (line, spans) | None\n\nThe OTLP JSON Lines line (with its newline) of a serialized "
     "ExportTraceServiceRequest / TracesData and its span count; None: the bytes hold something to leave to "
     "the Python path (which parses them, and rejects them if malformed)."},
    {"count", py_count, METH_O,
     "count(data) -> int | None\n\nThe span count of a serialized request, after the same checks as "
     "transcode (so transcode accepts what count accepts); None as for transcode."},
    {"format_double", py_format_double, METH_O,
     "format_double(x) -> bytes | None\n\nA double as the JSON line writes it (for the tests)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_wire2json", "OTLP protobuf traces -> OTLP JSON Lines (launchtrace collect's writer).",
    -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__wire2json(void) {
    jf_init();
    return PyModule_Create(&module);
}
