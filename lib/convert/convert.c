/* convert.c - the GGUF -> .mlb plan: its public side (options, accessors,
 * descriptions), the order of the steps, the weight types, the method of
 * each array and the importance matrices.  The header is read in
 * convert_header.c, the body's arrays are bound to GGUF tensors in
 * convert_bind.c (both with the helpers of convert_build.c), and
 * convert_write.c moves the data.  No weights are read while planning
 * except the small rope_freqs vector.
 *
 * Facts about the GGUF side come from llama.cpp's converter and loader;
 * docs/convert-decisions.md lists them with every decision the
 * specification leaves open. */
#include "convert/convert_impl.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

/* ===========================================================================
 * Weight types
 * ========================================================================= */

/* The old rule: one weight type for every matrix, Q4_0 models with the
 * classes of mostly 8-bit sources in Q8_0. */
static ml_status choose_wtype(ml__conv_build *b, const ml_convert_opts *o)
{
    ml_mlb_header *h = &b->p->h;
    uint64_t t4 = 0, t8 = 0;
    for (int c = 0; c < 7; c++)
        t4 += b->elems[c][0], t8 += b->elems[c][1];
    h->wtype = o->wtype ? o->wtype : t4 > t8 ? ML_WTYPE_Q4_0 : ML_WTYPE_Q8_0;
    if (h->wtype == ML_WTYPE_Q8_0) {
        if (o->q8_mask > 0)
            return ml__err(b->err, ML_E_INVAL, "q8_mask", -1,
                           "a Q8_0 model stores every matrix as Q8_0; q8_mask is for Q4_0 models");
        h->q8_mask = 0;
        return ML_OK;
    }
    if (o->q8_mask >= 0) {
        h->q8_mask = (uint32_t)o->q8_mask;
        return ML_OK;
    }
    /* Automatic: a class whose source is mostly 8-bit keeps 8 bits, when
     * the source mixes sizes at all. */
    h->q8_mask = 0;
    if (t4 == 0)
        return ML_OK;
    for (int c = 0; c < 7; c++)
        if (b->elems[c][1] && b->elems[c][1] >= b->elems[c][0])
            h->q8_mask |= 1u << c;
    return ML_OK;
}

static int is_matrix(const ml_tensor *t)
{
    return t->ndim == 2 && t->role != ML_R_LCONV && t->role != ML_R_WR; /* F32 matrices */
}

/* The type a matrix keeps in source mode: its GGUF type, the spec's
 * Q8_0/Q4_0 for those two, F32 for F32. */
static ml_status source_type(ml__conv_build *b, const ml__conv_item *it, uint8_t *code)
{
    const ml_gguf_tensor *src = it->pub.src;
    uint32_t elems = 1;
    ml_type t = src->type == ML_GGML_F32    ? ML_TYPE_F32
                : src->type == ML_GGML_Q8_0 ? ML_TYPE_Q8_0
                : src->type == ML_GGML_Q4_0 ? ML_TYPE_Q4_0
                                            : ml_type_of_ggml(src->type);
    if (t == ML_TYPE_F32 && src->type != ML_GGML_F32)
        return ml__err(b->err, ML_E_UNSUPPORTED, src->name, (int64_t)src->info_offset,
                       "tensor type %s cannot be kept in an .mlb type table",
                       src->type_name ? src->type_name : "?");
    /* lout's columns move by whole value heads: a block type stays only
     * when a head is whole blocks; else the spec's Q8_0 (requantized). */
    if (ml_type_block(t, &elems, NULL, NULL) && (it->pub.transform & ML_CONV_VHEAD_COLS) &&
        it->vhs % elems) {
        ml_status s = ml__conv_note(b, "%s: value heads of %u columns split %s blocks; "
                                       "requantized to Q8_0", src->name, it->vhs,
                                    ml_type_name(t));
        if (s)
            return s;
        t = ML_TYPE_Q8_0;
    }
    *code = (uint8_t)t;
    return ML_OK;
}

/* A table of Q8_0 and Q4_0 only is written in the old form when a
 * q8_mask can say it (every class in one type; lb and la are Q8_0 there). */
static int old_form(ml__conv_build *b, const uint8_t *types)
{
    ml_convert_plan *p = b->p;
    uint32_t q4 = 0, q8 = 0, k = 0;
    for (size_t i = 0; i < p->n_items; i++) {
        const ml_tensor *t = &p->items[i].pub.dst;
        if (!is_matrix(t))
            continue;
        uint8_t c = types[k++];
        if (c != ML_TYPE_Q8_0 && c != ML_TYPE_Q4_0)
            return 0;
        if (t->role == ML_R_LB || t->role == ML_R_LA)
            continue;
        *(c == ML_TYPE_Q8_0 ? &q8 : &q4) |= t->q8_class;
    }
    if (q4 & q8)
        return 0;
    p->h.wtype = q4 ? ML_WTYPE_Q4_0 : ML_WTYPE_Q8_0;
    p->h.q8_mask = q4 ? q8 : 0;
    return 1;
}

/* Source mode: every matrix keeps its GGUF type (mlb(5)'s type table). */
static ml_status choose_source(ml__conv_build *b, const ml_convert_opts *o)
{
    ml_convert_plan *p = b->p;
    if (o->q8_mask > 0)
        return ml__err(b->err, ML_E_INVAL, "q8_mask", -1,
                       "every matrix keeps its source's type; q8_mask is for Q4_0 models");
    uint8_t *types = malloc(b->n_mat ? b->n_mat : 1);
    if (!types)
        return ml__err(b->err, ML_E_NOMEM, "", -1, "out of memory");
    uint32_t k = 0;
    ml_status s = ML_OK;
    for (size_t i = 0; i < p->n_items && !s; i++)
        if (is_matrix(&p->items[i].pub.dst))
            s = source_type(b, &p->items[i], &types[k++]);
    if (s || old_form(b, types)) {
        free(types);
        return s;
    }
    p->h.wtype = ML_WTYPE_TABLE;
    p->h.q8_mask = 0;
    p->types = types;
    return ML_OK;
}

/* Source types a mix quantizes without allow_requantize: floats, and Q8_0
 * (nearly lossless; what llama.cpp's converter writes by default). */
static int mix_source_ok(uint32_t ggml)
{
    return ggml == ML_GGML_F32 || ggml == ML_GGML_F16 || ggml == ML_GGML_BF16 ||
           ggml == ML_GGML_Q8_0;
}

/* A mix (issue 38): each matrix's type is llama.cpp's for it. */
static ml_status choose_mix(ml__conv_build *b, const ml_convert_opts *o)
{
    ml_convert_plan *p = b->p;
    const ml_mlb_header *h = &p->h;
    if (o->wtype || o->q8_mask >= 0)
        return ml__err(b->err, ML_E_INVAL, "mix", -1,
                       "a mix chooses every matrix's type: no wtype or q8_mask with it");
    uint32_t n_v = 0, k = 0, i_v = 0;
    for (size_t i = 0; i < p->n_items; i++) {
        const ml_tensor *t = &p->items[i].pub.dst;
        n_v += is_matrix(t) && (t->role == ML_R_WV || t->role == ML_R_LQKV);
    }
    uint8_t *types = malloc(b->n_mat ? b->n_mat : 1);
    if (!types)
        return ml__err(b->err, ML_E_NOMEM, "", -1, "out of memory");
    for (size_t i = 0; i < p->n_items; i++) {
        const ml__conv_item *it = &p->items[i];
        const ml_tensor *t = &it->pub.dst;
        if (!is_matrix(t))
            continue;
        const ml_gguf_tensor *src = it->pub.src;
        if (src && !o->allow_requantize && !mix_source_ok(src->type)) {
            free(types);
            return ml__err(b->err, ML_E_UNSUPPORTED, src->name, (int64_t)src->info_offset,
                           "is %s: a mix quantizes F32, F16, BF16 or Q8_0 matrices; "
                           "requantizing another quantized type needs allow_requantize "
                           "(ml-quant --allow-requantize)",
                           src->type_name ? src->type_name : "?");
        }
        ml_mix_tensor m = {.role = t->role,
                           .cols = t->cols,
                           .tied = t->role == ML_R_TOK_EMB && h->shared_classifier,
                           .has_imatrix = o->imatrix != NULL,
                           .n_gqa = h->n_kv_heads ? h->n_heads / h->n_kv_heads : 1};
        if (t->role == ML_R_WV || t->role == ML_R_LQKV)
            m.index = i_v++, m.count = n_v;
        else if (t->role == ML_R_W2)
            m.index = t->layer, m.count = h->n_layers;
        /* lb and la: Q8_0 as the spec has them in every wtype 1/2 model
         * (V rows each, tiny; they drive the gates), where llama.cpp gives
         * ssm_beta/ssm_alpha the base type */
        types[k++] = t->role == ML_R_LB || t->role == ML_R_LA
                         ? (uint8_t)ML_TYPE_Q8_0
                         : (uint8_t)ml_quant_mix_type(o->mix, &m);
    }
    p->h.wtype = ML_WTYPE_TABLE;
    p->h.q8_mask = 0;
    p->types = types;
    return ML_OK;
}

/* --wtype source, or by default a source that mixes block types: each
 * matrix keeps its type.  Otherwise (all Q8_0/Q4_0, or all float, or
 * --wtype q8_0/q4_0) the old rule, so those conversions stay as they were. */
static ml_status choose_types(ml__conv_build *b, const ml_convert_opts *o)
{
    b->p->h.scale_f16 = o->scale_f16 ? 1 : 0;
    if (o->mix)
        return choose_mix(b, o);
    int old = b->n_mat_q == b->n_mat || b->n_mat_float == b->n_mat;
    if (o->wtype == ML_WTYPE_TABLE || (o->wtype == 0 && !old))
        return choose_source(b, o);
    return choose_wtype(b, o);
}

/* Block layouts a Q8_0 or Q4_0 block can take without loss. */
static int exact_to(uint32_t src, ml_type dst)
{
    if (dst == ML_TYPE_Q4_0)
        return src == ML_GGML_Q4_0;
    return src == ML_GGML_Q8_0 || src == ML_GGML_Q4_0 || src == ML_GGML_Q5_0 ||
           src == ML_GGML_IQ4_NL;
}

static void set_method(ml__conv_item *it)
{
    ml_convert_item *p = &it->pub;
    uint32_t elems = 1;
    if (p->transform & ML_CONV_ZEROS) {
        p->method = ML_CONV_EXACT, p->lossless = 1;
    } else if (p->transform & ML_CONV_A_LOG) {
        p->method = ML_CONV_DERIVED, p->lossless = 0;
    } else if (ml_type_block(p->dst.type, &elems, NULL, NULL)) {
        /* kept byte for byte when the source holds this type (always so in
         * source mode) and lout's head columns move as whole blocks; a
         * mix's other matrices are quantized from floats */
        int kept = ml_type_of_ggml(p->src->type) == p->dst.type &&
                   (!(p->transform & ML_CONV_VHEAD_COLS) || it->vhs % elems == 0);
        p->method = kept ? ML_CONV_COPY : ML_CONV_QUANTIZE, p->lossless = kept;
    } else if (p->dst.type == ML_TYPE_F32) {
        p->method = p->src->type == ML_GGML_F32 ? ML_CONV_COPY : ML_CONV_EXACT;
        p->lossless = 1;
    } else {
        int blocks_kept = !(p->transform & ML_CONV_VHEAD_COLS) || it->vhs % ML_QK == 0;
        int same = (p->src->type == ML_GGML_Q8_0 && p->dst.type == ML_TYPE_Q8_0) ||
                   (p->src->type == ML_GGML_Q4_0 && p->dst.type == ML_TYPE_Q4_0);
        if (blocks_kept && exact_to(p->src->type, p->dst.type))
            p->method = same ? ML_CONV_COPY : ML_CONV_EXACT, p->lossless = 1;
        else
            p->method = ML_CONV_QUANTIZE, p->lossless = 0;
    }
}

/* The second layout pass, on the final header, gives types and offsets. */
static ml_status finalize(ml__conv_build *b)
{
    ml_convert_plan *p = b->p;
    ml_mlb_layout lay;
    ml_tensor t;
    size_t i = 0;
    int r;
    ml_error local;
    ml_error *err = b->err ? b->err : &local;
    ml_mlb_layout_begin_types(&lay, &p->h, p->h.layer_flags ? p->flags : NULL, p->types);
    while ((r = ml_mlb_layout_next(&lay, &t, err)) == 1) {
        if (t.type == ML_TYPE_U8) /* layer flags, type table */
            continue;
        if (i >= p->n_items || p->items[i].pub.dst.role != t.role)
            return ml__err(b->err, ML_E_INVAL, t.name, -1, "internal: layout changed");
        p->items[i].pub.dst = t;
        set_method(&p->items[i]);
        i++;
    }
    if (r < 0)
        return err->code;
    uint64_t end;
    ml_status s = ml_mlb_layout_size_types(&p->h, p->h.layer_flags ? p->flags : NULL, p->types,
                                           &end, NULL, b->err);
    if (s)
        return s;
    if (ml__align_up(end, ML_MLB_ALIGN, &p->size))
        return ml__err(b->err, ML_E_NOMEM, "", -1, "the model size overflows");
    return ML_OK;
}

/* Every GGUF tensor must have been used, or be one we know to leave out. */
static ml_status check_unused(ml__conv_build *b)
{
    size_t mtp = 0, cls = 0;
    for (size_t i = 0; i < b->n_tensors; i++) {
        if (b->used[i])
            continue;
        const ml_gguf_tensor *t = ml_gguf_tensor_at(b->g, i);
        unsigned blk;
        int n = 0;
        if (sscanf(t->name, "blk.%u.%n", &blk, &n) == 1 && n > 0 && blk >= b->n_layers &&
            blk < b->n_layer_all) {
            mtp++;
            continue;
        }
        if (b->arch == ML__ARCH_QWEN3 && strcmp(t->name, "cls.output.weight") == 0) {
            cls++;
            continue;
        }
        return ml__err(b->err, ML_E_UNSUPPORTED, t->name, (int64_t)t->info_offset,
                       "this tensor has no place in a %s .mlb model", b->p->arch);
    }
    ml_status s = ML_OK;
    if (mtp)
        s = ml__conv_note(b, "%zu tensors of the MTP blocks are not converted", mtp);
    if (!s && cls)
        s = ml__conv_note(b, "cls.output.weight (a reranker head) is not converted");
    if (!s && b->rope_freqs)
        s = ml__conv_note(b,
                          "rope_freqs.weight is not stored: the header's llama3 fields replace it");
    return s;
}

/* ===========================================================================
 * Importance matrices
 * ========================================================================= */

/* Importances for every matrix quantized to Q4_0 with the fit rule or to a
 * block type (a mix); the slot a matrix reads is mli(5)'s decision
 * (ml_mli_matrix_slot). */
static ml_status attach_importances(ml__conv_build *b, const ml_mli *m, int mix)
{
    ml_convert_plan *p = b->p;
    ml_status s = ml_mli_check_model(m, &p->h, b->err);
    if (s)
        return s;
    if (ml_mli_get_info(m)->layer_tokens == 0)
        return ml__err(b->err, ML_E_INVAL, "imatrix", -1, "the importance matrix holds no tokens");
    size_t used = 0, skipped_cls = 0, skipped_lout = 0;
    for (size_t i = 0; i < p->n_items && !s; i++) {
        ml__conv_item *it = &p->items[i];
        const ml_tensor *t = &it->pub.dst;
        if ((t->type != ML_TYPE_Q4_0 && !ml_quant_block_supported(t->type)) ||
            it->pub.method != ML_CONV_QUANTIZE)
            continue;
        int slot = ml_mli_matrix_slot(&p->h, t->role, NULL);
        skipped_lout += t->role == ML_R_LOUT && slot < 0;
        if (slot < 0)
            continue;
        if (!(it->imp = malloc(t->cols * sizeof *it->imp)))
            return ml__err(b->err, ML_E_NOMEM, "", -1, "out of memory");
        int got;
        s = ml_mli_importance(m, &p->h, t->role, t->layer, t->cols, it->imp, &got, b->err);
        if (!got) {
            free(it->imp);
            it->imp = NULL;
        }
        used += got;
        skipped_cls += !s && !got && slot == ML_MLI_CLS_IN;
    }
    if (!s)
        s = ml__conv_note(b, "importance matrix applied to %zu matrices (%s)", used,
                          mix ? "the mix's block types" : "Q4_0, fit rule");
    if (!s && skipped_cls)
        s = ml__conv_note(
            b, "the importance matrix has no classifier tokens: the classifier is quantized "
               "without importances");
    if (!s && skipped_lout)
        s = ml__conv_note(b, "lout is quantized without importances: its input (lin_v_heads x "
                             "lin_v_dim) is wider than the importance matrix's wo slot");
    return s;
}

/* ===========================================================================
 * Public
 * ========================================================================= */

void ml_convert_opts_init(ml_convert_opts *o)
{
    memset(o, 0, sizeof *o);
    o->q8_mask = -1;
    o->scale_f16 = 1;
    o->q4_rule = -1;
    o->threads = 1;
}

static ml_status check_opts(const ml_convert_opts *o, ml_error *err)
{
    if (o->wtype != 0 && o->wtype != ML_WTYPE_Q8_0 && o->wtype != ML_WTYPE_Q4_0 &&
        o->wtype != ML_WTYPE_TABLE)
        return ml__err(err, ML_E_INVAL, "wtype", -1, "%u is not a weight type", o->wtype);
    if (o->mix && !strcmp(ml_quant_mix_name(o->mix), "?"))
        return ml__err(err, ML_E_INVAL, "mix", -1, "%d is not a mix", (int)o->mix);
    if (o->q8_mask < -1 || o->q8_mask > ML_Q8_ALL)
        return ml__err(err, ML_E_INVAL, "q8_mask", -1, "%lld is not a class mask",
                       (long long)o->q8_mask);
    if (o->q4_rule < -1 || o->q4_rule > ML_Q4_ROUND)
        return ml__err(err, ML_E_INVAL, "q4_rule", -1, "%d is not a rule", o->q4_rule);
    if (o->imatrix && o->q4_rule == ML_Q4_ROUND)
        return ml__err(err, ML_E_INVAL, "imatrix", -1,
                       "importances need the fit rule; the round rule cannot use them");
    return ML_OK;
}

static ml_status build(ml__conv_build *b, const ml_convert_opts *o)
{
    ml_convert_plan *p = b->p;
    ml_status s;
    if ((s = ml__conv_read_header(b)))
        return s;
    p->flags = b->flags; /* the plan owns them from here; b->flags stays an alias */
    if ((s = ml__conv_bind_all(b)) || (s = choose_types(b, o)) || (s = finalize(b)) ||
        (s = check_unused(b)))
        return s;
    p->q4_rule = o->q4_rule >= 0                             ? o->q4_rule
                 : b->arch == ML__ARCH_GEMMA3 && !o->imatrix ? ML_Q4_ROUND
                                                             : ML_Q4_FIT;
    if (o->q4_rule < 0 && b->arch == ML__ARCH_GEMMA3 && o->imatrix &&
        (s = ml__conv_note(
             b, "gemma3 defaults to the round rule, but an importance matrix needs the fit "
                "rule: using fit")))
        return s;
    if (o->imatrix && p->q4_rule == ML_Q4_FIT && (s = attach_importances(b, o->imatrix, o->mix != 0)))
        return s;
    return ML_OK;
}

ml_status ml_convert_plan_new(const ml_gguf *g, const ml_convert_opts *o, ml_convert_plan **out,
                              ml_error *err)
{
    *out = NULL;
    ml_convert_opts def;
    if (!o) {
        ml_convert_opts_init(&def);
        o = &def;
    }
    ml_status s = check_opts(o, err);
    if (s)
        return s;
    ml_convert_plan *p = calloc(1, sizeof *p);
    ml__conv_build b = {.g = g, .p = p, .err = err, .n_tensors = ml_gguf_n_tensors(g)};
    if (!p || !(b.used = calloc(b.n_tensors ? b.n_tensors : 1, 1))) {
        free(p);
        return ml__err(err, ML_E_NOMEM, "", -1, "out of memory");
    }
    p->g = g;
    ml_mlb_header_init(&p->h);
    p->threads = o->threads ? o->threads : 1;
    p->progress = o->progress;
    p->progress_ctx = o->progress_ctx;
    p->on_tensor = o->on_tensor;
    p->tensor_ctx = o->tensor_ctx;
    s = build(&b, o);
    if (b.flags != p->flags) /* failed before the plan took them */
        free(b.flags);
    free(b.used);
    if (s) {
        ml_convert_plan_free(p);
        return s;
    }
    *out = p;
    return ML_OK;
}

void ml_convert_plan_free(ml_convert_plan *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->n_items; i++)
        free(p->items[i].imp);
    for (size_t i = 0; i < p->n_notes; i++)
        free(p->notes[i]);
    free(p->items);
    free(p->notes);
    free(p->flags);
    free(p->types);
    free(p);
}

const ml_mlb_header *ml_convert_plan_header(const ml_convert_plan *p)
{
    return &p->h;
}

const uint8_t *ml_convert_plan_flags(const ml_convert_plan *p)
{
    return p->h.layer_flags ? p->flags : NULL;
}

const uint8_t *ml_convert_plan_types(const ml_convert_plan *p)
{
    return p->types;
}

const char *ml_convert_plan_arch(const ml_convert_plan *p)
{
    return p->arch;
}

const char *ml_convert_plan_arch_desc(const ml_convert_plan *p)
{
    return p->arch_desc;
}

int ml_convert_plan_q4_rule(const ml_convert_plan *p)
{
    return p->q4_rule;
}

size_t ml_convert_plan_n_items(const ml_convert_plan *p)
{
    return p->n_items;
}

const ml_convert_item *ml_convert_plan_item(const ml_convert_plan *p, size_t i)
{
    return i < p->n_items ? &p->items[i].pub : NULL;
}

size_t ml_convert_plan_n_notes(const ml_convert_plan *p)
{
    return p->n_notes;
}

const char *ml_convert_plan_note(const ml_convert_plan *p, size_t i)
{
    return i < p->n_notes ? p->notes[i] : NULL;
}

uint64_t ml_convert_plan_size(const ml_convert_plan *p)
{
    return p->size;
}

static const char *dst_type_name(const ml_tensor *t)
{
    return ml_type_name(t->type);
}

void ml_convert_item_describe(const ml_convert_plan *p, const ml_convert_item *it, char *buf,
                              size_t n)
{
    const char *st = it->src ? (it->src->type_name ? it->src->type_name : "?") : "-";
    int w;
    switch (it->method) {
    case ML_CONV_COPY: w = snprintf(buf, n, "copy"); break;
    case ML_CONV_EXACT:
        if (it->transform & ML_CONV_ZEROS)
            w = snprintf(buf, n, "zeros (no bias in the GGUF)");
        else
            w = snprintf(buf, n, "exact %s -> %s", st, dst_type_name(&it->dst));
        break;
    case ML_CONV_QUANTIZE:
        w = snprintf(buf, n, "quantize %s -> %s%s", st, dst_type_name(&it->dst),
                     it->dst.type == ML_TYPE_Q4_0
                         ? (p->q4_rule == ML_Q4_ROUND          ? " (round)"
                            : ((const ml__conv_item *)it)->imp ? " (fit, imatrix)"
                                                               : " (fit)")
                     : ((const ml__conv_item *)it)->imp ? " (imatrix)"
                                                        : "");
        break;
    default: w = snprintf(buf, n, "A_log = ln(-ssm_a)"); break;
    }
    static const struct {
        uint32_t bit;
        const char *text;
    } xf[] = {
        {ML_CONV_ROWS, "rows of a fused tensor"},
        {ML_CONV_QGATE, "query/gate rows split"},
        {ML_CONV_ROPE_PERM, "RoPE pairs interleaved"},
        {ML_CONV_VHEADS, "value heads regrouped"},
        {ML_CONV_VHEAD_COLS, "value-head columns regrouped"},
    };
    for (size_t i = 0; i < sizeof xf / sizeof xf[0] && w >= 0 && (size_t)w < n; i++)
        if (it->transform & xf[i].bit)
            w += snprintf(buf + w, n - (size_t)w, ", %s", xf[i].text);
}
