/* check_mlb_write.c - the .mlb writer (lib/format/mlb_write.c) and output
 * files.  The writer must refuse a header or flags that fail validation
 * (with the validation's status, field and offset, writing nothing),
 * tensors of the wrong size (ML_E_INVAL), Q8_0 quants of -128 and puts
 * after the last tensor; finish on an incomplete model is ML_E_INVAL naming
 * the missing tensor; the output is padded to 64 bytes with zeros; a sink
 * that fails anywhere propagates ML_E_IO and leaves the writer failed
 * (nothing more reaches the sink, finish reports ML_E_IO).  ml_outfile:
 * commit renames into place, abort leaves neither the file nor its
 * temporary, a missing directory is ML_E_IO. */
#include "suites.h"
#include "testutil.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

START_TEST(test_refuses_invalid_header)
{
    static const char *const sets[] = {"dim=0", "version=2", "wtype=1 q8_mask=1", "act=3",
                                       "rope_type=1", "vocab=2", "lin_conv=3",
                                       "rope_attn_factor=-0"};
    for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++) {
        ml_mlb_header h;
        ml_error want, err;
        tu_base_header(&h);
        tu_apply(&h, NULL, sets[i]);
        ml_status st = ml_mlb_header_validate(&h, NULL, NULL, &want);
        ck_assert_int_ne(st, ML_OK);
        tu_mem out;
        tu_mem_init(&out);
        ml_mlb_writer *w = (ml_mlb_writer *)(void *)&out;
        tu_err_reset(&err);
        ml_status s = ml_mlb_writer_new(&h, NULL, tu_mem_sink, &out, &w, &err);
        TU_CHECK_ERR(sets[i], s, err, st, want.field, want.offset);
        ck_assert_ptr_null(w);
        ck_assert_uint_eq(out.calls, 0);
        /* ml_mlb_write_random too. */
        tu_err_reset(&err);
        s = ml_mlb_write_random(&h, NULL, 1, tu_mem_sink, &out, &err);
        TU_CHECK_ERR(sets[i], s, err, st, want.field, want.offset);
        ck_assert_uint_eq(out.calls, 0);
        tu_mem_free(&out);
    }
}
END_TEST

/* A writer over the base header with its reference layout. */
typedef struct wfix {
    ml_mlb_header h;
    tu_mem out;
    ml_mlb_writer *w;
    tu_ref *ref;
    size_t n;
    uint64_t end;
} wfix;

static void wfix_open(wfix *f, const char *set)
{
    ml_error err;
    tu_base_header(&f->h);
    tu_apply(&f->h, NULL, set);
    tu_mem_init(&f->out);
    f->n = tu_ref_layout(&f->h, NULL, NULL, 0, &f->end);
    f->ref = calloc(f->n, sizeof *f->ref);
    ck_assert_ptr_nonnull(f->ref);
    tu_ref_layout(&f->h, NULL, f->ref, f->n, NULL);
    ck_assert_int_eq(ml_mlb_writer_new(&f->h, NULL, tu_mem_sink, &f->out, &f->w, &err), ML_OK);
    ck_assert_uint_eq(f->out.len, 256);
}

static void wfix_close(wfix *f)
{
    ml_mlb_writer_free(f->w);
    free(f->ref);
    tu_mem_free(&f->out);
}

/* Puts tensor i with the test's content. */
static ml_status put_ref(wfix *f, size_t i, ml_error *err)
{
    const tu_ref *r = &f->ref[i];
    uint8_t *d = malloc(r->nbytes + 1), *s = malloc(r->scale_nbytes + 1);
    ck_assert(d && s);
    tu_tensor_content(&f->h, r, 3, i, d, s);
    ml_status st = ml_mlb_writer_put(f->w, d, r->nbytes, r->scale_nbytes ? s : NULL,
                                     r->scale_nbytes, err);
    free(d);
    free(s);
    return st;
}

START_TEST(test_wrong_sizes)
{
    wfix f;
    ml_error err;
    wfix_open(&f, "");
    const tu_ref *r = &f.ref[0];
    ck_assert_str_eq(r->name, "tok_emb");
    uint8_t *d = calloc(r->nbytes + 64, 1), *s = calloc(r->scale_nbytes + 64, 1);
    ck_assert(d && s);
    struct { size_t nb, sb; int scales; } bad[] = {
        {r->nbytes - 1, r->scale_nbytes, 1}, {r->nbytes + 1, r->scale_nbytes, 1},
        {0, r->scale_nbytes, 1},             {r->nbytes, r->scale_nbytes - 4, 1},
        {r->nbytes, r->scale_nbytes + 4, 1}, {r->nbytes, 0, 1},
        {r->nbytes, r->scale_nbytes, 0},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tu_err_reset(&err);
        ml_status st = ml_mlb_writer_put(f.w, d, bad[i].nb, bad[i].scales ? s : NULL, bad[i].sb,
                                         &err);
        TU_CHECK_ERR("wrong size", st, err, ML_E_INVAL, "tok_emb", -1);
        ck_assert_uint_eq(f.out.len, 256); /* nothing written */
        ck_assert_str_eq(ml_mlb_writer_expect(f.w)->name, "tok_emb");
    }
    /* A refused put does not poison the writer. */
    ck_assert_int_eq(ml_mlb_writer_put(f.w, d, r->nbytes, s, r->scale_nbytes, &err), ML_OK);
    /* An F32 vector given scales is the wrong size too. */
    ck_assert_str_eq(ml_mlb_writer_expect(f.w)->name, "blk.0.attn_norm");
    size_t before = f.out.len;
    tu_err_reset(&err);
    TU_CHECK_ERR("f32 with scales", ml_mlb_writer_put(f.w, d, 64 * 4, s, 4, &err), err,
                 ML_E_INVAL, "blk.0.attn_norm", -1);
    TU_CHECK_ERR("f32 short", ml_mlb_writer_put(f.w, d, 63 * 4, NULL, 0, &err), err, ML_E_INVAL,
                 "blk.0.attn_norm", -1);
    ck_assert_uint_eq(f.out.len, before);
    free(d);
    free(s);
    wfix_close(&f);
}
END_TEST

START_TEST(test_minus128_refused)
{
    wfix f;
    ml_error err;
    wfix_open(&f, "wtype=1");
    const tu_ref *r = &f.ref[0];
    ck_assert_int_eq(r->type, ML_TYPE_Q8_0);
    uint8_t *d = calloc(r->nbytes, 1), *s = calloc(r->scale_nbytes, 1);
    ck_assert(d && s);
    const size_t at[] = {0, 1, 4095, (size_t)r->nbytes - 1};
    for (size_t i = 0; i < 4; i++) {
        memset(d, 0x7f, r->nbytes);
        d[at[i]] = 0x80;
        tu_err_reset(&err);
        TU_CHECK_ERR("-128", ml_mlb_writer_put(f.w, d, r->nbytes, s, r->scale_nbytes, &err), err,
                     ML_E_INVAL, "tok_emb", -1);
        ck_assert_uint_eq(f.out.len, 256);
    }
    memset(d, 0x81, r->nbytes); /* -127 is fine */
    ck_assert_int_eq(ml_mlb_writer_put(f.w, d, r->nbytes, s, r->scale_nbytes, &err), ML_OK);
    free(d);
    free(s);
    wfix_close(&f);
    /* In a Q4_0 matrix 0x80 is a pair of nibbles. */
    wfix_open(&f, "");
    r = &f.ref[0];
    ck_assert_int_eq(r->type, ML_TYPE_Q4_0);
    d = malloc(r->nbytes);
    s = calloc(r->scale_nbytes, 1);
    ck_assert(d && s);
    memset(d, 0x80, r->nbytes);
    ck_assert_int_eq(ml_mlb_writer_put(f.w, d, r->nbytes, s, r->scale_nbytes, &err), ML_OK);
    free(d);
    free(s);
    wfix_close(&f);
}
END_TEST

START_TEST(test_complete_extra_incomplete)
{
    wfix f;
    ml_error err;
    wfix_open(&f, "scale_f16=1 q8_mask=0x11 vocab=3");
    for (size_t i = 0; i < f.n; i++) {
        const ml_tensor *e = ml_mlb_writer_expect(f.w);
        ck_assert_ptr_nonnull(e);
        ck_assert_str_eq(e->name, f.ref[i].name);
        ck_assert_int_eq(put_ref(&f, i, &err), ML_OK);
    }
    ck_assert_ptr_null(ml_mlb_writer_expect(f.w));
    /* Padded to 64 bytes with zeros, including after the last array. */
    ck_assert_uint_ne(f.end % 64, 0);
    ck_assert_uint_eq(f.out.len, tu_align64(f.end));
    for (size_t k = f.end; k < f.out.len; k++)
        ck_assert_uint_eq(f.out.p[k], 0);
    /* One more put is refused and writes nothing. */
    uint8_t x[64] = {0};
    size_t len = f.out.len;
    tu_err_reset(&err);
    ck_assert_int_eq(ml_mlb_writer_put(f.w, x, 64, NULL, 0, &err), ML_E_INVAL);
    ck_assert_int_eq(err.code, ML_E_INVAL);
    ck_assert_uint_eq(f.out.len, len);
    ml_mlb_writer *w = f.w;
    f.w = NULL;
    ck_assert_int_eq(ml_mlb_writer_finish(w, &err), ML_OK);
    /* The bytes load. */
    tu_buf b;
    ml_mlb *m;
    tu_buf_copy(&b, f.out.p, f.out.len, 0);
    ck_assert_int_eq(ml_mlb_open_memory(b.p, b.len, &m, &err), ML_OK);
    ml_mlb_close(m);
    tu_buf_free(&b);
    wfix_close(&f);

    /* Finish right away, or halfway: the first missing tensor is named. */
    wfix_open(&f, "");
    w = f.w;
    f.w = NULL;
    tu_err_reset(&err);
    TU_CHECK_ERR("finish at once", ml_mlb_writer_finish(w, &err), err, ML_E_INVAL, "tok_emb", -1);
    wfix_close(&f);
    wfix_open(&f, "");
    for (size_t i = 0; i < 7; i++)
        ck_assert_int_eq(put_ref(&f, i, &err), ML_OK);
    w = f.w;
    f.w = NULL;
    tu_err_reset(&err);
    TU_CHECK_ERR("finish halfway", ml_mlb_writer_finish(w, &err), err, ML_E_INVAL,
                 f.ref[7].name, -1);
    wfix_close(&f);
    ml_mlb_writer_free(NULL);
}
END_TEST

/* Output of ml_mlb_write_random: header, flags, zero padding, 64-byte
 * length, deterministic by seed. */
START_TEST(test_output_layout)
{
    ml_mlb_header h;
    uint8_t flags[4];
    tu_full_header(&h, flags);
    tu_mem a, b, c;
    tu_write_random(&h, flags, 9, &a);
    tu_write_random(&h, flags, 9, &b);
    tu_write_random(&h, flags, 10, &c);
    ck_assert_uint_eq(a.len, b.len);
    ck_assert_mem_eq(a.p, b.p, a.len);
    ck_assert_uint_eq(a.len, c.len);
    ck_assert(memcmp(a.p, c.p, a.len) != 0);
    ck_assert_uint_eq(a.len % 64, 0);
    uint8_t raw[256];
    ml_mlb_header_encode(&h, raw);
    ck_assert_mem_eq(a.p, raw, 256);
    ck_assert_mem_eq(a.p + 256, flags, 4);
    for (size_t k = 260; k < 320; k++)
        ck_assert_uint_eq(a.p[k], 0);
    uint64_t end;
    tu_ref_layout(&h, flags, NULL, 0, &end);
    ck_assert_uint_eq(a.len, tu_align64(end));
    for (size_t k = end; k < a.len; k++)
        ck_assert_uint_eq(a.p[k], 0);
    /* The generated model passes the deep verifier. */
    tu_reader rd;
    ml_verify_report rep;
    ml_error err;
    memset(&rep, 0, sizeof rep);
    tu_reader_init(&rd, a.p, a.len, 1, 100);
    ck_assert_int_eq(ml_mlb_verify_stream(tu_mem_read, &rd, &rep, &err), ML_OK);
    tu_mem_free(&a);
    tu_mem_free(&b);
    tu_mem_free(&c);
}
END_TEST

/* A sink failing at byte k, for many k: ML_E_IO, then the writer stays failed. */
START_TEST(test_sink_failure)
{
    ml_error err;
    size_t total;
    { /* the length of the complete file */
        ml_mlb_header h;
        tu_base_header(&h);
        tu_apply(&h, NULL, "vocab=3 scale_f16=1");
        tu_mem full;
        tu_write_random(&h, NULL, 1, &full);
        total = full.len;
        tu_mem_free(&full);
    }
    for (size_t fail = 0; fail < total; fail += fail < 300 ? 1 : 97) {
        ml_mlb_header h;
        tu_base_header(&h);
        tu_apply(&h, NULL, "vocab=3 scale_f16=1");
        tu_mem out;
        tu_mem_init(&out);
        out.fail_at = fail;
        ml_mlb_writer *w = NULL;
        tu_err_reset(&err);
        ml_status s = ml_mlb_writer_new(&h, NULL, tu_mem_sink, &out, &w, &err);
        if (fail < 256) {
            ck_assert_int_eq(s, ML_E_IO);
            ck_assert_int_eq(err.code, ML_E_IO);
            ck_assert_ptr_null(w);
            tu_mem_free(&out);
            continue;
        }
        ck_assert_int_eq(s, ML_OK);
        wfix fx;
        fx.h = h;
        fx.w = w;
        fx.n = tu_ref_layout(&h, NULL, NULL, 0, &fx.end);
        fx.ref = calloc(fx.n, sizeof *fx.ref);
        ck_assert_ptr_nonnull(fx.ref);
        tu_ref_layout(&h, NULL, fx.ref, fx.n, NULL);
        size_t i = 0;
        for (; i < fx.n; i++) {
            s = put_ref(&fx, i, &err);
            if (s)
                break;
        }
        ck_assert_msg(s == ML_E_IO, "fail at %zu: %s", fail, ml_status_name(s));
        ck_assert_int_eq(err.code, ML_E_IO);
        ck_assert_uint_le(out.len, fail);
        /* Failed for good: nothing more reaches the sink. */
        unsigned calls = out.calls;
        if (i + 1 < fx.n) {
            tu_err_reset(&err);
            ck_assert_int_eq(put_ref(&fx, i + 1, &err), ML_E_INVAL);
        }
        tu_err_reset(&err);
        ck_assert_int_eq(put_ref(&fx, i < fx.n ? i : fx.n - 1, &err), ML_E_INVAL);
        ck_assert_uint_eq(out.calls, calls);
        tu_err_reset(&err);
        ck_assert_int_eq(ml_mlb_writer_finish(w, &err), ML_E_IO);
        free(fx.ref);
        tu_mem_free(&out);

        /* ml_mlb_write_random propagates it too. */
        tu_mem_init(&out);
        out.fail_at = fail;
        ck_assert_int_eq(ml_mlb_write_random(&h, NULL, 1, tu_mem_sink, &out, &err), ML_E_IO);
        tu_mem_free(&out);
    }
}
END_TEST

/* ---- ml_outfile ---- */

static void tmpdir_make(char *dir, size_t n)
{
    const char *t = getenv("TMPDIR");
    snprintf(dir, n, "%s/mlcore-unit-XXXXXX", t && *t ? t : "/tmp");
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

/* Names in dir, sorted into one string "a|b|" (at most a few). */
static void listing(const char *dir, char *out, size_t n)
{
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    out[0] = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        size_t k = strlen(out);
        snprintf(out + k, n - k, "%s|", e->d_name);
    }
    closedir(d);
}

static size_t read_file(const char *path, char *buf, size_t n)
{
    int fd = open(path, O_RDONLY);
    ck_assert_int_ge(fd, 0);
    ssize_t r = read(fd, buf, n);
    close(fd);
    ck_assert_int_ge(r, 0);
    return (size_t)r;
}

START_TEST(test_outfile_commit)
{
    char dir[256], path[512], list[1024], buf[64];
    ml_error err;
    ml_outfile *f = NULL;
    tmpdir_make(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/model.mlb", dir);
    ck_assert_int_eq(ml_outfile_open(path, &f, &err), ML_OK);
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(ml_outfile_write(f, "hello ", 6, &err), ML_OK);
    ck_assert_int_eq(ml_outfile_sink(f, "world", 5, &err), ML_OK);
    /* Before commit: only a temporary beside the target. */
    listing(dir, list, sizeof list);
    ck_assert_msg(strncmp(list, "model.mlb.tmp.", 14) == 0 && strchr(list, '|') == strrchr(list, '|'),
                  "listing: %s", list);
    ck_assert_int_eq(access(path, F_OK), -1);
    ck_assert_int_eq(ml_outfile_commit(f, &err), ML_OK);
    listing(dir, list, sizeof list);
    ck_assert_str_eq(list, "model.mlb|");
    ck_assert_uint_eq(read_file(path, buf, sizeof buf), 11);
    ck_assert_mem_eq(buf, "hello world", 11);
    /* Mode: 0666 minus the umask, not mkstemp's 0600. */
    mode_t um = umask(0);
    umask(um);
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_uint_eq(st.st_mode & 0777, 0666 & ~um);
    /* A second commit replaces the file. */
    ck_assert_int_eq(ml_outfile_open(path, &f, &err), ML_OK);
    ck_assert_int_eq(ml_outfile_write(f, "new", 3, &err), ML_OK);
    ck_assert_uint_eq(read_file(path, buf, sizeof buf), 11); /* old content until commit */
    ck_assert_int_eq(ml_outfile_commit(f, &err), ML_OK);
    ck_assert_uint_eq(read_file(path, buf, sizeof buf), 3);
    ck_assert_mem_eq(buf, "new", 3);
    listing(dir, list, sizeof list);
    ck_assert_str_eq(list, "model.mlb|");
    ck_assert_int_eq(unlink(path), 0);
    ck_assert_int_eq(rmdir(dir), 0);
}
END_TEST

START_TEST(test_outfile_abort)
{
    char dir[256], path[512], list[1024];
    ml_error err;
    ml_outfile *f = NULL;
    tmpdir_make(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/model.mlb", dir);
    ck_assert_int_eq(ml_outfile_open(path, &f, &err), ML_OK);
    ml_mlb_header h;
    tu_base_header(&h);
    ck_assert_int_eq(ml_mlb_write_random(&h, NULL, 1, ml_outfile_sink, f, &err), ML_OK);
    listing(dir, list, sizeof list);
    ck_assert_msg(strncmp(list, "model.mlb.tmp.", 14) == 0, "%s", list);
    ml_outfile_abort(f);
    listing(dir, list, sizeof list);
    ck_assert_str_eq(list, "");
    ml_outfile_abort(NULL);
    /* Abort does not touch an existing file of the final name. */
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, "keep", 4), 4);
    close(fd);
    ck_assert_int_eq(ml_outfile_open(path, &f, &err), ML_OK);
    ck_assert_int_eq(ml_outfile_write(f, "junk", 4, &err), ML_OK);
    ml_outfile_abort(f);
    listing(dir, list, sizeof list);
    ck_assert_str_eq(list, "model.mlb|");
    char buf[16];
    ck_assert_uint_eq(read_file(path, buf, sizeof buf), 4);
    ck_assert_mem_eq(buf, "keep", 4);
    ck_assert_int_eq(unlink(path), 0);
    ck_assert_int_eq(rmdir(dir), 0);
}
END_TEST

/* Pieces of every kind of size, across the 2 MiB chunks a temporary file
 * is written in: the committed file is the bytes given, in order; an
 * abort with a chunk half full leaves nothing behind. */
START_TEST(test_outfile_chunks)
{
    char dir[256], path[512], list[1024];
    ml_error err;
    ml_outfile *f = NULL;
    tmpdir_make(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/model.mlb", dir);
    const size_t M2 = (size_t)2 << 20;
    /* 1 and 7 (a chunk begun), 2 MiB - 8 (filled exactly), 5 MiB + 3
     * (whole chunks past the buffer, then a start), 3, 2 MiB (across). */
    const size_t pieces[] = {1, 7, M2 - 8, 5 * (M2 / 2) + 3, 3, M2};
    size_t total = 0;
    for (size_t i = 0; i < sizeof pieces / sizeof *pieces; i++)
        total += pieces[i];
    uint8_t *data = malloc(total), *back = malloc(total + 1);
    ck_assert_ptr_nonnull(data);
    ck_assert_ptr_nonnull(back);
    for (size_t i = 0; i < total; i++)
        data[i] = (uint8_t)(i * 2654435761u >> 13);
    ck_assert_int_eq(ml_outfile_open(path, &f, &err), ML_OK);
    for (size_t i = 0, at = 0; i < sizeof pieces / sizeof *pieces; at += pieces[i++])
        ck_assert_int_eq(ml_outfile_write(f, data + at, pieces[i], &err), ML_OK);
    ck_assert_int_eq(ml_outfile_commit(f, &err), ML_OK);
    int fd = open(path, O_RDONLY);
    ck_assert_int_ge(fd, 0);
    size_t got = 0;
    for (ssize_t r; (r = read(fd, back + got, total + 1 - got)) > 0;)
        got += (size_t)r;
    close(fd);
    ck_assert_uint_eq(got, total);
    ck_assert_int_eq(memcmp(back, data, total), 0);
    ck_assert_int_eq(unlink(path), 0);
    /* Abort with 5 bytes buffered. */
    ck_assert_int_eq(ml_outfile_open(path, &f, &err), ML_OK);
    ck_assert_int_eq(ml_outfile_write(f, data, M2 + 5, &err), ML_OK);
    ml_outfile_abort(f);
    listing(dir, list, sizeof list);
    ck_assert_str_eq(list, "");
    free(data);
    free(back);
    ck_assert_int_eq(rmdir(dir), 0);
}
END_TEST

START_TEST(test_outfile_missing_dir)
{
    char dir[256], path[512], list[64];
    ml_error err;
    ml_outfile *f = (ml_outfile *)(void *)dir;
    tmpdir_make(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/no/such/dir/model.mlb", dir);
    tu_err_reset(&err);
    ck_assert_int_eq(ml_outfile_open(path, &f, &err), ML_E_IO);
    ck_assert_int_eq(err.code, ML_E_IO);
    ck_assert_int_eq(err.sys_errno, ENOENT);
    ck_assert_ptr_null(f);
    listing(dir, list, sizeof list);
    ck_assert_str_eq(list, "");
    ck_assert_int_eq(rmdir(dir), 0);
}
END_TEST

Suite *suite_mlb_write(void)
{
    Suite *s = suite_create("mlb_write");
    TCase *tc = tcase_create("writer");
    tcase_add_test(tc, test_refuses_invalid_header);
    tcase_add_test(tc, test_wrong_sizes);
    tcase_add_test(tc, test_minus128_refused);
    tcase_add_test(tc, test_complete_extra_incomplete);
    tcase_add_test(tc, test_output_layout);
    tcase_add_test(tc, test_sink_failure);
    suite_add_tcase(s, tc);
    tc = tcase_create("outfile");
    tcase_add_test(tc, test_outfile_commit);
    tcase_add_test(tc, test_outfile_abort);
    tcase_add_test(tc, test_outfile_chunks);
    tcase_add_test(tc, test_outfile_missing_dir);
    suite_add_tcase(s, tc);
    return s;
}
