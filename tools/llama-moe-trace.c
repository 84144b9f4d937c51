/* llama-moe-trace.c - what llama.cpp decides inside a mixture-of-experts
 * model: the router's scores, the experts it picks and their weights at
 * every layer and position, and its greedy continuation of a prompt.
 *
 * A fixture helper for tools/make-moe-fixtures.py, not part of mlcore and
 * not built by the Makefile: like tools/llama-logits.c it links against a
 * llama.cpp build (libllama, libggml) and is compiled by the fixture
 * script.  The context is llama-logits.c's: one thread, an F32 KV cache,
 * no flash attention, the whole prompt as one batch at positions 0..n-1.
 * Then it decodes greedily, one token per batch (llama.cpp's decode path),
 * choosing the first largest logit, until n_gen tokens or an end-of-
 * generation token.
 *
 * The routing comes from the graph's own tensors, observed through the
 * context's eval callback: every tensor whose name starts with
 * "ffn_moe_probs", "ffn_moe_topk", "ffn_moe_weights", "ffn_moe_gate" or
 * "ffn_moe_up" (build_moe_ffn in llama.cpp's src/llama-graph.cpp names
 * them, with "-<layer>" appended; the last two are the experts' gate and
 * up projections, before and after their biases).
 *
 * Output, one JSON object per line (JSON Lines):
 *   {"prompt": [ids...], "n_vocab": V}
 *   {"pass": P, "tensor": "ffn_moe_probs-0", "type": "f32"|"i32",
 *    "ne": [ne0, ne1, ne2, ne3], "data": [...]}     (data with ne0 fastest)
 *   {"step": i, "id": t, "piece": "...", "top1": x, "top2": y, "second": u}
 *     (piece: the token's bytes, each byte from 0x80 as the code point \u00XX)
 *   {"end": "eog"|"length", "generated": [ids...]}
 * Pass 0 is the prompt; pass i > 0 evaluates generated token i - 1.
 * Floats are written with 9 significant digits (exact for f32).
 *
 * usage: llama-moe-trace MODEL.gguf OUT.jsonl N_GEN -p TEXT
 *        llama-moe-trace MODEL.gguf OUT.jsonl N_GEN ID...
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml-backend.h"
#include "ggml.h"
#include "llama.h"

typedef struct trace {
    FILE *out;
    int pass;
} trace;

static void quiet_log(enum ggml_log_level level, const char *text, void *user)
{
    (void)user;
    if (level == GGML_LOG_LEVEL_ERROR)
        fputs(text, stderr);
}

static int wanted(const char *name)
{
    static const char *const prefixes[] = {"ffn_moe_probs", "ffn_moe_topk", "ffn_moe_weights",
                                           "ffn_moe_gate", "ffn_moe_up"};
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
        if (strncmp(name, prefixes[i], strlen(prefixes[i])) == 0)
            return 1;
    return 0;
}

/* A JSON string of raw bytes: quotes, backslashes, control bytes and every
 * byte from 0x80 escaped as \u00XX, so a piece that is part of a UTF-8
 * character stays valid JSON (read it back as Latin-1 to get the bytes). */
static void put_json_string(FILE *f, const char *s, size_t n)
{
    fputc('"', f);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20 || c >= 0x80)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

/* Writes an observed tensor, element by element through its strides (the
 * top-k indices are a view into the argsort's rows). */
static void dump_tensor(trace *tr, const struct ggml_tensor *t)
{
    if (t->type != GGML_TYPE_F32 && t->type != GGML_TYPE_I32)
        return;
    if (!t->buffer || !ggml_backend_buffer_is_host(t->buffer)) {
        fprintf(stderr, "llama-moe-trace: %s is not in host memory\n", t->name);
        return;
    }
    const char *base = (const char *)t->data;
    fprintf(tr->out, "{\"pass\": %d, \"tensor\": \"%s\", \"type\": \"%s\", \"ne\": [%lld, %lld, %lld, %lld], \"data\": [",
            tr->pass, t->name, t->type == GGML_TYPE_F32 ? "f32" : "i32", (long long)t->ne[0],
            (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3]);
    int first = 1;
    for (int64_t i3 = 0; i3 < t->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < t->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < t->ne[1]; i1++)
                for (int64_t i0 = 0; i0 < t->ne[0]; i0++) {
                    const char *p = base + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] +
                                    i3 * t->nb[3];
                    if (!first)
                        fputs(", ", tr->out);
                    first = 0;
                    if (t->type == GGML_TYPE_F32) {
                        float v;
                        memcpy(&v, p, sizeof v);
                        fprintf(tr->out, "%.9g", (double)v);
                    } else {
                        int32_t v;
                        memcpy(&v, p, sizeof v);
                        fprintf(tr->out, "%d", v);
                    }
                }
    fputs("]}\n", tr->out);
}

static bool observe(struct ggml_tensor *t, bool ask, void *user)
{
    if (ask)
        return wanted(t->name);
    if (wanted(t->name))
        dump_tensor(user, t);
    return true;
}

static struct llama_context *make_context(struct llama_model *model, int n_ctx, int n_batch,
                                          trace *tr)
{
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t)n_ctx;
    cp.n_batch = (uint32_t)n_batch;
    cp.n_ubatch = (uint32_t)n_batch;
    cp.n_seq_max = 1;
    cp.n_threads = 1;
    cp.n_threads_batch = 1;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    cp.type_k = GGML_TYPE_F32;
    cp.type_v = GGML_TYPE_F32;
    cp.swa_full = true;
    cp.no_perf = true;
    cp.cb_eval = observe;
    cp.cb_eval_user_data = tr;
    return llama_init_from_model(model, cp);
}

/* The prompt's ids: given as numbers, or the tokens of -p TEXT (with the
 * BOS the vocabulary asks for, special tokens not parsed). */
static int prompt_ids(const struct llama_vocab *vocab, int argc, char **argv, llama_token **ids)
{
    if (argc == 2 && strcmp(argv[0], "-p") == 0) {
        int len = (int)strlen(argv[1]);
        int cap = len + 8;
        *ids = calloc((size_t)cap, sizeof **ids);
        if (!*ids)
            return -1;
        return llama_tokenize(vocab, argv[1], len, *ids, cap, true, false);
    }
    *ids = calloc((size_t)argc, sizeof **ids);
    if (!*ids)
        return -1;
    for (int i = 0; i < argc; i++) {
        char *end = NULL;
        long v = strtol(argv[i], &end, 10);
        if (*argv[i] == '\0' || *end != '\0' || v < 0 || v > 0x7fffffffL) {
            fprintf(stderr, "llama-moe-trace: bad token id '%s'\n", argv[i]);
            return -1;
        }
        (*ids)[i] = (llama_token)v;
    }
    return argc;
}

/* The first largest logit, and the largest of the others. */
static void top2(const float *row, int n_vocab, int *best, int *second)
{
    int b = 0, s = -1;
    for (int i = 1; i < n_vocab; i++)
        if (row[i] > row[b])
            b = i;
    for (int i = 0; i < n_vocab; i++)
        if (i != b && (s < 0 || row[i] > row[s]))
            s = i;
    *best = b;
    *second = s;
}

static int decode(struct llama_context *ctx, const llama_token *ids, int n, int pos0)
{
    struct llama_batch batch = llama_batch_init(n, 0, 1);
    for (int i = 0; i < n; i++) {
        batch.token[i] = ids[i];
        batch.pos[i] = pos0 + i;
        batch.n_seq_id[i] = 1;
        batch.seq_id[i][0] = 0;
        batch.logits[i] = 1;
    }
    batch.n_tokens = n;
    int rc = llama_decode(ctx, batch);
    llama_batch_free(batch);
    if (rc != 0)
        fprintf(stderr, "llama-moe-trace: llama_decode returned %d\n", rc);
    return rc;
}

static void write_step(FILE *f, const struct llama_vocab *vocab, int step, const float *row,
                       int best, int second)
{
    char piece[256];
    int n = llama_token_to_piece(vocab, best, piece, sizeof piece, 0, true);
    if (n < 0)
        n = 0;
    fprintf(f, "{\"step\": %d, \"id\": %d, \"piece\": ", step, best);
    put_json_string(f, piece, (size_t)n);
    fprintf(f, ", \"top1\": %.9g, \"top2\": %.9g, \"second\": %d}\n", (double)row[best],
            (double)row[second], second);
}

static int generate(struct llama_context *ctx, const struct llama_vocab *vocab, trace *tr,
                    int n_prompt, int n_gen)
{
    const int n_vocab = llama_vocab_n_tokens(vocab);
    llama_token *gen = calloc((size_t)n_gen + 1, sizeof *gen);
    const char *end = "length";
    int n = 0;
    if (!gen)
        return -1;
    const float *row = llama_get_logits_ith(ctx, n_prompt - 1);
    for (int step = 0; step < n_gen; step++) {
        int best, second;
        if (!row) {
            fprintf(stderr, "llama-moe-trace: no logits at step %d\n", step);
            free(gen);
            return -1;
        }
        top2(row, n_vocab, &best, &second);
        write_step(tr->out, vocab, step, row, best, second);
        gen[n++] = best;
        if (llama_vocab_is_eog(vocab, best)) {
            end = "eog";
            break;
        }
        if (step + 1 == n_gen)
            break;
        tr->pass = step + 1;
        if (decode(ctx, &gen[n - 1], 1, n_prompt + step) != 0) {
            free(gen);
            return -1;
        }
        row = llama_get_logits_ith(ctx, 0);
    }
    fprintf(tr->out, "{\"end\": \"%s\", \"generated\": [", end);
    for (int i = 0; i < n; i++)
        fprintf(tr->out, "%s%d", i ? ", " : "", gen[i]);
    fputs("]}\n", tr->out);
    free(gen);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: llama-moe-trace MODEL.gguf OUT.jsonl N_GEN (-p TEXT | ID...)\n");
        return 2;
    }
    const int n_gen = atoi(argv[3]);
    if (n_gen < 1 || n_gen > 4096) {
        fprintf(stderr, "llama-moe-trace: N_GEN '%s' is not in 1..4096\n", argv[3]);
        return 2;
    }
    llama_log_set(quiet_log, NULL);
    llama_backend_init();

    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    struct llama_model *model = llama_model_load_from_file(argv[1], mp);
    if (!model) {
        fprintf(stderr, "llama-moe-trace: cannot load %s\n", argv[1]);
        return 1;
    }
    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    llama_token *ids = NULL;
    const int n_prompt = prompt_ids(vocab, argc - 4, argv + 4, &ids);
    if (n_prompt <= 0) {
        fprintf(stderr, "llama-moe-trace: no prompt tokens\n");
        return 2;
    }
    trace tr = {.out = fopen(argv[2], "w"), .pass = 0};
    if (!tr.out) {
        perror(argv[2]);
        return 1;
    }
    fprintf(tr.out, "{\"prompt\": [");
    for (int i = 0; i < n_prompt; i++)
        fprintf(tr.out, "%s%d", i ? ", " : "", ids[i]);
    fprintf(tr.out, "], \"n_vocab\": %d}\n", llama_vocab_n_tokens(vocab));

    struct llama_context *ctx = make_context(model, n_prompt + n_gen + 8, n_prompt, &tr);
    if (!ctx) {
        fprintf(stderr, "llama-moe-trace: cannot create a context\n");
        return 1;
    }
    int rc = decode(ctx, ids, n_prompt, 0);
    if (rc == 0)
        rc = generate(ctx, vocab, &tr, n_prompt, n_gen);
    if (fclose(tr.out) != 0)
        rc = -1;
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    free(ids);
    return rc == 0 ? 0 : 1;
}
