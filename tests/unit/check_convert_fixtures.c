/* check_convert_fixtures.c - llama.cpp's own GGUFs converted: the models of
 * tests/fixtures/models (tiny random Hugging Face models of every
 * supported architecture, converted by llama.cpp's convert_hf_to_gguf.py
 * and quantized by its llama-quantize; tools/make-model-fixtures.py).
 * Every file is converted with the default options and every array checked
 * against its GGUF tensor (tc_check_arrays: lossless arrays bit for bit,
 * requantized ones equal to the spec's quantizer on the source values);
 * the header is checked against the metadata by the mapping of
 * gguf2mlb(1), written out here again.  The F32 files are also converted to
 * Q4_0.  MLCORE_MODELS names another directory of the same layout
 * (NAME/NAME-TYPE.gguf). */
#include "check_convert_util.h"
#include "suites.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static const char *models_dir(void)
{
    const char *d = getenv("MLCORE_MODELS");
    return d && *d ? d : "tests/fixtures/models";
}

static uint32_t key_u32(const ml_gguf *g, const char *arch, const char *suffix, uint32_t def)
{
    char k[96];
    snprintf(k, sizeof k, "%s.%s", arch, suffix);
    uint32_t v = def;
    int found;
    ck_assert(ml_gguf_get_u32(g, k, &v, &found, NULL) == ML_OK);
    return v;
}

static float key_f32(const ml_gguf *g, const char *arch, const char *suffix, float def)
{
    char k[96];
    snprintf(k, sizeof k, "%s.%s", arch, suffix);
    float v = def;
    int found;
    ck_assert(ml_gguf_get_f32(g, k, &v, &found, NULL) == ML_OK);
    return v;
}

static int is(const char *a, const char *b)
{
    return strcmp(a, b) == 0;
}

/* The layer flags the architecture's documented rules give layer l. */
static uint8_t want_flags(const ml_gguf *g, const char *arch, uint32_t l)
{
    if (is(arch, "gemma2"))
        return l % 2 == 0 ? ML_LAYER_SLIDING : 0;
    if (is(arch, "gemma3"))
        return key_u32(g, arch, "attention.sliding_window", 0) && l % 6 < 5
                   ? ML_LAYER_SLIDING | ML_LAYER_LOCAL_ROPE
                   : 0;
    if (is(arch, "smollm3"))
        return (l + 1) % 4 == 0 ? ML_LAYER_NO_ROPE : 0;
    if (is(arch, "qwen35")) {
        char k[96];
        snprintf(k, sizeof k, "%s.attention.recurrent_layers", arch);
        ml_gguf_value arr, e;
        int found, v;
        ck_assert(ml_gguf_get_array(g, k, &arr, &found, NULL) == ML_OK);
        if (found) {
            ck_assert(ml_gguf_array_get(&arr, l, &e, NULL) == ML_OK);
            ck_assert(ml_gguf_value_bool(&e, &v, NULL) == ML_OK);
            return v ? ML_LAYER_LINEAR : 0;
        }
        return (l + 1) % key_u32(g, arch, "full_attention_interval", 4) ? ML_LAYER_LINEAR : 0;
    }
    return 0;
}

static void check_header(const tc_conv *c, const char *file)
{
    const ml_gguf *g = c->g;
    const ml_mlb_header *h = ml_mlb_get_header(c->m);
    const char *s;
    size_t n;
    char arch[32];
    ck_assert(ml_gguf_get_str(g, "general.architecture", &s, &n, NULL, NULL) == ML_OK);
    snprintf(arch, sizeof arch, "%.*s", (int)n, s);
    uint32_t dim = key_u32(g, arch, "embedding_length", 0),
             heads = key_u32(g, arch, "attention.head_count", 0);
    uint32_t hd = key_u32(g, arch, "attention.key_length", dim / heads);
    const ml_gguf_tensor *emb = ml_gguf_find_tensor(g, "token_embd.weight");
    ck_assert_msg(h->dim == dim && h->n_heads == heads, "%s: dim/heads", file);
    ck_assert_uint_eq(h->n_layers, key_u32(g, arch, "block_count", 0) -
                                       key_u32(g, arch, "nextn_predict_layers", 0));
    ck_assert_uint_eq(h->n_kv_heads, key_u32(g, arch, "attention.head_count_kv", heads));
    ck_assert_uint_eq(h->hidden_dim, key_u32(g, arch, "feed_forward_length", 0));
    ck_assert_uint_eq(h->max_seq, key_u32(g, arch, "context_length", 0));
    ck_assert_uint_eq(h->vocab, emb->rows);
    ck_assert(h->rope_theta == key_f32(g, arch, "rope.freq_base", 10000.0f));
    ck_assert(h->norm_eps == key_f32(g, arch, "attention.layer_norm_rms_epsilon", -1.0f));
    ck_assert_uint_eq(h->head_dim, hd == dim / heads ? 0 : hd);
    ck_assert_uint_eq(h->shared_classifier, ml_gguf_find_tensor(g, "output.weight") == NULL);
    int gemma = strncmp(arch, "gemma", 5) == 0;
    ck_assert_uint_eq(h->act, gemma);
    ck_assert(h->embed_scale == (gemma ? sqrtf((float)dim) : 0.0f));
    ck_assert_uint_eq(h->post_norms, is(arch, "gemma2") || is(arch, "gemma3"));
    ck_assert_uint_eq(h->qk_norm, is(arch, "qwen3") || is(arch, "gemma3") || is(arch, "qwen35"));
    ck_assert_uint_eq(h->attn_gate, is(arch, "qwen35"));
    if (is(arch, "qwen2"))
        ck_assert_uint_eq(h->qkv_bias, 1);
    if (is(arch, "gemma2")) {
        ck_assert(h->attn_softcap == key_f32(g, arch, "attn_logit_softcapping", 50.0f));
        ck_assert(h->final_softcap == key_f32(g, arch, "final_logit_softcapping", 30.0f));
    }
    if (is(arch, "gemma3"))
        ck_assert(h->final_softcap == key_f32(g, arch, "final_logit_softcapping", 0.0f));
    /* RoPE scaling */
    char k[96];
    snprintf(k, sizeof k, "%s.rope.scaling.type", arch);
    int found;
    const char *ty = "";
    ck_assert(ml_gguf_get_str(g, k, &ty, &n, &found, NULL) == ML_OK);
    uint32_t want_rope = ml_gguf_find_tensor(g, "rope_freqs.weight") ? ML_ROPE_LLAMA3
                         : !found                                    ? ML_ROPE_PLAIN
                         : n == 4 && !memcmp(ty, "yarn", 4)          ? ML_ROPE_YARN
                         : n == 6 && !memcmp(ty, "linear", 6)        ? ML_ROPE_LINEAR
                                                                     : ML_ROPE_PLAIN;
    ck_assert_msg(h->rope_type == want_rope, "%s: rope_type %u, expected %u", file, h->rope_type,
                  want_rope);
    if (want_rope == ML_ROPE_LINEAR || want_rope == ML_ROPE_YARN)
        ck_assert(h->rope_factor == key_f32(g, arch, "rope.scaling.factor", 0));
    if (want_rope == ML_ROPE_YARN) {
        ck_assert_uint_eq(h->rope_orig_max_seq,
                          key_u32(g, arch, "rope.scaling.original_context_length", h->max_seq));
        ck_assert(h->rope_attn_factor == (float)(0.1 * log((double)h->rope_factor) + 1.0));
    }
    int any = 0;
    for (uint32_t l = 0; l < h->n_layers; l++) {
        uint8_t f = want_flags(g, arch, l);
        any |= f;
        ck_assert_msg(ml_mlb_layer_flag(c->m, l) == f, "%s: layer %u flags %u, expected %u", file,
                      l, ml_mlb_layer_flag(c->m, l), f);
    }
    ck_assert_uint_eq(h->layer_flags, any != 0);
    if (is(arch, "qwen35") && any) {
        ck_assert_uint_eq(h->lin_k_heads, key_u32(g, arch, "ssm.group_count", 0));
        ck_assert_uint_eq(h->lin_v_heads, key_u32(g, arch, "ssm.time_step_rank", 0));
        ck_assert_uint_eq(h->lin_k_dim, key_u32(g, arch, "ssm.state_size", 0));
        ck_assert_uint_eq(h->lin_conv, key_u32(g, arch, "ssm.conv_kernel", 0));
        ck_assert_uint_eq(h->rot_dim, key_u32(g, arch, "rope.dimension_count", 0));
    }
}

typedef struct seen {
    size_t files, q8_files, archs_mask;
} seen;

static void check_file(const char *path, const char *base, seen *sn)
{
    tc_conv c;
    tc_convert_file(&c, path, NULL);
    check_header(&c, base);
    size_t lossless = tc_check_arrays(&c);
    size_t n = ml_convert_plan_n_items(c.p);
    /* A Q8_0 GGUF: everything lossless but the computed A_log, and lout
     * when its value heads are narrower than a block (its columns move by
     * less than a block: requantized). */
    if (strstr(base, "-q8_0.gguf")) {
        size_t narrow = ml_mlb_get_header(c.m)->lin_v_dim % 32 ? c.st.quantized : 0;
        for (size_t i = 0; i < n && narrow; i++)
            if (ml_convert_plan_item(c.p, i)->method == ML_CONV_QUANTIZE)
                ck_assert_int_eq(ml_convert_plan_item(c.p, i)->dst.role, ML_R_LOUT);
        ck_assert_msg(lossless + c.st.derived + narrow == n, "%s: %zu of %zu arrays lossless", base,
                      lossless, n);
        sn->q8_files++;
    }
    const char *arch = ml_convert_plan_arch(c.p);
    static const char *const archs[] = {"llama",  "qwen2",  "qwen3",   "gemma",
                                        "gemma2", "gemma3", "smollm3", "qwen35"};
    for (size_t i = 0; i < 8; i++)
        if (is(arch, archs[i]))
            sn->archs_mask |= 1u << i;
    tc_conv_free(&c);
    /* F32 sources: to Q4_0 as well (the architecture's default rule). */
    if (strstr(base, "-f32.gguf")) {
        ml_convert_opts o;
        ml_convert_opts_init(&o);
        o.wtype = ML_WTYPE_Q4_0;
        o.threads = 2;
        tc_convert_file(&c, path, &o);
        tc_check_arrays(&c);
        tc_conv_free(&c);
    }
    sn->files++;
}

/* The GGUF type of the source of every matrix of a converted model. */
static void expect_kept(const tc_conv *c, const char *file, size_t *by_type)
{
    const uint8_t *types = ml_mlb_types(c->m);
    ck_assert_msg(types != NULL, "%s: no type table", file);
    uint32_t k = 0;
    for (size_t i = 0; i < ml_convert_plan_n_items(c->p); i++) {
        const ml_convert_item *it = ml_convert_plan_item(c->p, i);
        const ml_tensor *t = ml_mlb_find(c->m, it->dst.name);
        if (t->ndim != 2 || t->role == ML_R_LCONV)
            continue;
        ml_type want = it->src->type == ML_GGML_Q4_0 ? ML_TYPE_Q4_0
                       : it->src->type == ML_GGML_Q8_0 ? ML_TYPE_Q8_0
                       : it->src->type == ML_GGML_F32  ? ML_TYPE_F32
                                                       : ml_type_of_ggml(it->src->type);
        ck_assert_msg(t->type == want, "%s: %s is %s, its source %s", file, t->name,
                      ml_type_name(t->type), it->src->type_name);
        ck_assert_int_eq(types[k++], t->type);
        by_type[t->type]++;
    }
}

/* llama.cpp's mixed files keep their types by default (wtype 3), every
 * array lossless, block matrices byte for byte (tc_check_arrays); the
 * dequantized rows equal ml_gguf_dequantize's.  --wtype q4_0 still gives
 * the old form. */
START_TEST(test_fixture_block_types)
{
    static const struct {
        const char *file;
        ml_type main, other; /* the matrices' types: most, and the rest */
        size_t n_other;
    } cases[] = {
        {"llama2-q4_k_m.gguf", ML_TYPE_Q4_K, ML_TYPE_Q6_K, 3},
        {"llama2-q4_1.gguf", ML_TYPE_Q4_1, ML_TYPE_Q6_K, 1},
        {"llama2-q4_0.gguf", ML_TYPE_Q4_0, ML_TYPE_Q6_K, 1},
        {"llama2-q6_k.gguf", ML_TYPE_Q6_K, ML_TYPE_Q6_K, 16},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/llama2/%s", models_dir(), cases[i].file);
        tc_conv c;
        tc_convert_file(&c, path, NULL);
        tc_expect_fields(ml_mlb_get_header(c.m), "wtype=3 q8_mask=0");
        size_t by_type[ML_TYPE_COUNT] = {0};
        expect_kept(&c, cases[i].file, by_type);
        ck_assert_uint_eq(by_type[cases[i].other], cases[i].n_other);
        ck_assert_uint_eq(by_type[cases[i].main] + by_type[cases[i].other] -
                              (cases[i].main == cases[i].other ? by_type[cases[i].main] : 0),
                          16);
        ck_assert_uint_eq(tc_check_arrays(&c), ml_convert_plan_n_items(c.p));
        ck_assert_uint_eq(c.st.quantized, 0);
        /* One kept matrix against ml_gguf_dequantize, rows 1-2. */
        const ml_tensor *wq = ml_mlb_find(c.m, "blk.1.wv");
        const ml_gguf_tensor *src = ml_gguf_find_tensor(c.g, "blk.1.attn_v.weight");
        float got[2 * 256], want[2 * 256];
        ck_assert_uint_eq(wq->cols, 256);
        ck_assert_int_eq(ml_tensor_dequantize(wq, 1, 2, got, NULL), ML_OK);
        ck_assert_int_eq(ml_gguf_dequantize(src, 1, 2, want, NULL), ML_OK);
        ck_assert_mem_eq(got, want, sizeof got);
        tc_conv_free(&c);
    }
    /* --wtype q4_0: requantized as before. */
    ml_convert_opts o;
    ml_convert_opts_init(&o);
    o.wtype = ML_WTYPE_Q4_0;
    char path[512];
    snprintf(path, sizeof path, "%s/llama2/llama2-q4_k_m.gguf", models_dir());
    tc_conv c;
    tc_convert_file(&c, path, &o);
    ck_assert_uint_eq(ml_mlb_get_header(c.m)->wtype, ML_WTYPE_Q4_0);
    ck_assert_ptr_null(ml_mlb_types(c.m));
    tc_check_arrays(&c);
    tc_conv_free(&c);
}
END_TEST

/* The mixes (issue 38) from the F32 fixtures: every matrix has
 * ml_quant_mix_type's type (lb and la Q8_0), every array is what the
 * quantizer makes of the permuted source rows (tc_check_arrays), the
 * bytes do not depend on the thread count; llama2 (dim 256) gets real
 * K-quants, gemma3 and qwen35 the fallbacks. */
static void check_mix(const char *model, ml_quant_mix mix, size_t *by_type)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s/%s-f32.gguf", models_dir(), model, model);
    ml_convert_opts o;
    ml_convert_opts_init(&o);
    o.mix = mix;
    tc_conv c, c3;
    tc_convert_file(&c, path, &o);
    const ml_mlb_header *h = ml_mlb_get_header(c.m);
    tc_expect_fields(h, "wtype=3 q8_mask=0");
    const uint8_t *types = ml_mlb_types(c.m);
    ck_assert_ptr_nonnull(types);
    uint32_t k = 0, n_v = 0, i_v = 0;
    for (size_t i = 0; i < ml_convert_plan_n_items(c.p); i++) {
        const ml_tensor *t = &ml_convert_plan_item(c.p, i)->dst;
        n_v += t->ndim == 2 && (t->role == ML_R_WV || t->role == ML_R_LQKV);
    }
    for (size_t i = 0; i < ml_convert_plan_n_items(c.p); i++) {
        const ml_tensor *t = ml_mlb_find(c.m, ml_convert_plan_item(c.p, i)->dst.name);
        if (t->ndim != 2 || t->role == ML_R_LCONV)
            continue;
        ml_mix_tensor m = {.role = t->role, .cols = t->cols,
                           .tied = t->role == ML_R_TOK_EMB && h->shared_classifier,
                           .n_gqa = h->n_heads / h->n_kv_heads};
        if (t->role == ML_R_WV || t->role == ML_R_LQKV)
            m.index = i_v++, m.count = n_v;
        if (t->role == ML_R_W2)
            m.index = t->layer, m.count = h->n_layers;
        ml_type want = t->role == ML_R_LB || t->role == ML_R_LA ? ML_TYPE_Q8_0
                                                                 : ml_quant_mix_type(mix, &m);
        ck_assert_msg(t->type == want, "%s %s: %s is %s, not %s", model, ml_quant_mix_name(mix),
                      t->name, ml_type_name(t->type), ml_type_name(want));
        ck_assert_int_eq(types[k++], t->type);
        by_type[t->type]++;
    }
    ck_assert_uint_eq(tc_check_arrays(&c) + c.st.quantized + c.st.derived,
                      ml_convert_plan_n_items(c.p));
    o.threads = 3;
    tc_convert_file(&c3, path, &o);
    ck_assert_uint_eq(c3.out.len, c.out.len);
    ck_assert_msg(memcmp(c3.out.p, c.out.p, c.out.len) == 0, "%s: bytes differ with 3 threads",
                  path);
    ck_assert_uint_eq(c.out.len, ml_convert_plan_size(c.p));
    tc_conv_free(&c3);
    tc_conv_free(&c);
}

START_TEST(test_fixture_mixes)
{
    static const ml_quant_mix mixes[] = {ML_MIX_Q4_K_M, ML_MIX_Q5_K_M, ML_MIX_Q6_K,
                                         ML_MIX_IQ4_XS};
    for (size_t i = 0; i < 4; i++) {
        size_t by[ML_TYPE_COUNT] = {0};
        check_mix("llama2", mixes[i], by);
        if (mixes[i] == ML_MIX_Q4_K_M) /* llama-quantize's llama2-q4_k_m.gguf has the same */
            ck_assert(by[ML_TYPE_Q4_K] == 13 && by[ML_TYPE_Q6_K] == 3);
        size_t fb[ML_TYPE_COUNT] = {0};
        check_mix("gemma3", mixes[i], fb);
        check_mix("qwen35", mixes[i], fb);
        ck_assert_uint_eq(fb[ML_TYPE_Q4_K] + fb[ML_TYPE_Q5_K] + fb[ML_TYPE_Q6_K] +
                              fb[ML_TYPE_IQ4_XS],
                          0);
    }
    /* Refusals: a K-quant source without allow_requantize (named), a mix
     * with a wtype, an unknown mix. */
    char path[512];
    snprintf(path, sizeof path, "%s/llama2/llama2-q4_k_m.gguf", models_dir());
    ml_gguf *g;
    ck_assert_int_eq(ml_gguf_open(path, &g, NULL), ML_OK);
    ml_convert_opts o;
    ml_convert_opts_init(&o);
    o.mix = ML_MIX_Q4_K_M;
    ml_convert_plan *p = NULL;
    ml_error e;
    ck_assert_int_eq(ml_convert_plan_new(g, &o, &p, &e), ML_E_UNSUPPORTED);
    ck_assert_str_eq(e.field, "token_embd.weight");
    o.allow_requantize = 1; /* the same types: kept */
    ck_assert_int_eq(ml_convert_plan_new(g, &o, &p, &e), ML_OK);
    for (size_t i = 0; i < ml_convert_plan_n_items(p); i++)
        ck_assert_int_eq(ml_convert_plan_item(p, i)->method, ML_CONV_COPY);
    ml_convert_plan_free(p);
    o.wtype = ML_WTYPE_Q4_0;
    ck_assert_int_eq(ml_convert_plan_new(g, &o, &p, &e), ML_E_INVAL);
    o.wtype = 0;
    o.mix = (ml_quant_mix)9;
    ck_assert_int_eq(ml_convert_plan_new(g, &o, &p, &e), ML_E_INVAL);
    ml_gguf_close(g);
}
END_TEST

START_TEST(test_fixture_models)
{
    const char *root = models_dir();
    DIR *d = opendir(root);
    ck_assert_msg(d != NULL, "no fixture models in %s", root);
    seen sn = {0};
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char sub[512];
        snprintf(sub, sizeof sub, "%s/%s", root, e->d_name);
        DIR *m = opendir(sub);
        if (!m)
            continue;
        struct dirent *f;
        while ((f = readdir(m))) {
            size_t n = strlen(f->d_name);
            if (n < 6 || strcmp(f->d_name + n - 5, ".gguf") != 0)
                continue;
            char path[1024];
            snprintf(path, sizeof path, "%s/%s", sub, f->d_name);
            check_file(path, f->d_name, &sn);
        }
        closedir(m);
    }
    closedir(d);
    /* Every architecture but possibly Qwen3.5, at least one Q8_0 each. */
    ck_assert_msg((sn.archs_mask & 0x7f) == 0x7f, "architectures seen: mask %zx", sn.archs_mask);
    ck_assert_msg(sn.files >= 40 && sn.q8_files >= 12, "%zu files, %zu Q8_0", sn.files,
                  sn.q8_files);
}
END_TEST

Suite *suite_convert_fixtures(void)
{
    Suite *s = suite_create("convert_fixtures");
    TCase *tc = tcase_create("llama.cpp");
    tcase_add_test(tc, test_fixture_models);
    tcase_add_test(tc, test_fixture_block_types);
    tcase_add_test(tc, test_fixture_mixes);
    suite_add_tcase(s, tc);
    return s;
}
