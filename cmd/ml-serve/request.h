/* request.h - the JSON body of an API request read into a plain struct:
 * every field the server honours, checked for type and range, with the
 * OpenAI error a client gets for a bad one.  Pure: no I/O, no model, so
 * that fuzz/fuzz_serve_request.c can drive it. */
#ifndef ML_SERVE_REQUEST_H
#define ML_SERVE_REQUEST_H

#include <mlcore.h>

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

/* Sampling defaults for fields a request leaves out: llama-server's (and
 * ml-run's), which suit small local models better than OpenAI's 1.0. */
#define SRV_DEFAULT_TEMP 0.8
#define SRV_DEFAULT_TOP_K 40
#define SRV_DEFAULT_TOP_P 0.95
#define SRV_DEFAULT_MIN_P 0.05

#define SRV_MAX_STOPS 16 /* stop strings of one request (OpenAI allows 4) */
#define SRV_MAX_N 16     /* choices of one request (n), each a job of its own */
#define SRV_MAX_PROMPTS 64 /* prompts of one completion (lm-evaluation-harness's batches) */
#define SRV_MAX_CHOICES 64 /* jobs of one request: prompts x n, as the default --queue */
#define SRV_MAX_INPUTS 2048 /* inputs of one embeddings request (OpenAI's limit) */

typedef enum srv_kind {
    SRV_CHAT,       /* POST /v1/chat/completions */
    SRV_COMPLETION, /* POST /v1/completions */
    SRV_TOKENIZE,   /* POST /tokenize */
    SRV_DETOKENIZE, /* POST /detokenize */
    SRV_EMBEDDINGS  /* POST /v1/embeddings */
} srv_kind;

/* What a client is told when its request is refused: the HTTP status and
 * the members of OpenAI's {"error": {...}} object. */
typedef struct srv_error {
    int status;        /* 400, 401, 404, 413, 503, ... */
    const char *type;  /* "invalid_request_error", "server_error", ... */
    const char *param; /* the field at fault, or NULL */
    const char *code;  /* a short machine-readable reason, or NULL */
    char message[320];
    char param_buf[64];  /* param when it names a field of the body (cut) */
} srv_error;

/* Fills e (status 400 unless set otherwise by the caller) and returns -1. */
int srv_fail(srv_error *e, int status, const char *type, const char *param, const char *code,
             const char *fmt, ...) __attribute__((format(printf, 6, 7)));

/* tool_choice. */
typedef enum srv_tool_choice {
    SRV_TOOL_AUTO,     /* the model decides (the default with tools) */
    SRV_TOOL_NONE,     /* no call: the tools are not shown to the model */
    SRV_TOOL_REQUIRED, /* at least one call, of any tool */
    SRV_TOOL_NAMED     /* a call of tool_name */
} srv_tool_choice;

#define SRV_MAX_TOOLS 128 /* tools of one request (OpenAI's limit) */

/* One prompt of a completion: its text as written (NUL-terminated), or
 * token ids taken as given (text NULL; no BOS is added). */
typedef struct srv_prompt {
    char *text;
    size_t text_len;
    ml_token *tokens;
    size_t n_tokens;
} srv_prompt;

typedef struct srv_request {
    srv_kind kind;
    json_t *messages;    /* chat: the messages array (a reference), as the template reads it */
    json_t *template_vars; /* chat: more variables for the template (a new object, or NULL):
                            * chat_template_kwargs' members and reasoning_effort */
    char *text;          /* tokenize: the content (NUL-terminated) */
    size_t text_len;
    ml_token *tokens;    /* detokenize: the ids */
    size_t n_tokens;
    srv_prompt *prompts; /* completion: 1 .. SRV_MAX_PROMPTS prompts, each answered by n
                          * choices (choice i continues prompt i / n) */
    size_t n_prompts;
    int add_special;     /* tokenize: BOS as the tokenizer adds it */
    int64_t max_tokens;  /* -1: not given (the rest of the context); 0 only with echo */
    ml_sampler_params sp;
    int seed_set;        /* sp.seed came from the request */
    char *stops[SRV_MAX_STOPS];
    size_t n_stops;
    size_t n;            /* choices of each prompt: 1 .. SRV_MAX_N, and n_prompts * n at
                          * most SRV_MAX_CHOICES */
    int think_open;      /* chat: the rendered prompt ends inside a think block */
    json_t *inputs;      /* embeddings: an array (a reference) of strings or of token-id arrays */
    ml_grammar *grammar; /* the output's grammar (grammar, response_format), or NULL */
    const char *grammar_text; /* its text (in the request or static), for the jobs' own */
    size_t grammar_len;
    char *grammar_own;   /* grammar_text when it is the request's (freed with it) */
    int base64;          /* embeddings: encoding_format "base64" */
    int64_t dimensions;  /* embeddings: asked for (-1: not given) */
    int stream;          /* Server-Sent Events */
    int include_usage;   /* stream_options.include_usage */
    int ignore_eos;      /* llama-server's: no end-of-generation token is drawn */
    ml_logit_bias *bias; /* logit_bias: ids below the vocabulary */
    size_t n_bias;
    json_t *tools;       /* chat: the tools (a reference), or NULL */
    srv_tool_choice tool_choice;
    char tool_name[65];  /* SRV_TOOL_NAMED: the tool */
    int parallel_tools;  /* parallel_tool_calls: more than one call may come */
    int echo;            /* completion: the prompt comes back before the text (and
                          * with logprobs, its tokens' log-probabilities) */
    int logprobs;        /* the generated tokens' log-probabilities asked for */
    unsigned top_logprobs; /* and the most likely tokens' at each (0..20) */
} srv_request;

/* Reads body[0..len) as a request of `kind`.  Token ids must lie below
 * vocab.  Returns 0, or -1 with e filled (400: malformed JSON, bad UTF-8,
 * a wrong type or range, a field this server refuses).  Release *r with
 * srv_request_free, also after a failure. */
int srv_request_parse(srv_kind kind, const char *body, size_t len, uint32_t vocab, srv_request *r,
                      srv_error *e);
void srv_request_free(srv_request *r);

/* A tool's name (tool.function.name), or NULL where it has none. */
const char *srv_tool_name(const json_t *tool);
const json_t *srv_tool_params(const json_t *tool);

#endif
