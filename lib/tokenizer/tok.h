/* tok.h - private: what the tokenizer's files share.  UTF-8 decoding with
 * U+FFFD replacement, Unicode classes and NFC (tok_unicode.c, over utf8proc),
 * the pre-tokenizer regexes (tok_pretok.c), and the merge table of an .mlt
 * (mlt.c). */
#ifndef ML_TOK_H
#define ML_TOK_H

#include "base/internal.h"

/* ---- tok_unicode.c ---- */

/* Character classes of the pre-tokenizer regexes, as bits. */
enum {
    ML__UC_L = 1,    /* \p{L}: Lu Ll Lt Lm Lo */
    ML__UC_N = 2,    /* \p{N}: Nd Nl No */
    ML__UC_M = 4,    /* \p{M}: Mn Mc Me */
    ML__UC_S = 8,    /* \s: Unicode White_Space */
    ML__UC_NL = 16,  /* \r or \n */
    ML__UC_NFC_STABLE = 32, /* NFC leaves it alone wherever it stands */
    ML__UC_UPPER = 64, /* \p{Lu} or \p{Lt}: a letter only o200k's upper part takes */
    ML__UC_LOWER = 128 /* \p{Ll}: a letter only o200k's lower part takes */
};

/* Builds the class table of the Basic Multilingual Plane (once, thread
 * safe); call before ml__uclass or ml__pretokenize. */
void ml__unicode_init(void);
/* Class bits of a code point. */
unsigned ml__uclass(uint32_t cp);

/* Length of the well-formed UTF-8 sequence at s (n > 0 bytes available),
 * or, when it is not well-formed, minus the length of its maximal invalid
 * subpart (Unicode 3.9, "U+FFFD substitution of maximal subparts"). */
int ml__utf8_seq(const uint8_t *s, size_t n);
/* Length of the well-formed sequence at s that may still be incomplete:
 * 0 if s[0..n) is a proper prefix of a well-formed sequence (wait for
 * more), else as ml__utf8_seq. */
int ml__utf8_seq_partial(const uint8_t *s, size_t n);

/* Decodes the well-formed sequence at s (as measured by ml__utf8_seq). */
uint32_t ml__utf8_decode(const uint8_t *s, int len);

/* If s is not well-formed UTF-8, a copy with every maximal invalid
 * subpart replaced by U+FFFD in *out (free it); else *out = NULL. */
ml_status ml__utf8_lossy(const uint8_t *s, size_t n, uint8_t **out, size_t *out_len,
                         ml_error *err);

/* NFC of well-formed UTF-8; *out = NULL when the text is already NFC by a
 * quick check (only NFC-stable characters), else a new buffer. */
ml_status ml__nfc(const uint8_t *s, size_t n, uint8_t **out, size_t *out_len, ml_error *err);

/* ---- tok_pretok.c ---- */

/* Pre-token callback: bytes [start, end) of the segment; non-zero stops. */
typedef int (*ml__pretok_fn)(void *ctx, const uint8_t *s, size_t len);

/* Splits well-formed UTF-8 into pre-tokens by the regex the flags select
 * (Llama 3, with single digits or marks, GPT-2 or o200k; digits split off first
 * for ML_MLT_SPLIT_DIGITS) and calls fn for each, in order, covering every
 * byte.  Returns fn's non-zero value if it stopped. */
int ml__pretokenize(uint32_t flags, const uint8_t *s, size_t n, ml__pretok_fn fn, void *ctx);

/* ---- mlt.c ---- */

/* The merge rules in the file: n_merges records of three little-endian u32. */
const uint8_t *ml__mlt_merges(const ml_mlt *t);
/* The file's bytes. */
const uint8_t *ml__mlt_data(const ml_mlt *t);

/* ---- mlt_chat.c ---- */

/* Where the chat section's parts lie in the file. */
typedef struct ml__mlt_chat {
    size_t eog_off;           /* the first id */
    uint32_t n_eog, n_templates;
    struct {
        size_t name_off, text_off;
        uint32_t name_len, len;
    } tmpl[ML_MLT_MAX_TEMPLATES];
} ml__mlt_chat;

/* The chat section of t, or NULL when it has none (mlt.c). */
const ml__mlt_chat *ml__mlt_chat_of(const ml_mlt *t);
/* Every rule of the section that starts at pos and must end the file. */
ml_status ml__mlt_chat_read(const uint8_t *d, size_t size, size_t pos, const ml_mlt_header *h,
                            ml__mlt_chat *out, ml_error *err);
/* An upper bound of the section's bytes, checking the writer's input. */
ml_status ml__mlt_chat_size(const ml_mlt_chat *chat, ml_token eos, uint64_t *size, ml_error *err);
/* Serializes the section into buf (at least ml__mlt_chat_size bytes);
 * *len receives the bytes written. */
ml_status ml__mlt_chat_write(const ml_mlt_chat *chat, ml_token eos, uint8_t *buf, size_t *len,
                             ml_error *err);

#endif
