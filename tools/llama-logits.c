/* llama-logits.c - dump llama.cpp's logits for a token sequence.
 *
 * A fixture helper for tools/make-model-fixtures.py, not part of mlcore and
 * not built by the Makefile: it links against a llama.cpp build (libllama)
 * and is compiled by the fixture script at generation time.  It loads a GGUF,
 * evaluates the given token ids as one batch at positions 0..n-1 (like a
 * transformers forward pass without a cache), and writes the logits of every
 * position as raw little-endian float32, n_tokens rows of n_vocab values.
 *
 * The context uses one thread, an F32 KV cache and no flash attention so the
 * numbers depend on the weights, not on cache precision or thread count.
 *
 * usage: llama-logits MODEL.gguf OUT.f32 ID...
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama.h"

static void quiet_log(enum ggml_log_level level, const char *text, void *user)
{
    (void)user;
    if (level == GGML_LOG_LEVEL_ERROR)
        fputs(text, stderr);
}

static int parse_ids(int argc, char **argv, llama_token *ids)
{
    for (int i = 0; i < argc; i++) {
        char *end = NULL;
        long v = strtol(argv[i], &end, 10);
        if (*argv[i] == '\0' || *end != '\0' || v < 0 || v > 0x7fffffffL) {
            fprintf(stderr, "llama-logits: bad token id '%s'\n", argv[i]);
            return -1;
        }
        ids[i] = (llama_token)v;
    }
    return 0;
}

static struct llama_context *make_context(struct llama_model *model, int n_tokens)
{
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t)(n_tokens < 64 ? 64 : n_tokens);
    cp.n_batch = (uint32_t)n_tokens;
    cp.n_ubatch = (uint32_t)n_tokens;
    cp.n_seq_max = 1;
    cp.n_threads = 1;
    cp.n_threads_batch = 1;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    cp.type_k = GGML_TYPE_F32;
    cp.type_v = GGML_TYPE_F32;
    cp.swa_full = true;
    cp.no_perf = true;
    return llama_init_from_model(model, cp);
}

static int write_logits(struct llama_context *ctx, int n_tokens, int n_vocab, const char *path)
{
    FILE *f = fopen(path, "wb");
    if (!f) {
        perror(path);
        return -1;
    }
    for (int i = 0; i < n_tokens; i++) {
        const float *row = llama_get_logits_ith(ctx, i);
        if (!row || fwrite(row, sizeof(float), (size_t)n_vocab, f) != (size_t)n_vocab) {
            fprintf(stderr, "llama-logits: no logits for position %d\n", i);
            fclose(f);
            return -1;
        }
    }
    return fclose(f) == 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: llama-logits MODEL.gguf OUT.f32 ID...\n");
        return 2;
    }
    const int n_tokens = argc - 3;
    llama_token *ids = calloc((size_t)n_tokens, sizeof *ids);
    if (!ids || parse_ids(n_tokens, argv + 3, ids) != 0)
        return 2;

    llama_log_set(quiet_log, NULL);
    llama_backend_init();

    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    struct llama_model *model = llama_model_load_from_file(argv[1], mp);
    if (!model) {
        fprintf(stderr, "llama-logits: cannot load %s\n", argv[1]);
        return 1;
    }
    const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
    struct llama_context *ctx = make_context(model, n_tokens);
    if (!ctx) {
        fprintf(stderr, "llama-logits: cannot create a context\n");
        return 1;
    }

    struct llama_batch batch = llama_batch_init(n_tokens, 0, 1);
    for (int i = 0; i < n_tokens; i++) {
        batch.token[i] = ids[i];
        batch.pos[i] = i;
        batch.n_seq_id[i] = 1;
        batch.seq_id[i][0] = 0;
        batch.logits[i] = 1;
    }
    batch.n_tokens = n_tokens;

    int rc = llama_decode(ctx, batch);
    if (rc != 0)
        fprintf(stderr, "llama-logits: llama_decode returned %d\n", rc);
    else
        rc = write_logits(ctx, n_tokens, n_vocab, argv[2]);

    llama_batch_free(batch);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    free(ids);
    return rc == 0 ? 0 : 1;
}
