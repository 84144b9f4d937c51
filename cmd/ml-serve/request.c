/* request.c - a request's JSON body to srv_request (request.h): the
 * fields of OpenAI's chat and completion requests and llama-server's
 * tokenize/detokenize, each checked for its type and range.  Every field
 * is honoured or refused by name (the table of fields below); an unknown
 * one is refused, as OpenAI's API refuses it; null counts as absent,
 * since clients send it for "not set". */
#include "request.h"
#include "schema.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int srv_fail(srv_error *e, int status, const char *type, const char *param, const char *code,
             const char *fmt, ...)
{
    va_list ap;
    e->status = status;
    e->type = type;
    e->param = param;
    e->code = code;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    return -1;
}

/* The JSON type's name as OpenAI's messages say it. */
static const char *type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a decimal number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    default: return "null";
    }
}

static int bad_type(srv_error *e, const char *param, const char *want, const json_t *v)
{
    return srv_fail(e, 400, "invalid_request_error", param, "invalid_type",
                    "Invalid type for '%s': expected %s, but got %s instead.", param, want,
                    type_name(v));
}

static int out_of_range(srv_error *e, const char *param, const char *range)
{
    return srv_fail(e, 400, "invalid_request_error", param, "invalid_value",
                    "Invalid value for '%s': expected %s.", param, range);
}

/* The member called name, or NULL when it is missing or null. */
static json_t *member(const json_t *o, const char *name)
{
    json_t *v = json_object_get(o, name);
    return json_is_null(v) ? NULL : v;
}

/* ------------------------------------------------------------------------
 * Scalars
 * ------------------------------------------------------------------------ */
/* A number in [lo, hi] into *out (left as it is when absent). */
static int get_number(const json_t *o, const char *name, double lo, double hi, double *out,
                      srv_error *e)
{
    json_t *v = member(o, name);
    if (!v)
        return 0;
    if (!json_is_number(v))
        return bad_type(e, name, "a number", v);
    double x = json_number_value(v);
    if (!(x >= lo && x <= hi)) {
        char range[64];
        snprintf(range, sizeof range, "a number from %g to %g", lo, hi);
        return out_of_range(e, name, range);
    }
    *out = x;
    return 0;
}

/* An integer in [lo, hi] into *out; *given says whether it was there. */
static int get_integer(const json_t *o, const char *name, int64_t lo, int64_t hi, int64_t *out,
                       int *given, srv_error *e)
{
    json_t *v = member(o, name);
    if (given)
        *given = v != NULL;
    if (!v)
        return 0;
    if (!json_is_integer(v))
        return bad_type(e, name, "an integer", v);
    json_int_t x = json_integer_value(v);
    if (x < lo || x > hi) {
        char range[64];
        snprintf(range, sizeof range, "an integer from %lld to %lld", (long long)lo,
                 (long long)hi);
        return out_of_range(e, name, range);
    }
    *out = x;
    return 0;
}

static int get_bool(const json_t *o, const char *name, int *out, srv_error *e)
{
    json_t *v = member(o, name);
    if (!v)
        return 0;
    if (!json_is_boolean(v))
        return bad_type(e, name, "a boolean", v);
    *out = json_is_true(v);
    return 0;
}

/* A copy of a string's bytes, NUL-terminated (jansson refuses strings
 * holding NUL unless asked, so the length is the C string's). */
static int copy_string(const json_t *v, char **out, size_t *len, srv_error *e)
{
    size_t n = json_string_length(v);
    if (!(*out = malloc(n + 1)))
        return srv_fail(e, 500, "server_error", NULL, NULL, "Out of memory.");
    memcpy(*out, json_string_value(v), n + 1);
    if (len)
        *len = n;
    return 0;
}

/* ------------------------------------------------------------------------
 * Sampling and stopping
 * ------------------------------------------------------------------------ */
static int add_stop(srv_request *r, const json_t *v, srv_error *e)
{
    if (!json_is_string(v))
        return bad_type(e, "stop", "a string or an array of strings", v);
    size_t n = json_string_length(v);
    if (n == 0 || n > ML_STOP_MAX_LEN)
        return out_of_range(e, "stop", "strings of 1 to " "4096" " bytes");
    if (r->n_stops == SRV_MAX_STOPS)
        return out_of_range(e, "stop", "at most 16 stop strings");
    return copy_string(v, &r->stops[r->n_stops++], NULL, e);
}

static int get_stops(const json_t *o, srv_request *r, srv_error *e)
{
    json_t *v = member(o, "stop"), *s;
    size_t i;
    if (!v)
        return 0;
    if (!json_is_array(v))
        return add_stop(r, v, e);
    json_array_foreach(v, i, s) {
        if (add_stop(r, s, e))
            return -1;
    }
    return 0;
}

static int get_sampling(const json_t *o, srv_request *r, srv_error *e)
{
    double temp = SRV_DEFAULT_TEMP, top_p = SRV_DEFAULT_TOP_P, min_p = SRV_DEFAULT_MIN_P;
    double presence = 0, frequency = 0;
    int64_t top_k = SRV_DEFAULT_TOP_K, seed = 0, n = 1;
    if (get_number(o, "temperature", 0, 2, &temp, e) || get_number(o, "top_p", 0, 1, &top_p, e) ||
        get_number(o, "min_p", 0, 1, &min_p, e) ||
        get_integer(o, "top_k", 0, ML_MLB_VOCAB_LIMIT, &top_k, NULL, e) ||
        get_integer(o, "seed", INT64_MIN, INT64_MAX, &seed, &r->seed_set, e) ||
        get_integer(o, "n", 1, SRV_MAX_N, &n, NULL, e) || get_bool(o, "ignore_eos", &r->ignore_eos, e) ||
        get_number(o, "presence_penalty", -2, 2, &presence, e) ||
        get_number(o, "frequency_penalty", -2, 2, &frequency, e))
        return -1;
    r->n = (size_t)n;
    r->sp = (ml_sampler_params){.temperature = (float)temp,
                                .top_k = (uint32_t)top_k,
                                .top_p = (float)top_p,
                                .min_p = (float)min_p,
                                .repeat_penalty = 1,
                                .seed = (uint64_t)seed,
                                .presence_penalty = (float)presence,
                                .frequency_penalty = (float)frequency};
    return 0;
}

/* max_tokens, or its newer name max_completion_tokens (which wins); 0
 * (nothing generated) with a completion's echo: the prompt is only scored. */
static int get_max_tokens(const json_t *o, srv_request *r, srv_error *e)
{
    int given;
    int64_t n = -1, lo = r->echo ? 0 : 1;
    if (get_integer(o, "max_tokens", lo, INT32_MAX, &n, NULL, e) ||
        get_integer(o, "max_completion_tokens", lo, INT32_MAX, &n, &given, e))
        return -1;
    r->max_tokens = n;
    return 0;
}

static int get_stream(const json_t *o, srv_request *r, srv_error *e)
{
    json_t *so = member(o, "stream_options");
    if (get_bool(o, "stream", &r->stream, e))
        return -1;
    if (!so)
        return 0;
    if (!json_is_object(so))
        return bad_type(e, "stream_options", "an object", so);
    return get_bool(so, "include_usage", &r->include_usage, e);
}

/* One logit_bias entry: a token id (a decimal string as OpenAI's map
 * keys are, or an integer in llama-server's [[id, bias]] form) and a bias
 * in [-100, 100], or false (llama-server's: never drawn). */
static int add_bias(srv_request *r, const char *key, const json_t *id, const json_t *b,
                    uint32_t vocab, srv_error *e)
{
    uint64_t t = 0;
    if (key) {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(key, &end, 10);
        if (errno || end == key || *end || *key < '0' || *key > '9')
            return out_of_range(e, "logit_bias", "token ids (decimal strings) as keys");
        t = v;
    } else if (json_is_integer(id) && json_integer_value(id) >= 0) {
        t = (uint64_t)json_integer_value(id);
    } else {
        return out_of_range(e, "logit_bias", "[token id, bias] pairs");
    }
    if (t >= vocab)
        return out_of_range(e, "logit_bias", "token ids below the vocabulary's size");
    float bias = -INFINITY;
    if (!json_is_false(b)) {
        if (!json_is_number(b) || !(json_number_value(b) >= -100 && json_number_value(b) <= 100))
            return out_of_range(e, "logit_bias", "biases from -100 to 100 (or false)");
        bias = (float)json_number_value(b);
    }
    if (r->n_bias == vocab)
        return out_of_range(e, "logit_bias", "at most one entry per token");
    r->bias[r->n_bias++] = (ml_logit_bias){(ml_token)t, bias};
    return 0;
}

/* logit_bias: OpenAI's {"id": bias} map or llama-server's [[id, bias]]. */
static int get_logit_bias(const json_t *o, uint32_t vocab, srv_request *r, srv_error *e)
{
    json_t *v = member(o, "logit_bias"), *x;
    size_t n = json_is_object(v) ? json_object_size(v) : json_is_array(v) ? json_array_size(v) : 0;
    if (!v)
        return 0;
    if (!json_is_object(v) && !json_is_array(v))
        return bad_type(e, "logit_bias", "an object mapping token ids to biases", v);
    if (n > vocab)
        return out_of_range(e, "logit_bias", "at most one entry per token");
    if (n && !(r->bias = malloc(n * sizeof *r->bias)))
        return srv_fail(e, 500, "server_error", NULL, NULL, "Out of memory.");
    if (json_is_object(v)) {
        const char *key;
        json_object_foreach(v, key, x) {
            if (add_bias(r, key, NULL, x, vocab, e))
                return -1;
        }
        return 0;
    }
    size_t i;
    json_array_foreach(v, i, x) {
        if (!json_is_array(x) || json_array_size(x) != 2)
            return out_of_range(e, "logit_bias", "[token id, bias] pairs");
        if (add_bias(r, NULL, json_array_get(x, 0), json_array_get(x, 1), vocab, e))
            return -1;
    }
    return 0;
}

/* A chat's logprobs (a boolean) and top_logprobs (0..20, with logprobs);
 * a completion's logprobs, the number of most likely tokens (0..20; false
 * is off). */
static int get_logprobs(const json_t *o, srv_request *r, srv_error *e)
{
    int64_t top = 0;
    int given = 0;
    if (r->kind == SRV_CHAT) {
        if (get_bool(o, "logprobs", &r->logprobs, e) ||
            get_integer(o, "top_logprobs", 0, 20, &top, &given, e))
            return -1;
        if (given && !r->logprobs)
            return srv_fail(e, 400, "invalid_request_error", "top_logprobs", "invalid_value",
                            "Invalid value for 'top_logprobs': 'logprobs' must be true.");
    } else {
        json_t *v = member(o, "logprobs");
        if (v && !json_is_false(v)) {
            if (get_integer(o, "logprobs", 0, 20, &top, NULL, e))
                return -1;
            r->logprobs = 1;
        }
    }
    r->top_logprobs = (unsigned)top;
    return 0;
}

/* chat_template_kwargs (llama-server's: variables for the template, such
 * as enable_thinking) and reasoning_effort (a variable of that name, as
 * gpt-oss's template reads it), never the variables the server sets. */
static int get_template_vars(const json_t *o, srv_request *r, srv_error *e)
{
    static const char *const reserved[] = {"messages", "add_generation_prompt", "bos_token",
                                           "eos_token"};
    json_t *kw = member(o, "chat_template_kwargs"), *effort = member(o, "reasoning_effort");
    if (!kw && !effort)
        return 0;
    if (kw && !json_is_object(kw))
        return bad_type(e, "chat_template_kwargs", "an object", kw);
    for (size_t i = 0; kw && i < sizeof reserved / sizeof *reserved; i++)
        if (json_object_get(kw, reserved[i]))
            return out_of_range(e, "chat_template_kwargs",
                                "variables other than messages, add_generation_prompt, "
                                "bos_token and eos_token");
    if (effort && !json_is_string(effort))
        return bad_type(e, "reasoning_effort", "a string", effort);
    const char *ev = effort ? json_string_value(effort) : "";
    if (effort && strcmp(ev, "minimal") && strcmp(ev, "low") && strcmp(ev, "medium") &&
        strcmp(ev, "high"))
        return out_of_range(e, "reasoning_effort", "one of minimal, low, medium, high");
    if (!(r->template_vars = kw ? json_deep_copy(kw) : json_object()) ||
        (effort && json_object_set(r->template_vars, "reasoning_effort", effort)))
        return srv_fail(e, 500, "server_error", NULL, NULL, "Out of memory.");
    return 0;
}

/* ------------------------------------------------------------------------
 * What is generated from: messages, a prompt
 * ------------------------------------------------------------------------ */
/* A content: a string, null (an assistant turn with tool calls), or a
 * list of text parts. */
static int check_content(const json_t *c, srv_error *e)
{
    json_t *part;
    size_t i;
    if (!c || json_is_string(c))
        return 0;
    if (!json_is_array(c))
        return bad_type(e, "messages.content", "a string or an array of content parts", c);
    json_array_foreach(c, i, part) {
        json_t *type = json_object_get(part, "type"), *text = json_object_get(part, "text");
        if (!json_is_object(part))
            return bad_type(e, "messages.content", "an object (a content part)", part);
        if (!json_is_string(type) || strcmp(json_string_value(type), "text") != 0)
            return srv_fail(e, 400, "invalid_request_error", "messages.content",
                            "unsupported_parameter",
                            "Invalid content part: ml-serve reads only parts of type 'text'.");
        if (!json_is_string(text))
            return bad_type(e, "messages.content.text", "a string", text ? text : json_null());
    }
    return 0;
}

/* A function's name as OpenAI takes it: [a-zA-Z0-9_-]{1,64}. */
static int is_name(const json_t *v)
{
    const char *s = json_string_value(v);
    size_t n = s ? strlen(s) : 0;
    return n >= 1 && n <= 64 &&
           strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") == n;
}

/* An assistant message's tool_calls: [{id?, type?: "function", function:
 * {name, arguments: a string of JSON (or the object)}}]; a tool
 * message's tool_call_id. */
static int check_tool_calls(const json_t *msg, srv_error *e)
{
    json_t *calls = member(msg, "tool_calls"), *c, *id = member(msg, "tool_call_id");
    size_t i;
    if (id && !json_is_string(id))
        return bad_type(e, "messages.tool_call_id", "a string", id);
    if (!calls)
        return 0;
    if (!json_is_array(calls))
        return bad_type(e, "messages.tool_calls", "an array", calls);
    json_array_foreach(calls, i, c) {
        json_t *f = json_object_get(c, "function"), *type = member(c, "type");
        json_t *args = json_object_get(f, "arguments");
        if (!json_is_object(c) || !json_is_object(f))
            return bad_type(e, "messages.tool_calls.function", "an object", f ? f : c);
        if (type && !(json_is_string(type) && !strcmp(json_string_value(type), "function")))
            return out_of_range(e, "messages.tool_calls.type", "\"function\"");
        if (!json_is_string(json_object_get(f, "name")))
            return bad_type(e, "messages.tool_calls.function.name", "a string",
                            json_object_get(f, "name") ? json_object_get(f, "name") : json_null());
        if (!json_is_string(args) && !json_is_object(args))
            return bad_type(e, "messages.tool_calls.function.arguments", "a string",
                            args ? args : json_null());
        if (member(c, "id") && !json_is_string(member(c, "id")))
            return bad_type(e, "messages.tool_calls.id", "a string", member(c, "id"));
    }
    return 0;
}

static int get_messages(const json_t *o, srv_request *r, srv_error *e)
{
    json_t *m = member(o, "messages"), *msg;
    size_t i;
    if (!m)
        return srv_fail(e, 400, "invalid_request_error", "messages", "missing_required_parameter",
                        "Missing required parameter: 'messages'.");
    if (!json_is_array(m))
        return bad_type(e, "messages", "an array", m);
    if (json_array_size(m) == 0)
        return out_of_range(e, "messages", "an array with at least one message");
    json_array_foreach(m, i, msg) {
        json_t *role = json_object_get(msg, "role");
        if (!json_is_object(msg))
            return bad_type(e, "messages", "an array of objects", msg);
        if (!json_is_string(role) || json_string_length(role) == 0)
            return bad_type(e, "messages.role", "a non-empty string", role ? role : json_null());
        if (check_content(member(msg, "content"), e) || check_tool_calls(msg, e))
            return -1;
    }
    r->messages = json_incref(m);
    return 0;
}

/* The ids of array t, each below vocab, into a new *ids of *n (name: the
 * field, for errors). */
static int token_array(const json_t *t, const char *name, uint32_t vocab, ml_token **ids,
                       size_t *n, srv_error *e)
{
    json_t *id;
    size_t i;
    if (json_array_size(t) && !(*ids = malloc(json_array_size(t) * sizeof **ids)))
        return srv_fail(e, 500, "server_error", NULL, NULL, "Out of memory.");
    json_array_foreach(t, i, id) {
        if (!json_is_integer(id))
            return bad_type(e, name, "an array of integers", id);
        json_int_t v = json_integer_value(id);
        if (v < 0 || v >= (json_int_t)vocab) {
            char range[64];
            snprintf(range, sizeof range, "token ids from 0 to %u", vocab ? vocab - 1 : 0);
            return out_of_range(e, name, range);
        }
        (*ids)[(*n)++] = (ml_token)v;
    }
    return 0;
}

/* An array whose first element is an integer: a prompt of token ids. */
static int is_id_array(const json_t *p)
{
    return json_is_array(p) && json_array_size(p) && json_is_integer(json_array_get(p, 0));
}

/* tokenize's content: a string, or (as the OpenAI API allows for a
 * prompt) an array holding one. */
static int get_content(const json_t *o, srv_request *r, srv_error *e)
{
    json_t *p = member(o, "content");
    if (!p)
        return srv_fail(e, 400, "invalid_request_error", "content", "missing_required_parameter",
                        "Missing required parameter: 'content'.");
    if (json_is_array(p) && json_array_size(p) == 1 && json_is_string(json_array_get(p, 0)))
        p = json_array_get(p, 0);
    if (!json_is_string(p))
        return bad_type(e, "content", "a string", p);
    return copy_string(p, &r->text, &r->text_len, e);
}

/* One prompt, a string or an array of token ids, as r's next. */
static int add_prompt(const json_t *p, uint32_t vocab, srv_request *r, srv_error *e)
{
    srv_prompt *q = &r->prompts[r->n_prompts++];
    if (json_is_string(p))
        return copy_string(p, &q->text, &q->text_len, e);
    return token_array(p, "prompt", vocab, &q->tokens, &q->n_tokens, e);
}

/* An element of an array of prompts: of the first one's kind (strings or
 * id arrays, never both: a mix is most likely a client's mistake) and
 * not empty (nothing to continue or to score; a lone "" keeps its
 * meaning: the tokenizer's BOS alone). */
static int check_listed_prompt(const json_t *v, const json_t *first, srv_error *e)
{
    if (!json_is_string(v) && !json_is_array(v))
        return bad_type(e, "prompt", "an array of strings or of token-id arrays", v);
    if (json_typeof(v) != json_typeof(first))
        return bad_type(e, "prompt",
                        json_is_string(first) ? "an array of strings (not mixed with token ids)"
                                              : "an array of token-id arrays (not mixed with "
                                                "strings)",
                        v);
    if (json_is_string(v) ? !json_string_length(v) : !json_array_size(v))
        return out_of_range(e, "prompt", "non-empty prompts");
    return 0;
}

/* A completion's prompt, in the OpenAI API's four forms: a string, an
 * array of strings, an array of token ids or an array of such arrays
 * (ids taken as given: no BOS is added).  Each prompt of an array is
 * answered by n choices of its own, as OpenAI, vLLM and llama-server
 * answer it (lm-evaluation-harness's local-completions sends a batch so). */
static int get_prompts(const json_t *o, uint32_t vocab, srv_request *r, srv_error *e)
{
    json_t *p = member(o, "prompt"), *v;
    size_t i, n = json_is_array(p) && !is_id_array(p) ? json_array_size(p) : 1;
    if (!p)
        return srv_fail(e, 400, "invalid_request_error", "prompt", "missing_required_parameter",
                        "Missing required parameter: 'prompt'.");
    if (!json_is_string(p) && !json_is_array(p))
        return bad_type(e, "prompt", "a string, an array of strings or of token ids", p);
    if (n == 0)
        return out_of_range(e, "prompt", "at least one prompt");
    if (n > SRV_MAX_PROMPTS)
        return out_of_range(e, "prompt", "at most 64 prompts");
    if (!(r->prompts = calloc(n, sizeof *r->prompts)))
        return srv_fail(e, 500, "server_error", NULL, NULL, "Out of memory.");
    if (json_is_string(p) || is_id_array(p))
        return add_prompt(p, vocab, r, e);
    json_array_foreach(p, i, v) {
        if (check_listed_prompt(v, json_array_get(p, 0), e) || add_prompt(v, vocab, r, e))
            return -1;
    }
    return 0;
}

static int get_tokens(const json_t *o, uint32_t vocab, srv_request *r, srv_error *e)
{
    json_t *t = member(o, "tokens");
    if (!t)
        return srv_fail(e, 400, "invalid_request_error", "tokens", "missing_required_parameter",
                        "Missing required parameter: 'tokens'.");
    if (!json_is_array(t))
        return bad_type(e, "tokens", "an array of token ids", t);
    return token_array(t, "tokens", vocab, &r->tokens, &r->n_tokens, e);
}

/* ------------------------------------------------------------------------
 * Structured output
 * ------------------------------------------------------------------------ */
/* A JSON value as RFC 8259 writes it, an object at the top (OpenAI's
 * json_object), with spaces between tokens allowed but not after the
 * end, so that the text ends with the object. */
static const char JSON_GRAMMAR[] =
    "root ::= object\n"
    "value ::= object | array | string | number | (\"true\" | \"false\" | \"null\")\n"
    "object ::= \"{\" ws (string ws \":\" ws value ws (\",\" ws string ws \":\" ws value ws)*)? \"}\"\n"
    "array ::= \"[\" ws (value ws (\",\" ws value ws)*)? \"]\"\n"
    "string ::= \"\\\"\" (char)* \"\\\"\"\n"
    "char ::= [^\"\\\\\\x00-\\x1f] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" hex hex hex hex)\n"
    "hex ::= [0-9a-fA-F]\n"
    "number ::= \"-\"? (\"0\" | [1-9] [0-9]*) (\".\" [0-9]+)? ([eE] [-+]? [0-9]+)?\n"
    "ws ::= [ \\t\\n]{0,20}\n";

static int set_grammar(srv_request *r, const char *param, const char *text, size_t len,
                       srv_error *e)
{
    ml_error err;
    r->grammar_text = text, r->grammar_len = len;
    ml_status st = ml_grammar_parse(text, len, NULL, &r->grammar, &err);
    if (st == ML_E_NOMEM)
        return srv_fail(e, 500, "server_error", NULL, NULL, "Out of memory.");
    if (st)
        return srv_fail(e, 400, "invalid_request_error", param, "invalid_grammar",
                        "Invalid grammar in '%s': %s: %s", param, err.field, err.msg);
    return 0;
}

/* response_format's json_schema: {name, schema, strict}; the schema's
 * grammar (schema.c) is the request's own text. */
static int schema_grammar(srv_request *r, const json_t *js, srv_error *e)
{
    json_t *schema = json_object_get(js, "schema"), *strict = json_object_get(js, "strict");
    if (!json_is_object(js))
        return bad_type(e, "response_format", "a json_schema object", js ? js : json_null());
    if (schema && !json_is_object(schema) && !json_is_true(schema))
        return bad_type(e, "response_format", "a schema (json_schema.schema) that is an object",
                        schema);
    if (strict && !json_is_boolean(strict) && !json_is_null(strict))
        return bad_type(e, "response_format", "a boolean json_schema.strict", strict);
    char *text = srv_schema_grammar(schema, e);
    if (!text)
        return -1;
    r->grammar_own = text;
    return set_grammar(r, "response_format", text, strlen(text), e);
}

/* llama-server's grammar (GBNF text) or OpenAI's response_format: text,
 * json_object (JSON_GRAMMAR), json_schema (schema.c). */
static int get_grammar(const json_t *o, srv_request *r, srv_error *e)
{
    json_t *g = member(o, "grammar"), *f = member(o, "response_format");
    const char *type = json_string_value(json_object_get(f, "type"));
    if (g && !json_is_string(g))
        return bad_type(e, "grammar", "a string (GBNF)", g);
    if (f && (!json_is_object(f) || !type))
        return bad_type(e, "response_format", "an object with a type", f);
    if (f && strcmp(type, "text") && strcmp(type, "json_object") && strcmp(type, "json_schema"))
        return out_of_range(e, "response_format", "a type of text, json_object or json_schema");
    if (f && !strcmp(type, "json_schema"))
        return g ? srv_fail(e, 400, "invalid_request_error", "grammar", "invalid_value",
                            "'grammar' and a response_format exclude each other.")
                 : schema_grammar(r, json_object_get(f, "json_schema"), e);
    int json = f && !strcmp(type, "json_object");
    if (g && json)
        return srv_fail(e, 400, "invalid_request_error", "grammar", "invalid_value",
                        "'grammar' and a response_format of json_object exclude each other.");
    if (g && json_string_length(g)) {
        size_t len;
        return copy_string(g, &r->grammar_own, &len, e) ||
               set_grammar(r, "grammar", r->grammar_own, len, e);
    }
    return json ? set_grammar(r, "response_format", JSON_GRAMMAR, sizeof JSON_GRAMMAR - 1, e) : 0;
}

/* ------------------------------------------------------------------------
 * Embeddings
 * ------------------------------------------------------------------------ */
static int check_labels(const json_t *o, srv_error *e);

/* One input: a non-empty string, or a non-empty array of token ids. */
static int check_input(const json_t *v, uint32_t vocab, srv_error *e)
{
    json_t *id;
    size_t i;
    if (json_is_string(v))
        return json_string_length(v) ? 0 : out_of_range(e, "input", "non-empty strings");
    if (!json_is_array(v) || !json_array_size(v))
        return bad_type(e, "input", "a string, an array of strings or of token ids", v);
    json_array_foreach(v, i, id) {
        if (!json_is_integer(id) || json_integer_value(id) < 0 ||
            json_integer_value(id) >= (json_int_t)vocab)
            return out_of_range(e, "input", "token ids below the vocabulary's size");
    }
    return 0;
}

/* input: a string, token ids, or an array of either (at most
 * SRV_MAX_INPUTS), kept as an array of inputs; encoding_format;
 * dimensions (checked against the model's by the endpoint). */
static int parse_embeddings(const json_t *o, uint32_t vocab, srv_request *r, srv_error *e)
{
    json_t *in = member(o, "input"), *v, *fmt = member(o, "encoding_format");
    size_t i;
    if (!in)
        return srv_fail(e, 400, "invalid_request_error", "input", "missing_required_parameter",
                        "Missing required parameter: 'input'.");
    int many = json_is_array(in) && json_array_size(in) &&
               (json_is_string(json_array_get(in, 0)) || json_is_array(json_array_get(in, 0)));
    r->inputs = many ? json_incref(in) : json_pack("[O]", in);
    if (!r->inputs)
        return srv_fail(e, 500, "server_error", NULL, NULL, "Out of memory.");
    if (json_array_size(r->inputs) > SRV_MAX_INPUTS)
        return out_of_range(e, "input", "at most 2048 inputs");
    json_array_foreach(r->inputs, i, v) {
        if (check_input(v, vocab, e))
            return -1;
    }
    if (fmt && (!json_is_string(fmt) || (strcmp(json_string_value(fmt), "float") &&
                                         strcmp(json_string_value(fmt), "base64"))))
        return out_of_range(e, "encoding_format", "\"float\" or \"base64\"");
    r->base64 = fmt && !strcmp(json_string_value(fmt), "base64");
    r->dimensions = -1;
    return check_labels(o, e) ||
           get_integer(o, "dimensions", 1, INT32_MAX, &r->dimensions, NULL, e);
}

/* ------------------------------------------------------------------------
 * Tools
 * ------------------------------------------------------------------------ */
/* One tool: {"type": "function", "function": {"name", "description"?,
 * "parameters"?, "strict"?}}, nothing else. */
static int check_tool(const json_t *t, srv_error *e)
{
    static const char *const keys[] = {"name", "description", "parameters", "strict"};
    json_t *type = json_object_get(t, "type"), *f = json_object_get(t, "function"), *v;
    const char *key;
    if (!json_is_object(t))
        return bad_type(e, "tools", "an array of objects", t);
    if (!json_is_string(type) || strcmp(json_string_value(type), "function"))
        return out_of_range(e, "tools.type", "\"function\"");
    if (!json_is_object(f) || json_object_size(t) != 2)
        return out_of_range(e, "tools", "objects {\"type\": \"function\", \"function\": {...}}");
    json_object_foreach(f, key, v) {
        size_t k = 0;
        while (k < 4 && strcmp(key, keys[k]))
            k++;
        if (k == 4)
            return out_of_range(e, "tools.function",
                                "only name, description, parameters and strict");
    }
    if (!is_name(json_object_get(f, "name")))
        return out_of_range(e, "tools.function.name",
                            "a name of 1 to 64 letters, digits, underscores and dashes");
    if ((v = member(f, "description")) && !json_is_string(v))
        return bad_type(e, "tools.function.description", "a string", v);
    if ((v = member(f, "parameters")) && !json_is_object(v))
        return bad_type(e, "tools.function.parameters", "an object (a JSON Schema)", v);
    if ((v = member(f, "strict")) && !json_is_boolean(v))
        return bad_type(e, "tools.function.strict", "a boolean", v);
    return 0;
}

/* A tool's function name. */
const char *srv_tool_name(const json_t *tool)
{
    return json_string_value(json_object_get(json_object_get(tool, "function"), "name"));
}

/* A tool's parameters schema, or NULL. */
const json_t *srv_tool_params(const json_t *tool)
{
    return json_object_get(json_object_get(tool, "function"), "parameters");
}

static int has_tool(const srv_request *r, const char *name)
{
    json_t *t;
    size_t i;
    json_array_foreach(r->tools, i, t) {
        const char *n = srv_tool_name(t);
        if (n && !strcmp(n, name))
            return 1;
    }
    return 0;
}

/* tool_choice: "none", "auto", "required" or {"type": "function",
 * "function": {"name": N}} naming one of the tools. */
static int get_tool_choice(const json_t *o, srv_request *r, srv_error *e)
{
    json_t *c = member(o, "tool_choice");
    const char *s = json_string_value(c);
    r->tool_choice = SRV_TOOL_AUTO;
    if (!c)
        return 0;
    if (s && !strcmp(s, "none"))
        r->tool_choice = SRV_TOOL_NONE;
    else if (s && !strcmp(s, "auto"))
        r->tool_choice = SRV_TOOL_AUTO;
    else if (s && !strcmp(s, "required"))
        r->tool_choice = SRV_TOOL_REQUIRED;
    else if (json_is_object(c)) {
        json_t *name = json_object_get(json_object_get(c, "function"), "name");
        json_t *type = json_object_get(c, "type");
        if (!json_is_string(type) || strcmp(json_string_value(type), "function") ||
            !is_name(name))
            return out_of_range(e, "tool_choice",
                                "{\"type\": \"function\", \"function\": {\"name\": NAME}}");
        snprintf(r->tool_name, sizeof r->tool_name, "%s", json_string_value(name));
        r->tool_choice = SRV_TOOL_NAMED;
    } else
        return out_of_range(e, "tool_choice", "\"none\", \"auto\", \"required\" or a named function");
    if (r->tool_choice >= SRV_TOOL_REQUIRED && !r->tools)
        return out_of_range(e, "tool_choice", "\"none\" or \"auto\" when no tools are given");
    if (r->tool_choice == SRV_TOOL_NAMED && !has_tool(r, r->tool_name))
        return srv_fail(e, 400, "invalid_request_error", "tool_choice", "invalid_value",
                        "Invalid value for 'tool_choice': no tool is called '%s'.", r->tool_name);
    return 0;
}

static int get_tools(const json_t *o, srv_request *r, srv_error *e)
{
    json_t *tools = member(o, "tools"), *t;
    size_t i;
    r->parallel_tools = 1;
    if (tools && !json_is_array(tools))
        return bad_type(e, "tools", "an array", tools);
    if (json_array_size(tools) > SRV_MAX_TOOLS)
        return out_of_range(e, "tools", "at most 128 tools");
    json_array_foreach(tools, i, t) {
        if (check_tool(t, e))
            return -1;
        const char *name = srv_tool_name(t);
        for (size_t k = 0; k < i; k++)
            if (!strcmp(name, srv_tool_name(json_array_get(tools, k))))
                return srv_fail(e, 400, "invalid_request_error", "tools", "invalid_value",
                                "Invalid value for 'tools': two tools are called '%s'.", name);
    }
    if (json_array_size(tools))
        r->tools = json_incref(tools);
    if (get_tool_choice(o, r, e) || get_bool(o, "parallel_tool_calls", &r->parallel_tools, e))
        return -1;
    if (r->tools && r->tool_choice != SRV_TOOL_NONE && r->grammar)
        return srv_fail(e, 400, "invalid_request_error", member(o, "grammar") ? "grammar"
                                                                              : "response_format",
                        "invalid_value",
                        "Tools cannot be combined with a grammar or response_format: a call "
                        "has its own.");
    return 0;
}

/* ------------------------------------------------------------------------
 * Every field a request may name
 * ------------------------------------------------------------------------ */
/* "Off" values of the fields this server cannot honour: what a client
 * sends when it does not use the feature. */
static int is_false(const json_t *v) { return json_is_false(v); }
/* A feature none of whose values this server can honour. */
static int no_value(const json_t *v) { (void)v; return 0; }
static int is_one(const json_t *v) { return json_is_integer(v) && json_integer_value(v) == 1; }
static int is_empty(const json_t *v)
{
    return (json_is_array(v) && !json_array_size(v)) ||
           (json_is_object(v) && !json_object_size(v)) ||
           (json_is_string(v) && !json_string_length(v));
}
static int is_text_modality(const json_t *v)
{
    const char *t = json_string_value(json_array_get(v, 0));
    return json_is_array(v) && json_array_size(v) == 1 && t && !strcmp(t, "text");
}
static int is_no_tool(const json_t *v)
{
    const char *t = json_string_value(v);
    return t && (!strcmp(t, "none") || !strcmp(t, "auto"));
}
static int is_default_tier(const json_t *v)
{
    const char *t = json_string_value(v);
    return t && (!strcmp(t, "auto") || !strcmp(t, "default"));
}

enum { K_CHAT = 1 << SRV_CHAT, K_COMPL = 1 << SRV_COMPLETION, K_TOK = 1 << SRV_TOKENIZE,
       K_DETOK = 1 << SRV_DETOKENIZE, K_EMB = 1 << SRV_EMBEDDINGS, K_GEN = K_CHAT | K_COMPL };

/* The fields of OpenAI's chat and completion requests, llama-server's
 * tokenize and detokenize, and the llama.cpp sampling fields this server
 * takes.  off NULL: the field is read below (or is by definition without
 * effect on the answer: model, user, safety_identifier,
 * prompt_cache_key).  off set: not supported, and taken only at a value
 * that asks for nothing (no_value: none does); another value is a 400
 * naming the field.  A
 * field in no row is a 400 as well, as OpenAI answers an unknown one.
 * null is absent everywhere. */
static const struct field {
    const char *name;
    unsigned kinds;
    int (*off)(const json_t *v);
} fields[] = {
    {"model", K_GEN | K_EMB, NULL},
    {"messages", K_CHAT, NULL},
    {"prompt", K_COMPL, NULL},
    {"max_tokens", K_GEN, NULL},
    {"max_completion_tokens", K_GEN, NULL},
    {"temperature", K_GEN, NULL},
    {"top_p", K_GEN, NULL},
    {"top_k", K_GEN, NULL},
    {"min_p", K_GEN, NULL},
    {"n", K_GEN, NULL},
    {"seed", K_GEN, NULL},
    {"stop", K_GEN, NULL},
    {"stream", K_GEN, NULL},
    {"stream_options", K_GEN, NULL},
    {"presence_penalty", K_GEN, NULL},
    {"frequency_penalty", K_GEN, NULL},
    {"logit_bias", K_GEN, NULL},
    {"ignore_eos", K_GEN, NULL},
    {"user", K_GEN | K_EMB, NULL},
    {"safety_identifier", K_CHAT, NULL},
    {"prompt_cache_key", K_CHAT, NULL},
    {"logprobs", K_GEN, NULL},
    {"top_logprobs", K_CHAT, NULL},
    {"echo", K_COMPL, NULL},
    {"suffix", K_COMPL, is_empty},
    {"best_of", K_COMPL, is_one},
    {"tools", K_CHAT, NULL},
    {"tool_choice", K_CHAT, NULL},
    {"parallel_tool_calls", K_CHAT, NULL},
    {"functions", K_CHAT, is_empty},
    {"function_call", K_CHAT, is_no_tool},
    {"response_format", K_CHAT, NULL},
    {"grammar", K_GEN, NULL},
    {"modalities", K_CHAT, is_text_modality},
    {"audio", K_CHAT, no_value},
    {"prediction", K_CHAT, no_value},
    {"reasoning_effort", K_CHAT, NULL},
    {"chat_template_kwargs", K_CHAT, NULL},
    {"verbosity", K_CHAT, no_value},
    {"web_search_options", K_CHAT, no_value},
    {"store", K_CHAT, is_false},
    {"metadata", K_CHAT, is_empty},
    {"service_tier", K_CHAT, is_default_tier},
    {"content", K_TOK, NULL},
    {"add_special", K_TOK, NULL},
    {"with_pieces", K_TOK, is_false},
    {"tokens", K_DETOK, NULL},
    {"input", K_EMB, NULL},
    {"encoding_format", K_EMB, NULL},
    {"dimensions", K_EMB, NULL},
};

static int check_field(srv_kind kind, const char *name, const json_t *v, srv_error *e)
{
    for (size_t i = 0; i < sizeof fields / sizeof *fields; i++) {
        const struct field *f = &fields[i];
        if (strcmp(f->name, name) || !(f->kinds & (1u << kind)))
            continue;
        if (json_is_null(v) || !f->off || f->off(v))
            return 0;
        return srv_fail(e, 400, "invalid_request_error", f->name, "unsupported_parameter",
                        "Unsupported parameter: '%s' is not supported by ml-serve%s.", f->name,
                        f->off == no_value ? "" : " (only its default value is accepted)");
    }
    /* the name lives in the body, which is freed before the answer */
    snprintf(e->param_buf, sizeof e->param_buf, "%s", name);
    return srv_fail(e, 400, "invalid_request_error", e->param_buf, "unknown_parameter",
                    "Unrecognized request argument supplied: %.200s", name);
}

static int check_fields(srv_kind kind, const json_t *o, srv_error *e)
{
    const char *name;
    json_t *v;
    json_object_foreach((json_t *)o, name, v) {
        if (check_field(kind, name, v, e))
            return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------------
 * The body
 * ------------------------------------------------------------------------ */
/* The fields without effect on the answer must still be strings. */
static int check_labels(const json_t *o, srv_error *e)
{
    static const char *const names[] = {"model", "user", "safety_identifier", "prompt_cache_key"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        json_t *v = member(o, names[i]);
        if (v && !json_is_string(v))
            return bad_type(e, names[i], "a string", v);
    }
    return 0;
}

/* The jobs a request makes, prompts x n, bounded as the default queue
 * holds them (a larger n alone is refused by its own range). */
static int check_choices(const srv_request *r, srv_error *e)
{
    if (r->n_prompts * r->n <= SRV_MAX_CHOICES)
        return 0;
    return srv_fail(e, 400, "invalid_request_error", "n", "invalid_value",
                    "Invalid value for 'n': %zu prompts with n = %zu make %zu choices; at most "
                    "64 are allowed.",
                    r->n_prompts, r->n, r->n_prompts * r->n);
}

static int parse_generation(const json_t *o, uint32_t vocab, srv_request *r, srv_error *e)
{
    if (check_labels(o, e))
        return -1;
    if (r->kind == SRV_CHAT ? get_messages(o, r, e) || get_template_vars(o, r, e)
                            : get_prompts(o, vocab, r, e) || get_bool(o, "echo", &r->echo, e))
        return -1;
    return get_sampling(o, r, e) || check_choices(r, e) || get_max_tokens(o, r, e) ||
                   get_stops(o, r, e) || get_stream(o, r, e) || get_logit_bias(o, vocab, r, e) ||
                   get_logprobs(o, r, e) || get_grammar(o, r, e) ||
                   (r->kind == SRV_CHAT && get_tools(o, r, e))
               ? -1
               : 0;
}

/* jansson's own message names the line and column; its UTF-8 check is
 * what makes bad UTF-8 a 400 here. */
static json_t *load(const char *body, size_t len, srv_error *e)
{
    json_error_t je;
    json_t *o = json_loadb(body, len, 0, &je);
    if (!o) {
        srv_fail(e, 400, "invalid_request_error", NULL, "invalid_json",
                 "The body is not valid JSON (line %d, column %d): %s", je.line, je.column,
                 je.text);
        return NULL;
    }
    if (!json_is_object(o)) {
        bad_type(e, "body", "a JSON object", o);
        json_decref(o);
        return NULL;
    }
    return o;
}

int srv_request_parse(srv_kind kind, const char *body, size_t len, uint32_t vocab, srv_request *r,
                      srv_error *e)
{
    memset(r, 0, sizeof *r);
    r->kind = kind;
    r->max_tokens = -1;
    json_t *o = load(body, len, e);
    if (!o)
        return -1;
    int rc = check_fields(kind, o, e);
    switch (rc ? -1 : (int)kind) {
    case -1: break;
    case SRV_TOKENIZE:
        rc = get_content(o, r, e) || get_bool(o, "add_special", &r->add_special, e);
        break;
    case SRV_DETOKENIZE: rc = get_tokens(o, vocab, r, e); break;
    case SRV_EMBEDDINGS: rc = parse_embeddings(o, vocab, r, e); break;
    default: rc = parse_generation(o, vocab, r, e); break;
    }
    json_decref(o);
    return rc ? -1 : 0;
}

void srv_request_free(srv_request *r)
{
    json_decref(r->messages);
    json_decref(r->template_vars);
    json_decref(r->inputs);
    json_decref(r->tools);
    ml_grammar_free(r->grammar);
    free(r->grammar_own);
    free(r->text);
    free(r->tokens);
    for (size_t i = 0; i < r->n_prompts; i++) {
        free(r->prompts[i].text);
        free(r->prompts[i].tokens);
    }
    free(r->prompts);
    free(r->bias);
    for (size_t i = 0; i < r->n_stops; i++)
        free(r->stops[i]);
    memset(r, 0, sizeof *r);
}
