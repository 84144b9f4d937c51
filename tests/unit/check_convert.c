/* check_convert.c - the GGUF -> .mlb converter on tiny models built here.
 * Every converted array is compared with its GGUF tensor through the
 * mapping written out independently in check_convert_util.c: lossless
 * arrays must hold exactly the GGUF's values (and Q8_0/Q4_0 copies the
 * GGUF's bytes), requantized ones exactly what the spec's quantizer makes
 * of those values.  Also: header fields per architecture, the RoPE row
 * permutation, Qwen3.5's re-orderings, llama3/yarn/linear RoPE scaling,
 * automatic weight types, -128 quants, determinism over thread counts,
 * cancellation, and every refusal with its status, key or tensor and
 * offset. */
#include "check_convert_util.h"
#include "convert/convert_impl.h"
#include "suites.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* ---- helpers ---- */

static void convert_spec(tc_conv *c, const tc_spec *s, const ml_convert_opts *o)
{
    cg g;
    tc_build(&g, s);
    tc_convert(c, &g, o);
}

/* ---- lossless paths ---- */

/* GGUF Q8_0 -> .mlb Q8_0: quant bytes and f16 scale bits are the GGUF's,
 * dequantized floats identical; with f32 scales the scales are the exact
 * widening. */
START_TEST(test_q8_0_bit_for_bit)
{
    for (int f16 = 1; f16 >= 0; f16--) {
        tc_spec s;
        tc_default(&s, "llama");
        ml_convert_opts o;
        ml_convert_opts_init(&o);
        o.scale_f16 = f16;
        tc_conv c;
        convert_spec(&c, &s, &o);
        tc_expect_fields(ml_mlb_get_header(c.m),
                         f16 ? "wtype=1 scale_f16=1 q8_mask=0" : "wtype=1 scale_f16=0 q8_mask=0");
        ck_assert_uint_eq(tc_check_arrays(&c), ml_convert_plan_n_items(c.p));
        /* Raw bytes of every matrix. */
        size_t matrices = 0;
        for (size_t i = 0; i < ml_convert_plan_n_items(c.p); i++) {
            const ml_convert_item *it = ml_convert_plan_item(c.p, i);
            if (it->dst.type != ML_TYPE_Q8_0)
                continue;
            matrices++;
            ck_assert_int_eq(it->method, ML_CONV_COPY);
            const ml_gguf_tensor *src = it->src;
            const ml_tensor *t = ml_mlb_find(c.m, it->dst.name);
            for (uint64_t b = 0; b < src->n_elements / 32; b++) {
                const uint8_t *blk = src->data + 34 * b;
                TU_REQUIRE(memcmp(tc_file_at(&c, t->offset) + 32 * b, blk + 2, 32) == 0,
                           "%s block %llu quants", t->name, (unsigned long long)b);
                float d = ml_f16_to_f32((uint16_t)(blk[0] | blk[1] << 8));
                if (f16)
                    TU_REQUIRE(memcmp(tc_file_at(&c, t->scale_offset) + 2 * b, blk, 2) == 0,
                               "%s block %llu scale bits", t->name, (unsigned long long)b);
                else
                    TU_REQUIRE(memcmp(tc_file_at(&c, t->scale_offset) + 4 * b, &d, 4) == 0,
                               "%s block %llu f32 scale", t->name, (unsigned long long)b);
            }
        }
        ck_assert_uint_eq(matrices, 2 + 7 * 2); /* tok_emb, wcls, 7 per layer */
        ck_assert_uint_eq(c.st.copied, ml_convert_plan_n_items(c.p));
        ck_assert_uint_eq(c.st.quantized, 0);
        tc_conv_free(&c);
    }
}
END_TEST

/* GGUF Q4_0 stays Q4_0 bit for bit; written as Q8_0 (and Q5_0, IQ4_NL
 * as Q8_0) its blocks keep their scale and exact levels. */
START_TEST(test_q4_0_and_exact_widening)
{
    static const uint32_t types[] = {ML_GGML_Q4_0, ML_GGML_Q5_0, ML_GGML_IQ4_NL};
    for (size_t k = 0; k < 3; k++) {
        for (int to8 = 0; to8 < 2; to8++) {
            if (types[k] != ML_GGML_Q4_0 && !to8)
                continue;
            tc_spec s;
            tc_default(&s, "llama");
            s.mtype = types[k];
            ml_convert_opts o;
            ml_convert_opts_init(&o);
            o.wtype = to8 ? ML_WTYPE_Q8_0 : 0;
            tc_conv c;
            convert_spec(&c, &s, &o);
            tc_expect_fields(ml_mlb_get_header(c.m),
                             to8 ? "wtype=1 q8_mask=0" : "wtype=2 q8_mask=0");
            ck_assert_uint_eq(tc_check_arrays(&c), ml_convert_plan_n_items(c.p));
            ck_assert_uint_eq(c.st.quantized, 0);
            ck_assert_uint_eq(c.st.exact, to8 ? 16 : 0);
            tc_conv_free(&c);
        }
    }
}
END_TEST

/* A GGUF Q8_0 quant of -128 becomes -127; the rest of the block stays. */
START_TEST(test_minus_128)
{
    tc_spec s;
    tc_default(&s, "llama");
    cg g;
    tc_build(&g, &s);
    cg_tensor *t = cg_find(&g, "blk.1.ffn_up.weight");
    /* block 3, element 5 of the first row; block 9 element 0 */
    t->data[34 * 3 + 2 + 5] = 0x80;
    t->data[34 * 9 + 2 + 0] = 0x80;
    tc_conv c;
    tc_convert(&c, &g, NULL);
    ck_assert_uint_eq(c.st.clamped_q8, 2);
    ck_assert_str_eq(c.st.first_clamped, "blk.1.ffn_up.weight");
    const ml_tensor *m = ml_mlb_find(c.m, "blk.1.w3");
    const ml_gguf_tensor *src = ml_gguf_find_tensor(c.g, "blk.1.ffn_up.weight");
    const int8_t *q = m->data;
    ck_assert_int_eq(q[32 * 3 + 5], -127);
    ck_assert_int_eq(q[32 * 9], -127);
    for (uint64_t b = 0; b < src->n_elements / 32; b++)
        for (int j = 0; j < 32; j++) {
            int8_t v = (int8_t)src->data[34 * b + 2 + j];
            TU_REQUIRE(q[32 * b + j] == (v == -128 ? -127 : v), "block %llu element %d",
                       (unsigned long long)b, j);
        }
    tc_conv_free(&c);
}
END_TEST

/* ---- requantization ---- */

START_TEST(test_requantize_floats)
{
    static const uint32_t types[] = {ML_GGML_F32, ML_GGML_F16, ML_GGML_BF16};
    for (size_t k = 0; k < 3; k++)
        for (int w = 0; w < 3; w++) {
            tc_spec s;
            tc_default(&s, "llama");
            s.mtype = types[k];
            ml_convert_opts o;
            ml_convert_opts_init(&o);
            o.wtype = w == 0 ? 0 : w == 1 ? ML_WTYPE_Q4_0 : ML_WTYPE_Q4_0;
            o.q4_rule = w == 2 ? ML_Q4_ROUND : -1;
            o.scale_f16 = (int)(k != 1);
            tc_conv c;
            convert_spec(&c, &s, &o);
            const ml_mlb_header *h = ml_mlb_get_header(c.m);
            /* Float sources keep the 8-bit class: Q8_0 unless asked; no
             * automatic Q8_0 classes when the source has no 4-bit class. */
            ck_assert_uint_eq(h->wtype, w == 0 ? ML_WTYPE_Q8_0 : ML_WTYPE_Q4_0);
            ck_assert_uint_eq(h->q8_mask, 0);
            ck_assert_int_eq(ml_convert_plan_q4_rule(c.p), w == 2 ? ML_Q4_ROUND : ML_Q4_FIT);
            /* Norms are lossless, matrices quantized. */
            ck_assert_uint_eq(tc_check_arrays(&c), 5 + 0);
            ck_assert_uint_eq(c.st.quantized, 16);
            /* Q8_0: every weight within half a step of its block's scale. */
            if (h->wtype == ML_WTYPE_Q8_0) {
                const ml_tensor *t = ml_mlb_find(c.m, "blk.0.w2");
                tc_map m;
                char name[64];
                tc_mapping(c.g, h, t, &m, name, sizeof name);
                float *want = tc_expected(c.g, t, &m), *got = tc_mlb_floats(t);
                for (size_t e = 0; e < (size_t)t->rows * t->cols; e++)
                    TU_REQUIRE(fabsf(got[e] - want[e]) <= 0.5f * ml_tensor_scale(t, e / 32) * 1.0001f,
                               "w2[%zu]", e);
                free(want);
                free(got);
            }
            tc_conv_free(&c);
        }
}
END_TEST

/* The same input and options give the same bytes, whatever the threads. */
START_TEST(test_deterministic_threads)
{
    tu_mem ref;
    tu_mem_init(&ref);
    static const unsigned threads[] = {1, 2, 3, 8};
    for (size_t k = 0; k < 4; k++) {
        tc_spec s;
        tc_default(&s, "qwen3");
        s.mtype = ML_GGML_F16;
        s.hidden = 256;
        ml_convert_opts o;
        ml_convert_opts_init(&o);
        o.wtype = ML_WTYPE_Q4_0;
        o.threads = threads[k];
        tc_conv c;
        convert_spec(&c, &s, &o);
        if (k == 0) {
            ck_assert(tu_mem_sink(&ref, c.out.p, c.out.len, NULL) == ML_OK);
        } else {
            ck_assert_uint_eq(c.out.len, ref.len);
            ck_assert_msg(memcmp(c.out.p, ref.p, ref.len) == 0, "%u threads differ", threads[k]);
        }
        tc_conv_free(&c);
    }
    tu_mem_free(&ref);
}
END_TEST

/* ---- architectures ---- */

typedef struct arch_case {
    const char *arch;
    const char *fields;
    const char *flags; /* expected layer flags, or NULL for none */
} arch_case;

static const arch_case arch_cases[] = {
    {"llama",
     "qkv_bias=0 qk_norm=0 act=0 post_norms=0 embed_scale=0 shared_classifier=0 "
     "head_dim=0 rot_dim=0 rope_type=0 rope_theta=10000 norm_eps=1e-6 max_seq=256 vocab=100",
     NULL},
    {"qwen2", "qkv_bias=1 qk_norm=0 shared_classifier=1 act=0", NULL},
    {"qwen3", "qk_norm=1 head_dim=32 qkv_bias=0 shared_classifier=1", NULL},
    {"gemma",
     "act=1 embed_scale=8 shared_classifier=1 head_dim=32 post_norms=0 attn_softcap=0 "
     "final_softcap=0 sliding_window=0 layer_flags=0",
     NULL},
    {"gemma2",
     "act=1 embed_scale=8 post_norms=1 attn_softcap=50 final_softcap=30 "
     "sliding_window=8 layer_flags=1 attn_scale=0 rope_local_theta=0",
     "\x01\x00"},
    {"gemma3",
     "act=1 embed_scale=8 post_norms=1 qk_norm=1 attn_softcap=0 final_softcap=0 "
     "sliding_window=8 layer_flags=1 rope_local_theta=10000 attn_scale=0",
     "\x03\x03\x03\x03\x03\x00"},
    {"smollm3", "layer_flags=1 sliding_window=0 shared_classifier=1", "\x00\x00\x00\x04"},
    {"qwen35",
     "attn_gate=1 qk_norm=1 head_dim=32 rot_dim=8 lin_k_heads=2 lin_v_heads=4 "
     "lin_k_dim=16 lin_v_dim=32 lin_conv=4 layer_flags=1 n_layers=4",
     "\x08\x08\x08\x00"},
};

START_TEST(test_architectures)
{
    const arch_case *ac = &arch_cases[_i];
    tc_spec s;
    tc_default(&s, ac->arch);
    tc_conv c;
    convert_spec(&c, &s, NULL);
    const ml_mlb_header *h = ml_mlb_get_header(c.m);
    tc_expect_fields(h, ac->fields);
    ck_assert_str_eq(ml_convert_plan_arch(c.p), ac->arch);
    if (ac->flags) {
        ck_assert_uint_eq(h->layer_flags, 1);
        for (uint32_t l = 0; l < h->n_layers; l++)
            ck_assert_msg(ml_mlb_layer_flag(c.m, l) == (uint8_t)ac->flags[l],
                          "%s layer %u: flags %u, expected %u", ac->arch, l,
                          ml_mlb_layer_flag(c.m, l), (uint8_t)ac->flags[l]);
    } else {
        ck_assert_uint_eq(h->layer_flags, 0);
    }
    /* Q8_0 sources: everything lossless except A_log. */
    size_t n = ml_convert_plan_n_items(c.p), derived = strcmp(ac->arch, "qwen35") ? 0 : 3;
    ck_assert_uint_eq(tc_check_arrays(&c), n - derived);
    ck_assert_uint_eq(c.st.derived, derived);
    tc_conv_free(&c);
}
END_TEST

/* The permutation by hand on qwen2: .mlb row 2i+s of head h is GGUF row
 * h*hd + s*hd/2 + i; wv and bv untouched. */
START_TEST(test_rope_permutation_by_hand)
{
    tc_spec s;
    tc_default(&s, "qwen2");
    s.mtype = ML_GGML_F32;
    ml_convert_opts o;
    ml_convert_opts_init(&o);
    tc_conv c;
    convert_spec(&c, &s, &o);
    const ml_gguf_tensor *q = ml_gguf_find_tensor(c.g, "blk.0.attn_q.bias");
    const ml_tensor *bq = ml_mlb_find(c.m, "blk.0.bq");
    const float *src = (const float *)(const void *)q->data, *dst = bq->data;
    uint32_t hd = 16;
    for (uint32_t h = 0; h < 4; h++)
        for (uint32_t i = 0; i < hd / 2; i++)
            for (uint32_t sgn = 0; sgn < 2; sgn++)
                ck_assert(dst[h * hd + 2 * i + sgn] == src[h * hd + sgn * hd / 2 + i]);
    const ml_gguf_tensor *v = ml_gguf_find_tensor(c.g, "blk.0.attn_v.bias");
    ck_assert(memcmp(ml_mlb_find(c.m, "blk.0.bv")->data, v->data, 32 * 4) == 0);
    tc_conv_free(&c);
}
END_TEST

/* Qwen3.5 with 16-wide value heads: lout's columns move by half blocks,
 * so it is requantized (not lossless); the rest stays lossless. */
START_TEST(test_qwen35_narrow_heads)
{
    tc_spec s;
    tc_default(&s, "qwen35");
    s.lin_dv = 16, s.lin_v = 4, s.lin_k = 2, s.hidden = 128;
    tc_conv c;
    convert_spec(&c, &s, NULL);
    size_t requant = 0;
    for (size_t i = 0; i < ml_convert_plan_n_items(c.p); i++) {
        const ml_convert_item *it = ml_convert_plan_item(c.p, i);
        if (it->method == ML_CONV_QUANTIZE) {
            ck_assert_int_eq(it->dst.role, ML_R_LOUT);
            requant++;
        }
    }
    ck_assert_uint_eq(requant, 3);
    tc_check_arrays(&c);
    /* MTP block 4 is left out, with a note. */
    int noted = 0;
    for (size_t i = 0; i < ml_convert_plan_n_notes(c.p); i++)
        noted |= strstr(ml_convert_plan_note(c.p, i), "MTP") != NULL;
    ck_assert(noted);
    tc_conv_free(&c);
}
END_TEST

/* Value heads by hand, with 4 value heads per key head (2 key heads, 8
 * value heads, where the tiled-to-grouped map is no involution): .mlb head
 * h takes GGUF head (h mod 4) * 2 + h / 4, so head 1 <- 2, head 4 <- 1,
 * head 6 <- 5.  Checked on lz rows, dt_bias entries and lout columns. */
START_TEST(test_qwen35_value_heads_by_hand)
{
    tc_spec s;
    tc_default(&s, "qwen35");
    s.lin_k = 2, s.lin_v = 8, s.lin_dv = 32, s.nextn = 0; /* Q8_0: copied exactly */
    tc_conv c;
    convert_spec(&c, &s, NULL);
    static const uint32_t from[8] = {0, 2, 4, 6, 1, 3, 5, 7};
    const ml_gguf_tensor *gz = ml_gguf_find_tensor(c.g, "blk.0.attn_gate.weight");
    const ml_gguf_tensor *gdt = ml_gguf_find_tensor(c.g, "blk.1.ssm_dt.bias");
    const ml_gguf_tensor *gout = ml_gguf_find_tensor(c.g, "blk.2.ssm_out.weight");
    const ml_tensor *lz = ml_mlb_find(c.m, "blk.0.lz"), *dt = ml_mlb_find(c.m, "blk.1.dt_bias");
    const ml_tensor *lout = ml_mlb_find(c.m, "blk.2.lout");
    float *z = tc_mlb_floats(lz), *o = tc_mlb_floats(lout);
    float zsrc[64], osrc[256];
    for (uint32_t h = 0; h < 8; h++) {
        /* row 3 of head h of lz: GGUF row from[h] * 32 + 3 */
        ck_assert(ml_gguf_dequantize(gz, from[h] * 32 + 3, 1, zsrc, NULL) == ML_OK);
        ck_assert_msg(memcmp(z + (h * 32 + 3) * 64, zsrc, 64 * sizeof(float)) == 0, "lz head %u",
                      h);
        float v;
        memcpy(&v, gdt->data + 4 * from[h], 4);
        ck_assert_msg(((const float *)dt->data)[h] == v, "dt_bias head %u", h);
        /* column 5 of head h in output row 7 */
        ck_assert(ml_gguf_dequantize(gout, 7, 1, osrc, NULL) == ML_OK);
        ck_assert_msg(o[7 * 256 + h * 32 + 5] == osrc[from[h] * 32 + 5], "lout head %u", h);
    }
    free(z);
    free(o);
    tc_check_arrays(&c);
    tc_conv_free(&c);
}
END_TEST

/* attention.recurrent_layers wins over full_attention_interval. */
START_TEST(test_qwen35_recurrent_key)
{
    tc_spec s;
    tc_default(&s, "qwen35");
    s.nextn = 0;
    cg g;
    tc_build(&g, &s);
    /* layers 0-2 linear as built; the key says the same, as bools */
    uint8_t rec[4] = {1, 1, 1, 0};
    cg_arr_bool(&g, "qwen35.attention.recurrent_layers", rec, 4);
    tc_conv c;
    tc_convert(&c, &g, NULL);
    for (int l = 0; l < 4; l++)
        ck_assert_uint_eq(ml_mlb_layer_flag(c.m, (uint32_t)l), rec[l] ? 8 : 0);
    tc_check_arrays(&c);
    tc_conv_free(&c);
}
END_TEST

START_TEST(test_fused_qkv_and_partial_biases)
{
    tc_spec s;
    tc_default(&s, "qwen3");
    s.fused_qkv = 1;
    tc_conv c;
    convert_spec(&c, &s, NULL);
    tc_check_arrays(&c);
    tc_conv_free(&c);

    /* Only a q bias: k and v biases are zeros. */
    tc_default(&s, "llama");
    cg g;
    tc_build(&g, &s);
    float b[64];
    for (int i = 0; i < 64; i++)
        b[i] = (float)i / 8;
    cg_tensor_f(&g, "blk.0.attn_q.bias", ML_GGML_F32, 64, 0, b);
    tc_convert(&c, &g, NULL);
    tc_expect_fields(ml_mlb_get_header(c.m), "qkv_bias=1");
    tc_check_arrays(&c);
    const ml_tensor *bq = ml_mlb_find(c.m, "blk.0.bq"), *bk = ml_mlb_find(c.m, "blk.1.bk");
    ck_assert(memcmp(bq->data, b, sizeof b) == 0); /* llama: no permutation */
    for (uint32_t i = 0; i < bk->rows; i++)
        ck_assert(((const float *)bk->data)[i] == 0.0f);
    tc_conv_free(&c);
}
END_TEST

/* ---- RoPE scaling ---- */

/* rope_freqs as llama.cpp's converter computes it (float32 frequencies,
 * the rest in double). */
static void llama3_freqs(float *r, uint32_t hd, float theta, double f, double lo, double hi,
                         double orig)
{
    for (uint32_t i = 0; i < hd / 2; i++) {
        float freq = 1.0f / powf(theta, (float)(2 * i) / (float)hd);
        double wl = 2 * M_PI / freq;
        if (wl < orig / hi)
            r[i] = 1;
        else if (wl > orig / lo)
            r[i] = (float)f;
        else {
            double sm = (orig / wl - lo) / (hi - lo);
            r[i] = (float)(1 / ((1 - sm) / f + sm));
        }
    }
}

START_TEST(test_llama3_recovery)
{
    static const struct {
        uint32_t hd;
        float theta;
        double f, lo, hi, orig;
    } cases[] = {
        {128, 500000.0f, 8, 1, 4, 8192}, /* Llama 3.1 */
        {64, 500000.0f, 32, 1, 4, 8192}, /* Llama 3.2 1B */
        {16, 500000.0f, 8, 1, 4, 64},    /* the fixture's */
        {128, 500000.0f, 16, 1, 8, 4096},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        float r[64];
        llama3_freqs(r, cases[k].hd, cases[k].theta, cases[k].f, cases[k].lo, cases[k].hi,
                     cases[k].orig);
        ml__llama3_rope p;
        ml_error e;
        ml_status st = ml__llama3_recover(r, cases[k].hd / 2, cases[k].hd, cases[k].theta, 0,
                                          "rope_freqs.weight", &p, &e);
        ck_assert_msg(st == ML_OK, "case %zu: %s", k, e.msg);
        ck_assert_msg(p.factor == (float)cases[k].f && p.low == (float)cases[k].lo &&
                          p.high == (float)cases[k].hi && p.orig == (uint32_t)cases[k].orig,
                      "case %zu: factor %g low %g high %g orig %u", k, (double)p.factor,
                      (double)p.low, (double)p.high, p.orig);
        for (uint32_t i = 0; i < cases[k].hd / 2; i++)
            ck_assert(fabs(ml__llama3_divisor(&p, i, cases[k].hd, cases[k].theta) - r[i]) <=
                      1e-5 * r[i]);
    }
    /* Not llama3 scaling: refused, naming the tensor. */
    float bad[8] = {1, 1, 2, 1.5f, 8, 8, 8, 8};
    ml__llama3_rope p;
    ml_error e;
    tu_err_reset(&e);
    TU_CHECK_ERR("unordered",
                 ml__llama3_recover(bad, 8, 16, 500000.0f, 0, "rope_freqs.weight", &p, &e), e,
                 ML_E_UNSUPPORTED, "rope_freqs.weight", -1);
    float ones[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    tu_err_reset(&e);
    TU_CHECK_ERR("ones", ml__llama3_recover(ones, 8, 16, 500000.0f, 0, "rope_freqs.weight", &p, &e),
                 e, ML_E_UNSUPPORTED, "rope_freqs.weight", -1);
    /* Smooth values off the line: the check refuses them. */
    float r[64];
    llama3_freqs(r, 128, 500000.0f, 8, 1, 4, 8192);
    for (int i = 0; i < 64; i++)
        if (r[i] > 1 && r[i] < 8) {
            r[i] *= 1.01f;
            break;
        }
    tu_err_reset(&e);
    TU_CHECK_ERR("off the line",
                 ml__llama3_recover(r, 64, 128, 500000.0f, 0, "rope_freqs.weight", &p, &e), e,
                 ML_E_UNSUPPORTED, "rope_freqs.weight", -1);
}
END_TEST

START_TEST(test_llama3_through_the_plan)
{
    tc_spec s;
    tc_default(&s, "llama");
    cg g;
    tc_build(&g, &s);
    float r[8];
    llama3_freqs(r, 16, 10000.0f, 8, 1, 4, 64);
    cg_tensor_f(&g, "rope_freqs.weight", ML_GGML_F32, 8, 0, r);
    tc_conv c;
    tc_convert(&c, &g, NULL);
    tc_expect_fields(ml_mlb_get_header(c.m), "rope_type=1 rope_factor=8 rope_low_freq_factor=1 "
                                             "rope_high_freq_factor=4 rope_orig_max_seq=64");
    tc_check_arrays(&c);
    tc_conv_free(&c);
    /* With another scaling on top: refused. */
    tc_build(&g, &s);
    cg_tensor_f(&g, "rope_freqs.weight", ML_GGML_F32, 8, 0, r);
    cg_str(&g, "llama.rope.scaling.type", "linear");
    cg_f32(&g, "llama.rope.scaling.factor", 2.0f);
    ml_error e;
    tu_err_reset(&e);
    ml_status st = tc_plan(&c, &g, NULL, &e);
    TU_CHECK_ERR("freqs + linear", st, e, ML_E_UNSUPPORTED, "rope_freqs.weight",
                 (int64_t)ml_gguf_find_tensor(c.g, "rope_freqs.weight")->info_offset);
    tc_conv_free(&c);
}
END_TEST

START_TEST(test_rope_scaling_keys)
{
    static const struct {
        const char *type;
        float factor;
        int orig, fast, attn;
        const char *want;
    } cases[] = {
        {"linear", 4, 0, 0, 0, "rope_type=2 rope_factor=4"},
        {"linear", 1, 0, 0, 0, "rope_type=0 rope_factor=0"},
        {"none", 4, 0, 0, 0, "rope_type=0"},
        {NULL, 2, 0, 0, 0, "rope_type=2 rope_factor=2"}, /* llama.cpp's default type */
        {"yarn", 4, 64, 0, 0,
         "rope_type=3 rope_factor=4 rope_low_freq_factor=32 rope_high_freq_factor=1 "
         "rope_orig_max_seq=64 rope_attn_factor=1.13862944"},
        {"yarn", 4, 0, 0, 0, "rope_type=3 rope_orig_max_seq=256"},
        {"yarn", 8, 128, 16, 1,
         "rope_type=3 rope_low_freq_factor=16 rope_high_freq_factor=1 rope_attn_factor=0.5"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        tc_spec s;
        tc_default(&s, "qwen2");
        cg g;
        tc_build(&g, &s);
        if (cases[k].type)
            cg_str(&g, "qwen2.rope.scaling.type", cases[k].type);
        cg_f32(&g, "qwen2.rope.scaling.factor", cases[k].factor);
        if (cases[k].orig)
            cg_u32(&g, "qwen2.rope.scaling.original_context_length", (uint32_t)cases[k].orig);
        if (cases[k].fast)
            cg_f32(&g, "qwen2.rope.scaling.yarn_beta_fast", (float)cases[k].fast);
        if (cases[k].attn)
            cg_f32(&g, "qwen2.rope.scaling.yarn_attn_factor", 0.5f);
        tc_conv c;
        tc_convert(&c, &g, NULL);
        tc_expect_fields(ml_mlb_get_header(c.m), cases[k].want);
        tc_conv_free(&c);
    }
}
END_TEST

/* ---- weight types ---- */

/* The matrix types of a converted model, in table order. */
static void expect_table(const tc_conv *c)
{
    const uint8_t *types = ml_mlb_types(c->m), *plan = ml_convert_plan_types(c->p);
    const ml_mlb_header *h = ml_mlb_get_header(c->m);
    uint32_t n = ml_mlb_matrix_count(h, ml_convert_plan_flags(c->p));
    ck_assert_ptr_nonnull(types);
    ck_assert_ptr_nonnull(plan);
    ck_assert_mem_eq(types, plan, n);
}

/* Q4_0 matrices with a Q8_0 embedding and an F16 classifier: not all
 * Q8_0/Q4_0, so by default each matrix keeps its type (wtype 3), every
 * array lossless. */
START_TEST(test_source_default)
{
    tc_spec s;
    tc_default(&s, "llama");
    s.mtype = ML_GGML_Q4_0;
    s.emb_type = ML_GGML_Q8_0;
    s.out_type = ML_GGML_F16;
    for (int explicit_source = 0; explicit_source < 2; explicit_source++) {
        ml_convert_opts o;
        ml_convert_opts_init(&o);
        o.wtype = explicit_source ? ML_WTYPE_TABLE : 0;
        tc_conv c;
        convert_spec(&c, &s, &o);
        tc_expect_fields(ml_mlb_get_header(c.m), "wtype=3 q8_mask=0 scale_f16=1");
        expect_table(&c);
        ck_assert_int_eq(ml_mlb_find(c.m, "tok_emb")->type, ML_TYPE_Q8_0);
        ck_assert_int_eq(ml_mlb_find(c.m, "blk.0.wq")->type, ML_TYPE_Q4_0);
        ck_assert_int_eq(ml_mlb_find(c.m, "blk.1.w2")->type, ML_TYPE_Q4_0);
        ck_assert_int_eq(ml_mlb_find(c.m, "wcls")->type, ML_TYPE_F16);
        ck_assert_uint_eq(tc_check_arrays(&c), ml_convert_plan_n_items(c.p));
        tc_conv_free(&c);
    }
    /* A q8_mask has no place in a table. */
    ml_convert_opts o;
    ml_convert_opts_init(&o);
    o.q8_mask = ML_Q8_W2;
    cg g;
    tc_build(&g, &s);
    tc_conv c;
    ml_error e;
    tu_err_reset(&e);
    TU_CHECK_ERR("mask with a table", tc_plan(&c, &g, &o, &e), e, ML_E_INVAL, "q8_mask", -1);
    tc_conv_free(&c);
}
END_TEST

/* Block types kept through the converter's moves: the RoPE permutation of
 * wq/wk (qwen2), Qwen3.5's query/gate split and value-head regrouping of
 * rows and, for lout, of columns by whole blocks; a head narrower than a
 * block makes lout Q8_0 (requantized) with a note. */
START_TEST(test_source_moves)
{
    static const char *const archs[] = {"qwen2", "qwen35", "qwen35"};
    for (size_t a = 0; a < 3; a++) {
        tc_spec s;
        tc_default(&s, archs[a]);
        s.mtype = a == 0 ? ML_GGML_IQ4_NL : ML_GGML_Q5_0;
        s.emb_type = ML_GGML_Q8_0;
        if (a == 2)
            s.lin_dv = 16; /* heads of 16 columns: half a block */
        tc_conv c;
        convert_spec(&c, &s, NULL);
        tc_expect_fields(ml_mlb_get_header(c.m), "wtype=3 q8_mask=0");
        expect_table(&c);
        ml_type want = a == 0 ? ML_TYPE_IQ4_NL : ML_TYPE_Q5_0;
        const ml_tensor *wk = ml_mlb_find(c.m, a == 0 ? "blk.0.wk" : "blk.3.wk");
        ck_assert_int_eq(wk->type, want);
        size_t lossless = tc_check_arrays(&c), n = ml_convert_plan_n_items(c.p);
        if (a == 0) {
            ck_assert_uint_eq(lossless, n);
            tc_conv_free(&c);
            continue;
        }
        const ml_tensor *lout = ml_mlb_find(c.m, "blk.0.lout");
        ck_assert_int_eq(lout->type, a == 1 ? ML_TYPE_Q5_0 : ML_TYPE_Q8_0);
        int noted = 0;
        for (size_t i = 0; i < ml_convert_plan_n_notes(c.p); i++)
            noted |= strstr(ml_convert_plan_note(c.p, i), "requantized to Q8_0") != NULL;
        ck_assert_int_eq(noted, a == 2);
        /* everything lossless but A_log (derived) and, with narrow heads,
         * the three linear layers' lout */
        ck_assert_uint_eq(lossless + c.st.derived + (a == 2 ? 3 : 0), n);
        tc_conv_free(&c);
    }
}
END_TEST

/* --wtype source on an F32 Qwen3.5: F32 matrices stay F32, lout's value
 * heads regrouped by columns, every array lossless but A_log. */
START_TEST(test_source_f32_moves)
{
    tc_spec s;
    tc_default(&s, "qwen35");
    s.mtype = ML_GGML_F32;
    ml_convert_opts o;
    ml_convert_opts_init(&o);
    o.wtype = ML_WTYPE_TABLE;
    tc_conv c;
    convert_spec(&c, &s, &o);
    tc_expect_fields(ml_mlb_get_header(c.m), "wtype=3 q8_mask=0");
    expect_table(&c);
    ck_assert_int_eq(ml_mlb_find(c.m, "blk.0.lout")->type, ML_TYPE_F32);
    ck_assert_int_eq(ml_mlb_find(c.m, "blk.0.lb")->type, ML_TYPE_F32);
    size_t lossless = tc_check_arrays(&c);
    ck_assert_uint_eq(lossless + c.st.derived, ml_convert_plan_n_items(c.p));
    tc_conv_free(&c);
}
END_TEST

/* --wtype source on a source of Q8_0 and Q4_0 only: the old form, a
 * q8_mask saying which classes are Q8_0; the default rule, unchanged,
 * keeps such files as they were. */
START_TEST(test_source_old_form)
{
    tc_spec s;
    tc_default(&s, "llama");
    s.mtype = ML_GGML_Q4_0;
    s.emb_type = ML_GGML_Q8_0;
    s.out_type = ML_GGML_Q8_0;
    ml_convert_opts o;
    ml_convert_opts_init(&o);
    o.wtype = ML_WTYPE_TABLE;
    tc_conv c;
    convert_spec(&c, &s, &o);
    tc_expect_fields(ml_mlb_get_header(c.m), "wtype=2 q8_mask=3");
    ck_assert_ptr_null(ml_mlb_types(c.m));
    ck_assert_ptr_null(ml_convert_plan_types(c.p));
    ck_assert_uint_eq(tc_check_arrays(&c), ml_convert_plan_n_items(c.p));
    tc_conv_free(&c);
    convert_spec(&c, &s, NULL);
    tc_expect_fields(ml_mlb_get_header(c.m), "wtype=2 q8_mask=3");
    tc_conv_free(&c);
    /* All Q8_0: wtype 1. */
    s.mtype = ML_GGML_Q8_0;
    convert_spec(&c, &s, &o);
    tc_expect_fields(ml_mlb_get_header(c.m), "wtype=1 q8_mask=0");
    tc_conv_free(&c);
}
END_TEST

START_TEST(test_automatic_types)
{
    /* Q4_0 matrices, Q8_0 embedding (tied), F16 classifier when untied. */
    for (int tied = 0; tied < 2; tied++) {
        tc_spec s;
        tc_default(&s, "llama");
        s.mtype = ML_GGML_Q4_0;
        s.emb_type = ML_GGML_Q8_0;
        s.out_type = ML_GGML_F16;
        s.tied = tied;
        /* An F16 classifier is a block type: by default it would be kept
         * (test_source_default); --wtype q4_0 asks for the old rule. */
        ml_convert_opts q4;
        ml_convert_opts_init(&q4);
        q4.wtype = tied ? 0 : ML_WTYPE_Q4_0;
        tc_conv c;
        convert_spec(&c, &s, &q4);
        const ml_mlb_header *h = ml_mlb_get_header(c.m);
        ck_assert_uint_eq(h->wtype, ML_WTYPE_Q4_0);
        ck_assert_uint_eq(h->q8_mask, tied ? ML_Q8_TOK_EMB : ML_Q8_TOK_EMB | ML_Q8_WCLS);
        /* tok_emb copied, wcls quantized from F16, the rest copied */
        size_t lossless = tc_check_arrays(&c);
        ck_assert_uint_eq(lossless, ml_convert_plan_n_items(c.p) - (tied ? 0 : 1));
        tc_conv_free(&c);
    }
    /* An explicit mask wins; a mask for a Q8_0 model is refused. */
    tc_spec s;
    tc_default(&s, "llama");
    s.mtype = ML_GGML_Q4_0;
    ml_convert_opts o;
    ml_convert_opts_init(&o);
    o.q8_mask = ML_Q8_W2 | ML_Q8_WV;
    tc_conv c;
    convert_spec(&c, &s, &o);
    tc_expect_fields(ml_mlb_get_header(c.m), "wtype=2 q8_mask=72");
    ck_assert_uint_eq(c.st.exact, 4); /* w2 and wv of 2 layers, Q4_0 -> Q8_0 */
    tc_check_arrays(&c);
    tc_conv_free(&c);
    o.wtype = ML_WTYPE_Q8_0;
    cg g;
    tc_build(&g, &s);
    ml_error e;
    tu_err_reset(&e);
    ml_status st = tc_plan(&c, &g, &o, &e);
    TU_CHECK_ERR("mask with Q8_0", st, e, ML_E_INVAL, "q8_mask", -1);
    tc_conv_free(&c);
}
END_TEST

/* ---- refusals ---- */

typedef struct refusal {
    const char *what;
    const char *arch;
    void (*edit)(cg *g);
    ml_status status;
    const char *field;
    int where; /* 0: no offset; 1: the key's value; 2: the tensor's info */
} refusal;

static void e_arch(cg *g)
{
    cg_str(g, "general.architecture", "phi3");
}
static void e_experts(cg *g)
{
    cg_u32(g, "llama.expert_count", 8);
}
static void e_longrope(cg *g)
{
    cg_str(g, "llama.rope.scaling.type", "longrope");
}
static void e_causal(cg *g)
{
    cg_bool(g, "llama.attention.causal", 0);
}
static void e_attn_factor(cg *g)
{
    cg_f32(g, "llama.rope.scaling.attn_factor", 2.0f);
}
static void e_out_bias(cg *g)
{
    float b[64] = {0};
    cg_tensor_f(g, "blk.0.attn_output.bias", ML_GGML_F32, 64, 0, b);
}
static void e_missing(cg *g)
{
    cg_remove(g, "blk.1.ffn_up.weight");
}
static void e_shape(cg *g)
{
    cg_tensor *t = cg_find(g, "blk.0.attn_k.weight");
    t->dims[1] = 16, t->nbytes /= 2;
}
static void e_freqs_qwen(cg *g)
{
    float r[8] = {1, 1, 1, 1, 2, 4, 8, 8};
    cg_tensor_f(g, "rope_freqs.weight", ML_GGML_F32, 8, 0, r);
}
static void e_gemma_out(cg *g)
{
    float *x = calloc(64 * 100, sizeof *x);
    cg_tensor_f(g, "output.weight", ML_GGML_Q8_0, 64, 100, x);
    free(x);
}
static void e_value_len(cg *g)
{
    cg_u32(g, "llama.attention.value_length", 32);
}
static void e_heads_arr(cg *g)
{
    /* head_count_kv per layer, disagreeing */
    uint32_t v[2] = {2, 4};
    cg_arr_u32(g, "qwen2.attention.head_count_kv", v, 2);
}
static void e_no_eps(cg *g)
{
    cg_drop(g, "llama.attention.layer_norm_rms_epsilon");
}
static void e_q35_bias(cg *g)
{
    float b[256] = {0};
    cg_tensor_f(g, "blk.3.attn_q.bias", ML_GGML_F32, 256, 0, b);
}

static const refusal refusals[] = {
    {"unknown architecture", "llama", e_arch, ML_E_UNSUPPORTED, "general.architecture", 1},
    {"experts", "llama", e_experts, ML_E_UNSUPPORTED, "llama.expert_count", 1},
    {"longrope", "llama", e_longrope, ML_E_UNSUPPORTED, "llama.rope.scaling.type", 1},
    {"non-causal", "llama", e_causal, ML_E_UNSUPPORTED, "llama.attention.causal", 1},
    {"attn factor without yarn", "llama", e_attn_factor, ML_E_UNSUPPORTED,
     "llama.rope.scaling.attn_factor", 1},
    {"output bias", "llama", e_out_bias, ML_E_UNSUPPORTED, "blk.0.attn_output.bias", 2},
    {"missing tensor", "llama", e_missing, ML_E_FORMAT, "blk.1.ffn_up.weight", 0},
    {"wrong shape", "llama", e_shape, ML_E_SHAPE, "blk.0.attn_k.weight", 2},
    {"rope_freqs on qwen2", "qwen2", e_freqs_qwen, ML_E_UNSUPPORTED, "rope_freqs.weight", 2},
    {"gemma classifier", "gemma", e_gemma_out, ML_E_UNSUPPORTED, "output.weight", 2},
    {"value length", "llama", e_value_len, ML_E_UNSUPPORTED, "llama.attention.value_length", 1},
    {"per-layer heads", "qwen2", e_heads_arr, ML_E_UNSUPPORTED, "qwen2.attention.head_count_kv", 0},
    {"missing epsilon", "llama", e_no_eps, ML_E_FORMAT, "llama.attention.layer_norm_rms_epsilon",
     0},
    {"qwen35 attention bias", "qwen35", e_q35_bias, ML_E_UNSUPPORTED, "blk.3.attn_q.bias", 0},
};

START_TEST(test_refusals)
{
    const refusal *r = &refusals[_i];
    tc_spec s;
    tc_default(&s, r->arch);
    cg g;
    tc_build(&g, &s);
    r->edit(&g);
    tc_conv c;
    ml_error e;
    tu_err_reset(&e);
    ml_status st = tc_plan(&c, &g, NULL, &e);
    int64_t off = -1;
    if (r->where == 1)
        off = (int64_t)ml_gguf_find(c.g, r->field)->value.offset;
    else if (r->where == 2)
        off = (int64_t)ml_gguf_find_tensor(c.g, r->field)->info_offset;
    if (r->where == 0 && st == r->status && e.offset != -1)
        off = e.offset; /* offsets of per-layer entries: only the field is pinned */
    TU_CHECK_ERR(r->what, st, e, r->status, r->field, off);
    ck_assert_ptr_null(c.p);
    tc_conv_free(&c);
}
END_TEST

START_TEST(test_dimension_refusals)
{
    /* dim 48: not a multiple of 32 */
    tc_spec s;
    tc_default(&s, "llama");
    s.dim = 48, s.n_heads = 3, s.n_kv_heads = 1, s.mtype = ML_GGML_F32;
    cg g;
    tc_build(&g, &s);
    tc_conv c;
    ml_error e;
    tu_err_reset(&e);
    ml_status st = tc_plan(&c, &g, NULL, &e);
    TU_CHECK_ERR("dim 48", st, e, ML_E_UNSUPPORTED, "llama.embedding_length",
                 (int64_t)ml_gguf_find(c.g, "llama.embedding_length")->value.offset);
    tc_conv_free(&c);
    /* An IQ2_XXS matrix cannot be read. */
    tc_default(&s, "llama");
    s.dim = 256, s.hidden = 256;
    tc_build(&g, &s);
    cg_tensor *t = cg_find(&g, "blk.0.ffn_up.weight");
    uint64_t dims[2] = {256, 256};
    uint8_t *raw = calloc(256, 66);
    cg_remove(&g, "blk.0.ffn_up.weight");
    (void)t;
    cg_tensor_raw(&g, "blk.0.ffn_up.weight", ML_GGML_IQ2_XXS, 2, dims, raw, 256 * 66);
    free(raw);
    tu_err_reset(&e);
    st = tc_plan(&c, &g, NULL, &e);
    TU_CHECK_ERR("IQ2_XXS", st, e, ML_E_UNSUPPORTED, "blk.0.ffn_up.weight",
                 (int64_t)ml_gguf_find_tensor(c.g, "blk.0.ffn_up.weight")->info_offset);
    tc_conv_free(&c);
}
END_TEST

/* ---- non-finite values, cancellation ---- */

START_TEST(test_non_finite_sources)
{
    /* A NaN in an F32 matrix being quantized. */
    tc_spec s;
    tc_default(&s, "llama");
    s.mtype = ML_GGML_F32;
    cg g;
    tc_build(&g, &s);
    float nan = NAN;
    memcpy(cg_find(&g, "blk.0.ffn_down.weight")->data + 4 * 100, &nan, 4);
    tc_conv c;
    ml_error e;
    ck_assert(tc_plan(&c, &g, NULL, &e) == ML_OK);
    tu_mem out;
    tu_mem_init(&out);
    tu_err_reset(&e);
    ml_status st = ml_convert_write(c.p, tu_mem_sink, &out, NULL, &e);
    ck_assert_int_eq(st, ML_E_FORMAT);
    ck_assert_str_eq(e.field, "blk.0.ffn_down.weight");
    tu_mem_free(&out);
    tc_conv_free(&c);

    /* An infinity in a norm: named with its byte offset. */
    tc_build(&g, &s);
    float inf = INFINITY;
    memcpy(cg_find(&g, "blk.1.ffn_norm.weight")->data + 4 * 7, &inf, 4);
    ck_assert(tc_plan(&c, &g, NULL, &e) == ML_OK);
    tu_mem_init(&out);
    tu_err_reset(&e);
    st = ml_convert_write(c.p, tu_mem_sink, &out, NULL, &e);
    TU_CHECK_ERR("inf norm", st, e, ML_E_FORMAT, "blk.1.ffn_norm.weight",
                 (int64_t)ml_gguf_find_tensor(c.g, "blk.1.ffn_norm.weight")->file_offset + 28);
    tu_mem_free(&out);
    tc_conv_free(&c);

    /* A NaN scale in a Q8_0 block that is copied. */
    tc_default(&s, "llama");
    tc_build(&g, &s);
    uint8_t *blk = cg_find(&g, "blk.0.ffn_gate.weight")->data + 34 * 5;
    blk[0] = 0x01, blk[1] = 0x7e; /* f16 NaN */
    ck_assert(tc_plan(&c, &g, NULL, &e) == ML_OK);
    tu_mem_init(&out);
    tu_err_reset(&e);
    st = ml_convert_write(c.p, tu_mem_sink, &out, NULL, &e);
    TU_CHECK_ERR("NaN scale", st, e, ML_E_FORMAT, "blk.0.ffn_gate.weight",
                 (int64_t)ml_gguf_find_tensor(c.g, "blk.0.ffn_gate.weight")->file_offset + 34 * 5);
    tu_mem_free(&out);
    tc_conv_free(&c);
}
END_TEST

static int stop_after(void *ctx, uint64_t done, uint64_t total)
{
    int *calls = ctx;
    ck_assert_uint_le(done, total);
    return ++*calls >= 3;
}

static int count_calls(void *ctx, uint64_t done, uint64_t total)
{
    uint64_t *last = ctx;
    ck_assert_uint_ge(done, *last);
    ck_assert_uint_le(done, total);
    *last = done;
    return 0;
}

START_TEST(test_progress_and_cancel)
{
    tc_spec s;
    tc_default(&s, "llama");
    int calls = 0;
    ml_convert_opts o;
    ml_convert_opts_init(&o);
    o.progress = stop_after;
    o.progress_ctx = &calls;
    cg g;
    tc_build(&g, &s);
    tc_conv c;
    ml_error e;
    ck_assert(tc_plan(&c, &g, &o, &e) == ML_OK);
    tu_mem out;
    tu_mem_init(&out);
    tu_err_reset(&e);
    ml_status st = ml_convert_write(c.p, tu_mem_sink, &out, NULL, &e);
    TU_CHECK_ERR("cancel", st, e, ML_E_IO, "", -1);
    ck_assert_str_eq(e.msg, "interrupted");
    ck_assert_int_eq(calls, 3);
    tu_mem_free(&out);
    tc_conv_free(&c);
    /* Progress reaches the total. */
    uint64_t last = 0;
    o.progress = count_calls;
    o.progress_ctx = &last;
    convert_spec(&c, &s, &o);
    uint64_t total = 0;
    for (size_t i = 0; i < ml_convert_plan_n_items(c.p); i++)
        total += ml_convert_plan_item(c.p, i)->dst.nbytes +
                 ml_convert_plan_item(c.p, i)->dst.scale_nbytes;
    ck_assert_uint_eq(last, total);
    tc_conv_free(&c);
}
END_TEST

START_TEST(test_describe)
{
    tc_spec s;
    tc_default(&s, "qwen2");
    s.mtype = ML_GGML_F16;
    ml_convert_opts o;
    ml_convert_opts_init(&o);
    o.wtype = ML_WTYPE_Q4_0;
    tc_conv c;
    convert_spec(&c, &s, &o);
    char buf[160];
    for (size_t i = 0; i < ml_convert_plan_n_items(c.p); i++) {
        const ml_convert_item *it = ml_convert_plan_item(c.p, i);
        ml_convert_item_describe(c.p, it, buf, sizeof buf);
        if (!strcmp(it->dst.name, "blk.0.wq"))
            ck_assert_str_eq(buf, "quantize F16 -> Q4_0 (fit), RoPE pairs interleaved");
        if (!strcmp(it->dst.name, "blk.0.bv"))
            ck_assert_str_eq(buf, "copy");
        if (!strcmp(it->dst.name, "blk.0.bk"))
            ck_assert_str_eq(buf, "copy, RoPE pairs interleaved");
    }
    tc_conv_free(&c);
}
END_TEST

Suite *suite_convert(void)
{
    Suite *s = suite_create("convert");
    TCase *tc = tcase_create("lossless");
    tcase_add_test(tc, test_q8_0_bit_for_bit);
    tcase_add_test(tc, test_q4_0_and_exact_widening);
    tcase_add_test(tc, test_minus_128);
    suite_add_tcase(s, tc);
    tc = tcase_create("requantize");
    tcase_add_test(tc, test_requantize_floats);
    tcase_add_test(tc, test_deterministic_threads);
    tcase_add_test(tc, test_automatic_types);
    tcase_add_test(tc, test_source_default);
    tcase_add_test(tc, test_source_moves);
    tcase_add_test(tc, test_source_f32_moves);
    tcase_add_test(tc, test_source_old_form);
    suite_add_tcase(s, tc);
    tc = tcase_create("architectures");
    tcase_add_loop_test(tc, test_architectures, 0, (int)(sizeof arch_cases / sizeof arch_cases[0]));
    tcase_add_test(tc, test_rope_permutation_by_hand);
    tcase_add_test(tc, test_qwen35_narrow_heads);
    tcase_add_test(tc, test_qwen35_recurrent_key);
    tcase_add_test(tc, test_qwen35_value_heads_by_hand);
    tcase_add_test(tc, test_fused_qkv_and_partial_biases);
    tcase_add_test(tc, test_describe);
    suite_add_tcase(s, tc);
    tc = tcase_create("rope");
    tcase_add_test(tc, test_llama3_recovery);
    tcase_add_test(tc, test_llama3_through_the_plan);
    tcase_add_test(tc, test_rope_scaling_keys);
    suite_add_tcase(s, tc);
    tc = tcase_create("refusals");
    tcase_add_loop_test(tc, test_refusals, 0, (int)(sizeof refusals / sizeof refusals[0]));
    tcase_add_test(tc, test_dimension_refusals);
    tcase_add_test(tc, test_non_finite_sources);
    tcase_add_test(tc, test_progress_and_cancel);
    suite_add_tcase(s, tc);
    return s;
}
