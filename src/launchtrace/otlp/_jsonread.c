/* OTLP JSON Lines -> SpanData in C: a hand-written strict JSON parser for the TracesData line, compiled.
 *
 * Why: `orjson.loads` alone, building a dict and a str per attribute, reads a launch file slower than fleet
 * baselines can afford, orjson and the general decoder (the path without a compiler) slower still.
 * This parser reads the line's
 * bytes once and builds the SpanData / SpanEvent / SpanLink objects, the attribute tuples and values directly,
 * through caches of what repeats from span to span: strings by their raw bytes, whole attribute objects
 * ({"key":..,"value":..}) by their raw text, resource and scope attribute arrays by their raw text, the
 * trace id and parent id of the previous span. A span attribute is first compared with the text the same
 * position held in the previous span (memcmp, no scan or hash); a position (or a string field) whose values
 * keep missing the caches is read without them for a while, so ever-new values cost no cache upkeep. The
 * caches start small and grow, up to their bounds (Cache, below).
 *
 * The contract is json_fast.FastLineDecoder's: `Decoder.decode(line)` returns exactly the spans the general
 * decoder (json_codec.decode_traces_data of orjson.loads(line)) returns for a line it reads without a
 * problem, or None, and the caller reads the line the general way. Anything this parser is not sure of is
 * None: a key it does not know (legacy keys included), a key written twice, another JSON type than the usual
 * one for a field, integers outside int64, floats that overflow, lone surrogates, nesting past MAX_DEPTH, too
 * many empty array elements (MAX_EMPTY_OBJECTS), any value the general decoder would report. What it accepts
 * it validates as strictly as orjson does: the JSON grammar (no trailing commas, no leading zeros, whitespace
 * only of the four JSON kinds), UTF-8 (through CPython's strict decoder: no surrogates, no overlong forms), no
 * raw control characters in strings, escapes (a string holding one is decoded by orjson itself).
 *
 * Why the caches are sound: a cached text was parsed and validated in full once and decoded to a value that
 * holds nothing mutable (no dict); JSON text is context-free, so the same bytes at the start of a value are
 * the same valid value again. A hit skips parsing, never validation. The caches are emptied past their
 * bounds (entries and bytes), so memory stays bounded whatever the input.
 *
 * The objects: SpanData and friends are frozen slotted dataclasses; calling them costs more than the rest of
 * the decoding (object.__setattr__ per field). As launchtrace.fastinit does, this module makes an ordinary
 * instance of the class (tp_alloc) and fills its slots, after checking at construction that the class is
 * exactly a set of object slots with these names (no __dict__, no __post_init__, size accounted for).
 *
 * The OTLP/JSON keys it matches are the JK_ macros of _jsonkeys.h, generated from the field table
 * (launchtrace.otlp.fields) by scripts/gen_otlp_keys.py.
 *
 * tests/test_jsonread_native.py checks this against the general decoder on generated spans, every upstream
 * fixture line and malformed lines (truncated, wrong types, invalid UTF-8, duplicate keys, deep nesting).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include "../_native.h"
#include "_jsonkeys.h"
#include "_spandata.h"
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#define MAX_DEPTH 48        /* arrayValue / kvlistValue levels: the general decoder recurses in Python */
#define STR_CACHE_LEN 64    /* strings up to this many raw bytes are cached */
#define PAIR_CACHE_LEN 512  /* attribute objects up to this many bytes are cached */
#define BLOCK_CACHE_LEN 65536 /* resource / scope attribute arrays up to this many bytes are cached */
#define MAX_EMPTY_OBJECTS 100000 /* sources.files's: a line of 1 MiB with more is skipped with or without this */

/* ------------------------------------------------------------------------------------------ the caches */

typedef struct {
    uint64_t hash;
    Py_ssize_t len;
    char *text; /* NULL: empty slot */
    PyObject *value;
} Entry;

typedef struct {
    Entry *slots;
    size_t mask;      /* slots - 1 (a power of two) */
    size_t max_slots; /* grown up to this, then emptied when full */
    size_t count;     /* entries in use; at most half the slots */
    size_t bytes;     /* text bytes held */
    size_t max_bytes; /* emptied past this */
    Py_ssize_t max_len;
} Cache;

static uint64_t hash_bytes(const unsigned char *s, Py_ssize_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ (uint64_t)n;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = (h ^ w) * 0xff51afd7ed558ccdULL;
        h ^= h >> 32;
        s += 8;
        n -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, s, (size_t)n);
    h = (h ^ w) * 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 29;
    return h;
}

#define FIRST_SLOTS 64 /* a cache starts this small and grows as it fills: a small file costs little */

static int cache_init(Cache *c, size_t max_slots, size_t max_bytes, Py_ssize_t max_len) {
    c->slots = PyMem_Calloc(FIRST_SLOTS, sizeof(Entry));
    if (c->slots == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    c->mask = FIRST_SLOTS - 1;
    c->max_slots = max_slots;
    c->count = 0;
    c->bytes = 0;
    c->max_bytes = max_bytes;
    c->max_len = max_len;
    return 0;
}

static void cache_clear(Cache *c) {
    if (c->slots == NULL) return;
    for (size_t i = 0; i <= c->mask; i++) {
        Entry *e = &c->slots[i];
        if (e->text != NULL) {
            PyMem_Free(e->text);
            e->text = NULL;
            Py_CLEAR(e->value);
        }
    }
    c->count = 0;
    c->bytes = 0;
}

static void cache_free(Cache *c) {
    cache_clear(c);
    PyMem_Free(c->slots);
    c->slots = NULL;
}

/* The cached value for these bytes (borrowed), or NULL. */
static PyObject *cache_get(Cache *c, const unsigned char *s, Py_ssize_t n, uint64_t h) {
    size_t i = (size_t)h & c->mask;
    for (;;) {
        Entry *e = &c->slots[i];
        if (e->text == NULL) return NULL;
        if (e->hash == h && e->len == n && memcmp(e->text, s, (size_t)n) == 0) return e->value;
        i = (i + 1) & c->mask;
    }
}

/* Twice the slots, the entries moved over; -1 (nothing changed) when out of memory. */
static int cache_grow(Cache *c) {
    size_t slots = (c->mask + 1) * 2;
    Entry *bigger = PyMem_Calloc(slots, sizeof(Entry));
    if (bigger == NULL) return -1;
    for (size_t i = 0; i <= c->mask; i++) {
        if (c->slots[i].text == NULL) continue;
        size_t j = (size_t)c->slots[i].hash & (slots - 1);
        while (bigger[j].text != NULL) j = (j + 1) & (slots - 1);
        bigger[j] = c->slots[i];
    }
    PyMem_Free(c->slots);
    c->slots = bigger;
    c->mask = slots - 1;
    return 0;
}

/* Remembers value for these bytes (not there yet); grown, or emptied first when full. Out of memory: not
 * remembered. */
static void cache_put(Cache *c, const unsigned char *s, Py_ssize_t n, uint64_t h, PyObject *value) {
    if (n > c->max_len) return;
    if (c->bytes + (size_t)n > c->max_bytes)
        cache_clear(c);
    else if ((c->count + 1) * 2 > c->mask + 1 && (c->mask + 1 >= c->max_slots || cache_grow(c) < 0))
        cache_clear(c);
    char *text = PyMem_Malloc(n > 0 ? (size_t)n : 1);
    if (text == NULL) return;
    memcpy(text, s, (size_t)n);
    size_t i = (size_t)h & c->mask;
    while (c->slots[i].text != NULL) i = (i + 1) & c->mask;
    Entry *e = &c->slots[i];
    e->hash = h;
    e->len = n;
    e->text = text;
    Py_INCREF(value);
    e->value = value;
    c->count++;
    c->bytes += (size_t)n;
}

/* ----------------------------------------------------------------------------------------- the decoder */


/* A field whose strings go through the string cache while they repeat: after two misses in a row the next
 * SITE_SKIP strings of that field are made without it (unique span names would only fill it). */
#define SITE_SKIP 16
typedef struct {
    unsigned char misses, skip;
} Site;
#define POSITIONS 64 /* span attribute positions with a prediction */
#define POS_LEN 160  /* the longest attribute text a position remembers */
#define POS_SKIP 16  /* spans a position of ever-new values reads without the caches */

/* What the span attribute at one index of the array was last time: the text and its (key, value), and how
 * often the caches missed there: a value that never repeats (a sequence number) is read without them. */
typedef struct {
    Py_ssize_t len;
    PyObject *pair; /* NULL: nothing remembered */
    unsigned char misses, skip;
    unsigned char text[POS_LEN];
} Pos;

typedef struct {
    Py_ssize_t len;
    unsigned char text[2 * 16];
    PyObject *value; /* bytes, or NULL */
} LastId;

typedef struct {
    PyObject_HEAD
    PyTypeObject *span_cls, *event_cls, *link_cls;
    Py_ssize_t span_off[N_SPANDATA_FIELDS], event_off[N_EVENT_FIELDS], link_off[N_LINK_FIELDS];
    PyObject *decode_id; /* ids.decode_id(text, size, encoding): everything but plain hex */
    PyObject *dec_bytes; /* json_codec._dec_bytes(text): bytesValue */
    PyObject *encoding;  /* the id encoding, a str */
    PyObject *kind_names, *status_names; /* tuples of str: enum names */
    int hex_ids; /* encoding is "auto" or "hex": decode_id's plain-hex shortcut applies */
    PyObject *size16, *size8, *empty_str, *empty_tuple, *zero;
    Cache strings, pairs, blocks;
    LastId last_trace, last_parent;
    Pos pos[POSITIONS];
    Site name_site, value_site, other_site;
} Decoder;

typedef struct {
    const unsigned char *p, *end;
    Decoder *d;
    int uncached; /* 1: string values are not put in the cache (a position of ever-new values) */
    Py_ssize_t empties; /* empty objects read as array elements: entries, events, values */
    PyObject *out;      /* the spans of the line */
} P;

/* Every parse function returns a new reference (or 0), or NULL (-1): with an exception set for a real error
 * (out of memory), without one for "no answer". */

static unsigned char HEXVAL[256]; /* a hex digit's value, 0xFF for any other byte */

/* 0: a byte a string holds as is (printable ASCII but " and \); else 1 */
static unsigned char SPECIAL[256];

static void init_tables(void) {
    for (int c = 0; c < 256; c++) SPECIAL[c] = (c < 0x20 || c >= 0x80 || c == '"' || c == '\\');
    memset(HEXVAL, 0xFF, sizeof(HEXVAL));
    for (int c = 0; c < 10; c++) HEXVAL['0' + c] = (unsigned char)c;
    for (int c = 0; c < 6; c++) HEXVAL['a' + c] = HEXVAL['A' + c] = (unsigned char)(10 + c);
}

static inline void ws(P *ps) {
    const unsigned char *p = ps->p, *end = ps->end;
    while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')) p++;
    ps->p = p;
}

static inline int peek(P *ps) {
    ws(ps);
    return ps->p < ps->end ? *ps->p : -1;
}

static inline int eat(P *ps, int c) {
    if (peek(ps) == c) {
        ps->p++;
        return 1;
    }
    return 0;
}

static inline int literal(P *ps, const char *word, Py_ssize_t n) {
    if (ps->end - ps->p >= n && memcmp(ps->p, word, (size_t)n) == 0) {
        ps->p += n;
        return 1;
    }
    return 0;
}

#define ESCAPED 1
#define NONASCII 2

#define ONES 0x0101010101010101ULL
#define HIGHS 0x8080808080808080ULL
#define HAS_ZERO(x) (((x) - ONES) & ~(x))

static inline uint64_t load8(const unsigned char *p) {
    uint64_t w;
    memcpy(&w, p, 8);
    return w;
}

/* Nonzero when one of the 8 bytes may be special (", \, a control character, non-ASCII); never zero when
 * one is (false alarms only: the bytes are then looked at one by one). */
static inline uint64_t special8(uint64_t w) {
    uint64_t q = w ^ (ONES * '"'), b = w ^ (ONES * '\\');
    return (HAS_ZERO(q) | HAS_ZERO(b) | (w - ONES * 0x20) | w) & HIGHS;
}

/* The string at ps->p (which is '"'): its raw bytes between the quotes, whether it holds escapes or
 * non-ASCII bytes. Checks what a scan can: no raw control characters, escapes of the JSON kinds, \u with
 * four hex digits. UTF-8 and surrogates are checked when the str is made. 0, or -1: no answer. */
static int scan_string(P *ps, const unsigned char **s, Py_ssize_t *n, int *flags) {
    const unsigned char *p = ps->p + 1, *end = ps->end, *start = p;
    int f = 0;
    for (;;) {
        while (end - p >= 8 && !special8(load8(p))) p += 8;
        const unsigned char *stop = end - p > 8 ? p + 8 : end;
        while (p < stop && !SPECIAL[*p]) p++;
        if (p >= end) return -1;
        if (p == stop) continue; /* a false alarm */
        unsigned char c = *p;
        if (c == '"') break;
        if (c == '\\') {
            f |= ESCAPED;
            if (end - p < 2) return -1;
            unsigned char e = p[1];
            if (e == 'u') {
                if (end - p < 6 || (HEXVAL[p[2]] | HEXVAL[p[3]] | HEXVAL[p[4]] | HEXVAL[p[5]]) == 0xFF) return -1;
                p += 6;
            } else if (e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n' || e == 'r' ||
                       e == 't') {
                p += 2;
            } else {
                return -1;
            }
        } else if (c < 0x20) {
            return -1;
        } else {
            f |= NONASCII;
            p++;
        }
    }
    *s = start;
    *n = p - start;
    *flags = f;
    ps->p = p + 1;
    return 0;
}

/* CPython's strict UTF-8 decoder: invalid UTF-8 (surrogates, overlong forms, truncated) is no answer. */
static PyObject *decode_utf8(const char *s, Py_ssize_t n) {
    PyObject *r = PyUnicode_DecodeUTF8(s, n, NULL);
    if (r == NULL && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) PyErr_Clear();
    return r;
}

/* A string with escapes (checked by scan_string) as orjson reads it, the general decoder's parser: no answer for
 * what it refuses (a lone surrogate). Escapes are rare in spans; orjson is imported for the first one. */
static PyObject *unescape(const unsigned char *s, Py_ssize_t n) {
    static PyObject *loads;
    if (loads == NULL) {
        PyObject *orjson = PyImport_ImportModule("orjson");
        if (orjson == NULL) return NULL;
        loads = PyObject_GetAttrString(orjson, "loads");
        Py_DECREF(orjson);
        if (loads == NULL) return NULL;
    }
    PyObject *quoted = PyBytes_FromStringAndSize(NULL, n + 2);
    if (quoted == NULL) return NULL;
    char *q = PyBytes_AS_STRING(quoted);
    q[0] = q[n + 1] = '"';
    memcpy(q + 1, s, (size_t)n);
    PyObject *r = PyObject_CallOneArg(loads, quoted);
    Py_DECREF(quoted);
    if (r == NULL && PyErr_ExceptionMatches(PyExc_ValueError)) PyErr_Clear(); /* JSONDecodeError */
    return r;
}

/* The str of a scanned string; short ones through the cache of raw bytes (unless cache is 0), as long as
 * the strings of this field (site, NULL: always) repeat. */
static PyObject *make_str_c(Decoder *d, const unsigned char *s, Py_ssize_t n, int flags, int cache, Site *site) {
    uint64_t h = 0;
    if (cache && site != NULL && site->skip) {
        site->skip--;
        cache = 0;
    }
    if (cache && n <= STR_CACHE_LEN) {
        h = hash_bytes(s, n);
        PyObject *v = cache_get(&d->strings, s, n, h);
        if (v != NULL) {
            if (site != NULL) site->misses = 0;
            return Py_NewRef(v);
        }
        if (site != NULL && ++site->misses >= 2) {
            site->skip = SITE_SKIP;
            site->misses = 1;
        }
    }
    PyObject *r;
    if (flags == 0) {
        r = PyUnicode_New(n, 127);
        if (r == NULL) return NULL;
        memcpy(PyUnicode_1BYTE_DATA(r), s, (size_t)n);
    } else if (flags & ESCAPED) {
        r = unescape(s, n);
    } else {
        r = decode_utf8((const char *)s, n);
    }
    if (r != NULL && cache && n <= STR_CACHE_LEN) cache_put(&d->strings, s, n, h, r);
    return r;
}

static PyObject *make_str(Decoder *d, const unsigned char *s, Py_ssize_t n, int flags) {
    return make_str_c(d, s, n, flags, 1, NULL);
}

/* A JSON string value at ps->p as a str (through the cache as the site allows), or no answer. */
static PyObject *parse_str_at(P *ps, Site *site) {
    const unsigned char *s;
    Py_ssize_t n;
    int f;
    if (peek(ps) != '"' || scan_string(ps, &s, &n, &f) < 0) return NULL;
    return make_str_c(ps->d, s, n, f, 1, site);
}

/* A string field of the skeleton (trace state, scope name, ...): repeats are cached, as long as they repeat. */
static PyObject *parse_str(P *ps) { return parse_str_at(ps, &ps->d->other_site); }

/* An object key (with its ':'): its raw bytes; a key with escapes is no answer (no known key has one). */
static int read_key(P *ps, const unsigned char **k, Py_ssize_t *kn) {
    int f;
    if (peek(ps) != '"' || scan_string(ps, k, kn, &f) < 0 || f != 0) return -1;
    return eat(ps, ':') ? 0 : -1;
}

/* After '{': 1 with the first key read, 0 at '}' (empty object), -1 no answer. */
static int obj_first(P *ps, const unsigned char **k, Py_ssize_t *kn) {
    if (eat(ps, '}')) return 0;
    return read_key(ps, k, kn) < 0 ? -1 : 1;
}

/* After a member's value: 1 with the next key read, 0 at '}', -1 no answer. */
static int obj_next(P *ps, const unsigned char **k, Py_ssize_t *kn) {
    int c = peek(ps);
    if (c == ',') {
        ps->p++;
        return read_key(ps, k, kn) < 0 ? -1 : 1;
    }
    if (c == '}') {
        ps->p++;
        return 0;
    }
    return -1;
}

/* After '[': 1 when an element follows, 0 at ']'. After an element: arr_next, 1 after ',', 0 at ']', -1. */
static int arr_first(P *ps) { return eat(ps, ']') ? 0 : 1; }

static int arr_next(P *ps) {
    int c = peek(ps);
    if (c == ',') {
        ps->p++;
        return 1;
    }
    if (c == ']') {
        ps->p++;
        return 0;
    }
    return -1;
}

#define IS(k, kn, lit) ((kn) == (Py_ssize_t)sizeof(lit) - 1 && memcmp((k), (lit), sizeof(lit) - 1) == 0)
#define SEEN(bit)                                \
    do {                                         \
        if (seen & (1u << (bit))) goto fail;     \
        seen |= 1u << (bit);                     \
    } while (0)

typedef struct {
    int is_int, big;
    long long i;
    const unsigned char *s;
    Py_ssize_t n;
} Num;

/* A JSON number at ps->p, its grammar checked; an integer's value when it fits in int64 (else big). */
static int parse_num(P *ps, Num *num) {
    const unsigned char *p = ps->p, *end = ps->end, *s = p;
    int neg = 0, over = 0, is_int = 1;
    unsigned long long v = 0;
    if (p < end && *p == '-') {
        neg = 1;
        p++;
    }
    if (p >= end) return -1;
    if (*p == '0') {
        p++;
    } else if (*p >= '1' && *p <= '9') {
        while (p < end && *p >= '0' && *p <= '9') {
            unsigned dgt = *p - '0';
            if (over || v > (ULLONG_MAX - dgt) / 10)
                over = 1;
            else
                v = v * 10 + dgt;
            p++;
        }
    } else {
        return -1;
    }
    if (p < end && *p == '.') {
        p++;
        if (p >= end || *p < '0' || *p > '9') return -1;
        while (p < end && *p >= '0' && *p <= '9') p++;
        is_int = 0;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < end && (*p == '+' || *p == '-')) p++;
        if (p >= end || *p < '0' || *p > '9') return -1;
        while (p < end && *p >= '0' && *p <= '9') p++;
        is_int = 0;
    }
    num->is_int = is_int;
    num->big = 0;
    num->i = 0;
    num->s = s;
    num->n = p - s;
    if (is_int) {
        if (over)
            num->big = 1;
        else if (neg)
            num->big = v > 9223372036854775808ULL, num->i = v == 9223372036854775808ULL ? LLONG_MIN : -(long long)v;
        else
            num->big = v > (unsigned long long)LLONG_MAX, num->i = (long long)v;
    }
    ps->p = p;
    return 0;
}

/* The float of a non-integer number (its grammar checked: plain ASCII), as float(): correctly rounded, as
 * orjson; overflow is no answer. */
static PyObject *num_float(Num *num) {
    PyObject *text = PyUnicode_FromStringAndSize((const char *)num->s, num->n);
    if (text == NULL) return NULL;
    PyObject *r = PyFloat_FromString(text);
    Py_DECREF(text);
    if (r != NULL && !isfinite(PyFloat_AS_DOUBLE(r))) Py_CLEAR(r);
    return r;
}

static inline int is_num_start(int c) { return c == '-' || (c >= '0' && c <= '9'); }

/* int(text) for a string field or value: plain digits at once, anything else through int() itself. */
static PyObject *str_to_int(Decoder *d, const unsigned char *s, Py_ssize_t n, int flags) {
    int neg = n > 0 && s[0] == '-';
    if (flags == 0 && n > neg && n - neg <= 19) { /* 19 digits fit in uint64 */
        Py_ssize_t i = neg;
        unsigned long long v = 0;
        for (; i < n && s[i] >= '0' && s[i] <= '9'; i++) v = v * 10 + (unsigned)(s[i] - '0');
        if (i == n && !neg) return PyLong_FromUnsignedLongLong(v);
        if (i == n && v <= 9223372036854775807ULL) return PyLong_FromLongLong(-(long long)v);
    }
    PyObject *str = make_str(d, s, n, flags);
    if (str == NULL) return NULL;
    PyObject *r = PyLong_FromUnicodeObject(str, 10);
    Py_DECREF(str);
    if (r == NULL && PyErr_ExceptionMatches(PyExc_ValueError)) PyErr_Clear();
    return r;
}

/* json_codec._int: a JSON integer (int64) or a string read by int(); floats and the rest are no answer. */
static PyObject *parse_intish(P *ps) {
    int c = peek(ps);
    if (c == '"') {
        const unsigned char *s;
        Py_ssize_t n;
        int f;
        if (scan_string(ps, &s, &n, &f) < 0) return NULL;
        return str_to_int(ps->d, s, n, f);
    }
    if (is_num_start(c)) {
        Num num;
        if (parse_num(ps, &num) < 0 || !num.is_int || num.big) return NULL;
        return PyLong_FromLongLong(num.i);
    }
    return NULL;
}

/* json_codec._enum: an int in range, one of the names, or a decimal string in range. */
static PyObject *parse_enum(P *ps, PyObject *names) { /* names: a tuple of str (ASCII, or never matched) */
    Py_ssize_t count = PyTuple_GET_SIZE(names);
    int c = peek(ps);
    if (c == '"') {
        const unsigned char *s;
        Py_ssize_t n;
        int f;
        if (scan_string(ps, &s, &n, &f) < 0 || f != 0 || n == 0) return NULL;
        for (Py_ssize_t i = 0; i < count; i++) {
            PyObject *name = PyTuple_GET_ITEM(names, i);
            if (PyUnicode_Check(name) && PyUnicode_IS_COMPACT_ASCII(name) && PyUnicode_GET_LENGTH(name) == n &&
                memcmp(PyUnicode_DATA(name), s, (size_t)n) == 0)
                return PyLong_FromSsize_t(i);
        }
        Py_ssize_t v = 0;
        for (Py_ssize_t i = 0; i < n; i++) {
            if (s[i] < '0' || s[i] > '9') return NULL;
            v = v * 10 + (s[i] - '0');
            if (v >= count) return NULL;
        }
        return PyLong_FromSsize_t(v);
    }
    if (is_num_start(c)) {
        Num num;
        if (parse_num(ps, &num) < 0 || !num.is_int || num.big || num.i < 0 || num.i >= count) return NULL;
        return PyLong_FromLongLong(num.i);
    }
    return NULL;
}

/* An id as ids.decode_id(text, size, encoding) reads it: plain hex here, anything else through decode_id. */
static PyObject *parse_id(P *ps, Py_ssize_t size, LastId *last) {
    Decoder *d = ps->d;
    const unsigned char *s;
    Py_ssize_t n;
    int f;
    if (peek(ps) != '"' || scan_string(ps, &s, &n, &f) < 0) return NULL;
    if (f == 0 && d->hex_ids && n == 2 * size) {
        if (last != NULL && last->value != NULL && last->len == n && memcmp(last->text, s, (size_t)n) == 0) {
            return Py_NewRef(last->value);
        }
        unsigned char raw[16];
        unsigned any = 0, bad = 0;
        for (Py_ssize_t i = 0; i < size; i++) {
            unsigned hi = HEXVAL[s[2 * i]], lo = HEXVAL[s[2 * i + 1]];
            bad |= (hi | lo) == 0xFF ? 1 : 0;
            raw[i] = (unsigned char)(hi << 4 | (lo & 0xF));
            any |= raw[i];
        }
        if (!bad) {
            if (!any) return NULL; /* all zeros: IdError */
            PyObject *r = PyBytes_FromStringAndSize((const char *)raw, size);
            if (r != NULL && last != NULL) {
                Py_XSETREF(last->value, Py_NewRef(r));
                memcpy(last->text, s, (size_t)n);
                last->len = n;
            }
            return r;
        }
    }
    PyObject *text = make_str(d, s, n, f);
    if (text == NULL) return NULL;
    PyObject *r = PyObject_CallFunctionObjArgs(d->decode_id, text, size == 16 ? d->size16 : d->size8, d->encoding,
                                               NULL);
    Py_DECREF(text);
    if (r == NULL && PyErr_ExceptionMatches(PyExc_ValueError)) PyErr_Clear(); /* IdError: a problem */
    if (r != NULL && (!PyBytes_CheckExact(r) || PyBytes_GET_SIZE(r) != size)) Py_CLEAR(r);
    return r;
}

/* ---------------------------------------------------------------------------------------- attributes */

static PyObject *parse_value(P *ps, int depth, int *mutable);

/* {"key": str, "value": AnyValue} at ps->p -> (key, value). */
static PyObject *parse_attr(P *ps, int depth, int *mutable) {
    PyObject *key = NULL, *value = NULL;
    const unsigned char *k;
    Py_ssize_t kn;
    unsigned seen = 0;
    if (!eat(ps, '{')) return NULL;
    for (int r = obj_first(ps, &k, &kn); r != 0; r = obj_next(ps, &k, &kn)) {
        if (r < 0) goto fail;
        if (IS(k, kn, JK_KEY)) {
            SEEN(0);
            if ((key = parse_str_at(ps, NULL)) == NULL) goto fail; /* keys repeat: always cached */
        } else if (IS(k, kn, JK_VALUE)) {
            SEEN(1);
            if ((value = parse_value(ps, depth, mutable)) == NULL) goto fail;
        } else {
            goto fail;
        }
    }
    if (seen != 3) goto fail;
    PyObject *pair = PyTuple_New(2);
    if (pair == NULL) goto fail;
    PyTuple_SET_ITEM(pair, 0, key);
    PyTuple_SET_ITEM(pair, 1, value);
    return pair;
fail:
    Py_XDECREF(key);
    Py_XDECREF(value);
    return NULL;
}

/* The raw length of the object or array at s (brackets balanced outside strings), or -1 past max bytes.
 * Nothing is validated here: only a text found in a cache (validated when it was put there) is trusted. */
static Py_ssize_t extent(const unsigned char *s, const unsigned char *end, Py_ssize_t max) {
    const unsigned char *p = s, *lim = end - s > max ? s + max : end;
    int depth = 0;
    while (p < lim) {
        unsigned char c = *p++;
        if (c == '"') {
            for (;;) {
                while (lim - p >= 8) {
                    uint64_t w = load8(p), q = w ^ (ONES * '"'), b = w ^ (ONES * '\\');
                    if ((HAS_ZERO(q) | HAS_ZERO(b)) & HIGHS) break;
                    p += 8;
                }
                while (p < lim && *p != '"' && *p != '\\') p++;
                if (p >= lim) return -1;
                if (*p == '"') break;
                p += 2; /* an escape */
            }
            p++;
        } else if (c == '{' || c == '[') {
            depth++;
        } else if (c == '}' || c == ']') {
            if (--depth == 0) return p - s;
        }
    }
    return -1;
}

typedef struct {
    PyObject **items;
    Py_ssize_t n, cap;
    PyObject *small[32];
} Stack;

static void stack_init(Stack *st) {
    st->items = st->small;
    st->n = 0;
    st->cap = 32;
}

static int stack_push(Stack *st, PyObject *o) { /* steals o */
    if (st->n == st->cap) {
        Py_ssize_t cap = st->cap * 2;
        PyObject **items = PyMem_Malloc((size_t)cap * sizeof(PyObject *));
        if (items == NULL) {
            Py_DECREF(o);
            PyErr_NoMemory();
            return -1;
        }
        memcpy(items, st->items, (size_t)st->n * sizeof(PyObject *));
        if (st->items != st->small) PyMem_Free(st->items);
        st->items = items;
        st->cap = cap;
    }
    st->items[st->n++] = o;
    return 0;
}

static void stack_drop(Stack *st) {
    for (Py_ssize_t i = 0; i < st->n; i++) Py_DECREF(st->items[i]);
    if (st->items != st->small) PyMem_Free(st->items);
}

static PyObject *stack_tuple(Stack *st, Decoder *d) { /* the items as a tuple; the stack is emptied */
    PyObject *t;
    if (st->n == 0) {
        t = Py_NewRef(d->empty_tuple);
    } else if ((t = PyTuple_New(st->n)) != NULL) {
        memcpy(((PyTupleObject *)t)->ob_item, st->items, (size_t)st->n * sizeof(PyObject *));
        st->n = 0;
    }
    stack_drop(st);
    return t;
}

/* Remembers at a position the attribute text just read (validated: parsed, or found in the cache). */
static void remember(Pos *pos, const unsigned char *text, Py_ssize_t n, PyObject *pair) {
    if (n > POS_LEN) return;
    memcpy(pos->text, text, (size_t)n);
    pos->len = n;
    Py_XSETREF(pos->pair, Py_NewRef(pair));
}

/* An attributes array at ps->p -> tuple of (key, value). Each element is, in this order: the text the same
 * position held in the previous array (span attributes only: `positions`), found in the cache of attribute
 * texts, or parsed (and then remembered when its value holds nothing mutable). */
static PyObject *parse_attrs(P *ps, int *mutable, Pos *positions) {
    Decoder *d = ps->d;
    Stack st;
    if (!eat(ps, '[')) return NULL;
    stack_init(&st);
    Py_ssize_t j = 0;
    for (int r = arr_first(ps); r != 0; r = arr_next(ps), j++) {
        if (r < 0 || peek(ps) != '{') goto fail;
        const unsigned char *start = ps->p;
        Pos *pos = positions != NULL && j < POSITIONS ? &positions[j] : NULL;
        if (pos != NULL && pos->pair != NULL && pos->len <= ps->end - start &&
            memcmp(start, pos->text, (size_t)pos->len) == 0) { /* a valid object text: it ends there */
            ps->p += pos->len;
            pos->misses = 0;
            if (stack_push(&st, Py_NewRef(pos->pair)) < 0) goto fail;
            continue;
        }
        int m = 0;
        PyObject *pair;
        if (pos != NULL && pos->skip) { /* ever-new values here: no look-up, nothing remembered */
            pos->skip--;
            ps->uncached = 1;
            pair = parse_attr(ps, 0, &m);
            ps->uncached = 0;
            if (pair == NULL) goto fail;
            if (m) *mutable = 1;
            if (stack_push(&st, pair) < 0) goto fail;
            continue;
        }
        Py_ssize_t n = extent(start, ps->end, PAIR_CACHE_LEN);
        uint64_t h = 0;
        if (n > 0) {
            h = hash_bytes(start, n);
            PyObject *hit = cache_get(&d->pairs, start, n, h);
            if (hit != NULL) {
                ps->p += n;
                if (pos != NULL) {
                    pos->misses = 0;
                    remember(pos, start, n, hit);
                }
                if (stack_push(&st, Py_NewRef(hit)) < 0) goto fail;
                continue;
            }
        }
        pair = parse_attr(ps, 0, &m);
        if (pair == NULL) goto fail;
        if (m) {
            *mutable = 1;
        } else if (n > 0 && ps->p - start == n) {
            cache_put(&d->pairs, start, n, h, pair);
            if (pos != NULL) remember(pos, start, n, pair);
        }
        if (pos != NULL && ++pos->misses >= 2) {
            pos->skip = POS_SKIP;
            pos->misses = 1; /* one more miss after the skip: skip again */
        }
        if (stack_push(&st, pair) < 0) goto fail;
    }
    return stack_tuple(&st, d);
fail:
    stack_drop(&st);
    return NULL;
}

/* A resource's or scope's attributes: the whole array through the cache of array texts. */
static PyObject *parse_attr_block(P *ps) {
    Decoder *d = ps->d;
    if (peek(ps) != '[') return NULL;
    const unsigned char *start = ps->p;
    Py_ssize_t n = extent(start, ps->end, BLOCK_CACHE_LEN);
    uint64_t h = 0;
    if (n > 0) {
        h = hash_bytes(start, n);
        PyObject *hit = cache_get(&d->blocks, start, n, h);
        if (hit != NULL) {
            ps->p += n;
            return Py_NewRef(hit);
        }
    }
    int m = 0;
    PyObject *attrs = parse_attrs(ps, &m, NULL);
    if (attrs != NULL && !m && n > 0 && ps->p - start == n) cache_put(&d->blocks, start, n, h, attrs);
    return attrs;
}

/* {"values": [...]}: AnyValues -> tuple, or (kv) KeyValues -> dict, later keys winning as in dict(pairs).
 * Without "values" the general decoder has a problem (its default, (), is not a list), so {} is no answer. */
static PyObject *parse_values(P *ps, int depth, int *mutable, int kv) {
    const unsigned char *k;
    Py_ssize_t kn;
    Stack st;
    PyObject *r = NULL;
    if (!eat(ps, '{') || obj_first(ps, &k, &kn) != 1 || !IS(k, kn, JK_VALUES) || !eat(ps, '[')) return NULL;
    stack_init(&st);
    for (int a = arr_first(ps); a != 0; a = arr_next(ps)) {
        PyObject *v = a < 0 ? NULL : kv ? parse_attr(ps, depth, mutable) : parse_value(ps, depth, mutable);
        ps->empties += v == Py_None;
        if (v == NULL || stack_push(&st, v) < 0) goto fail;
    }
    if (!eat(ps, '}')) goto fail;
    if (!kv) return stack_tuple(&st, ps->d);
    r = PyDict_New();
    for (Py_ssize_t i = 0; r != NULL && i < st.n; i++)
        if (PyDict_SetItem(r, PyTuple_GET_ITEM(st.items[i], 0), PyTuple_GET_ITEM(st.items[i], 1)) < 0) Py_CLEAR(r);
fail:
    stack_drop(&st);
    return r;
}

/* An AnyValue object with one kind (or none: None), as json_codec._dec_value reads it. */
static PyObject *parse_value(P *ps, int depth, int *mutable) {
    Decoder *d = ps->d;
    const unsigned char *k, *s;
    Py_ssize_t kn, n;
    int f, c;
    PyObject *v = NULL;
    if (depth > MAX_DEPTH || !eat(ps, '{')) return NULL;
    int r = obj_first(ps, &k, &kn);
    if (r == 0) return Py_NewRef(Py_None); /* an empty AnyValue */
    if (r < 0) return NULL;
    if (IS(k, kn, JK_STRING_VALUE)) {
        if (peek(ps) == '"' && scan_string(ps, &s, &n, &f) == 0)
            v = make_str_c(d, s, n, f, !ps->uncached, &d->value_site);
    } else if (IS(k, kn, JK_INT_VALUE)) {
        v = parse_intish(ps);
    } else if (IS(k, kn, JK_BOOL_VALUE)) {
        ws(ps);
        if (literal(ps, "true", 4))
            v = Py_NewRef(Py_True);
        else if (literal(ps, "false", 5))
            v = Py_NewRef(Py_False);
    } else if (IS(k, kn, JK_DOUBLE_VALUE)) {
        c = peek(ps);
        if (is_num_start(c)) {
            Num num;
            if (parse_num(ps, &num) == 0) {
                if (!num.is_int) {
                    v = num_float(&num);
                } else if (!num.big) {
                    PyObject *i = PyLong_FromLongLong(num.i);
                    if (i != NULL) {
                        v = PyNumber_Float(i); /* float(int), rounded as the general decoder rounds it */
                        Py_DECREF(i);
                    }
                }
            }
        } else if (c == '"' && scan_string(ps, &s, &n, &f) == 0) {
            PyObject *text = make_str(d, s, n, f);
            if (text != NULL) { /* "NaN", "Infinity", "-Infinity" or anything float() reads */
                v = PyFloat_FromString(text);
                Py_DECREF(text);
                if (v == NULL && PyErr_ExceptionMatches(PyExc_ValueError)) PyErr_Clear();
            }
        }
    } else if (IS(k, kn, JK_BYTES_VALUE)) {
        PyObject *text = parse_str_at(ps, &d->value_site);
        if (text != NULL) {
            v = PyObject_CallOneArg(d->dec_bytes, text);
            Py_DECREF(text);
            if (v == NULL && PyErr_ExceptionMatches(PyExc_ValueError)) PyErr_Clear();
        }
    } else if (IS(k, kn, JK_ARRAY_VALUE)) {
        v = parse_values(ps, depth + 1, mutable, 0);
    } else if (IS(k, kn, JK_KVLIST_VALUE)) {
        v = parse_values(ps, depth + 1, mutable, 1);
        *mutable = 1;
    }
    if (v != NULL && !eat(ps, '}')) Py_CLEAR(v); /* a second kind: no answer */
    return v;
}

/* ----------------------------------------------------------------------------------- objects built here */

static PyObject *new_instance(PyTypeObject *cls, const Py_ssize_t *off, PyObject **values, int n) {
    PyObject *o = cls->tp_alloc(cls, 0);
    if (o == NULL) return NULL;
    for (int i = 0; i < n; i++) *(PyObject **)((char *)o + off[i]) = values[i]; /* stolen */
    return o;
}

static void drop_all(PyObject **values, int n) {
    for (int i = 0; i < n; i++) Py_CLEAR(values[i]);
}

/* an "events" or "links" value: null or [] -> (), else the objects made by one */
static PyObject *parse_list_of(P *ps, PyObject *(*one)(P *)) {
    Decoder *d = ps->d;
    Stack st;
    ws(ps);
    if (literal(ps, "null", 4)) return Py_NewRef(d->empty_tuple);
    if (!eat(ps, '[')) return NULL;
    stack_init(&st);
    for (int r = arr_first(ps); r != 0; r = arr_next(ps)) {
        if (r < 0) goto fail;
        PyObject *o = one(ps);
        if (o == NULL || stack_push(&st, o) < 0) goto fail;
    }
    return stack_tuple(&st, d);
fail:
    stack_drop(&st);
    return NULL;
}

/* How a field is read from its key's value, which also gives its default when the key is missing (an id has
 * none: decode_id("") raises IdError, and the general decoder drops the span or link). */
enum { AS_INT, AS_STR, AS_NAME, AS_ATTRS, AS_SPAN_ATTRS, AS_BLOCK, AS_TRACE_ID, AS_LINK_TRACE_ID, AS_SPAN_ID,
       AS_PARENT, AS_KIND, AS_STATUS_CODE, AS_EVENTS, AS_LINKS, AS_SPANS, AS_SCOPE_SPANS, AS_OBJECT };
typedef struct Field {
    const char *key;
    Py_ssize_t len;
    int field, as;
    const struct Field *sub; /* AS_OBJECT: null, or an object whose keys these are, read into the same fields */
    int n_sub;
} Field;
#define KEY(key, field, as) {key, JK_LEN(key), field, as, NULL, 0}
#define COUNT(keys) ((int)(sizeof(keys) / sizeof(keys[0])))
#define OBJECT(key, sub) {key, JK_LEN(key), 0, AS_OBJECT, sub, COUNT(sub)}
/* in the order the writers (ours, the Collector's) put them: each key is looked for from the last one's place */
static const Field STATUS_KEYS[] = {KEY(JK_CODE, F_STATUS_CODE, AS_STATUS_CODE), KEY(JK_MESSAGE, F_STATUS_MSG, AS_STR)};
static const Field SPAN_KEYS[] = {
    KEY(JK_TRACE_ID, F_TRACE_ID, AS_TRACE_ID), KEY(JK_SPAN_ID, F_SPAN_ID, AS_SPAN_ID),
    KEY(JK_TRACE_STATE, F_TRACE_STATE, AS_STR), KEY(JK_PARENT_SPAN_ID, F_PARENT, AS_PARENT),
    KEY(JK_FLAGS, F_FLAGS, AS_INT), KEY(JK_NAME, F_NAME, AS_NAME), KEY(JK_KIND, F_KIND, AS_KIND),
    KEY(JK_START_TIME_UNIX_NANO, F_START, AS_INT), KEY(JK_END_TIME_UNIX_NANO, F_END, AS_INT),
    KEY(JK_ATTRIBUTES, F_ATTRS, AS_SPAN_ATTRS), KEY(JK_DROPPED_ATTRIBUTES_COUNT, F_DROPPED_ATTRS, AS_INT),
    KEY(JK_EVENTS, F_EVENTS, AS_EVENTS), KEY(JK_DROPPED_EVENTS_COUNT, F_DROPPED_EVENTS, AS_INT),
    KEY(JK_LINKS, F_LINKS, AS_LINKS), KEY(JK_DROPPED_LINKS_COUNT, F_DROPPED_LINKS, AS_INT),
    OBJECT(JK_STATUS, STATUS_KEYS)};
static const Field EVENT_KEYS[] = {
    KEY(JK_TIME_UNIX_NANO, E_TIME, AS_INT), KEY(JK_NAME, E_NAME, AS_STR), KEY(JK_ATTRIBUTES, E_ATTRS, AS_ATTRS),
    KEY(JK_DROPPED_ATTRIBUTES_COUNT, E_DROPPED, AS_INT)};
static const Field LINK_KEYS[] = {
    KEY(JK_TRACE_ID, L_TRACE_ID, AS_LINK_TRACE_ID), KEY(JK_SPAN_ID, L_SPAN_ID, AS_SPAN_ID),
    KEY(JK_TRACE_STATE, L_TRACE_STATE, AS_STR), KEY(JK_ATTRIBUTES, L_ATTRS, AS_ATTRS),
    KEY(JK_DROPPED_ATTRIBUTES_COUNT, L_DROPPED, AS_INT), KEY(JK_FLAGS, L_FLAGS, AS_INT)};
/* a resourceSpans or scopeSpans entry's fields, its resource's or scope's included */
enum { G_ATTRS, G_NAME, G_VERSION, G_SCHEMA_URL, G_DROPPED, N_ENTRY_FIELDS };
static const Field RESOURCE_KEYS[] = {KEY(JK_ATTRIBUTES, G_ATTRS, AS_BLOCK),
                                      KEY(JK_DROPPED_ATTRIBUTES_COUNT, G_DROPPED, AS_INT)}; /* read, not kept */
static const Field SCOPE_KEYS[] = {KEY(JK_NAME, G_NAME, AS_STR), KEY(JK_VERSION, G_VERSION, AS_STR),
                                   KEY(JK_ATTRIBUTES, G_ATTRS, AS_BLOCK),
                                   KEY(JK_DROPPED_ATTRIBUTES_COUNT, G_DROPPED, AS_INT)};
static const Field RESOURCE_SPANS_KEYS[] = {OBJECT(JK_RESOURCE, RESOURCE_KEYS), KEY(JK_SCOPE_SPANS, 0, AS_SCOPE_SPANS),
                                            KEY(JK_SCHEMA_URL, G_SCHEMA_URL, AS_STR)};
static const Field SCOPE_SPANS_KEYS[] = {OBJECT(JK_SCOPE, SCOPE_KEYS), KEY(JK_SPANS, 0, AS_SPANS),
                                         KEY(JK_SCHEMA_URL, G_SCHEMA_URL, AS_STR)};
_Static_assert(COUNT(SPAN_KEYS) == N_SPAN_MESSAGE_FIELDS - 1 && COUNT(EVENT_KEYS) == N_EVENT_FIELDS &&
                   COUNT(LINK_KEYS) == N_LINK_FIELDS && (int)N_LINK_FIELDS >= (int)N_EVENT_FIELDS,
               "a key for each field (status: the code and the message)");

static PyObject *parse_event(P *ps);
static PyObject *parse_link(P *ps);
static PyObject *parse_span(P *ps);
static int parse_entry(P *ps, int resource);

/* The members of an object (after its '{'), each key one of `keys`, at most once, its value read into
 * f[key.field] as key.as says; then the fields of missing keys get their defaults. 0, or -1: no answer. */
static int parse_members(P *ps, const Field *keys, int n, PyObject **f) {
    Decoder *d = ps->d;
    const unsigned char *k;
    Py_ssize_t kn;
    unsigned seen = 0;
    int m = 0, j = n - 1;
    for (int r = obj_first(ps, &k, &kn); r != 0; r = obj_next(ps, &k, &kn)) {
        int tries = 0;
        if (r < 0) return -1;
        do j = j + 1 < n ? j + 1 : 0;
        while (!(kn == keys[j].len && memcmp(k, keys[j].key, (size_t)kn) == 0) && ++tries < n);
        if (tries == n || seen & (1u << j)) return -1; /* another key, or one twice */
        seen |= 1u << j;
        PyObject **out = &f[keys[j].field];
        switch (keys[j].as) {
            case AS_INT: *out = parse_intish(ps); break;
            case AS_STR: *out = parse_str(ps); break;
            case AS_NAME: *out = parse_str_at(ps, &d->name_site); break;
            case AS_ATTRS: *out = parse_attrs(ps, &m, NULL); break;
            case AS_SPAN_ATTRS: *out = parse_attrs(ps, &m, d->pos); break;
            case AS_BLOCK: *out = parse_attr_block(ps); break;
            case AS_TRACE_ID: *out = parse_id(ps, 16, &d->last_trace); break;
            case AS_LINK_TRACE_ID: *out = parse_id(ps, 16, NULL); break;
            case AS_SPAN_ID: *out = parse_id(ps, 8, NULL); break;
            case AS_PARENT: /* null or "" (falsy): a root span */
                ws(ps);
                *out = literal(ps, "null", 4) || literal(ps, "\"\"", 2) ? Py_NewRef(Py_None)
                                                                       : parse_id(ps, 8, &d->last_parent);
                break;
            case AS_KIND: *out = parse_enum(ps, d->kind_names); break;
            case AS_STATUS_CODE: *out = parse_enum(ps, d->status_names); break;
            case AS_EVENTS: *out = parse_list_of(ps, parse_event); break;
            case AS_LINKS: *out = parse_list_of(ps, parse_link); break;
            case AS_OBJECT:
                ws(ps);
                if (!literal(ps, "null", 4) && (!eat(ps, '{') || parse_members(ps, keys[j].sub, keys[j].n_sub, f) < 0))
                    return -1;
                continue;
            case AS_SPANS: /* a scope's spans, appended to the line's; a resource's scopes, read in turn */
            case AS_SCOPE_SPANS:
                if (!eat(ps, '[')) return -1;
                for (int sr = arr_first(ps); sr != 0; sr = arr_next(ps)) {
                    if (sr < 0) return -1;
                    if (keys[j].as == AS_SCOPE_SPANS) {
                        if (parse_entry(ps, 0) < 0) return -1;
                        continue;
                    }
                    PyObject *span = parse_span(ps);
                    int err = span == NULL || PyList_Append(ps->out, span) < 0;
                    Py_XDECREF(span);
                    if (err) return -1;
                }
                continue;
        }
        if (*out == NULL) return -1;
    }
    for (j = 0; j < n; j++) {
        int as = keys[j].as;
        PyObject **out = &f[keys[j].field];
        if (*out != NULL || as >= AS_SPANS) continue; /* an object's fields: its own defaults, or the caller's */
        if (as == AS_TRACE_ID || as == AS_LINK_TRACE_ID || as == AS_SPAN_ID) return -1;
        *out = Py_NewRef(as == AS_INT || as == AS_KIND || as == AS_STATUS_CODE ? d->zero
                         : as == AS_STR || as == AS_NAME                      ? d->empty_str
                         : as == AS_PARENT                                     ? Py_None
                                                                               : d->empty_tuple);
    }
    return 0;
}

/* An event or link object (an array element: an empty one is counted) -> SpanEvent or SpanLink. */
static PyObject *parse_instance(P *ps, const Field *keys, int n, PyTypeObject *cls, const Py_ssize_t *off) {
    PyObject *f[N_LINK_FIELDS] = {NULL}; /* the longer of the two */
    if (!eat(ps, '{')) return NULL;
    ps->empties += peek(ps) == '}';
    PyObject *o = parse_members(ps, keys, n, f) < 0 ? NULL : new_instance(cls, off, f, n);
    if (o == NULL) drop_all(f, n);
    return o;
}

static PyObject *parse_event(P *ps) {
    return parse_instance(ps, EVENT_KEYS, COUNT(EVENT_KEYS), ps->d->event_cls, ps->d->event_off);
}

static PyObject *parse_link(P *ps) {
    return parse_instance(ps, LINK_KEYS, COUNT(LINK_KEYS), ps->d->link_cls, ps->d->link_off);
}

/* a span object -> SpanData with every field but the resource's and scope's (set by the callers) */
static PyObject *parse_span(P *ps) {
    PyObject *f[N_SPANDATA_FIELDS] = {NULL};
    if (!eat(ps, '{') || parse_members(ps, SPAN_KEYS, COUNT(SPAN_KEYS), f) < 0) goto fail;
    if (f[F_STATUS_CODE] == NULL) f[F_STATUS_CODE] = Py_NewRef(ps->d->zero); /* no status */
    if (f[F_STATUS_MSG] == NULL) f[F_STATUS_MSG] = Py_NewRef(ps->d->empty_str);
    PyObject *o = new_instance(ps->d->span_cls, ps->d->span_off, f, F_RESOURCE); /* the rest NULL until then */
    if (o != NULL) return o;
fail:
    drop_all(f, N_SPANDATA_FIELDS);
    return NULL;
}

/* sets field i of spans[start:] to value (a new reference each) */
static void set_field(Decoder *d, PyObject *spans, Py_ssize_t start, int i, PyObject *value) {
    Py_ssize_t off = d->span_off[i];
    for (Py_ssize_t j = start; j < PyList_GET_SIZE(spans); j++) {
        PyObject **slot = (PyObject **)((char *)PyList_GET_ITEM(spans, j) + off);
        Py_XSETREF(*slot, Py_NewRef(value));
    }
}

/* one resourceSpans entry (`resource`) or scopeSpans entry: its spans appended to the line's, then given the
 * entry's fields: the resource's attributes and schema URL, or the scope's name, version, attributes and schema URL */
static int parse_entry(P *ps, int resource) {
    Decoder *d = ps->d;
    PyObject *g[N_ENTRY_FIELDS] = {NULL};
    Py_ssize_t start = PyList_GET_SIZE(ps->out);
    int rc = -1;
    if (!eat(ps, '{')) return -1;
    ps->empties += peek(ps) == '}';
    if (resource ? parse_members(ps, RESOURCE_SPANS_KEYS, COUNT(RESOURCE_SPANS_KEYS), g)
                 : parse_members(ps, SCOPE_SPANS_KEYS, COUNT(SCOPE_SPANS_KEYS), g))
        goto fail;
    for (int i = 0; i < N_ENTRY_FIELDS; i++) /* no resource or scope (or null): no attributes, name, version */
        if (g[i] == NULL) g[i] = Py_NewRef(i == G_ATTRS ? d->empty_tuple : d->empty_str);
    if (resource) {
        set_field(d, ps->out, start, F_RESOURCE, g[G_ATTRS]);
        set_field(d, ps->out, start, F_RESOURCE_SCHEMA, g[G_SCHEMA_URL]);
    } else {
        set_field(d, ps->out, start, F_SCOPE_NAME, g[G_NAME]);
        set_field(d, ps->out, start, F_SCOPE_VERSION, g[G_VERSION]);
        set_field(d, ps->out, start, F_SCOPE_ATTRS, g[G_ATTRS]);
        set_field(d, ps->out, start, F_SCHEMA_URL, g[G_SCHEMA_URL]);
    }
    rc = 0;
fail:
    drop_all(g, N_ENTRY_FIELDS);
    return rc;
}

/* Leaves `o` (a SpanData, SpanEvent or SpanLink made here, fields at off[0..n)) out of the cycle collector when
 * none of its fields can reach a tracked object (lt_acyclic): its fields are all set by this module, and the
 * class is frozen. A read of 10,000 traces otherwise spends a third of its time in collections that find
 * nothing (benchmarks/bench_baseline.py). */
static int untrack_acyclic(PyObject *o, const Py_ssize_t *off, int n) {
    if (!PyObject_GC_IsTracked(o)) return 1;
    for (int i = 0; i < n; i++) {
        PyObject *v = *(PyObject **)((char *)o + off[i]);
        if (v != NULL && !lt_acyclic(v, LT_ACYCLIC_DEPTH)) return 0;
    }
    PyObject_GC_UnTrack(o);
    return 1;
}

static void untrack_spans(Decoder *d, PyObject *spans) {
    for (Py_ssize_t j = 0; j < PyList_GET_SIZE(spans); j++) {
        PyObject *span = PyList_GET_ITEM(spans, j);
        int ok = 1;
        PyObject *events = *(PyObject **)((char *)span + d->span_off[F_EVENTS]);
        PyObject *links = *(PyObject **)((char *)span + d->span_off[F_LINKS]);
        if (events != NULL && PyTuple_CheckExact(events))
            for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(events); i++)
                ok &= untrack_acyclic(PyTuple_GET_ITEM(events, i), d->event_off, N_EVENT_FIELDS);
        if (links != NULL && PyTuple_CheckExact(links))
            for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(links); i++)
                ok &= untrack_acyclic(PyTuple_GET_ITEM(links, i), d->link_off, N_LINK_FIELDS);
        if (ok) untrack_acyclic(span, d->span_off, N_SPANDATA_FIELDS);
    }
}

static PyObject *decode_text(Decoder *self, const unsigned char *text, Py_ssize_t size) {
    const unsigned char *k;
    Py_ssize_t kn;
    int found = 0;
    PyObject *out = PyList_New(0);
    if (out == NULL) return NULL;
    P ps = {text, text + size, self, 0, 0, out};
    if (!eat(&ps, '{')) goto fail;
    for (int r = obj_first(&ps, &k, &kn); r != 0; r = obj_next(&ps, &k, &kn)) {
        if (r < 0 || found || !IS(k, kn, JK_RESOURCE_SPANS)) goto fail; /* batches, result, ...: no answer */
        found = 1;
        if (!eat(&ps, '[')) goto fail;
        for (int sr = arr_first(&ps); sr != 0; sr = arr_next(&ps))
            if (sr < 0 || parse_entry(&ps, 1) < 0) goto fail;
    }
    ws(&ps);
    if (!found || ps.p != ps.end || (size >= 1 << 20 && ps.empties > MAX_EMPTY_OBJECTS)) goto fail;
    untrack_spans(self, out);
    return out;
fail:
    Py_DECREF(out);
    if (PyErr_Occurred()) return NULL;
    Py_RETURN_NONE;
}

/* A line is bytes, or a memoryview of one (sources.files._read_lines: a line of its read buffer, read in place
 * instead of copied out first); nothing made here points into it. */
static PyObject *Decoder_decode(Decoder *self, PyObject *line) {
    if (!PyBytes_CheckExact(line) && !PyMemoryView_Check(line)) Py_RETURN_NONE;
    Py_buffer view;
    if (PyObject_GetBuffer(line, &view, PyBUF_SIMPLE) < 0) return NULL; /* released, or not contiguous */
    PyObject *out = decode_text(self, (const unsigned char *)view.buf, view.len);
    PyBuffer_Release(&view);
    return out;
}

/* -------------------------------------------------------------------------------------- construction */

/* The offsets of cls's slots named names[0..n), after checking that they are all its instance layout. */
static int slot_offsets(PyObject *cls, const char *const *names, int n, Py_ssize_t *off) {
    if (!PyType_Check(cls)) {
        PyErr_SetString(PyExc_TypeError, "expected a class");
        return -1;
    }
    PyTypeObject *tp = (PyTypeObject *)cls;
    if (!PyType_HasFeature(tp, Py_TPFLAGS_HEAPTYPE) || tp->tp_basicsize != (Py_ssize_t)(sizeof(PyObject) + (size_t)n * sizeof(PyObject *)) ||
        tp->tp_itemsize != 0 || tp->tp_dictoffset != 0 || tp->tp_base != &PyBaseObject_Type ||
        PyObject_HasAttrString(cls, "__post_init__")) {
        PyErr_Format(PyExc_TypeError, "%s is not a plain slotted class of %d fields", tp->tp_name, n);
        return -1;
    }
    for (int i = 0; i < n; i++) { /* tp's base is object (checked above): its slots are its own */
        if ((off[i] = lt_slot_offset_s(tp, names[i])) < 0) {
            PyErr_Format(PyExc_TypeError, "%s.%s is not an object slot", tp->tp_name, names[i]);
            return -1;
        }
    }
    for (int i = 0; i < n; i++) /* distinct slots: with the size above, every slot is one of these */
        for (int j = 0; j < i; j++)
            if (off[i] == off[j]) {
                PyErr_Format(PyExc_TypeError, "%s: two fields share a slot", tp->tp_name);
                return -1;
            }
    return 0;
}

static void clear_positions(Decoder *self) {
    for (int j = 0; j < POSITIONS; j++) {
        Py_CLEAR(self->pos[j].pair);
        self->pos[j].len = 0;
        self->pos[j].misses = self->pos[j].skip = 0;
    }
}

static void Decoder_dealloc(Decoder *self) {
    clear_positions(self);
    cache_free(&self->strings);
    cache_free(&self->pairs);
    cache_free(&self->blocks);
    Py_XDECREF(self->last_trace.value);
    Py_XDECREF(self->last_parent.value);
    Py_XDECREF(self->span_cls);
    Py_XDECREF(self->event_cls);
    Py_XDECREF(self->link_cls);
    Py_XDECREF(self->decode_id);
    Py_XDECREF(self->dec_bytes);
    Py_XDECREF(self->encoding);
    Py_XDECREF(self->kind_names);
    Py_XDECREF(self->status_names);
    Py_XDECREF(self->size16);
    Py_XDECREF(self->size8);
    Py_XDECREF(self->empty_str);
    Py_XDECREF(self->empty_tuple);
    Py_XDECREF(self->zero);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Decoder_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"span_cls", "event_cls", "link_cls", "decode_id", "dec_bytes",
                             "kind_names", "status_names", "id_encoding", NULL};
    PyObject *span_cls, *event_cls, *link_cls, *decode_id, *dec_bytes, *kind_names, *status_names, *encoding;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOOOO!O!U:Decoder", kwlist, &span_cls, &event_cls, &link_cls,
                                     &decode_id, &dec_bytes, &PyTuple_Type, &kind_names, &PyTuple_Type,
                                     &status_names, &encoding))
        return NULL;
    Decoder *self = (Decoder *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    if (slot_offsets(span_cls, SPANDATA_FIELDS, N_SPANDATA_FIELDS, self->span_off) < 0 ||
        slot_offsets(event_cls, EVENT_FIELDS, N_EVENT_FIELDS, self->event_off) < 0 ||
        slot_offsets(link_cls, LINK_FIELDS, N_LINK_FIELDS, self->link_off) < 0)
        goto fail;
    if (!PyCallable_Check(decode_id) || !PyCallable_Check(dec_bytes)) {
        PyErr_SetString(PyExc_TypeError, "decode_id and dec_bytes must be callable");
        goto fail;
    }
    self->span_cls = (PyTypeObject *)Py_NewRef(span_cls);
    self->event_cls = (PyTypeObject *)Py_NewRef(event_cls);
    self->link_cls = (PyTypeObject *)Py_NewRef(link_cls);
    self->decode_id = Py_NewRef(decode_id);
    self->dec_bytes = Py_NewRef(dec_bytes);
    self->kind_names = Py_NewRef(kind_names);
    self->status_names = Py_NewRef(status_names);
    self->encoding = Py_NewRef(encoding);
    self->hex_ids = PyUnicode_CompareWithASCIIString(encoding, "auto") == 0 ||
                    PyUnicode_CompareWithASCIIString(encoding, "hex") == 0;
    self->size16 = PyLong_FromLong(16);
    self->size8 = PyLong_FromLong(8);
    self->empty_str = PyUnicode_New(0, 127);
    self->empty_tuple = PyTuple_New(0);
    self->zero = PyLong_FromLong(0);
    if (!self->size16 || !self->size8 || !self->empty_str || !self->empty_tuple || !self->zero) goto fail;
    if (cache_init(&self->strings, 1 << 14, 1 << 20, STR_CACHE_LEN) < 0 ||
        cache_init(&self->pairs, 1 << 15, 4 << 20, PAIR_CACHE_LEN) < 0 ||
        cache_init(&self->blocks, 1 << 8, 4 << 20, BLOCK_CACHE_LEN) < 0)
        goto fail;
    return (PyObject *)self;
fail:
    Py_DECREF(self);
    return NULL;
}

static PyObject *Decoder_cache_sizes(Decoder *self, PyObject *Py_UNUSED(ignored)) {
    return Py_BuildValue("{s:(nn),s:(nn),s:(nn)}", "strings", (Py_ssize_t)self->strings.count,
                         (Py_ssize_t)self->strings.bytes, "pairs", (Py_ssize_t)self->pairs.count,
                         (Py_ssize_t)self->pairs.bytes, "blocks", (Py_ssize_t)self->blocks.count,
                         (Py_ssize_t)self->blocks.bytes);
}

static PyMethodDef Decoder_methods[] = {
    {"decode", (PyCFunction)Decoder_decode, METH_O,
     "decode(line: bytes | memoryview) -> list[SpanData] | None: the general decoder's spans for the line, or None."},
    {"cache_sizes", (PyCFunction)Decoder_cache_sizes, METH_NOARGS,
     "{cache: (entries, text bytes)} for the strings, attribute pairs and attribute block caches."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject DecoderType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "launchtrace.otlp._jsonread.Decoder",
    .tp_basicsize = sizeof(Decoder),
    .tp_dealloc = (destructor)Decoder_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Decoder(span_cls, event_cls, link_cls, decode_id, dec_bytes, kind_names, status_names, "
              "id_encoding): OTLP JSON lines to spans; one per file, its caches live here.",
    .tp_methods = Decoder_methods,
    .tp_new = Decoder_new,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_jsonread",
    .m_doc = "OTLP JSON Lines -> SpanData: the compiled reader of launchtrace.otlp.json_fast.",
    .m_size = -1,
};

PyMODINIT_FUNC PyInit__jsonread(void) {
    init_tables();
    if (PyType_Ready(&DecoderType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (lt_add_type(m, "Decoder", &DecoderType) < 0) return NULL;
    return m;
}
