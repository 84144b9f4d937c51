/* fuzz_jinja.c - the Jinja interpreter: ml_jinja_parse on arbitrary
 * template bytes and ml_jinja_render_json with arbitrary variables.
 * Input: two bytes giving the variables' length L (little-endian, cut to
 * what is there), the template, then L bytes of JSON at the very end.
 *
 * Oracles besides the sanitizers: the error contract (statuses limited to
 * those <mlcore/jinja.h> documents, offsets inside the template or the
 * JSON); a render is deterministic (twice the same bytes or the same
 * status and message); the output is terminated and within the limit;
 * the limits hold (steps and memory kept small so a slow input is a
 * finding, as is any allocation beyond the memory cap).  The chat
 * renderer (ml_chat_render_json, which renders twice to place the
 * messages' contents) gives the same text and status as the plain render,
 * and its spans lie in the text, increasing, each equal to bytes of a
 * content. */
#include "fuzz.h"

#define MAX_OUT 65536

static void check_status(ml_status st, const ml_error *err, size_t size)
{
    fuzz_check_err(st, err, size);
    FUZZ_CHECK(st == ML_OK || st == ML_E_FORMAT || st == ML_E_INVAL || st == ML_E_NOMEM ||
               st == ML_E_UNSUPPORTED);
    if (st != ML_OK)
        FUZZ_CHECK(!strcmp(err->field, "template") || !strcmp(err->field, "vars"));
}

/* The chat render agrees with the plain one; its spans are sane. */
static void check_chat(const ml_jinja *t, const char *vars, size_t vlen, ml_status want,
                       const char *text, size_t n)
{
    ml_chat_prompt p;
    ml_error err;
    fuzz_err_init(&err);
    ml_status st = ml_chat_render_json(t, vars, vlen, &p, &err);
    FUZZ_CHECK(st == want);
    if (st == ML_OK) {
        FUZZ_CHECK(p.len == n && memcmp(p.text, text, n) == 0);
        FUZZ_CHECK(p.n_user == 0 || p.n_loose == 0);
        for (size_t i = 0, end = 0; i < p.n_user; i++) {
            FUZZ_CHECK(p.user[i].start >= end && p.user[i].len > 0 && p.user[i].len <= n &&
                       p.user[i].start <= n - p.user[i].len);
            end = p.user[i].start + p.user[i].len;
        }
    }
    ml_chat_prompt_free(&p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    size_t vlen = (size_t)(data[0] | data[1] << 8);
    if (vlen > size - 2)
        vlen = size - 2;
    const char *tpl = (const char *)data + 2, *vars = (const char *)data + size - vlen;
    size_t tlen = size - 2 - vlen;
    ml_jinja_options o = {0};
    o.max_steps = 200000;
    o.max_depth = 64;
    o.max_output = MAX_OUT;
    o.max_memory = 32u << 20;
    o.now = 1721995200;
    ml_jinja *t = NULL;
    ml_error err;
    fuzz_err_init(&err);
    ml_status st = ml_jinja_parse(tpl, tlen, &o, &t, &err);
    check_status(st, &err, tlen);
    FUZZ_CHECK((st == ML_OK) == (t != NULL));
    FUZZ_CHECK(st != ML_E_INVAL || tlen > 0);
    if (!t)
        return 0;
    char *out[2] = {NULL, NULL};
    size_t n[2] = {0, 0};
    ml_status s2[2];
    char msg[2][sizeof err.msg];
    for (int k = 0; k < 2; k++) {
        fuzz_err_init(&err);
        s2[k] = ml_jinja_render_json(t, vars, vlen, &out[k], &n[k], &err);
        size_t lim = tlen;
        if (s2[k] != ML_OK && memchr(err.field, 0, sizeof err.field) && !strcmp(err.field, "vars"))
            lim = vlen;
        check_status(s2[k], &err, lim);
        FUZZ_CHECK((s2[k] == ML_OK) == (out[k] != NULL));
        if (s2[k] == ML_OK)
            FUZZ_CHECK(n[k] <= MAX_OUT && out[k][n[k]] == 0);
        else
            FUZZ_CHECK(s2[k] != ML_E_FORMAT);
        snprintf(msg[k], sizeof msg[k], "%s", s2[k] == ML_OK ? "" : err.msg);
    }
    FUZZ_CHECK(s2[0] == s2[1] && n[0] == n[1]);
    FUZZ_CHECK(s2[0] != ML_OK || memcmp(out[0], out[1], n[0]) == 0);
    /* Messages may only differ in a strftime_now of the local time: never here. */
    FUZZ_CHECK(strcmp(msg[0], msg[1]) == 0);
    check_chat(t, vars, vlen, s2[0], out[0], n[0]);
    free(out[0]);
    free(out[1]);
    ml_jinja_free(t);
    return 0;
}
