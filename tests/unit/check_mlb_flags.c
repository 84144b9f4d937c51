/* check_mlb_flags.c - the per-layer flag bytes (step 14 of
 * docs/mlb-decisions.md): unknown bits 0x10..0x80, local RoPE with no RoPE
 * (0x06), linear attention with any other bit (0x09, 0x0a, 0x0c), local
 * RoPE without rope_local_theta, sliding without sliding_window, linear
 * without the lin_* fields, and the valid combinations.  Each row is
 * checked through ml_mlb_layer_flags_validate, the loader, the streaming
 * verifier and the writer, always with err.field "layer_flags[L]" and
 * err.offset 256 + L.  Also: the flag bytes must fit in the file, the
 * first bad layer wins, n_layers 65536, and what the flags do to the body. */
#include "suites.h"
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>

typedef struct fcase {
    const char *name;
    const char *set;  /* on top of the base header with layer_flags=1, 4 layers */
    uint8_t f[4];
    ml_status st;
    int layer;        /* failing layer */
} fcase;

#define WIN "sliding_window=16"
#define LOC "rope_local_theta=10000"
#define LA "lin_k_heads=2 lin_v_heads=4 lin_k_dim=16 lin_v_dim=16 lin_conv=4"
#define ALL WIN " " LOC " " LA
#define MOE "n_experts=8 n_experts_used=2 expert_hidden_dim=32"

#define FOK(n, s, a, b, c, d) {n, s, {a, b, c, d}, ML_OK, -1}
#define FBAD(n, s, a, b, c, d, l) {n, s, {a, b, c, d}, ML_E_FORMAT, l}

static const fcase fcases[] = {
    FOK("all zero", "", 0, 0, 0, 0),
    FOK("no RoPE everywhere", "", 4, 4, 4, 4),
    FOK("sliding with a window", WIN, 1, 0, 1, 0),
    FOK("sliding + no RoPE with a window", WIN, 5, 5, 1, 4),
    FOK("local RoPE with rope_local_theta", LOC, 2, 0, 2, 0),
    FOK("sliding + local RoPE", WIN " " LOC, 3, 3, 3, 3),
    FOK("linear with lin fields", LA, 8, 0, 8, 0),
    FOK("every valid value", ALL, 8, 3, 5, 4),
    FOK("experts on every layer", MOE, 0x10, 0x10, 0x10, 0x10),
    FOK("experts on some layers, the rest dense", MOE, 0x10, 0, 0x10, 0),
    FOK("0x18 linear attention with experts", MOE " " LA, 0x18, 0x10, 0x18, 0x10),
    FOK("experts with every other bit", MOE " " ALL, 0x18, 0x13, 0x15, 0x14),
    FBAD("bit 0x10 without experts", ALL, 0, 0, 0x10, 0, 2),
    FBAD("0x19 linear with experts and sliding", MOE " " ALL, 0, 0, 0x19, 0x10, 2),
    FBAD("0x1c linear with experts and no RoPE", MOE " " ALL, 0x1c, 0, 0, 0, 0),
    FBAD("a dense layer with hidden_dim 0", MOE " hidden_dim=0", 0x10, 0, 0x10, 0x10, 1),
    FBAD("unknown bit 0x20", ALL, 0x20, 0, 0, 0, 0),
    FBAD("unknown bit 0x40", ALL, 0, 0x40, 0, 0, 1),
    FBAD("unknown bit 0x80", ALL, 0, 0, 0, 0x80, 3),
    FBAD("unknown bits 0xff", ALL, 0, 0xff, 0, 0, 1),
    FBAD("bit 0x10 with valid low bits, no experts: 0x11", ALL, 1, 1, 0x11, 1, 2),
    FBAD("unknown bits checked first: 0x26", ALL, 0, 0, 0x26, 0, 2),
    FBAD("0x06 local RoPE with no RoPE", ALL, 0, 6, 0, 0, 1),
    FBAD("0x07 local RoPE with no RoPE", ALL, 0, 0, 7, 0, 2),
    FBAD("0x06 even without rope_local_theta", WIN, 0, 6, 0, 0, 1),
    FBAD("0x09 linear with sliding", ALL, 0, 0, 9, 0, 2),
    FBAD("0x0a linear with local RoPE", ALL, 0x0a, 0, 0, 0, 0),
    FBAD("0x0c linear with no RoPE", ALL, 0, 0, 0, 0x0c, 3),
    FBAD("0x0b linear with two bits", ALL, 0, 0x0b, 0, 0, 1),
    FBAD("0x0f", ALL, 0, 0, 0x0f, 0, 2),
    FBAD("0x02 without rope_local_theta", WIN " " LA, 0, 2, 0, 0, 1),
    FBAD("0x03 without rope_local_theta", WIN " " LA, 0, 0, 3, 0, 2),
    FBAD("0x01 without sliding_window", LOC " " LA, 1, 0, 0, 0, 0),
    FBAD("0x05 without sliding_window", LOC " " LA, 0, 0, 0, 5, 3),
    FBAD("0x08 without lin fields", WIN " " LOC, 0, 8, 0, 0, 1),
    FBAD("first bad layer wins", "", 0, 0x10, 8, 0x80, 1),
    FBAD("first bad layer wins over a later worse one", LOC, 2, 2, 0, 6, 3),
};

#define N_FCASES ((int)(sizeof fcases / sizeof fcases[0]))

static void case_header(const fcase *c, ml_mlb_header *h)
{
    tu_base_header(h);
    h->layer_flags = 1;
    tu_apply(h, NULL, c->set);
}

START_TEST(test_flag_row)
{
    const fcase *c = &fcases[_i];
    ml_mlb_header h;
    ml_error err;
    char what[160], field[40];
    case_header(c, &h);
    ck_assert_int_eq(ml_mlb_header_validate(&h, NULL, NULL, &err), ML_OK);
    snprintf(field, sizeof field, "layer_flags[%d]", c->layer);
    int64_t off = 256 + c->layer;

    /* Exactly n_layers bytes, so a read past them is caught by ASan. */
    uint8_t *flags = malloc(4);
    ck_assert_ptr_nonnull(flags);
    memcpy(flags, c->f, 4);
    snprintf(what, sizeof what, "[%s] validate", c->name);
    tu_err_reset(&err);
    TU_CHECK_ERR(what, ml_mlb_layer_flags_validate(&h, flags, &err), err, c->st, field, off);

    /* A file holding the header and the flags, nothing more. */
    uint8_t file[260];
    ml_mlb_header_encode(&h, file);
    memcpy(file + 256, c->f, 4);
    tu_buf b;
    tu_buf_copy(&b, file, sizeof file, 0);
    ml_mlb *m = NULL;
    snprintf(what, sizeof what, "[%s] loader", c->name);
    tu_err_reset(&err);
    ml_status s = ml_mlb_open_memory(b.p, b.len, &m, &err);
    ck_assert_ptr_null(m);
    if (c->st)
        TU_CHECK_ERR(what, s, err, c->st, field, off);
    else /* valid flags: the body is missing */
        TU_CHECK_ERR(what, s, err, ML_E_FORMAT, "tok_emb", 320);
    tu_buf_free(&b);

    snprintf(what, sizeof what, "[%s] stream", c->name);
    tu_reader rd;
    ml_verify_report rep;
    memset(&rep, 0, sizeof rep);
    tu_reader_init(&rd, file, sizeof file, 99, 5);
    tu_err_reset(&err);
    s = ml_mlb_verify_stream(tu_mem_read, &rd, &rep, &err);
    if (c->st)
        TU_CHECK_ERR(what, s, err, c->st, field, off);
    else /* the input ends after the flags */
        TU_CHECK_ERR(what, s, err, ML_E_FORMAT, "tok_emb", 260);

    /* The writer refuses the same flags; valid ones make a loadable model. */
    snprintf(what, sizeof what, "[%s] writer", c->name);
    tu_mem out;
    tu_mem_init(&out);
    ml_mlb_writer *w = NULL;
    tu_err_reset(&err);
    s = ml_mlb_writer_new(&h, flags, tu_mem_sink, &out, &w, &err);
    TU_CHECK_ERR(what, s, err, c->st, field, off);
    if (c->st) {
        ck_assert_ptr_null(w);
        ck_assert_uint_eq(out.len, 0);
    } else {
        ml_mlb_writer_free(w);
        tu_mem_free(&out);
        tu_write_random(&h, flags, 7, &out);
        tu_buf_copy(&b, out.p, out.len, 0);
        s = ml_mlb_open_memory(b.p, b.len, &m, &err);
        ck_assert_msg(s == ML_OK, "%s: %s", what, err.msg);
        for (uint32_t l = 0; l < 4; l++)
            ck_assert_uint_eq(ml_mlb_layer_flag(m, l), c->f[l]);
        ck_assert_uint_eq(ml_mlb_layer_flag(m, 4), 0);
        ck_assert_uint_eq(ml_mlb_layer_flag(m, 0xffffffffu), 0);
        /* The flag array is the first "tensor". */
        const ml_tensor *t = ml_mlb_tensor(m, 0);
        ck_assert_str_eq(t->name, "layer_flags");
        ck_assert_int_eq(t->type, ML_TYPE_U8);
        ck_assert_uint_eq(t->offset, 256);
        ck_assert_uint_eq(t->nbytes, 4);
        ck_assert_mem_eq(t->data, c->f, 4);
        /* Linear layers store lqkv.. in place of wq..; others the opposite. */
        for (int l = 0; l < 4; l++) {
            char name[32];
            snprintf(name, sizeof name, "blk.%d.lqkv", l);
            ck_assert((ml_mlb_find(m, name) != NULL) == ((c->f[l] & 8) != 0));
            snprintf(name, sizeof name, "blk.%d.wq", l);
            ck_assert((ml_mlb_find(m, name) != NULL) == ((c->f[l] & 8) == 0));
            ck_assert((ml_mlb_get(m, ML_R_LOUT, l) != NULL) == ((c->f[l] & 8) != 0));
            ck_assert((ml_mlb_get(m, ML_R_WO, l) != NULL) == ((c->f[l] & 8) == 0));
            /* Layers with experts store them in place of w1 w2 w3. */
            int moe = (c->f[l] & 0x10) != 0;
            ck_assert((ml_mlb_get(m, ML_R_W2, l) != NULL) == !moe);
            ck_assert((ml_mlb_get(m, ML_R_WR, l) != NULL) == moe);
            ck_assert((ml_mlb_get_expert(m, ML_R_EW2, l, 7) != NULL) == moe);
        }
        ml_mlb_close(m);
        tu_buf_free(&b);
    }
    tu_mem_free(&out);
    free(flags);
}
END_TEST

/* Experts in the header but on no layer: named n_experts (offset 164). */
START_TEST(test_experts_on_no_layer)
{
    ml_mlb_header h;
    ml_error err;
    const uint8_t flags[4] = {0, 1, 0, 0};
    tu_base_header(&h);
    tu_apply(&h, NULL, "layer_flags=1 sliding_window=8 " MOE);
    tu_err_reset(&err);
    TU_CHECK_ERR("no MoE layer", ml_mlb_layer_flags_validate(&h, flags, &err), err,
                 ML_E_FORMAT, "n_experts", 164);
    uint8_t file[260];
    ml_mlb_header_encode(&h, file);
    memcpy(file + 256, flags, 4);
    tu_buf b;
    tu_buf_copy(&b, file, sizeof file, 0);
    ml_mlb *m = NULL;
    tu_err_reset(&err);
    TU_CHECK_ERR("loader", ml_mlb_open_memory(b.p, b.len, &m, &err), err, ML_E_FORMAT,
                 "n_experts", 164);
    tu_buf_free(&b);
}
END_TEST

/* The file must hold the n_layers flag bytes. */
START_TEST(test_flags_must_fit)
{
    ml_mlb_header h;
    ml_error err;
    uint8_t file[260] = {0};
    tu_base_header(&h);
    h.layer_flags = 1;
    ml_mlb_header_encode(&h, file);
    for (size_t len = 256; len < 260; len++) {
        tu_buf b;
        ml_mlb *m = NULL;
        tu_buf_copy(&b, file, len, 0);
        tu_err_reset(&err);
        TU_CHECK_ERR("loader", ml_mlb_open_memory(b.p, b.len, &m, &err), err, ML_E_FORMAT,
                     "layer_flags", 256);
        ck_assert_ptr_null(m);
        tu_buf_free(&b);
        /* The stream says where the input ended. */
        tu_reader rd;
        ml_verify_report rep;
        memset(&rep, 0, sizeof rep);
        tu_reader_init(&rd, file, len, len, 3);
        tu_err_reset(&err);
        TU_CHECK_ERR("stream", ml_mlb_verify_stream(tu_mem_read, &rd, &rep, &err), err,
                     ML_E_FORMAT, "layer_flags", len);
    }
}
END_TEST

/* n_layers 65536: a bad flag in the very last layer is found and named. */
START_TEST(test_flags_65536_layers)
{
    ml_mlb_header h;
    ml_error err;
    const size_t n = 65536;
    tu_base_header(&h);
    h.layer_flags = 1;
    h.n_layers = (uint32_t)n;
    h.sliding_window = 4;
    uint8_t *file = calloc(256 + n, 1);
    ck_assert_ptr_nonnull(file);
    ml_mlb_header_encode(&h, file);
    for (size_t l = 0; l < n; l++)
        file[256 + l] = (uint8_t)(l % 2 ? 1 : 4);
    file[256 + n - 1] = 8; /* no lin fields */
    uint8_t *flags = malloc(n);
    ck_assert_ptr_nonnull(flags);
    memcpy(flags, file + 256, n);
    tu_err_reset(&err);
    TU_CHECK_ERR("validate", ml_mlb_layer_flags_validate(&h, flags, &err), err, ML_E_FORMAT,
                 "layer_flags[65535]", 256 + 65535);
    tu_buf b;
    ml_mlb *m = NULL;
    tu_buf_copy(&b, file, 256 + n, 0);
    tu_err_reset(&err);
    TU_CHECK_ERR("loader", ml_mlb_open_memory(b.p, b.len, &m, &err), err, ML_E_FORMAT,
                 "layer_flags[65535]", 256 + 65535);
    tu_buf_free(&b);
    tu_reader rd;
    ml_verify_report rep;
    memset(&rep, 0, sizeof rep);
    tu_reader_init(&rd, file, 256 + n, 1, 0);
    tu_err_reset(&err);
    TU_CHECK_ERR("stream", ml_mlb_verify_stream(tu_mem_read, &rd, &rep, &err), err, ML_E_FORMAT,
                 "layer_flags[65535]", 256 + 65535);
    /* Fixed, the flags pass and the body is what is missing. */
    file[256 + n - 1] = 5;
    flags[n - 1] = 5;
    ck_assert_int_eq(ml_mlb_layer_flags_validate(&h, flags, &err), ML_OK);
    tu_buf_copy(&b, file, 256 + n, 0);
    tu_err_reset(&err);
    TU_CHECK_ERR("loader", ml_mlb_open_memory(b.p, b.len, &m, &err), err, ML_E_FORMAT,
                 "tok_emb", 256 + 65536);
    tu_buf_free(&b);
    free(flags);
    free(file);
}
END_TEST

/* The writer needs the flags when the header announces them. */
START_TEST(test_writer_needs_flags)
{
    ml_mlb_header h;
    ml_error err;
    tu_mem out;
    ml_mlb_writer *w = NULL;
    tu_base_header(&h);
    h.layer_flags = 1;
    tu_mem_init(&out);
    tu_err_reset(&err);
    ml_status s = ml_mlb_writer_new(&h, NULL, tu_mem_sink, &out, &w, &err);
    ck_assert_int_eq(s, ML_E_INVAL);
    ck_assert_str_eq(err.field, "layer_flags");
    ck_assert_ptr_null(w);
    ck_assert_uint_eq(out.len, 0);
    tu_mem_free(&out);
}
END_TEST

/* Without layer_flags in the header, a flags pointer is ignored. */
START_TEST(test_flags_ignored_without_header_bit)
{
    ml_mlb_header h;
    ml_error err;
    uint8_t junk[4] = {0xff, 0xff, 0xff, 0xff};
    uint64_t e1, e2;
    size_t n1, n2;
    tu_base_header(&h);
    ck_assert_int_eq(ml_mlb_layout_size(&h, NULL, &e1, &n1, &err), ML_OK);
    ck_assert_int_eq(ml_mlb_layout_size(&h, junk, &e2, &n2, &err), ML_OK);
    ck_assert_uint_eq(e1, e2);
    ck_assert_uint_eq(n1, n2);
    tu_mem out;
    tu_write_random(&h, junk, 3, &out);
    ml_mlb *m;
    tu_buf b;
    tu_buf_copy(&b, out.p, out.len, 0);
    ck_assert_int_eq(ml_mlb_open_memory(b.p, b.len, &m, &err), ML_OK);
    ck_assert_uint_eq(ml_mlb_layer_flag(m, 0), 0);
    ck_assert_str_eq(ml_mlb_tensor(m, 0)->name, "tok_emb");
    ck_assert_uint_eq(ml_mlb_tensor(m, 0)->offset, 256);
    ml_mlb_close(m);
    tu_buf_free(&b);
    tu_mem_free(&out);
}
END_TEST

Suite *suite_mlb_flags(void)
{
    Suite *s = suite_create("mlb_flags");
    TCase *tc = tcase_create("layer_flags");
    tcase_add_loop_test(tc, test_flag_row, 0, N_FCASES);
    tcase_add_test(tc, test_flags_must_fit);
    tcase_add_test(tc, test_experts_on_no_layer);
    tcase_add_test(tc, test_flags_65536_layers);
    tcase_add_test(tc, test_writer_needs_flags);
    tcase_add_test(tc, test_flags_ignored_without_header_bit);
    suite_add_tcase(s, tc);
    return s;
}
