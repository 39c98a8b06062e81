/* The JSON text of strings, numbers and bytes for the compiled OTLP/JSON writer (_jsonenc.c: SpanData -> JSON).
 * Plain C, no Python API.
 *
 * Each function writes into room its caller reserved and returns where its text ends (or its length):
 * - jf_u64_digits: an unsigned integer's decimal digits, written backwards from `end` (timestamps have 19);
 * - jf_hex: bytes as lower-case hex (OTLP/JSON's trace and span ids), 2 bytes per byte (after jf_hex_init);
 * - jf_esc_ascii, jf_escape_utf8: a string's characters as orjson escapes them (the short escapes \b \t \n \f
 *   \r \" \\, \u00xx for the other control characters, everything else as is, in UTF-8), at most 6 bytes per
 *   byte; jf_utf8_seq checks one UTF-8 sequence;
 * - jf_b64: bytes as standard base64 with padding (base64.b64encode, json_format's bytes), jf_b64_len bytes;
 * - jf_layout: a double's shortest round-trip digits (Python's repr digits: PyOS_double_to_string) laid out as
 *   orjson writes them, at most JF_DOUBLE_MAX bytes.
 * test_jsonenc_native.py checks the writer against orjson and the SDK's own encoding.
 */
#ifndef LAUNCHTRACE_JSONFMT_H
#define LAUNCHTRACE_JSONFMT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define JF_DOUBLE_MAX 25 /* "-0.0000" + 17 digits, or "-d." + 16 digits + "e-308": 24 */

static const char JF_DIGIT_PAIRS[] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

/* u's decimal digits, ending at end; returns where they start (two digits per division). */
static inline char *jf_u64_digits(char *end, uint64_t u) {
    while (u >= 100) {
        unsigned r = (unsigned)(u % 100);
        u /= 100;
        end -= 2;
        memcpy(end, JF_DIGIT_PAIRS + 2 * r, 2);
    }
    if (u >= 10) {
        end -= 2;
        memcpy(end, JF_DIGIT_PAIRS + 2 * u, 2);
    } else {
        *--end = (char)('0' + u);
    }
    return end;
}

static const char JF_HEX[] = "0123456789abcdef";

static char JF_HEX_PAIRS[512]; /* byte i's two hex digits at 2 * i (jf_hex_init): 330 instructions per span fewer */

static inline void jf_hex_init(void) {
    for (int i = 0; i < 256; i++) JF_HEX_PAIRS[2 * i] = JF_HEX[i >> 4], JF_HEX_PAIRS[2 * i + 1] = JF_HEX[i & 15];
}

static inline char *jf_hex(char *w, const uint8_t *s, size_t n) {
    for (size_t i = 0; i < n; i++, w += 2) memcpy(w, JF_HEX_PAIRS + 2 * s[i], 2);
    return w;
}

/* -- strings ---------------------------------------------------------------------------------------------- */

/* For an ASCII character c: 0, copied as is; 1, written \u00xx; else the letter after its backslash. */
static const unsigned char JF_ESC[128] = {
    1, 1, 1, 1, 1, 1, 1, 1, 'b', 't', 'n', 1, 'f', 'r', 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1,   1,   1,   1, 1,   1,   1, 1,
    ['"'] = '"', ['\\'] = '\\',
};

/* ASCII character c, escaped, at o (room for 6 bytes); returns the bytes written. */
static inline int jf_esc_ascii(char *o, unsigned c) {
    unsigned char e = JF_ESC[c];
    if (e == 0) {
        o[0] = (char)c;
        return 1;
    }
    o[0] = '\\';
    if (e != 1) {
        o[1] = (char)e;
        return 2;
    }
    o[1] = 'u';
    o[2] = '0';
    o[3] = '0';
    o[4] = JF_HEX[c >> 4];
    o[5] = JF_HEX[c & 15];
    return 6;
}

/* Nonzero when one of the 8 bytes in x needs more than copying: below 0x20, a quote, a backslash, or non-ASCII
 * (the classic "has a zero byte" tests; a false alarm only sends the bytes the careful way). */
static inline uint64_t jf_special8(uint64_t x) {
    const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
    uint64_t q = x ^ (ones * '"'), b = x ^ (ones * '\\');
    return (x | ((x - ones * 0x20) & ~x) | ((q - ones) & ~q) | ((b - ones) & ~b)) & highs;
}

/* Length of the valid UTF-8 sequence at s (n > 0 bytes left, s[0] >= 0x80), 0 if invalid (RFC 3629: no
 * overlong forms, no surrogates, nothing above U+10FFFF: what upb and Python's decoder accept). */
static inline size_t jf_utf8_seq(const uint8_t *s, size_t n) {
    uint8_t c = s[0];
    size_t k = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
    if (k == 0 || n < k)
        return 0;
    for (size_t i = 2; i < k; i++) /* the continuation bytes after the second */
        if ((s[i] & 0xC0) != 0x80)
            return 0;
    /* the second byte's range leaves out overlong forms (E0, F0), surrogates (ED) and past U+10FFFF (F4) */
    uint8_t lo = c == 0xE0 ? 0xA0 : c == 0xF0 ? 0x90 : 0x80;
    uint8_t hi = c == 0xED ? 0x9F : c == 0xF4 ? 0x8F : 0xBF;
    return s[1] >= lo && s[1] <= hi ? k : 0;
}

/* The UTF-8 string s[0..n) escaped, without its quotes, at w (room for 6 * n bytes), or only checked when w is
 * NULL; returns the bytes written (0 for a check), or -1 when s is not valid UTF-8. */
static inline ptrdiff_t jf_escape_utf8(char *w, const uint8_t *s, size_t n) {
    char *const w0 = w;
    size_t i = 0;
    while (i < n) {
        if (n - i >= 8) { /* 8 plain ASCII bytes at once */
            uint64_t x;
            memcpy(&x, s + i, 8);
            if (!jf_special8(x)) {
                if (w) {
                    memcpy(w, s + i, 8);
                    w += 8;
                }
                i += 8;
                continue;
            }
        }
        uint8_t c = s[i];
        if (c < 0x80) {
            if (w)
                w += jf_esc_ascii(w, c);
            i++;
        } else {
            size_t k = jf_utf8_seq(s + i, n - i);
            if (k == 0)
                return -1;
            if (w) {
                memcpy(w, s + i, k);
                w += k;
            }
            i += k;
        }
    }
    return w0 ? w - w0 : 0;
}

/* -- bytes and numbers -------------------------------------------------------------------------------------- */

static inline size_t jf_b64_len(size_t n) { return (n + 2) / 3 * 4; }

static inline char *jf_b64(char *w, const uint8_t *s, size_t n) {
    static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t i = 0;
    for (; i + 3 <= n; i += 3) {
        uint32_t v = ((uint32_t)s[i] << 16) | ((uint32_t)s[i + 1] << 8) | s[i + 2];
        *w++ = B64[v >> 18];
        *w++ = B64[(v >> 12) & 63];
        *w++ = B64[(v >> 6) & 63];
        *w++ = B64[v & 63];
    }
    if (n - i == 1) {
        uint32_t v = (uint32_t)s[i] << 16;
        *w++ = B64[v >> 18];
        *w++ = B64[(v >> 12) & 63];
        *w++ = '=';
        *w++ = '=';
    } else if (n - i == 2) {
        uint32_t v = ((uint32_t)s[i] << 16) | ((uint32_t)s[i + 1] << 8);
        *w++ = B64[v >> 18];
        *w++ = B64[(v >> 12) & 63];
        *w++ = B64[(v >> 6) & 63];
        *w++ = '=';
    }
    return w;
}

/* -- doubles ------------------------------------------------------------------------------------------------ */

/* A double's text as orjson writes it, from its shortest round-trip digits (nd of them, the first non-zero, no
 * trailing zeros) and the decimal exponent e of the first: fixed notation for e in -5..15 ("0.00001234",
 * "1234567890123456.8", "1.0"), else "d.ddde+N" / "de-N". */
static inline int jf_layout(char *out, int neg, const char *digits, int nd, int e) {
    char *w = out;
    if (neg)
        *w++ = '-';
    if (e >= -5 && e < 16) { /* fixed notation, as orjson for decimal exponents -5..15 */
        if (e < 0) {
            *w++ = '0';
            *w++ = '.';
            for (int i = 0; i < -e - 1; i++)
                *w++ = '0';
            memcpy(w, digits, (size_t)nd);
            w += nd;
        } else {
            for (int i = 0; i <= e; i++)
                *w++ = i < nd ? digits[i] : '0';
            *w++ = '.';
            if (nd > e + 1) {
                memcpy(w, digits + e + 1, (size_t)(nd - e - 1));
                w += nd - e - 1;
            } else {
                *w++ = '0';
            }
        }
    } else {
        *w++ = digits[0];
        if (nd > 1) {
            *w++ = '.';
            memcpy(w, digits + 1, (size_t)(nd - 1));
            w += nd - 1;
        }
        w += snprintf(w, 8, e < 0 ? "e-%d" : "e+%d", e < 0 ? -e : e);
    }
    return (int)(w - out);
}

#endif /* LAUNCHTRACE_JSONFMT_H */
