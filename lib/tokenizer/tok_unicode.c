/* tok_unicode.c - the Unicode the tokenizer needs, over utf8proc: general
 * categories and White_Space as class bits for the pre-tokenizer regexes,
 * NFC, and UTF-8 decoding that replaces ill-formed input by U+FFFD one
 * maximal subpart at a time, the way Rust's from_utf8_lossy (and so the
 * Hugging Face tokenizers library) and Python's errors="replace" do. */
#include "tokenizer/tok.h"

#include <pthread.h>
#include <stdlib.h>
#include <utf8proc.h>

/* ---------------------------------------------------------------------------
 * Classes
 * ------------------------------------------------------------------------- */

/* Unicode White_Space, which is what Oniguruma's \s matches in UTF-8. */
static int is_white_space(uint32_t c)
{
    return (c >= 0x09 && c <= 0x0d) || c == 0x20 || c == 0x85 || c == 0xa0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f ||
           c == 0x205f || c == 0x3000;
}

/* A character NFC leaves alone wherever it stands: it has no canonical
 * decomposition, combining class 0, and cannot be the second character of
 * a composition (those are all marks, or Hangul vowel and trailing jamo;
 * U+11A7 too, which utf8proc composes).
 * Text made only of these is already NFC. */
static int nfc_stable(uint32_t c)
{
    const utf8proc_property_t *p = utf8proc_get_property((utf8proc_int32_t)c);
    if (p->decomp_seqindex != UINT16_MAX && p->decomp_type == 0)
        return 0;
    if (p->combining_class != 0 || p->category == UTF8PROC_CATEGORY_MN ||
        p->category == UTF8PROC_CATEGORY_MC || p->category == UTF8PROC_CATEGORY_ME)
        return 0;
    return !(c >= 0x1161 && c <= 0x1175) && !(c >= 0x11a7 && c <= 0x11c2);
}

static unsigned class_of(uint32_t c)
{
    unsigned k = is_white_space(c) ? ML__UC_S : 0;
    if (nfc_stable(c))
        k |= ML__UC_NFC_STABLE;
    if (c == '\r' || c == '\n')
        k |= ML__UC_NL;
    switch (utf8proc_category((utf8proc_int32_t)c)) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LT:
        return k | ML__UC_L | ML__UC_UPPER;
    case UTF8PROC_CATEGORY_LL:
        return k | ML__UC_L | ML__UC_LOWER;
    case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_LO:
        return k | ML__UC_L;
    case UTF8PROC_CATEGORY_ND: case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_NO:
        return k | ML__UC_N;
    case UTF8PROC_CATEGORY_MN: case UTF8PROC_CATEGORY_MC: case UTF8PROC_CATEGORY_ME:
        return k | ML__UC_M;
    default:
        return k;
    }
}

/* The Basic Multilingual Plane as one byte per code point, built once:
 * the pre-tokenizer asks for the class of every character it reads. */
static uint8_t bmp[65536];
static pthread_once_t bmp_once = PTHREAD_ONCE_INIT;

static void bmp_build(void)
{
    for (uint32_t c = 0; c < 65536; c++)
        bmp[c] = (uint8_t)class_of(c);
}

void ml__unicode_init(void)
{
    pthread_once(&bmp_once, bmp_build);
}

unsigned ml__uclass(uint32_t cp)
{
    return cp < 65536 ? bmp[cp] : class_of(cp);
}

/* ---------------------------------------------------------------------------
 * UTF-8
 * ------------------------------------------------------------------------- */

/* Table 3-7 of the Unicode standard: the range of the second byte after
 * each lead byte, and the sequence length. */
static int lead_info(uint8_t b, uint8_t *lo, uint8_t *hi)
{
    *lo = 0x80;
    *hi = 0xbf;
    if (b < 0x80)
        return 1;
    if (b < 0xc2)
        return 0;
    if (b < 0xe0)
        return 2;
    if (b < 0xf0) {
        if (b == 0xe0)
            *lo = 0xa0;
        else if (b == 0xed)
            *hi = 0x9f;
        return 3;
    }
    if (b < 0xf5) {
        if (b == 0xf0)
            *lo = 0x90;
        else if (b == 0xf4)
            *hi = 0x8f;
        return 4;
    }
    return 0;
}

/* Bytes of s[0..n) that continue the sequence well-formed (up to len). */
static int valid_prefix(const uint8_t *s, size_t n, int len, uint8_t lo, uint8_t hi)
{
    int k = 1;
    if (k < len && (size_t)k < n && s[k] >= lo && s[k] <= hi)
        k++;
    else
        return k;
    while (k < len && (size_t)k < n && s[k] >= 0x80 && s[k] <= 0xbf)
        k++;
    return k;
}

int ml__utf8_seq(const uint8_t *s, size_t n)
{
    uint8_t lo, hi;
    int len = lead_info(s[0], &lo, &hi);
    if (len == 1)
        return 1;
    if (len == 0)
        return -1;
    int k = valid_prefix(s, n, len, lo, hi);
    return k == len ? len : -k;
}

int ml__utf8_seq_partial(const uint8_t *s, size_t n)
{
    uint8_t lo, hi;
    int len = lead_info(s[0], &lo, &hi);
    if (len <= 1)
        return len == 1 ? 1 : -1;
    int k = valid_prefix(s, n, len, lo, hi);
    if (k == len)
        return len;
    return (size_t)k == n ? 0 : -k;
}

uint32_t ml__utf8_decode(const uint8_t *s, int len)
{
    switch (len) {
    case 1: return s[0];
    case 2: return (uint32_t)(s[0] & 0x1f) << 6 | (s[1] & 0x3f);
    case 3: return (uint32_t)(s[0] & 0x0f) << 12 | (uint32_t)(s[1] & 0x3f) << 6 | (s[2] & 0x3f);
    default:
        return (uint32_t)(s[0] & 0x07) << 18 | (uint32_t)(s[1] & 0x3f) << 12 |
               (uint32_t)(s[2] & 0x3f) << 6 | (s[3] & 0x3f);
    }
}

ml_status ml__utf8_lossy(const uint8_t *s, size_t n, uint8_t **out, size_t *out_len,
                         ml_error *err)
{
    *out = NULL;
    size_t i = 0, bad = 0;
    while (i < n) {
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        int l = ml__utf8_seq(s + i, n - i);
        if (l < 0)
            bad++;
        i += (size_t)(l < 0 ? -l : l);
    }
    if (!bad)
        return ML_OK;
    /* Each replaced subpart of at least 1 byte becomes 3 bytes. */
    size_t cap;
    if (ml__to_size((uint64_t)n + 2 * (uint64_t)bad, &cap))
        return ml__err(err, ML_E_NOMEM, "", -1, "text too long");
    uint8_t *d = malloc(cap ? cap : 1);
    if (!d)
        return ml__err(err, ML_E_NOMEM, "", -1, "cannot allocate %zu bytes", cap);
    size_t w = 0;
    for (i = 0; i < n;) {
        int l = s[i] < 0x80 ? 1 : ml__utf8_seq(s + i, n - i);
        if (l > 0) {
            memcpy(d + w, s + i, (size_t)l);
            w += (size_t)l;
            i += (size_t)l;
        } else {
            memcpy(d + w, "\xef\xbf\xbd", 3);
            w += 3;
            i += (size_t)-l;
        }
    }
    *out = d;
    *out_len = w;
    return ML_OK;
}

/* ---------------------------------------------------------------------------
 * NFC
 * ------------------------------------------------------------------------- */

ml_status ml__nfc(const uint8_t *s, size_t n, uint8_t **out, size_t *out_len, ml_error *err)
{
    *out = NULL;
    /* Quick check: a text of NFC-stable characters is its own NFC. */
    size_t i = 0;
    while (i < n) {
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        int l = ml__utf8_seq(s + i, n - i);
        if (l < 0 || !(ml__uclass(ml__utf8_decode(s + i, l)) & ML__UC_NFC_STABLE))
            break;
        i += (size_t)l;
    }
    if (i == n)
        return ML_OK;
    if (n > (size_t)PTRDIFF_MAX)
        return ml__err(err, ML_E_NOMEM, "", -1, "text too long");
    utf8proc_uint8_t *d = NULL;
    utf8proc_ssize_t r = utf8proc_map(s, (utf8proc_ssize_t)n, &d, UTF8PROC_STABLE | UTF8PROC_COMPOSE);
    if (r < 0)
        return ml__err(err, r == UTF8PROC_ERROR_NOMEM ? ML_E_NOMEM : ML_E_INVAL, "", -1,
                       "NFC: %s", utf8proc_errmsg(r));
    *out = d;
    *out_len = (size_t)r;
    return ML_OK;
}
