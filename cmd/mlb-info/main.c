/* mlb-info - describe models: an .mlb model validated and explained
 * (mlb.c), or a GGUF file inspected with what gguf2mlb would make of it
 * (gguf.c); the format is told by the magic, also on standard input. */
#include "info.h"
#include "model_input.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum { OPT_TENSORS, OPT_JSON, OPT_CTX, OPT_CACHE, OPT_CACHE_K, OPT_CACHE_V, OPT_TEMPLATE, OPT_ARRAYS };

static const cli_opt opts[] = {
    {OPT_TENSORS, 't', "tensors", NULL, "also print the tensor table"},
    {OPT_JSON, 'j', "json", NULL, "print one JSON object per file (always with tensors)"},
    {OPT_CTX, 'c', "ctx", "N", "context length for the cache sizes (default: max_seq)"},
    {OPT_CACHE, 0, "cache-type", "TYPE", "KV cache keys and values: " CLI_CACHE_TYPES},
    {OPT_CACHE_K, 0, "cache-type-k", "TYPE", "KV cache keys only"},
    {OPT_CACHE_V, 0, "cache-type-v", "TYPE", "KV cache values only"},
    {OPT_TEMPLATE, 0, "template", NULL,
     "GGUF: long strings (the chat template) in full"},
    {OPT_ARRAYS, 0, "arrays", NULL,
     "GGUF: all elements of arrays (default: " CLI_STR(TEXT_ARRAY_HEAD)
     " in text, up to " CLI_STR(JSON_ARRAY_FULL) " in JSON)"},
};

/* llama.cpp's spellings, as ml-run's. */
static const cli_alias aliases[] = {{OPT_CACHE_K, "-ctk"}, {OPT_CACHE_V, "-ctv"}};

static const cli cmd = {
    "mlb-info", "[options] FILE...",
    "Validate .mlb models and print their header, layers, sizes and tensors;\n"
    "inspect GGUF files: metadata, tensors, and what gguf2mlb would make of them.\n"
    "FILE may be - for standard input.  A split GGUF is described whole from its\n"
    "first part; its other parts named after it are not described again.",
    NULL, opts, sizeof opts / sizeof opts[0],
};

/* The other parts of the split model described last, by device and
 * inode: named after its first part (as a shell lists m-*.gguf), they
 * were described with it, not on their own. */
typedef struct file_id {
    dev_t dev;
    ino_t ino;
} file_id;

typedef struct seen_parts {
    file_id *id;
    size_t n;
} seen_parts;

/* Out of memory, fewer are remembered: a part then described alone is
 * refused as a part other than the first, which is still true. */
static void remember_parts(const ml_gguf *g, seen_parts *seen)
{
    size_t parts = ml_gguf_n_parts(g);
    seen->n = 0;
    if (parts < 2)
        return;
    file_id *id = realloc(seen->id, (parts - 1) * sizeof *id);
    if (!id)
        return;
    seen->id = id;
    for (size_t i = 1; i < parts; i++) {
        struct stat st;
        if (stat(ml_gguf_part_at(g, i)->path, &st) == 0)
            id[seen->n++] = (file_id){.dev = st.st_dev, .ino = st.st_ino};
    }
}

static int was_seen(const char *path, const seen_parts *seen)
{
    struct stat st;
    if (!seen->n || strcmp(path, "-") == 0 || stat(path, &st) != 0)
        return 0;
    for (size_t i = 0; i < seen->n; i++)
        if (seen->id[i].dev == st.st_dev && seen->id[i].ino == st.st_ino)
            return 1;
    return 0;
}

static int describe(const char *path, const options *o, seen_parts *seen)
{
    model_input in;
    int rc = model_input_open(path, &in);
    seen->n = 0;
    if (!rc && in.gguf) {
        remember_parts(in.gguf, seen);
        rc = gguf_print(path, in.gguf, o);
    } else if (!rc) {
        /* no sizes for a cache the model cannot have */
        rc = cli_cache_fits(path, ml_mlb_get_header(in.mlb), o->cache_k, o->cache_v);
        if (!rc)
            mlb_print(path, in.mlb, o);
    }
    model_input_close(&in);
    return rc;
}

int main(int argc, char **argv)
{
    options o = {0};
    const char *arg;
    int id, first, status = EXIT_OK;
    cli_set_aliases(aliases, sizeof aliases / sizeof aliases[0]);
    cli_init(&cmd);
    while ((id = cli_next(argc, argv, &arg, &first)) != -1) {
        switch (id) {
        case OPT_TENSORS: o.tensors = 1; break;
        case OPT_JSON: o.json = 1; break;
        case OPT_CTX: o.ctx = cli_u64("--ctx", arg, 1, ML_MLB_VOCAB_LIMIT); break;
        case OPT_CACHE: o.cache_k = o.cache_v = cli_cache_type("--cache-type", arg); break;
        case OPT_CACHE_K: o.cache_k = cli_cache_type("--cache-type-k", arg); break;
        case OPT_CACHE_V: o.cache_v = cli_cache_type("--cache-type-v", arg); break;
        case OPT_TEMPLATE: o.template_full = 1; break;
        case OPT_ARRAYS: o.all_arrays = 1; break;
        }
    }
    if (first >= argc)
        cli_usage_error("no FILE given");
    seen_parts seen = {0};
    for (int i = first; i < argc && cli_stdout_ok(); i++) {
        if (was_seen(argv[i], &seen))
            continue;
        int e = describe(argv[i], &o, &seen);
        if (!status)
            status = e;
    }
    free(seen.id);
    return cli_finish(status);
}
