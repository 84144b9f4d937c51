/* info.h - what the parts of mlb-info share: its options, and the reports
 * on the two formats it reads (mlb.c for .mlb models, gguf_text.c and
 * gguf_json.c for GGUF files, gguf.c for what gguf2mlb would make of one). */
#ifndef MLB_INFO_H
#define MLB_INFO_H

#include "cli.h"

#include <mlcore/convert.h>
#include <mlcore/convert_tok.h>

#include <stddef.h>
#include <stdint.h>

typedef struct options {
    int tensors, json;
    int template_full; /* --template: long strings in full (text) */
    int all_arrays;    /* --arrays: every element of every array */
    uint64_t ctx;      /* 0: max_seq */
    ml_cache_type cache_k, cache_v; /* --cache-type: the KV cache sizes' types */
} options;

/* --- .mlb (mlb.c) --- */
void mlb_print(const char *path, const ml_mlb *m, const options *o);
/* "1234 bytes (1.21 KiB)" */
void human_size(uint64_t b, char *buf, size_t n);
/* " tok_emb wcls" for the bits of an ML_Q8_* mask. */
void print_q8_classes(uint32_t mask);
/* Tensors per type, in order of first appearance (wtype 3 models). */
typedef struct type_count {
    ml_type type[ML_TYPE_COUNT];
    size_t n[ML_TYPE_COUNT];
    int kinds;
} type_count;
void type_count_add(type_count *c, ml_type t);
/* "Q4_K 13, F32 5, Q6_K 3" (text) or {"Q4_K":13,...} (json). */
void print_type_counts(const type_count *c, int json);
/* The weights line's name of a wtype: "Q8_0", "Q4_0", "per-matrix types
 * (type table)"; json: "Q8_0", "Q4_0", "table". */
const char *wtype_name(uint32_t wtype, int json);

/* --- GGUF (gguf.c) --- */

/* What gguf2mlb would make of a GGUF: a plan, or why there is none, and
 * the tokenizer it would write, or why not. */
typedef struct prospect {
    int has_model;            /* 0: no tensors, a vocabulary-only GGUF */
    ml_convert_plan *plan;    /* NULL when the plan failed */
    ml_status plan_status;
    ml_error plan_err;
    ml_status tok_status;
    ml_error tok_err;
    ml_mlt_convert_info tok;
} prospect;

/* Reports on a GGUF (text or --json) and returns the exit status: that of
 * gguf2mlb's planning (4 for an unsupported architecture or type), the
 * failure reported on stderr after the report. */
int gguf_print(const char *path, const ml_gguf *g, const options *o);

/* Arrays longer than this are summarized in JSON without --arrays. */
#define JSON_ARRAY_FULL 1024
/* Elements shown: JSON of a summarized array; text of any array. */
#define JSON_ARRAY_HEAD 16
#define TEXT_ARRAY_HEAD 8
/* Strings longer than this, or with a line break, are "long" in text. */
#define TEXT_STRING_MAX 72

void gguf_print_text(const char *path, const ml_gguf *g, const prospect *p, const options *o);
void gguf_print_json(const char *path, const ml_gguf *g, const prospect *p, const options *o);

#endif
