/* http.c - the HTTP side on libmicrohttpd (http.h).  One thread per
 * connection: a handler may wait for the model and a stream's reader may
 * block until the next token, without stalling other connections.  Header
 * size is bounded by the connection's memory pool, the body by max_body,
 * idle connections by the timeout (a client that trickles its request a
 * byte at a time is dropped). */
#include "http.h"

#include "response.h"

#include <microhttpd.h>

#include <netdb.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* Bytes of one connection's pool: the request line and headers must fit. */
#define HTTP_POOL_BYTES (64 * 1024)
/* A body over max_body without Content-Length (chunked) is read to its end
 * and thrown away, so the client can be told 413 (a response queued in
 * the middle of an upload only closes the connection); past this many
 * times max_body it is not worth reading and the connection is closed. */
#define HTTP_DROP_FACTOR 16
/* Bytes a stream's reader is asked for at a time. */
#define HTTP_STREAM_BLOCK (16 * 1024)

struct http_server {
    struct MHD_Daemon *d;
    http_params p;
    pthread_mutex_t lock;
    pthread_cond_t idle;  /* in_flight fell to 0 */
    unsigned in_flight;   /* requests begun and not yet completed */
};

struct http_req {
    http_server *h;
    struct MHD_Connection *conn;
    ml_buf body;    /* the request body as collected (within max_body) */
    int answered;   /* a response was queued */
    size_t dropped; /* bytes of a body over max_body, read and thrown away */
    int status;     /* for the log */
    double t0;
    char method[16], url[128]; /* for the log, cut short */
    char note[160];
};

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* ------------------------------------------------------------------------
 * Replies
 * ------------------------------------------------------------------------ */
static int queue(http_req *r, int status, struct MHD_Response *resp, const char *type)
{
    if (!resp)
        return MHD_NO;
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    enum MHD_Result ok = MHD_queue_response(r->conn, (unsigned)status, resp);
    MHD_destroy_response(resp);
    if (ok == MHD_YES)
        r->answered = 1, r->status = status;
    return ok;
}

int http_reply_json(http_req *r, int status, char *json)
{
    static const char oom[] = "{\"error\":{\"message\":\"Out of memory.\",\"type\":"
                              "\"server_error\",\"param\":null,\"code\":null}}";
    struct MHD_Response *resp;
    if (!json) {
        status = 500;
        resp = MHD_create_response_from_buffer(sizeof oom - 1, (void *)oom,
                                               MHD_RESPMEM_PERSISTENT);
    } else {
        resp = MHD_create_response_from_buffer(strlen(json), json, MHD_RESPMEM_MUST_FREE);
        if (!resp)
            free(json);
    }
    return queue(r, status, resp, "application/json");
}

int http_reply_text(http_req *r, const char *type, char *text)
{
    if (!text)
        return http_reply_json(r, 500, NULL);
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
    if (!resp)
        free(text);
    return queue(r, 200, resp, type);
}

int http_reply_error(http_req *r, const srv_error *e)
{
    return http_reply_json(r, e->status, resp_error(e));
}

int http_reply_stream(http_req *r, http_stream_fn next, void *ctx, void (*free_ctx)(void *))
{
    struct MHD_Response *resp =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, HTTP_STREAM_BLOCK,
                                          next, ctx, free_ctx);
    if (!resp) {
        free_ctx(ctx);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    return queue(r, 200, resp, "text/event-stream");
}

const char *http_body(const http_req *r, size_t *len)
{
    *len = r->body.len;
    return r->body.data ? r->body.data : "";
}

int http_client_gone(const http_req *r)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    char c;
    if (!ci)
        return 1;
    /* 0: the peer closed; data (a pipelined request) or EAGAIN: still there. */
    ssize_t n = recv(ci->connect_fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0;
}

void http_set_waiting(http_req *r, int waiting)
{
    MHD_set_connection_option(r->conn, MHD_CONNECTION_OPTION_TIMEOUT,
                              waiting ? 0u : r->h->p.timeout);
}

void http_note(http_req *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->note, sizeof r->note, fmt, ap);
    va_end(ap);
}

/* ------------------------------------------------------------------------
 * Requests
 * ------------------------------------------------------------------------ */
static int refuse(http_req *r, int status, const char *code, const char *msg)
{
    srv_error e;
    srv_fail(&e, status, status >= 500 ? "server_error" : "invalid_request_error", NULL, code,
             "%s", msg);
    return http_reply_error(r, &e);
}

/* The API key, compared in time that does not depend on where it differs. */
static int authorized(const http_req *r)
{
    const char *want = r->h->p.api_key;
    if (!want)
        return 1;
    const char *got =
        MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!got || strncmp(got, "Bearer ", 7) != 0)
        return 0;
    got += 7;
    size_t n = strlen(want), m = strlen(got);
    unsigned char diff = n != m;
    for (size_t i = 0; i < n; i++)
        diff |= (unsigned char)(want[i] ^ (i < m ? got[i] : 0));
    return diff == 0;
}

/* The route of method and path; *path_known says whether the path
 * exists under another method (405, not 404). */
static const http_route *route(const http_server *h, const char *method, const char *url,
                               int *path_known)
{
    *path_known = 0;
    for (size_t i = 0; i < h->p.n_routes; i++) {
        const http_route *rt = &h->p.routes[i];
        if (strcmp(rt->path, url) != 0)
            continue;
        *path_known = 1;
        if (strcmp(rt->method, method) == 0)
            return rt;
    }
    return NULL;
}

static int dispatch(http_req *r, const char *method, const char *url)
{
    int known;
    const http_route *rt = route(r->h, method, url, &known);
    if (!rt && known)
        return refuse(r, 405, "method_not_allowed", "Method not allowed for this path.");
    if (!rt)
        return refuse(r, 404, "not_found", "No such endpoint.");
    if (!rt->open && !authorized(r))
        return refuse(r, 401, "invalid_api_key",
                      "Incorrect or missing API key: send 'Authorization: Bearer KEY'.");
    int rc = rt->fn(r->h->p.app, r);
    /* 0 without an answer: the client left, the connection closes */
    return r->answered || !rc ? rc : refuse(r, 500, NULL, "The handler gave no answer.");
}

/* A body over the limit: refused at once when Content-Length says so. */
static int body_too_big(const http_req *r)
{
    const char *cl = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND,
                                                 MHD_HTTP_HEADER_CONTENT_LENGTH);
    return cl && strtoull(cl, NULL, 10) > r->h->p.max_body;
}

/* The next piece of a body: kept, or counted and dropped once the body
 * is over the limit; MHD_NO (closing the connection) when memory runs out
 * or the dropped part grows past HTTP_DROP_FACTOR times the limit. */
static enum MHD_Result take_body(http_req *r, const char *data, size_t *n)
{
    size_t max = r->h->p.max_body;
    if (!r->dropped && *n <= max - r->body.len) {
        if (ml_buf_append(&r->body, data, *n))
            return MHD_NO;
    } else {
        r->dropped += *n;
        if (r->dropped / HTTP_DROP_FACTOR > max)
            return MHD_NO;
    }
    *n = 0;
    return MHD_YES;
}

/* The path as the log shows it: control bytes as '?', so that a client
 * cannot write escape sequences to the terminal. */
static void printable(char *out, size_t cap, const char *in)
{
    size_t i = 0;
    for (; in[i] && i + 1 < cap; i++)
        out[i] = (unsigned char)in[i] < 0x20 || in[i] == 0x7f ? '?' : in[i];
    out[i] = 0;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *data,
                                  size_t *data_size, void **con_cls)
{
    http_server *h = cls;
    http_req *r = *con_cls;
    (void)version;
    if (!r) { /* the headers are in; the body, if any, comes next */
        if (!(r = calloc(1, sizeof *r)))
            return MHD_NO;
        r->h = h, r->conn = conn, r->t0 = now();
        pthread_mutex_lock(&h->lock);
        h->in_flight++;
        pthread_mutex_unlock(&h->lock);
        printable(r->method, sizeof r->method, method);
        printable(r->url, sizeof r->url, url);
        *con_cls = r;
        if (body_too_big(r))
            return refuse(r, 413, "body_too_large", "The request body is over --max-body.");
        return MHD_YES;
    }
    if (r->answered) { /* refused early: the rest of the body is dropped */
        *data_size = 0;
        return MHD_YES;
    }
    if (*data_size)
        return take_body(r, data, data_size);
    if (r->dropped)
        return refuse(r, 413, "body_too_large", "The request body is over --max-body.");
    return dispatch(r, method, url);
}

static const char *termination(enum MHD_RequestTerminationCode toe)
{
    switch (toe) {
    case MHD_REQUEST_TERMINATED_COMPLETED_OK: return "";
    case MHD_REQUEST_TERMINATED_TIMEOUT_REACHED: return " (timed out)";
    case MHD_REQUEST_TERMINATED_CLIENT_ABORT: return " (client closed)";
    case MHD_REQUEST_TERMINATED_DAEMON_SHUTDOWN: return " (shut down)";
    case MHD_REQUEST_TERMINATED_READ_ERROR: return " (read error)";
    default: return " (error)";
    }
}

/* The one log line of a request. */
static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    http_req *r = *con_cls;
    (void)cls;
    if (!r)
        return;
    char addr[64] = "?";
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (ci && ci->client_addr)
        getnameinfo(ci->client_addr,
                    ci->client_addr->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                                           : sizeof(struct sockaddr_in),
                    addr, sizeof addr, NULL, 0, NI_NUMERICHOST);
    fprintf(stderr, "ml-serve: %s %s %s %d %.3f s%s%s%s\n", addr, r->method, r->url, r->status,
            now() - r->t0, r->note[0] ? ", " : "", r->note, termination(toe));
    http_server *h = r->h;
    ml_buf_free(&r->body);
    free(r);
    *con_cls = NULL;
    pthread_mutex_lock(&h->lock);
    if (--h->in_flight == 0)
        pthread_cond_broadcast(&h->idle);
    pthread_mutex_unlock(&h->lock);
}

/* ------------------------------------------------------------------------
 * The daemon
 * ------------------------------------------------------------------------ */
static int resolve(const char *host, unsigned port, struct sockaddr_storage *sa, char *why,
                   size_t why_len)
{
    struct addrinfo hints, *ai;
    char ps[16];
    memset(&hints, 0, sizeof hints);
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    snprintf(ps, sizeof ps, "%u", port);
    int rc = getaddrinfo(host, ps, &hints, &ai);
    if (rc) {
        snprintf(why, why_len, "--host %s: %s", host, gai_strerror(rc));
        return -1;
    }
    memcpy(sa, ai->ai_addr, ai->ai_addrlen);
    freeaddrinfo(ai);
    return 0;
}

int http_start(const http_params *p, http_server **out, char *why, size_t why_len)
{
    struct sockaddr_storage sa;
    if (resolve(p->host, p->port, &sa, why, why_len))
        return -1;
    http_server *h = calloc(1, sizeof *h);
    if (!h) {
        snprintf(why, why_len, "out of memory");
        return -1;
    }
    h->p = *p;
    pthread_mutex_init(&h->lock, NULL);
    pthread_cond_init(&h->idle, NULL);
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION |
                     MHD_USE_ITC | (sa.ss_family == AF_INET6 ? MHD_USE_IPv6 : 0);
    h->d = MHD_start_daemon(flags, (uint16_t)p->port, NULL, NULL, on_request, h,
                            MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
                            MHD_OPTION_CONNECTION_TIMEOUT, p->timeout,
                            MHD_OPTION_CONNECTION_LIMIT, p->max_conns,
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)HTTP_POOL_BYTES,
                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, h, MHD_OPTION_END);
    if (!h->d) {
        snprintf(why, why_len, "cannot listen on %s port %u (in use, or not an address of "
                               "this machine)",
                 p->host, p->port);
        free(h);
        return -1;
    }
    *out = h;
    return 0;
}

unsigned http_port(const http_server *h)
{
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
    return di ? di->port : h->p.port;
}

void http_quiesce(http_server *h)
{
    MHD_socket fd = MHD_quiesce_daemon(h->d);
    if (fd != MHD_INVALID_SOCKET)
        close(fd);
}

void http_drain(http_server *h)
{
    pthread_mutex_lock(&h->lock);
    while (h->in_flight)
        pthread_cond_wait(&h->idle, &h->lock);
    pthread_mutex_unlock(&h->lock);
}

void http_stop(http_server *h)
{
    if (!h)
        return;
    MHD_stop_daemon(h->d);
    pthread_cond_destroy(&h->idle);
    pthread_mutex_destroy(&h->lock);
    free(h);
}
