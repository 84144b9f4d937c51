/* convert_moe.c - binding a mixture-of-experts layer's arrays to GGUF
 * tensors: the router (ffn_gate_inp, F32 in every GGUF llama.cpp writes;
 * dequantized to F32 otherwise, since routing is a discrete choice made
 * on exact weights) and each expert's gate, down and up matrices.  GGUF
 * stacks a layer's experts in one tensor per role (ffn_gate_exps
 * {dim, F, E}); expert e is the e-th slab, a contiguous range of rows, so
 * each .mlb expert matrix is bound as a row range of its stack and keeps
 * the stack's type and bytes exactly as a dense matrix would.  Qwen3.5-
 * MoE's shared expert is a dense FFN beside them, with a gate row;
 * gpt-oss's router and expert biases are bound alike (slab e of a
 * bias stack).  See docs/design-moe.md, section 3. */
#include "convert/convert_impl.h"

#include <stdio.h>

int ml__conv_is_moe_arch(int arch)
{
    return arch == ML__ARCH_QWEN3MOE || arch == ML__ARCH_QWEN35MOE || arch == ML__ARCH_GPT_OSS;
}

/* A stack of n_experts slabs of `rows` rows of `cols`: ggml's
 * {cols, rows, n_experts}. */
static ml_status stack_shape(ml__conv_build *b, const ml_gguf_tensor *t, uint64_t cols,
                             uint64_t rows, const char *what)
{
    uint64_t E = b->p->h.n_experts;
    if (t->dims[0] == cols && t->dims[1] == rows && t->dims[2] == E && t->dims[3] == 1)
        return ML_OK;
    return ml__err(b->err, ML_E_SHAPE, t->name, (int64_t)t->info_offset,
                   "shape [%llu, %llu, %llu, %llu], expected [%llu, %llu, %llu] (%s)",
                   (unsigned long long)t->dims[0], (unsigned long long)t->dims[1],
                   (unsigned long long)t->dims[2], (unsigned long long)t->dims[3],
                   (unsigned long long)cols, (unsigned long long)rows, (unsigned long long)E,
                   what);
}

static ml_status bind_router(ml__conv_build *b, ml__conv_item *it, uint32_t l)
{
    char name[64];
    snprintf(name, sizeof name, "blk.%u.ffn_gate_inp.weight", l);
    const ml_gguf_tensor *r = ml__conv_tensor(b, "%s", name);
    if (!r)
        return ml__conv_missing(b, name);
    ml_status s = ml__conv_shape(b, r, b->p->h.dim, b->p->h.n_experts, "dim x expert_count");
    if (s || (s = ml__conv_check_type(b, r)))
        return s;
    it->pub.src = r;
    return ML_OK;
}

/* The shared expert: ffn_{gate,down,up}_shexp, a dense FFN of
 * shared_hidden_dim, and its gate's row ffn_gate_inp_shexp (dim). */
static ml_status bind_shared(ml__conv_build *b, ml__conv_item *it, const ml_tensor *t)
{
    const ml_mlb_header *h = &b->p->h;
    uint32_t l = (uint32_t)t->layer;
    static const char *const names[4] = {"gate", "down", "up", "gate_inp"};
    int i = (int)(t->role - ML_R_WS1);
    char name[64];
    snprintf(name, sizeof name, "blk.%u.ffn_%s_shexp.weight", l, names[i]);
    const ml_gguf_tensor *s = ml__conv_tensor(b, "%s", name);
    if (!s)
        return ml__conv_missing(b, name);
    uint32_t Fs = h->shared_hidden_dim;
    ml_status st = t->role == ML_R_WSG   ? ml__conv_shape(b, s, h->dim, 0, "dim")
                   : t->role == ML_R_WS2 ? ml__conv_shape(b, s, Fs, h->dim, "shared width x dim")
                                         : ml__conv_shape(b, s, h->dim, Fs, "dim x shared width");
    if (st || (st = ml__conv_check_type(b, s)))
        return st;
    it->pub.src = s;
    return ML_OK;
}

/* gpt-oss's biases: the router's ffn_gate_inp.bias (n_experts), and
 * expert e's gate, down and up biases, slab e of ffn_{gate,down,up}_exps.bias
 * ({F, E}, {dim, E}, {F, E}): elements [e n, (e + 1) n). */
static ml_status bind_bias(ml__conv_build *b, ml__conv_item *it, const ml_tensor *t)
{
    const ml_mlb_header *h = &b->p->h;
    uint32_t l = (uint32_t)t->layer;
    char name[64];
    if (t->role == ML_R_RB) {
        snprintf(name, sizeof name, "blk.%u.ffn_gate_inp.bias", l);
        const ml_gguf_tensor *r = ml__conv_tensor(b, "%s", name);
        if (!r)
            return ml__conv_missing(b, name);
        ml_status s = ml__conv_shape(b, r, h->n_experts, 0, "expert_count");
        if (s || (s = ml__conv_check_type(b, r)))
            return s;
        it->pub.src = r;
        return ML_OK;
    }
    static const char *const stacks[3] = {"gate", "down", "up"};
    int i = (int)(t->role - ML_R_EB1);
    uint64_t n = t->role == ML_R_EB2 ? h->dim : h->expert_hidden_dim;
    snprintf(name, sizeof name, "blk.%u.ffn_%s_exps.bias", l, stacks[i]);
    const ml_gguf_tensor *st = ml__conv_tensor(b, "%s", name);
    if (!st)
        return ml__conv_missing(b, name);
    ml_status s = ml__conv_shape(b, st, n, h->n_experts,
                                 t->role == ML_R_EB2 ? "dim x experts" : "expert width x experts");
    if (s || (s = ml__conv_check_type(b, st)))
        return s;
    it->pub.src = st;
    it->row0 = (uint64_t)t->expert * n;
    it->pub.transform |= ML_CONV_ROWS;
    return ML_OK;
}

ml_status ml__conv_bind_moe(ml__conv_build *b, ml__conv_item *it, const ml_tensor *t)
{
    const ml_mlb_header *h = &b->p->h;
    uint32_t l = (uint32_t)t->layer;
    if (t->role == ML_R_WR)
        return bind_router(b, it, l);
    if (t->role == ML_R_RB || (t->role >= ML_R_EB1 && t->role <= ML_R_EB3 && t->expert >= 0))
        return bind_bias(b, it, t);
    if (t->role >= ML_R_WS1 && t->role <= ML_R_WSG)
        return bind_shared(b, it, t);
    if (t->role < ML_R_EW1 || t->role > ML_R_EW3 || t->expert < 0)
        return ml__err(b->err, ML_E_INVAL, t->name, -1, "internal: unexpected role");
    static const char *const stacks[3] = {"gate", "down", "up"};
    int i = (int)(t->role - ML_R_EW1);
    int down = t->role == ML_R_EW2;
    uint64_t rows = down ? h->dim : h->expert_hidden_dim, cols = down ? h->expert_hidden_dim : h->dim;
    char name[64];
    snprintf(name, sizeof name, "blk.%u.ffn_%s_exps.weight", l, stacks[i]);
    const ml_gguf_tensor *st = ml__conv_tensor(b, "%s", name);
    if (!st)
        return ml__conv_missing(b, name);
    ml_status s = stack_shape(b, st, cols, rows,
                              down ? "expert width x dim x experts" : "dim x expert width x experts");
    if (s || (s = ml__conv_check_type(b, st)))
        return s;
    it->pub.src = st;
    it->row0 = (uint64_t)t->expert * rows; /* slab e: rows [e rows, (e + 1) rows) */
    it->pub.transform |= ML_CONV_ROWS;
    return ML_OK;
}
