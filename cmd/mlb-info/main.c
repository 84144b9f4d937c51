/* mlb-info - describe models: an .mlb model validated and explained
 * (mlb.c), or a GGUF file inspected with what gguf2mlb would make of it
 * (gguf.c); the format is told by the magic, also on standard input. */
#include "info.h"
#include "model_input.h"

#include <stdlib.h>

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
    "FILE may be - for standard input.",
    NULL, opts, sizeof opts / sizeof opts[0],
};

static int describe(const char *path, const options *o)
{
    model_input in;
    int rc = model_input_open(path, &in);
    if (!rc && in.gguf)
        rc = gguf_print(path, in.gguf, o);
    else if (!rc)
        mlb_print(path, in.mlb, o);
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
    for (int i = first; i < argc && cli_stdout_ok(); i++) {
        int e = describe(argv[i], &o);
        if (!status)
            status = e;
    }
    return cli_finish(status);
}
