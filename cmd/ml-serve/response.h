/* response.h - the JSON the server answers with, in the shapes of the
 * OpenAI API (chat.completion, text_completion, their stream chunks as
 * Server-Sent Events, the error object, the model list) and of
 * llama-server (/tokenize, /detokenize, /health).  Each function returns
 * a new NUL-terminated string (free it), or NULL when memory runs out. */
#ifndef ML_SERVE_RESPONSE_H
#define ML_SERVE_RESPONSE_H

#include "request.h"
#include "slots.h"

#include <stddef.h>
#include <stdint.h>

/* A completion's echo of one prompt: its text, which each of its
 * choices' own text follows. */
typedef struct resp_echo {
    char *text;
    size_t len;
} resp_echo;

/* What every completion object and chunk of one request shares. */
typedef struct resp_meta {
    srv_kind kind;      /* SRV_CHAT or SRV_COMPLETION */
    const char *id;     /* "chatcmpl-..." or "cmpl-..." */
    int64_t created;    /* Unix seconds */
    const char *model;
    int logprobs;       /* the choices carry their tokens' log-probabilities */
    const ml_mlt *mlt;  /* whose pieces name the tokens */
    int think;          /* a chat whose reasoning is split off (think.h) */
    int think_open;     /* its prompt ends inside a think block */
    int tools;          /* a chat whose reply is split by tools.h */
    int tool_format;    /* srv_tool_format */
    uint64_t tool_seed; /* the calls' ids are made from it (and the choice) */
    const resp_echo *echo; /* a completion's echo: each prompt's (NULL: no echo) */
    size_t n_each;      /* choices of each prompt (n): choice i continues prompt i / n_each */
} resp_meta;

/* Choice i's echo (NULL without echo). */
static inline const resp_echo *resp_echo_of(const resp_meta *m, size_t i)
{
    return m->echo ? &m->echo[i / m->n_each] : NULL;
}

/* The bytes of choice i's echo, before its generated text (0 without echo). */
static inline size_t resp_echo_len(const resp_meta *m, size_t i)
{
    return m->echo ? m->echo[i / m->n_each].len : 0;
}

/* Frees echo[0..n) and the array. */
void resp_echo_free(resp_echo *echo, size_t n);

typedef struct resp_usage {
    size_t prompt_tokens, completion_tokens;
    size_t n_cached; /* prompt tokens reused from a slot (the log's, not the API's) */
} resp_usage;

/* Adds choice i's tokens, its job at p: the generated ones, and its
 * prompt's with the prompt's first choice only (the others read the same
 * prompt; OpenAI and vLLM count each prompt once). */
void resp_usage_add(resp_usage *u, const resp_meta *m, size_t i, const srv_progress *p);

char *resp_error(const srv_error *e);
char *resp_health(void);
/* GET /metrics: Prometheus's text format with llama-server's names. */
char *resp_metrics(const srv_stats *st);
char *resp_models(const char *model, int64_t created);
/* POST /v1/embeddings: vecs[0..n) of dim floats each, as lists of numbers
 * or (base64) the base64 of their little-endian float32 bytes. */
char *resp_embeddings(const char *model, const float *vecs, size_t n, uint32_t dim, int base64,
                      size_t prompt_tokens);
char *resp_tokens(const ml_token *ids, size_t n);
char *resp_content(const char *text, size_t len);

/* The "logprobs" of a choice for tokens p[0..n): a chat's {"content":
 * [{token, logprob, bytes, top_logprobs}]}, a completion's {tokens,
 * token_logprobs, top_logprobs, text_offset} with offsets from `offset`
 * (the bytes of text before p[0]'s).  A token's text is its piece as t
 * decodes it alone.  NULL when memory runs out. */
json_t *resp_logprobs(srv_kind kind, const ml_mlt *t, const srv_tokprob *p, size_t n,
                      size_t offset);

/* An echoed prompt's "logprobs" (a completion's, tokens p[0..n); p[0]
 * with a NaN logprob: null, and null top_logprobs): each token's
 * text_offset counts back from the end of the echoed text's len bytes, so
 * that a space the tokenizer put before the first word falls at 0. */
json_t *resp_prompt_logprobs(const ml_mlt *t, const srv_tokprob *p, size_t n, size_t len);
/* Appends the entries of completion logprobs b (taken) to a's; -1 when
 * memory ran out or either is NULL. */
int resp_logprobs_join(json_t *a, json_t *b);

/* Choice `index` of an answer: text[0..len) (a message for a chat), its
 * logprobs (taken; NULL: null), finish_reason ("stop" or "length");
 * NULL when memory runs out. */
json_t *resp_choice(const resp_meta *m, unsigned index, const char *text, size_t len,
                    const ml_buf *reasoning, json_t *logprobs, const char *finish);
/* The whole answer: the choices (an array, taken; NULL when building it
 * failed) and the usage. */
char *resp_completion(const resp_meta *m, json_t *choices, const resp_usage *u);

/* One event "data: {...}\n\n" of a stream, for choice `index`: the first
 * chunk of a chat (role "assistant", empty content) when first is set; a
 * content delta text[0..len) with its tokens' logprobs (taken; NULL:
 * null); or, when finish is not NULL, the last chunk with an empty delta
 * and the finish_reason. */
char *resp_chunk(const resp_meta *m, unsigned index, int first, const char *text, size_t len,
                 json_t *logprobs, const char *finish);
/* choice (a chat's, taken) with the calls (taken) as its message's
 * tool_calls: content null when it is empty, finish_reason "tool_calls"
 * when it was "stop".  NULL when memory runs out. */
json_t *resp_tool_calls(json_t *choice, json_t *calls);
/* A chat chunk whose delta is the tool calls (taken), each with its index
 * and whole. */
char *resp_tool_chunk(const resp_meta *m, unsigned index, json_t *calls);
/* A chat chunk whose delta is reasoning_content text[0..len). */
char *resp_reasoning_chunk(const resp_meta *m, unsigned index, const char *text, size_t len,
                           json_t *logprobs);
/* The usage chunk of stream_options.include_usage: no choices. */
char *resp_usage_chunk(const resp_meta *m, const resp_usage *u);
/* An error inside a stream, as an event. */
char *resp_stream_error(const srv_error *e);

#define RESP_DONE "data: [DONE]\n\n"

#endif
