/* think.h - a chat reply's reasoning split from its answer, as
 * llama-server's --reasoning-format deepseek does: the text between
 * <think> and </think> (or from the start, when the prompt left a
 * <think> open) is reasoning_content, the rest content.  One state
 * machine for whole and streamed answers, so that a stream's deltas add
 * up to the whole answer. */
#ifndef ML_SERVE_THINK_H
#define ML_SERVE_THINK_H

#include <mlcore.h>

#include <stddef.h>

typedef struct srv_think {
    int mode;      /* private: where the text is */
    int skip_ws;   /* private: whitespace before the part's first byte is dropped */
    ml_buf hold;   /* private: bytes not yet known to be either part */
    int reasoned;  /* a think block was seen: the reply has reasoning_content */
} srv_think;

/* enabled 0: everything is content.  open: the prompt ended inside a
 * think block (the template wrote <think>). */
void srv_think_init(srv_think *t, int enabled, int open);
/* Feeds s[0..n); appends what is decided to reasoning and content.
 * ML_E_NOMEM when memory runs out. */
ml_status srv_think_put(srv_think *t, const char *s, size_t n, ml_buf *reasoning,
                        ml_buf *content);
/* The end of the text: what was held goes to the part it was in. */
ml_status srv_think_end(srv_think *t, ml_buf *reasoning, ml_buf *content);
void srv_think_free(srv_think *t);

/* The rendered prompt ends inside a think block: its last non-space
 * bytes are "<think>". */
int srv_think_open(const char *prompt, size_t len);

#endif
