/* stream.h - a request's generation jobs (one per choice) answered as
 * Server-Sent Events: the chunks of OpenAI's streaming API as the texts
 * grow, each choice's last chunk with its finish_reason, then the usage
 * when asked, and "data: [DONE]". */
#ifndef ML_SERVE_STREAM_H
#define ML_SERVE_STREAM_H

#include "http.h"
#include "response.h"
#include "slots.h"

/* Replies to r with the stream of jobs[0..n) (choice i is job i; n at
 * most SRV_MAX_CHOICES), which it takes over (released when the stream
 * ends or the client leaves), with the prompts' echo[0..n_echo) (meta's,
 * or NULL; taken too).  meta's strings are copied. */
int srv_stream_reply(http_req *r, srv_job **jobs, size_t n, const resp_meta *meta,
                     resp_echo *echo, size_t n_echo, int include_usage);

/* How long a wait for the model lasts before the client is looked at
 * again: a client that left frees its slot within this time. */
#define SRV_POLL_MS 100

/* The usage and prompt reuse of a finished job for the log line. */
void srv_note_job(http_req *r, const srv_progress *p);
/* Those of a whole request, its choices' summed. */
void srv_note_usage(http_req *r, const resp_usage *u);

#endif
