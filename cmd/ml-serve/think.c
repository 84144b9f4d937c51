/* think.c - reasoning and answer apart (think.h).  The text before the
 * decision (a start that may still become "<think>", an end that may
 * still become "</think>") is held back, never guessed. */
#include "think.h"
#include "marks.h"

#include <string.h>

enum { START, REASON, CONTENT };

static const char OPEN[] = "<think>", CLOSE[] = "</think>";

static int is_space(char c)
{
    return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

void srv_think_init(srv_think *t, int enabled, int open)
{
    memset(t, 0, sizeof *t);
    t->mode = !enabled ? CONTENT : open ? REASON : START;
    t->skip_ws = enabled && open;
    t->reasoned = enabled && open;
}

void srv_think_free(srv_think *t)
{
    ml_buf_free(&t->hold);
}

/* Drops the first n held bytes. */
static void drop(srv_think *t, size_t n)
{
    memmove(t->hold.data, t->hold.data + n, t->hold.len - n);
    t->hold.len -= n;
}

/* Moves the first n held bytes to out. */
static ml_status move(srv_think *t, size_t n, ml_buf *out)
{
    ml_status s = n ? ml_buf_append(out, t->hold.data, n) : ML_OK;
    if (!s)
        drop(t, n);
    return s;
}

/* One decision on the held bytes; 1 when another may follow. */
static int step(srv_think *t, ml_buf *reasoning, ml_buf *content, ml_status *st)
{
    const char *h = t->hold.data;
    size_t n = t->hold.len, i = 0;
    if (t->skip_ws) {
        while (i < n && is_space(h[i]))
            i++;
        drop(t, i);
        if (i == n)
            return 0;
        t->skip_ws = 0;
        return 1;
    }
    if (t->mode == START) {
        while (i < n && is_space(h[i]))
            i++;
        size_t rest = n - i, m = rest < sizeof OPEN - 1 ? rest : sizeof OPEN - 1;
        if (memcmp(h + i, OPEN, m) != 0) {
            t->mode = CONTENT; /* the text as it came, spaces and all */
            return 1;
        }
        if (m < sizeof OPEN - 1)
            return 0; /* "<thi": not yet known */
        drop(t, i + sizeof OPEN - 1);
        t->mode = REASON, t->skip_ws = 1, t->reasoned = 1;
        return 1;
    }
    if (t->mode == CONTENT) {
        *st = move(t, n, content);
        return 0;
    }
    size_t k = srv_mark_find(h, n, 0, CLOSE);
    if (k == n) {
        *st = move(t, n - srv_mark_partial(h, n, CLOSE), reasoning);
        return 0;
    }
    if ((*st = move(t, k, reasoning)))
        return 0;
    drop(t, sizeof CLOSE - 1);
    t->mode = CONTENT, t->skip_ws = 1;
    return 1;
}

ml_status srv_think_put(srv_think *t, const char *s, size_t n, ml_buf *reasoning,
                        ml_buf *content)
{
    ml_status st = n ? ml_buf_append(&t->hold, s, n) : ML_OK;
    while (!st && t->hold.len && step(t, reasoning, content, &st))
        ;
    return st;
}

ml_status srv_think_end(srv_think *t, ml_buf *reasoning, ml_buf *content)
{
    ml_status st = ML_OK;
    if (t->skip_ws) /* only spaces were held */
        t->hold.len = 0;
    if (t->hold.len)
        st = move(t, t->hold.len, t->mode == REASON ? reasoning : content);
    return st;
}

int srv_think_open(const char *prompt, size_t len)
{
    while (len && is_space(prompt[len - 1]))
        len--;
    return len >= sizeof OPEN - 1 && memcmp(prompt + len - (sizeof OPEN - 1), OPEN,
                                            sizeof OPEN - 1) == 0;
}
