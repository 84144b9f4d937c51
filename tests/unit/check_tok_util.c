/* check_tok_util.c - reading the tokenizer fixtures (see check_tok_util.h). */
#include "check_tok_util.h"

#include <stdlib.h>

const char *tf_path(const char *file)
{
    static char buf[4096];
    const char *src = getenv("MLCORE_SRC");
    snprintf(buf, sizeof buf, "%s/tests/fixtures/tok/%s", src && *src ? src : ".", file);
    return buf;
}

void tf_load(const char *name, ml_mlt **m, ml_tok **k)
{
    char file[64];
    ml_error err;
    snprintf(file, sizeof file, "%s.mlt", name);
    ml_status s = ml_mlt_open(tf_path(file), m, &err);
    ck_assert_msg(s == ML_OK, "%s: %s", tf_path(file), err.msg);
    s = ml_tok_new(*m, k, &err);
    ck_assert_msg(s == ML_OK, "%s: %s", file, err.msg);
}

uint8_t *tf_read(const char *file, size_t *len)
{
    FILE *f = fopen(tf_path(file), "rb");
    ck_assert_msg(f != NULL, "cannot open %s", tf_path(file));
    size_t cap = 1 << 16, n = 0;
    uint8_t *p = malloc(cap);
    for (;;) {
        if (n == cap)
            p = realloc(p, cap *= 2);
        size_t r = fread(p + n, 1, cap - n, f);
        if (!r)
            break;
        n += r;
    }
    fclose(f);
    *len = n;
    return p;
}

void tf_open(tf_reader *r, const char *file)
{
    memset(r, 0, sizeof *r);
    r->f = fopen(tf_path(file), "r");
    ck_assert_msg(r->f != NULL, "cannot open %s", tf_path(file));
}

void tf_close(tf_reader *r)
{
    fclose(r->f);
    free(r->line);
    free(r->text);
    free(r->ends);
    memset(r, 0, sizeof *r);
}

static int read_line(tf_reader *r)
{
    ssize_t n = getline(&r->line, &r->cap, r->f);
    if (n <= 0)
        return 0;
    if (r->line[n - 1] == '\n')
        r->line[n - 1] = 0;
    return 1;
}

int tf_line(tf_reader *r, char *buf, size_t n)
{
    if (!read_line(r))
        return 0;
    snprintf(buf, n, "%s", r->line);
    return 1;
}

static int hexval(char c)
{
    return c <= '9' ? c - '0' : c - 'a' + 10;
}

/* Splits the line in place into tab-separated fields. */
static int fields(char *s, char **f, int max)
{
    int n = 0;
    f[n++] = s;
    for (; *s && n < max; s++)
        if (*s == '\t') {
            *s = 0;
            f[n++] = s + 1;
        }
    return n;
}

int tf_next(tf_reader *r, tf_case *c)
{
    static uint8_t *text;
    static uint32_t *ids;
    if (!read_line(r))
        return 0;
    char *f[6];
    ck_assert_int_eq(fields(r->line, f, 6), 6);
    snprintf(c->tokenizer, sizeof c->tokenizer, "%s", f[0]);
    snprintf(c->name, sizeof c->name, "%s", f[1]);
    c->special = atoi(f[2]);
    c->roundtrip = atoi(f[3]);
    size_t hl = strlen(f[4]);
    free(text);
    text = malloc(hl / 2 + 1);
    for (size_t i = 0; i < hl / 2; i++)
        text[i] = (uint8_t)(hexval(f[4][2 * i]) << 4 | hexval(f[4][2 * i + 1]));
    c->text = text;
    c->text_len = hl / 2;
    free(ids);
    ids = malloc((strlen(f[5]) / 2 + 1) * sizeof *ids);
    c->n_ids = 0;
    for (char *p = f[5]; *p;) {
        char *end;
        ids[c->n_ids++] = (uint32_t)strtoul(p, &end, 10);
        p = *end ? end + 1 : end;
    }
    c->ids = ids;
    return 1;
}

int read_pretok(tf_reader *r)
{
    if (!read_line(r))
        return 0;
    char *f[4];
    ck_assert_int_eq(fields(r->line, f, 4), 4);
    snprintf(r->variant, sizeof r->variant, "%s", f[0]);
    r->flags = (uint32_t)strtoul(f[1], NULL, 10);
    size_t hl = strlen(f[2]);
    free(r->text);
    r->text = malloc(hl / 2 + 1);
    for (size_t i = 0; i < hl / 2; i++)
        r->text[i] = (uint8_t)(hexval(f[2][2 * i]) << 4 | hexval(f[2][2 * i + 1]));
    r->text_len = hl / 2;
    free(r->ends);
    r->ends = malloc((strlen(f[3]) / 2 + 1) * sizeof *r->ends);
    r->n_ends = 0;
    for (char *p = f[3]; *p;) {
        char *end;
        r->ends[r->n_ends++] = strtoul(p, &end, 10);
        p = *end ? end + 1 : end;
    }
    return 1;
}

int tf_ids_equal(const ml_ids *got, const uint32_t *want, size_t n)
{
    return got->n == n && (n == 0 || memcmp(got->v, want, n * sizeof *want) == 0);
}

void tf_print_diff(const char *tok, const char *name, int special, const ml_ids *got,
                   const uint32_t *want, size_t n)
{
    fprintf(stderr, "%s %s special=%d:\n  got ", tok, name, special);
    for (size_t i = 0; i < got->n && i < 40; i++)
        fprintf(stderr, " %u", got->v[i]);
    fprintf(stderr, "\n  want");
    for (size_t i = 0; i < n && i < 40; i++)
        fprintf(stderr, " %u", want[i]);
    fprintf(stderr, "\n");
}

uint8_t *tf_big_text(size_t *len)
{
    const size_t big = 1u << 20;
    tf_reader r;
    tf_case c;
    uint8_t *joined = NULL;
    size_t n = 0;
    int first = 1;
    tf_open(&r, "cases-public.tsv");
    while (tf_next(&r, &c)) {
        if (strcmp(c.tokenizer, "llama3") != 0 || c.special)
            continue;
        joined = realloc(joined, n + c.text_len + 1);
        if (!first)
            joined[n++] = '\n';
        first = 0;
        memcpy(joined + n, c.text, c.text_len);
        n += c.text_len;
    }
    tf_close(&r);
    uint8_t *out = malloc(big);
    for (size_t i = 0; i < big; i += n)
        memcpy(out + i, joined, big - i < n ? big - i : n);
    free(joined);
    *len = big;
    return out;
}
