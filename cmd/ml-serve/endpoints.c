/* endpoints.c - what each endpoint does: /health, /v1/models, /metrics, /tokenize,
 * /detokenize, and the two generations, whose requests become a prompt
 * of tokens (through the chat template for /v1/chat/completions) and a
 * job for the scheduler, answered whole or as a stream. */
#include "server.h"
#include "stream.h"
#include "think.h"
#include "tools.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int reply_error(http_req *r, srv_request *q, const srv_error *e)
{
    if (q)
        srv_request_free(q);
    return http_reply_error(r, e);
}

/* Reads the body as a request of `kind`; answers a bad one itself. */
static int read_request(srv_server *s, http_req *r, srv_kind kind, srv_request *q)
{
    size_t len;
    const char *body = http_body(r, &len);
    srv_error e;
    if (srv_request_parse(kind, body, len, ml_model_header(s->model)->vocab, q, &e) == 0)
        return 0;
    reply_error(r, q, &e);
    return -1;
}

static int on_health(void *app, http_req *r)
{
    (void)app;
    return http_reply_json(r, 200, resp_health());
}

static int on_metrics(void *app, http_req *r)
{
    srv_server *s = app;
    srv_stats st;
    srv_sched_stats(s->sched, &st);
    return http_reply_text(r, "text/plain; version=0.0.4; charset=utf-8", resp_metrics(&st));
}

static int on_models(void *app, http_req *r)
{
    srv_server *s = app;
    return http_reply_json(r, 200, resp_models(s->model_id, s->created));
}

/* llama-server's /tokenize: control tokens' text is matched (as its
 * parse_special), BOS only with "add_special". */
static int on_tokenize(void *app, http_req *r)
{
    srv_server *s = app;
    srv_request q;
    if (read_request(s, r, SRV_TOKENIZE, &q))
        return 1;
    ml_ids ids = {0};
    ml_error err;
    pthread_mutex_lock(&s->tok_lock);
    ml_status st = ml_tok_encode(s->tok, q.text, q.text_len,
                                 q.add_special ? ML_TOK_BOS_AUTO : ML_TOK_BOS_NO, &ids, &err);
    pthread_mutex_unlock(&s->tok_lock);
    srv_request_free(&q);
    int rc = http_reply_json(r, 200, st ? NULL : resp_tokens(ids.v, ids.n));
    ml_ids_free(&ids);
    return rc;
}

/* One input's ids: a string encoded as the tokenizer says (BOS too), or
 * token ids as they are. */
static ml_status input_ids(srv_server *s, const json_t *in, ml_ids *ids, ml_error *err)
{
    if (!json_is_string(in)) {
        size_t n = json_array_size(in);
        if (!(ids->v = malloc(n * sizeof *ids->v)))
            return ML_E_NOMEM;
        for (size_t i = 0; i < n; i++)
            ids->v[i] = (ml_token)json_integer_value(json_array_get(in, i));
        ids->n = ids->cap = n;
        return ML_OK;
    }
    pthread_mutex_lock(&s->tok_lock);
    ml_status st = ml_tok_encode(s->tok, json_string_value(in), json_string_length(in),
                                 ML_TOK_BOS_AUTO, ids, err);
    pthread_mutex_unlock(&s->tok_lock);
    return st;
}

/* Input i's embedding into v (dim floats), L2-normalized as llama-server
 * does; *n_tokens grows by its tokens.  0, or -1 with e filled. */
static int embed_one(srv_server *s, const json_t *in, float *v, size_t *n_tokens, srv_error *e)
{
    ml_ids ids = {0};
    ml_error err = {0};
    uint32_t dim = ml_model_header(s->model)->dim;
    ml_status st = input_ids(s, in, &ids, &err);
    if (!st && ids.n > ml_ctx_n_ctx(s->embed_ctx)) {
        ml_ids_free(&ids);
        return srv_fail(e, 400, "invalid_request_error", "input", "context_length_exceeded",
                        "An input has %zu tokens; the context holds %u (start ml-serve with a "
                        "larger --ctx).",
                        ids.n, ml_ctx_n_ctx(s->embed_ctx));
    }
    if (!st && ids.n == 0) {
        ml_ids_free(&ids);
        return srv_fail(e, 400, "invalid_request_error", "input", "invalid_value",
                        "An input has no tokens.");
    }
    if (!st)
        st = ml_ctx_embed(s->embed_ctx, ids.v, ids.n, s->o.pooling, v, &err);
    *n_tokens += ids.n;
    ml_ids_free(&ids);
    if (st)
        return srv_fail(e, st == ML_E_NOMEM ? 500 : 400, st == ML_E_NOMEM ? "server_error"
                                                                          : "invalid_request_error",
                        "input", NULL, "Embedding failed: %s",
                        err.msg[0] ? err.msg : ml_status_name(st));
    double sum = 0;
    for (uint32_t k = 0; k < dim; k++)
        sum += (double)v[k] * v[k];
    float scale = sum > 0 ? (float)(1.0 / sqrt(sum)) : 0.0f;
    for (uint32_t k = 0; k < dim; k++)
        v[k] *= scale;
    return 0;
}

static int on_embeddings(void *app, http_req *r)
{
    srv_server *s = app;
    srv_request q;
    srv_error e;
    if (read_request(s, r, SRV_EMBEDDINGS, &q))
        return 1;
    uint32_t dim = ml_model_header(s->model)->dim;
    size_t n = json_array_size(q.inputs), tokens = 0;
    float *vecs = NULL;
    int rc = -1;
    if (!s->embed_ctx)
        srv_fail(&e, 501, "invalid_request_error", NULL, "not_supported",
                 "This server does not serve embeddings: start ml-serve with --embeddings.");
    else if (q.dimensions >= 0 && q.dimensions != (int64_t)dim)
        srv_fail(&e, 400, "invalid_request_error", "dimensions", "invalid_value",
                 "Invalid value for 'dimensions': this model's embeddings have %u.", dim);
    else if (!(vecs = malloc(n * dim * sizeof *vecs)))
        srv_fail(&e, 500, "server_error", NULL, NULL, "Out of memory.");
    else {
        pthread_mutex_lock(&s->embed_lock);
        rc = 0;
        for (size_t i = 0; !rc && i < n; i++)
            rc = embed_one(s, json_array_get(q.inputs, i), vecs + i * dim, &tokens, &e);
        pthread_mutex_unlock(&s->embed_lock);
    }
    int out = rc ? reply_error(r, &q, &e)
                 : http_reply_json(r, 200, resp_embeddings(s->model_id, vecs, n, dim, q.base64,
                                                           tokens));
    if (!rc)
        http_note(r, "%zu inputs, %zu tokens", n, tokens);
    srv_request_free(&q);
    free(vecs);
    return out;
}

static int on_detokenize(void *app, http_req *r)
{
    srv_server *s = app;
    srv_request q;
    char *text = NULL;
    size_t len = 0;
    ml_error err;
    if (read_request(s, r, SRV_DETOKENIZE, &q))
        return 1;
    ml_status st = ml_tok_decode(s->mlt, q.tokens, q.n_tokens, 0, &text, &len, &err);
    srv_request_free(&q);
    int rc = http_reply_json(r, 200, st ? NULL : resp_content(text, len));
    free(text);
    return rc;
}

/* ------------------------------------------------------------------------
 * Prompts
 * ------------------------------------------------------------------------ */
/* A special token's piece for the template's bos_token / eos_token. */
static json_t *piece(const ml_mlt *t, ml_token id)
{
    ml_mlt_token k = id != ML_TOKEN_NONE ? ml_mlt_get_token(t, id) : (ml_mlt_token){NULL, 0, 0};
    json_t *v = k.len ? json_stringn((const char *)k.bytes, k.len) : NULL;
    return v ? v : json_string("");
}

/* The template's variables: the request's own (chat_template_kwargs,
 * reasoning_effort), then the messages, the assistant's turn opened. */
static char *chat_vars(const srv_server *s, const srv_request *q)
{
    const ml_mlt_header *h = ml_mlt_get_header(s->mlt);
    json_t *v = q->template_vars ? json_deep_copy(q->template_vars) : json_object();
    if (v && (srv_tools_vars(&s->tools, q, v) ||
              json_object_set_new(v, "add_generation_prompt", json_true()) ||
              json_object_set_new(v, "bos_token", piece(s->mlt, h->bos)) ||
              json_object_set_new(v, "eos_token", piece(s->mlt, h->eos)))) {
        json_decref(v);
        v = NULL;
    }
    char *text = v ? json_dumps(v, JSON_COMPACT) : NULL;
    json_decref(v);
    return text;
}

/* The messages through the template, encoded so that what the client
 * wrote stays text (no forged control tokens). */
static int chat_prompt(srv_server *s, srv_request *q, ml_ids *ids, srv_error *e)
{
    if (!s->tmpl)
        return srv_fail(e, 400, "invalid_request_error", "messages", "no_chat_template",
                        "The model's tokenizer has no chat template (start ml-serve with "
                        "--chat-template NAME or --chat-template-file FILE).");
    char *vars = chat_vars(s, q);
    ml_chat_prompt p = {0};
    ml_error err;
    ml_status st = vars ? ml_chat_render_json(s->tmpl, vars, strlen(vars), &p, &err) : ML_E_NOMEM;
    free(vars);
    if (!st) {
        q->think_open = srv_think_open(p.text, p.len);
        pthread_mutex_lock(&s->tok_lock);
        st = ml_chat_encode(s->tok, &p, ids, &err);
        pthread_mutex_unlock(&s->tok_lock);
    }
    ml_chat_prompt_free(&p);
    if (st == ML_E_NOMEM)
        return srv_fail(e, 500, "server_error", NULL, NULL, "Out of memory.");
    if (st)
        return srv_fail(e, 400, "invalid_request_error", "messages", "template_error",
                        "The chat template refused the messages: %s", err.msg);
    return 0;
}

static int completion_prompt(srv_server *s, const srv_prompt *q, ml_ids *ids, srv_error *e)
{
    ml_error err;
    if (!q->text) { /* token ids, as given */
        if (!(ids->v = malloc(q->n_tokens * sizeof *ids->v)))
            return srv_fail(e, 500, "server_error", NULL, NULL, "Out of memory.");
        memcpy(ids->v, q->tokens, q->n_tokens * sizeof *ids->v);
        ids->n = ids->cap = q->n_tokens;
        return 0;
    }
    pthread_mutex_lock(&s->tok_lock);
    ml_status st = ml_tok_encode(s->tok, q->text, q->text_len, ML_TOK_BOS_AUTO, ids, &err);
    pthread_mutex_unlock(&s->tok_lock);
    return st ? srv_fail(e, 500, "server_error", NULL, NULL, "Out of memory.") : 0;
}

/* A request with tools: the grammar its calls are held to, when they are
 * (tools.h), as the request's own. */
static int tools_grammar(srv_server *s, srv_request *q, srv_error *e)
{
    char *text = srv_tools_grammar(&s->tools, q, e);
    ml_error err;
    if (!text)
        return e->status ? -1 : 0;
    if (ml_grammar_parse(text, strlen(text), NULL, &q->grammar, &err)) {
        free(text);
        return srv_fail(e, 400, "invalid_request_error", "tools", "invalid_schema",
                        "Invalid value for 'tools': the calls' grammar: %s", err.msg);
    }
    q->grammar_own = text;
    q->grammar_text = text, q->grammar_len = strlen(text);
    return 0;
}

/* The prompts a request's choices continue: a chat's one, or a
 * completion's (each with n choices). */
static size_t n_prompts(const srv_request *q)
{
    return q->kind == SRV_CHAT ? 1 : q->n_prompts;
}

/* Prompt k's tokens, and the tokens to generate within the context. */
static int prepare(srv_server *s, srv_request *q, size_t k, ml_ids *ids, uint32_t *max,
                   srv_error *e)
{
    const char *param = q->kind == SRV_CHAT ? "messages" : "prompt";
    if (q->kind == SRV_CHAT ? chat_prompt(s, q, ids, e) || tools_grammar(s, q, e)
                            : completion_prompt(s, &q->prompts[k], ids, e))
        return -1;
    uint32_t n_ctx = srv_sched_n_ctx(s->sched);
    char which[32] = "The prompt"; /* of several, the one at fault */
    if (n_prompts(q) > 1)
        snprintf(which, sizeof which, "Prompt %zu", k);
    if (ids->n == 0)
        return srv_fail(e, 400, "invalid_request_error", param, "invalid_value",
                        "%s is empty (and the tokenizer adds no BOS).", which);
    if (ids->n >= n_ctx)
        return srv_fail(e, 400, "invalid_request_error", param, "context_length_exceeded",
                        "%s has %zu tokens; the context holds %u (start ml-serve with "
                        "a larger --ctx).",
                        which, ids->n, n_ctx);
    uint64_t room = n_ctx - ids->n;
    *max = q->max_tokens < 0 || (uint64_t)q->max_tokens > room ? (uint32_t)room
                                                               : (uint32_t)q->max_tokens;
    return 0;
}

/* ------------------------------------------------------------------------
 * Generation
 * ------------------------------------------------------------------------ */
static uint64_t mix(uint64_t x)
{
    x ^= x >> 33, x *= 0xff51afd7ed558ccdull, x ^= x >> 33;
    return x;
}

/* A job's own grammar and processor (each job outlives the request);
 * a completion's text continues its prompt.  0, or -1 (nothing kept). */
static int job_grammar(srv_server *s, const srv_request *q, srv_job_params *p)
{
    ml_error err;
    p->grammar = NULL, p->gproc = NULL;
    if (ml_grammar_parse(q->grammar_text, q->grammar_len, NULL, &p->grammar, &err) ||
        ml_grammar_proc_new(p->grammar, s->mlt, &p->gproc, &err)) {
        ml_grammar_free(p->grammar);
        p->grammar = NULL;
        return -1;
    }
    if (q->kind == SRV_COMPLETION)
        ml_grammar_proc_continue(p->gproc);
    return 0;
}

/* The request's jobs, prompt by prompt, n of each: choice i continues
 * prompt i / n and is drawn with seed + i (or a seed of its own), so
 * that it equals the one-prompt request with that seed; ids[k] and
 * max[k] are prompt k's.  *n counts those submitted; the status is the
 * first failure's. */
static srv_submit_status submit_jobs(srv_server *s, http_req *r, const srv_request *q,
                                     uint64_t nr, const ml_ids *ids, const uint32_t *max,
                                     srv_job **jobs, size_t *n)
{
    srv_job_params p = {.sp = q->sp, .stops = (const char *const *)q->stops,
                        .n_stops = q->n_stops, .ignore_eos = q->ignore_eos, .bias = q->bias,
                        .n_bias = q->n_bias, .continues = q->kind == SRV_COMPLETION,
                        .logprobs = q->logprobs, .top_logprobs = q->top_logprobs,
                        .score_prompt = q->echo && q->logprobs};
    srv_submit_status st = SRV_SUBMITTED;
    size_t total = n_prompts(q) * q->n;
    *n = 0;
    while (*n < total && st == SRV_SUBMITTED) {
        size_t i = *n, k = i / q->n;
        p.prompt = ids[k].v, p.n_prompt = ids[k].n, p.max_tokens = max[k];
        p.sp.seed = q->seed_set ? q->sp.seed + i /* a different draw for every request */
                                : mix((uint64_t)time(NULL) ^ (nr << 20) ^ (i << 8) ^
                                      (uint64_t)(uintptr_t)r);
        if (q->grammar && job_grammar(s, q, &p))
            return SRV_NOMEM; /* only memory fails: the grammar parsed once already */
        if ((st = srv_submit(s->sched, &p, &jobs[i])) == SRV_SUBMITTED)
            (*n)++;
    }
    return st;
}

/* The request's jobs (every prompt read first, so that a bad one refuses
 * the request before anything runs); answers the refusals itself (0
 * then: none was left submitted). */
static size_t submit(srv_server *s, http_req *r, srv_request *q, uint64_t nr, srv_job **jobs)
{
    ml_ids ids[SRV_MAX_PROMPTS];
    uint32_t max[SRV_MAX_PROMPTS];
    srv_error e;
    size_t k = 0, n = 0;
    int bad = 0;
    memset(ids, 0, sizeof ids);
    /* more choices than the slots and the queue hold could never run:
     * refused as the request's fault, not a 503's "try again" */
    const size_t cap = srv_sched_capacity(s->sched);
    if (n_prompts(q) * q->n > cap) {
        srv_fail(&e, 400, "invalid_request_error", q->n > 1 ? "n" : "prompt", "invalid_value",
                 "The request asks for %zu choices; this server holds at most %zu at once "
                 "(--parallel plus --queue).",
                 n_prompts(q) * q->n, cap);
        reply_error(r, q, &e);
        return 0;
    }
    for (; k < n_prompts(q) && !bad; k++)
        bad = prepare(s, q, k, &ids[k], &max[k], &e);
    srv_submit_status st = bad ? SRV_SUBMITTED : submit_jobs(s, r, q, nr, ids, max, jobs, &n);
    for (size_t j = 0; j < k; j++)
        ml_ids_free(&ids[j]);
    if (bad) {
        reply_error(r, q, &e);
        return 0;
    }
    if (st == SRV_SUBMITTED)
        return n;
    for (size_t i = 0; i < n; i++) { /* the choices already submitted */
        srv_job_cancel(jobs[i]);
        srv_job_release(jobs[i]);
    }
    if (st == SRV_NOMEM)
        srv_fail(&e, 500, "server_error", NULL, NULL, "Out of memory.");
    else
        srv_fail(&e, 503, "server_error", NULL, st == SRV_QUEUE_FULL ? "queue_full" : "unavailable",
                 st == SRV_QUEUE_FULL ? "Every slot is busy and the queue is full; try again."
                                      : "The server is shutting down.");
    reply_error(r, q, &e);
    return 0;
}

/* Waits for the whole text; NULL when the client left (the job is then
 * cancelled). */
static char *wait_whole(http_req *r, srv_job *job, size_t *len, srv_progress *p)
{
    ml_buf all = {0};
    for (;;) {
        char *text;
        size_t n;
        srv_job_wait(job, all.len, SRV_POLL_MS, &text, &n, p);
        if (text) {
            ml_buf_append(&all, text, n); /* failing, all.len stays: asked for again */
            free(text);
        }
        if (p->done) {
            *len = all.len;
            return ml_buf_reserve(&all, 0) ? NULL : all.data; /* memory even for "" */
        }
        if (!text && http_client_gone(r)) {
            srv_job_cancel(job);
            ml_buf_free(&all);
            return NULL;
        }
    }
}

/* A completion's echo ec before choice text[0..len) (a new *text) and,
 * with logprobs, its prompt tokens' before the generated ones' in *lp
 * (left as they are when a shutdown cut the prompt short).  -1 when
 * memory ran out (*lp then NULL). */
static int add_echo(srv_job *job, const resp_meta *m, const resp_echo *ec, char **text,
                    size_t *len, json_t **lp)
{
    char *t = malloc(ec->len + *len + 1);
    if (!t)
        return -1;
    memcpy(t, ec->text, ec->len);
    memcpy(t + ec->len, *text, *len);
    t[ec->len + *len] = '\0';
    free(*text);
    *text = t, *len += ec->len;
    srv_tokprob *pp = NULL;
    size_t n = m->logprobs ? srv_job_prompt_logprobs(job, &pp) : 0;
    json_t *a = n ? resp_prompt_logprobs(m->mlt, pp, n, ec->len) : NULL;
    free(pp);
    if (!n)
        return 0;
    int bad = resp_logprobs_join(a, *lp);
    *lp = bad ? (json_decref(a), NULL) : a;
    return bad ? -1 : 0;
}

/* The text a completion's echo gives back for prompt q: as written, or
 * its token ids decoded (BOS and EOS left out, as a written prompt has
 * none).  0, or -1 with e filled. */
static int echo_text(const srv_server *s, const srv_prompt *q, resp_echo *out, srv_error *e)
{
    ml_error err;
    if (!q->text && !ml_tok_decode(s->mlt, q->tokens, q->n_tokens, ML_TOK_SKIP_BOS_EOS,
                                   &out->text, &out->len, &err))
        return 0;
    if (q->text && (out->text = malloc(q->text_len + 1))) {
        memcpy(out->text, q->text, q->text_len + 1);
        out->len = q->text_len;
        return 0;
    }
    return srv_fail(e, 500, "server_error", NULL, NULL, "Out of memory.");
}

/* Every prompt's echo in a new *out (NULL without echo).  0, or -1 with e
 * filled. */
static int echo_texts(const srv_server *s, const srv_request *q, resp_echo **out, srv_error *e)
{
    *out = NULL;
    if (!q->echo)
        return 0;
    if (!(*out = calloc(q->n_prompts, sizeof **out)))
        return srv_fail(e, 500, "server_error", NULL, NULL, "Out of memory.");
    for (size_t k = 0; k < q->n_prompts; k++)
        if (echo_text(s, &q->prompts[k], &(*out)[k], e)) {
            resp_echo_free(*out, q->n_prompts);
            *out = NULL;
            return -1;
        }
    return 0;
}

/* Choice i: its whole text as a choice object in *choice (NULL when
 * memory ran out); 0 when the client left, -1 when the job failed (*p
 * says how), 1 when done. */
static int whole_choice(http_req *r, srv_job *job, const resp_meta *m, unsigned i,
                        srv_progress *p, json_t **choice)
{
    size_t len;
    char *text = wait_whole(r, job, &len, p);
    srv_tokprob *probs = NULL;
    size_t n_probs = text && m->logprobs ? srv_job_logprobs(job, 0, &probs) : 0;
    *choice = NULL;
    if (!text)
        return 0;
    if (p->finish) {
        const resp_echo *ec = resp_echo_of(m, i);
        json_t *lp = m->logprobs ? resp_logprobs(m->kind, m->mlt, probs, n_probs,
                                                 resp_echo_len(m, i))
                                 : NULL;
        srv_think t;
        srv_tool_split ts;
        ml_buf reasoning = {0}, said = {0}, content = {0};
        json_t *calls = NULL;
        srv_think_init(&t, m->think, m->think_open);
        srv_tool_split_init(&ts, m->tool_format, m->tools, m->tool_seed ^ i);
        int ok = (!ec || !add_echo(job, m, ec, &text, &len, &lp)) &&
                 !srv_think_put(&t, text, len, &reasoning, &said) &&
                 !srv_think_end(&t, &reasoning, &said) &&
                 !srv_tool_split_put(&ts, said.data, said.len, &content, &reasoning) &&
                 !srv_tool_split_end(&ts, &content, &reasoning, &calls);
        int reasoned = t.reasoned || reasoning.len;
        *choice = !ok || (m->logprobs && !lp)
                      ? (json_decref(lp), NULL)
                      : resp_choice(m, i, content.data, content.len, reasoned ? &reasoning : NULL,
                                    lp, p->finish);
        if (calls)
            *choice = resp_tool_calls(*choice, calls);
        srv_think_free(&t);
        srv_tool_split_free(&ts);
        ml_buf_free(&reasoning), ml_buf_free(&said), ml_buf_free(&content);
    }
    free(probs);
    free(text);
    return p->finish ? 1 : -1;
}

static int reply_failed(http_req *r, const srv_progress *p)
{
    srv_error e;
    int busy = p->status == ML_E_UNSUPPORTED;
    srv_fail(&e, busy ? 503 : 500, "server_error", NULL, busy ? "unavailable" : NULL,
             "Generation failed: %s", p->msg[0] ? p->msg : ml_status_name(p->status));
    return http_reply_error(r, &e);
}

/* The n choices, whole, once all are done; usage counts each prompt once
 * and every choice's tokens. */
static int reply_whole(http_req *r, srv_job **jobs, size_t n, const resp_meta *m)
{
    json_t *choices = json_array();
    srv_progress p;
    resp_usage u = {0};
    int rc = 1;
    size_t i = 0;
    for (; i < n && rc == 1; i++) {
        json_t *c;
        rc = whole_choice(r, jobs[i], m, (unsigned)i, &p, &c);
        srv_job_release(jobs[i]);
        if (rc == 1 && (!c || json_array_append_new(choices, c)))
            json_decref(choices), choices = NULL;
        if (rc == 1)
            resp_usage_add(&u, m, i, &p);
    }
    if (rc == 1)
        srv_note_usage(r, &u);
    else if (rc == 0) /* the choice the client left during */
        srv_note_job(r, &p);
    for (size_t k = i; k < n; k++) { /* after a failure or a client gone */
        srv_job_cancel(jobs[k]);
        srv_job_release(jobs[k]);
    }
    http_set_waiting(r, 0);
    if (rc == 0) {
        json_decref(choices);
        return 0; /* MHD_NO: the connection is closed */
    }
    if (rc < 0) {
        json_decref(choices);
        srv_note_job(r, &p);
        return reply_failed(r, &p);
    }
    return http_reply_json(r, 200, resp_completion(m, choices, &u));
}

static int generate(srv_server *s, http_req *r, srv_kind kind)
{
    srv_request q;
    if (read_request(s, r, kind, &q))
        return 1;
    uint64_t nr = __atomic_add_fetch(&s->n_requests, 1, __ATOMIC_RELAXED);
    srv_job *jobs[SRV_MAX_CHOICES];
    resp_echo *echo = NULL;
    size_t n_echo = q.n_prompts, n = 0;
    srv_error e;
    if (echo_texts(s, &q, &echo, &e))
        return reply_error(r, &q, &e);
    if (!(n = submit(s, r, &q, nr, jobs))) {
        srv_request_free(&q);
        resp_echo_free(echo, n_echo);
        return 1;
    }
    char id[48];
    snprintf(id, sizeof id, "%s-%016llx", kind == SRV_CHAT ? "chatcmpl" : "cmpl",
             (unsigned long long)mix(nr ^ ((uint64_t)s->created << 24)));
    resp_meta m = {.kind = kind, .id = id, .created = (int64_t)time(NULL), .model = s->model_id,
                   .logprobs = q.logprobs, .mlt = s->mlt,
                   .think = kind == SRV_CHAT && s->o.reasoning, .think_open = q.think_open,
                   .tools = kind == SRV_CHAT && srv_tools_active(&s->tools, &q, s->o.reasoning),
                   .tool_format = (int)s->tools.format, .tool_seed = mix(nr ^ 0x7001),
                   .echo = echo, .n_each = q.n};
    int stream = q.stream, usage = q.include_usage;
    srv_request_free(&q);
    http_set_waiting(r, 1);
    if (stream) /* the stream outlives this call: it takes the echoes */
        return srv_stream_reply(r, jobs, n, &m, echo, n_echo, usage);
    int rc = reply_whole(r, jobs, n, &m);
    resp_echo_free(echo, n_echo);
    return rc;
}

static int on_chat(void *app, http_req *r)
{
    return generate(app, r, SRV_CHAT);
}

static int on_completion(void *app, http_req *r)
{
    return generate(app, r, SRV_COMPLETION);
}

const http_route srv_routes[] = {
    {"GET", "/health", on_health, 1},
    {"GET", "/v1/models", on_models, 0},
    {"GET", "/metrics", on_metrics, 0},
    {"POST", "/v1/embeddings", on_embeddings, 0},
    {"POST", "/v1/chat/completions", on_chat, 0},
    {"POST", "/v1/completions", on_completion, 0},
    {"POST", "/tokenize", on_tokenize, 0},
    {"POST", "/detokenize", on_detokenize, 0},
};
const size_t srv_n_routes = sizeof srv_routes / sizeof srv_routes[0];
