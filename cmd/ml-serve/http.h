/* http.h - the HTTP side, on GNU libmicrohttpd: listening, one thread per
 * connection, the request body collected under a size limit, the API key,
 * routing by method and path, one log line per request on stderr, and the
 * replies (JSON, or a stream of Server-Sent Events).  Knows nothing of
 * models: the routes' handlers (endpoints.c) do the work. */
#ifndef ML_SERVE_HTTP_H
#define ML_SERVE_HTTP_H

#include "request.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct http_req http_req;
typedef struct http_server http_server;

/* A handler answers with one of the http_reply* calls; returns its result. */
typedef int (*http_handler)(void *app, http_req *r);

typedef struct http_route {
    const char *method, *path;
    http_handler fn;
    int open; /* answered without the API key (/health) */
} http_route;

typedef struct http_params {
    const char *host;     /* address to bind (numeric or a name) */
    unsigned port;        /* 0: any free port (http_port tells which) */
    unsigned timeout;     /* seconds a connection may stay idle */
    size_t max_body;      /* bytes of a request body */
    unsigned max_conns;   /* connections at once */
    const char *api_key;  /* NULL: none needed */
    const http_route *routes;
    size_t n_routes;
    void *app;            /* given to the handlers */
} http_params;

/* Starts listening; on failure returns -1 with a message in why. */
int http_start(const http_params *p, http_server **out, char *why, size_t why_len);
unsigned http_port(const http_server *h);
/* Stops accepting connections; the open ones go on. */
void http_quiesce(http_server *h);
/* Waits until no request is in flight (idle keep-alive connections do
 * not count). */
void http_drain(http_server *h);
/* Ends every connection (waiting for their threads) and frees h. */
void http_stop(http_server *h);

/* For handlers. */
const char *http_body(const http_req *r, size_t *len);
/* Replies with a JSON text (taken; NULL is answered with a 500). */
int http_reply_json(http_req *r, int status, char *json);
int http_reply_error(http_req *r, const srv_error *e);
/* Replies 200 with a text of that content type (taken; NULL: a 500). */
int http_reply_text(http_req *r, const char *type, char *text);
/* Fills buf (at most max bytes) with the bytes of a stream from pos; returns
 * their count (0 is not allowed: wait inside), HTTP_STREAM_END, or
 * HTTP_STREAM_ABORT to drop the connection. */
typedef ssize_t (*http_stream_fn)(void *ctx, uint64_t pos, char *buf, size_t max);
#define HTTP_STREAM_END ((ssize_t)-1)
#define HTTP_STREAM_ABORT ((ssize_t)-2)
/* Replies 200 with a text/event-stream body from next(); free_ctx(ctx)
 * runs once the stream is over or the client is gone (also when the
 * reply fails). */
int http_reply_stream(http_req *r, http_stream_fn next, void *ctx, void (*free_ctx)(void *));
/* 1 when the client closed its connection. */
int http_client_gone(const http_req *r);
/* While a request waits for the model, the idle timeout is off (the
 * client is waiting for us, not we for it); back on afterwards. */
void http_set_waiting(http_req *r, int waiting);
/* Text added to the request's log line ("prompt 12, completion 8 tokens"). */
void http_note(http_req *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
