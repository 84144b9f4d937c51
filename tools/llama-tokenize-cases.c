/* llama-tokenize-cases.c - llama.cpp's token ids for many texts from one
 * load of a vocabulary, the reference the tokenizer case files are made
 * from (tools/make-o200k-fixtures.py).
 *
 * A fixture helper, not part of mlcore and not built by the Makefile: like
 * tools/llama-logits.c it links against a llama.cpp build (libllama,
 * libggml) and is compiled by the fixture script.  The GGUF is loaded with
 * vocab_only, so a vocabulary-only file will do.
 *
 * Texts come on standard input, each ended by a NUL byte.  For each, one
 * line: the ids space-separated, as llama_tokenize gives them without BOS
 * or EOS (add_special false) and with special-token text matched
 * (parse_special true), which is what mlt(5) does with added tokens.
 * With --eog, instead, one line of every id llama.cpp counts as an end of
 * generation (llama_vocab_is_eog), increasing, comma-separated.
 *
 * usage: llama-tokenize-cases VOCAB.gguf < TEXTS
 *        llama-tokenize-cases --eog VOCAB.gguf
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

/* Reads standard input whole; *n receives its length. */
static char *read_all(size_t *n)
{
    size_t cap = 1 << 16, len = 0;
    char *b = malloc(cap);
    size_t k;
    while (b && (k = fread(b + len, 1, cap - len, stdin)) > 0) {
        len += k;
        if (len == cap)
            b = realloc(b, cap *= 2);
    }
    *n = len;
    return b;
}

static int print_ids(const struct llama_vocab *v, const char *text, size_t len)
{
    int cap = (int)len + 16;
    llama_token *ids = malloc((size_t)cap * sizeof *ids);
    int n = ids ? llama_tokenize(v, text, (int32_t)len, ids, cap, false, true) : -1;
    if (n < 0) {
        fprintf(stderr, "llama-tokenize-cases: llama_tokenize failed (%d)\n", n);
        free(ids);
        return 1;
    }
    for (int i = 0; i < n; i++)
        printf("%s%d", i ? " " : "", ids[i]);
    putchar('\n');
    free(ids);
    return 0;
}

int main(int argc, char **argv)
{
    int eog = argc == 3 && strcmp(argv[1], "--eog") == 0;
    if (argc != 2 && !eog) {
        fprintf(stderr, "usage: llama-tokenize-cases [--eog] VOCAB.gguf < TEXTS\n");
        return 2;
    }
    llama_log_set(quiet_log, NULL);
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    mp.vocab_only = true;
    struct llama_model *m = llama_model_load_from_file(argv[argc - 1], mp);
    if (!m) {
        fprintf(stderr, "llama-tokenize-cases: cannot load %s\n", argv[argc - 1]);
        return 1;
    }
    const struct llama_vocab *v = llama_model_get_vocab(m);
    int rc = 0;
    if (eog) {
        int first = 1;
        for (llama_token t = 0; t < llama_vocab_n_tokens(v); t++)
            if (llama_vocab_is_eog(v, t)) {
                printf("%s%d", first ? "" : ",", t);
                first = 0;
            }
        putchar('\n');
    } else {
        size_t n;
        char *in = read_all(&n);
        for (size_t i = 0; in && i < n && !rc;) {
            size_t e = i;
            while (e < n && in[e])
                e++;
            rc = print_ids(v, in + i, e - i);
            i = e + 1;
        }
        free(in);
    }
    llama_model_free(m);
    llama_backend_free();
    return rc;
}
