/* score.c - see score.h: a corpus scored in chunks, failures reported. */
#include "score.h"

#include "cli.h"
#include "input.h"

#include <stdlib.h>

int cli_read_tokens(const char *path, ml_tok *tok, int no_bos, ml_ids *ids)
{
    char *text;
    size_t len;
    int e = cli_read_text(path, &text, &len);
    if (e)
        return e;
    ml_error err;
    ml_status s =
        ml_tok_encode(tok, text, len, no_bos ? ML_TOK_BOS_NO : ML_TOK_BOS_AUTO, ids, &err);
    free(text);
    if (!s)
        return 0;
    ml_ids_free(ids);
    return cli_fail(path, s, &err);
}

/* llama-perplexity puts BOS first in every chunk when the tokenizer adds
 * one to a text. */
static ml_token chunk_bos(const ml_mlt *mlt, int no_bos)
{
    const ml_mlt_header *th = ml_mlt_get_header(mlt);
    return !no_bos && (th->flags & ML_MLT_ADD_BOS) ? th->bos : ML_TOKEN_NONE;
}

int cli_score(const cli_scoring *sc, const ml_ids *ids, ml_nll *acc, size_t *n_chunks)
{
    uint32_t n_ctx = ml_ctx_n_ctx(sc->ctx);
    if (ids->n < n_ctx) /* worded here: the library knows no --ctx */
        return cli_failf(sc->corpus, ML_E_INVAL,
                         "%zu tokens are fewer than one chunk of %u (--ctx)", ids->n, n_ctx);
    ml_perplexity_opts po = {sc->max_chunks, chunk_bos(sc->mlt, sc->no_bos), sc->progress,
                             sc->progress_ctx};
    ml_error err;
    ml_status s = ml_ctx_perplexity(sc->ctx, ids->v, ids->n, &po, sc->rows, acc,
                                    n_chunks, &err);
    if (s == ML_E_NOMEM) /* the chunk buffer: evaluation allocates nothing */
        return cli_fail(NULL, s, NULL);
    return s ? cli_fail(sc->model, s, &err) : 0;
}
