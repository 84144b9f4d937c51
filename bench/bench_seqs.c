/* bench_seqs.c - aggregate decode speed with several sequences side by
 * side (ml_ctx_eval_seqs), against one sequence alone.  Decode reads
 * every weight once per step; a step that decodes one token of each of S
 * sequences reads them once for all S, so the aggregate tokens/s should
 * grow nearly S-fold while the weights, not the attention, dominate.
 *
 *   bench_seqs MODEL.mlb [-t THREADS] [-p PROMPT] [-g GEN] [-r ROUNDS] [-s MAXSEQ]
 *
 * For S = 1, 2, 4, ... MAXSEQ (default 8): a context of S sequences, each
 * given its own PROMPT-token prompt (default 32) in one call, then GEN
 * steps (default 64), each one ml_ctx_eval_seqs call with one token per
 * sequence, the next token the argmax of its logits (greedy decoding, as
 * a server would sample).  Only the decode steps are timed.  ROUNDS
 * (default 3) rounds go through every S in turn, so a noisy neighbour
 * slows all of them alike; the best round of each S is printed:
 *   seqs  step_ms  tokens_per_s (aggregate)  per_seq  ratio (to S = 1)
 * and the 1-minute load average before and after (on a shared machine a
 * number taken under load is not a speed).  Built and run by
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
    float *logits;  /* (MAX_SEQ, vocab) */
    uint32_t *seq;  /* (MAX_SEQ * prompt) */
    ml_token *tok;  /* (MAX_SEQ * prompt) */
} bench;

/* Seconds of gen decode steps of S sequences in ctx, after their prompts;
 * negative on an error (printed). */
static double decode(bench *b, ml_ctx *c, uint32_t S)
{
    ml_error err;
    for (uint32_t s = 0; s < S; s++) {
        ml_ctx_seq_reset(c, s, NULL);
        for (unsigned i = 0; i < b->prompt; i++) { /* a different prompt each */
            b->seq[s * b->prompt + i] = s;
            b->tok[s * b->prompt + i] = (ml_token)((s * 7919u + i * 104729u + 3u) % b->vocab);
        }
    }
    if (ml_ctx_eval_seqs(c, b->seq, b->tok, (size_t)S * b->prompt, b->logits, 0, &err)) {
        fprintf(stderr, "bench_seqs: prompts: %s\n", err.msg);
        return -1;
    }
    for (uint32_t s = 0; s < S; s++)
        b->seq[s] = s;
    double t0 = now();
    for (unsigned g = 0; g < b->gen; g++) {
        for (uint32_t s = 0; s < S; s++)
            b->tok[s] = argmax(b->logits + (size_t)s * b->vocab, b->vocab);
        if (ml_ctx_eval_seqs(c, b->seq, b->tok, S, b->logits, 0, &err)) {
            fprintf(stderr, "bench_seqs: step %u: %s\n", g, err.msg);
            return -1;
        }
    }
    return now() - t0;
}

static int usage(void)
{
    fprintf(stderr, "usage: bench_seqs MODEL.mlb [-t THREADS] [-p PROMPT] [-g GEN] [-r ROUNDS] "
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
        fprintf(stderr, "bench_seqs: %s: %s\n", argv[1], err.msg);
        return 1;
    }
    bench b = {m, threads, prompt, gen, ml_model_header(m)->vocab, NULL, NULL, NULL};
    b.logits = malloc(sizeof(float) * MAX_SEQ * b.vocab);
    b.seq = malloc(sizeof(uint32_t) * MAX_SEQ * prompt);
    b.tok = malloc(sizeof(ml_token) * MAX_SEQ * prompt);
    uint32_t sizes[8];
    unsigned n_sizes = 0;
    for (uint32_t s = 1; s <= max_seq && n_sizes < 8; s *= 2)
        sizes[n_sizes++] = s;
    ml_ctx *ctx[8] = {NULL};
    double best[8];
    for (unsigned k = 0; k < n_sizes; k++) {
        uint32_t batch = sizes[k] * prompt < 64 ? 64 : sizes[k] * prompt;
        ml_ctx_params p = {.n_ctx = prompt + gen, .n_batch = batch, .n_threads = threads,
                           .n_seq = sizes[k]};
        if (!b.logits || !b.seq || !b.tok || ml_ctx_new(m, &p, &ctx[k], &err)) {
            fprintf(stderr, "bench_seqs: %u sequences: %s\n", sizes[k], err.msg);
            return 1;
        }
        best[k] = 1e30;
    }
    double load0 = loadavg();
    decode(&b, ctx[0], 1); /* warm-up: fault the mapping in, start the pool */
    for (unsigned r = 0; r < rounds; r++)
        for (unsigned k = 0; k < n_sizes; k++) {
            double t = decode(&b, ctx[k], sizes[k]);
            if (t < 0)
                return 1;
            best[k] = t < best[k] ? t : best[k];
        }
    double load1 = loadavg();
    printf("%s: %u threads, prompt %u, %u decode steps, best of %u rounds; load %.2f -> %.2f\n",
           argv[1], threads, prompt, gen, rounds, load0, load1);
    printf("%5s %9s %13s %9s %7s\n", "seqs", "step_ms", "tokens_per_s", "per_seq", "ratio");
    double base = gen / best[0];
    for (unsigned k = 0; k < n_sizes; k++) {
        double tps = (double)sizes[k] * gen / best[k];
        printf("%5u %9.2f %13.1f %9.1f %7.2f\n", sizes[k], 1e3 * best[k] / gen, tps,
               tps / sizes[k], tps / base);
        ml_ctx_free(ctx[k]);
    }
    free(b.logits);
    free(b.seq);
    free(b.tok);
    ml_model_free(m);
    ml_mlb_close(f);
    return 0;
}
