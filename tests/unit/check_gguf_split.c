/* check_gguf_split.c - split GGUFs (llama.cpp's gguf-split), made by
 * tools/make-split-fixtures.py into tests/fixtures/split: opened from the
 * first part or from every part, a split model lists exactly the tensors
 * of the unsplit file, in its order, with the same bytes (pointing into
 * each part's mapping) and the first part's metadata; each part keeps its
 * own alignment; and every broken part is refused with its key, its offset
 * in that part and the part named.  The commands' messages and exit
 * statuses are in tests/cli/gguf-split.bats. */
#include "suites.h"
#include "testutil.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>

static const char *fixture(const char *name)
{
    static char path[4][512];
    static unsigned next;
    const char *dir = getenv("MLCORE_FIXTURES");
    char *p = path[next++ % 4];
    snprintf(p, sizeof path[0], "%s/%s", dir ? dir : "tests/fixtures", name);
    return p;
}

#define SMOL "split/smollm2-q4_0-0000%d-of-00003.gguf"
#define ALIGN "split/align-0000%d-of-00003.gguf"

static const char *part(const char *pattern, int i)
{
    char name[128];
    snprintf(name, sizeof name, pattern, i);
    return fixture(name);
}

static ml_gguf *open_ok(const char *const *paths, size_t n)
{
    ml_gguf *g = NULL;
    ml_error e;
    tu_err_reset(&e);
    ml_status s = ml_gguf_open_parts(paths, n, &g, &e);
    ck_assert_msg(s == ML_OK, "%s: %s %s", paths[0], ml_status_name(s), e.msg);
    return g;
}

/* The split model has the unsplit file's tensors in its order, and their
 * bytes; each tensor's data lies inside the part that holds it. */
static void same_tensors(const ml_gguf *whole, const ml_gguf *split)
{
    ck_assert_uint_eq(ml_gguf_n_tensors(split), ml_gguf_n_tensors(whole));
    for (size_t i = 0; i < ml_gguf_n_tensors(whole); i++) {
        const ml_gguf_tensor *a = ml_gguf_tensor_at(whole, i), *b = ml_gguf_tensor_at(split, i);
        ck_assert_str_eq(a->name, b->name);
        ck_assert_uint_eq(a->type, b->type);
        ck_assert_uint_eq(a->n_dims, b->n_dims);
        for (int d = 0; d < ML_GGUF_MAX_DIMS; d++)
            ck_assert_uint_eq(a->dims[d], b->dims[d]);
        ck_assert_uint_eq(a->nbytes, b->nbytes);
        ck_assert_msg(memcmp(a->data, b->data, a->nbytes) == 0, "%s: bytes differ", a->name);
        ck_assert_ptr_eq(ml_gguf_find_tensor(split, b->name), b);
        const ml_gguf_part *p = ml_gguf_part_at(split, b->part);
        ck_assert_ptr_nonnull(p);
        ck_assert_uint_ge(i, p->first_tensor);
        ck_assert_uint_lt(i, p->first_tensor + p->n_tensors);
        ck_assert_uint_eq(b->file_offset, p->data_offset + b->offset);
        ck_assert_uint_eq(b->file_offset % p->alignment, 0);
        ck_assert_uint_le(b->file_offset + b->nbytes, p->file_size);
    }
}

/* The first part's keys, in its order (the split keys among them). */
static void same_metadata(const ml_gguf *whole, const ml_gguf *split)
{
    size_t k = 0;
    for (size_t i = 0; i < ml_gguf_n_kv(split); i++) {
        const ml_gguf_kv *kv = ml_gguf_kv_at(split, i);
        if (strncmp(kv->key, "split.", 6) == 0)
            continue;
        const ml_gguf_kv *w = ml_gguf_kv_at(whole, k++);
        ck_assert_ptr_nonnull(w);
        ck_assert_str_eq(kv->key, w->key);
        ck_assert_uint_eq(kv->value.type, w->value.type);
        ck_assert_uint_eq(kv->value.nbytes, w->value.nbytes);
        ck_assert(memcmp(kv->value.data, w->value.data, w->value.nbytes) == 0);
    }
    ck_assert_uint_eq(k, ml_gguf_n_kv(whole));
}

START_TEST(smollm2_whole_from_the_first_part)
{
    const char *whole_path = fixture("models/smollm2/smollm2-q4_0.gguf");
    const char *first = part(SMOL, 1);
    ml_gguf *whole = open_ok(&whole_path, 1), *split = open_ok(&first, 1);
    ck_assert_uint_eq(ml_gguf_n_parts(whole), 1);
    ck_assert_uint_eq(ml_gguf_n_parts(split), 3);
    ck_assert_ptr_null(ml_gguf_part_at(split, 3));
    /* gguf-split's default layout: 8, 8 and 4 tensors. */
    static const size_t first_tensor[3] = {0, 8, 16}, n_tensors[3] = {8, 8, 4};
    for (size_t i = 0; i < 3; i++) {
        const ml_gguf_part *p = ml_gguf_part_at(split, i);
        ck_assert_str_eq(p->path, part(SMOL, (int)i + 1));
        ck_assert_uint_eq(p->first_tensor, first_tensor[i]);
        ck_assert_uint_eq(p->n_tensors, n_tensors[i]);
        ck_assert_uint_eq(p->version, 3);
        ck_assert_uint_eq(p->alignment, 32);
    }
    same_tensors(whole, split);
    same_metadata(whole, split);
    ml_gguf_close(whole);
    ml_gguf_close(split);
}
END_TEST

START_TEST(every_part_named)
{
    const char *whole_path = fixture("models/smollm2/smollm2-q4_0.gguf");
    const char *parts[3] = {part(SMOL, 1), part(SMOL, 2), part(SMOL, 3)};
    ml_gguf *whole = open_ok(&whole_path, 1), *split = open_ok(parts, 3);
    same_tensors(whole, split);
    ml_gguf_close(whole);
    ml_gguf_close(split);
}
END_TEST

/* Part 1 holds the metadata only and says general.alignment 64; parts 2
 * and 3 hold one tensor each at the default alignment of 32. */
START_TEST(metadata_only_first_part_own_alignments)
{
    const char *whole_path = fixture("gguf/writer_align.gguf");
    const char *first = part(ALIGN, 1);
    ml_gguf *whole = open_ok(&whole_path, 1), *split = open_ok(&first, 1);
    ck_assert_uint_eq(ml_gguf_n_parts(split), 3);
    ck_assert_uint_eq(ml_gguf_part_at(split, 0)->n_tensors, 0);
    ck_assert_uint_eq(ml_gguf_part_at(split, 0)->alignment, 64);
    ck_assert_uint_eq(ml_gguf_part_at(split, 1)->alignment, 32);
    ck_assert_uint_eq(ml_gguf_part_at(split, 2)->alignment, 32);
    ck_assert_uint_eq(ml_gguf_tensor_at(split, 0)->part, 1);
    ck_assert_uint_eq(ml_gguf_tensor_at(split, 1)->part, 2);
    ck_assert_uint_eq(ml_gguf_alignment(split), 64);
    same_tensors(whole, split);
    same_metadata(whole, split);
    ml_gguf_close(whole);
    ml_gguf_close(split);
}
END_TEST

/* Keys of a later part are not read: meta.gguf's general.architecture
 * "gpt2" and meta.only_here are not the model's. */
START_TEST(later_parts_keys_unread)
{
    const char *parts[3] = {part(ALIGN, 1), fixture("split/bad/meta.gguf"), part(ALIGN, 3)};
    ml_gguf *g = open_ok(parts, 3);
    const char *s;
    size_t n;
    ck_assert_int_eq(ml_gguf_get_str(g, "general.architecture", &s, &n, NULL, NULL), ML_OK);
    ck_assert(n == 5 && memcmp(s, "llama", 5) == 0);
    ck_assert_ptr_null(ml_gguf_find(g, "meta.only_here"));
    ck_assert_uint_eq(ml_gguf_n_tensors(g), 2);
    ml_gguf_close(g);
}
END_TEST

/* split.count 0, as gguf-split --merge leaves it: an ordinary file. */
START_TEST(merged_file_is_one_file)
{
    const char *path = fixture("split/merged.gguf");
    ml_gguf *g = open_ok(&path, 1);
    ck_assert_uint_eq(ml_gguf_n_parts(g), 1);
    ck_assert_uint_eq(ml_gguf_n_tensors(g), 2);
    ck_assert_uint_eq(ml_gguf_tensor_at(g, 1)->part, 0);
    ml_gguf_close(g);
}
END_TEST

/* ---------------------------------------------------------------------------
 * Refusals: status, key, offset in the part, and the part named
 * ------------------------------------------------------------------------- */

typedef struct refusal {
    const char *what;
    const char *paths[3]; /* fixture names; NULL ends a shorter list */
    ml_status status;
    const char *field;
    int64_t offset;
    const char *text;     /* in the message */
} refusal;

/* Offsets of the values (as gguf-py's GGUFReader gives the fields' and
 * tensor infos' offsets): in the parts after the first, split.no is the
 * first key, its u16 at 44; make-split-fixtures.py's parts then have
 * split.count's value at 69 and split.tensors.count's at 102. */
static const refusal refusals[] = {
    {"a later part given alone", {"split/align-00002-of-00003.gguf"}, ML_E_FORMAT, "split.no", 44,
     "1: this is part 2 of 3 of a split model; give part 1 ("},
    {"split.count of another split", {ALIGN "1", "split/bad/count4.gguf", ALIGN "3"}, ML_E_FORMAT,
     "split.count", 69, "part 2 of 3 ("},
    {"a part of another model", {ALIGN "1", "split/bad/other-model.gguf", ALIGN "3"},
     ML_E_FORMAT, "split.tensors.count", 102, "5, but part 1 ("},
    {"split.no missing", {ALIGN "1", "split/bad/no-number.gguf", ALIGN "3"}, ML_E_FORMAT,
     "split.no", -1, "required key is missing"},
    {"a part given twice", {ALIGN "1", ALIGN "2", ALIGN "2"}, ML_E_FORMAT, "split.no", 44,
     "1, the number of part 2 ("},
    {"parts out of order", {ALIGN "1", ALIGN "3", ALIGN "2"}, ML_E_FORMAT, "split.no", 44,
     "2 where part 2 (split.no 1) belongs"},
    {"a tensor in two parts", {ALIGN "1", ALIGN "2", "split/bad/twice.gguf"}, ML_E_FORMAT, "x",
     106, "tensor also in part 2 ("},
    {"fewer tensors than split.tensors.count", {ALIGN "1", ALIGN "2", "split/bad/empty.gguf"},
     ML_E_FORMAT, "split.tensors.count", 155, "2, but the 3 parts hold 1 tensor"},
    {"a missing part", {ALIGN "1", "split/absent-00002-of-00003.gguf", ALIGN "3"}, ML_E_IO, "",
     -1, "part 2 of 3 ("},
    {"fewer parts named than split.count", {ALIGN "1", ALIGN "2"}, ML_E_INVAL, "split.count", 182,
     "3 parts, but 2 files given"},
    {"parts named for a file not split", {"gguf/writer_align.gguf", ALIGN "2"}, ML_E_INVAL,
     "split.count", -1, "not a part of a split model (no split.count)"},
    {"split.no beyond split.count", {"split/bad/no-beyond.gguf"}, ML_E_FORMAT, "split.no", 89,
     "3 is not below split.count 3"},
    {"split.count beyond u16", {"split/bad/huge-count.gguf"}, ML_E_FORMAT, "split.count", 114,
     "65536 parts: gguf-split writes at most 65535"},
    {"split.count 1 with the wrong tensor count", {"split/bad/single-00001-of-00001.gguf"},
     ML_E_FORMAT, "split.tensors.count", 147, "3, but the file holds 2 tensors"},
    {"part 1 not named as gguf-split names it", {"split/bad/meta.gguf"}, ML_E_FORMAT, "split.no",
     44, "give part 1\n"},
};

/* A fixture name, with "split/align-0000%d-of-00003.gguf" abbreviated as
 * ALIGN "1" (the pattern and the part's digit). */
static const char *refusal_path(const char *name)
{
    size_t n = strlen(name), pl = strlen(ALIGN);
    if (n == pl + 1 && strncmp(name, ALIGN, pl) == 0)
        return part(ALIGN, name[pl] - '0');
    return fixture(name);
}

START_TEST(refused)
{
    const refusal *r = &refusals[_i];
    const char *paths[3];
    size_t n = 0;
    while (n < 3 && r->paths[n]) {
        paths[n] = refusal_path(r->paths[n]);
        n++;
    }
    ml_gguf *g = (ml_gguf *)(void *)paths;
    ml_error e;
    tu_err_reset(&e);
    ml_status s = ml_gguf_open_parts(paths, n, &g, &e);
    ck_assert_msg(s == r->status, "%s: %s (%s)", r->what, ml_status_name(s), e.msg);
    ck_assert_ptr_null(g);
    ck_assert_msg(strcmp(e.field, r->field) == 0, "%s: field \"%s\" (%s)", r->what, e.field,
                  e.msg);
    ck_assert_msg(e.offset == r->offset, "%s: offset %lld (%s)", r->what, (long long)e.offset,
                  e.msg);
    /* A text ending in a newline must end the message. */
    size_t tl = strlen(r->text);
    if (tl && r->text[tl - 1] == '\n') {
        size_t ml = strlen(e.msg);
        ck_assert_msg(ml >= tl - 1 && strncmp(e.msg + ml - (tl - 1), r->text, tl - 1) == 0,
                      "%s: message \"%s\"", r->what, e.msg);
    } else {
        ck_assert_msg(strstr(e.msg, r->text) != NULL, "%s: message \"%s\"", r->what, e.msg);
    }
}
END_TEST

/* From memory the other parts cannot be found. */
START_TEST(first_part_from_memory)
{
    FILE *f = fopen(part(SMOL, 1), "rb");
    ck_assert_ptr_nonnull(f);
    static uint8_t buf[65536];
    size_t len = fread(buf, 1, sizeof buf, f);
    fclose(f);
    ml_gguf *g = (ml_gguf *)(void *)buf;
    ml_error e;
    tu_err_reset(&e);
    ml_status s = ml_gguf_open_memory(buf, len, &g, &e);
    ck_assert_int_eq(s, ML_E_UNSUPPORTED);
    ck_assert_ptr_null(g);
    ck_assert_str_eq(e.field, "split.count");
    ck_assert_msg(strstr(e.msg, "part 1 of 3 of a split model, not read from a file") != NULL, "%s",
                  e.msg);
}
END_TEST

Suite *suite_gguf_split(void)
{
    Suite *s = suite_create("gguf_split");
    TCase *tc = tcase_create("split");
    tcase_add_test(tc, smollm2_whole_from_the_first_part);
    tcase_add_test(tc, every_part_named);
    tcase_add_test(tc, metadata_only_first_part_own_alignments);
    tcase_add_test(tc, later_parts_keys_unread);
    tcase_add_test(tc, merged_file_is_one_file);
    tcase_add_loop_test(tc, refused, 0, (int)(sizeof refusals / sizeof refusals[0]));
    tcase_add_test(tc, first_part_from_memory);
    suite_add_tcase(s, tc);
    return s;
}
