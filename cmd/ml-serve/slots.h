/* slots.h - the scheduler: --parallel slots, each a sequence of one shared
 * context (seq.h), and one thread that advances every generating slot by
 * one token per step, all in one batch, beside a chunk of a new prompt
 * (the prefilling slots take turns); requests
 * beyond the slots wait in a bounded queue.  A job is one request's
 * generation; the HTTP side submits it, reads its text as it grows, and
 * releases it. */
#ifndef ML_SERVE_SLOTS_H
#define ML_SERVE_SLOTS_H

#include <mlcore.h>

#include <stddef.h>

typedef struct srv_sched srv_sched;
typedef struct srv_job srv_job;

typedef struct srv_sched_params {
    unsigned n_slots;  /* --parallel */
    size_t max_queue;  /* --queue: jobs that may wait for a slot */
    uint32_t n_ctx;    /* positions of each slot */
    uint32_t n_batch;  /* prompt tokens per step of a prefill */
    unsigned threads;  /* of the slots' one context */
    ml_cache_type cache_k, cache_v; /* --cache-type: how its KV cache holds keys, values */
} srv_sched_params;

/* Builds the slots' context and starts the thread.  Reports nothing;
 * err says what failed. */
ml_status srv_sched_new(const ml_model *m, const ml_mlt *mlt, const srv_sched_params *p,
                        srv_sched **out, ml_error *err);
/* Stops taking jobs; the queued ones end with ML_E_UNSUPPORTED ("shutting
 * down"); with `cut`, the running ones end at their next step too (their
 * text so far kept, finish_reason "length").  Then waits for the
 * running ones and the thread, and frees everything. */
void srv_sched_free(srv_sched *s, int cut);
void srv_sched_drain(srv_sched *s, int cut);
uint32_t srv_sched_n_ctx(const srv_sched *s);

typedef struct srv_job_params {
    const ml_token *prompt;    /* copied */
    size_t n_prompt;           /* 1 .. n_ctx - 1 */
    uint32_t max_tokens;       /* 1 .. n_ctx - n_prompt */
    ml_sampler_params sp;
    const char *const *stops;  /* copied */
    size_t n_stops;
    int ignore_eos;            /* the end-of-generation tokens are never drawn */
    const ml_logit_bias *bias; /* copied; ids below the vocabulary */
    size_t n_bias;
    int continues;             /* a completion: the text goes on from the prompt */
} srv_job_params;

typedef enum srv_submit_status {
    SRV_SUBMITTED,
    SRV_QUEUE_FULL,     /* every slot busy and --queue jobs waiting */
    SRV_SHUTTING_DOWN,
    SRV_NOMEM
} srv_submit_status;

/* A new job in *out, which the caller must srv_job_release. */
srv_submit_status srv_submit(srv_sched *s, const srv_job_params *p, srv_job **out);

/* Where a job is: its text so far and, once done, how it ended. */
typedef struct srv_progress {
    size_t len;         /* bytes of text released so far */
    int done;
    const char *finish; /* "stop" or "length" once done; NULL after a failure */
    ml_status status;   /* the failure, or ML_OK */
    char msg[160];
    size_t n_prompt, n_gen, n_cached; /* tokens: prompt, generated, prompt reused */
} srv_progress;

/* Waits at most timeout_ms for text past `have` bytes or the end; the
 * new text goes into a new buffer *text of *len bytes (NULL when none;
 * free it).  *p tells where the job is. */
void srv_job_wait(srv_job *j, size_t have, int timeout_ms, char **text, size_t *len,
                  srv_progress *p);
/* The client went away: the job ends at its next step, freeing its slot. */
void srv_job_cancel(srv_job *j);
/* The caller is done with the job. */
void srv_job_release(srv_job *j);

#endif
