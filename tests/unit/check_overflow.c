/* check_overflow.c - size arithmetic at the limits.  Headers whose bodies
 * would be terabytes (vocab 2^24 x dim 65536; 65536 layers of 65536-wide
 * matrices, linear attention at its limits) must be refused as
 * ML_E_FORMAT (file too short) by the loader and the streaming verifier
 * without allocating anything near that size (checked under an address
 * space limit when not running under ASan) and without crashing;
 * ml_mlb_layout_size must give the exact end, computed here in closed form
 * and by the reference layout with 64-bit math.  Also
 * ml_mlb_layer_state_bytes for attention, sliding-window (context below
 * and above the window) and linear layers, and contexts large enough to
 * saturate rather than wrap. */
#include "suites.h"
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#ifndef UNDER_ASAN
#define UNDER_ASAN 0
#endif

/* Limits the address space to what the process uses plus 256 MiB (not
 * under ASan, whose shadow memory needs terabytes of it).  Returns 1 if a
 * limit was set; as_restore puts the old one back. */
static struct rlimit saved_as;
static int as_limit(void)
{
    if (UNDER_ASAN)
        return 0;
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long pages = 0;
    if (!f)
        return 0;
    int ok = fscanf(f, "%lu", &pages) == 1;
    fclose(f);
    if (!ok || getrlimit(RLIMIT_AS, &saved_as) != 0)
        return 0;
    struct rlimit r = saved_as;
    rlim_t want = (rlim_t)pages * 4096 + ((rlim_t)256 << 20);
    if (r.rlim_max != RLIM_INFINITY && want > r.rlim_max)
        return 0;
    r.rlim_cur = want;
    return setrlimit(RLIMIT_AS, &r) == 0;
}

static void as_restore(int set)
{
    if (set)
        ck_assert_int_eq(setrlimit(RLIMIT_AS, &saved_as), 0);
}

/* vocab 2^24, dim = hidden = 65536, 65536 layers, Q8_0, f32 scales. */
static void huge_q8(ml_mlb_header *h)
{
    ml_mlb_header_init(h);
    tu_apply(h, NULL, "dim=65536 n_layers=65536 n_heads=64 n_kv_heads=64 hidden_dim=65536 "
                      "vocab=16777216 max_seq=16777216 rope_theta=10000 wtype=1");
}

/* Everything at once, Q4_0 with f16 scales and a mask, linear attention
 * at its limits, layer flags cycling 0, 1, 8, 4, 2. */
static void huge_mixed(ml_mlb_header *h, uint8_t *flags)
{
    ml_mlb_header_init(h);
    tu_apply(h, NULL, "dim=65536 n_layers=65536 n_heads=64 n_kv_heads=8 head_dim=1024 "
                      "hidden_dim=65536 vocab=16777216 max_seq=16777216 rope_theta=10000 "
                      "wtype=2 q8_mask=0x55 scale_f16=1 qkv_bias=1 qk_norm=1 attn_gate=1 "
                      "post_norms=1 layer_flags=1 sliding_window=16777216 "
                      "rope_local_theta=10000 rot_dim=1024 lin_k_heads=256 lin_v_heads=256 "
                      "lin_k_dim=256 lin_v_dim=256 lin_conv=256");
    static const uint8_t cyc[5] = {0, 1, 8, 4, 2};
    for (uint32_t l = 0; l < 65536; l++)
        flags[l] = cyc[l % 5];
}

START_TEST(test_layout_size_huge_q8)
{
    ml_mlb_header h;
    ml_error err;
    huge_q8(&h);
    ck_assert_int_eq(ml_mlb_header_validate(&h, NULL, NULL, &err), ML_OK);
    /* Closed form: every array is a multiple of 64 bytes, so no padding. */
    const uint64_t V = 1ull << 24, D = 65536, H = 65536, L = 65536;
    uint64_t mat_dd = D * D + D * D / 32 * 4, mat_hd = H * D + H * D / 32 * 4;
    uint64_t layer = 4 * D + 4 * mat_dd + 4 * D + 3 * mat_hd;
    uint64_t want = 256 + (V * D + V * D / 8) + L * layer + 4 * D + (V * D + V * D / 8);
    uint64_t end = 0, ref_end = 0;
    size_t n = 0;
    ck_assert_int_eq(ml_mlb_layout_size(&h, NULL, &end, &n, &err), ML_OK);
    ck_assert_uint_eq(end, want);
    ck_assert_uint_gt(end, 1ull << 50);
    ck_assert_uint_eq(n, 1 + 65536 * 9 + 2);
    ck_assert_uint_eq(tu_ref_layout(&h, NULL, NULL, 0, &ref_end), n);
    ck_assert_uint_eq(ref_end, want);
    /* NULL outputs are allowed. */
    ck_assert_int_eq(ml_mlb_layout_size(&h, NULL, NULL, NULL, &err), ML_OK);
}
END_TEST

START_TEST(test_layout_size_huge_mixed)
{
    ml_mlb_header h;
    ml_error err;
    uint8_t *flags = malloc(65536);
    ck_assert_ptr_nonnull(flags);
    huge_mixed(&h, flags);
    ck_assert_int_eq(ml_mlb_header_validate(&h, NULL, NULL, &err), ML_OK);
    ck_assert_int_eq(ml_mlb_layer_flags_validate(&h, flags, &err), ML_OK);
    uint64_t end = 0, ref_end = 0;
    size_t n = 0;
    ck_assert_int_eq(ml_mlb_layout_size(&h, flags, &end, &n, &err), ML_OK);
    /* Compare the first tensors one by one with the reference. */
    enum { FIRST = 4000 };
    tu_ref *ref = calloc(FIRST, sizeof *ref);
    ck_assert_ptr_nonnull(ref);
    size_t rn = tu_ref_layout(&h, flags, ref, FIRST, &ref_end);
    ck_assert_uint_eq(n, rn);
    ck_assert_uint_eq(end, ref_end);
    ml_mlb_layout it;
    ml_tensor t;
    ml_mlb_layout_begin(&it, &h, flags);
    for (size_t i = 0; i < FIRST; i++) {
        ck_assert_int_eq(ml_mlb_layout_next(&it, &t, &err), 1);
        ck_assert_str_eq(t.name, ref[i].name);
        ck_assert_uint_eq(t.offset, ref[i].offset);
        ck_assert_uint_eq(t.nbytes, ref[i].nbytes);
        ck_assert_uint_eq(t.scale_offset, ref[i].scale_offset);
        ck_assert_uint_eq(t.scale_nbytes, ref[i].scale_nbytes);
        ck_assert_int_eq(t.type, ref[i].type);
    }
    /* The first matrix alone: 2^24 x 65536 Q8_0 (mask bit 1) at 256 + 65536. */
    ck_assert_str_eq(ref[1].name, "tok_emb");
    ck_assert_uint_eq(ref[1].offset, 256 + 65536);
    ck_assert_uint_eq(ref[1].nbytes, 1ull << 40);
    ck_assert_uint_eq(ref[1].scale_nbytes, (1ull << 40) / 32 * 2);
    ck_assert_uint_gt(end, 1ull << 50);
    free(ref);
    free(flags);
}
END_TEST

/* The loader refuses them as too short, naming the first array. */
START_TEST(test_load_huge_headers)
{
    ml_mlb_header h;
    ml_error err;
    ml_mlb *m = NULL;
    size_t len = 256 + 65536 + 4096;
    uint8_t *file = calloc(len, 1);
    ck_assert_ptr_nonnull(file);
    int lim = as_limit();

    huge_q8(&h);
    ml_mlb_header_encode(&h, file);
    static const size_t lens[] = {256, 257, 4096, 256 + 65536 + 4096};
    for (size_t i = 0; i < 4; i++) {
        tu_buf b;
        tu_buf_copy(&b, file, lens[i], 0);
        tu_err_reset(&err);
        TU_CHECK_ERR("huge q8", ml_mlb_open_memory(b.p, b.len, &m, &err), err, ML_E_FORMAT,
                     "tok_emb", 256);
        ck_assert_ptr_null(m);
        tu_buf_free(&b);
        /* The stream runs out at the end of the input. */
        tu_reader rd;
        ml_verify_report rep;
        memset(&rep, 0, sizeof rep);
        tu_reader_init(&rd, file, lens[i], i, 0);
        tu_err_reset(&err);
        TU_CHECK_ERR("huge q8 stream", ml_mlb_verify_stream(tu_mem_read, &rd, &rep, &err), err,
                     ML_E_FORMAT, "tok_emb", lens[i]);
    }

    uint8_t *flags = file + 256;
    huge_mixed(&h, flags);
    ml_mlb_header_encode(&h, file);
    for (size_t cut = 256 + 65536; cut <= len; cut += 2048) {
        tu_buf b;
        tu_buf_copy(&b, file, cut, 0);
        tu_err_reset(&err);
        TU_CHECK_ERR("huge mixed", ml_mlb_open_memory(b.p, b.len, &m, &err), err, ML_E_FORMAT,
                     "tok_emb", 256 + 65536);
        tu_buf_free(&b);
        tu_reader rd;
        ml_verify_report rep;
        memset(&rep, 0, sizeof rep);
        tu_reader_init(&rd, file, cut, cut, 0);
        tu_err_reset(&err);
        TU_CHECK_ERR("huge mixed stream", ml_mlb_verify_stream(tu_mem_read, &rd, &rep, &err), err,
                     ML_E_FORMAT, "tok_emb", cut);
    }
    /* A huge body after a small tok_emb: the first array that does not fit
     * is deeper in the file. */
    tu_apply(&h, NULL, "vocab=3 dim=32 n_heads=1 n_kv_heads=1 head_dim=32 rot_dim=0 "
                       "hidden_dim=65536");
    ml_mlb_header_encode(&h, file);
    {
        uint64_t end;
        enum { FIRST = 64 };
        tu_ref ref[FIRST];
        tu_ref_layout(&h, flags, ref, FIRST, &end);
        size_t i = 0;
        while (tu_ref_end(&ref[i]) <= len)
            i++;
        tu_buf b;
        tu_buf_copy(&b, file, len, 0);
        tu_err_reset(&err);
        TU_CHECK_ERR("deeper", ml_mlb_open_memory(b.p, b.len, &m, &err), err, ML_E_FORMAT,
                     ref[i].name, ref[i].offset);
        ck_assert_str_ne(ref[i].name, "tok_emb");
        tu_buf_free(&b);
    }
    as_restore(lim);
    free(file);
}
END_TEST

/* Invalid headers: the layout functions report the validation status. */
START_TEST(test_layout_invalid_header)
{
    ml_mlb_header h;
    ml_error err;
    uint64_t end = 77;
    size_t n = 77;
    tu_base_header(&h);
    h.dim = 0;
    tu_err_reset(&err);
    TU_CHECK_ERR("layout_size", ml_mlb_layout_size(&h, NULL, &end, &n, &err), err, ML_E_SHAPE,
                 "dim", 8);
    ck_assert_uint_eq(end, 77);
    ck_assert_uint_eq(n, 77);
    ml_mlb_layout it;
    ml_tensor t;
    ml_mlb_layout_begin(&it, &h, NULL);
    ck_assert_int_eq(ml_mlb_layout_next(&it, &t, &err), 0);
    ck_assert_uint_eq(ml_mlb_layer_state_bytes(&h, 0, 100), 0);
}
END_TEST

START_TEST(test_layer_state_bytes)
{
    ml_mlb_header h;
    tu_base_header(&h); /* kv_dim = 16 x 2 = 32 */
    const uint64_t per_pos = 2 * 32 * 4;
    ck_assert_uint_eq(ml_mlb_layer_state_bytes(&h, 0, 0), 0);
    ck_assert_uint_eq(ml_mlb_layer_state_bytes(&h, 0, 1), per_pos);
    ck_assert_uint_eq(ml_mlb_layer_state_bytes(&h, 0, 100), 100 * per_pos);
    ck_assert_uint_eq(ml_mlb_layer_state_bytes(&h, ML_LAYER_NO_ROPE, 100), 100 * per_pos);

    /* Window 16 with layer flags: only flagged layers slide. */
    h.sliding_window = 16;
    h.layer_flags = 1;
    ck_assert_uint_eq(ml_mlb_layer_state_bytes(&h, ML_LAYER_SLIDING, 10), 10 * per_pos);
    ck_assert_uint_eq(ml_mlb_layer_state_bytes(&h, ML_LAYER_SLIDING, 15), 15 * per_pos);
    ck_assert_uint_eq(ml_mlb_layer_state_bytes(&h, ML_LAYER_SLIDING, 16), 16 * per_pos);
    ck_assert_uint_eq(ml_mlb_layer_state_bytes(&h, ML_LAYER_SLIDING, 17), 16 * per_pos);
    ck_assert_uint_eq(ml_mlb_layer_state_bytes(&h, ML_LAYER_SLIDING, 100000), 16 * per_pos);
    ck_assert_uint_eq(ml_mlb_layer_state_bytes(&h, ML_LAYER_SLIDING | ML_LAYER_NO_ROPE, 100),
                      16 * per_pos);
    ck_assert_uint_eq(ml_mlb_layer_state_bytes(&h, ML_LAYER_SLIDING, UINT64_MAX), 16 * per_pos);
    ck_assert_uint_eq(ml_mlb_layer_state_bytes(&h, 0, 100), 100 * per_pos);
    /* Without layer flags the window applies to every layer. */
    h.layer_flags = 0;
    ck_assert_uint_eq(ml_mlb_layer_state_bytes(&h, 0, 100), 16 * per_pos);
    ck_assert_uint_eq(ml_mlb_layer_state_bytes(&h, 0, 8), 8 * per_pos);

    /* Linear attention: fixed, whatever the context. */
    tu_base_header(&h);
    tu_apply(&h, NULL, "layer_flags=1 lin_k_heads=2 lin_v_heads=4 lin_k_dim=16 lin_v_dim=16 "
                       "lin_conv=4");
    uint64_t lin = 4 * (4 * 16 * 16 + 3 * (2 * 2 * 16 + 4 * 16));
    ck_assert_uint_eq(lin, 5632);
    static const uint64_t ctxs[] = {0, 1, 1000, 1ull << 40, UINT64_MAX};
    for (size_t i = 0; i < 5; i++)
        ck_assert_uint_eq(ml_mlb_layer_state_bytes(&h, ML_LAYER_LINEAR, ctxs[i]), lin);
    /* lin_conv 1: no convolution history. */
    h.lin_conv = 1;
    ck_assert_uint_eq(ml_mlb_layer_state_bytes(&h, ML_LAYER_LINEAR, 5), 4 * 4 * 16 * 16);
    /* Linear attention at its limits. */
    tu_apply(&h, NULL, "lin_k_heads=1 lin_k_dim=65536 lin_v_heads=65536 lin_v_dim=1 lin_conv=256");
    uint64_t big = 4 * (65536ull * 65536 * 1 + 255ull * (2 * 65536 + 65536));
    ck_assert_uint_eq(ml_mlb_layer_state_bytes(&h, ML_LAYER_LINEAR, 1), big);

    /* Huge contexts saturate instead of wrapping. */
    tu_base_header(&h); /* 256 bytes per position = 2^8 */
    ck_assert_uint_eq(ml_mlb_layer_state_bytes(&h, 0, 1ull << 55), 1ull << 63);
    ck_assert_uint_eq(ml_mlb_layer_state_bytes(&h, 0, (1ull << 56) - 1),
                      ((1ull << 56) - 1) * 256);
    ck_assert_uint_eq(ml_mlb_layer_state_bytes(&h, 0, 1ull << 56), UINT64_MAX);
    ck_assert_uint_eq(ml_mlb_layer_state_bytes(&h, 0, 1ull << 60), UINT64_MAX);
    ck_assert_uint_eq(ml_mlb_layer_state_bytes(&h, 0, UINT64_MAX), UINT64_MAX);
    /* The largest kv_dim with the longest context fits exactly. */
    huge_q8(&h);
    ck_assert_uint_eq(ml_mlb_layer_state_bytes(&h, 0, 1ull << 24), (1ull << 24) * 65536 * 8);
    ck_assert_uint_eq(ml_mlb_layer_state_bytes(&h, 0, 1ull << 48), UINT64_MAX);
}
END_TEST

Suite *suite_overflow(void)
{
    Suite *s = suite_create("overflow");
    TCase *tc = tcase_create("sizes");
    tcase_add_test(tc, test_layout_size_huge_q8);
    tcase_add_test(tc, test_layout_size_huge_mixed);
    tcase_add_test(tc, test_load_huge_headers);
    tcase_add_test(tc, test_layout_invalid_header);
    tcase_add_test(tc, test_layer_state_bytes);
    suite_add_tcase(s, tc);
    return s;
}
