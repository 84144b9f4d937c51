/* check_mlb_stream.c - the deep checks of ml_mlb_verify_stream that the
 * loader does not make ("What mlb-verify adds" in docs/mlb-decisions.md):
 * NaN and infinity in F32 arrays (lconv included), non-finite f32 and f16
 * scales, non-zero padding between arrays and after the layer flags, a
 * non-zero byte in the optional padding after the last array, trailing
 * bytes beyond that boundary; and the valid ends (exactly at the last
 * array, partial padding, full padding), truncation at every offset (the
 * offset is where the input ended), -128 quants, reader errors.  Every case
 * is run with several chunkings of the input and asserts the exact status
 * and offset (and the tensor, where the error is inside one). */
#include "suites.h"
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>

/* Runs the verifier over buf with several chunk sizes; field NULL: not checked. */
static void stream_expect(const char *what, const uint8_t *buf, size_t len, ml_status st,
                          const char *field, int64_t off)
{
    static const size_t chunks[] = {0, 1, 3, 64, 1000};
    for (size_t c = 0; c < sizeof chunks / sizeof chunks[0]; c++) {
        tu_reader rd;
        ml_verify_report rep;
        ml_error err;
        char w[160];
        memset(&rep, 0, sizeof rep);
        tu_reader_init(&rd, buf, len, 17 + c, chunks[c]);
        tu_err_reset(&err);
        ml_status s = ml_mlb_verify_stream(tu_mem_read, &rd, &rep, &err);
        snprintf(w, sizeof w, "%s (chunks %zu)", what, chunks[c]);
        if (field) {
            TU_CHECK_ERR(w, s, err, st, field, off);
        } else {
            ml_error e2 = err;
            TU_CHECK_ERR(w, s, e2, st, err.field, off);
        }
        if (st == ML_OK) {
            ck_assert_uint_eq(rep.bytes, len);
            ck_assert_uint_eq(rep.file_crc, ml_crc32(0, buf, len));
        }
    }
}

typedef struct model {
    ml_mlb_header h;
    uint8_t flags[4];
    tu_mem out;
    tu_ref *ref;
    size_t n;
    uint64_t end;
} model;

static const tu_ref *find_ref(const model *m, const char *name)
{
    for (size_t i = 0; i < m->n; i++)
        if (strcmp(m->ref[i].name, name) == 0)
            return &m->ref[i];
    ck_abort_msg("no tensor %s", name);
    return NULL;
}

static void model_make(model *m, const char *set, const uint8_t *flags)
{
    ml_mlb_header_init(&m->h);
    tu_apply(&m->h, NULL, set);
    if (flags)
        memcpy(m->flags, flags, m->h.n_layers);
    const uint8_t *fl = m->h.layer_flags ? m->flags : NULL;
    tu_write_random(&m->h, fl, 5, &m->out);
    m->n = tu_ref_layout(&m->h, fl, NULL, 0, &m->end);
    m->ref = calloc(m->n, sizeof *m->ref);
    ck_assert_ptr_nonnull(m->ref);
    tu_ref_layout(&m->h, fl, m->ref, m->n, NULL);
    ck_assert_uint_eq(m->out.len, tu_align64(m->end));
}

static void model_free(model *m)
{
    free(m->ref);
    tu_mem_free(&m->out);
}

/* A small model with padding everywhere: 2 flag bytes, tok_emb quants of
 * 48 bytes, 3 f32 scales per small matrix, a window, biases. */
#define SMALL "dim=32 n_layers=2 n_heads=2 n_kv_heads=1 hidden_dim=32 vocab=3 max_seq=16 " \
              "rope_theta=10000 wtype=2 q8_mask=0x40 layer_flags=1 sliding_window=4 qkv_bias=1"
static const uint8_t small_flags[2] = {0, 1};

/* A linear-attention model with f16 scales. */
#define LINF16 "dim=32 n_layers=2 n_heads=2 n_kv_heads=1 hidden_dim=32 vocab=3 max_seq=16 " \
               "rope_theta=10000 wtype=2 scale_f16=1 layer_flags=1 lin_k_heads=1 "        \
               "lin_v_heads=4 lin_k_dim=8 lin_v_dim=8 lin_conv=3"
static const uint8_t linf16_flags[2] = {8, 0};

static void put32(uint8_t *p, uint32_t v)
{
    memcpy(p, &v, 4);
}

START_TEST(test_valid_model_passes)
{
    model m;
    model_make(&m, SMALL, small_flags);
    stream_expect("valid", m.out.p, m.out.len, ML_OK, "", -1);
    model_free(&m);
    model_make(&m, LINF16, linf16_flags);
    stream_expect("valid linear f16", m.out.p, m.out.len, ML_OK, "", -1);
    model_free(&m);
}
END_TEST

/* NaN and infinity in F32 arrays, each reported at the value's offset. */
START_TEST(test_nonfinite_f32)
{
    static const uint32_t bad[] = {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0x7fffffffu,
                                   0x7f800000u, 0xff800000u};
    static const char *const names[] = {"blk.0.attn_norm", "blk.0.bq", "blk.1.bv",
                                        "blk.1.ffn_norm", "final_norm"};
    model m;
    model_make(&m, SMALL, small_flags);
    for (size_t t = 0; t < sizeof names / sizeof names[0]; t++) {
        const tu_ref *r = find_ref(&m, names[t]);
        ck_assert_int_eq(r->type, ML_TYPE_F32);
        for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
            uint64_t at = r->offset + 4 * ((k * 5) % r->rows);
            uint8_t *buf = malloc(m.out.len);
            ck_assert_ptr_nonnull(buf);
            memcpy(buf, m.out.p, m.out.len);
            put32(buf + at, bad[k]);
            stream_expect(names[t], buf, m.out.len, ML_E_FORMAT, names[t], (int64_t)at);
            /* The largest finite values pass. */
            put32(buf + at, bad[k] & 0x80000000u ? 0xff7fffffu : 0x7f7fffffu);
            stream_expect(names[t], buf, m.out.len, ML_OK, "", -1);
            free(buf);
        }
    }
    model_free(&m);
    /* lconv, dt_bias, A_log, lnorm of a linear layer. */
    static const char *const lin[] = {"blk.0.lconv", "blk.0.dt_bias", "blk.0.A_log",
                                      "blk.0.lnorm"};
    model_make(&m, LINF16, linf16_flags);
    for (size_t t = 0; t < 4; t++) {
        const tu_ref *r = find_ref(&m, lin[t]);
        uint64_t at = r->offset + r->nbytes - 4; /* the last value */
        uint8_t *buf = malloc(m.out.len);
        ck_assert_ptr_nonnull(buf);
        memcpy(buf, m.out.p, m.out.len);
        put32(buf + at, 0x7f800000u);
        stream_expect(lin[t], buf, m.out.len, ML_E_FORMAT, lin[t], (int64_t)at);
        free(buf);
    }
    model_free(&m);
}
END_TEST

START_TEST(test_nonfinite_f32_scale)
{
    static const char *const names[] = {"tok_emb", "blk.0.wq", "blk.1.w2", "wcls"};
    model m;
    model_make(&m, SMALL, small_flags);
    for (size_t t = 0; t < 4; t++) {
        const tu_ref *r = find_ref(&m, names[t]);
        for (int k = 0; k < 3; k++) {
            uint64_t at = r->scale_offset + 4 * (uint64_t)(k % (int)(r->scale_nbytes / 4));
            uint8_t *buf = malloc(m.out.len);
            ck_assert_ptr_nonnull(buf);
            memcpy(buf, m.out.p, m.out.len);
            put32(buf + at, k == 0 ? 0x7f800000u : k == 1 ? 0xff800000u : 0x7fc00001u);
            stream_expect(names[t], buf, m.out.len, ML_E_FORMAT, names[t], (int64_t)at);
            free(buf);
        }
    }
    model_free(&m);
}
END_TEST

START_TEST(test_nonfinite_f16_scale)
{
    static const uint16_t bad[] = {0x7c00, 0xfc00, 0x7e00, 0x7c01, 0xffff};
    static const char *const names[] = {"tok_emb", "blk.0.lqkv", "blk.0.lb", "blk.1.wo", "wcls"};
    model m;
    model_make(&m, LINF16, linf16_flags);
    for (size_t t = 0; t < sizeof names / sizeof names[0]; t++) {
        const tu_ref *r = find_ref(&m, names[t]);
        for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
            uint64_t at = r->scale_offset + 2 * (k % (r->scale_nbytes / 2));
            uint8_t *buf = malloc(m.out.len);
            ck_assert_ptr_nonnull(buf);
            memcpy(buf, m.out.p, m.out.len);
            buf[at] = (uint8_t)bad[k];
            buf[at + 1] = (uint8_t)(bad[k] >> 8);
            stream_expect(names[t], buf, m.out.len, ML_E_FORMAT, names[t], (int64_t)at);
            buf[at] = 0xff, buf[at + 1] = 0x7b; /* 65504: finite */
            stream_expect(names[t], buf, m.out.len, ML_OK, "", -1);
            free(buf);
        }
    }
    model_free(&m);
}
END_TEST

/* A -128 quant, found by the stream too. */
START_TEST(test_minus128_stream)
{
    model m;
    model_make(&m, LINF16, linf16_flags);
    static const char *const names[] = {"blk.0.lb", "blk.0.la"}; /* always Q8_0 */
    for (int t = 0; t < 2; t++) {
        const tu_ref *r = find_ref(&m, names[t]);
        ck_assert_int_eq(r->type, ML_TYPE_Q8_0);
        uint8_t *buf = malloc(m.out.len);
        ck_assert_ptr_nonnull(buf);
        memcpy(buf, m.out.p, m.out.len);
        buf[r->offset + r->nbytes - 1] = 0x80;
        stream_expect(names[t], buf, m.out.len, ML_E_FORMAT, names[t],
                      (int64_t)(r->offset + r->nbytes - 1));
        free(buf);
    }
    /* In a Q4_0 matrix the same byte is fine. */
    const tu_ref *r = find_ref(&m, "blk.0.lqkv");
    ck_assert_int_eq(r->type, ML_TYPE_Q4_0);
    uint8_t *buf = malloc(m.out.len);
    ck_assert_ptr_nonnull(buf);
    memcpy(buf, m.out.p, m.out.len);
    buf[r->offset] = 0x80;
    stream_expect("Q4_0", buf, m.out.len, ML_OK, "", -1);
    free(buf);
    model_free(&m);
}
END_TEST

/* Every padding byte of the model, set to non-zero, is found at its offset;
 * this covers padding after the flags, between quants and scales, between
 * tensors and after the last array. */
START_TEST(test_nonzero_padding_everywhere)
{
    model m;
    model_make(&m, SMALL, small_flags);
    uint8_t *in_array = calloc(m.out.len, 1);
    ck_assert_ptr_nonnull(in_array);
    memset(in_array, 1, 256);
    for (size_t i = 0; i < m.n; i++) {
        memset(in_array + m.ref[i].offset, 1, m.ref[i].nbytes);
        if (m.ref[i].scale_nbytes)
            memset(in_array + m.ref[i].scale_offset, 1, m.ref[i].scale_nbytes);
    }
    size_t pads = 0, after_flags = 0, between = 0, tail = 0;
    uint8_t *buf = malloc(m.out.len);
    ck_assert_ptr_nonnull(buf);
    for (size_t k = 256; k < m.out.len; k++) {
        if (in_array[k])
            continue;
        memcpy(buf, m.out.p, m.out.len);
        buf[k] = (uint8_t)(1 + k % 255);
        char w[64];
        snprintf(w, sizeof w, "padding byte %zu", k);
        stream_expect(w, buf, m.out.len, ML_E_FORMAT, NULL, (int64_t)k);
        pads++;
        after_flags += k < 320;
        between += k >= 320 && k < m.end;
        tail += k >= m.end;
    }
    ck_assert_uint_eq(after_flags, 320 - 258);
    ck_assert_uint_gt(between, 0);
    ck_assert_uint_eq(tail, m.out.len - m.end);
    ck_assert_uint_gt(tail, 0);
    /* Named by tensor where the padding is inside one (quants -> scales). */
    const tu_ref *te = find_ref(&m, "tok_emb");
    ck_assert_uint_eq(te->nbytes, 48);
    memcpy(buf, m.out.p, m.out.len);
    buf[te->offset + 48] = 0xff;
    stream_expect("tok_emb inner padding", buf, m.out.len, ML_E_FORMAT, "tok_emb",
                  (int64_t)(te->offset + 48));
    /* Padding after the last array is named by nothing. */
    memcpy(buf, m.out.p, m.out.len);
    buf[m.out.len - 1] = 1;
    stream_expect("last padding", buf, m.out.len, ML_E_FORMAT, "", (int64_t)(m.out.len - 1));
    /* The first problem in file order wins. */
    memcpy(buf, m.out.p, m.out.len);
    buf[300] = 1;
    put32(buf + find_ref(&m, "final_norm")->offset, 0x7fc00000u);
    stream_expect("first wins", buf, m.out.len, ML_E_FORMAT, NULL, 300);
    free(buf);
    free(in_array);
    model_free(&m);
}
END_TEST

/* Valid ends: exactly at the last array, partial padding, full padding;
 * any byte past the 64-byte boundary is trailing. */
START_TEST(test_ends_and_trailing)
{
    model m;
    model_make(&m, SMALL, small_flags);
    ck_assert_uint_ne(m.end % 64, 0);
    uint8_t *buf = calloc(m.out.len + 200, 1);
    ck_assert_ptr_nonnull(buf);
    memcpy(buf, m.out.p, m.out.len);
    for (uint64_t len = m.end; len <= m.out.len; len++)
        stream_expect("valid end", buf, len, ML_OK, "", -1);
    for (size_t extra = 1; extra <= 130; extra += 43) {
        stream_expect("trailing zeros", buf, m.out.len + extra, ML_E_FORMAT, "",
                      (int64_t)m.out.len);
        buf[m.out.len + extra - 1] = 0xaa;
        stream_expect("trailing bytes", buf, m.out.len + extra, ML_E_FORMAT, "",
                      (int64_t)m.out.len);
        buf[m.out.len + extra - 1] = 0;
    }
    free(buf);
    model_free(&m);
    /* A model whose last array ends on a boundary: nothing may follow. */
    model_make(&m, "dim=64 n_layers=1 n_heads=2 n_kv_heads=1 hidden_dim=64 vocab=64 max_seq=8 "
                   "rope_theta=10000 wtype=1", NULL);
    ck_assert_uint_eq(m.end % 64, 0);
    buf = calloc(m.out.len + 1, 1);
    ck_assert_ptr_nonnull(buf);
    memcpy(buf, m.out.p, m.out.len);
    stream_expect("aligned end", buf, m.out.len, ML_OK, "", -1);
    stream_expect("one zero byte more", buf, m.out.len + 1, ML_E_FORMAT, "", (int64_t)m.out.len);
    free(buf);
    model_free(&m);
}
END_TEST

/* Truncation at every offset: FORMAT where the input ended. */
START_TEST(test_truncation_every_offset)
{
    model m;
    model_make(&m, SMALL, small_flags);
    for (uint64_t len = 0; len < m.end; len++) {
        tu_reader rd;
        ml_verify_report rep;
        ml_error err;
        char w[64];
        memset(&rep, 0, sizeof rep);
        tu_reader_init(&rd, m.out.p, len, len, len % 2 ? 0 : 37);
        tu_err_reset(&err);
        ml_status s = ml_mlb_verify_stream(tu_mem_read, &rd, &rep, &err);
        snprintf(w, sizeof w, "truncated to %llu", (unsigned long long)len);
        if (len < 256) {
            TU_CHECK_ERR(w, s, err, ML_E_FORMAT, "", 0);
            ck_assert(strstr(err.msg, len ? "fewer than" : "empty") != NULL);
            continue;
        }
        ml_error e2 = err;
        TU_CHECK_ERR(w, s, e2, ML_E_FORMAT, err.field, (int64_t)len);
        /* Named by the flags or the tensor being read. */
        if (len < 258)
            ck_assert_str_eq(err.field, "layer_flags");
        else
            ck_assert_msg(err.field[0] != 0, "%s: no field", w);
    }
    model_free(&m);
}
END_TEST

/* A failing reader gives ML_E_IO wherever it fails, the tail included. */
START_TEST(test_reader_error)
{
    model m;
    model_make(&m, SMALL, small_flags);
    const size_t at[] = {0, 1, 100, 256, 257, 300, (size_t)m.end - 1, (size_t)m.out.len};
    for (size_t i = 0; i < sizeof at / sizeof at[0]; i++) {
        tu_reader rd;
        ml_verify_report rep;
        ml_error err;
        memset(&rep, 0, sizeof rep);
        tu_reader_init(&rd, m.out.p, m.out.len, i, 16);
        rd.fail_at = at[i];
        tu_err_reset(&err);
        ml_status s = ml_mlb_verify_stream(tu_mem_read, &rd, &rep, &err);
        ck_assert_msg(s == ML_E_IO, "fail at %zu: %s (%s)", at[i], ml_status_name(s), err.msg);
        ck_assert_int_eq(err.code, ML_E_IO);
    }
    model_free(&m);
}
END_TEST

/* Per-tensor callbacks arrive in file order with the layer flags first. */
static void count_cb(void *ctx, const ml_tensor *t, uint32_t crc)
{
    (void)crc;
    size_t *k = ctx;
    if (*k == 0)
        ck_assert_str_eq(t->name, "layer_flags");
    (*k)++;
}

START_TEST(test_report)
{
    model m;
    model_make(&m, SMALL, small_flags);
    tu_reader rd;
    ml_verify_report rep;
    ml_error err;
    size_t k = 0;
    memset(&rep, 0x33, sizeof rep);
    rep.on_tensor = count_cb;
    rep.on_progress = NULL;
    rep.ctx = &k;
    tu_reader_init(&rd, m.out.p, m.out.len, 1, 0);
    ck_assert_int_eq(ml_mlb_verify_stream(tu_mem_read, &rd, &rep, &err), ML_OK);
    ck_assert_uint_eq(k, m.n);
    ck_assert_uint_eq(rep.n_tensors, m.n);
    ck_assert_uint_eq(rep.bytes, m.out.len);
    ck_assert_mem_eq(&rep.header, &m.h, sizeof m.h);
    /* ml_crc32 is zlib's CRC-32, continuing across calls. */
    ck_assert_uint_eq(ml_crc32(0, "123456789", 9), 0xcbf43926u);
    ck_assert_uint_eq(ml_crc32(ml_crc32(0, "1234", 4), "56789", 5), 0xcbf43926u);
    ck_assert_uint_eq(ml_crc32(0, NULL, 0), 0);
    model_free(&m);
}
END_TEST

/* Progress: one call per full 1 MiB chunk, bytes strictly increasing, never
 * past the input; a model under one chunk reports nothing. */
typedef struct progress_log {
    unsigned calls;
    uint64_t last;
    int monotonic;
} progress_log;

static void log_progress(void *ctx, uint64_t bytes)
{
    progress_log *p = ctx;
    if (bytes <= p->last)
        p->monotonic = 0;
    p->last = bytes;
    p->calls++;
}

START_TEST(test_progress)
{
    ml_mlb_header h;
    tu_mem out;
    tu_base_header(&h);
    h.vocab = 40000; /* tok_emb and wcls: 2 x 40000 x 32 bytes of Q4_0 quants */
    tu_write_random(&h, NULL, 7, &out);
    tu_reader rd;
    tu_reader_init(&rd, out.p, out.len, 3, 0);
    progress_log log = {0, 0, 1};
    ml_verify_report rep = {0};
    ml_error err;
    rep.on_progress = log_progress;
    rep.ctx = &log;
    ck_assert_int_eq(ml_mlb_verify_stream(tu_mem_read, &rd, &rep, &err), ML_OK);
    ck_assert_uint_ge(log.calls, out.len / (1u << 20) - 1);
    ck_assert(log.monotonic);
    ck_assert_uint_le(log.last, out.len);
    ck_assert_uint_eq(rep.bytes, out.len);
    tu_mem_free(&out);

    tu_base_header(&h);
    tu_write_random(&h, NULL, 7, &out);
    tu_reader_init(&rd, out.p, out.len, 3, 0);
    log = (progress_log){0, 0, 1};
    ck_assert_int_eq(ml_mlb_verify_stream(tu_mem_read, &rd, &rep, &err), ML_OK);
    ck_assert_uint_eq(log.calls, 0);
    tu_mem_free(&out);
}
END_TEST

Suite *suite_mlb_stream(void)
{
    Suite *s = suite_create("mlb_stream");
    TCase *tc = tcase_create("deep_checks");
    tcase_add_test(tc, test_valid_model_passes);
    tcase_add_test(tc, test_nonfinite_f32);
    tcase_add_test(tc, test_nonfinite_f32_scale);
    tcase_add_test(tc, test_nonfinite_f16_scale);
    tcase_add_test(tc, test_minus128_stream);
    tcase_add_test(tc, test_nonzero_padding_everywhere);
    tcase_add_test(tc, test_ends_and_trailing);
    tcase_add_test(tc, test_truncation_every_offset);
    tcase_add_test(tc, test_reader_error);
    tcase_add_test(tc, test_report);
    tcase_add_test(tc, test_progress);
    suite_add_tcase(s, tc);
    return s;
}
