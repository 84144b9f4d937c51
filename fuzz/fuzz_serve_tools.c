/* fuzz_serve_tools.c - ml-serve's tool-call split (cmd/ml-serve/
 * tools.c): any bytes as a model's reply in each format (the first byte
 * picks the format, the rest is the reply).
 *
 * Oracles besides the sanitizers: the reply fed whole and fed in pieces
 * of 1 and of 7 bytes splits the same (a stream adds up to the whole
 * answer); every call has an id, type "function", a name and arguments
 * that are strings. */
#include "fuzz.h"

#include "tools.h"

static char *split(srv_tool_format f, const char *s, size_t n, size_t step)
{
    srv_tool_split t;
    ml_buf content = {0}, reasoning = {0};
    json_t *calls = NULL, *c;
    size_t i;
    srv_tool_split_init(&t, f, 1, 7);
    for (i = 0; i < n; i += step)
        FUZZ_CHECK(!srv_tool_split_put(&t, s + i, n - i < step ? n - i : step, &content, &reasoning));
    FUZZ_CHECK(!srv_tool_split_end(&t, &content, &reasoning, &calls));
    json_array_foreach(calls, i, c) {
        json_t *fn = json_object_get(c, "function");
        FUZZ_CHECK(json_is_string(json_object_get(c, "id")));
        FUZZ_CHECK(json_is_string(json_object_get(c, "type")));
        FUZZ_CHECK(json_is_string(json_object_get(fn, "name")));
        FUZZ_CHECK(json_is_string(json_object_get(fn, "arguments")));
    }
    json_t *o = json_pack("{s:s#,s:s#,s:o}", "content", content.data ? content.data : "",
                          (int)content.len, "reasoning", reasoning.data ? reasoning.data : "",
                          (int)reasoning.len, "calls", calls ? calls : json_array());
    char *out = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    srv_tool_split_free(&t);
    ml_buf_free(&content), ml_buf_free(&reasoning);
    return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0 || size > 4096)
        return 0;
    srv_tool_format f = (srv_tool_format)(data[0] % (SRV_TOOLS_LAST + 1));
    const char *s = (const char *)data + 1;
    size_t n = size - 1;
    char *whole = split(f, s, n, n ? n : 1), *one = split(f, s, n, 1), *seven = split(f, s, n, 7);
    /* NULL: jansson refused bad UTF-8 in the content; all three alike */
    FUZZ_CHECK(!whole == !one && !whole == !seven);
    FUZZ_CHECK(!whole || (!strcmp(whole, one) && !strcmp(whole, seven)));
    free(whole), free(one), free(seven);
    return 0;
}
