/* mlcore/mlt.h - .mlt tokenizers (mlt(5)): reading, validating and writing
 * them, and encoding text to token ids and back.  Included by mlcore.h.
 *
 * An .mlt file is a 32-byte header, n_vocab token records (u8 attr, u32
 * len, len bytes) and n_merges merge rules (three u32: left, right and
 * merged id, in rank order).  ml_mlt_open validates it and reads it in
 * place; ml_tok_new builds the lookup tables an encoder needs; ml_tok_encode
 * turns UTF-8 text into ids exactly as the Hugging Face tokenizers library
 * does for the tokenizer the file was made from; ml_tok_decode and the
 * streaming decoder turn ids back into UTF-8 text. */
#ifndef MLCORE_MLT_H
#define MLCORE_MLT_H

#include <mlcore/base.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ML_MLT_HEADER_SIZE 32
#define ML_MLT_VERSION 1
/* Bytes of a token record before its piece, and of one merge rule. */
#define ML_MLT_TOKEN_OVERHEAD 5
#define ML_MLT_MERGE_SIZE 12

/* kind */
enum {
    ML_MLT_KIND_SPM = 1,      /* SentencePiece-style BPE over characters, ▁ for spaces */
    ML_MLT_KIND_BYTE_BPE = 2  /* byte-level BPE after a regex pre-tokenizer */
};

/* flags.  Bits 1..64 are the specification's; 128 and up are mlcore's
 * extensions (mlt(5)); every other bit must be 0. */
enum {
    ML_MLT_ADD_BOS = 1,          /* prepend the BOS id when encoding */
    ML_MLT_IGNORE_MERGES = 2,    /* a pre-token that is a vocabulary piece is one token */
    ML_MLT_PREFIX_FIRST = 4,     /* kind 1: ▁ only at the start of the text */
    ML_MLT_NFC = 8,              /* kind 2: NFC between added tokens */
    ML_MLT_SINGLE_DIGITS = 16,   /* kind 2: \p{N} instead of \p{N}{1,3} */
    ML_MLT_GPT2_REGEX = 32,      /* kind 2: the GPT-2 regex instead of Llama 3's */
    ML_MLT_SPLIT_DIGITS = 64,    /* kind 2: every \p{N} split off before the regex */
    ML_MLT_NO_PREFIX = 128,      /* kind 1: never prepend ▁ (Gemma) */
    ML_MLT_MARKS_REGEX = 256,    /* kind 2: letters are [\p{L}\p{M}]+, symbols exclude \p{M} (Qwen3.5) */
    ML_MLT_CHAT = 512,           /* a chat section follows the merges (mlt(5), CHAT SECTION) */
    ML_MLT_USER_TOKENS = 1024,   /* some tokens have attr 3 (user-defined added tokens) */
    ML_MLT_O200K_REGEX = 2048,   /* kind 2: o200k's case-aware regex instead of Llama 3's (gpt-oss) */
    ML_MLT_KNOWN_FLAGS = 4095
};

/* Token attributes. */
enum {
    ML_MLT_NORMAL = 0,  /* an ordinary piece */
    ML_MLT_ADDED = 1,   /* matched literally in the text before anything else: a
                           control token (<|im_start|>, <s>), which in text a user
                           wrote is only text (ml_tok_encode_text) */
    ML_MLT_BYTE = 2,    /* byte-fallback token <0xXX>, stored as its one byte */
    ML_MLT_USER = 3     /* an added token that is not a control token (GGUF's
                           USER_DEFINED, Hugging Face's special=false): matched in
                           all text, a user's too; needs flag ML_MLT_USER_TOKENS */
};

typedef struct ml_mlt_header {
    char magic[4];      /* "MLT1" */
    uint32_t version;   /* 1 */
    uint32_t kind;      /* ML_MLT_KIND_* */
    uint32_t n_vocab;   /* tokens */
    uint32_t n_merges;  /* merge rules */
    ml_token bos;       /* BOS id, or ML_TOKEN_NONE (i32 -1 in the file) */
    ml_token eos;       /* EOS id, or ML_TOKEN_NONE (i32 -1 in the file) */
    uint32_t flags;     /* ML_MLT_* flag bits */
} ml_mlt_header;

/* One token as the writer takes it and ml_mlt_token returns it. */
typedef struct ml_mlt_token {
    const uint8_t *bytes; /* the piece (in the file for an open .mlt) */
    uint32_t len;         /* bytes of the piece */
    uint8_t attr;         /* ML_MLT_NORMAL, ML_MLT_ADDED, ML_MLT_BYTE or ML_MLT_USER */
} ml_mlt_token;

/* ------------------------------------------------------------------------
 * Reading and validating
 * ------------------------------------------------------------------------ */
typedef struct ml_mlt ml_mlt;

/* Decodes 32 bytes into *h (no validation). */
ML_API void ml_mlt_header_decode(const uint8_t buf[ML_MLT_HEADER_SIZE], ml_mlt_header *h);
/* Encodes *h into 32 bytes. */
ML_API void ml_mlt_header_encode(const ml_mlt_header *h, uint8_t buf[ML_MLT_HEADER_SIZE]);

/* Maps the file read-only (a pipe or "-" is read whole) and validates it:
 * magic, version, kind, flags (unknown bits, bits of the other kind, BOS
 * without a BOS id), bos and eos in range, token and merge counts against
 * the file size, every token record (attr, length), byte tokens of length
 * 1, merge ids in range and each merged piece equal to left followed by
 * right, nothing after the last merge (or after the chat section, whose
 * rules mlt(5) lists).  ML_E_FORMAT names the field or token and its byte
 * offset; ML_E_UNSUPPORTED for a newer version. */
ML_API ml_status ml_mlt_open(const char *path, ml_mlt **out, ml_error *err);
/* The same over a buffer the caller keeps alive until ml_mlt_close. */
ML_API ml_status ml_mlt_open_memory(const void *buf, size_t len, ml_mlt **out, ml_error *err);
ML_API void ml_mlt_close(ml_mlt *t);

ML_API const ml_mlt_header *ml_mlt_get_header(const ml_mlt *t);
ML_API uint64_t ml_mlt_file_size(const ml_mlt *t);
/* Token id (id < n_vocab, else a zero token); bytes point into the file. */
ML_API ml_mlt_token ml_mlt_get_token(const ml_mlt *t, ml_token id);
/* File offset of token id's record. */
ML_API uint64_t ml_mlt_token_offset(const ml_mlt *t, ml_token id);
/* Merge rule of the given rank (< n_merges): left, right, merged id. */
ML_API void ml_mlt_get_merge(const ml_mlt *t, uint32_t rank, uint32_t *left, uint32_t *right,
                             uint32_t *merged);
/* The rule "n_vocab at most the model's vocab": ML_E_SHAPE when the
 * tokenizer has more tokens than the model has embeddings. */
ML_API ml_status ml_mlt_check_vocab(const ml_mlt *t, uint32_t model_vocab, ml_error *err);
/* The same tokens under the same ids (kind, count, every piece and
 * attribute; merges and flags are not compared): ML_E_MISMATCH naming the
 * first difference in b, its field and offset. */
ML_API ml_status ml_mlt_same_tokens(const ml_mlt *a, const ml_mlt *b, ml_error *err);
/* A BOS or EOS id as the file's i32 field holds it, as mlt-dump and the
 * JSON outputs print it: -1 for ML_TOKEN_NONE, the id itself otherwise. */
ML_API int32_t ml_mlt_id_i32(ml_token id);
/* The flags as words, "add_bos ignore_merges", into buf (always terminated). */
ML_API void ml_mlt_flag_names(uint32_t flags, char *buf, size_t n);

/* ------------------------------------------------------------------------
 * The chat section (flag ML_MLT_CHAT): the ids that end a generation and
 * the model's chat templates, as mlt(5) describes them
 * ------------------------------------------------------------------------ */
#define ML_MLT_MAX_EOG 256            /* end-of-generation ids */
#define ML_MLT_MAX_TEMPLATES 64
#define ML_MLT_TEMPLATE_NAME_MAX 64   /* bytes of a name: [A-Za-z0-9_.-] */
#define ML_MLT_TEMPLATE_MAX (1u << 20) /* bytes of a template's text */

/* A chat template: a Jinja text, by name ("default" is the model's main
 * one; GGUF's tokenizer.chat_template.NAME are the others).  Neither
 * string is NUL-terminated in the file. */
typedef struct ml_mlt_template {
    const char *name;
    uint32_t name_len;
    const char *text;
    uint32_t len;
} ml_mlt_template;

/* The ids at which generation ends, in increasing order: the chat
 * section's set, or without one the EOS id alone (none without EOS). */
ML_API uint32_t ml_mlt_n_eog(const ml_mlt *t);
ML_API ml_token ml_mlt_eog(const ml_mlt *t, uint32_t i);
/* 1 if id ends a generation. */
ML_API int ml_mlt_is_eog(const ml_mlt *t, ml_token id);
ML_API uint32_t ml_mlt_n_templates(const ml_mlt *t);
/* Template i < ml_mlt_n_templates (in the file's order), pointing into
 * the file. */
ML_API ml_mlt_template ml_mlt_get_template(const ml_mlt *t, uint32_t i);
/* The template called name (NUL-terminated) in *out (out may be NULL);
 * 0 when there is none. */
ML_API int ml_mlt_find_template(const ml_mlt *t, const char *name, ml_mlt_template *out);

/* What the writer puts in a chat section.  eog may be in any order and
 * repeat ids; the writer sorts it, drops repeats and adds the EOS id. */
typedef struct ml_mlt_chat {
    const uint32_t *eog;
    uint32_t n_eog;
    const ml_mlt_template *templates;
    uint32_t n_templates;
} ml_mlt_chat;

/* ------------------------------------------------------------------------
 * Writing
 * ------------------------------------------------------------------------ */
/* Validates and writes a complete .mlt through fn: h supplies kind, bos,
 * eos and flags (magic, version and the counts are set from the
 * arguments); tokens[n_vocab]; merges[3 * n_merges] as left, right, merged.
 * Applies the reader's rules, so what it writes, ml_mlt_open accepts. */
ML_API ml_status ml_mlt_write(const ml_mlt_header *h, const ml_mlt_token *tokens, uint32_t n_vocab,
                              const uint32_t *merges, uint32_t n_merges, ml_write_fn fn, void *ctx,
                              ml_error *err);
/* The same with a chat section when chat is not NULL (flag ML_MLT_CHAT
 * is then set; without chat it is cleared). */
ML_API ml_status ml_mlt_write_chat(const ml_mlt_header *h, const ml_mlt_token *tokens,
                                   uint32_t n_vocab, const uint32_t *merges, uint32_t n_merges,
                                   const ml_mlt_chat *chat, ml_write_fn fn, void *ctx,
                                   ml_error *err);

/* ------------------------------------------------------------------------
 * Encoding
 * ------------------------------------------------------------------------ */
typedef struct ml_tok ml_tok;

/* Builds the lookup tables of an encoder (piece and merge hashes, the
 * added-token trie, byte tokens); t must stay open while the encoder
 * lives.  An encoder is not thread-safe (it caches pre-tokens); make one
 * per thread. */
ML_API ml_status ml_tok_new(const ml_mlt *t, ml_tok **out, ml_error *err);
ML_API void ml_tok_free(ml_tok *k);
ML_API const ml_mlt *ml_tok_mlt(const ml_tok *k);

/* A growable id array; start zeroed, release with ml_ids_free. */
typedef struct ml_ids {
    ml_token *v;
    size_t n, cap;
} ml_ids;
ML_API void ml_ids_free(ml_ids *ids);

/* BOS handling of ml_tok_encode. */
enum {
    ML_TOK_BOS_AUTO = 0, /* as flag 1 of the file says (the tokenizer's own default) */
    ML_TOK_BOS_NO = 1,   /* never */
    ML_TOK_BOS_YES = 2   /* always (ML_E_INVAL when the file has no BOS id) */
};

/* Encodes len bytes of UTF-8 text and appends the ids to *out.  Invalid
 * UTF-8 is first replaced by U+FFFD, one per maximal invalid subpart, as
 * Rust's String::from_utf8_lossy and Python's errors="replace" do.  Never
 * fails on any input; ML_E_NOMEM when memory runs out. */
ML_API ml_status ml_tok_encode(ml_tok *k, const void *text, size_t len, int bos, ml_ids *out,
                               ml_error *err);
/* The same for text a user wrote (a chat message): no BOS, and control
 * tokens (attr 1) are not matched, so "<|im_start|>" in it is only text
 * and cannot forge a turn; user-defined added tokens (attr 3) still are,
 * as llama.cpp's parse_special=false and Hugging Face's
 * split_special_tokens=True do. */
ML_API ml_status ml_tok_encode_text(ml_tok *k, const void *text, size_t len, ml_ids *out,
                                    ml_error *err);

/* A byte range of a text. */
typedef struct ml_span {
    size_t start, len;
} ml_span;

/* Encodes a rendered chat (no BOS: a template writes its own) in one
 * piece, with control tokens matched only outside the user's spans
 * (increasing, not overlapping): the template's markers are control
 * tokens, the messages are text, and the text across a span's edges is
 * pre-tokenized as if it had been written in one piece.  The text must be
 * UTF-8 (ML_E_INVAL otherwise, as for a bad span). */
ML_API ml_status ml_tok_encode_chat(ml_tok *k, const void *text, size_t len, const ml_span *user,
                                    size_t n_user, ml_ids *out, ml_error *err);

/* ------------------------------------------------------------------------
 * Decoding
 * ------------------------------------------------------------------------ */
/* Decoding options. */
enum {
    ML_TOK_SKIP_BOS_EOS = 1, /* leave out the BOS and EOS ids */
    ML_TOK_KEEP_SPACE = 2    /* kind 1: keep the leading space the ▁ prefix left */
};

/* Streaming decoder: feed ids one at a time, get text as soon as it is
 * complete UTF-8.  An incomplete UTF-8 sequence at the end is held back
 * until the next id completes it; invalid bytes become U+FFFD.  Kind 1
 * turns ▁ into a space, byte tokens into their byte, and drops the space
 * its ▁ prefix put at the start of the text (unless ML_TOK_KEEP_SPACE).
 * Plain struct; no allocation. */
typedef struct ml_tok_stream {
    const ml_mlt *t;
    unsigned opts;
    int started;        /* some text was emitted (or the start space handled) */
    uint8_t pend[4];    /* held-back bytes of an incomplete sequence */
    unsigned npend;
} ml_tok_stream;

ML_API void ml_tok_stream_init(ml_tok_stream *s, const ml_mlt *t, unsigned opts);
/* Decodes one id and writes the text that is complete through fn (which
 * may be called several times, or not at all).  ML_E_INVAL for an id out
 * of range (nothing is written). */
ML_API ml_status ml_tok_stream_put(ml_tok_stream *s, ml_token id, ml_write_fn fn, void *ctx,
                                   ml_error *err);
/* Ends the stream: a held-back incomplete sequence becomes U+FFFD. */
ML_API ml_status ml_tok_stream_end(ml_tok_stream *s, ml_write_fn fn, void *ctx, ml_error *err);

/* Decodes ids[0..n) into a new NUL-terminated buffer (*out, *len without
 * the NUL); free it with free().  ML_E_INVAL for an id out of range. */
ML_API ml_status ml_tok_decode(const ml_mlt *t, const ml_token *ids, size_t n, unsigned opts,
                               char **out, size_t *len, ml_error *err);

#ifdef __cplusplus
}
#endif

#endif
