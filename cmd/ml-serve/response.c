/* response.c - the answers' JSON (response.h), built with jansson so that
 * every string is escaped as JSON requires. */
#include "response.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The text of v, which is released; NULL if v is NULL or out of memory. */
static char *dump(json_t *v)
{
    char *s = v ? json_dumps(v, JSON_COMPACT) : NULL;
    json_decref(v);
    return s;
}

/* "data: JSON\n\n", which is released. */
static char *event(json_t *v)
{
    char *s = dump(v), *out = NULL;
    if (s) {
        size_t n = strlen(s) + 9;
        if ((out = malloc(n)))
            snprintf(out, n, "data: %s\n\n", s);
        free(s);
    }
    return out;
}

/* A string that may be NULL, as JSON null. */
static json_t *str_or_null(const char *s)
{
    return s ? json_string(s) : json_null();
}

/* The generated text is UTF-8 (the decoder replaces what is not), so
 * json_stringn only fails when memory runs out. */
static json_t *text_value(const char *text, size_t len)
{
    return json_stringn(text ? text : "", text ? len : 0);
}

static json_t *error_object(const srv_error *e)
{
    return json_pack("{s:{s:s,s:s,s:o,s:o}}", "error", "message", e->message, "type",
                     e->type ? e->type : "invalid_request_error", "param",
                     str_or_null(e->param), "code", str_or_null(e->code));
}

char *resp_error(const srv_error *e)
{
    return dump(error_object(e));
}

char *resp_stream_error(const srv_error *e)
{
    return event(error_object(e));
}

char *resp_health(void)
{
    return dump(json_pack("{s:s}", "status", "ok"));
}

/* One metric: its help and type lines, then its value. */
static int metric(FILE *f, const char *name, const char *type, const char *help, double v)
{
    return fprintf(f, "# HELP llamacpp:%s %s\n# TYPE llamacpp:%s %s\nllamacpp:%s %.17g\n", name,
                   help, name, type, name, v) < 0;
}

static double ratio(double a, double b)
{
    return b > 0 ? a / b : 0;
}

char *resp_metrics(const srv_stats *st)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return NULL;
    int bad = metric(f, "prompt_tokens_total", "counter", "Number of prompt tokens processed.",
                     (double)st->prompt_tokens) ||
              metric(f, "prompt_seconds_total", "counter", "Prompt process time",
                     st->prompt_seconds) ||
              metric(f, "tokens_predicted_total", "counter",
                     "Number of generation tokens processed.", (double)st->tokens_predicted) ||
              metric(f, "tokens_predicted_seconds_total", "counter", "Predict process time",
                     st->predicted_seconds) ||
              metric(f, "n_decode_total", "counter", "Total number of llama_decode() calls",
                     (double)st->n_decode) ||
              metric(f, "n_busy_slots_per_decode", "counter",
                     "Average number of busy slots per llama_decode() call",
                     ratio((double)st->busy_slots, (double)st->n_decode)) ||
              metric(f, "prompt_tokens_seconds", "gauge", "Average prompt throughput in tokens/s.",
                     ratio((double)st->prompt_tokens, st->prompt_seconds)) ||
              metric(f, "predicted_tokens_seconds", "gauge",
                     "Average generation throughput in tokens/s.",
                     ratio((double)st->tokens_predicted, st->predicted_seconds)) ||
              metric(f, "kv_cache_usage_ratio", "gauge", "KV-cache usage. 1 means 100 percent usage.",
                     ratio((double)st->kv_tokens, (double)st->kv_size)) ||
              metric(f, "kv_cache_tokens", "gauge", "KV-cache tokens.", (double)st->kv_tokens) ||
              metric(f, "requests_processing", "gauge", "Number of requests processing.",
                     st->processing) ||
              metric(f, "requests_deferred", "gauge", "Number of requests deferred.",
                     (double)st->deferred) ||
              metric(f, "draft_tokens_total", "counter",
                     "Tokens guessed by speculative decoding (--spec-type).",
                     (double)st->drafted) ||
              metric(f, "draft_tokens_accepted_total", "counter",
                     "Guessed tokens that were kept.", (double)st->accepted);
    if (fclose(f) || bad) {
        free(text);
        return NULL;
    }
    return text;
}

/* The base64 of n bytes (RFC 4648, with padding). */
static json_t *base64(const uint8_t *b, size_t n)
{
    static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char *s = malloc((n + 2) / 3 * 4 + 1), *p = s;
    if (!s)
        return NULL;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)b[i] << 16 | (i + 1 < n ? (uint32_t)b[i + 1] << 8 : 0) |
                     (i + 2 < n ? b[i + 2] : 0);
        *p++ = abc[v >> 18 & 63];
        *p++ = abc[v >> 12 & 63];
        *p++ = i + 1 < n ? abc[v >> 6 & 63] : '=';
        *p++ = i + 2 < n ? abc[v & 63] : '=';
    }
    json_t *j = json_stringn(s, (size_t)(p - s));
    free(s);
    return j;
}

/* One embedding as OpenAI sends it. */
static json_t *embedding(const float *v, uint32_t dim, int b64)
{
    if (b64) {
        uint8_t *bytes = malloc((size_t)dim * 4);
        for (uint32_t k = 0; bytes && k < dim; k++) {
            uint32_t u;
            memcpy(&u, &v[k], 4);
            for (int j = 0; j < 4; j++)
                bytes[4 * k + j] = (uint8_t)(u >> (8 * j));
        }
        json_t *j = bytes ? base64(bytes, (size_t)dim * 4) : NULL;
        free(bytes);
        return j;
    }
    json_t *a = json_array();
    for (uint32_t k = 0; a && k < dim; k++)
        if (json_array_append_new(a, json_real(v[k]))) {
            json_decref(a);
            a = NULL;
        }
    return a;
}

char *resp_embeddings(const char *model, const float *vecs, size_t n, uint32_t dim, int base64,
                      size_t prompt_tokens)
{
    json_t *data = json_array();
    for (size_t i = 0; data && i < n; i++)
        if (json_array_append_new(data, json_pack("{s:s,s:I,s:o}", "object", "embedding", "index",
                                                  (json_int_t)i, "embedding",
                                                  embedding(vecs + i * dim, dim, base64)))) {
            json_decref(data);
            data = NULL;
        }
    return data ? dump(json_pack("{s:s,s:o,s:s,s:{s:I,s:I}}", "object", "list", "data", data,
                                 "model", model, "usage", "prompt_tokens",
                                 (json_int_t)prompt_tokens, "total_tokens",
                                 (json_int_t)prompt_tokens))
                : NULL;
}

char *resp_models(const char *model, int64_t created)
{
    return dump(json_pack("{s:s,s:[{s:s,s:s,s:I,s:s}]}", "object", "list", "data", "id", model,
                          "object", "model", "created", (json_int_t)created, "owned_by",
                          "mlcore"));
}

char *resp_tokens(const ml_token *ids, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++)
        if (json_array_append_new(a, json_integer(ids[i]))) {
            json_decref(a);
            a = NULL;
        }
    return a ? dump(json_pack("{s:o}", "tokens", a)) : NULL;
}

char *resp_content(const char *text, size_t len)
{
    return dump(json_pack("{s:o}", "content", text_value(text, len)));
}

void resp_echo_free(resp_echo *echo, size_t n)
{
    for (size_t k = 0; echo && k < n; k++)
        free(echo[k].text);
    free(echo);
}

void resp_usage_add(resp_usage *u, const resp_meta *m, size_t i, const srv_progress *p)
{
    if (i % m->n_each == 0)
        u->prompt_tokens += p->n_prompt, u->n_cached += p->n_cached;
    u->completion_tokens += p->n_gen;
}

static json_t *usage_object(const resp_usage *u)
{
    return json_pack("{s:I,s:I,s:I}", "prompt_tokens", (json_int_t)u->prompt_tokens,
                     "completion_tokens", (json_int_t)u->completion_tokens, "total_tokens",
                     (json_int_t)(u->prompt_tokens + u->completion_tokens));
}

/* The members every object of a request starts with. */
static json_t *head(const resp_meta *m, const char *object)
{
    return json_pack("{s:s,s:s,s:I,s:s,s:s}", "id", m->id, "object", object, "created",
                     (json_int_t)m->created, "model", m->model, "system_fingerprint", "mlcore");
}

static json_t *with_choices(json_t *o, json_t *choice)
{
    if (!o || !choice || json_object_set_new(o, "choices", json_pack("[o]", choice))) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* A token's text, bytes and log-probability: OpenAI's token object. */
static json_t *token_object(const ml_mlt *t, ml_token id, float logprob, json_t **text_out)
{
    char *s = NULL;
    size_t len = 0;
    ml_error err;
    if (ml_tok_decode(t, &id, 1, ML_TOK_KEEP_SPACE, &s, &len, &err))
        return NULL;
    json_t *bytes = json_array();
    for (size_t i = 0; bytes && i < len; i++)
        if (json_array_append_new(bytes, json_integer((uint8_t)s[i]))) {
            json_decref(bytes);
            bytes = NULL;
        }
    json_t *o = bytes ? json_pack("{s:s%,s:f,s:o}", "token", s, len, "logprob", (double)logprob,
                                  "bytes", bytes)
                      : NULL;
    if (text_out)
        *text_out = o ? json_stringn(s, len) : NULL;
    free(s);
    return o;
}

/* A chat's logprobs entry for p: the token and its top alternatives. */
static json_t *chat_entry(const ml_mlt *t, const srv_tokprob *p)
{
    json_t *o = token_object(t, p->id, p->logprob, NULL), *top = json_array();
    for (unsigned k = 0; o && top && k < p->n_top; k++)
        if (json_array_append_new(top, token_object(t, p->top[k], p->top_logprob[k], NULL))) {
            json_decref(top);
            top = NULL;
        }
    if (!o || !top || json_object_set_new(o, "top_logprobs", top)) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static json_t *chat_logprobs(const ml_mlt *t, const srv_tokprob *p, size_t n)
{
    json_t *content = json_array();
    for (size_t i = 0; content && i < n; i++)
        if (json_array_append_new(content, chat_entry(t, &p[i]))) {
            json_decref(content);
            content = NULL;
        }
    return content ? json_pack("{s:o,s:n}", "content", content, "refusal") : NULL;
}

/* Adds {id's text: logprob} to map m unless a token of that text is
 * there already; -1 when memory ran out. */
static int put_top(json_t *m, const ml_mlt *t, ml_token id, float logprob)
{
    json_t *text = NULL, *o = token_object(t, id, logprob, &text);
    int bad = !o || !text ||
              (!json_object_get(m, json_string_value(text)) &&
               json_object_set_new(m, json_string_value(text), json_real(logprob)));
    json_decref(o), json_decref(text);
    return bad ? -1 : 0;
}

/* A completion's top_logprobs entry: {token text: logprob}, the most
 * likely tokens' and then the token's own when it is not among them: the
 * legacy API "will always return the logprob of the sampled token", so
 * up to logprobs + 1 entries (as vLLM does; a chat's top_logprobs stay
 * exactly top_logprobs long, as OpenAI's chat API defines them). */
static json_t *top_map(const ml_mlt *t, const srv_tokprob *p)
{
    json_t *m = json_object();
    int among = 0;
    for (unsigned k = 0; m && k < p->n_top; k++) {
        among |= p->top[k] == p->id;
        if (put_top(m, t, p->top[k], p->top_logprob[k]))
            json_decref(m), m = NULL;
    }
    if (m && !among && put_top(m, t, p->id, p->logprob))
        json_decref(m), m = NULL;
    return m;
}

static json_t *completion_logprobs(const ml_mlt *t, const srv_tokprob *p, size_t n,
                                   size_t offset)
{
    json_t *o = json_pack("{s:[],s:[],s:[],s:[]}", "tokens", "token_logprobs", "top_logprobs",
                          "text_offset");
    for (size_t i = 0; o && i < n; i++) {
        int none = isnan(p[i].logprob); /* an echoed prompt's first token: no context */
        json_t *text = NULL, *tok = token_object(t, p[i].id, none ? 0 : p[i].logprob, &text);
        int bad = !tok || !text ||
                  json_array_append(json_object_get(o, "tokens"), text) ||
                  json_array_append_new(json_object_get(o, "token_logprobs"),
                                        none ? json_null() : json_real(p[i].logprob)) ||
                  json_array_append_new(json_object_get(o, "top_logprobs"),
                                        none ? json_null() : top_map(t, &p[i])) ||
                  json_array_append_new(json_object_get(o, "text_offset"),
                                        json_integer((json_int_t)offset));
        if (!bad)
            offset += json_string_length(text);
        json_decref(tok), json_decref(text);
        if (bad) {
            json_decref(o);
            o = NULL;
        }
    }
    return o;
}

json_t *resp_logprobs(srv_kind kind, const ml_mlt *t, const srv_tokprob *p, size_t n,
                      size_t offset)
{
    return kind == SRV_CHAT ? chat_logprobs(t, p, n) : completion_logprobs(t, p, n, offset);
}

json_t *resp_prompt_logprobs(const ml_mlt *t, const srv_tokprob *p, size_t n, size_t len)
{
    json_t *o = completion_logprobs(t, p, n, 0), *offs = json_object_get(o, "text_offset");
    json_t *toks = json_object_get(o, "tokens");
    if (!o || !n)
        return o;
    size_t end = (size_t)json_integer_value(json_array_get(offs, n - 1)) +
                 json_string_length(json_array_get(toks, n - 1));
    size_t shift = end > len ? end - len : 0;
    for (size_t i = 0; i < n; i++) {
        size_t at = (size_t)json_integer_value(json_array_get(offs, i));
        json_integer_set(json_array_get(offs, i), (json_int_t)(at > shift ? at - shift : 0));
    }
    return o;
}

int resp_logprobs_join(json_t *a, json_t *b)
{
    static const char *const keys[] = {"tokens", "token_logprobs", "top_logprobs", "text_offset"};
    int bad = !a || !b;
    for (size_t k = 0; !bad && k < sizeof keys / sizeof *keys; k++)
        bad = json_array_extend(json_object_get(a, keys[k]), json_object_get(b, keys[k]));
    json_decref(b);
    return bad ? -1 : 0;
}

json_t *resp_choice(const resp_meta *m, unsigned index, const char *text, size_t len,
                    const ml_buf *reasoning, json_t *logprobs, const char *finish)
{
    json_t *lp = logprobs ? logprobs : json_null();
    if (m->kind != SRV_CHAT)
        return json_pack("{s:i,s:o,s:o,s:s}", "index", (int)index, "text", text_value(text, len),
                         "logprobs", lp, "finish_reason", finish);
    json_t *msg = json_pack("{s:s,s:o}", "role", "assistant", "content", text_value(text, len));
    if (msg && reasoning &&
        json_object_set_new(msg, "reasoning_content", text_value(reasoning->data, reasoning->len))) {
        json_decref(msg);
        msg = NULL;
    }
    return json_pack("{s:i,s:o,s:o,s:s}", "index", (int)index, "message", msg, "logprobs", lp,
                     "finish_reason", finish);
}

json_t *resp_tool_calls(json_t *choice, json_t *calls)
{
    json_t *msg = json_object_get(choice, "message");
    const char *content = json_string_value(json_object_get(msg, "content"));
    const char *why = json_string_value(json_object_get(choice, "finish_reason"));
    if (!choice || !calls || !msg)
        goto fail;
    if ((content && !*content && json_object_set_new(msg, "content", json_null())) ||
        json_object_set_new(msg, "tool_calls", calls) ||
        (why && !strcmp(why, "stop") &&
         json_object_set_new(choice, "finish_reason", json_string("tool_calls"))))
        goto fail_choice;
    return choice;
fail:
    json_decref(calls);
fail_choice:
    json_decref(choice);
    return NULL;
}

char *resp_tool_chunk(const resp_meta *m, unsigned index, json_t *calls)
{
    json_t *list = json_array(), *c;
    size_t k;
    json_array_foreach(calls, k, c) {
        json_t *d = json_deep_copy(c);
        if (!d || json_object_set_new(d, "index", json_integer((json_int_t)k)) ||
            json_array_append_new(list, d)) {
            json_decref(list);
            list = NULL;
            break;
        }
    }
    json_decref(calls);
    json_t *choice = list ? json_pack("{s:i,s:{s:o},s:n,s:n}", "index", (int)index, "delta",
                                      "tool_calls", list, "logprobs", "finish_reason")
                          : NULL;
    return event(with_choices(head(m, "chat.completion.chunk"), choice));
}

char *resp_reasoning_chunk(const resp_meta *m, unsigned index, const char *text, size_t len,
                           json_t *logprobs)
{
    json_t *choice = json_pack("{s:i,s:{s:o},s:o,s:n}", "index", (int)index, "delta",
                               "reasoning_content", text_value(text, len), "logprobs",
                               logprobs ? logprobs : json_null(), "finish_reason");
    return event(with_choices(head(m, "chat.completion.chunk"), choice));
}

char *resp_completion(const resp_meta *m, json_t *choices, const resp_usage *u)
{
    json_t *o = head(m, m->kind == SRV_CHAT ? "chat.completion" : "text_completion");
    if (!o || !choices || json_object_set(o, "choices", choices) ||
        json_object_set_new(o, "usage", usage_object(u))) {
        json_decref(o);
        o = NULL;
    }
    json_decref(choices);
    return dump(o);
}

char *resp_chunk(const resp_meta *m, unsigned index, int first, const char *text, size_t len,
                 json_t *logprobs, const char *finish)
{
    json_t *choice;
    json_t *why = str_or_null(finish);
    json_t *lp = logprobs ? logprobs : json_null();
    if (m->kind == SRV_CHAT) {
        json_t *delta = finish  ? json_object()
                        : first ? json_pack("{s:s,s:s}", "role", "assistant", "content", "")
                                : json_pack("{s:o}", "content", text_value(text, len));
        choice = json_pack("{s:i,s:o,s:o,s:o}", "index", (int)index, "delta", delta, "logprobs",
                           lp, "finish_reason", why);
    } else {
        choice = json_pack("{s:i,s:o,s:o,s:o}", "index", (int)index, "text",
                           text_value(finish ? "" : text, finish ? 0 : len), "logprobs", lp,
                           "finish_reason", why);
    }
    return event(with_choices(
        head(m, m->kind == SRV_CHAT ? "chat.completion.chunk" : "text_completion"), choice));
}

char *resp_usage_chunk(const resp_meta *m, const resp_usage *u)
{
    json_t *o =
        head(m, m->kind == SRV_CHAT ? "chat.completion.chunk" : "text_completion");
    if (o && (json_object_set_new(o, "choices", json_array()) ||
              json_object_set_new(o, "usage", usage_object(u)))) {
        json_decref(o);
        o = NULL;
    }
    return event(o);
}
