/* bench-read.c - decode from a mapped model against decode from the same
 * model read into memory (ml_mlb_open_ex's ML_MLB_READ, ml-run's
 * --no-mmap), token by token in one process.  The machine's bandwidth
 * moves by half within seconds, so two runs minutes apart say little;
 * here both copies decode the same tokens in alternation (which goes
 * first flips every token), and their total times are compared.
 *
 *   bench-read MODEL.mlb [-t THREADS] [-n TOKENS]
 *
 * Prints one line of "key value" pairs: mapped_tokens_per_s,
 * read_tokens_per_s, and ratio (read speed / mapped speed).  Built and
 * run by bench/bench-run.sh; by hand, after make:
 *   cc -O2 -Iinclude bench/bench-read.c build/libmlcore.a -lutf8proc \
 *      -ldeflate -lz -lm -lpthread -o bench-read */
#define _POSIX_C_SOURCE 200809L
#include <mlcore.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* One copy of the model, opened with `flags`, and a context for n tokens. */
typedef struct copy {
    ml_mlb *mlb;
    ml_model *model;
    ml_ctx *ctx;
    double seconds;
} copy;

static int copy_open(copy *c, const char *path, unsigned flags, unsigned threads, uint32_t n)
{
    ml_error e;
    ml_ctx_params p = {.n_ctx = n, .n_batch = 1, .n_threads = threads};
    memset(c, 0, sizeof *c);
    if (ml_mlb_open_ex(path, flags, &c->mlb, &e) || ml_model_new(c->mlb, &c->model, &e) ||
        ml_ctx_new(c->model, &p, &c->ctx, &e)) {
        fprintf(stderr, "bench-read: %s: %s: %s\n", path, ml_status_name(e.code), e.msg);
        return 1;
    }
    return 0;
}

static void copy_close(copy *c)
{
    ml_ctx_free(c->ctx);
    ml_model_free(c->model);
    ml_mlb_close(c->mlb);
}

/* Token i through copy c, timed: ids as bench-run.sh's prompts have
 * them, inside the vocabulary. */
static int step(copy *c, uint32_t i, uint32_t vocab, float *logits)
{
    ml_error e;
    uint32_t span = vocab > 31003 ? 31000 : vocab > 3 ? vocab - 3 : 1;
    ml_token t = (ml_token)((i * 7919u) % span + (vocab > 3 ? 3 : 0));
    double t0 = now();
    if (ml_ctx_eval(c->ctx, &t, 1, logits, 0, &e)) {
        fprintf(stderr, "bench-read: %s\n", e.msg);
        return 1;
    }
    c->seconds += now() - t0;
    return 0;
}

int main(int argc, char **argv)
{
    unsigned threads = 2;
    uint32_t n = 128;
    if (argc < 2) {
        fprintf(stderr, "usage: bench-read MODEL.mlb [-t THREADS] [-n TOKENS]\n");
        return 2;
    }
    for (int i = 2; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "-t") == 0)
            threads = (unsigned)atoi(argv[i + 1]);
        else if (strcmp(argv[i], "-n") == 0)
            n = (uint32_t)atoi(argv[i + 1]);
    }
    if (threads < 1 || n < 1) {
        fprintf(stderr, "bench-read: -t and -n take positive numbers\n");
        return 2;
    }
    copy c[2];
    if (copy_open(&c[0], argv[1], 0, threads, n) || copy_open(&c[1], argv[1], ML_MLB_READ, threads, n))
        return 1;
    const uint32_t vocab = ml_model_header(c[0].model)->vocab;
    float *logits = malloc((size_t)vocab * sizeof *logits);
    if (!logits)
        return 1;
    for (uint32_t i = 0; i < n; i++)
        for (int k = 0; k < 2; k++)
            if (step(&c[i % 2 ? 1 - k : k], i, vocab, logits))
                return 1;
    printf("mapped_tokens_per_s %.2f read_tokens_per_s %.2f ratio %.3f\n", n / c[0].seconds,
           n / c[1].seconds, c[0].seconds / c[1].seconds);
    free(logits);
    copy_close(&c[0]);
    copy_close(&c[1]);
    return 0;
}
