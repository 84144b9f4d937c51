/* bench-chat.c - the cost of a chat turn's text work: rendering a
 * conversation (a JSON object of variables) through a real chat template
 * and encoding it with the messages kept text (ml_chat_render_json +
 * ml_chat_encode), best of runs.  Prints "best_seconds first_seconds
 * n_ids fnv1a" for bench-chat.sh to compare with bench-chat.py (Python
 * jinja2 + tokenizers, what transformers' apply_chat_template does).
 * Usage: bench-chat TOKENIZER.mlt TEMPLATE.jinja VARS.json RUNS */
#include <mlcore.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *p = malloc((size_t)len + 1);
    if (p && fread(p, 1, (size_t)len, f) != (size_t)len)
        p = (free(p), NULL);
    fclose(f);
    if (p)
        p[*n = (size_t)len] = 0;
    return p;
}

int main(int argc, char **argv)
{
    if (argc != 5)
        return fprintf(stderr, "usage: bench-chat TOKENIZER.mlt TEMPLATE.jinja VARS.json RUNS\n"), 2;
    ml_mlt *t;
    ml_tok *k;
    ml_jinja *j;
    ml_error e;
    size_t len, vlen;
    char *tpl = slurp(argv[2], &len), *vars = slurp(argv[3], &vlen);
    if (!vars)
        return fprintf(stderr, "bench-chat: cannot read %s\n", argv[3]), 1;
    if (!tpl || ml_mlt_open(argv[1], &t, &e) || ml_tok_new(t, &k, &e) ||
        ml_jinja_parse(tpl, len, NULL, &j, &e))
        return fprintf(stderr, "bench-chat: %s\n", tpl ? e.msg : argv[2]), 1;
    int runs = atoi(argv[4]);
    double best = 1e9, first = 0;
    ml_ids ids = {0};
    for (int r = 0; r < runs; r++) {
        ml_chat_prompt p;
        ids.n = 0;
        double t0 = now();
        if (ml_chat_render_json(j, vars, vlen, &p, &e) || ml_chat_encode(k, &p, &ids, &e))
            return fprintf(stderr, "bench-chat: %s\n", e.msg), 1;
        double dt = now() - t0;
        best = dt < best ? dt : best;
        first = r ? first : dt; /* the encoder's pre-token cache still empty */
        ml_chat_prompt_free(&p);
    }
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < ids.n; i++)
        for (int b = 0; b < 4; b++)
            h = (h ^ ((ids.v[i] >> (8 * b)) & 0xff)) * 1099511628211ull;
    printf("%.9f %.9f %zu %llu\n", best, first, ids.n, (unsigned long long)h);
    ml_ids_free(&ids);
    ml_jinja_free(j);
    ml_tok_free(k);
    ml_mlt_close(t);
    free(tpl);
    free(vars);
    return 0;
}
