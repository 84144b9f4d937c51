/* ml-run - run an .mlb model: generate text from a prompt, write the logits
 * of every evaluated position, or score a text's perplexity the way
 * llama.cpp's llama-perplexity does.  This file reads the options and
 * dispatches; the steps of a run are session.c's, a chat is chat.c's. */
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
    OPT_CACHE, OPT_CACHE_K, OPT_CACHE_V, OPT_NO_MMAP, OPT_PRESENCE, OPT_FREQUENCY, OPT_BIAS,
    OPT_GRAMMAR, OPT_GRAMMAR_FILE, OPT_JSON_SCHEMA, OPT_JSON_SCHEMA_FILE,
    OPT_SPEC /* and the seven after it: CLI_SPEC_OPTS */
};

/* Defaults: parse() starts from them and --help shows them. */
#define DEFAULT_N_PREDICT 128
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
    {OPT_PRESENCE, 0, "presence-penalty", "P",
     "subtract P from tokens seen in the last --repeat-last-n (default 0: off)"},
    {OPT_FREQUENCY, 0, "frequency-penalty", "F",
     "subtract F times each token's count there (default 0: off)"},
    {OPT_BIAS, 'l', "logit-bias", "ID+B",
     "add B to token ID's logit, ID-B subtracts, ID-inf bans it (repeatable)"},
    {OPT_STOP, 'r', "stop", "TEXT", "end the text before TEXT, which is not printed (repeatable)"},
    {OPT_GRAMMAR, 0, "grammar", "TEXT",
     "generate only text the GBNF grammar TEXT allows (llama.cpp's notation)"},
    {OPT_GRAMMAR_FILE, 0, "grammar-file", "FILE", "the same with the grammar read from FILE"},
    {OPT_JSON_SCHEMA, 0, "json-schema", "SCHEMA",
     "generate only JSON the JSON Schema SCHEMA accepts (llama.cpp's keywords)"},
    {OPT_JSON_SCHEMA_FILE, 0, "json-schema-file", "FILE", "the same with the schema read from FILE"},
    CLI_SPEC_OPTS(OPT_SPEC),
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
    {OPT_CACHE_V, "-ctv"},       CLI_SPEC_ALIASES(OPT_SPEC),
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

/* --repeat-last-n: 0 turns the penalties off, as in llama.cpp. */
static void repeat_last(options *o, const char *arg)
{
    o->sp.repeat_last_n = (uint32_t)cli_u64("--repeat-last-n", arg, 0, ML_MLB_VOCAB_LIMIT);
    o->repeat_off = o->sp.repeat_last_n == 0;
}

/* --logit-bias ID+B or ID-B, as llama.cpp spells it (ID-inf: never drawn).
 * An id past the vocabulary is the generator's error, which knows it. */
static void add_bias(options *o, const char *arg)
{
    char *end;
    if (o->n_bias == MAX_BIAS)
        cli_usage_error("--logit-bias: at most %d", MAX_BIAS);
    errno = 0;
    unsigned long id = strtoul(arg, &end, 10);
    if (errno || end == arg || !isdigit((unsigned char)*arg) || id > UINT32_MAX ||
        (*end != '+' && *end != '-'))
        cli_usage_error("--logit-bias: '%s' is not TOKEN_ID+BIAS or TOKEN_ID-BIAS", arg);
    int minus = *end == '-';
    const char *num = end + 1;
    errno = 0;
    float b = strtof(num, &end);
    if (errno || end == num || *end || (!isdigit((unsigned char)*num) && strcmp(num, "inf")))
        cli_usage_error("--logit-bias: '%s' is not TOKEN_ID+BIAS or TOKEN_ID-BIAS", arg);
    if (isinf(b) && !minus)
        cli_usage_error("--logit-bias: '%s': only a ban (-inf) may be infinite", arg);
    o->bias[o->n_bias++] = (ml_logit_bias){(ml_token)id, minus ? -b : b};
}

/* The speculation options together: sizes in order, and only where tokens
 * are generated one after another. */
static void check_spec(options *o)
{
    if ((o->spec.type || o->spec.draft) && (o->ppl || o->logits || o->imatrix))
        cli_usage_error("%s speculates on generated tokens (not with --perplexity, --logits or "
                        "--imatrix, which see every evaluated position)",
                        o->spec.draft ? "--model-draft" : "--spec-type");
    cli_spec_finish(&o->spec);
}

static void parse(int argc, char **argv, options *o)
{
    const char *arg;
    int id, first;
    memset(o, 0, sizeof *o);
    o->n_predict = DEFAULT_N_PREDICT;
    o->threads = cli_n_cpus(UINT_MAX); /* the CPUs, even above --threads' 256 */
    o->sp = (ml_sampler_params){.temperature = DEFAULT_TEMP,
                                .top_k = DEFAULT_TOP_K,
                                .top_p = DEFAULT_TOP_P,
                                .min_p = DEFAULT_MIN_P,
                                .repeat_penalty = DEFAULT_REPEAT_PENALTY,
                                .repeat_last_n = DEFAULT_REPEAT_LAST};
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
        case OPT_PRESENCE: o->sp.presence_penalty = parse_float("--presence-penalty", arg, -2, 2); break;
        case OPT_FREQUENCY: o->sp.frequency_penalty = parse_float("--frequency-penalty", arg, -2, 2); break;
        case OPT_BIAS: add_bias(o, arg); break;
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
        case OPT_GRAMMAR: o->grammar = arg; break;
        case OPT_GRAMMAR_FILE: o->grammar_file = arg; break;
        case OPT_JSON_SCHEMA: o->json_schema = arg; break;
        case OPT_JSON_SCHEMA_FILE: o->json_schema_file = arg; break;
        default: cli_spec_option(&o->spec, id, OPT_SPEC, arg); break;
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
        o->sp.repeat_penalty = 1, o->sp.presence_penalty = o->sp.frequency_penalty = 0;
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
    /* one constraint on the text: a grammar or a schema, given once */
    const char *given[4], *constraint = NULL;
    int n_given = 0;
    if (o->grammar)
        given[n_given++] = "--grammar";
    if (o->grammar_file)
        given[n_given++] = "--grammar-file";
    if (o->json_schema)
        given[n_given++] = "--json-schema";
    if (o->json_schema_file)
        given[n_given++] = "--json-schema-file";
    if (n_given > 1)
        cli_usage_error("%s and %s exclude each other", given[0], given[1]);
    if (n_given)
        constraint = o->grammar || o->grammar_file ? "--grammar" : "--json-schema";
    if (constraint && (o->ids || o->ppl || o->logits || o->imatrix))
        cli_usage_error("%s works on generated text (not with --ids, --perplexity, "
                        "--logits or --imatrix)", constraint);
    check_spec(o);
    if (!o->seed_set)
        o->sp.seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
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
    if (!e)
        e = run_draft_prompt(r);
    r->t_prompt = cli_seconds() - t0;
    if (!e)
        e = run_generate(r);
    if (!e && r->logits && !cli_stop_signal()) {
        ml_outfile *f = r->logits;
        r->logits = NULL; /* committed or freed: run_close must not abort it */
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
    int e = run_open(&r);
    if (!e && r.o.imatrix)
        e = start_imatrix(&r);
    if (!e)
        e = r.o.ppl ? perplexity(&r) : r.o.chat ? chat(&r) : run_prompt(&r);
    if (!e && r.o.imatrix && !cli_stop_signal())
        e = write_imatrix(&r);
    if (cli_stop_signal()) {
        run_close(&r); /* removes the temporary --logits file */
        cli_die_by_signal();
    }
    if (!e && !r.timings_shown)
        run_timings(&r);
    run_close(&r);
    return cli_finish(e);
}
