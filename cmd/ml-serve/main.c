/* ml-serve - an OpenAI-compatible HTTP server for an .mlb model: options
 * and startup, then waiting for SIGINT or SIGTERM and shutting down
 * cleanly (no new connections; the running requests finish; a second
 * signal cuts them short, streams still ending with [DONE]). */
#include "cli.h"
#include "chat.h"
#include "server.h"
#include "text.h"

#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum {
    OPT_MODEL, OPT_TOK, OPT_HOST, OPT_PORT, OPT_THREADS, OPT_CTX, OPT_PARALLEL, OPT_API_KEY,
    OPT_TEMPLATE, OPT_TEMPLATE_FILE, OPT_TIMEOUT, OPT_MAX_BODY, OPT_QUEUE, OPT_CACHE, OPT_CACHE_K,
    OPT_CACHE_V, OPT_NO_MMAP, OPT_REASONING, OPT_EMBEDDINGS, OPT_POOLING,
    OPT_SPEC /* and the seven after it: CLI_SPEC_OPTS */
};

#define DEFAULT_HOST "127.0.0.1"
#define DEFAULT_PORT 8080
#define DEFAULT_CTX 4096
#define DEFAULT_PARALLEL 1
#define DEFAULT_TIMEOUT 30
#define DEFAULT_MAX_BODY 1048576
#define DEFAULT_QUEUE 64
/* Prompt tokens a slot evaluates per step: a long prompt holds the other
 * slots up by one such chunk at a time. */
#define PREFILL_CHUNK 128
/* Connections beyond the slots and the queue: /health, /v1/models and
 * the refusals (503) still get through when everything is busy. */
#define SPARE_CONNECTIONS 64

static const cli_opt opts[] = {
    {OPT_MODEL, 'm', "model", "FILE", "the model (.mlb); required"},
    {OPT_TOK, 'k', "tokenizer", "FILE", "the tokenizer (.mlt; default: beside the model)"},
    {OPT_HOST, 0, "host", "ADDR", "the address to listen on (default " DEFAULT_HOST ")"},
    {OPT_PORT, 0, "port", "N", "the port (default " CLI_STR(DEFAULT_PORT) "; 0: any free one)"},
    {OPT_THREADS, 't', "threads", "N", "threads of the context all slots share (default: the number of CPUs)"},
    {OPT_CACHE, 0, "cache-type", "TYPE", "KV cache keys and values: " CLI_CACHE_TYPES},
    {OPT_CACHE_K, 0, "cache-type-k", "TYPE", "KV cache keys only"},
    {OPT_CACHE_V, 0, "cache-type-v", "TYPE", "KV cache values only"},
    {OPT_NO_MMAP, 0, "no-mmap", NULL,
     "read the model into memory (huge pages) instead of mapping it: faster\n"
     "                           generation, a copy at load"},
    {OPT_CTX, 'c', "ctx", "N",
     "context positions of each slot (default " CLI_STR(DEFAULT_CTX) ", at most max_seq)"},
    {OPT_PARALLEL, 0, "parallel", "N",
     "slots: requests generated at once (default " CLI_STR(DEFAULT_PARALLEL) ")"},
    {OPT_QUEUE, 0, "queue", "N",
     "requests that may wait for a slot; more get 503 (default " CLI_STR(DEFAULT_QUEUE) ")"},
    {OPT_API_KEY, 0, "api-key", "KEY", "require 'Authorization: Bearer KEY' (401 without)"},
    {OPT_TEMPLATE, 0, "chat-template", "NAME",
     "the tokenizer's template NAME, or a built-in (chatml, llama3, gemma, ...)"},
    {OPT_TEMPLATE_FILE, 0, "chat-template-file", "FILE", "the chat template: a Jinja file"},
    {OPT_EMBEDDINGS, 0, "embeddings", NULL,
     "serve POST /v1/embeddings (a context of its own, --ctx positions)"},
    {OPT_POOLING, 0, "pooling", "TYPE",
     "how an embedding pools the positions: mean, cls or last\n"
     "                           (default: the model's, from its GGUF, else mean)"},
    {OPT_REASONING, 0, "reasoning-format", "FORMAT",
     "deepseek (default; also auto): a chat reply's <think> block goes to\n"
     "                           reasoning_content; none: it stays in the content"},
    CLI_SPEC_OPTS(OPT_SPEC),
    {OPT_TIMEOUT, 0, "timeout", "S",
     "drop a connection idle for S seconds (default " CLI_STR(DEFAULT_TIMEOUT) ")"},
    {OPT_MAX_BODY, 0, "max-body", "BYTES",
     "largest request body; more gets 413 (default " CLI_STR(DEFAULT_MAX_BODY) ")"},
};

static const cli_alias aliases[] = {
    {OPT_CTX, "ctx-size"},
    {OPT_PARALLEL, "np"},
    {OPT_CACHE_K, "-ctk"},
    {OPT_CACHE_V, "-ctv"},
    CLI_SPEC_ALIASES(OPT_SPEC),
};

static const cli cmd = {
    "ml-serve", "-m MODEL.mlb [options]",
    "Serve an .mlb model over HTTP with the OpenAI API: /v1/chat/completions,\n"
    "/v1/completions (streaming or not), /v1/embeddings, /v1/models, /metrics, /health,\n"
    "/tokenize, /detokenize.\n"
    "One line per request goes to standard error; SIGINT or SIGTERM stops the server.",
    "Example:\n"
    "  ml-serve -m smol.mlb --parallel 4 &\n"
    "  curl -s localhost:8080/v1/chat/completions -H 'Content-Type: application/json' \\\n"
    "    -d '{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"max_tokens\":32}'\n",
    opts, sizeof opts / sizeof opts[0],
};

/* --pooling, as llama-server spells its values. */
static ml_pooling pooling(const char *arg)
{
    if (!strcmp(arg, "mean"))
        return ML_POOL_MEAN;
    if (!strcmp(arg, "cls"))
        return ML_POOL_CLS;
    if (!strcmp(arg, "last"))
        return ML_POOL_LAST;
    cli_usage_error("--pooling: unknown pooling '%s' (expected mean, cls or last)", arg);
}

/* --reasoning-format, as llama-server spells its values. */
static int reasoning_format(const char *arg)
{
    if (!strcmp(arg, "none"))
        return 0;
    if (!strcmp(arg, "deepseek") || !strcmp(arg, "auto"))
        return 1;
    cli_usage_error("--reasoning-format: unknown format '%s' (expected deepseek, auto or none)",
                    arg);
}

static void parse(int argc, char **argv, srv_opts *o)
{
    const char *arg;
    int id, first;
    memset(o, 0, sizeof *o);
    o->host = DEFAULT_HOST, o->port = DEFAULT_PORT, o->parallel = DEFAULT_PARALLEL;
    o->timeout = DEFAULT_TIMEOUT, o->max_body = DEFAULT_MAX_BODY, o->queue = DEFAULT_QUEUE;
    o->threads = cli_n_cpus(256);
    o->reasoning = 1;
    while ((id = cli_next(argc, argv, &arg, &first)) != -1) {
        switch (id) {
        case OPT_MODEL: o->model = arg; break;
        case OPT_TOK: o->tok = arg; break;
        case OPT_HOST: o->host = arg; break;
        case OPT_PORT: o->port = cli_u64("--port", arg, 0, 65535); break;
        case OPT_THREADS: o->threads = cli_u64("--threads", arg, 1, 256); break;
        case OPT_CACHE: o->cache_k = o->cache_v = cli_cache_type("--cache-type", arg); break;
        case OPT_CACHE_K: o->cache_k = cli_cache_type("--cache-type-k", arg); break;
        case OPT_CACHE_V: o->cache_v = cli_cache_type("--cache-type-v", arg); break;
        case OPT_NO_MMAP: o->no_mmap = 1; break;
        case OPT_CTX: o->ctx = cli_u64("--ctx", arg, 2, ML_MLB_VOCAB_LIMIT); break;
        case OPT_PARALLEL: o->parallel = cli_u64("--parallel", arg, 1, 256); break;
        case OPT_QUEUE: o->queue = cli_u64("--queue", arg, 0, 65536); break;
        case OPT_API_KEY: o->api_key = arg; break;
        case OPT_TEMPLATE: o->chat_template = arg; break;
        case OPT_TEMPLATE_FILE: o->chat_template_file = arg; break;
        case OPT_REASONING: o->reasoning = reasoning_format(arg); break;
        case OPT_EMBEDDINGS: o->embeddings = 1; break;
        case OPT_POOLING: o->pooling = pooling(arg); break;
        case OPT_TIMEOUT: o->timeout = cli_u64("--timeout", arg, 1, 86400); break;
        case OPT_MAX_BODY: o->max_body = cli_u64("--max-body", arg, 64, 1u << 30); break;
        default: cli_spec_option(&o->spec, id, OPT_SPEC, arg); break;
        }
    }
    if (first < argc)
        cli_usage_error("unexpected operand '%s'", argv[first]);
    if (!o->model)
        cli_usage_error("no model given (-m MODEL.mlb)");
    if (o->chat_template && o->chat_template_file)
        cli_usage_error("--chat-template and --chat-template-file exclude each other");
    if (o->api_key && !*o->api_key)
        cli_usage_error("--api-key: an empty key");
    cli_spec_finish(&o->spec);
}

/* The model's file name without its directory and .mlb: its id. */
static void model_id(srv_server *s)
{
    const char *b = strrchr(s->o.model, '/');
    b = b ? b + 1 : s->o.model;
    snprintf(s->model_id, sizeof s->model_id, "%s", b);
    size_t n = strlen(s->model_id);
    if (n > 4 && strcmp(s->model_id + n - 4, ".mlb") == 0)
        s->model_id[n - 4] = 0;
}

/* The chat template, when there is one: named, from a file, or the
 * tokenizer's own.  Without one the chat endpoint refuses (400). */
static int open_template(srv_server *s)
{
    if (!s->o.chat_template && !s->o.chat_template_file &&
        !ml_mlt_find_template(s->mlt, "default", NULL)) {
        cli_warn(NULL, "the tokenizer has no chat template: /v1/chat/completions is refused "
                       "(give --chat-template NAME, one of %s, or --chat-template-file FILE)",
                 cli_chat_builtin_names());
        return 0;
    }
    const char *tok = s->o.tok ? s->o.tok : NULL;
    char *beside = tok ? NULL : cli_tokenizer_beside(s->o.model);
    int e = cli_chat_template(tok ? tok : beside, s->mlt, s->o.chat_template,
                              s->o.chat_template_file, &s->tmpl);
    free(beside);
    if (!e && s->tmpl)
        srv_tools_probe(s->tmpl, &s->tools);
    return e;
}

/* -md: the draft model, checked against the model and its tokenizer,
 * with a sequence per slot of the slots' positions (or the draft's
 * max_seq), the same cache types and --threads-draft threads (default:
 * --threads).  A draft that cannot take back its guesses: none. */
static int open_draft(srv_server *s, uint32_t n_ctx)
{
    const cli_spec *sp = &s->o.spec;
    cli_draft_params p = {.path = sp->draft, .no_mmap = s->o.no_mmap,
                          .model = ml_mlb_get_header(s->mlb), .mlt = s->mlt, .n_ctx = n_ctx,
                          .n_batch = PREFILL_CHUNK, .n_seq = (uint32_t)s->o.parallel,
                          .threads = (unsigned)(sp->threads_draft ? sp->threads_draft
                                                                  : s->o.threads),
                          .cache_k = s->o.cache_k, .cache_v = s->o.cache_v, .p_min = sp->p_min};
    int e = cli_draft_open(&p, &s->draft);
    if (!e && !s->draft)
        s->o.spec.type = 0;
    if (s->draft)
        cli_draft_describe(s->draft);
    return e;
}

static int open_model(srv_server *s)
{
    ml_error err;
    ml_status st = ml_mlb_open_ex(s->o.model, s->o.no_mmap ? ML_MLB_READ : 0, &s->mlb, &err);
    if (!st)
        st = ml_model_new(s->mlb, &s->model, &err);
    if (st)
        return cli_fail(s->o.model, st, &err);
    const ml_mlb_header *h = ml_mlb_get_header(s->mlb);
    int e = cli_cache_fits(s->o.model, h, s->o.cache_k, s->o.cache_v);
    if (!e)
        e = cli_open_tokenizer(s->o.tok, s->o.model, h->vocab, &s->mlt, &s->tok);
    if (!e)
        e = open_template(s);
    if (e)
        return e;
    uint32_t n_ctx = s->o.ctx ? (uint32_t)s->o.ctx
                              : h->max_seq < DEFAULT_CTX ? h->max_seq : DEFAULT_CTX;
    if (s->o.spec.draft && (e = open_draft(s, n_ctx)))
        return e;
    srv_sched_params p = {.n_slots = (unsigned)s->o.parallel, .max_queue = s->o.queue,
                          .n_ctx = n_ctx, .n_batch = PREFILL_CHUNK,
                          .threads = (unsigned)s->o.threads, .cache_k = s->o.cache_k,
                          .cache_v = s->o.cache_v, .spec = s->o.spec, .draft = s->draft};
    if ((st = srv_sched_new(s->model, s->mlt, &p, &s->sched, &err)))
        return cli_fail(s->o.model, st, &err);
    if (s->o.spec.type && !srv_sched_can_guess(s->sched))
        cli_warn(s->o.model, "%s: the model's linear-attention state cannot be taken back; "
                             "generating without speculation",
                 s->draft ? "--model-draft" : "--spec-type");
    ml_ctx_params ep = {.n_ctx = n_ctx, .n_batch = PREFILL_CHUNK, .n_threads = (unsigned)s->o.threads,
                        .cache_k = s->o.cache_k, .cache_v = s->o.cache_v};
    if (s->o.embeddings && (st = ml_ctx_new(s->model, &ep, &s->embed_ctx, &err)))
        return cli_fail(s->o.model, st, &err);
    /* --pooling, else the pooling the model's GGUF stated (mlb(5)), else
     * mean */
    if (!s->o.pooling)
        s->o.pooling = h->pooling ? (ml_pooling)h->pooling : ML_POOL_MEAN;
    return 0;
}

static void close_server(srv_server *s)
{
    srv_sched_free(s->sched, 1);
    cli_draft_close(s->draft); /* after the scheduler, which borrowed it */
    ml_ctx_free(s->embed_ctx);
    pthread_mutex_destroy(&s->embed_lock);
    ml_jinja_free(s->tmpl);
    ml_tok_free(s->tok);
    ml_mlt_close(s->mlt);
    ml_model_free(s->model);
    ml_mlb_close(s->mlb);
    pthread_mutex_destroy(&s->tok_lock);
}

/* Every thread started from here on inherits the blocked signals; only
 * sigwait in the main thread receives them. */
static void block_signals(sigset_t *set)
{
    sigemptyset(set);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, set, NULL);
}

/* After the first signal: a second one ends the running generations at
 * their next token (their streams still close with [DONE]). */
typedef struct cutter {
    srv_sched *sched;
    const sigset_t *set;
} cutter;

static void *cut_on_signal(void *arg)
{
    cutter *c = arg;
    int sig;
    sigwait(c->set, &sig);
    srv_sched_drain(c->sched, 1);
    return NULL;
}

/* Listens until a signal, then shuts down in order: no new connections,
 * the queue refused, the running requests finished (or, on a second
 * signal, cut short), the connections closed. */
static int serve(srv_server *s, const sigset_t *set)
{
    char why[256];
    http_server *h;
    http_params hp = {s->o.host, (unsigned)s->o.port, (unsigned)s->o.timeout,
                      (size_t)s->o.max_body,
                      (unsigned)(s->o.parallel + s->o.queue + SPARE_CONNECTIONS), s->o.api_key,
                      srv_routes, srv_n_routes, s};
    if (http_start(&hp, &h, why, sizeof why))
        return cli_failf(NULL, ML_E_IO, "%s", why);
    fprintf(stderr, "ml-serve: %s: listening on http://%s%s%s:%u/ (%u slots of %u positions)\n",
            s->model_id, strchr(s->o.host, ':') ? "[" : "", s->o.host,
            strchr(s->o.host, ':') ? "]" : "", http_port(h), (unsigned)s->o.parallel,
            srv_sched_n_ctx(s->sched));
    int sig;
    sigwait(set, &sig);
    fprintf(stderr, "ml-serve: %s: finishing the running requests\n", strsignal(sig));
    http_quiesce(h);
    srv_sched_drain(s->sched, 0);
    cutter c = {s->sched, set};
    pthread_t t;
    int started = pthread_create(&t, NULL, cut_on_signal, &c) == 0;
    http_drain(h);
    if (started) { /* wakes the watcher's sigwait; cutting then changes nothing */
        pthread_kill(t, SIGTERM);
        pthread_join(t, NULL);
    }
    http_stop(h);
    fprintf(stderr, "ml-serve: stopped\n");
    return 0;
}

int main(int argc, char **argv)
{
    srv_server s;
    memset(&s, 0, sizeof s);
    cli_set_aliases(aliases, (int)(sizeof aliases / sizeof aliases[0]));
    cli_init(&cmd);
    parse(argc, argv, &s.o);
    pthread_mutex_init(&s.tok_lock, NULL);
    pthread_mutex_init(&s.embed_lock, NULL);
    s.created = (int64_t)time(NULL);
    model_id(&s);
    sigset_t set;
    block_signals(&set);
    int e = open_model(&s);
    if (!e)
        e = serve(&s, &set);
    close_server(&s);
    return cli_finish(e);
}
