/* request.c - a request's JSON body to srv_request (request.h): the
 * fields of OpenAI's chat and completion requests and llama-server's
 * tokenize/detokenize, each checked for its type and range.  Unknown
 * fields are ignored, as OpenAI's API does; null counts as absent, since
 * clients send it for "not set". */
#include "request.h"

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
/* OpenAI's penalties: this server has none, so a non-zero one is refused
 * rather than ignored (the client would get other text than it asked for). */
static int refuse_penalty(const json_t *o, const char *name, srv_error *e)
{
    double x = 0;
    if (get_number(o, name, -2, 2, &x, e))
        return -1;
    if (x != 0)
        return srv_fail(e, 400, "invalid_request_error", name, "unsupported_parameter",
                        "Unsupported value for '%s': ml-serve has no penalties; send 0 or "
                        "leave it out.",
                        name);
    return 0;
}

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
    int64_t top_k = SRV_DEFAULT_TOP_K, seed = 0, n = 1;
    if (get_number(o, "temperature", 0, 2, &temp, e) || get_number(o, "top_p", 0, 1, &top_p, e) ||
        get_number(o, "min_p", 0, 1, &min_p, e) ||
        get_integer(o, "top_k", 0, ML_MLB_VOCAB_LIMIT, &top_k, NULL, e) ||
        get_integer(o, "seed", INT64_MIN, INT64_MAX, &seed, &r->seed_set, e) ||
        get_integer(o, "n", 1, 1, &n, NULL, e) || get_bool(o, "ignore_eos", &r->ignore_eos, e) ||
        refuse_penalty(o, "presence_penalty", e) ||
        refuse_penalty(o, "frequency_penalty", e))
        return -1;
    r->sp = (ml_sampler_params){(float)temp, (uint32_t)top_k, (float)top_p, (float)min_p,
                                1, 0, (uint64_t)seed};
    return 0;
}

/* max_tokens, or its newer name max_completion_tokens (which wins). */
static int get_max_tokens(const json_t *o, srv_request *r, srv_error *e)
{
    int given;
    int64_t n = -1;
    if (get_integer(o, "max_tokens", 1, INT32_MAX, &n, NULL, e) ||
        get_integer(o, "max_completion_tokens", 1, INT32_MAX, &n, &given, e))
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

static int refuse_logprobs(const json_t *o, srv_error *e)
{
    json_t *v = member(o, "logprobs");
    if (v && (json_is_true(v) || (json_is_integer(v) && json_integer_value(v) > 0)))
        return srv_fail(e, 400, "invalid_request_error", "logprobs", "unsupported_parameter",
                        "Unsupported parameter: 'logprobs' is not supported by ml-serve.");
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
        if (check_content(member(msg, "content"), e))
            return -1;
    }
    r->messages = json_incref(m);
    return 0;
}

/* The ids of array t, each below vocab, into r->tokens (name: the field,
 * for errors). */
static int token_array(const json_t *t, const char *name, uint32_t vocab, srv_request *r,
                       srv_error *e)
{
    json_t *id;
    size_t i;
    if (json_array_size(t) && !(r->tokens = malloc(json_array_size(t) * sizeof *r->tokens)))
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
        r->tokens[r->n_tokens++] = (ml_token)v;
    }
    return 0;
}

/* An array whose first element is an integer: a prompt of token ids. */
static int is_id_array(const json_t *p)
{
    return json_is_array(p) && json_array_size(p) && json_is_integer(json_array_get(p, 0));
}

/* A string, or (as the OpenAI API allows) an array holding one; a
 * completion's prompt may also be token ids, an array of integers or an
 * array holding one (taken as they are: no BOS is added).  vocab is 0
 * where ids are not allowed. */
static int get_prompt(const json_t *o, const char *name, uint32_t vocab, srv_request *r,
                      srv_error *e)
{
    json_t *p = member(o, name);
    if (!p)
        return srv_fail(e, 400, "invalid_request_error", name, "missing_required_parameter",
                        "Missing required parameter: '%s'.", name);
    if (json_is_array(p) && json_array_size(p) == 1 &&
        (json_is_string(json_array_get(p, 0)) || (vocab && is_id_array(json_array_get(p, 0)))))
        p = json_array_get(p, 0);
    if (vocab && is_id_array(p)) {
        r->ids_prompt = 1;
        return token_array(p, name, vocab, r, e);
    }
    if (!json_is_string(p))
        return bad_type(e, name, vocab ? "a string or an array of token ids" : "a string", p);
    return copy_string(p, &r->text, &r->text_len, e);
}

static int get_tokens(const json_t *o, uint32_t vocab, srv_request *r, srv_error *e)
{
    json_t *t = member(o, "tokens");
    if (!t)
        return srv_fail(e, 400, "invalid_request_error", "tokens", "missing_required_parameter",
                        "Missing required parameter: 'tokens'.");
    if (!json_is_array(t))
        return bad_type(e, "tokens", "an array of token ids", t);
    return token_array(t, "tokens", vocab, r, e);
}

/* ------------------------------------------------------------------------
 * The body
 * ------------------------------------------------------------------------ */
static int parse_generation(const json_t *o, uint32_t vocab, srv_request *r, srv_error *e)
{
    if (r->kind == SRV_CHAT ? get_messages(o, r, e) : get_prompt(o, "prompt", vocab, r, e))
        return -1;
    return get_sampling(o, r, e) || get_max_tokens(o, r, e) || get_stops(o, r, e) ||
                   get_stream(o, r, e) || refuse_logprobs(o, e)
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
    int rc;
    switch (kind) {
    case SRV_TOKENIZE:
        rc = get_prompt(o, "content", 0, r, e) || get_bool(o, "add_special", &r->add_special, e);
        break;
    case SRV_DETOKENIZE: rc = get_tokens(o, vocab, r, e); break;
    default: rc = parse_generation(o, vocab, r, e); break;
    }
    json_decref(o);
    return rc ? -1 : 0;
}

void srv_request_free(srv_request *r)
{
    json_decref(r->messages);
    free(r->text);
    free(r->tokens);
    for (size_t i = 0; i < r->n_stops; i++)
        free(r->stops[i]);
    memset(r, 0, sizeof *r);
}
