/* ml-imatrix - importance matrices (.mli, mli(5)): collect one by running a
 * model over a corpus in chunks (llama-imatrix's scheme: chunks of --ctx
 * tokens, BOS first when the tokenizer adds one, logits for every token),
 * sum several files (--merge), or print what one holds (--show).  See
 * ml-imatrix(1). */
#include "cli.h"
#include "input.h"
#include "output.h"
#include "score.h"
#include "signals.h"
#include "text.h"

#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum {
    OPT_MODEL, OPT_TOK, OPT_FILE, OPT_OUTPUT, OPT_CTX, OPT_CHUNKS, OPT_THREADS, OPT_BATCH,
    OPT_NOBOS, OPT_MERGE, OPT_SHOW, OPT_TOP, OPT_QUIET
};

/* --show's channels unless --top says; --ctx's default is CLI_SCORE_CTX. */
#define DEFAULT_TOP 5

static const cli_opt opts[] = {
    {OPT_MODEL, 'm', "model", "FILE", "the model (.mlb) to collect with"},
    {OPT_TOK, 'k', "tokenizer", "FILE", "the tokenizer (.mlt; default: beside the model)"},
    {OPT_FILE, 'f', "file", "FILE", "the corpus (text; - for standard input)"},
    {OPT_OUTPUT, 'o', "output", "FILE", "the importance matrix to write; - for stdout"},
    {OPT_CTX, 'c', "ctx", "N",
     "tokens per chunk (default " CLI_STR(CLI_SCORE_CTX) ", at most max_seq)"},
    {OPT_CHUNKS, 0, "chunks", "K", "at most K chunks (default: the whole corpus)"},
    {OPT_THREADS, 't', "threads", "N", "threads (default: the number of CPUs)"},
    {OPT_BATCH, 'b', "batch", "N",
     "tokens per evaluation step (default: fits " CLI_STR(ML_LOGITS_BATCH_MB) " MB of logits)"},
    {OPT_NOBOS, 0, "no-bos", NULL, "do not put BOS at the start of each chunk"},
    {OPT_MERGE, 0, "merge", NULL, "sum the .mli files (or llama-imatrix's) given as operands into -o"},
    {OPT_SHOW, 0, "show", NULL, "print, per matrix, the most important channels and the spread"},
    {OPT_TOP, 0, "top", "N", "channels listed by --show (default " CLI_STR(DEFAULT_TOP) ")"},
    {OPT_QUIET, 'q', "quiet", NULL, "no progress line and no summary"},
};

static const cli cmd = {
    "ml-imatrix",
    "-m MODEL.mlb -f CORPUS -o OUT.mli [options]\n"
    "       ml-imatrix --merge A.mli B.mli ... -o OUT.mli\n"
    "       ml-imatrix --show FILE.mli",
    "Collect an importance matrix over a corpus, sum several, or show one.",
    "The corpus is tokenized whole and cut into chunks of --ctx tokens (the rest\n"
    "is dropped); each chunk is evaluated from an empty context, and the squares\n"
    "of every matrix's inputs are summed per channel.  The perplexity of each\n"
    "chunk's second half is reported as llama-imatrix does.\n",
    opts,
    sizeof opts / sizeof opts[0],
};

typedef struct options {
    const char *model, *tok, *file, *out;
    uint64_t ctx, chunks, threads, batch, top;
    int no_bos, merge, show, quiet;
    char **operands;
    int n_operands;
} options;

static void parse(int argc, char **argv, options *o)
{
    const char *arg;
    int id, first;
    memset(o, 0, sizeof *o);
    o->threads = cli_n_cpus(UINT_MAX); /* the CPUs, even above --threads' 256 */
    o->ctx = CLI_SCORE_CTX, o->top = DEFAULT_TOP;
    while ((id = cli_next(argc, argv, &arg, &first)) != -1) {
        switch (id) {
        case OPT_MODEL: o->model = arg; break;
        case OPT_TOK: o->tok = arg; break;
        case OPT_FILE: o->file = arg; break;
        case OPT_OUTPUT: o->out = arg; break;
        case OPT_CTX: o->ctx = cli_u64("--ctx", arg, 2, ML_MLB_VOCAB_LIMIT); break;
        case OPT_CHUNKS: o->chunks = cli_u64("--chunks", arg, 1, UINT32_MAX); break;
        case OPT_THREADS: o->threads = cli_u64("--threads", arg, 1, 256); break;
        case OPT_BATCH: o->batch = cli_u64("--batch", arg, 1, 4096); break;
        case OPT_NOBOS: o->no_bos = 1; break;
        case OPT_MERGE: o->merge = 1; break;
        case OPT_SHOW: o->show = 1; break;
        case OPT_TOP: o->top = cli_u64("--top", arg, 0, 1u << 20); break;
        case OPT_QUIET: o->quiet = 1; break;
        }
    }
    o->operands = argv + first;
    o->n_operands = argc - first;
    if (o->merge && o->show)
        cli_usage_error("--merge and --show exclude each other");
    if (o->merge || o->show) {
        if (o->model || o->file)
            cli_usage_error("-m and -f are for collecting, not for --%s", o->merge ? "merge" : "show");
        if (o->n_operands < 1)
            cli_usage_error("--%s needs .mli files", o->merge ? "merge" : "show");
        if (o->merge && !o->out)
            cli_usage_error("--merge writes to -o OUT.mli");
        if (o->show && o->out)
            cli_usage_error("--show writes to standard output; -o is for collecting and --merge");
        return;
    }
    if (o->n_operands)
        cli_usage_error("unexpected operand '%s' (the corpus goes after -f)", o->operands[0]);
    if (!o->model)
        cli_usage_error("no model given (-m MODEL.mlb)");
    if (!o->file)
        cli_usage_error("no corpus given (-f FILE)");
    if (!o->out)
        cli_usage_error("name the output with -o OUT.mli (or - for standard output)");
}

/* ===========================================================================
 * Writing an .mli (temporary file, renamed when complete)
 * ========================================================================= */

/* The output is opened (as a temporary file) before the work starts, so an
 * unwritable place fails at once; committed by cli_output_mli. */
static int open_out(const char *path, ml_outfile **f)
{
    if (strcmp(path, "-") == 0 && isatty(1)) {
        cli_warn("-", "standard output is a terminal; name a file with -o");
        return EXIT_USAGE;
    }
    return cli_output_open(path, f);
}

/* ===========================================================================
 * Collecting
 * ========================================================================= */

typedef struct collect {
    const options *o;
    ml_mlb *mlb;
    ml_model *model;
    ml_mlt *mlt;
    ml_tok *tok;
    ml_ctx *ctx;
    ml_mli *mli;
    float *rows;
} collect;

static int open_all(collect *c)
{
    const options *o = c->o;
    ml_error err;
    ml_status s = ml_mlb_open(o->model, &c->mlb, &err);
    if (!s)
        s = ml_model_new(c->mlb, &c->model, &err);
    if (s)
        return cli_fail(o->model, s, &err);
    const ml_mlb_header *h = ml_mlb_get_header(c->mlb);
    if (o->ctx > h->max_seq)
        return cli_failf(o->model, ML_E_INVAL, "--ctx %" PRIu64 " is above the model's max_seq %u",
                         o->ctx, h->max_seq);
    int e = cli_open_tokenizer(o->tok, o->model, h->vocab, &c->mlt, &c->tok);
    if (e)
        return e;
    uint64_t nb = o->batch ? o->batch : ml_logits_batch(h->vocab);
    if (nb > o->ctx)
        nb = o->ctx;
    ml_ctx_params p = {.n_ctx = (uint32_t)o->ctx, .n_batch = (uint32_t)nb,
                       .n_threads = (unsigned)o->threads};
    if ((s = ml_ctx_new(c->model, &p, &c->ctx, &err)) || (s = ml_mli_new(h, &c->mli, &err)) ||
        (s = ml_ctx_set_imatrix(c->ctx, c->mli, &err)))
        return cli_fail(o->model, s, &err);
    if (!(c->rows = malloc(nb * h->vocab * sizeof(float))))
        return cli_fail(o->model, ML_E_NOMEM, NULL);
    return 0;
}

static void close_all(collect *c)
{
    free(c->rows);
    ml_ctx_free(c->ctx);
    ml_mli_close(c->mli);
    ml_tok_free(c->tok);
    ml_mlt_close(c->mlt);
    ml_model_free(c->model);
    ml_mlb_close(c->mlb);
}

/* The chunk line on a terminal, with the speed and the time left; stops
 * at a signal. */
typedef struct chunk_line {
    const ml_nll *acc;
    size_t n_ctx;
    double t0;
    int show;
    int started; /* the chunks were reached: the corpus and memory sufficed */
} chunk_line;

static int on_chunk(void *ctx, uint64_t done, uint64_t total)
{
    chunk_line *l = ctx;
    l->started = 1;
    if (l->show && done) {
        double dt = cli_seconds() - l->t0, tps = dt > 0 ? (double)(done * l->n_ctx) / dt : 0;
        double eta = dt / (double)done * (double)(total - done);
        fprintf(stderr,
                "\rml-imatrix: chunk %" PRIu64 "/%" PRIu64 ", PPL %.4f, %.1f tokens/s, %.0f s "
                "left \033[K",
                done, total, ml_nll_perplexity(l->acc, NULL), tps, eta);
    }
    return cli_stop_signal() != 0;
}

static int run_chunks(collect *c, const ml_ids *ids)
{
    const options *o = c->o;
    size_t n_ctx = (size_t)o->ctx, n_chunk;
    ml_nll acc = {0};
    chunk_line line = {&acc, n_ctx, cli_seconds(), !o->quiet && cli_stderr_is_tty(), 0};
    cli_scoring sc = {c->ctx, c->mlt, o->file, o->model, o->no_bos, o->chunks, c->rows,
                      on_chunk, &line};
    int e = cli_score(&sc, ids, &acc, &n_chunk);
    if (!line.started)
        return e;
    if (line.show)
        fputs("\r\033[K", stderr);
    if (cli_stop_signal())
        return -1; /* the caller removes the output, then re-raises */
    if (!e && !o->quiet) {
        double dt = cli_seconds() - line.t0, pm, ppl = ml_nll_perplexity(&acc, &pm);
        fprintf(stderr,
                "ml-imatrix: %s: %zu chunks of %zu tokens, %.1f tokens/s; PPL %.4f +/- %.5f "
                "over %" PRIu64 " tokens\n",
                cli_name(o->out), n_chunk, n_ctx, dt > 0 ? (double)(n_chunk * n_ctx) / dt : 0.0,
                ppl, pm, acc.count);
    }
    return e;
}

static int collect_main(const options *o)
{
    collect c = {.o = o};
    ml_ids ids = {0};
    ml_outfile *out = NULL;
    cli_catch_signals(); /* before the output exists, so it is always removed */
    int e = open_all(&c);
    if (!e)
        e = open_out(o->out, &out);
    if (!e)
        e = cli_read_tokens(o->file, c.tok, o->no_bos, &ids);
    if (!e && cli_stop_signal())
        e = -1;
    if (!e)
        e = run_chunks(&c, &ids);
    if (!e)
        e = cli_output_mli(o->out, out, c.mli);
    else
        ml_outfile_abort(out);
    ml_ids_free(&ids);
    close_all(&c);
    if (e < 0)
        cli_die_by_signal();
    return e;
}

/* ===========================================================================
 * --merge and --show
 * ========================================================================= */

static int merge_main(const options *o)
{
    ml_mli *sum = NULL;
    ml_outfile *out = NULL;
    int e = open_out(o->out, &out);
    for (int i = 0; i < o->n_operands && !e; i++) {
        ml_mli *m;
        ml_error err;
        ml_status s = ml_mli_open(o->operands[i], &m, &err);
        if (!s && sum)
            s = ml_mli_merge(sum, m, &err);
        if (s)
            e = cli_fail(o->operands[i], s, &err);
        if (!sum && !s)
            sum = m;
        else
            ml_mli_close(m);
    }
    if (!e)
        e = cli_output_mli(o->out, out, sum);
    else
        ml_outfile_abort(out);
    ml_mli_close(sum);
    return e;
}

static const char *const slot_names[] = {"attn_in", "wo_in", "ffn_in", "w2_in", "cls_in"};
static const char *const slot_users[] = {"wq,wk,wv,wg,lqkv,lz,lb,la", "wo,lout", "w1,w3", "w2",
                                          "wcls"};

typedef struct ranked {
    double imp;
    size_t ch;
} ranked;

static int by_importance(const void *a, const void *b)
{
    const ranked *x = a, *y = b;
    if (x->imp != y->imp)
        return x->imp < y->imp ? 1 : -1;
    return x->ch < y->ch ? -1 : x->ch > y->ch;
}

/* One line: mean square input, spread of importances, the top channels. */
static void show_slot(const ml_mli *m, int slot, uint32_t layer, size_t top, double *sums,
                      ranked *rk)
{
    size_t n = ml_mli_slot_size(m, (ml_mli_slot)slot);
    uint64_t tokens;
    ml_error err;
    if (ml_mli_sums(m, (ml_mli_slot)slot, layer, sums, n, &tokens, &err))
        return;
    double total = 0;
    for (size_t i = 0; i < n; i++)
        total += sums[i];
    double mean = tokens ? total / (double)n / (double)tokens : 0;
    if (slot == ML_MLI_CLS_IN)
        printf("%-5s", "-");
    else
        printf("%-5u", layer);
    printf(" %-7s %6zu %12.6g", slot_names[slot], n, mean);
    if (!(mean > 0)) {
        printf("  (no tokens or all zero)\n");
        return;
    }
    double lo = INFINITY, hi = 0, var = 0;
    for (size_t i = 0; i < n; i++) {
        double imp = sums[i] / (double)tokens / mean;
        rk[i] = (ranked){imp, i};
        lo = imp < lo ? imp : lo;
        hi = imp > hi ? imp : hi;
        var += (imp - 1) * (imp - 1);
    }
    printf(" %9.3g %9.3g %7.3f ", lo, hi, sqrt(var / (double)n));
    qsort(rk, n, sizeof *rk, by_importance);
    for (size_t i = 0; i < top && i < n; i++)
        printf(" %zu:%.3g", rk[i].ch, rk[i].imp);
    printf("\n");
}

static int show_one(const options *o, const char *path)
{
    ml_mli *m;
    ml_error err;
    ml_status s = ml_mli_open(path, &m, &err);
    if (s)
        return cli_fail(path, s, &err);
    const ml_mli_info *i = ml_mli_get_info(m);
    printf("%s: n_layers %u, dim %u, hidden_dim %u, q_dim %u; %" PRIu64 " layer tokens, %" PRIu64
           " classifier tokens\n",
           path, i->n_layers, i->dim, i->hidden_dim, i->q_dim ? i->q_dim : i->dim, i->layer_tokens,
           i->cls_tokens);
    printf("slots: ");
    for (int k = 0; k < 5; k++)
        printf("%s%s (%s)", k ? ", " : "", slot_names[k], slot_users[k]);
    printf("\nimportance = a channel's mean square input / the mean over the slot's channels\n");
    printf("%-5s %-7s %6s %12s %9s %9s %7s  %s\n", "layer", "slot", "chans", "mean_sq", "min_imp",
           "max_imp", "cv", "top channels (channel:importance)");
    size_t most = i->hidden_dim > i->dim ? i->hidden_dim : i->dim;
    if (i->q_dim > most)
        most = i->q_dim;
    double *sums = malloc(most * sizeof *sums);
    ranked *rk = malloc(most * sizeof *rk);
    if (!sums || !rk) {
        free(sums);
        free(rk);
        ml_mli_close(m);
        return cli_fail(path, ML_E_NOMEM, NULL);
    }
    for (uint32_t l = 0; l < i->n_layers; l++)
        for (int slot = ML_MLI_ATTN_IN; slot <= ML_MLI_W2_IN; slot++)
            show_slot(m, slot, l, (size_t)o->top, sums, rk);
    show_slot(m, ML_MLI_CLS_IN, 0, (size_t)o->top, sums, rk);
    free(sums);
    free(rk);
    ml_mli_close(m);
    return 0;
}

static int show_main(const options *o)
{
    int e = 0;
    for (int i = 0; i < o->n_operands && !e; i++)
        e = show_one(o, o->operands[i]);
    return e;
}

int main(int argc, char **argv)
{
    options o;
    cli_init(&cmd);
    parse(argc, argv, &o);
    int e = o.merge ? merge_main(&o) : o.show ? show_main(&o) : collect_main(&o);
    return cli_finish(e);
}
