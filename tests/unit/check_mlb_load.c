/* check_mlb_load.c - the loader, ml_mlb_open and ml_mlb_open_memory.
 * Models are written in memory with ml_mlb_write_random; every tensor's
 * name, type, shape, class, offsets and sizes are compared with a layout
 * computed independently from the spec's body listing (testutil.c), the
 * bound data with the bytes written, and f16 scales with ml_f16_to_f32 of
 * the stored bits.  Truncation at every offset of small models (and a
 * dense sample of a larger one) gives ML_E_FORMAT naming the first array
 * that does not fit; a -128 quant is found with its tensor and offset;
 * empty, short, misaligned, missing and directory inputs; ml_mlb_find and
 * ml_mlb_get; the shared classifier; and the Q8_0/Q4_0 choice of every
 * q8_mask class for all 128 masks. */
#include "suites.h"
#include "testutil.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Compares a loaded model with the reference layout and the bytes written
 * (orig).  Returns the number of tensors. */
static size_t compare_loaded(const ml_mlb *m, const ml_mlb_header *h, const uint8_t *flags,
                             const uint8_t *orig, size_t len)
{
    uint64_t end;
    size_t n = tu_ref_layout(h, flags, NULL, 0, &end);
    tu_ref *ref = calloc(n, sizeof *ref);
    ck_assert_ptr_nonnull(ref);
    tu_ref_layout(h, flags, ref, n, NULL);
    ck_assert_uint_eq(ml_mlb_n_tensors(m), n);
    ck_assert_mem_eq(ml_mlb_get_header(m), h, sizeof *h);
    ck_assert_uint_eq(ml_mlb_file_size(m), len);
    ck_assert_uint_le(end, len);
    const uint8_t *base = ml_mlb_file_data(m);
    ck_assert_ptr_nonnull(base);
    ck_assert_uint_eq((uintptr_t)base % 64, 0);
    ck_assert_mem_eq(base, orig, len);
    tu_dims td;
    tu_derive(h, &td);
    const ml_mlb_derived *d = ml_mlb_get_derived(m);
    ck_assert_uint_eq(d->head_dim, td.head_dim);
    ck_assert_uint_eq(d->q_dim, td.q_dim);
    ck_assert_uint_eq(d->kv_dim, td.kv_dim);
    ck_assert_uint_eq(d->rot_dim, td.rot_dim);
    if (h->lin_k_heads) {
        ck_assert_uint_eq(d->lin_qkv, td.lin_qkv);
        ck_assert_uint_eq(d->lin_vd, td.lin_vd);
    }
    for (size_t i = 0; i < n; i++) {
        const ml_tensor *t = ml_mlb_tensor(m, i);
        const tu_ref *r = &ref[i];
        ck_assert_ptr_nonnull(t);
        ck_assert_str_eq(t->name, r->name);
        ck_assert_int_eq(t->role, r->role);
        ck_assert_int_eq(t->layer, r->layer);
        ck_assert_msg(t->type == r->type, "%s: type %s, expected %s", t->name,
                      ml_type_name(t->type), ml_type_name(r->type));
        ck_assert_uint_eq(t->ndim, r->ndim);
        ck_assert_uint_eq(t->rows, r->rows);
        ck_assert_uint_eq(t->cols, r->cols);
        ck_assert_msg(t->q8_class == r->q8_class, "%s: class %u, expected %u", t->name,
                      t->q8_class, r->q8_class);
        ck_assert_uint_eq(t->offset, r->offset);
        ck_assert_uint_eq(t->nbytes, r->nbytes);
        ck_assert_uint_eq(t->scale_offset, r->scale_offset);
        ck_assert_uint_eq(t->scale_nbytes, r->scale_nbytes);
        ck_assert_uint_eq(ml_tensor_elements(t), (uint64_t)r->rows * r->cols);
        ck_assert_ptr_eq(t->data, base + r->offset);
        ck_assert_mem_eq(t->data, orig + r->offset, r->nbytes);
        if (r->scale_nbytes) {
            /* In place, as stored: one pointer or the other. */
            const void *sc = base + r->scale_offset;
            if (h->scale_f16) {
                ck_assert_ptr_eq(t->scales_f16, sc);
                ck_assert_ptr_null(t->scales);
            } else {
                ck_assert_ptr_eq(t->scales, sc);
                ck_assert_ptr_null(t->scales_f16);
            }
            uint64_t k = (uint64_t)r->rows * r->cols / 32;
            for (uint64_t j = 0; j < k; j++) {
                const uint8_t *p = orig + r->scale_offset;
                uint32_t want, got;
                if (h->scale_f16) {
                    float f = ml_f16_to_f32((uint16_t)(p[2 * j] | p[2 * j + 1] << 8));
                    memcpy(&want, &f, 4);
                } else {
                    want = rd32(p + 4 * j);
                }
                float s = ml_tensor_scale(t, j);
                memcpy(&got, &s, 4);
                TU_REQUIRE(got == want, "%s scale %llu: 0x%08x, expected 0x%08x", t->name,
                           (unsigned long long)j, got, want);
            }
        } else {
            ck_assert_ptr_null(t->scales);
            ck_assert_ptr_null(t->scales_f16);
        }
        ck_assert_ptr_eq(ml_mlb_find(m, r->name), t);
        ck_assert_ptr_eq(ml_mlb_get(m, r->role, r->layer), t);
    }
    ck_assert_ptr_null(ml_mlb_tensor(m, n));
    ck_assert_ptr_null(ml_mlb_tensor(m, (size_t)-1));
    free(ref);
    return n;
}

/* Writes, loads from an aligned copy, compares; returns the tensor count. */
static size_t write_load_compare(const ml_mlb_header *h, const uint8_t *flags, uint64_t seed,
                                 size_t misalign)
{
    tu_mem out;
    tu_buf b;
    ml_mlb *m = NULL;
    ml_error err;
    tu_write_random(h, flags, seed, &out);
    ck_assert_uint_eq(out.len % 64, 0);
    tu_buf_copy(&b, out.p, out.len, misalign);
    ml_status s = ml_mlb_open_memory(b.p, b.len, &m, &err);
    ck_assert_msg(s == ML_OK, "open: %s", err.msg);
    if (misalign == 0)
        ck_assert_ptr_eq(ml_mlb_file_data(m), b.p);
    else
        ck_assert_ptr_ne(ml_mlb_file_data(m), b.p);
    size_t n = compare_loaded(m, h, flags, out.p, out.len);
    ml_mlb_close(m);
    tu_buf_free(&b);
    tu_mem_free(&out);
    return n;
}

START_TEST(test_layout_tiny_q8)
{
    ml_mlb_header h;
    tu_base_header(&h);
    h.wtype = ML_WTYPE_Q8_0;
    /* 1 tok_emb + 4 x 9 + final_norm + wcls */
    ck_assert_uint_eq(write_load_compare(&h, NULL, 1, 0), 1 + 4 * 9 + 2);
}
END_TEST

START_TEST(test_layout_tiny_q4_shared_f16)
{
    ml_mlb_header h;
    tu_base_header(&h);
    tu_apply(&h, NULL, "q8_mask=3 scale_f16=1 shared_classifier=1");
    ck_assert_uint_eq(write_load_compare(&h, NULL, 2, 0), 1 + 4 * 9 + 1);
}
END_TEST

START_TEST(test_layout_full)
{
    ml_mlb_header h;
    uint8_t flags[4];
    tu_full_header(&h, flags);
    /* flags + tok_emb + 3 attention layers (9 + wg + 3 biases + 2 norms + 2
     * post norms = 17) + a linear layer (1 + 9 + 4 + 2 = 16) + final + wcls */
    ck_assert_uint_eq(write_load_compare(&h, flags, 3, 0), 2 + 3 * 17 + 16 + 2);
    h.scale_f16 = 0;
    h.q8_mask = 0x3e;
    write_load_compare(&h, flags, 4, 0);
}
END_TEST

/* A buffer that is not 64-byte aligned is copied and still loads. */
START_TEST(test_misaligned_buffer)
{
    static const size_t mis[] = {1, 2, 3, 8, 16, 17, 32, 63};
    ml_mlb_header h;
    uint8_t flags[4];
    tu_full_header(&h, flags);
    for (size_t i = 0; i < sizeof mis / sizeof mis[0]; i++)
        write_load_compare(&h, flags, 5 + i, mis[i]);
}
END_TEST

/* Expected loader result for the first len bytes of a model. */
static void expect_truncated(const ml_mlb_header *h, const tu_ref *ref, size_t n, uint64_t end,
                             size_t len, ml_status *st, const char **field, int64_t *off)
{
    *st = ML_E_FORMAT;
    *field = "";
    *off = 0;
    if (len < 256)
        return;
    if (h->layer_flags && len < 256 + (size_t)h->n_layers) {
        *field = "layer_flags";
        *off = 256;
        return;
    }
    if (len >= end) {
        *st = ML_OK;
        return;
    }
    for (size_t i = 0; i < n; i++) {
        if (tu_ref_end(&ref[i]) > len) {
            *field = ref[i].name;
            *off = (int64_t)ref[i].offset;
            return;
        }
    }
    ck_abort_msg("no array past %zu", len);
}

/* Loads every prefix len in [0, out.len] (step > 1: a sample that still
 * includes every array boundary +-1). */
static void truncation_sweep(const ml_mlb_header *h, const uint8_t *flags, unsigned step)
{
    tu_mem out;
    uint64_t end;
    tu_write_random(h, flags, 11, &out);
    size_t n = tu_ref_layout(h, flags, NULL, 0, &end);
    tu_ref *ref = calloc(n, sizeof *ref);
    ck_assert_ptr_nonnull(ref);
    tu_ref_layout(h, flags, ref, n, NULL);
    uint8_t *want_len = calloc(out.len + 1, 1);
    ck_assert_ptr_nonnull(want_len);
    for (size_t len = 0; len <= out.len; len += step)
        want_len[len] = 1;
    for (size_t i = 0; i < n; i++) {
        uint64_t marks[4] = {ref[i].offset, tu_ref_end(&ref[i]), ref[i].scale_offset,
                             ref[i].offset + ref[i].nbytes};
        for (int k = 0; k < 4; k++)
            for (int dlt = -1; dlt <= 1; dlt++)
                if (marks[k] + (uint64_t)(int64_t)dlt <= out.len)
                    want_len[marks[k] + (uint64_t)(int64_t)dlt] = 1;
    }
    for (size_t len = 0; len < 300; len++)
        if (len <= out.len)
            want_len[len] = 1;
    want_len[out.len] = 1;
    for (size_t len = 0; len <= out.len; len++) {
        if (!want_len[len])
            continue;
        ml_status st;
        const char *field;
        int64_t off;
        char what[64];
        expect_truncated(h, ref, n, end, len, &st, &field, &off);
        tu_buf b;
        tu_buf_copy(&b, out.p, len, 0); /* exactly len bytes: ASan sees overreads */
        ml_mlb *m = NULL;
        ml_error err;
        tu_err_reset(&err);
        snprintf(what, sizeof what, "truncated to %zu of %zu", len, out.len);
        ml_status s = ml_mlb_open_memory(len ? b.p : NULL, len, &m, &err);
        TU_CHECK_ERR(what, s, err, st, field, off);
        if (s == ML_OK) {
            ck_assert_uint_eq(ml_mlb_n_tensors(m), n);
            ml_mlb_close(m);
        } else {
            ck_assert_ptr_null(m);
        }
        tu_buf_free(&b);
    }
    free(want_len);
    free(ref);
    tu_mem_free(&out);
}

/* A tiny model with layer flags, Q4_0/Q8_0 mix, f16 scales: every offset. */
START_TEST(test_truncation_every_offset_tiny)
{
    ml_mlb_header h;
    uint8_t flags[2] = {0, 4};
    ml_mlb_header_init(&h);
    tu_apply(&h, NULL, "dim=32 n_layers=2 n_heads=2 n_kv_heads=1 hidden_dim=32 vocab=3 "
                       "max_seq=16 rope_theta=10000 wtype=2 q8_mask=0x21 scale_f16=1 "
                       "layer_flags=1 qkv_bias=1");
    truncation_sweep(&h, flags, 1);
}
END_TEST

/* A tiny Q8_0 model, f32 scales, shared classifier, no flags: every offset. */
START_TEST(test_truncation_every_offset_q8)
{
    ml_mlb_header h;
    ml_mlb_header_init(&h);
    tu_apply(&h, NULL, "dim=32 n_layers=1 n_heads=1 n_kv_heads=1 hidden_dim=64 vocab=5 "
                       "max_seq=16 rope_theta=10000 wtype=1 shared_classifier=1 qk_norm=1");
    truncation_sweep(&h, NULL, 1);
}
END_TEST

/* The full model: a dense sample of offsets. */
START_TEST(test_truncation_sample_full)
{
    ml_mlb_header h;
    uint8_t flags[4];
    tu_full_header(&h, flags);
    truncation_sweep(&h, flags, 13);
}
END_TEST

START_TEST(test_empty_and_short)
{
    ml_mlb *m = NULL;
    ml_error err;
    uint8_t buf[256];
    ml_mlb_header h;
    tu_base_header(&h);
    ml_mlb_header_encode(&h, buf);
    tu_err_reset(&err);
    TU_CHECK_ERR("NULL, 0", ml_mlb_open_memory(NULL, 0, &m, &err), err, ML_E_FORMAT, "", 0);
    ck_assert_ptr_null(m);
    tu_buf b;
    tu_buf_copy(&b, buf, 0, 1);
    tu_err_reset(&err);
    TU_CHECK_ERR("empty misaligned", ml_mlb_open_memory(b.p, 0, &m, &err), err, ML_E_FORMAT, "", 0);
    tu_buf_free(&b);
    for (size_t len = 1; len < 256; len++) {
        tu_buf_copy(&b, buf, len, len % 3);
        tu_err_reset(&err);
        TU_CHECK_ERR("short", ml_mlb_open_memory(b.p, len, &m, &err), err, ML_E_FORMAT, "", 0);
        ck_assert_ptr_null(m);
        tu_buf_free(&b);
    }
    /* 255 bytes: named as fewer than the header. */
    tu_buf_copy(&b, buf, 255, 0);
    ck_assert_int_eq(ml_mlb_open_memory(b.p, 255, &m, &err), ML_E_FORMAT);
    ck_assert_msg(strstr(err.msg, "255") != NULL, "%s", err.msg);
    tu_buf_free(&b);
    /* 256 zero bytes: the magic is wrong. */
    memset(buf, 0, sizeof buf);
    tu_buf_copy(&b, buf, 256, 0);
    TU_CHECK_ERR("zeros", ml_mlb_open_memory(b.p, 256, &m, &err), err, ML_E_FORMAT, "magic", 0);
    tu_buf_free(&b);
    /* NULL error pointer is accepted. */
    ck_assert_int_eq(ml_mlb_open_memory(NULL, 0, &m, NULL), ML_E_FORMAT);
    ml_mlb_close(NULL);
}
END_TEST

/* A -128 quant in a Q8_0 tensor: FORMAT, the tensor, the exact offset. */
START_TEST(test_minus128)
{
    ml_mlb_header h;
    uint8_t flags[4];
    ml_error err;
    ml_mlb *m;
    tu_full_header(&h, flags); /* Q4_0 with q8_mask 0x41: tok_emb and w2 are Q8_0 */
    tu_mem out;
    tu_write_random(&h, flags, 21, &out);
    size_t n = tu_ref_layout(&h, flags, NULL, 0, NULL);
    tu_ref *ref = calloc(n, sizeof *ref);
    ck_assert_ptr_nonnull(ref);
    tu_ref_layout(&h, flags, ref, n, NULL);
    int hits = 0;
    for (size_t i = 0; i < n; i++) {
        const tu_ref *r = &ref[i];
        if (r->type != ML_TYPE_Q8_0 && r->type != ML_TYPE_Q4_0)
            continue;
        /* Row 1 (if any), column 5; first and last byte too. */
        uint64_t spots[3] = {0, r->nbytes - 1, r->rows > 1 ? (uint64_t)r->cols + 5 : 5};
        for (int k = 0; k < 3; k++) {
            uint64_t q = spots[k];
            tu_buf b;
            tu_buf_copy(&b, out.p, out.len, 0);
            b.p[r->offset + q] = 0x80;
            tu_err_reset(&err);
            m = NULL;
            ml_status s = ml_mlb_open_memory(b.p, b.len, &m, &err);
            if (r->type == ML_TYPE_Q8_0) {
                TU_CHECK_ERR(r->name, s, err, ML_E_FORMAT, r->name, r->offset + q);
                char rc[64];
                snprintf(rc, sizeof rc, "row %llu, column %llu",
                         (unsigned long long)(q / r->cols), (unsigned long long)(q % r->cols));
                ck_assert_msg(strstr(err.msg, rc) != NULL, "%s: %s", rc, err.msg);
                hits++;
            } else { /* any byte is a valid pair of nibbles */
                ck_assert_msg(s == ML_OK, "%s: %s", r->name, err.msg);
                ml_mlb_close(m);
            }
            tu_buf_free(&b);
        }
    }
    ck_assert_int_gt(hits, 0);
    /* Two -128s: the first in file order is reported. */
    const ml_tensor *w2 = NULL;
    tu_buf b;
    tu_buf_copy(&b, out.p, out.len, 0);
    ck_assert_int_eq(ml_mlb_open_memory(b.p, b.len, &m, &err), ML_OK);
    w2 = ml_mlb_find(m, "blk.2.w2");
    ck_assert_int_eq(w2->type, ML_TYPE_Q8_0);
    uint64_t w2off = w2->offset;
    const ml_tensor *lb = ml_mlb_find(m, "blk.3.lb");
    ck_assert_int_eq(lb->type, ML_TYPE_Q8_0); /* always Q8_0 */
    uint64_t lboff = lb->offset;
    ml_mlb_close(m);
    b.p[lboff + 3] = 0x80;
    b.p[w2off + 7] = 0x80;
    tu_err_reset(&err);
    TU_CHECK_ERR("two", ml_mlb_open_memory(b.p, b.len, &m, &err), err, ML_E_FORMAT, "blk.2.w2",
                 w2off + 7);
    b.p[w2off + 7] = 0x01;
    tu_err_reset(&err);
    TU_CHECK_ERR("lb", ml_mlb_open_memory(b.p, b.len, &m, &err), err, ML_E_FORMAT, "blk.3.lb",
                 lboff + 3);
    tu_buf_free(&b);
    /* 0x80 bytes in scales and padding are not quants. */
    tu_buf_copy(&b, out.p, out.len, 0);
    const tu_ref *te = &ref[1];
    ck_assert_str_eq(te->name, "tok_emb");
    b.p[te->scale_offset + 1] = 0x80;
    if (te->offset + te->nbytes < te->scale_offset)
        b.p[te->offset + te->nbytes] = 0x80;
    ck_assert_int_eq(ml_mlb_open_memory(b.p, b.len, &m, &err), ML_OK);
    ml_mlb_close(m);
    tu_buf_free(&b);
    free(ref);
    tu_mem_free(&out);
}
END_TEST

/* Bytes after the last array, non-zero padding and non-finite floats are
 * not loader rules (mlb-verify checks them). */
START_TEST(test_loader_ignores_what_verify_checks)
{
    ml_mlb_header h;
    ml_error err;
    ml_mlb *m;
    tu_base_header(&h);
    h.vocab = 3; /* tok_emb quants: 96 bytes, then 32 bytes of padding */
    tu_mem out;
    tu_write_random(&h, NULL, 8, &out);
    size_t n = tu_ref_layout(&h, NULL, NULL, 0, NULL);
    tu_ref *ref = calloc(n, sizeof *ref);
    ck_assert_ptr_nonnull(ref);
    tu_ref_layout(&h, NULL, ref, n, NULL);
    ck_assert_str_eq(ref[0].name, "tok_emb");
    ck_assert_uint_eq(ref[0].nbytes, 96);
    ck_assert_str_eq(ref[1].name, "blk.0.attn_norm");
    size_t len = out.len + 100;
    tu_buf b;
    uint8_t *big = malloc(len);
    ck_assert_ptr_nonnull(big);
    memcpy(big, out.p, out.len);
    memset(big + out.len, 0xff, 100);          /* trailing bytes */
    big[ref[0].offset + 96] = 0x55;            /* padding between arrays */
    uint32_t nan_bits = 0x7fc00000u, inf_bits = 0x7f800000u;
    memcpy(big + ref[1].offset, &nan_bits, 4); /* NaN in an F32 array */
    memcpy(big + ref[0].scale_offset, &inf_bits, 4); /* infinite scale */
    tu_buf_copy(&b, big, len, 0);
    ml_status s = ml_mlb_open_memory(b.p, b.len, &m, &err);
    ck_assert_msg(s == ML_OK, "%s", err.msg);
    ck_assert_uint_eq(ml_mlb_file_size(m), len);
    ck_assert_uint_eq(ml_mlb_n_tensors(m), n);
    ml_mlb_close(m);
    tu_buf_free(&b);
    free(big);
    free(ref);
    tu_mem_free(&out);
}
END_TEST

/* Temporary directory helpers. */
static void tmpdir_make(char *dir, size_t n)
{
    const char *t = getenv("TMPDIR");
    snprintf(dir, n, "%s/mlcore-unit-XXXXXX", t && *t ? t : "/tmp");
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

START_TEST(test_open_paths)
{
    char dir[256], path[512];
    ml_mlb *m = (ml_mlb *)(void *)dir;
    ml_error err;
    tmpdir_make(dir, sizeof dir);

    snprintf(path, sizeof path, "%s/missing.mlb", dir);
    tu_err_reset(&err);
    ck_assert_int_eq(ml_mlb_open(path, &m, &err), ML_E_IO);
    ck_assert_int_eq(err.code, ML_E_IO);
    ck_assert_int_eq(err.sys_errno, ENOENT);
    ck_assert_ptr_null(m);

    tu_err_reset(&err);
    ck_assert_int_eq(ml_mlb_open(dir, &m, &err), ML_E_IO);
    ck_assert_int_eq(err.sys_errno, EISDIR);
    ck_assert_ptr_null(m);

    /* An empty file is a format error, not an I/O one. */
    snprintf(path, sizeof path, "%s/empty.mlb", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ck_assert_int_ge(fd, 0);
    close(fd);
    tu_err_reset(&err);
    TU_CHECK_ERR("empty file", ml_mlb_open(path, &m, &err), err, ML_E_FORMAT, "", 0);
    unlink(path);

    /* A real file, written through ml_outfile, maps and matches. */
    ml_mlb_header h;
    uint8_t flags[4];
    tu_full_header(&h, flags);
    snprintf(path, sizeof path, "%s/full.mlb", dir);
    ml_outfile *f;
    ck_assert_int_eq(ml_outfile_open(path, &f, &err), ML_OK);
    ck_assert_int_eq(ml_mlb_write_random(&h, flags, 77, ml_outfile_sink, f, &err), ML_OK);
    ck_assert_int_eq(ml_outfile_commit(f, &err), ML_OK);
    tu_mem out;
    tu_write_random(&h, flags, 77, &out);
    ck_assert_int_eq(ml_mlb_open(path, &m, &err), ML_OK);
    compare_loaded(m, &h, flags, out.p, out.len);
    ml_mlb_close(m);
    unlink(path);
    tu_mem_free(&out);
    ck_assert_int_eq(rmdir(dir), 0);
}
END_TEST

/* ml_mlb_open_ex(ML_MLB_READ): the file read into memory (2 MiB aligned)
 * loads as the mapping does, and fails as it does: the same status,
 * errno, field and offset for a missing file, a directory, an empty file
 * and truncations; an unknown flag is ML_E_INVAL. */
START_TEST(test_open_read)
{
    char dir[256], path[512];
    ml_mlb *m = (ml_mlb *)(void *)dir, *mm = NULL;
    ml_error err, em;
    tmpdir_make(dir, sizeof dir);

    snprintf(path, sizeof path, "%s/missing.mlb", dir);
    tu_err_reset(&err);
    ck_assert_int_eq(ml_mlb_open_ex(path, ML_MLB_READ, &m, &err), ML_E_IO);
    ck_assert_int_eq(err.sys_errno, ENOENT);
    ck_assert_ptr_null(m);
    tu_err_reset(&err);
    ck_assert_int_eq(ml_mlb_open_ex(dir, ML_MLB_READ, &m, &err), ML_E_IO);
    ck_assert_int_eq(err.sys_errno, EISDIR);
    ck_assert_ptr_null(m);
    m = (ml_mlb *)(void *)dir;
    tu_err_reset(&err);
    TU_CHECK_ERR("unknown flag", ml_mlb_open_ex(dir, 2, &m, &err), err, ML_E_INVAL, "", -1);
    ck_assert_ptr_null(m);

    ml_mlb_header h;
    uint8_t flags[4];
    tu_full_header(&h, flags);
    tu_mem out;
    tu_write_random(&h, flags, 78, &out);
    snprintf(path, sizeof path, "%s/model.mlb", dir);
    const size_t cuts[] = {0, 1, 100, out.len / 3, out.len - 1, out.len};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(write(fd, out.p, cuts[i]), (ssize_t)cuts[i]);
        close(fd);
        tu_err_reset(&err);
        tu_err_reset(&em);
        ml_status s = ml_mlb_open_ex(path, ML_MLB_READ, &m, &err);
        ml_status sm = ml_mlb_open(path, &mm, &em);
        ck_assert_msg(s == sm && strcmp(err.field, em.field) == 0 && err.offset == em.offset,
                      "%zu of %zu bytes: read gives %s %s@%lld (%s), the mapping %s %s@%lld",
                      cuts[i], out.len, ml_status_name(s), err.field, (long long)err.offset,
                      err.msg, ml_status_name(sm), em.field, (long long)em.offset);
        if (s == ML_OK) { /* the whole file (or all but padding the loader forgives) */
            if (cuts[i] == out.len)
                compare_loaded(m, &h, flags, out.p, out.len);
            ck_assert_uint_eq((uintptr_t)ml_mlb_file_data(m) % (2u << 20), 0);
            ml_mlb_close(m);
            ml_mlb_close(mm);
        } else {
            ck_assert_ptr_null(m);
        }
        if (cuts[i] == out.len)
            ck_assert_int_eq(s, ML_OK);
        if (cuts[i] <= out.len / 3) /* cut inside the header or the tensors */
            ck_assert_int_ne(s, ML_OK);
    }
    unlink(path);
    tu_mem_free(&out);
    ck_assert_int_eq(rmdir(dir), 0);
}
END_TEST

START_TEST(test_find_and_get)
{
    ml_mlb_header h;
    uint8_t flags[4];
    ml_error err;
    ml_mlb *m;
    tu_full_header(&h, flags);
    tu_mem out;
    tu_write_random(&h, flags, 31, &out);
    tu_buf b;
    tu_buf_copy(&b, out.p, out.len, 0);
    ck_assert_int_eq(ml_mlb_open_memory(b.p, b.len, &m, &err), ML_OK);
    const ml_tensor *t = ml_mlb_find(m, "blk.1.wq");
    ck_assert_ptr_nonnull(t);
    ck_assert_ptr_eq(ml_mlb_get(m, ML_R_WQ, 1), t);
    ck_assert_int_eq(t->layer, 1);
    ck_assert_uint_eq(t->rows, 24 * 4);
    ck_assert_uint_eq(t->cols, 64);
    ck_assert_ptr_null(ml_mlb_find(m, "blk.3.wq")); /* linear layer */
    ck_assert_ptr_nonnull(ml_mlb_find(m, "blk.3.lqkv"));
    ck_assert_ptr_nonnull(ml_mlb_find(m, "blk.3.A_log"));
    ck_assert_ptr_null(ml_mlb_find(m, "blk.4.wq"));
    ck_assert_ptr_null(ml_mlb_find(m, "nope"));
    ck_assert_ptr_null(ml_mlb_find(m, ""));
    ck_assert_ptr_null(ml_mlb_find(m, "blk.1.w"));
    ck_assert_ptr_null(ml_mlb_get(m, ML_R_WQ, -1));
    ck_assert_ptr_null(ml_mlb_get(m, ML_R_WQ, 4));
    ck_assert_ptr_null(ml_mlb_get(m, ML_R_TOK_EMB, 0));
    t = ml_mlb_get(m, ML_R_TOK_EMB, -1);
    ck_assert_ptr_nonnull(t);
    ck_assert_str_eq(t->name, "tok_emb");
    t = ml_mlb_get(m, ML_R_FINAL_NORM, -1);
    ck_assert_str_eq(t->name, "final_norm");
    ck_assert_int_eq(t->type, ML_TYPE_F32);
    ck_assert_uint_eq(t->ndim, 1);
    ck_assert_uint_eq(t->rows, 64);
    ck_assert_uint_eq(t->cols, 1);
    t = ml_mlb_get(m, ML_R_WCLS, -1);
    ck_assert_str_eq(t->name, "wcls");
    t = ml_mlb_get(m, ML_R_LCONV, 3);
    ck_assert_str_eq(t->name, "blk.3.lconv");
    ck_assert_int_eq(t->type, ML_TYPE_F32);
    ck_assert_uint_eq(t->ndim, 2);
    ck_assert_uint_eq(t->rows, 2 * 2 * 16 + 4 * 16);
    ck_assert_uint_eq(t->cols, 4);
    ck_assert_uint_eq(t->nbytes, 4ull * 128 * 4);
    t = ml_mlb_get(m, ML_R_LAYER_FLAGS, -1);
    ck_assert_str_eq(t->name, "layer_flags");
    ml_mlb_close(m);
    tu_buf_free(&b);
    tu_mem_free(&out);
}
END_TEST

/* A shared classifier (any non-zero value) omits wcls. */
START_TEST(test_shared_classifier)
{
    static const uint32_t vals[] = {1, 2, 0xffffffffu};
    ml_mlb_header h;
    ml_error err;
    ml_mlb *m;
    for (size_t i = 0; i < 3; i++) {
        tu_base_header(&h);
        h.shared_classifier = vals[i];
        tu_mem out;
        tu_write_random(&h, NULL, 41, &out);
        tu_buf b;
        tu_buf_copy(&b, out.p, out.len, 0);
        ck_assert_int_eq(ml_mlb_open_memory(b.p, b.len, &m, &err), ML_OK);
        ck_assert_ptr_null(ml_mlb_find(m, "wcls"));
        ck_assert_ptr_null(ml_mlb_get(m, ML_R_WCLS, -1));
        size_t n = ml_mlb_n_tensors(m);
        ck_assert_str_eq(ml_mlb_tensor(m, n - 1)->name, "final_norm");
        ck_assert_uint_eq(ml_mlb_find(m, "tok_emb")->q8_class, ML_Q8_TOK_EMB | ML_Q8_WCLS);
        compare_loaded(m, &h, NULL, out.p, out.len);
        ml_mlb_close(m);
        tu_buf_free(&b);
        tu_mem_free(&out);
    }
    tu_base_header(&h);
    tu_mem out;
    tu_write_random(&h, NULL, 41, &out);
    tu_buf b;
    tu_buf_copy(&b, out.p, out.len, 0);
    ck_assert_int_eq(ml_mlb_open_memory(b.p, b.len, &m, &err), ML_OK);
    size_t n = ml_mlb_n_tensors(m);
    ck_assert_str_eq(ml_mlb_tensor(m, n - 1)->name, "wcls");
    ck_assert_uint_eq(ml_mlb_find(m, "tok_emb")->q8_class, ML_Q8_TOK_EMB);
    ck_assert_uint_eq(ml_mlb_find(m, "wcls")->q8_class, ML_Q8_WCLS);
    ml_mlb_close(m);
    tu_buf_free(&b);
    tu_mem_free(&out);
}
END_TEST

/* Expected type by the spec's q8_mask rules, written per role. */
static ml_type expected_type(const ml_mlb_header *h, const ml_tensor *t)
{
    uint32_t m = h->q8_mask;
    int q8;
    if (h->wtype == ML_WTYPE_Q8_0)
        return ML_TYPE_Q8_0;
    switch (t->role) {
    case ML_R_TOK_EMB: q8 = h->shared_classifier ? (m & 3) != 0 : (m & 1) != 0; break;
    case ML_R_WCLS: q8 = (m & 2) != 0; break;
    case ML_R_WQ: case ML_R_WK: case ML_R_WG: case ML_R_LQKV: q8 = (m & 4) != 0; break;
    case ML_R_WV: case ML_R_LZ: q8 = (m & 8) != 0; break;
    case ML_R_WO: case ML_R_LOUT: q8 = (m & 16) != 0; break;
    case ML_R_W1: case ML_R_W3: q8 = (m & 32) != 0; break;
    case ML_R_W2: q8 = (m & 64) != 0; break;
    case ML_R_LB: case ML_R_LA: q8 = 1; break;
    default: return ML_TYPE_F32;
    }
    return q8 ? ML_TYPE_Q8_0 : ML_TYPE_Q4_0;
}

/* All 128 masks, with and without a shared classifier, in a model with a
 * gate and linear-attention layers so every class has members. */
START_TEST(test_q8_mask_classes)
{
    ml_mlb_header h;
    uint8_t flags[2] = {0, 8};
    ml_error err;
    ml_mlb *m;
    for (uint32_t mask = 0; mask < 128; mask++) {
        for (int shared = 0; shared < 2; shared++) {
            ml_mlb_header_init(&h);
            tu_apply(&h, NULL, "dim=32 n_layers=2 n_heads=2 n_kv_heads=1 hidden_dim=32 vocab=3 "
                               "max_seq=8 rope_theta=10000 wtype=2 attn_gate=1 layer_flags=1 "
                               "lin_k_heads=1 lin_v_heads=4 lin_k_dim=8 lin_v_dim=8 lin_conv=2");
            h.q8_mask = mask;
            h.shared_classifier = (uint32_t)shared;
            h.scale_f16 = mask & 1;
            tu_mem out;
            tu_write_random(&h, flags, mask, &out);
            tu_buf b;
            tu_buf_copy(&b, out.p, out.len, 0);
            ck_assert_int_eq(ml_mlb_open_memory(b.p, b.len, &m, &err), ML_OK);
            int quant = 0;
            for (size_t i = 0; i < ml_mlb_n_tensors(m); i++) {
                const ml_tensor *t = ml_mlb_tensor(m, i);
                if (t->type == ML_TYPE_U8)
                    continue;
                ck_assert_msg(t->type == expected_type(&h, t), "mask 0x%x shared %d %s: %s",
                              mask, shared, t->name, ml_type_name(t->type));
                quant += t->type != ML_TYPE_F32;
            }
            /* tok_emb, 4 attention + 1 gate + 3 FFN, 5 linear + 3 FFN, wcls */
            ck_assert_int_eq(quant, 1 + 8 + 8 + (shared ? 0 : 1));
            compare_loaded(m, &h, flags, out.p, out.len);
            ml_mlb_close(m);
            tu_buf_free(&b);
            tu_mem_free(&out);
        }
    }
    /* A Q8_0 model: every matrix is Q8_0. */
    ml_mlb_header_init(&h);
    tu_apply(&h, NULL, "dim=32 n_layers=2 n_heads=2 n_kv_heads=1 hidden_dim=32 vocab=3 "
                       "max_seq=8 rope_theta=10000 wtype=1 attn_gate=1 layer_flags=1 "
                       "lin_k_heads=1 lin_v_heads=4 lin_k_dim=8 lin_v_dim=8 lin_conv=2");
    tu_mem out;
    tu_write_random(&h, flags, 1, &out);
    tu_buf b;
    tu_buf_copy(&b, out.p, out.len, 0);
    ck_assert_int_eq(ml_mlb_open_memory(b.p, b.len, &m, &err), ML_OK);
    for (size_t i = 0; i < ml_mlb_n_tensors(m); i++) {
        const ml_tensor *t = ml_mlb_tensor(m, i);
        if (t->ndim == 2 && t->role != ML_R_LCONV)
            ck_assert_int_eq(t->type, ML_TYPE_Q8_0);
    }
    ck_assert_uint_eq(ml_mlb_find(m, "blk.1.lb")->q8_class, 0);
    ck_assert_uint_eq(ml_mlb_find(m, "blk.1.la")->q8_class, 0);
    ck_assert_uint_eq(ml_mlb_find(m, "blk.1.lqkv")->q8_class, ML_Q8_WQK);
    ck_assert_uint_eq(ml_mlb_find(m, "blk.1.lz")->q8_class, ML_Q8_WV);
    ck_assert_uint_eq(ml_mlb_find(m, "blk.1.lout")->q8_class, ML_Q8_WO);
    ck_assert_uint_eq(ml_mlb_find(m, "blk.0.wg")->q8_class, ML_Q8_WQK);
    ck_assert_uint_eq(ml_mlb_find(m, "blk.0.w3")->q8_class, ML_Q8_W13);
    ck_assert_uint_eq(ml_mlb_find(m, "blk.0.w2")->q8_class, ML_Q8_W2);
    ck_assert_uint_eq(ml_mlb_find(m, "blk.0.attn_norm")->q8_class, 0);
    ml_mlb_close(m);
    tu_buf_free(&b);
    tu_mem_free(&out);
}
END_TEST

Suite *suite_mlb_load(void)
{
    Suite *s = suite_create("mlb_load");
    TCase *tc = tcase_create("layout");
    tcase_add_test(tc, test_layout_tiny_q8);
    tcase_add_test(tc, test_layout_tiny_q4_shared_f16);
    tcase_add_test(tc, test_layout_full);
    tcase_add_test(tc, test_misaligned_buffer);
    tcase_add_test(tc, test_find_and_get);
    tcase_add_test(tc, test_shared_classifier);
    tcase_add_test(tc, test_q8_mask_classes);
    suite_add_tcase(s, tc);
    tc = tcase_create("bad_input");
    tcase_add_test(tc, test_truncation_every_offset_tiny);
    tcase_add_test(tc, test_truncation_every_offset_q8);
    tcase_add_test(tc, test_truncation_sample_full);
    tcase_add_test(tc, test_empty_and_short);
    tcase_add_test(tc, test_minus128);
    tcase_add_test(tc, test_loader_ignores_what_verify_checks);
    tcase_add_test(tc, test_open_paths);
    tcase_add_test(tc, test_open_read);
    suite_add_tcase(s, tc);
    return s;
}
