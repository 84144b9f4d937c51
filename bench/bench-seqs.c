/* bench-seqs.c - aggregate decode speed with several sequences side by
 * side (ml_ctx_eval_seqs), against one sequence alone.  Decode reads
 * every weight once per step; a step that decodes one token of each of S
 * sequences reads them once for all S, so the aggregate tokens/s should
 * grow nearly S-fold while the weights, not the attention, dominate.
 *
 *   bench-seqs MODEL.mlb [-t THREADS] [-p PROMPT] [-g GEN] [-r ROUNDS] [-s MAXSEQ]
 *
 * For S = 1, 2, 4, ... MAXSEQ (default 8), a "lane": a context of S
 * sequences, each given its own PROMPT-token prompt (default 32) in one
 * call, then GEN decode steps (default 64), each one ml_ctx_eval_seqs call
 * with one token per sequence, the next token the argmax of its logits
 * (greedy decoding, as a server would sample).  The lanes take their
 * decode steps in turn, step by step, so that a neighbour slowing the
 * machine slows all of them alike, and each step is timed: over ROUNDS
 * rounds (default 3) the median step of each lane gives
 *   seqs  step_ms  tokens_per_s (aggregate)  per_seq  ratio (to S = 1)
 * printed with the 1-minute load average before and after (on a shared
 * machine a number taken under load is not a speed).  Built and run by
 * bench/bench-seqs.sh. */
#define _POSIX_C_SOURCE 200809L
#include <mlcore.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_SEQ 64

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static double loadavg(void)
{
    double l = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &l) != 1)
            l = -1;
        fclose(f);
    }
    return l;
}

static ml_token argmax(const float *v, uint32_t n)
{
    ml_token b = 0;
    for (uint32_t i = 1; i < n; i++)
        if (v[i] > v[b])
            b = i;
    return b;
}

typedef struct bench {
    const ml_model *m;
    unsigned threads, prompt, gen;
    uint32_t vocab;
} bench;

/* S sequences of the context (base .. base+S-1) decoding together, and
 * what their steps need. */
typedef struct lane {
    ml_ctx *c;
    uint32_t base, S;
    float *logits;  /* (S, vocab) */
    uint32_t *seq;  /* (S * prompt) */
    ml_token *tok;  /* (S * prompt) */
    double *step;   /* (gen * rounds) seconds of each decode step */
    size_t n_steps;
} lane;

/* Every sequence of the lane given its own prompt, in one call. */
static int prompts(const bench *b, lane *ln)
{
    ml_error err;
    for (uint32_t s = 0; s < ln->S; s++) {
        ml_ctx_seq_reset(ln->c, ln->base + s, NULL);
        for (unsigned i = 0; i < b->prompt; i++) {
            ln->seq[s * b->prompt + i] = ln->base + s;
            ln->tok[s * b->prompt + i] = (ml_token)((s * 7919u + i * 104729u + 3u) % b->vocab);
        }
    }
    if (ml_ctx_eval_seqs(ln->c, ln->seq, ln->tok, (size_t)ln->S * b->prompt, ln->logits, 0,
                         &err)) {
        fprintf(stderr, "bench-seqs: prompts: %s\n", err.msg);
        return -1;
    }
    for (uint32_t s = 0; s < ln->S; s++)
        ln->seq[s] = ln->base + s;
    return 0;
}

/* One decode step: a token of every sequence, each the argmax of its
 * logits (greedy decoding), timed. */
static int step(const bench *b, lane *ln)
{
    ml_error err;
    for (uint32_t s = 0; s < ln->S; s++)
        ln->tok[s] = argmax(ln->logits + (size_t)s * b->vocab, b->vocab);
    double t0 = now();
    if (ml_ctx_eval_seqs(ln->c, ln->seq, ln->tok, ln->S, ln->logits, 0, &err)) {
        fprintf(stderr, "bench-seqs: %u sequences: %s\n", ln->S, err.msg);
        return -1;
    }
    ln->step[ln->n_steps++] = now() - t0;
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int usage(void)
{
    fprintf(stderr, "usage: bench-seqs MODEL.mlb [-t THREADS] [-p PROMPT] [-g GEN] [-r ROUNDS] "
                    "[-s MAXSEQ]\n");
    return 2;
}

int main(int argc, char **argv)
{
    unsigned threads = 2, prompt = 32, gen = 64, rounds = 3, max_seq = 8;
    if (argc < 2 || argc % 2)
        return usage();
    for (int i = 2; i + 1 < argc; i += 2) {
        unsigned v = (unsigned)atoi(argv[i + 1]);
        unsigned *o = strcmp(argv[i], "-t") == 0   ? &threads
                      : strcmp(argv[i], "-p") == 0 ? &prompt
                      : strcmp(argv[i], "-g") == 0 ? &gen
                      : strcmp(argv[i], "-r") == 0 ? &rounds
                      : strcmp(argv[i], "-s") == 0 ? &max_seq
                                                   : NULL;
        if (!o || v < 1 || (o == &max_seq && v > MAX_SEQ))
            return usage();
        *o = v;
    }
    ml_error err;
    ml_mlb *f;
    ml_model *m;
    if (ml_mlb_open(argv[1], &f, &err) || ml_model_new(f, &m, &err)) {
        fprintf(stderr, "bench-seqs: %s: %s\n", argv[1], err.msg);
        return 1;
    }
    bench b = {m, threads, prompt, gen, ml_model_header(m)->vocab};
    /* One context, so one thread pool: the lanes' sequences side by side
     * in it (a pool per lane would leave its threads spinning while the
     * next lane computes). */
    lane ln[8];
    unsigned n = 0;
    uint32_t total = 0, widest = 0;
    for (uint32_t S = 1; S <= max_seq && n < 8; S *= 2, n++)
        total += S, widest = S;
    uint32_t batch = widest * prompt < 64 ? 64 : widest * prompt;
    ml_ctx_params p = {.n_ctx = prompt + gen + 1, .n_batch = batch, .n_threads = threads,
                       .n_seq = total};
    ml_ctx *c;
    if (ml_ctx_new(m, &p, &c, &err)) {
        fprintf(stderr, "bench-seqs: %u sequences: %s\n", total, err.msg);
        return 1;
    }
    for (uint32_t k = 0, base = 0; k < n; base += ln[k].S, k++) {
        uint32_t S = 1u << k;
        ln[k] = (lane){c, base, S, malloc(sizeof(float) * S * b.vocab),
                       malloc(sizeof(uint32_t) * S * prompt), malloc(sizeof(ml_token) * S * prompt),
                       malloc(sizeof(double) * gen * rounds), 0};
        if (!ln[k].logits || !ln[k].seq || !ln[k].tok || !ln[k].step) {
            fprintf(stderr, "bench-seqs: out of memory\n");
            return 3;
        }
    }
    /* Warm-up: fault the mapping in, start the pool. */
    if (prompts(&b, &ln[0]) || step(&b, &ln[0]))
        return 1;
    ln[0].n_steps = 0;
    double load0 = loadavg();
    for (unsigned r = 0; r < rounds; r++) {
        for (unsigned k = 0; k < n; k++)
            if (prompts(&b, &ln[k]))
                return 1;
        for (unsigned g = 0; g < gen; g++)
            for (unsigned k = 0; k < n; k++)
                if (step(&b, &ln[k]))
                    return 1;
    }
    double load1 = loadavg();
    printf("%s: %u threads, prompt %u, %u rounds of %u decode steps, the lanes' steps "
           "alternating; median step; load %.2f -> %.2f\n",
           argv[1], threads, prompt, rounds, gen, load0, load1);
    printf("%5s %9s %13s %9s %7s\n", "seqs", "step_ms", "tokens_per_s", "per_seq", "ratio");
    double base = 0;
    for (unsigned k = 0; k < n; k++) {
        qsort(ln[k].step, ln[k].n_steps, sizeof(double), cmp_double);
        double med = ln[k].step[ln[k].n_steps / 2], tps = ln[k].S / med;
        if (k == 0)
            base = tps;
        printf("%5u %9.2f %13.1f %9.1f %7.2f\n", ln[k].S, 1e3 * med, tps, tps / ln[k].S,
               tps / base);
        free(ln[k].logits);
        free(ln[k].seq);
        free(ln[k].tok);
        free(ln[k].step);
    }
    ml_ctx_free(c);
    ml_model_free(m);
    ml_mlb_close(f);
    return 0;
}
