/* ml-run - run an .mlb model: generate text from a prompt, write the logits
 * of every evaluated position, or score a text's perplexity the way
 * llama.cpp's llama-perplexity does. */
#include "cli.h"
#include "input.h"
#include "output.h"
#include "score.h"
#include "signals.h"
#include "text.h"
#include "run.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum {
    OPT_MODEL, OPT_TOK, OPT_PROMPT, OPT_FILE, OPT_IDS, OPT_N, OPT_CTX, OPT_THREADS, OPT_BATCH,
    OPT_TEMP, OPT_TOPK, OPT_TOPP, OPT_MINP, OPT_REPEAT, OPT_SEED, OPT_LOGITS, OPT_PPL, OPT_NOBOS,
    OPT_IGNORE_EOS, OPT_VERBOSE, OPT_QUIET, OPT_IMATRIX, OPT_STOP, OPT_REPEAT_LAST, OPT_ESCAPE,
    OPT_NO_ESCAPE, OPT_CHAT, OPT_INTERACTIVE, OPT_SYSTEM, OPT_CHAT_TEMPLATE, OPT_CHAT_TEMPLATE_FILE,
    OPT_CACHE, OPT_CACHE_K, OPT_CACHE_V, OPT_NO_MMAP
};

/* Defaults: parse() starts from them and --help shows them. */
#define DEFAULT_N_PREDICT 128
#define DEFAULT_CTX 4096
#define DEFAULT_BATCH 512
#define DEFAULT_TEMP 0.8
#define DEFAULT_TOP_K 40
#define DEFAULT_TOP_P 0.95
#define DEFAULT_MIN_P 0.05
#define DEFAULT_REPEAT_PENALTY 1
#define DEFAULT_REPEAT_LAST 64

static const cli_opt opts[] = {
    {OPT_MODEL, 'm', "model", "FILE", "the model (.mlb); required"},
    {OPT_TOK, 'k', "tokenizer", "FILE", "the tokenizer (.mlt; default: beside the model)"},
    {OPT_PROMPT, 'p', "prompt", "TEXT", "the prompt (default: standard input)"},
    {OPT_FILE, 'f', "file", "FILE", "read the prompt from FILE"},
    {OPT_IDS, 0, "ids", NULL, "the prompt is token ids; print generated ids, not text"},
    {OPT_CHAT, 0, "chat", NULL,
     "the prompt is a user's turn, through the model's chat template; without a prompt,\n"
     "                           on a terminal, a conversation"},
    {OPT_INTERACTIVE, 'i', "interactive", NULL,
     "a conversation, a turn per line of standard input, terminal or not (after -p/-f)"},
    {OPT_SYSTEM, 0, "system-prompt", "TEXT", "a system message first (implies --chat)"},
    {OPT_CHAT_TEMPLATE, 0, "chat-template", "NAME",
     "the tokenizer's template NAME, or a built-in: chatml, llama3, gemma, mistral, ..."},
    {OPT_CHAT_TEMPLATE_FILE, 0, "chat-template-file", "FILE", "the chat template in a Jinja file"},
    {OPT_N, 'n', "n-predict", "N",
     "tokens to generate (default " CLI_STR(DEFAULT_N_PREDICT) "; 0: only evaluate)"},
    {OPT_CTX, 'c', "ctx", "N",
     "context positions (default: " CLI_STR(DEFAULT_CTX) ", at most max_seq)"},
    {OPT_THREADS, 't', "threads", "N", "threads (default: the number of CPUs)"},
    {OPT_CACHE, 0, "cache-type", "TYPE", "KV cache keys and values: " CLI_CACHE_TYPES},
    {OPT_CACHE_K, 0, "cache-type-k", "TYPE", "KV cache keys only"},
    {OPT_CACHE_V, 0, "cache-type-v", "TYPE", "KV cache values only"},
    {OPT_NO_MMAP, 0, "no-mmap", NULL,
     "read the model into memory (huge pages) instead of mapping it: faster\n"
     "                           generation, a copy at load"},
    {OPT_BATCH, 'b', "batch", "N",
     "prompt tokens per step (default " CLI_STR(DEFAULT_BATCH) "; less with --logits)"},
    {OPT_TEMP, 0, "temp", "T", "temperature; 0 is greedy (default " CLI_STR(DEFAULT_TEMP) ")"},
    {OPT_TOPK, 0, "top-k", "K",
     "keep the K most likely tokens (default " CLI_STR(DEFAULT_TOP_K) "; 0: off)"},
    {OPT_TOPP, 0, "top-p", "P",
     "keep the most likely tokens up to probability P (default " CLI_STR(DEFAULT_TOP_P) ")"},
    {OPT_MINP, 0, "min-p", "P",
     "drop tokens below P times the best's probability (default " CLI_STR(DEFAULT_MIN_P) ")"},
    {OPT_REPEAT, 0, "repeat-penalty", "R",
     "penalty on the last --repeat-last-n tokens "
     "(default " CLI_STR(DEFAULT_REPEAT_PENALTY) ": off)"},
    {OPT_REPEAT_LAST, 0, "repeat-last-n", "N",
     "tokens the penalty looks back on (default " CLI_STR(DEFAULT_REPEAT_LAST) "; 0: off)"},
    {OPT_STOP, 'r', "stop", "TEXT", "end the text before TEXT, which is not printed (repeatable)"},
    {OPT_ESCAPE, 'e', "escape", NULL, "turn \\n \\r \\t \\' \\\" \\\\ \\xHH in -p and -r into bytes (default)"},
    {OPT_NO_ESCAPE, 0, "no-escape", NULL, "take -p and -r as they are"},
    {OPT_SEED, 's', "seed", "S", "random seed (default: from the clock; printed with -v)"},
    {OPT_LOGITS, 0, "logits", "FILE", "write the logits of every evaluated position to FILE"},
    {OPT_PPL, 0, "perplexity", "FILE", "score the text in FILE like llama-perplexity"},
    {OPT_IMATRIX, 0, "imatrix", "FILE", "collect an importance matrix (.mli) into FILE"},
    {OPT_NOBOS, 0, "no-bos", NULL, "do not prepend BOS to the prompt"},
    {OPT_IGNORE_EOS, 0, "ignore-eos", NULL, "never end at an end-of-generation token"},
    {OPT_VERBOSE, 'v', "verbose", NULL, "print the model and settings to stderr first"},
    {OPT_QUIET, 'q', "quiet", NULL, "no timings on stderr"},
};

/* llama.cpp's spellings of the same options, so that habits carry over. */
static const cli_alias aliases[] = {
    {OPT_N, "predict"},          {OPT_CTX, "ctx-size"},      {OPT_BATCH, "batch-size"},
    {OPT_TEMP, "temperature"},   {OPT_STOP, "reverse-prompt"}, {OPT_CHAT, "-cnv"},
    {OPT_CHAT, "conversation"},  {OPT_SYSTEM, "-sys"},      {OPT_CACHE_K, "-ctk"},
    {OPT_CACHE_V, "-ctv"},
};

static const cli cmd = {
    "ml-run", "-m MODEL.mlb [options]",
    "Generate text with an .mlb model, write its logits, or score a text's perplexity.\n"
    "The prompt comes from -p, -f FILE or standard input; the generated text goes to\n"
    "standard output as it is produced, timings to standard error.",
    NULL, opts, sizeof opts / sizeof opts[0],
};

static float parse_float(const char *opt, const char *arg, float lo, float hi)
{
    char *end;
    errno = 0;
    float v = strtof(arg, &end);
    if (errno || end == arg || *end || !(v >= lo && v <= hi))
        cli_usage_error("%s: '%s' is not a number in [%g, %g]", opt, arg, (double)lo, (double)hi);
    return v;
}

/* llama.cpp's escapes (string_process_escapes): \n \r \t \' \" \\ and
 * \xHH become bytes; any other backslash stays as it is.  In place. */
static void unescape(char *s)
{
    char *w = s;
    for (const char *p = s; *p; p++) {
        if (p[0] != '\\' || !p[1]) {
            *w++ = *p;
            continue;
        }
        const char *m = strchr("nrt'\"\\", p[1]);
        if (m && p[1]) {
            *w++ = "\n\r\t'\"\\"[m - "nrt'\"\\"];
            p++;
        } else if (p[1] == 'x' && isxdigit((unsigned char)p[2]) && isxdigit((unsigned char)p[3])) {
            char hex[3] = {p[2], p[3], 0};
            *w++ = (char)strtol(hex, NULL, 16);
            p += 3;
        } else {
            *w++ = *p;
        }
    }
    *w = 0;
}

/* A copy, so that escapes can be turned into bytes after all options are
 * read (--no-escape may come last). */
static void add_stop(options *o, const char *arg)
{
    if (o->n_stops == MAX_STOPS)
        cli_usage_error("--stop: at most %d stop strings", MAX_STOPS);
    if (!*arg)
        cli_usage_error("--stop: an empty stop string");
    if (strlen(arg) > ML_STOP_MAX_LEN)
        cli_usage_error("--stop: more than %d bytes", ML_STOP_MAX_LEN);
    if (!(o->stops[o->n_stops] = strdup(arg)))
        cli_usage_error("out of memory");
    o->n_stops++;
}

/* --repeat-last-n: 0 turns the penalty off, as in llama.cpp. */
static void repeat_last(options *o, const char *arg)
{
    o->sp.repeat_last_n = (uint32_t)cli_u64("--repeat-last-n", arg, 0, ML_MLB_VOCAB_LIMIT);
    o->repeat_off = o->sp.repeat_last_n == 0;
}

static void parse(int argc, char **argv, options *o)
{
    const char *arg;
    int id, first;
    memset(o, 0, sizeof *o);
    o->n_predict = DEFAULT_N_PREDICT;
    o->threads = cli_n_cpus(UINT_MAX); /* the CPUs, even above --threads' 256 */
    o->sp = (ml_sampler_params){DEFAULT_TEMP, DEFAULT_TOP_K, DEFAULT_TOP_P, DEFAULT_MIN_P,
                                DEFAULT_REPEAT_PENALTY, DEFAULT_REPEAT_LAST, 0};
    while ((id = cli_next(argc, argv, &arg, &first)) != -1) {
        switch (id) {
        case OPT_STOP: add_stop(o, arg); break;
        case OPT_REPEAT_LAST: repeat_last(o, arg); break;
        case OPT_ESCAPE: o->no_escape = 0; break;
        case OPT_NO_ESCAPE: o->no_escape = 1; break;
        case OPT_MODEL: o->model = arg; break;
        case OPT_TOK: o->tok = arg; break;
        case OPT_PROMPT: o->prompt = arg; break;
        case OPT_FILE: o->file = arg; break;
        case OPT_IDS: o->ids = 1; break;
        case OPT_N: o->n_predict = cli_u64("--n-predict", arg, 0, 1u << 24); break;
        case OPT_CTX: o->ctx = cli_u64("--ctx", arg, 1, ML_MLB_VOCAB_LIMIT); break;
        case OPT_THREADS: o->threads = cli_u64("--threads", arg, 1, 256); break;
        case OPT_BATCH: o->batch = cli_u64("--batch", arg, 1, 4096); break;
        case OPT_CACHE: o->cache_k = o->cache_v = cli_cache_type("--cache-type", arg); break;
        case OPT_CACHE_K: o->cache_k = cli_cache_type("--cache-type-k", arg); break;
        case OPT_CACHE_V: o->cache_v = cli_cache_type("--cache-type-v", arg); break;
        case OPT_NO_MMAP: o->no_mmap = 1; break;
        case OPT_TEMP: o->sp.temperature = parse_float("--temp", arg, 0, 100); break;
        case OPT_TOPK: o->sp.top_k = (uint32_t)cli_u64("--top-k", arg, 0, ML_MLB_VOCAB_LIMIT); break;
        case OPT_TOPP: o->sp.top_p = parse_float("--top-p", arg, 0, 1); break;
        case OPT_MINP: o->sp.min_p = parse_float("--min-p", arg, 0, 1); break;
        case OPT_REPEAT: o->sp.repeat_penalty = parse_float("--repeat-penalty", arg, 0, 100); break;
        case OPT_SEED: o->sp.seed = cli_u64("--seed", arg, 0, UINT64_MAX), o->seed_set = 1; break;
        case OPT_LOGITS: o->logits = arg; break;
        case OPT_PPL: o->ppl = arg; break;
        case OPT_IMATRIX: o->imatrix = arg; break;
        case OPT_NOBOS: o->no_bos = 1; break;
        case OPT_IGNORE_EOS: o->ignore_eos = 1; break;
        case OPT_VERBOSE: o->verbose = 1; break;
        case OPT_QUIET: o->quiet = 1; break;
        case OPT_CHAT: o->chat = 1; break;
        case OPT_INTERACTIVE: o->interactive = o->chat = 1; break;
        case OPT_SYSTEM: o->system = arg, o->chat = 1; break;
        case OPT_CHAT_TEMPLATE: o->chat_template = arg, o->chat = 1; break;
        case OPT_CHAT_TEMPLATE_FILE: o->chat_template_file = arg, o->chat = 1; break;
        }
    }
    if (first < argc)
        cli_usage_error("unexpected operand '%s' (the prompt goes after -p)", argv[first]);
    if (!o->model)
        cli_usage_error("no model given (-m MODEL.mlb)");
    if (o->prompt && o->file)
        cli_usage_error("-p and -f exclude each other");
    if (o->ppl && (o->prompt || o->file || o->ids))
        cli_usage_error("--perplexity takes its text from FILE alone");
    if (o->repeat_off)
        o->sp.repeat_penalty = 1;
    if (o->chat && (o->ids || o->ppl || o->logits || o->imatrix))
        cli_usage_error("--chat (and -i, --system-prompt, --chat-template) generates text: not "
                        "with --ids, --perplexity, --logits or --imatrix");
    if (o->chat_template && o->chat_template_file)
        cli_usage_error("--chat-template and --chat-template-file exclude each other");
    if (!o->no_escape) {
        if (o->system)
            unescape((char *)o->system);
        if (o->prompt)
            unescape((char *)o->prompt);
        for (size_t i = 0; i < o->n_stops; i++)
            unescape(o->stops[i]);
    }
    if (o->n_stops && (o->ids || o->ppl || o->logits))
        cli_usage_error("--stop works on generated text (not with --ids, --perplexity or --logits)");
    if (!o->seed_set)
        o->sp.seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
}

int run_push_id(run *r, ml_token id)
{
    if (r->n_ids == r->cap_ids) {
        size_t nc = r->cap_ids ? 2 * r->cap_ids : 256;
        ml_token *n = realloc(r->ids, nc * sizeof *n);
        if (!n)
            return -1;
        r->ids = n;
        r->cap_ids = nc;
    }
    r->ids[r->n_ids++] = id;
    return 0;
}

/* The tokenizer beside the model: NAME.mlb -> NAME.mlt. */
/* With --ids no tokenizer is needed, but one given with -k or beside the
 * model says which ids end a generation. */
static int tokenizer_beside(const run *r)
{
    char *p = cli_tokenizer_beside(r->o.model);
    int found = p && access(p, F_OK) == 0;
    free(p);
    return found;
}

static int open_tokenizer(run *r)
{
    return cli_open_tokenizer(r->o.tok, r->o.model, r->h->vocab, &r->mlt, &r->tok);
}

static int open_model(run *r)
{
    ml_error err;
    double t0 = cli_seconds();
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
    /* DEFAULT_BATCH (512, llama.cpp's default micro-batch) prompt tokens
     * per step stream each weight panel once for more tokens (+17% prompt
     * speed over 64 on a 1B Q4_0 model; 512 over 256 on Zen 4: Gemma 3
     * 270M +6-10%, TinyLlama +3%), with fewer of the pool's barriers;
     * with --logits and --perplexity a step's logits are held too, so the
     * default then keeps them near 64 MB (ml_logits_batch). */
    r->nb = r->o.batch;
    if (!r->nb)
        r->nb = r->o.logits || r->o.ppl ? ml_logits_batch(r->h->vocab) : DEFAULT_BATCH;
    ml_ctx_params p = {.n_ctx = n_ctx, .n_batch = (uint32_t)r->nb,
                       .n_threads = (unsigned)r->o.threads, .cache_k = r->o.cache_k,
                       .cache_v = r->o.cache_v};
    if ((s = ml_ctx_new(r->model, &p, &r->ctx, &err)))
        return cli_fail(r->o.model, s, &err);
    if ((s = ml_sampler_new(&r->o.sp, r->h->vocab, &r->sampler, &err)))
        return cli_fail(r->o.model, s, &err);
    /* Logits of one step: a batch's rows for --logits and --perplexity. */
    size_t rows = (r->o.logits || r->o.ppl) ? r->nb : 1;
    r->row = malloc(rows * r->h->vocab * sizeof(float));
    if (!r->row)
        return cli_fail(r->o.model, ML_E_NOMEM, NULL);
    if (!r->o.ids || r->o.ppl || r->o.tok || tokenizer_beside(r)) {
        int e = open_tokenizer(r);
        if (e)
            return e;
    }
    r->t_load = cli_seconds() - t0;
    if (r->o.verbose)
        fprintf(stderr, "ml-run: %s: %u layers, dim %u, vocab %u, context %u, cache %s/%s, "
                        "%u threads, kernels %s, float math %s, seed %" PRIu64 "\n",
                r->o.model, r->h->n_layers, r->h->dim, r->h->vocab, ml_ctx_n_ctx(r->ctx),
                ml_cache_type_name(r->o.cache_k), ml_cache_type_name(r->o.cache_v),
                (unsigned)r->o.threads, ml_kernels_name(), ml_kernels_fmath_name(), r->o.sp.seed);
    return 0;
}

/* The prompt as ids: parsed numbers with --ids, else encoded text. */
static int prompt_ids(run *r)
{
    char *text = NULL;
    size_t len = 0;
    int e = 0;
    if (r->o.prompt) {
        len = strlen(r->o.prompt);
        text = malloc(len + 1);
        if (!text)
            return cli_fail(NULL, ML_E_NOMEM, NULL);
        memcpy(text, r->o.prompt, len + 1);
    } else if ((e = cli_read_text(r->o.file ? r->o.file : "-", &text, &len))) {
        return e;
    }
    if (r->o.ids) {
        char *p = text, *end;
        for (;;) {
            while (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r' || *p == ',')
                p++;
            if (!*p)
                break;
            errno = 0;
            long v = strtol(p, &end, 10);
            if (end == p || errno || v < 0 || v >= (long)r->h->vocab) {
                int n = (int)strcspn(p, " \n\t\r,");
                cli_usage_error("--ids: '%.*s' is not a token id below %u", n < 20 ? n : 20, p,
                                r->h->vocab); /* exits; text is not freed */
            }
            if (run_push_id(r, (ml_token)v) < 0)
                e = cli_fail(NULL, ML_E_NOMEM, NULL);
            p = end;
        }
    } else {
        ml_ids ids = {0};
        ml_error err;
        ml_status s = ml_tok_encode(r->tok, text, len, r->o.no_bos ? ML_TOK_BOS_NO : ML_TOK_BOS_AUTO,
                                    &ids, &err);
        if (s)
            e = cli_fail(r->o.file ? r->o.file : NULL, s, &err);
        for (size_t i = 0; !e && i < ids.n; i++)
            if (run_push_id(r, ids.v[i]) < 0)
                e = cli_fail(NULL, ML_E_NOMEM, NULL);
        ml_ids_free(&ids);
    }
    free(text);
    return e;
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

/* Text goes to stdout as it comes; a chat also keeps the reply. */
static ml_status print_text(run *r, const char *p, size_t n, ml_error *err)
{
    if (r->o.chat && n) {
        if (n >= r->reply_cap - r->reply_len) {
            size_t cap = 2 * (r->reply_len + n) + 64;
            char *b = realloc(r->reply, cap);
            if (!b)
                return cli_set_error(err, ML_E_NOMEM, "out of memory");
            r->reply = b, r->reply_cap = cap;
        }
        memcpy(r->reply + r->reply_len, p, n);
        r->reply[r->reply_len += n] = 0;
    }
    return n ? cli_stdout_sink_flushed(NULL, p, n, err) : ML_OK;
}

/* The decoder's text goes through the stop strings to print_text. */
typedef struct stop_ctx {
    run *r;
    ml_stop *st;
} stop_ctx;

static ml_status stop_sink(void *ctx, const void *buf, size_t n, ml_error *err)
{
    stop_ctx *sc = ctx;
    const char *out;
    size_t len;
    if (ml_stop_push(sc->st, buf, n, &out, &len) < 0)
        return cli_set_error(err, ML_E_NOMEM, "out of memory");
    return print_text(sc->r, out, len, err);
}

int run_generate(run *r)
{
    ml_tok_stream ts;
    ml_error err;
    ml_stop *st = NULL;
    if (r->mlt)
        ml_tok_stream_init(&ts, r->mlt, ML_TOK_SKIP_BOS_EOS);
    ml_status s = ml_stop_new((const char *const *)r->o.stops, r->o.n_stops, &st, &err);
    if (s)
        return cli_fail(NULL, s, &err);
    stop_ctx sc = {r, st};
    r->reply_len = 0;
    double t0 = cli_seconds();
    int e = 0;
    for (uint64_t i = 0; i < r->o.n_predict && !e && !s && cli_stdout_ok() && !cli_stop_signal();
         i++) {
        if (r->o.ignore_eos && r->mlt)
            cli_forbid_eog(r->mlt, r->h->vocab, r->row);
        ml_token id = ml_sampler_next(r->sampler, r->row, r->ids, r->n_ids);
        if (r->mlt && ml_mlt_is_eog(r->mlt, id))
            break; /* the end of the turn or the text: not printed */
        if (run_push_id(r, id) < 0)
            return cli_fail(NULL, ML_E_NOMEM, NULL);
        r->n_gen++;
        if (r->o.ids)
            printf("%s%u", r->n_gen > 1 ? " " : "", id), fflush(stdout);
        else if ((s = ml_tok_stream_put(&ts, id, stop_sink, &sc, &err)))
            break;
        if (i + 1 == r->o.n_predict || ml_stop_done(st))
            break;
        if (ml_ctx_pos(r->ctx) == ml_ctx_n_ctx(r->ctx)) {
            cli_warn(NULL, "the context is full (%u positions; --ctx); stopping",
                     ml_ctx_n_ctx(r->ctx));
            break;
        }
        e = run_eval(r, r->n_ids - 1, r->n_ids);
    }
    if (!s && r->mlt && !r->o.ids)
        s = ml_tok_stream_end(&ts, stop_sink, &sc, &err);
    if (!s) { /* the tail a stop string might have begun */
        const char *tail;
        size_t len;
        ml_stop_flush(st, &tail, &len);
        s = print_text(r, tail, len, &err);
    }
    ml_stop_free(st);
    if (s)
        return cli_fail(NULL, s, &err);
    if (r->n_gen && r->o.ids)
        printf("\n");
    r->t_gen = cli_seconds() - t0;
    return e;
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
}

/* The chunk line on a terminal; stops at a signal. */
typedef struct chunk_line {
    const ml_nll *acc;
    int show;
} chunk_line;

static int on_chunk(void *ctx, uint64_t done, uint64_t total)
{
    const chunk_line *l = ctx;
    if (l->show && done)
        fprintf(stderr, "\rml-run: chunk %" PRIu64 "/%" PRIu64 ", ppl %.4f ", done, total,
                ml_nll_perplexity(l->acc, NULL));
    return cli_stop_signal() != 0;
}

/* llama-perplexity's scheme (score.h): chunks of n_ctx tokens, the second
 * half of each scored. */
static int perplexity(run *r)
{
    ml_ids ids = {0};
    int e = cli_read_tokens(r->o.ppl, r->tok, r->o.no_bos, &ids);
    if (e)
        return e;
    ml_nll acc = {0};
    chunk_line line = {&acc, !r->o.quiet && cli_stderr_is_tty()};
    cli_scoring sc = {r->ctx, r->mlt, r->o.ppl, r->o.model, r->o.no_bos, 0, r->row,
                      on_chunk, &line};
    size_t n_chunk;
    double t0 = cli_seconds();
    e = cli_score(&sc, &ids, &acc, &n_chunk);
    if (!e) {
        uint32_t n_ctx = ml_ctx_n_ctx(r->ctx);
        if (line.show)
            fputs("\r\033[K", stderr);
        double pm, ppl = ml_nll_perplexity(&acc, &pm);
        printf("%s: %zu chunks of %u tokens, %" PRIu64 " scored: PPL = %.4f +/- %.5f\n",
               cli_name(r->o.ppl), n_chunk, n_ctx, acc.count, ppl, pm);
        r->n_prompt = n_chunk * n_ctx;
        r->t_prompt = cli_seconds() - t0;
    }
    ml_ids_free(&ids);
    return e;
}

/* The importance matrix, written whole once the run has succeeded. */
static int write_imatrix(run *r)
{
    ml_outfile *f;
    int e = cli_output_open(r->o.imatrix, &f);
    return e ? e : cli_output_mli(r->o.imatrix, f, r->imatrix);
}

static int start_imatrix(run *r)
{
    ml_error err;
    ml_status s = ml_mli_new(r->h, &r->imatrix, &err);
    if (!s)
        s = ml_ctx_set_imatrix(r->ctx, r->imatrix, &err);
    return s ? cli_fail(r->o.model, s, &err) : 0;
}

static void close_run(run *r)
{
    ml_mli_close(r->imatrix);
    ml_outfile_abort(r->logits);
    ml_sampler_free(r->sampler);
    ml_ctx_free(r->ctx);
    ml_tok_free(r->tok);
    ml_mlt_close(r->mlt);
    ml_model_free(r->model);
    ml_mlb_close(r->mlb);
    free(r->ids);
    free(r->row);
    free(r->reply);
    for (size_t i = 0; i < r->o.n_stops; i++)
        free(r->o.stops[i]);
}

static int run_prompt(run *r)
{
    int e = prompt_ids(r);
    if (e)
        return e;
    r->n_prompt = r->n_ids;
    if (r->n_ids == 0)
        return cli_failf(NULL, ML_E_INVAL, "the prompt is empty (and adds no BOS)");
    if (r->n_ids > ml_ctx_n_ctx(r->ctx))
        return cli_failf(NULL, ML_E_INVAL,
                         "the prompt has %zu tokens; the context holds %u (raise --ctx, at most "
                         "max_seq %u)",
                         r->n_ids, ml_ctx_n_ctx(r->ctx), r->h->max_seq);
    if (r->o.logits && (e = cli_output_open(r->o.logits, &r->logits)))
        return e;
    double t0 = cli_seconds();
    e = run_eval(r, 0, r->n_ids);
    r->t_prompt = cli_seconds() - t0;
    if (!e)
        e = run_generate(r);
    if (!e && r->logits && !cli_stop_signal()) {
        ml_outfile *f = r->logits;
        r->logits = NULL; /* committed or freed: close_run must not abort it */
        e = cli_output_commit(r->o.logits, f);
    }
    return e;
}

int main(int argc, char **argv)
{
    run r;
    memset(&r, 0, sizeof r);
    cli_set_aliases(aliases, (int)(sizeof aliases / sizeof aliases[0]));
    cli_init(&cmd);
    parse(argc, argv, &r.o);
    /* Output files are removed if a signal stops the run (signals.h). */
    if (r.o.logits || r.o.imatrix || r.o.chat)
        cli_catch_signals();
    int e = open_model(&r);
    if (!e && r.o.imatrix)
        e = start_imatrix(&r);
    if (!e)
        e = r.o.ppl ? perplexity(&r) : r.o.chat ? chat(&r) : run_prompt(&r);
    if (!e && r.o.imatrix && !cli_stop_signal())
        e = write_imatrix(&r);
    if (cli_stop_signal()) {
        close_run(&r); /* removes the temporary --logits file */
        cli_die_by_signal();
    }
    if (!e && !r.timings_shown)
        run_timings(&r);
    close_run(&r);
    return cli_finish(e);
}
