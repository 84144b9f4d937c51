/* stream.c - a request's jobs as Server-Sent Events (stream.h), one job
 * per choice.  The reader runs in the connection's thread: it waits for
 * the jobs' text, formats the events into a buffer and hands it to
 * libmicrohttpd piece by piece. */
#include "stream.h"
#include "think.h"
#include "tools.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum phase { FIRST, RUNNING, ENDED };

/* Where one choice's stream is. */
typedef struct choice {
    srv_job *job;
    size_t have;          /* bytes of its text sent */
    size_t n_probs;       /* tokens whose log-probabilities were sent */
    int ended;            /* its last chunk sent */
    int echoed;           /* a completion's echo: the prompt's chunk sent */
    srv_think think;      /* a chat's reasoning apart from its content */
    srv_tool_split tools; /* and its tool calls apart from the rest */
    int called;           /* tool calls were sent */
} choice;

typedef struct stream {
    http_req *r;
    choice c[SRV_MAX_CHOICES];
    size_t n, n_ended;
    resp_meta meta;
    char id[48], model[128];
    resp_echo *echo;      /* meta.echo, the stream's own */
    size_t n_echo;
    int include_usage;
    enum phase phase;
    resp_usage usage;     /* each prompt once, every choice's tokens */
    ml_buf out;           /* events formatted, handed over up to out_off */
    size_t out_off;
} stream;

void srv_note_job(http_req *r, const srv_progress *p)
{
    http_note(r, "prompt %zu tokens (%zu reused), completion %zu tokens%s", p->n_prompt,
              p->n_cached, p->n_gen, p->finish ? "" : ", failed");
}

void srv_note_usage(http_req *r, const resp_usage *u)
{
    http_note(r, "prompt %zu tokens (%zu reused), completion %zu tokens", u->prompt_tokens,
              u->n_cached, u->completion_tokens);
}

/* Appends an event (taken); -1 when memory ran out. */
static int put(stream *s, char *ev)
{
    if (!ev)
        return -1;
    ml_status st = ml_buf_append(&s->out, ev, strlen(ev));
    free(ev);
    return st ? -1 : 0;
}

static char *dup_str(const char *t)
{
    char *p = malloc(strlen(t) + 1);
    return p ? strcpy(p, t) : NULL;
}

/* With logprobs: those of choice i's tokens generated since its last
 * chunk, their text at offset `at` after its echo (*bad set when memory
 * ran out); NULL when none or without logprobs. */
static json_t *new_logprobs(stream *s, size_t i, size_t at, int *bad)
{
    choice *c = &s->c[i];
    if (!s->meta.logprobs)
        return NULL;
    srv_tokprob *p;
    size_t n = srv_job_logprobs(c->job, c->n_probs, &p);
    json_t *lp = n ? resp_logprobs(s->meta.kind, s->meta.mlt, p, n,
                                   resp_echo_len(&s->meta, i) + at)
                   : NULL;
    free(p);
    if (n && !lp)
        *bad = 1;
    c->n_probs += n;
    return lp;
}

/* Text of choice i as its chunks: the reasoning part, then the content
 * part (a chat's think block apart); the logprobs of the tokens so far
 * go with the first chunk (none when all is held back: they wait).  end:
 * the text is over, what was held back goes too. */
static int put_text(stream *s, size_t i, const char *text, size_t len, int end)
{
    choice *c = &s->c[i];
    ml_buf reasoning = {0}, said = {0}, content = {0};
    json_t *calls = NULL;
    ml_status st = srv_think_put(&c->think, text, len, &reasoning, &said);
    if (!st && end)
        st = srv_think_end(&c->think, &reasoning, &said);
    if (!st)
        st = srv_tool_split_put(&c->tools, said.data, said.len, &content, &reasoning);
    if (!st && end)
        st = srv_tool_split_end(&c->tools, &content, &reasoning, &calls);
    ml_buf_free(&said);
    int bad = 0;
    json_t *lp = !st && (reasoning.len || content.len) ? new_logprobs(s, i, c->have, &bad) : NULL;
    int rc = st || bad ? -1 : 0;
    if (!rc && reasoning.len) {
        rc = put(s, resp_reasoning_chunk(&s->meta, (unsigned)i, reasoning.data, reasoning.len, lp));
        lp = NULL;
    }
    if (!rc && content.len) {
        rc = put(s, resp_chunk(&s->meta, (unsigned)i, 0, content.data, content.len, lp, NULL));
        lp = NULL;
    }
    if (!rc && calls) {
        c->called = 1;
        rc = put(s, resp_tool_chunk(&s->meta, (unsigned)i, calls));
        calls = NULL;
    }
    json_decref(calls);
    json_decref(lp);
    ml_buf_free(&reasoning), ml_buf_free(&content);
    return rc;
}

/* A completion's echo: choice i's first chunk is its prompt's text and,
 * with logprobs, its tokens' (all scored once the job generates or ends;
 * null when a shutdown cut the prompt short). */
static int put_echo(stream *s, size_t i)
{
    choice *c = &s->c[i];
    const resp_echo *ec = resp_echo_of(&s->meta, i);
    if (!ec || c->echoed)
        return 0;
    c->echoed = 1;
    json_t *lp = NULL;
    if (s->meta.logprobs) {
        srv_tokprob *p;
        size_t n = srv_job_prompt_logprobs(c->job, &p);
        lp = n ? resp_prompt_logprobs(s->meta.mlt, p, n, ec->len) : NULL;
        free(p);
        if (n && !lp)
            return -1;
    }
    return put(s, resp_chunk(&s->meta, (unsigned)i, 0, ec->text, ec->len, lp, NULL));
}

/* A failed job: an error event and [DONE]; the other choices stop. */
static int put_failure(stream *s, const srv_progress *p)
{
    srv_note_job(s->r, p);
    http_set_waiting(s->r, 0);
    s->phase = ENDED;
    for (size_t i = 0; i < s->n; i++)
        srv_job_cancel(s->c[i].job);
    srv_error e;
    int busy = p->status == ML_E_UNSUPPORTED;
    srv_fail(&e, busy ? 503 : 500, "server_error", NULL, busy ? "unavailable" : NULL,
             "Generation failed: %s", p->msg[0] ? p->msg : ml_status_name(p->status));
    return put(s, resp_stream_error(&e)) || put(s, dup_str(RESP_DONE));
}

/* Choice i's last chunk (finish_reason, and the logprobs of tokens whose
 * text was held back or cut); after the last choice's, the usage when
 * asked and [DONE]. */
static int put_end(stream *s, size_t i, const srv_progress *p)
{
    choice *c = &s->c[i];
    int bad = 0;
    if (put_text(s, i, NULL, 0, 1))
        return -1;
    json_t *lp = new_logprobs(s, i, c->have, &bad);
    const char *why = c->called && !strcmp(p->finish, "stop") ? "tool_calls" : p->finish;
    if (bad || put(s, resp_chunk(&s->meta, (unsigned)i, 0, NULL, 0, lp, why)))
        return -1;
    c->ended = 1;
    resp_usage_add(&s->usage, &s->meta, i, p);
    if (++s->n_ended < s->n)
        return 0;
    srv_note_usage(s->r, &s->usage);
    http_set_waiting(s->r, 0);
    s->phase = ENDED;
    if (s->include_usage && put(s, resp_usage_chunk(&s->meta, &s->usage)))
        return -1;
    return put(s, dup_str(RESP_DONE));
}

/* Choice i's new text and, when it is done, its end; timeout_ms as
 * srv_job_wait takes it. */
static int poll_choice(stream *s, size_t i, int timeout_ms)
{
    choice *c = &s->c[i];
    char *text;
    size_t len;
    srv_progress p;
    srv_job_wait(c->job, c->have, timeout_ms, &text, &len, &p);
    int rc = text ? put_echo(s, i) || put_text(s, i, text, len, 0) : 0;
    c->have += len;
    free(text);
    if (!rc && p.done)
        rc = p.finish ? put_echo(s, i) || put_end(s, i, &p) : put_failure(s, &p);
    else if (!rc) /* what the log says if the client leaves now */
        http_note(s->r, "prompt %zu tokens (%zu reused), completion %zu tokens so far",
                  p.n_prompt, p.n_cached, p.n_gen);
    return rc;
}

/* Waits for more text or the end and formats it; -1 to drop the
 * connection (the client left, or memory ran out). */
static int refill(stream *s)
{
    s->out.len = s->out_off = 0;
    if (s->phase == FIRST) {
        s->phase = RUNNING;
        for (size_t i = 0; s->meta.kind == SRV_CHAT && i < s->n; i++)
            if (put(s, resp_chunk(&s->meta, (unsigned)i, 1, NULL, 0, NULL, NULL)))
                return -1;
        if (s->out.len)
            return 0;
    }
    for (;;) {
        /* every choice without waiting, then a wait on the first one
         * still going (the others advance in the same steps) */
        size_t first = s->n;
        for (size_t i = 0; i < s->n && s->phase == RUNNING; i++)
            if (!s->c[i].ended) {
                if (poll_choice(s, i, 0))
                    return -1;
                if (first == s->n && !s->c[i].ended)
                    first = i;
            }
        if (s->out.len || s->phase == ENDED)
            return 0;
        if (poll_choice(s, first, SRV_POLL_MS))
            return -1;
        if (s->out.len || s->phase == ENDED)
            return 0;
        if (http_client_gone(s->r)) {
            for (size_t i = 0; i < s->n; i++)
                srv_job_cancel(s->c[i].job);
            return -1;
        }
    }
}

static ssize_t next(void *ctx, uint64_t pos, char *buf, size_t max)
{
    stream *s = ctx;
    (void)pos; /* the bytes are asked for in order */
    while (s->out_off == s->out.len) {
        if (s->phase == ENDED)
            return HTTP_STREAM_END;
        if (refill(s))
            return HTTP_STREAM_ABORT;
    }
    size_t n = s->out.len - s->out_off;
    if (n > max)
        n = max;
    memcpy(buf, s->out.data + s->out_off, n);
    s->out_off += n;
    return (ssize_t)n;
}

static void stream_free(void *ctx)
{
    stream *s = ctx;
    for (size_t i = 0; i < s->n; i++) {
        srv_job_release(s->c[i].job);
        srv_think_free(&s->c[i].think);
        srv_tool_split_free(&s->c[i].tools);
    }
    ml_buf_free(&s->out);
    resp_echo_free(s->echo, s->n_echo);
    free(s);
}

int srv_stream_reply(http_req *r, srv_job **jobs, size_t n, const resp_meta *meta,
                     resp_echo *echo, size_t n_echo, int include_usage)
{
    stream *s = calloc(1, sizeof *s);
    if (!s) {
        for (size_t i = 0; i < n; i++)
            srv_job_release(jobs[i]);
        resp_echo_free(echo, n_echo);
        return http_reply_json(r, 500, NULL);
    }
    s->r = r, s->n = n, s->include_usage = include_usage;
    s->echo = echo, s->n_echo = n_echo;
    for (size_t i = 0; i < n; i++)
        s->c[i].job = jobs[i];
    snprintf(s->id, sizeof s->id, "%s", meta->id);
    snprintf(s->model, sizeof s->model, "%s", meta->model);
    s->meta = *meta;
    s->meta.id = s->id, s->meta.model = s->model;
    for (size_t i = 0; i < n; i++) {
        srv_think_init(&s->c[i].think, meta->think, meta->think_open);
        srv_tool_split_init(&s->c[i].tools, meta->tool_format, meta->tools, meta->tool_seed ^ i);
    }
    return http_reply_stream(r, next, s, stream_free);
}
