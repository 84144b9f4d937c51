/* check_tok_util.h - fixtures of the tokenizer tests: the .mlt files and
 * the expected-id files of tests/fixtures/tok (see tools/tok-cases.py),
 * found under $MLCORE_SRC (default: the current directory). */
#ifndef ML_CHECK_TOK_UTIL_H
#define ML_CHECK_TOK_UTIL_H

#include "testutil.h"

#include <stdio.h>

#define TF_N 6

/* Opens tests/fixtures/tok/NAME.mlt and builds its encoder; fails the test
 * on any error. */
void tf_load(const char *name, ml_mlt **m, ml_tok **k);
/* Reads a whole fixture file into memory (free it); fails the test if absent. */
uint8_t *tf_read(const char *file, size_t *len);
/* The full path of a fixture, in a static buffer. */
const char *tf_path(const char *file);

typedef struct tf_reader {
    FILE *f;
    char *line;
    size_t cap;
    /* The current line of pretok.tsv (read_pretok). */
    char variant[16];
    uint32_t flags;
    uint8_t *text;
    size_t text_len;
    size_t *ends;
    size_t n_ends;
} tf_reader;

/* One line of a case file. */
typedef struct tf_case {
    char tokenizer[32];
    char name[64];
    int special, roundtrip;
    uint8_t *text;     /* decoded from hex; owned by the reader */
    size_t text_len;
    uint32_t *ids;
    size_t n_ids;
} tf_case;

void tf_open(tf_reader *r, const char *file);
/* The next case, or 0 at the end.  Pointers live until the next call. */
int tf_next(tf_reader *r, tf_case *c);
/* The next raw line (without the newline), or 0 at the end. */
int tf_line(tf_reader *r, char *buf, size_t n);
void tf_close(tf_reader *r);

/* The next line of pretok.tsv into r's fields, or 0 at the end. */
int read_pretok(tf_reader *r);

int tf_ids_equal(const ml_ids *got, const uint32_t *want, size_t n);
void tf_print_diff(const char *tok, const char *name, int special, const ml_ids *got,
                   const uint32_t *want, size_t n);

/* The 1 MiB input of big.tsv, built as tools/tok-cases.py make_big does. */
uint8_t *tf_big_text(size_t *len);

#endif
