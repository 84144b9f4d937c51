/* bench-tok.c - helper of bench-tok.sh: times ml_tok_encode on a text file,
 * one thread, best of RUNS, the tokenizer loaded once beforehand.
 *
 *   bench-tok FILE.mlt TEXT [RUNS]      prints "SECONDS IDS FNV"
 *
 * FNV is the FNV-1a 64 of the ids as little-endian u32 bytes, so that the
 * script can tell the ids equal the reference's.
 *
 * Built by bench-tok.sh against the build's libmlcore.a. */
#include "mlcore.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: bench-tok FILE.mlt TEXT [RUNS]\n");
        return 2;
    }
    ml_mlt *m;
    ml_tok *k;
    ml_error err;
    if (ml_mlt_open(argv[1], &m, &err) || ml_tok_new(m, &k, &err)) {
        fprintf(stderr, "bench-tok: %s: %s\n", argv[1], err.msg);
        return 1;
    }
    FILE *f = fopen(argv[2], "rb");
    if (!f) {
        perror(argv[2]);
        return 3;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    char *text = malloc((size_t)n + 1);
    if (!text || fread(text, 1, (size_t)n, f) != (size_t)n) {
        fprintf(stderr, "bench-tok: cannot read %s\n", argv[2]);
        return 3;
    }
    fclose(f);
    int runs = argc > 3 ? atoi(argv[3]) : 3;
    double best = 0;
    ml_ids ids = {0};
    for (int r = 0; r < runs; r++) {
        /* A fresh encoder each run: the pre-token cache starts empty, as
         * the reference's does. */
        ml_tok_free(k);
        if (ml_tok_new(m, &k, &err))
            return 1;
        ids.n = 0;
        double t0 = now();
        if (ml_tok_encode(k, text, (size_t)n, ML_TOK_BOS_NO, &ids, &err)) {
            fprintf(stderr, "bench-tok: %s\n", err.msg);
            return 1;
        }
        double dt = now() - t0;
        if (r == 0 || dt < best)
            best = dt;
    }
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < ids.n; i++)
        for (int b = 0; b < 4; b++)
            h = (h ^ ((ids.v[i] >> (8 * b)) & 0xff)) * 0x100000001b3ull;
    printf("%.6f %zu %016llx\n", best, ids.n, (unsigned long long)h);
    ml_ids_free(&ids);
    ml_tok_free(k);
    ml_mlt_close(m);
    free(text);
    return 0;
}
