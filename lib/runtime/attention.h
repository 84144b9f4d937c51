/* attention.h - private: attention over the KV cache (attention.c), one
 * call per layer of the forward pass (forward.c). */
#ifndef ML_ATTENTION_H
#define ML_ATTENTION_H

#include "runtime/ctx.h"

#include <math.h>

/* cap · tanh(x / cap), or x without a cap: the bound some models put on
 * attention scores (attention.c) and on logits (forward.c). */
static inline float ml__softcap(float x, float cap)
{
    return cap > 0 ? cap * tanhf(x / cap) : x;
}

/* Layer l's attention for the batch's n_tok rows: c->ao, every query
 * head's softmax(q·K)·V, from c->q, c->k and c->v (normed and rotated;
 * k and v also in c->kh, c->vh as the cache holds them), over the
 * positions each row sees; then the rows' keys and values into their
 * sequences' caches. */
void ml__attend(ml_ctx *c, uint32_t l, size_t n_tok);

#endif
