/* score.h - scoring a corpus as ml-run --perplexity and ml-imatrix do (the
 * library's ml_ctx_perplexity): the corpus file's tokens, BOS at the start
 * of each chunk as the tokenizer adds it, and the failures reported, a
 * corpus shorter than one chunk naming --ctx. */
#ifndef MLCORE_CLI_SCORE_H
#define MLCORE_CLI_SCORE_H

#include <mlcore.h>

/* llama.cpp's chunk length, the default of both commands. */
#define CLI_SCORE_CTX 512

/* Reads path ("-": stdin) whole and encodes it, with BOS as the tokenizer
 * adds it unless no_bos; reports failures naming path.  Returns 0 or the
 * exit status. */
int cli_read_tokens(const char *path, ml_tok *tok, int no_bos, ml_ids *ids);

typedef struct cli_scoring {
    ml_ctx *ctx;
    const ml_mlt *mlt;
    const char *corpus, *model; /* names for the messages */
    int no_bos;
    uint64_t max_chunks;        /* 0: all */
    float *rows;                /* the context's n_batch rows of logits */
    ml_chunk_progress_fn progress;
    void *progress_ctx;
} cli_scoring;

/* Scores ids into acc (ml_ctx_perplexity; *n_chunks as there).  Reports
 * failures; returns 0 or the exit status. */
int cli_score(const cli_scoring *sc, const ml_ids *ids, ml_nll *acc, size_t *n_chunks);

#endif
