/* check_mlb_roundtrip.c - write -> load -> verify round trips of 300
 * random valid configurations from a seeded PRNG, covering every optional
 * feature (qkv_bias, qk_norm, explicit head_dim, rot_dim, attn_gate,
 * post_norms, sliding/local/no-RoPE/linear layer flags, linear-attention
 * dimensions, shared classifier, Q8_0/Q4_0, q8_mask, f16 scales, every
 * rope_type).  Each model is written tensor by tensor with content the test
 * can regenerate, loaded (aligned and misaligned) and compared header and
 * byte for byte, its padding checked to be zero, and read again by
 * ml_mlb_verify_stream through a reader returning small random chunks,
 * whose per-tensor CRCs must equal zlib's crc32 of the bytes written and
 * whose file CRC must equal crc32 of the whole buffer.  A last test checks
 * that the 300 configurations really cover every feature. */
#include "suites.h"
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <zlib.h>

#define N_ROUNDTRIPS 300

static void config(int i, ml_mlb_header *h, uint8_t flags[TU_MAX_LAYERS])
{
    tu_rng r = {0x5eed0000u + (uint64_t)i * 7919};
    memset(flags, 0, TU_MAX_LAYERS);
    tu_random_header(&r, (unsigned)i, h, flags);
}

typedef struct crc_ctx {
    const ml_mlb_header *h;
    const uint8_t *flags;
    const tu_ref *ref;
    size_t n, seen;
    uint64_t seed;
} crc_ctx;

static uint32_t zcrc(uint32_t c, const void *p, uint64_t n)
{
    return (uint32_t)crc32(c, p, (uInt)n);
}

static void on_tensor(void *ctx, const ml_tensor *t, uint32_t crc)
{
    crc_ctx *c = ctx;
    ck_assert_uint_lt(c->seen, c->n);
    const tu_ref *r = &c->ref[c->seen];
    ck_assert_str_eq(t->name, r->name);
    ck_assert_uint_eq(t->offset, r->offset);
    ck_assert_uint_eq(t->nbytes, r->nbytes);
    ck_assert_uint_eq(t->scale_offset, r->scale_offset);
    ck_assert_uint_eq(t->scale_nbytes, r->scale_nbytes);
    uint32_t want;
    if (r->type == ML_TYPE_U8) {
        want = zcrc(0, c->flags, c->h->n_layers);
    } else {
        uint8_t *data = malloc(r->nbytes + 1), *sc = malloc(r->scale_nbytes + 1);
        ck_assert(data && sc);
        tu_tensor_content(c->h, r, c->seed, c->seen, data, sc);
        want = zcrc(0, data, r->nbytes);
        if (r->scale_nbytes)
            want = zcrc(want, sc, r->scale_nbytes);
        free(data);
        free(sc);
    }
    ck_assert_msg(crc == want, "%s: crc %08x, expected %08x", t->name, crc, want);
    c->seen++;
}

START_TEST(test_roundtrip)
{
    ml_mlb_header h;
    uint8_t flags[TU_MAX_LAYERS];
    ml_error err;
    config(_i, &h, flags);
    const uint8_t *fl = h.layer_flags ? flags : NULL;
    ck_assert_msg(ml_mlb_header_validate(&h, NULL, NULL, &err) == ML_OK, "config %d: %s", _i,
                  err.msg);
    if (fl)
        ck_assert_int_eq(ml_mlb_layer_flags_validate(&h, fl, &err), ML_OK);
    uint64_t seed = 1000 + (uint64_t)_i, end;
    tu_mem out;
    tu_write_own(&h, fl, seed, &out);

    size_t n = tu_ref_layout(&h, fl, NULL, 0, &end);
    tu_ref *ref = calloc(n, sizeof *ref);
    ck_assert_ptr_nonnull(ref);
    tu_ref_layout(&h, fl, ref, n, NULL);
    ck_assert_uint_eq(out.len, tu_align64(end));

    /* Header bytes, then every byte outside the arrays is zero padding. */
    uint8_t raw[256];
    ml_mlb_header_encode(&h, raw);
    ck_assert_mem_eq(out.p, raw, 256);
    uint8_t *in_array = calloc(out.len, 1);
    ck_assert_ptr_nonnull(in_array);
    memset(in_array, 1, 256);
    for (size_t i = 0; i < n; i++) {
        memset(in_array + ref[i].offset, 1, ref[i].nbytes);
        if (ref[i].scale_nbytes)
            memset(in_array + ref[i].scale_offset, 1, ref[i].scale_nbytes);
    }
    for (size_t k = 0; k < out.len; k++)
        if (!in_array[k])
            TU_REQUIRE(out.p[k] == 0, "config %d: padding byte %zu is 0x%02x", _i, k, out.p[k]);
    free(in_array);

    /* Load: aligned, and for some configs at an odd address. */
    size_t misalign = _i % 3 == 0 ? 1 + (size_t)_i % 63 : 0;
    tu_buf b;
    tu_buf_copy(&b, out.p, out.len, misalign);
    ml_mlb *m;
    ml_status s = ml_mlb_open_memory(b.p, b.len, &m, &err);
    ck_assert_msg(s == ML_OK, "config %d: %s", _i, err.msg);
    ck_assert_mem_eq(ml_mlb_get_header(m), &h, sizeof h);
    ck_assert_uint_eq(ml_mlb_n_tensors(m), n);
    for (uint32_t l = 0; l < h.n_layers; l++)
        ck_assert_uint_eq(ml_mlb_layer_flag(m, l), fl ? fl[l] : 0);
    for (size_t i = 0; i < n; i++) {
        const ml_tensor *t = ml_mlb_tensor(m, i);
        const tu_ref *r = &ref[i];
        ck_assert_str_eq(t->name, r->name);
        ck_assert_int_eq(t->type, r->type);
        ck_assert_uint_eq(t->rows, r->rows);
        ck_assert_uint_eq(t->cols, r->cols);
        ck_assert_uint_eq(t->offset, r->offset);
        ck_assert_uint_eq(t->nbytes, r->nbytes);
        ck_assert_uint_eq(t->scale_offset, r->scale_offset);
        ck_assert_uint_eq(t->scale_nbytes, r->scale_nbytes);
        ck_assert_uint_eq((uintptr_t)t->data % 64, 0);
        if (r->type == ML_TYPE_U8) {
            ck_assert_mem_eq(t->data, fl, h.n_layers);
            continue;
        }
        uint8_t *data = malloc(r->nbytes + 1), *sc = malloc(r->scale_nbytes + 1);
        ck_assert(data && sc);
        tu_tensor_content(&h, r, seed, i, data, sc);
        ck_assert_msg(memcmp(t->data, data, r->nbytes) == 0, "config %d: %s data", _i, r->name);
        uint64_t ns = r->scale_nbytes / (h.scale_f16 ? 2 : 4);
        for (uint64_t j = 0; j < ns; j++) {
            uint32_t want, got;
            if (h.scale_f16) {
                float f = ml_f16_to_f32((uint16_t)(sc[2 * j] | sc[2 * j + 1] << 8));
                memcpy(&want, &f, 4);
            } else {
                memcpy(&want, sc + 4 * j, 4);
            }
            float f = ml_tensor_scale(t, j);
            memcpy(&got, &f, 4);
            TU_REQUIRE(got == want, "config %d: %s scale %llu", _i, r->name,
                       (unsigned long long)j);
        }
        free(data);
        free(sc);
    }
    ml_mlb_close(m);
    tu_buf_free(&b);

    /* The streaming verifier, in small random chunks. */
    crc_ctx cc = {&h, fl, ref, n, 0, seed};
    tu_reader rd;
    tu_reader_init(&rd, out.p, out.len, seed, 1 + (size_t)(_i % 5) * 97);
    ml_verify_report rep;
    memset(&rep, 0, sizeof rep);
    rep.on_tensor = on_tensor;
    rep.ctx = &cc;
    s = ml_mlb_verify_stream(tu_mem_read, &rd, &rep, &err);
    ck_assert_msg(s == ML_OK, "config %d: verify: %s", _i, err.msg);
    ck_assert_uint_eq(cc.seen, n);
    ck_assert_uint_eq(rep.n_tensors, n);
    ck_assert_uint_eq(rep.bytes, out.len);
    ck_assert_uint_eq(rep.file_crc, zcrc(0, out.p, out.len));
    ck_assert_uint_eq(ml_crc32(0, out.p, out.len), rep.file_crc);
    ck_assert_mem_eq(&rep.header, &h, sizeof h);

    /* Also without the optional last padding, and with no callback. */
    tu_reader_init(&rd, out.p, end, seed + 1, 4096);
    rep.on_tensor = NULL;
    s = ml_mlb_verify_stream(tu_mem_read, &rd, &rep, &err);
    ck_assert_msg(s == ML_OK, "config %d: verify unpadded: %s", _i, err.msg);
    ck_assert_uint_eq(rep.bytes, end);
    ck_assert_uint_eq(rep.file_crc, zcrc(0, out.p, end));

    free(ref);
    tu_mem_free(&out);
}
END_TEST

/* The 300 configurations cover every feature. */
START_TEST(test_roundtrip_coverage)
{
    enum {
        C_BIAS, C_QKN, C_HD, C_ROT, C_GATE, C_POST, C_SLIDE, C_LOCAL, C_NOROPE, C_LINEAR,
        C_SHARED, C_SHARED_OTHER, C_Q8, C_Q4, C_MASK, C_F16, C_F32, C_ROPE0, C_ROPE1, C_ROPE2,
        C_ROPE3, C_ACT, C_WINDOW_ALL, C_LINF_UNUSED, C_GQA, C_MHA, C_N
    };
    int cov[C_N] = {0};
    for (int i = 0; i < N_ROUNDTRIPS; i++) {
        ml_mlb_header h;
        uint8_t f[TU_MAX_LAYERS];
        config(i, &h, f);
        cov[C_BIAS] += h.qkv_bias != 0;
        cov[C_QKN] += h.qk_norm != 0;
        cov[C_HD] += h.head_dim != 0 && h.head_dim != h.dim / h.n_heads;
        cov[C_ROT] += h.rot_dim != 0;
        cov[C_GATE] += h.attn_gate != 0;
        cov[C_POST] += h.post_norms != 0;
        cov[C_SHARED] += h.shared_classifier == 1;
        cov[C_SHARED_OTHER] += h.shared_classifier > 1;
        cov[C_Q8] += h.wtype == 1;
        cov[C_Q4] += h.wtype == 2 && h.q8_mask == 0;
        cov[C_MASK] += h.q8_mask != 0;
        cov[C_F16] += h.scale_f16 != 0;
        cov[C_F32] += h.scale_f16 == 0;
        cov[C_ROPE0 + (int)h.rope_type]++;
        cov[C_ACT] += h.act == 1;
        cov[C_WINDOW_ALL] += h.sliding_window && !h.layer_flags;
        cov[C_LINF_UNUSED] += h.lin_k_heads && !h.layer_flags;
        cov[C_GQA] += h.n_kv_heads < h.n_heads;
        cov[C_MHA] += h.n_kv_heads == h.n_heads && h.n_heads > 1;
        if (h.layer_flags)
            for (uint32_t l = 0; l < h.n_layers; l++) {
                cov[C_SLIDE] += (f[l] & 1) != 0;
                cov[C_LOCAL] += (f[l] & 2) != 0;
                cov[C_NOROPE] += (f[l] & 4) != 0;
                cov[C_LINEAR] += (f[l] & 8) != 0;
            }
    }
    for (int k = 0; k < C_N; k++)
        ck_assert_msg(cov[k] >= 3, "feature %d covered by only %d configurations", k, cov[k]);
}
END_TEST

Suite *suite_mlb_roundtrip(void)
{
    Suite *s = suite_create("mlb_roundtrip");
    TCase *tc = tcase_create("random_models");
    tcase_add_loop_test(tc, test_roundtrip, 0, N_ROUNDTRIPS);
    tcase_add_test(tc, test_roundtrip_coverage);
    suite_add_tcase(s, tc);
    return s;
}
