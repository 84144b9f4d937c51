/* server.h - what the parts of ml-serve share: the options, the model and
 * tokenizer they serve, the scheduler, and the endpoints' route table. */
#ifndef ML_SERVE_SERVER_H
#define ML_SERVE_SERVER_H

#include "http.h"
#include "slots.h"
#include "tools.h"

#include <mlcore.h>

#include <pthread.h>
#include <stdint.h>

typedef struct srv_opts {
    const char *model, *tok, *host, *api_key, *chat_template, *chat_template_file;
    uint64_t port, threads, ctx, parallel, timeout, max_body, queue;
    ml_cache_type cache_k, cache_v;
    int no_mmap; /* --no-mmap: the model read into memory, not mapped */
    int reasoning; /* --reasoning-format deepseek: think blocks to reasoning_content */
    int embeddings;     /* --embeddings: POST /v1/embeddings served */
    ml_pooling pooling; /* --pooling, or the model's (0 until the model is open) */
    cli_spec spec;      /* --spec-type, its sizes and -md's options */
} srv_opts;

typedef struct srv_server {
    srv_opts o;
    ml_mlb *mlb;
    ml_model *model;
    ml_mlt *mlt;
    ml_tok *tok;            /* not thread-safe: used under tok_lock */
    pthread_mutex_t tok_lock;
    ml_jinja *tmpl;         /* the chat template, or NULL (chat completions refused) */
    srv_tool_caps tools;    /* how the template writes tool calls */
    srv_sched *sched;
    cli_draft *draft;       /* -md: the draft model, lent to the scheduler */
    ml_ctx *embed_ctx;      /* --embeddings: a context of its own, used under embed_lock */
    pthread_mutex_t embed_lock;
    char model_id[128];     /* the model's file name without .mlb */
    int64_t created;        /* when the server started (Unix seconds) */
    uint64_t n_requests;    /* for ids and default seeds */
} srv_server;

/* The endpoints (endpoints.c), for http_params.routes. */
extern const http_route srv_routes[];
extern const size_t srv_n_routes;

#endif
