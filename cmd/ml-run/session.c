/* session.c - the steps of one ml-run session, shared by a plain
 * generation (main.c) and a chat (chat.c): opening the model, its context,
 * tokenizer and generator (run_open) and closing them, evaluating tokens,
 * generating through the library's generator (mlcore/generate.h), and the
 * timings line. */
#include "cli.h"
#include "input.h"
#include "json_schema.h"
#include "output.h"
#include "score.h"
#include "signals.h"
#include "text.h"
#include "run.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int run_push_id(run *r, ml_token id)
{
    ml_token *ids = ml_array_reserve(r->ids, &r->cap_ids, r->n_ids + 1, sizeof *ids);
    if (!ids)
        return -1;
    r->ids = ids;
    r->ids[r->n_ids++] = id;
    return 0;
}

static ml_status write_logits(run *r, const float *rows, size_t n, ml_error *err)
{
    if (!r->logits)
        return ML_OK;
    return ml_outfile_write(r->logits, rows, n * r->h->vocab * sizeof(float), err);
}

/* Evaluates ids[from..to) a batch at a time and leaves the last row's
 * logits in r->row; with --logits every row goes to the file. */
int run_eval(run *r, size_t from, size_t to)
{
    ml_error err;
    int all = r->logits != NULL;
    ml_status s = ML_OK;
    while (!s && from < to && !cli_stop_signal()) {
        size_t n = to - from < r->nb ? to - from : r->nb;
        s = ml_ctx_eval(r->ctx, r->ids + from, n, r->row, all, &err);
        if (!s && all) {
            s = write_logits(r, r->row, n, &err);
            if (!s && n > 1)
                memmove(r->row, r->row + (n - 1) * r->h->vocab, r->h->vocab * sizeof(float));
        }
        from += n;
    }
    return s ? cli_fail(s == ML_E_IO ? cli_out_name(r->o.logits) : r->o.model, s, &err) : 0;
}

/* The generator's text goes to stdout as it comes; a chat also keeps the
 * reply. */
static ml_status print_text(void *ctx, const void *text, size_t n, ml_error *err)
{
    run *r = ctx;
    const char *p = text;
    if (r->o.chat && n) {
        if (ml_buf_reserve(&r->reply, n + 1)) /* and its terminator */
            return cli_set_error(err, ML_E_NOMEM, "out of memory");
        memcpy(r->reply.data + r->reply.len, p, n);
        r->reply.data[r->reply.len += n] = 0;
    }
    return n ? cli_stdout_sink_flushed(NULL, p, n, err) : ML_OK;
}

/* Each token the generator keeps: into the history (the context
 * evaluates it next; the repeat penalty looks back on it), and with --ids
 * onto stdout. */
static ml_status keep_token(void *ctx, ml_token id, ml_error *err)
{
    run *r = ctx;
    if (run_push_id(r, id) < 0)
        return cli_set_error(err, ML_E_NOMEM, "%s", ml_strerror(ML_E_NOMEM));
    r->n_gen++;
    if (r->o.ids)
        printf("%s%u", r->n_gen > 1 ? " " : "", id), fflush(stdout);
    return ML_OK;
}

/* One generator for the run: a chat's turns restart it, so that their
 * draws go on as one run's would.  Plain text continues its prompt (a
 * first ▁ is a space, as llama.cpp prints it); a chat reply is a message
 * of its own. */
static ml_status open_generator(run *r, ml_error *err)
{
    unsigned flags = (r->o.ignore_eos ? ML_GEN_IGNORE_EOS : 0) | (r->o.ids ? ML_GEN_NO_TEXT : 0) |
                     (r->o.chat ? 0 : ML_GEN_CONTINUE);
    ml_logits_proc grammar = {ml_grammar_proc_apply, ml_grammar_proc_accept, r->gproc};
    ml_gen_params p = {.vocab = r->h->vocab, .sampler = r->o.sp, .mlt = r->mlt, .flags = flags,
                       .stops = (const char *const *)r->o.stops, .n_stops = r->o.n_stops,
                       .max_tokens = r->o.n_predict, .on_text = print_text, .text_ctx = r,
                       .on_token = keep_token, .token_ctx = r, .bias = r->o.bias,
                       .n_bias = r->o.n_bias, .procs = r->gproc ? &grammar : NULL,
                       .n_procs = r->gproc != NULL};
    return ml_gen_new(&p, &r->gen, err);
}

/* One draw from logits, the next token going at position pos (the room
 * left is counted from there, as without speculation). */
static ml_status draw(run *r, float *logits, uint32_t pos, ml_gen_result *res, ml_error *err)
{
    ml_gen_input in = {logits, r->ids, r->n_ids, ml_ctx_n_ctx(r->ctx) - pos};
    return ml_gen_next(r->gen, &in, res, err);
}

/* --spec-type: guesses of what follows ids into draft[1..], from the
 * n-gram lookup or the draft model, as many as the options and the
 * context's room to take them back allow (*n = 0: none). */
static ml_status guess(run *r, size_t *n, ml_error *err)
{
    cli_spec_step step = {r->ctx, 0, r->o.spec.type ? ml_ctx_seq_rewind_room(r->ctx, 0) : 0,
                          cli_spec_left(r->o.n_predict, r->n_gen)};
    size_t most = cli_spec_most(&r->spec_run, step.room_back, step.budget), k = 0;
    ml_status s = ML_OK;
    *n = 0;
    if (!most)
        return ML_OK;
    if (r->o.spec.type == CLI_SPEC_DRAFT) {
        s = cli_draft_guess(r->drafter, 0, r->ids, r->n_ids, most, r->draft + 1, &k, err);
        *n = s ? 0 : cli_spec_enough(&r->o.spec, k);
    } else {
        *n = cli_spec_guess(&r->o.spec, &r->spec_run, &step, r->ids, r->n_ids, r->draft + 1);
    }
    return s;
}

/* Evaluates the token drawn last (the last of ids) and draws the next.
 * With guesses: that token and the guesses in one step, then a draw per
 * row for as long as each draw is the next guess; the context keeps what
 * was kept.  The rows are bit for bit the single-token ones and the draws
 * are the same draws in the same order, so the text is the same. */
static ml_status advance(run *r, ml_gen_result *res, int *e, ml_error *err)
{
    uint32_t pos = ml_ctx_pos(r->ctx);
    size_t k;
    ml_status s = guess(r, &k, err);
    if (s) {
        *e = cli_fail(r->o.spec.draft, s, err);
        return ML_OK;
    }
    if (!k) {
        *e = run_eval(r, r->n_ids - 1, r->n_ids);
        return *e ? ML_OK : draw(r, r->row, pos + 1, res, err);
    }
    r->draft[0] = r->ids[r->n_ids - 1];
    s = ml_ctx_eval(r->ctx, r->draft, k + 1, r->rows, 1, err);
    if (s) {
        *e = cli_fail(r->o.model, s, err);
        return ML_OK;
    }
    size_t i = 0;
    while (!(s = draw(r, r->rows + i * r->h->vocab, pos + (uint32_t)i + 1, res, err)) &&
           res->end == ML_GEN_GOING && i < k && res->token == r->draft[i + 1])
        i++;
    /* back off after a miss, grow while the guesses hold */
    cli_spec_checked(&r->o.spec, &r->spec_run, k, i);
    /* within the rewind room: cannot fail */
    ml_ctx_truncate(r->ctx, pos + (uint32_t)i + 1, NULL);
    return s;
}

int run_generate(run *r)
{
    ml_error err;
    ml_gen_result res = {ML_GEN_GOING, 0};
    ml_status s = ML_OK;
    int e = 0;
    ml_gen_restart(r->gen);
    ml_grammar_proc_reset(r->gproc);
    r->reply.len = 0;
    double t0 = cli_seconds();
    s = draw(r, r->row, ml_ctx_pos(r->ctx), &res, &err);
    while (!s && !e && res.end == ML_GEN_GOING && cli_stdout_ok() && !cli_stop_signal())
        s = advance(r, &res, &e, &err);
    if (!s && res.end == ML_GEN_CTX_FULL)
        cli_warn(NULL, "the context is full (%u positions; --ctx); stopping", ml_ctx_n_ctx(r->ctx));
    if (!s) /* the text held back; also after a signal or a failed evaluation */
        s = ml_gen_finish(r->gen, &err);
    if (s)
        return cli_fail(NULL, s, &err);
    if (r->n_gen && r->o.ids)
        printf("\n");
    r->t_gen = cli_seconds() - t0;
    return e;
}

/* The tokenizer beside the model (NAME.mlb -> NAME.mlt) exists.  With
 * --ids no tokenizer is needed, but one given with -k or beside the model
 * says which ids end a generation. */
static int tokenizer_beside(const run *r)
{
    char *p = cli_tokenizer_beside(r->o.model);
    int found = p && access(p, F_OK) == 0;
    free(p);
    return found;
}

/* Where the constraint on the text came from, for messages: the file, or
 * the option that held it. */
static const char *constraint_name(const run *r)
{
    return r->o.grammar_file       ? r->o.grammar_file
           : r->o.json_schema_file ? r->o.json_schema_file
           : r->o.json_schema      ? "--json-schema"
                                   : "--grammar";
}

/* The grammar of --json-schema's text (json_schema.c): a new text, or
 * NULL with the failure reported (*e: the exit status).  Not JSON or not
 * a schema is invalid input; a keyword the grammar cannot keep is
 * unsupported; both name the keyword's place. */
static char *schema_grammar(const run *r, const char *text, size_t len, int *e)
{
    json_error_t jerr;
    json_t *schema = json_loadb(text, len, JSON_DECODE_ANY, &jerr);
    if (!schema) {
        *e = cli_failf(constraint_name(r), ML_E_FORMAT, "line %d, column %d: %s", jerr.line,
                       jerr.column, jerr.text);
        return NULL;
    }
    json_schema_error err;
    char *grammar = json_schema_grammar(schema, &err);
    json_decref(schema);
    if (!grammar)
        *e = cli_failf(constraint_name(r),
                       err.status == JSON_SCHEMA_NOMEM         ? ML_E_NOMEM
                       : err.status == JSON_SCHEMA_UNSUPPORTED ? ML_E_UNSUPPORTED
                                                               : ML_E_FORMAT,
                       "%s", err.message);
    return grammar;
}

/* --grammar, --grammar-file, --json-schema or --json-schema-file, parsed
 * before the model is read so that a bad one fails at once; errors name
 * the file (or the option). */
static int parse_grammar(run *r)
{
    const char *file = r->o.grammar_file ? r->o.grammar_file : r->o.json_schema_file;
    const char *given = r->o.grammar ? r->o.grammar : r->o.json_schema;
    int schema = r->o.json_schema || r->o.json_schema_file;
    char *text = (char *)given;
    size_t len = text ? strlen(text) : 0;
    ml_error err;
    int e = 0;
    if (!text && !file)
        return 0;
    if (file && (e = cli_read_text(file, &text, &len)))
        return e;
    if (schema) {
        char *grammar = schema_grammar(r, text, len, &e);
        if (text != given)
            free(text);
        if (!grammar)
            return e;
        text = grammar;
        len = strlen(text);
    }
    ml_status s = ml_grammar_parse(text, len, NULL, &r->grammar, &err);
    if (text != given)
        free(text);
    return s ? cli_fail(constraint_name(r), s, &err) : 0;
}

/* The grammar's processor over the tokenizer's texts, as the generator
 * prints them (plain text continues the prompt: open_generator). */
static int open_grammar_proc(run *r)
{
    ml_error err;
    ml_status s = r->grammar ? ml_grammar_proc_new(r->grammar, r->mlt, &r->gproc, &err) : ML_OK;
    if (!s && r->gproc && !r->o.chat)
        ml_grammar_proc_continue(r->gproc);
    return s ? cli_fail(constraint_name(r), s, &err) : 0;
}

/* --spec-type: room for the guesses and their rows.  A step checks at
 * most a batch's tokens, with its rows near 64 MB (ml_logits_batch); a
 * model whose state cannot go back gets none. */
static int open_speculation(run *r)
{
    if (!r->o.spec.type)
        return 0;
    if (!ml_ctx_seq_rewind_room(r->ctx, 0)) {
        cli_warn(r->o.model, "%s: the model's linear-attention state cannot be taken back; "
                             "generating without speculation",
                 r->o.spec.type == CLI_SPEC_DRAFT ? "--model-draft" : "--spec-type");
        r->o.spec.type = 0;
        return 0;
    }
    size_t most = ml_logits_batch(r->h->vocab) < r->nb ? ml_logits_batch(r->h->vocab) : r->nb;
    cli_spec_start(&r->o.spec, &r->spec_run, most);
    r->draft = malloc((r->o.spec.max + 1) * sizeof *r->draft);
    r->rows = malloc((r->o.spec.max + 1) * r->h->vocab * sizeof *r->rows);
    return r->draft && r->rows ? 0 : cli_fail(r->o.model, ML_E_NOMEM, NULL);
}

/* -md: the draft model, checked against the model and its tokenizer,
 * with a context as long as the model's (or the draft's max_seq), the
 * same batch and cache types, and --threads-draft threads (default:
 * --threads).  A draft that cannot take back its guesses: none. */
static int open_draft(run *r)
{
    cli_spec *sp = &r->o.spec;
    cli_draft_params p = {.path = sp->draft, .no_mmap = r->o.no_mmap, .model = r->h,
                          .mlt = r->mlt, .n_ctx = ml_ctx_n_ctx(r->ctx), .n_batch = (uint32_t)r->nb,
                          .n_seq = 1,
                          .threads = (unsigned)(sp->threads_draft ? sp->threads_draft
                                                                  : r->o.threads),
                          .cache_k = r->o.cache_k, .cache_v = r->o.cache_v, .p_min = sp->p_min};
    int e = cli_draft_open(&p, &r->drafter);
    if (!e && !r->drafter)
        sp->type = 0;
    return e;
}

int run_draft_prompt(run *r)
{
    ml_error err;
    ml_status s = r->drafter && r->o.n_predict
                      ? cli_draft_follow(r->drafter, 0, r->ids, r->n_ids, &err)
                      : ML_OK;
    return s ? cli_fail(r->o.spec.draft, s, &err) : 0;
}

static int open_tokenizer(run *r)
{
    return cli_open_tokenizer(r->o.tok, r->o.model, r->h->vocab, &r->mlt, &r->tok);
}

/* -v's second line: the variant each kernel comes from (the library
 * chooses them one by one for this CPU). */
static void print_kernel_choice(void)
{
    fputs("ml-run: kernels by operation:", stderr);
    for (unsigned i = 0; ml_kernels_slot(i); i++)
        fprintf(stderr, " %s=%s", ml_kernels_slot(i), ml_kernels_slot_variant(i));
    fputc('\n', stderr);
}

/* -v's third line: what the KV cache costs, per position and in all. */
static void print_cache(const run *r)
{
    fprintf(stderr, "ml-run: KV cache %s/%s: %" PRIu64 " bytes per position, %" PRIu64
                    " bytes for %u positions (with recurrent state)\n",
            ml_cache_type_name(r->o.cache_k), ml_cache_type_name(r->o.cache_v),
            ml_ctx_bytes_per_pos(r->ctx), ml_ctx_state_bytes(r->ctx), ml_ctx_n_ctx(r->ctx));
}

int run_open(run *r)
{
    ml_error err;
    double t0 = cli_seconds();
    int e = parse_grammar(r);
    if (e)
        return e;
    ml_status s = ml_mlb_open_ex(r->o.model, r->o.no_mmap ? ML_MLB_READ : 0, &r->mlb, &err);
    if (s)
        return cli_fail(r->o.model, s, &err);
    r->h = ml_mlb_get_header(r->mlb);
    if ((s = ml_model_new(r->mlb, &r->model, &err)))
        return cli_fail(r->o.model, s, &err);
    uint32_t n_ctx = (uint32_t)r->o.ctx;
    if (!n_ctx)
        n_ctx = r->o.ppl ? CLI_SCORE_CTX
                         : (r->h->max_seq < DEFAULT_CTX ? r->h->max_seq : DEFAULT_CTX);
    /* DEFAULT_BATCH (llama.cpp's default micro-batch) prompt tokens per
     * step stream each weight panel once for more tokens, with fewer of
     * the pool's barriers; with --logits and --perplexity a step's logits
     * are held too, so the default then keeps them near 64 MB
     * (ml_logits_batch). */
    r->nb = r->o.batch;
    if (!r->nb)
        r->nb = r->o.logits || r->o.ppl ? ml_logits_batch(r->h->vocab) : DEFAULT_BATCH;
    ml_ctx_params p = {.n_ctx = n_ctx, .n_batch = (uint32_t)r->nb,
                       .n_threads = (unsigned)r->o.threads, .cache_k = r->o.cache_k,
                       .cache_v = r->o.cache_v};
    if ((e = cli_cache_fits(r->o.model, r->h, r->o.cache_k, r->o.cache_v)))
        return e;
    if ((s = ml_ctx_new(r->model, &p, &r->ctx, &err)))
        return cli_fail(r->o.model, s, &err);
    /* Logits of one step: a batch's rows for --logits and --perplexity. */
    size_t rows = (r->o.logits || r->o.ppl) ? r->nb : 1;
    r->row = malloc(rows * r->h->vocab * sizeof(float));
    if (!r->row)
        return cli_fail(r->o.model, ML_E_NOMEM, NULL);
    if ((e = open_speculation(r)))
        return e;
    /* a draft model's vocabulary is checked against the tokenizer's */
    if (!r->o.ids || r->o.ppl || r->o.tok || r->o.spec.draft || tokenizer_beside(r)) {
        if ((e = open_tokenizer(r)))
            return e;
    }
    if (r->o.spec.type == CLI_SPEC_DRAFT && (e = open_draft(r)))
        return e;
    if ((e = open_grammar_proc(r)))
        return e;
    if ((s = open_generator(r, &err)))
        return cli_fail(r->o.model, s, &err);
    r->t_load = cli_seconds() - t0;
    if (r->o.verbose)
        fprintf(stderr, "ml-run: %s: %u layers, dim %u, vocab %u, context %u, cache %s/%s, "
                        "%u threads, kernels %s, float math %s, prefetch %s, seed %" PRIu64 "\n",
                r->o.model, r->h->n_layers, r->h->dim, r->h->vocab, ml_ctx_n_ctx(r->ctx),
                ml_cache_type_name(r->o.cache_k), ml_cache_type_name(r->o.cache_v),
                (unsigned)r->o.threads, ml_kernels_name(), ml_kernels_fmath_name(),
                ml_kernels_prefetch_name(), r->o.sp.seed);
    if (r->o.verbose)
        print_kernel_choice();
    if (r->o.verbose)
        print_cache(r);
    if (r->o.verbose && r->o.spec.type == CLI_SPEC_DRAFT)
        cli_draft_describe(r->drafter);
    return 0;
}

void run_timings(const run *r)
{
    if (r->o.quiet)
        return;
    char reused[48] = "";
    if (r->o.chat)
        snprintf(reused, sizeof reused, " (%zu reused)", r->n_reused);
    else if (r->n_gen && !r->o.ids)
        fputc('\n', stderr); /* the generated text rarely ends a line (a chat's reply does) */
    char first[48];
    if (r->n_turns > 1) /* the load was the first turn's */
        snprintf(first, sizeof first, "turn %zu", r->n_turns);
    else
        snprintf(first, sizeof first, "load %.2f s", r->t_load);
    fprintf(stderr, "ml-run: %s; prompt %zu tokens%s, %.1f tokens/s; generation %zu tokens, "
                    "%.1f tokens/s\n",
            first, r->n_prompt, reused, r->t_prompt > 0 ? r->n_prompt / r->t_prompt : 0.0,
            r->n_gen, r->t_gen > 0 ? r->n_gen / r->t_gen : 0.0);
    if (r->o.spec.type)
        fprintf(stderr, "ml-run: speculation: %zu tokens guessed, %zu kept (%.0f%%)\n",
                r->spec_run.drafted, r->spec_run.accepted,
                r->spec_run.drafted
                    ? 100.0 * (double)r->spec_run.accepted / (double)r->spec_run.drafted
                    : 0.0);
}

void run_close(run *r)
{
    ml_mli_close(r->imatrix);
    ml_outfile_abort(r->logits);
    ml_gen_free(r->gen);
    ml_grammar_proc_free(r->gproc);
    ml_grammar_free(r->grammar);
    ml_ctx_free(r->ctx);
    ml_tok_free(r->tok);
    ml_mlt_close(r->mlt);
    ml_model_free(r->model);
    ml_mlb_close(r->mlb);
    cli_draft_close(r->drafter);
    free(r->ids);
    free(r->row);
    free(r->draft);
    free(r->rows);
    ml_buf_free(&r->reply);
    for (size_t i = 0; i < r->o.n_stops; i++)
        free(r->o.stops[i]);
}
