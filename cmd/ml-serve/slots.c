/* slots.c - the scheduler (slots.h).  One thread computes; the HTTP
 * threads only submit, read and cancel jobs under the one lock.  The
 * slots are the sequences of one shared context (seq.h).  A step samples,
 * in slot order, the next token of every slot that generates, and
 * evaluates them all in one batch with at most one chunk of a prompt
 * (the prefilling slots take turns), so decoding reads the weights once
 * for every slot and a long prompt delays the others by a chunk per step,
 * not by the whole prompt.  Each job samples with its own sampler from
 * its own sequence's logits, and the kernels give the same bits for any
 * batch, so a request's tokens do not depend on what else runs.  What a
 * token goes through from logits to text is the library's generator
 * (mlcore/generate.h), one per slot. */
#include "slots.h"

#include "seq.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct srv_job {
    /* fixed at submission */
    ml_token *prompt;
    size_t n_prompt;
    uint32_t max_tokens;
    ml_sampler_params sp;
    char **stops;
    size_t n_stops;
    int ignore_eos;
    ml_logit_bias *bias;
    size_t n_bias;
    int continues;
    int logprobs;
    unsigned top_logprobs;
    ml_grammar *grammar;
    ml_grammar_proc *gproc;
    int score_prompt;
    srv_tokprob *prompt_probs; /* score_prompt: one per prompt token, filled by
                                * the scheduler up to n_prompt_probs */
    /* under the scheduler's lock */
    size_t n_prompt_probs;
    srv_tokprob *probs;  /* one per generated token, with logprobs */
    size_t n_probs, cap_probs;
    srv_sched *s;
    int refs;           /* the client's and, until it ends, the scheduler's */
    int cancel, done;
    const char *finish;
    ml_status status;
    char msg[160];
    char *text;         /* released text */
    size_t len, cap;
    size_t n_gen, n_cached;
    double t_start, t_first; /* the scheduler's clock: slot taken, first token */
    pthread_cond_t grew; /* text grew or the job ended */
    srv_job *next;       /* in the queue */
};

/* A slot: a sequence of the context and the job it runs (NULL: free). */
typedef struct slot {
    uint32_t seq;        /* its sequence in the context */
    srv_job *job;
    size_t fed;          /* prompt tokens in the sequence */
    float *logits;       /* of its last token, from the last step */
    ml_token next;       /* the token it evaluates in this step */
    int drawn;           /* next is drawn already (by the last step's checks) */
    cli_spec_run spec;   /* --spec-type: how many it may guess */
    ml_token *spec_buf;  /* n_ctx + max guesses: its history, next and the guesses */
    size_t spec_len;     /* the history's length when it guessed */
    size_t guessed;      /* guesses in this step's run */
    ml_gen *gen;         /* its job's sampler, stop strings and decoder */
    float *raw;          /* the logits before the generator changes them (logprobs) */
    uint64_t used;       /* when it last took a job: ties go to the oldest */
} slot;

struct srv_sched {
    pthread_mutex_t lock;
    pthread_cond_t wake; /* a job arrived, was cancelled, or closing */
    pthread_t thread;
    int started;
    const ml_mlt *mlt;
    uint32_t vocab;
    srv_ctx *ctx;
    slot *slots;
    unsigned n_slots;
    unsigned next_prefill; /* the slot whose turn it is to prefill first */
    srv_run *runs;       /* n_slots: a step's runs */
    slot **run_slot;     /* n_slots: whose each run is */
    srv_job *head, *tail;
    size_t n_queued, max_queue;
    int closing, cut;
    uint64_t clock;
    cli_spec spec;       /* --spec-type */
    cli_draft *draft;    /* -md: its sequence i follows slot i's (borrowed) */
    cli_draft_ask *asks; /* n_slots: a step's requests to the draft */
    size_t *ask_run;     /* n_slots: the run each is for */
    srv_stats stats;     /* under the lock */
};

/* Seconds on a clock that never goes back. */
static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* ------------------------------------------------------------------------
 * Jobs
 * ------------------------------------------------------------------------ */
static void job_free(srv_job *j)
{
    for (size_t i = 0; i < j->n_stops; i++)
        free(j->stops[i]);
    free(j->stops);
    free(j->bias);
    free(j->probs);
    free(j->prompt_probs);
    ml_grammar_proc_free(j->gproc);
    ml_grammar_free(j->grammar);
    free(j->prompt);
    free(j->text);
    pthread_cond_destroy(&j->grew);
    free(j);
}

/* Under the lock. */
static void job_unref(srv_job *j)
{
    if (--j->refs == 0)
        job_free(j);
}

static srv_job *job_new(const srv_job_params *p)
{
    srv_job *j = calloc(1, sizeof *j);
    if (!j) {
        ml_grammar_proc_free(p->gproc);
        ml_grammar_free(p->grammar);
        return NULL;
    }
    j->grammar = p->grammar, j->gproc = p->gproc; /* taken, whatever becomes of the job */
    pthread_cond_init(&j->grew, NULL);
    j->prompt = malloc(p->n_prompt * sizeof *j->prompt);
    j->stops = p->n_stops ? calloc(p->n_stops, sizeof *j->stops) : NULL;
    j->bias = p->n_bias ? malloc(p->n_bias * sizeof *j->bias) : NULL;
    j->prompt_probs = p->score_prompt ? malloc(p->n_prompt * sizeof *j->prompt_probs) : NULL;
    int ok = j->prompt && (!p->n_stops || j->stops) && (!p->n_bias || j->bias) &&
             (!p->score_prompt || j->prompt_probs);
    for (size_t i = 0; ok && i < p->n_stops; i++, j->n_stops++)
        ok = (j->stops[i] = strdup(p->stops[i])) != NULL;
    if (!ok) {
        job_free(j);
        return NULL;
    }
    memcpy(j->prompt, p->prompt, p->n_prompt * sizeof *j->prompt);
    if (p->n_bias)
        memcpy(j->bias, p->bias, p->n_bias * sizeof *j->bias);
    j->n_bias = p->n_bias;
    j->continues = p->continues;
    j->logprobs = p->logprobs;
    j->top_logprobs = p->top_logprobs < SRV_MAX_TOP_LOGPROBS ? p->top_logprobs
                                                              : SRV_MAX_TOP_LOGPROBS;
    j->n_prompt = p->n_prompt;
    if ((j->score_prompt = p->score_prompt)) { /* the first token: nothing before it */
        j->prompt_probs[0] = (srv_tokprob){.id = p->prompt[0], .logprob = NAN};
        j->n_prompt_probs = 1;
    }
    j->max_tokens = p->max_tokens;
    j->sp = p->sp;
    j->ignore_eos = p->ignore_eos;
    j->refs = 2;
    return j;
}

/* Under the lock: appends released text. */
static int job_append(srv_job *j, const char *t, size_t n)
{
    if (n > j->cap - j->len) {
        char *p = ml_array_reserve(j->text, &j->cap, j->len + n, 1);
        if (!p)
            return -1;
        j->text = p;
    }
    memcpy(j->text + j->len, t, n);
    j->len += n;
    pthread_cond_broadcast(&j->grew);
    return 0;
}

/* Under the lock: the job is over; the scheduler lets go of it. */
static void job_end(srv_job *j, const char *finish, ml_status status, const char *msg)
{
    srv_stats *st = &j->s->stats;
    if (j->n_gen) { /* a job that generated: its prompt and generation times */
        st->prompt_seconds += j->t_first - j->t_start;
        st->predicted_seconds += now() - j->t_first;
        st->tokens_predicted += j->n_gen;
    }
    j->done = 1;
    j->finish = status ? NULL : finish;
    j->status = status;
    if (msg)
        snprintf(j->msg, sizeof j->msg, "%.150s", msg);
    pthread_cond_broadcast(&j->grew);
    job_unref(j);
}

void srv_job_wait(srv_job *j, size_t have, int timeout_ms, char **text, size_t *len,
                  srv_progress *p)
{
    srv_sched *s = j->s;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += timeout_ms / 1000;
    until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L)
        until.tv_sec++, until.tv_nsec -= 1000000000L;
    pthread_mutex_lock(&s->lock);
    while (j->len <= have && !j->done)
        if (pthread_cond_timedwait(&j->grew, &s->lock, &until) == ETIMEDOUT)
            break;
    *text = NULL, *len = 0;
    if (j->len > have && (*text = malloc(j->len - have)))
        memcpy(*text, j->text + have, *len = j->len - have);
    *p = (srv_progress){j->len, j->done, j->finish, j->status, "", j->n_prompt, j->n_gen,
                        j->n_cached};
    memcpy(p->msg, j->msg, sizeof p->msg);
    pthread_mutex_unlock(&s->lock);
}

size_t srv_job_logprobs(srv_job *j, size_t from, srv_tokprob **out)
{
    pthread_mutex_lock(&j->s->lock);
    size_t n = j->n_probs > from ? j->n_probs - from : 0;
    *out = n ? malloc(n * sizeof **out) : NULL;
    if (*out)
        memcpy(*out, j->probs + from, n * sizeof **out);
    pthread_mutex_unlock(&j->s->lock);
    return *out ? n : 0;
}

size_t srv_job_prompt_logprobs(srv_job *j, srv_tokprob **out)
{
    pthread_mutex_lock(&j->s->lock);
    size_t n = j->score_prompt && j->n_prompt_probs == j->n_prompt ? j->n_prompt : 0;
    *out = n ? malloc(n * sizeof **out) : NULL;
    if (*out)
        memcpy(*out, j->prompt_probs, n * sizeof **out);
    pthread_mutex_unlock(&j->s->lock);
    return *out ? n : 0;
}

void srv_job_cancel(srv_job *j)
{
    pthread_mutex_lock(&j->s->lock);
    j->cancel = 1;
    pthread_cond_signal(&j->s->wake);
    pthread_mutex_unlock(&j->s->lock);
}

void srv_job_release(srv_job *j)
{
    srv_sched *s = j->s;
    pthread_mutex_lock(&s->lock);
    j->cancel = 1; /* nobody reads it any more */
    pthread_cond_signal(&s->wake);
    job_unref(j);
    pthread_mutex_unlock(&s->lock);
}

srv_submit_status srv_submit(srv_sched *s, const srv_job_params *p, srv_job **out)
{
    srv_job *j = job_new(p);
    if (!j)
        return SRV_NOMEM;
    j->s = s;
    pthread_mutex_lock(&s->lock);
    unsigned busy = 0;
    for (unsigned i = 0; i < s->n_slots; i++)
        busy += s->slots[i].job != NULL;
    srv_submit_status st = s->closing                                          ? SRV_SHUTTING_DOWN
                           : busy + s->n_queued >= s->n_slots + s->max_queue ? SRV_QUEUE_FULL
                                                                              : SRV_SUBMITTED;
    if (st == SRV_SUBMITTED) {
        if (s->tail)
            s->tail->next = j;
        else
            s->head = j;
        s->tail = j;
        s->n_queued++;
        pthread_cond_signal(&s->wake);
    }
    pthread_mutex_unlock(&s->lock);
    if (st != SRV_SUBMITTED) {
        job_free(j);
        return st;
    }
    *out = j;
    return st;
}

/* ------------------------------------------------------------------------
 * Slots
 * ------------------------------------------------------------------------ */
/* Under the lock: the free slot whose sequence shares the longest start
 * with the prompt, the one used longest ago among equals; NULL if none.
 * A job that scores its prompt reuses nothing: it takes the slot used
 * longest ago, leaving the others' prefixes to later requests. */
static slot *pick_slot(srv_sched *s, const srv_job *j)
{
    slot *best = NULL;
    size_t best_common = 0;
    for (unsigned i = 0; i < s->n_slots; i++) {
        slot *sl = &s->slots[i];
        if (sl->job)
            continue;
        size_t c = j->score_prompt ? 0 : srv_ctx_common(s->ctx, sl->seq, j->prompt, j->n_prompt);
        if (!best || c > best_common || (c == best_common && sl->used < best->used))
            best = sl, best_common = c;
    }
    return best;
}

/* The generator's text into the job: the slot's sink, called without
 * the lock. */
static ml_status release_text(void *ctx, const void *text, size_t n, ml_error *err)
{
    slot *sl = ctx;
    srv_sched *s = sl->job->s;
    (void)err;
    pthread_mutex_lock(&s->lock);
    int rc = job_append(sl->job, text, n);
    pthread_mutex_unlock(&s->lock);
    return rc ? ML_E_NOMEM : ML_OK;
}

/* Token id's log-probability in raw (vocab logits) and the top n's. */
static void token_logprob(const float *raw, uint32_t vocab, ml_token id, unsigned n,
                          srv_tokprob *out)
{
    float max = -INFINITY;
    for (uint32_t i = 0; i < vocab; i++)
        max = raw[i] > max ? raw[i] : max;
    double sum = 0;
    for (uint32_t i = 0; i < vocab; i++)
        sum += exp((double)raw[i] - max);
    float lse = (float)(max + log(sum));
    out->id = id;
    out->logprob = raw[id] - lse;
    out->n_top = 0;
    for (uint32_t i = 0; i < vocab; i++) { /* insertion into the n best */
        unsigned k;
        if (out->n_top < n)
            k = out->n_top++;
        else if (n && raw[i] > raw[out->top[n - 1]])
            k = n - 1;
        else
            continue;
        while (k > 0 && raw[i] > raw[out->top[k - 1]]) {
            out->top[k] = out->top[k - 1];
            k--;
        }
        out->top[k] = i;
    }
    for (unsigned k = 0; k < out->n_top; k++)
        out->top_logprob[k] = raw[out->top[k]] - lse;
}

/* Without the lock, by the scheduler's thread: the log-probabilities of
 * the prompt tokens after each of a scoring prefill's n tokens, from
 * their rows (the entries past n_prompt_probs are this thread's alone),
 * then counted under the lock.  -1 when the rows are missing (memory). */
static int score_chunk(srv_sched *s, slot *sl, const float *rows, size_t n)
{
    srv_job *j = sl->job;
    if (!rows)
        return -1;
    size_t end = sl->fed + n + 1 < j->n_prompt ? sl->fed + n + 1 : j->n_prompt;
    for (size_t k = sl->fed + 1; k < end; k++)
        token_logprob(rows + (k - 1 - sl->fed) * (size_t)s->vocab, s->vocab, j->prompt[k],
                      j->top_logprobs, &j->prompt_probs[k]);
    pthread_mutex_lock(&s->lock);
    j->n_prompt_probs = end;
    pthread_mutex_unlock(&s->lock);
    return 0;
}

/* Under the lock: the kept token's log-probabilities for the job. */
static int keep_logprob(srv_job *j, const slot *sl, uint32_t vocab, ml_token id)
{
    if (j->n_probs == j->cap_probs) {
        size_t cap = j->cap_probs ? 2 * j->cap_probs : 64;
        srv_tokprob *p = realloc(j->probs, cap * sizeof *p);
        if (!p)
            return -1;
        j->probs = p, j->cap_probs = cap;
    }
    token_logprob(sl->raw, vocab, id, j->top_logprobs, &j->probs[j->n_probs++]);
    return 0;
}

/* Each token kept counts before its text arrives, so that a reader never
 * sees text without its token in the count (nor without its
 * log-probabilities). */
static ml_status count_token(void *ctx, ml_token id, ml_error *err)
{
    slot *sl = ctx;
    srv_job *j = sl->job;
    (void)err;
    pthread_mutex_lock(&j->s->lock);
    if (j->n_gen++ == 0)
        j->t_first = now();
    int oom = j->logprobs && keep_logprob(j, sl, j->s->vocab, id);
    pthread_mutex_unlock(&j->s->lock);
    return oom ? ML_E_NOMEM : ML_OK;
}

/* Under the lock: gives a slot its job.  At least the last prompt token
 * is evaluated again, for the logits of the first generated one; a job
 * that scores its prompt evaluates all of it (the cached positions'
 * logits are gone). */
static void slot_start(srv_sched *s, slot *sl, srv_job *j)
{
    ml_error err;
    size_t keep = srv_ctx_common(s->ctx, sl->seq, j->prompt, j->n_prompt);
    if (keep >= j->n_prompt)
        keep = j->n_prompt - 1;
    if (j->score_prompt)
        keep = 0;
    if (j->score_prompt && srv_ctx_score_ready(s->ctx)) {
        job_end(j, NULL, ML_E_NOMEM, "out of memory for the prompt's logits");
        return;
    }
    sl->fed = srv_ctx_keep(s->ctx, sl->seq, keep);
    sl->logits = NULL;
    sl->drawn = 0;
    sl->guessed = 0;
    cli_spec_start(&s->spec, &sl->spec, (size_t)srv_ctx_n_score_chunk(s->ctx) + 1);
    j->n_cached = sl->fed;
    if (j->logprobs && !sl->raw && !(sl->raw = malloc((size_t)s->vocab * sizeof *sl->raw))) {
        job_end(j, NULL, ML_E_NOMEM, "out of memory");
        return;
    }
    j->t_start = now();
    sl->used = ++s->clock;
    ml_gen_params gp = {.vocab = s->vocab, .sampler = j->sp, .mlt = s->mlt,
                        .flags = (j->ignore_eos ? ML_GEN_IGNORE_EOS : 0) |
                                 (j->continues ? ML_GEN_CONTINUE : 0),
                        .stops = (const char *const *)j->stops, .n_stops = j->n_stops,
                        .max_tokens = j->max_tokens, .on_text = release_text, .text_ctx = sl,
                        .on_token = count_token, .token_ctx = sl, .bias = j->bias,
                        .n_bias = j->n_bias};
    ml_logits_proc grammar = {ml_grammar_proc_apply, ml_grammar_proc_accept, j->gproc};
    if (j->gproc)
        gp.procs = &grammar, gp.n_procs = 1;
    ml_status st = ml_gen_new(&gp, &sl->gen, &err);
    if (st) {
        job_end(j, NULL, st, err.msg);
        return;
    }
    sl->job = j;
}

/* Under the lock: the slot's job is over. */
static void slot_finish(slot *sl, const char *finish, ml_status st, const char *msg)
{
    job_end(sl->job, finish, st, msg);
    sl->job = NULL;
    ml_gen_free(sl->gen);
    sl->gen = NULL;
}

/* Under the lock: queued jobs into free slots, in order; cancelled ones
 * (their client is gone) are dropped. */
static void admit(srv_sched *s)
{
    while (s->head) {
        srv_job *j = s->head;
        slot *sl = NULL;
        if (!j->cancel && !s->closing && !(sl = pick_slot(s, j)))
            return;
        s->head = j->next;
        if (!s->head)
            s->tail = NULL;
        s->n_queued--;
        j->next = NULL;
        if (j->cancel || s->closing)
            job_end(j, NULL, ML_E_UNSUPPORTED, j->cancel ? "cancelled" : "shutting down");
        else
            slot_start(s, sl, j);
    }
}

/* One generated token: "stop" or "length" when the job ends with it
 * (the text held back then released), NULL when it goes on (sl->next is
 * then to be evaluated); *st reports a failure.  The history the
 * penalties look back on is the sequence's first len tokens: prompt and
 * generated tokens, all evaluated by now; logits are the last one's. */
static const char *generate_one(srv_sched *s, slot *sl, float *logits, size_t len,
                                ml_status *st, ml_error *err)
{
    size_t n_ctx = srv_ctx_n_ctx(s->ctx);
    if (sl->job->logprobs)
        memcpy(sl->raw, logits, (size_t)s->vocab * sizeof *sl->raw);
    ml_gen_input in = {.logits = logits,
                       .history = len ? srv_ctx_held(s->ctx, sl->seq) : NULL,
                       .n_history = len,
                       .room = len < n_ctx ? n_ctx - len : 0};
    ml_gen_result res;
    if ((*st = ml_gen_next(sl->gen, &in, &res, err)))
        return NULL;
    if (res.end == ML_GEN_GOING) {
        sl->next = res.token;
        return NULL;
    }
    if ((*st = ml_gen_finish(sl->gen, err)))
        return NULL;
    return res.end == ML_GEN_EOG || res.end == ML_GEN_STOP ? "stop" : "length";
}

/* Without the lock: the slot's job ends, finished or failed. */
static void slot_end(srv_sched *s, slot *sl, const char *finish, ml_status st, ml_error *err)
{
    if (st == ML_E_NOMEM && !err->msg[0])
        strcpy(err->msg, "out of memory");
    pthread_mutex_lock(&s->lock);
    slot_finish(sl, finish, st, err->msg);
    pthread_mutex_unlock(&s->lock);
}

/* Without the lock, by the scheduler's thread (the one that changes the
 * caches): a step's numbers into the stats. */
static void count_step(srv_sched *s, size_t n_runs, size_t prefilled)
{
    uint64_t held = 0;
    for (unsigned i = 0; i < s->n_slots; i++)
        held += srv_ctx_len(s->ctx, s->slots[i].seq);
    pthread_mutex_lock(&s->lock);
    s->stats.n_decode++;
    s->stats.busy_slots += n_runs;
    s->stats.prompt_tokens += prefilled;
    s->stats.kv_tokens = held;
    pthread_mutex_unlock(&s->lock);
}

/* The slot's history and its next token into spec_buf, where its
 * guesses will follow them; returns the history's length. */
static size_t spec_history(srv_sched *s, slot *sl)
{
    size_t len = srv_ctx_len(s->ctx, sl->seq);
    memcpy(sl->spec_buf, srv_ctx_held(s->ctx, sl->seq), len * sizeof *sl->spec_buf);
    sl->spec_buf[len] = sl->next;
    return sl->spec_len = len;
}

/* The most guesses slot sl may make in a step with `spare` rows left:
 * none past its request's max_tokens. */
static size_t slot_budget(const slot *sl, size_t spare)
{
    size_t left = cli_spec_left(sl->job->max_tokens, sl->job->n_gen);
    return left < spare ? left : spare;
}

/* --spec-type ngram-simple: guesses of what follows the slot's history
 * and its next token, as many as the speculation's cap, the sequence's
 * room to take them back and the step's spare rows allow (0: none). */
static size_t guess(srv_sched *s, slot *sl, size_t used, size_t *spare)
{
    if (!*spare || !sl->spec_buf)
        return 0;
    size_t len = spec_history(s, sl);
    cli_spec_step step = {srv_ctx_ml(s->ctx), used, srv_ctx_rewind_room(s->ctx, sl->seq),
                          slot_budget(sl, *spare)};
    size_t k = cli_spec_guess(&s->spec, &sl->spec, &step, sl->spec_buf, len + 1,
                              sl->spec_buf + len + 1);
    *spare -= k;
    return k;
}

/* -md: the draft model's guesses for every generating slot of the step's
 * runs, as many as each slot's cap, its sequence's room to take them
 * back and the step's spare rows allow (reserved in slot order), at
 * least --spec-draft-n-min; the draft's sequences step together (one
 * evaluation per depth for all the slots).  Each run then holds its
 * slot's token and guesses.  A failure of the draft only costs the step
 * its guesses: its sequences follow again at the next. */
static void draft_guesses(srv_sched *s, size_t n_runs, size_t spare)
{
    size_t n = 0;
    for (size_t i = 0; i < n_runs && spare; i++) {
        slot *sl = s->run_slot[i];
        if (sl->fed < sl->job->n_prompt || !sl->spec_buf)
            continue; /* a prefill */
        size_t len = spec_history(s, sl);
        size_t most = cli_spec_most(&sl->spec, srv_ctx_rewind_room(s->ctx, sl->seq),
                                    slot_budget(sl, spare));
        if (!most)
            continue;
        spare -= most;
        s->ask_run[n] = i;
        s->asks[n++] = (cli_draft_ask){.seq = sl->seq, .ids = sl->spec_buf, .n_ids = len + 1,
                                       .most = most, .out = sl->spec_buf + len + 1};
    }
    ml_error err;
    int failed = n && cli_draft_guess_all(s->draft, s->asks, n, &err) != ML_OK;
    for (size_t a = 0; a < n; a++) {
        srv_run *r = &s->runs[s->ask_run[a]];
        slot *sl = s->run_slot[s->ask_run[a]];
        sl->guessed = failed ? 0 : cli_spec_enough(&s->spec, s->asks[a].n);
        r->tokens = sl->spec_buf + sl->spec_len;
        r->n = 1 + sl->guessed;
        r->all_logits = sl->guessed > 0;
    }
}

/* -md: the draft's sequence reads the prompt as far as the slot's has,
 * chunk by chunk beside it, so that its cost is the prompt's (in the
 * prompt's time) and no step reads a whole prompt at once.  A failure
 * leaves it to the first guess. */
static void draft_prefill(srv_sched *s, const slot *sl)
{
    ml_error err;
    if (s->draft)
        (void)cli_draft_follow(s->draft, sl->seq, sl->job->prompt, sl->fed, &err);
}

/* After a step that evaluated the slot's next token and its guesses: a
 * draw per row for as long as each draw is the next guess, as ml-run's
 * speculation does; the sequence keeps what was kept, and the last draw
 * is the next token (drawn already).  The rows are the bits single
 * tokens get and the draws the same draws in the same order, so the
 * text is the text without guesses. */
static void check_guesses(srv_sched *s, slot *sl, float *rows)
{
    const size_t k = sl->guessed, len = sl->spec_len;
    const ml_token *g = sl->spec_buf + len + 1;
    ml_error err;
    ml_status st = ML_OK;
    memset(&err, 0, sizeof err);
    size_t i = 0;
    const char *finish;
    while (!(finish = generate_one(s, sl, rows + i * (size_t)s->vocab, len + 1 + i, &st, &err)) &&
           !st && i < k && sl->next == g[i])
        i++;
    cli_spec_checked(&s->spec, &sl->spec, k, i);
    srv_ctx_keep(s->ctx, sl->seq, len + 1 + i);
    sl->guessed = 0;
    pthread_mutex_lock(&s->lock);
    s->stats.drafted += k;
    s->stats.accepted += i;
    pthread_mutex_unlock(&s->lock);
    if (finish || st)
        slot_end(s, sl, finish, st, &err);
    else
        sl->drawn = 1;
}

/* One step, without the lock: the next token of every generating slot,
 * in slot order, then one evaluation of all of them with a chunk of the
 * prompt of the prefilling slot whose turn it is. */
static void sched_step(srv_sched *s)
{
    slot *pre = NULL;
    for (unsigned k = 0; k < s->n_slots && !pre; k++) {
        unsigned i = (s->next_prefill + k) % s->n_slots;
        slot *sl = &s->slots[i];
        if (sl->job && sl->fed < sl->job->n_prompt)
            pre = sl, s->next_prefill = (i + 1) % s->n_slots;
    }
    size_t n_runs = 0, used = 0; /* the runs so far and their tokens */
    /* guesses only in steps without a prompt chunk: their rows make every
     * token of the step keep its logits */
    size_t spare = s->spec.type && !pre ? srv_ctx_n_score_chunk(s->ctx) : 0;
    for (unsigned i = 0; i < s->n_slots; i++) {
        slot *sl = &s->slots[i];
        srv_job *j = sl->job;
        srv_run *r = &s->runs[n_runs];
        if (!j)
            continue;
        if (sl->fed < j->n_prompt) {
            if (sl != pre)
                continue;
            size_t n = j->n_prompt - sl->fed, nc = j->score_prompt
                                                      ? srv_ctx_n_score_chunk(s->ctx)
                                                      : srv_ctx_n_chunk(s->ctx);
            r->tokens = j->prompt + sl->fed;
            r->n = n < nc ? n : nc;
            r->all_logits = j->score_prompt;
        } else {
            ml_error err;
            ml_status st = ML_OK;
            memset(&err, 0, sizeof err);
            const char *finish = sl->drawn ? NULL
                                           : generate_one(s, sl, sl->logits,
                                                          srv_ctx_len(s->ctx, sl->seq), &st, &err);
            sl->drawn = 0;
            if (finish || st) {
                slot_end(s, sl, finish, st, &err);
                continue;
            }
            sl->guessed = s->draft ? 0 : guess(s, sl, used, &spare); /* draft: draft_guesses */
            r->tokens = sl->guessed ? sl->spec_buf + sl->spec_len : &sl->next;
            r->n = 1 + sl->guessed;
            r->all_logits = sl->guessed > 0;
        }
        r->seq = sl->seq;
        used += r->n;
        s->run_slot[n_runs++] = sl;
    }
    if (!n_runs)
        return;
    if (s->draft && spare)
        draft_guesses(s, n_runs, spare);
    srv_ctx_step(s->ctx, s->runs, n_runs);
    size_t prefilled = 0;
    for (size_t i = 0; i < n_runs; i++) {
        slot *sl = s->run_slot[i];
        srv_run *r = &s->runs[i];
        if (r->status) {
            sl->logits = NULL;
            slot_end(s, sl, NULL, r->status, &r->err);
            continue;
        }
        if (r->all_logits && score_chunk(s, sl, srv_ctx_rows(s->ctx, i), r->n)) {
            sl->logits = NULL;
            slot_end(s, sl, NULL, ML_E_NOMEM, &r->err);
            continue;
        }
        if (sl->fed < sl->job->n_prompt) {
            sl->fed += r->n, prefilled += r->n;
            draft_prefill(s, sl);
        }
        sl->logits = srv_ctx_logits(s->ctx, i);
        if (sl->guessed)
            check_guesses(s, sl, srv_ctx_rows(s->ctx, i));
    }
    count_step(s, n_runs, prefilled);
}

/* Under the lock: ends the jobs whose client left, or all with `cut`. */
static void drop_cancelled(srv_sched *s)
{
    for (unsigned i = 0; i < s->n_slots; i++) {
        slot *sl = &s->slots[i];
        if (sl->job && (sl->job->cancel || s->cut))
            slot_finish(sl, "length", ML_OK, NULL);
    }
}

static int any_active(const srv_sched *s)
{
    for (unsigned i = 0; i < s->n_slots; i++)
        if (s->slots[i].job)
            return 1;
    return 0;
}

static void *sched_main(void *arg)
{
    srv_sched *s = arg;
    pthread_mutex_lock(&s->lock);
    for (;;) {
        drop_cancelled(s);
        admit(s);
        if (!any_active(s)) {
            if (s->closing)
                break;
            pthread_cond_wait(&s->wake, &s->lock);
            continue;
        }
        pthread_mutex_unlock(&s->lock);
        /* Only this thread changes sl->job of an active slot, so the
         * slots can be read without the lock while they compute. */
        sched_step(s);
        pthread_mutex_lock(&s->lock);
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

/* ------------------------------------------------------------------------
 * The scheduler
 * ------------------------------------------------------------------------ */
/* --spec-type: each slot's room for its history and guesses, and the
 * step rows the guesses are checked on. */
static ml_status open_speculation(srv_sched *s, ml_error *err)
{
    size_t n = (size_t)srv_ctx_n_ctx(s->ctx) + (size_t)s->spec.max + 1;
    int bad = srv_ctx_score_ready(s->ctx);
    for (unsigned i = 0; !bad && i < s->n_slots; i++)
        bad = !(s->slots[i].spec_buf = malloc(n * sizeof *s->slots[i].spec_buf));
    if (!bad && s->draft)
        bad = !(s->asks = calloc(s->n_slots, sizeof *s->asks)) ||
              !(s->ask_run = calloc(s->n_slots, sizeof *s->ask_run));
    if (!bad)
        return ML_OK;
    memset(err, 0, sizeof *err);
    err->code = ML_E_NOMEM, err->offset = -1;
    strcpy(err->msg, "out of memory for speculation");
    return ML_E_NOMEM;
}
ml_status srv_sched_new(const ml_model *m, const ml_mlt *mlt, const srv_sched_params *p,
                        srv_sched **out, ml_error *err)
{
    srv_sched *s = calloc(1, sizeof *s);
    if (!s || !(s->slots = calloc(p->n_slots, sizeof *s->slots)) ||
        !(s->runs = calloc(p->n_slots, sizeof *s->runs)) ||
        !(s->run_slot = calloc(p->n_slots, sizeof *s->run_slot))) {
        if (s)
            free(s->slots), free(s->runs), free(s->run_slot);
        free(s);
        memset(err, 0, sizeof *err);
        err->code = ML_E_NOMEM, err->offset = -1;
        strcpy(err->msg, "out of memory");
        return ML_E_NOMEM;
    }
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->wake, NULL);
    s->mlt = mlt;
    s->vocab = ml_model_header(m)->vocab;
    s->n_slots = p->n_slots;
    s->max_queue = p->max_queue;
    for (unsigned i = 0; i < p->n_slots; i++)
        s->slots[i].seq = i;
    ml_ctx_params cp = {.n_ctx = p->n_ctx, .n_threads = p->threads, .n_seq = p->n_slots,
                        .cache_k = p->cache_k, .cache_v = p->cache_v};
    ml_status st = srv_ctx_new(m, &cp, p->n_batch, &s->ctx, err);
    s->spec = p->spec;
    /* a model that cannot take guesses back gets none: the draft idles */
    s->draft = !st && srv_ctx_rewind_room(s->ctx, 0) ? p->draft : NULL;
    if (!st && s->spec.type)
        st = open_speculation(s, err);
    if (!st && pthread_create(&s->thread, NULL, sched_main, s) != 0) {
        memset(err, 0, sizeof *err);
        err->code = st = ML_E_NOMEM, err->offset = -1;
        strcpy(err->msg, "cannot start the scheduler thread");
    }
    s->started = st == ML_OK;
    if (st) {
        srv_sched_free(s, 1);
        return st;
    }
    *out = s;
    return ML_OK;
}

uint32_t srv_sched_n_ctx(const srv_sched *s)
{
    return srv_ctx_n_ctx(s->ctx);
}

int srv_sched_can_guess(const srv_sched *s)
{
    return srv_ctx_rewind_room(s->ctx, 0) > 0;
}

size_t srv_sched_capacity(const srv_sched *s)
{
    return s->n_slots + s->max_queue;
}

void srv_sched_stats(srv_sched *s, srv_stats *out)
{
    pthread_mutex_lock(&s->lock);
    *out = s->stats;
    out->processing = 0;
    for (unsigned i = 0; i < s->n_slots; i++)
        out->processing += s->slots[i].job != NULL;
    out->deferred = s->n_queued;
    out->kv_size = (uint64_t)s->n_slots * srv_ctx_n_ctx(s->ctx);
    pthread_mutex_unlock(&s->lock);
}

void srv_sched_drain(srv_sched *s, int cut)
{
    pthread_mutex_lock(&s->lock);
    s->closing = 1;
    s->cut |= cut;
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->lock);
}

void srv_sched_free(srv_sched *s, int cut)
{
    if (!s)
        return;
    srv_sched_drain(s, cut);
    if (s->started)
        pthread_join(s->thread, NULL);
    srv_ctx_free(s->ctx);
    for (unsigned i = 0; s->slots && i < s->n_slots; i++)
        free(s->slots[i].raw), free(s->slots[i].spec_buf);
    free(s->slots);
    free(s->runs);
    free(s->run_slot);
    free(s->asks);
    free(s->ask_run);
    pthread_cond_destroy(&s->wake);
    pthread_mutex_destroy(&s->lock);
    free(s);
}
