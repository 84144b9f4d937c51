/* jinja-batch - renders many templates with the library for
 * tools/jinja-diff.py, which compares them with Python jinja2.  Not
 * installed.
 *
 *   jinja-batch VARS.json < RECORDS > RESULTS
 *
 * RECORDS: for each template, a 4-byte little-endian length and its
 * bytes.  RESULTS: for each, one status byte (the ml_status) then a
 * 4-byte length and the output (ML_OK) or the error message.
 * strftime_now is pinned as in the golden fixtures (1721995200). */
#include "mlcore.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *slurp(FILE *f, size_t *n)
{
    size_t cap = 1 << 16, len = 0, k;
    char *p = malloc(cap);
    while (p && (k = fread(p + len, 1, cap - len, f)) > 0) {
        len += k;
        if (len == cap)
            p = realloc(p, cap *= 2);
    }
    *n = len;
    return p;
}

static void put_u32(size_t v)
{
    unsigned char b[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                          (unsigned char)(v >> 24)};
    fwrite(b, 1, 4, stdout);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: jinja-batch VARS.json < RECORDS\n");
        return 2;
    }
    FILE *vf = fopen(argv[1], "rb");
    if (!vf) {
        perror(argv[1]);
        return 2;
    }
    size_t vn;
    char *vars = slurp(vf, &vn);
    fclose(vf);
    ml_jinja_options o = {0};
    o.now = 1721995200;
    unsigned char h[4];
    while (fread(h, 1, 4, stdin) == 4) {
        size_t tn = (size_t)h[0] | (size_t)h[1] << 8 | (size_t)h[2] << 16 | (size_t)h[3] << 24;
        char *t = malloc(tn + 1);
        if (!t || fread(t, 1, tn, stdin) != tn)
            return 2;
        ml_jinja *j = NULL;
        ml_error err;
        char *out = NULL;
        size_t on = 0;
        ml_status st = ml_jinja_parse(t, tn, &o, &j, &err);
        if (st == ML_OK)
            st = ml_jinja_render_json(j, vars, vn, &out, &on, &err);
        putchar((int)st);
        if (st == ML_OK) {
            put_u32(on);
            fwrite(out, 1, on, stdout);
        } else {
            put_u32(strlen(err.msg));
            fputs(err.msg, stdout);
        }
        free(out);
        ml_jinja_free(j);
        free(t);
    }
    free(vars);
    return 0;
}
