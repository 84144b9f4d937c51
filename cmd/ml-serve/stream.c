/* stream.c - a job as Server-Sent Events (stream.h).  The reader runs in
 * the connection's thread: it waits for the job's text, formats the
 * events into a buffer and hands it to libmicrohttpd piece by piece. */
#include "stream.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum phase { FIRST, RUNNING, ENDED };

typedef struct stream {
    http_req *r;
    srv_job *job;
    resp_meta meta;
    char id[48], model[128];
    int include_usage;
    enum phase phase;
    size_t have;          /* bytes of the job's text sent */
    size_t n_probs;       /* tokens whose log-probabilities were sent */
    ml_buf out;           /* events formatted, handed over up to out_off */
    size_t out_off;
} stream;

void srv_note_job(http_req *r, const srv_progress *p)
{
    http_note(r, "prompt %zu tokens (%zu reused), completion %zu tokens%s", p->n_prompt,
              p->n_cached, p->n_gen, p->finish ? "" : ", failed");
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

/* With logprobs: those of the tokens generated since the last chunk,
 * their text at offset `at` (*bad set when memory ran out); NULL when
 * none or without logprobs. */
static json_t *new_logprobs(stream *s, size_t at, int *bad)
{
    if (!s->meta.logprobs)
        return NULL;
    srv_tokprob *p;
    size_t n = srv_job_logprobs(s->job, s->n_probs, &p);
    json_t *lp = n ? resp_logprobs(s->meta.kind, s->meta.mlt, p, n, at) : NULL;
    free(p);
    if (n && !lp)
        *bad = 1;
    s->n_probs += n;
    return lp;
}

/* The events after the last text: finish_reason, usage, [DONE]; or an
 * error event when the job failed. */
static int put_end(stream *s, const srv_progress *p)
{
    srv_note_job(s->r, p);
    http_set_waiting(s->r, 0);
    s->phase = ENDED;
    if (!p->finish) {
        srv_error e;
        int busy = p->status == ML_E_UNSUPPORTED;
        srv_fail(&e, busy ? 503 : 500, "server_error", NULL, busy ? "unavailable" : NULL,
                 "Generation failed: %s", p->msg[0] ? p->msg : ml_status_name(p->status));
        return put(s, resp_stream_error(&e)) || put(s, dup_str(RESP_DONE));
    }
    resp_usage u = {p->n_prompt, p->n_gen};
    int bad = 0;
    json_t *lp = new_logprobs(s, s->have, &bad); /* tokens whose text was held back or cut */
    if (bad || put(s, resp_chunk(&s->meta, 0, NULL, 0, lp, p->finish)))
        return -1;
    if (s->include_usage && put(s, resp_usage_chunk(&s->meta, &u)))
        return -1;
    return put(s, dup_str(RESP_DONE));
}

/* Waits for more text or the end and formats it; -1 to drop the
 * connection (the client left, or memory ran out). */
static int refill(stream *s)
{
    s->out.len = s->out_off = 0;
    if (s->phase == FIRST) {
        s->phase = RUNNING;
        if (s->meta.kind == SRV_CHAT)
            return put(s, resp_chunk(&s->meta, 1, NULL, 0, NULL, NULL));
    }
    for (;;) {
        char *text;
        size_t len;
        srv_progress p;
        srv_job_wait(s->job, s->have, SRV_POLL_MS, &text, &len, &p);
        int bad = 0;
        json_t *lp = text ? new_logprobs(s, s->have, &bad) : NULL;
        s->have += len;
        int rc = bad ? -1 : text ? put(s, resp_chunk(&s->meta, 0, text, len, lp, NULL)) : 0;
        free(text);
        if (!rc && p.done)
            rc = put_end(s, &p);
        else /* what the log says if the client leaves now */
            http_note(s->r, "prompt %zu tokens (%zu reused), completion %zu tokens so far",
                      p.n_prompt, p.n_cached, p.n_gen);
        if (rc || s->out.len)
            return rc;
        if (http_client_gone(s->r)) {
            srv_job_cancel(s->job);
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
    srv_job_release(s->job);
    ml_buf_free(&s->out);
    free(s);
}

int srv_stream_reply(http_req *r, srv_job *job, const resp_meta *meta, int include_usage)
{
    stream *s = calloc(1, sizeof *s);
    if (!s) {
        srv_job_release(job);
        return http_reply_json(r, 500, NULL);
    }
    s->r = r, s->job = job, s->include_usage = include_usage;
    snprintf(s->id, sizeof s->id, "%s", meta->id);
    snprintf(s->model, sizeof s->model, "%s", meta->model);
    s->meta = (resp_meta){meta->kind, s->id, meta->created, s->model, meta->logprobs, meta->mlt};
    return http_reply_stream(r, next, s, stream_free);
}
