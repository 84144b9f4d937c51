/* mlb.c - mlb-info's report on an .mlb model: header fields with their
 * meaning, derived sizes, what each layer is, parameters, bits per weight,
 * cache memory for a context, and on request the tensor table; --json
 * prints the same for scripts.  A model with a type table (wtype 3) also
 * gets a count of tensors per type and each tensor's bits per weight. */
#include "info.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* Layer kinds, for the memory summary. */
enum { K_FULL, K_SLIDING, K_LINEAR, K_COUNT };
static const char *const kind_names[K_COUNT] = {"attention", "sliding", "linear"};

static int layer_kind(const ml_mlb_header *h, uint8_t f)
{
    if (f & ML_LAYER_LINEAR)
        return K_LINEAR;
    if (h->layer_flags ? (f & ML_LAYER_SLIDING) != 0 : h->sliding_window != 0)
        return K_SLIDING;
    return K_FULL;
}

static const char *rope_name(const ml_mlb_header *h, uint8_t f)
{
    if (f & ML_LAYER_LINEAR)
        return "none";
    if (f & ML_LAYER_NO_ROPE)
        return "none";
    if (f & ML_LAYER_LOCAL_ROPE)
        return "local";
    (void)h;
    return "global";
}

/* ", 8 experts (2 used)" after a MoE layer's description. */
static void describe_experts(const ml_mlb_header *h, uint8_t f, char *buf, size_t n)
{
    size_t w = strlen(buf);
    if (ml_mlb_layer_is_moe(h, f) && w < n)
        snprintf(buf + w, n - w, ", %u experts (%u used)", h->n_experts, h->n_experts_used);
}

/* "sliding window 512, local RoPE (theta 10000)" */
static void describe_layer(const ml_mlb_header *h, uint8_t f, char *buf, size_t n)
{
    int k = layer_kind(h, f);
    if (k == K_LINEAR) {
        snprintf(buf, n, "linear attention (gated delta rule)");
        describe_experts(h, f, buf, n);
        return;
    }
    int w = k == K_SLIDING ? snprintf(buf, n, "sliding window %u", h->sliding_window)
                           : snprintf(buf, n, "full attention");
    const char *r = rope_name(h, f);
    if (strcmp(r, "none") == 0)
        snprintf(buf + w, n - (size_t)w, ", no RoPE");
    else if (strcmp(r, "local") == 0)
        snprintf(buf + w, n - (size_t)w, ", local RoPE (theta %.9g)", (double)h->rope_local_theta);
    else
        snprintf(buf + w, n - (size_t)w, ", RoPE (theta %.9g)", (double)h->rope_theta);
    if (h->attn_gate)
        strncat(buf, ", gated", n - strlen(buf) - 1);
    describe_experts(h, f, buf, n);
}

typedef struct totals {
    uint64_t params, weight_bytes;
    uint64_t kind_layers[K_COUNT], kind_bytes[K_COUNT];
    uint64_t state_total, ctx;
    int capped; /* the requested --ctx was above max_seq */
} totals;

/* Layer l's state at ctx positions: mlb(5)'s bytes, which count float32
 * keys and values (b / 8 values of each), in the bytes of the cache types
 * (ml_ctx_new allocates that); linear-attention state is float32
 * whatever the cache. */
static uint64_t layer_bytes(const ml_mlb_header *h, uint8_t f, uint64_t ctx, const options *o)
{
    uint64_t b = ml_mlb_layer_state_bytes(h, f, ctx);
    if (f & ML_LAYER_LINEAR)
        return b;
    return ml_cache_type_bytes(o->cache_k, b / 8) + ml_cache_type_bytes(o->cache_v, b / 8);
}

static void count(const ml_mlb *m, const options *o, totals *t)
{
    uint64_t ctx = o->ctx;
    const ml_mlb_header *h = ml_mlb_get_header(m);
    memset(t, 0, sizeof *t);
    t->ctx = ctx ? ctx : h->max_seq;
    if (t->ctx > h->max_seq) { /* the runtime never holds more */
        t->ctx = h->max_seq;
        t->capped = 1;
    }
    for (size_t i = 0; i < ml_mlb_n_tensors(m); i++) {
        const ml_tensor *x = ml_mlb_tensor(m, i);
        if (x->type == ML_TYPE_U8)
            continue;
        t->params += ml_tensor_elements(x);
        t->weight_bytes += x->nbytes + x->scale_nbytes;
    }
    for (uint32_t l = 0; l < h->n_layers; l++) {
        uint8_t f = ml_mlb_layer_flag(m, l);
        uint64_t b = layer_bytes(h, f, t->ctx, o);
        int k = layer_kind(h, f);
        t->kind_layers[k]++;
        t->kind_bytes[k] += b;
        t->state_total += b;
    }
}

static double bpw(const totals *t)
{
    return t->params ? 8.0 * (double)t->weight_bytes / (double)t->params : 0;
}

void human_size(uint64_t b, char *buf, size_t n)
{
    const char *u[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)b;
    int i = 0;
    while (v >= 1024 && i < 4)
        v /= 1024, i++;
    if (i == 0)
        snprintf(buf, n, "%" PRIu64 " bytes", b);
    else
        snprintf(buf, n, "%" PRIu64 " bytes (%.2f %s)", b, v, u[i]);
}

void print_q8_classes(uint32_t mask)
{
    static const char *const names[] = {"tok_emb", "wcls", "wq/wk", "wv", "wo", "w1/w3", "w2"};
    for (int i = 0; i < 7; i++)
        if (mask & (1u << i))
            printf(" %s", names[i]);
}

void type_count_add(type_count *c, ml_type t)
{
    int k = 0;
    while (k < c->kinds && c->type[k] != t)
        k++;
    if (k == c->kinds)
        c->type[c->kinds++] = t;
    c->n[k]++;
}

void print_type_counts(const type_count *c, int json)
{
    for (int k = 0; k < c->kinds; k++)
        printf(json ? "%s\"%s\":%zu" : "%s %s %zu", k ? "," : "", ml_type_name(c->type[k]),
               c->n[k]);
}

const char *wtype_name(uint32_t wtype, int json)
{
    return wtype == ML_WTYPE_Q8_0   ? "Q8_0"
           : wtype == ML_WTYPE_Q4_0 ? "Q4_0"
           : json                   ? "table"
                                    : "per-matrix types (type table)";
}

static void count_types(const ml_mlb *m, type_count *c)
{
    memset(c, 0, sizeof *c);
    for (size_t i = 0; i < ml_mlb_n_tensors(m); i++)
        if (ml_mlb_tensor(m, i)->type != ML_TYPE_U8)
            type_count_add(c, ml_mlb_tensor(m, i)->type);
}

static int is_table(const ml_mlb *m)
{
    return ml_mlb_get_header(m)->wtype == ML_WTYPE_TABLE;
}

static void print_field_value(const ml_mlb_header *h, const ml_mlb_field *f, char *buf, size_t n)
{
    if (f->type == ML_FIELD_CHARS)
        snprintf(buf, n, "%.4s", h->magic);
    else if (f->type == ML_FIELD_U32)
        snprintf(buf, n, "%" PRIu32, ml_mlb_field_u32(h, f));
    else
        snprintf(buf, n, "%.9g", (double)ml_mlb_field_f32(h, f));
}

static void print_layers(const ml_mlb *m)
{
    const ml_mlb_header *h = ml_mlb_get_header(m);
    uint32_t start = 0;
    char cur[128], next[128];
    printf("layers\n");
    describe_layer(h, ml_mlb_layer_flag(m, 0), cur, sizeof cur);
    for (uint32_t l = 1; l <= h->n_layers; l++) {
        if (l < h->n_layers)
            describe_layer(h, ml_mlb_layer_flag(m, l), next, sizeof next);
        if (l == h->n_layers || strcmp(cur, next) != 0) {
            char range[32];
            if (l - 1 == start)
                snprintf(range, sizeof range, "%u", start);
            else
                snprintf(range, sizeof range, "%u-%u", start, l - 1);
            printf("  %-22s %s\n", range, cur);
            start = l;
            memcpy(cur, next, sizeof cur);
        }
    }
}

static void print_tensors(const ml_mlb *m)
{
    int table = is_table(m); /* older files keep their table as it was */
    int f16 = (int)ml_mlb_get_header(m)->scale_f16;
    printf("tensors\n  %-24s %-5s %-14s %12s %12s %12s%s\n", "name", "type", "shape", "offset",
           "scale_offset", "bytes", table ? "    bpw" : "");
    for (size_t i = 0; i < ml_mlb_n_tensors(m); i++) {
        const ml_tensor *t = ml_mlb_tensor(m, i);
        if (t->type == ML_TYPE_U8)
            continue;
        char shape[32];
        if (t->ndim == 1)
            snprintf(shape, sizeof shape, "[%u]", t->rows);
        else
            snprintf(shape, sizeof shape, "[%u, %u]", t->rows, t->cols);
        printf("  %-24s %-5s %-14s %12" PRIu64 " %12" PRIu64 " %12" PRIu64, t->name,
               ml_type_name(t->type), shape, t->offset, t->scale_offset,
               t->nbytes + t->scale_nbytes);
        if (table)
            printf(" %6.4g", ml_type_bits(t->type, f16));
        printf("\n");
    }
}

static void print_human(const char *path, const ml_mlb *m, const options *o)
{
    const ml_mlb_header *h = ml_mlb_get_header(m);
    const ml_mlb_derived *d = ml_mlb_get_derived(m);
    totals t;
    char buf[128];
    count(m, o, &t);
    printf("%s\n", cli_name(path));
    printf("  %-22s .mlb version %u\n", "format", h->version);
    human_size(ml_mlb_file_size(m), buf, sizeof buf);
    printf("  %-22s %s\n", "file size", buf);
    printf("  %-22s %s, %s scales", "weights", wtype_name(h->wtype, 0), h->scale_f16 ? "f16" : "f32");
    if (h->q8_mask) {
        printf(", Q8_0 classes:");
        print_q8_classes(h->q8_mask);
    }
    if (is_table(m)) {
        type_count c;
        count_types(m, &c);
        printf("\n  %-22s", "types");
        print_type_counts(&c, 0);
    }
    printf("\n  %-22s %" PRIu64 " (%.2f M), %.3f bits per weight\n", "parameters", t.params,
           (double)t.params / 1e6, bpw(&t));
    printf("header\n");
    size_t nf;
    const ml_mlb_field *f = ml_mlb_fields(&nf);
    for (size_t i = 0; i < nf; i++) {
        print_field_value(h, &f[i], buf, sizeof buf);
        printf("  %-22s %-15s %s\n", f[i].name, buf, f[i].meaning);
    }
    printf("derived\n  %-22s %u\n  %-22s %u\n  %-22s %u\n", "head_dim", d->head_dim, "q_dim",
           d->q_dim, "kv_dim", d->kv_dim);
    if (d->rot_dim != d->head_dim)
        printf("  %-22s %u\n", "rot_dim", d->rot_dim);
    if (h->n_experts) {
        ml_mlb_moe_sizes ms;
        ml_mlb_moe_sizes_of(m, &ms);
        printf("  %-22s %u\n", "moe_layers", ms.moe_layers);
        printf("  %-22s %" PRIu64 "\n", "expert_bytes", ms.expert_bytes);
        printf("  %-22s %" PRIu64 "\n", "active_bytes", ms.active_bytes);
    }
    print_layers(m);
    printf("memory at --ctx %" PRIu64 "%s", t.ctx, t.capped ? " (capped at max_seq)" : "");
    if (o->cache_k || o->cache_v) /* the default f32 cache's line as it always was */
        printf(", cache %s/%s", ml_cache_type_name(o->cache_k), ml_cache_type_name(o->cache_v));
    printf("\n");
    for (int k = 0; k < K_COUNT; k++) {
        if (!t.kind_layers[k])
            continue;
        human_size(t.kind_bytes[k], buf, sizeof buf);
        printf("  %-22s %" PRIu64 " layer%s, %s\n", kind_names[k], t.kind_layers[k],
               t.kind_layers[k] == 1 ? "" : "s", buf);
    }
    human_size(t.state_total, buf, sizeof buf);
    printf("  %-22s %s\n", "KV cache and state", buf);
    printf("  %-22s %" PRIu64 " bytes per token of full-attention layers\n", "KV growth",
           t.kind_layers[K_FULL] ? t.kind_bytes[K_FULL] / t.ctx : 0);
    if (o->tensors)
        print_tensors(m);
}

static void json_header(const ml_mlb_header *h)
{
    size_t nf;
    const ml_mlb_field *f = ml_mlb_fields(&nf);
    printf("{");
    for (size_t i = 0; i < nf; i++) {
        printf("%s\"%s\":", i ? "," : "", f[i].name);
        if (f[i].type == ML_FIELD_CHARS)
            json_strn(stdout, h->magic, 4);
        else if (f[i].type == ML_FIELD_U32)
            printf("%" PRIu32, ml_mlb_field_u32(h, &f[i]));
        else
            json_f32(stdout, ml_mlb_field_f32(h, &f[i]));
    }
    printf("}");
}

static void json_layers(const ml_mlb *m, uint64_t ctx, const options *o)
{
    const ml_mlb_header *h = ml_mlb_get_header(m);
    char desc[128];
    printf("[");
    for (uint32_t l = 0; l < h->n_layers; l++) {
        uint8_t f = ml_mlb_layer_flag(m, l);
        describe_layer(h, f, desc, sizeof desc);
        printf("%s{\"index\":%u,\"flags\":%u,\"kind\":\"%s\",\"rope\":\"%s\",\"window\":%u,"
               "\"state_bytes\":%" PRIu64 ",\"description\":",
               l ? "," : "", l, f, kind_names[layer_kind(h, f)], rope_name(h, f),
               layer_kind(h, f) == K_SLIDING ? h->sliding_window : 0,
               layer_bytes(h, f, ctx, o));
        json_str(stdout, desc);
        printf("}");
    }
    printf("]");
}

static void json_tensors(const ml_mlb *m)
{
    printf("[");
    int first = 1;
    for (size_t i = 0; i < ml_mlb_n_tensors(m); i++) {
        const ml_tensor *t = ml_mlb_tensor(m, i);
        if (t->type == ML_TYPE_U8)
            continue;
        printf("%s{\"name\":\"%s\",\"type\":\"%s\",", first ? "" : ",", t->name,
               ml_type_name(t->type));
        if (t->ndim == 1)
            printf("\"shape\":[%u]", t->rows);
        else
            printf("\"shape\":[%u,%u]", t->rows, t->cols);
        printf(",\"offset\":%" PRIu64 ",\"bytes\":%" PRIu64, t->offset, t->nbytes);
        if (is_table(m))
            printf(",\"bits_per_weight\":%.6g",
                   ml_type_bits(t->type, (int)ml_mlb_get_header(m)->scale_f16));
        if (t->scale_nbytes)
            printf(",\"scale_offset\":%" PRIu64 ",\"scale_bytes\":%" PRIu64, t->scale_offset,
                   t->scale_nbytes);
        printf("}");
        first = 0;
    }
    printf("]");
}

static void print_json(const char *path, const ml_mlb *m, const options *o)
{
    const ml_mlb_derived *d = ml_mlb_get_derived(m);
    totals t;
    count(m, o, &t);
    printf("{\"file\":");
    json_str(stdout, cli_name(path));
    printf(",\"size\":%" PRIu64 ",\"header\":", ml_mlb_file_size(m));
    json_header(ml_mlb_get_header(m));
    printf(",\"derived\":{\"head_dim\":%u,\"q_dim\":%u,\"kv_dim\":%u,\"rot_dim\":%u,"
           "\"lin_qkv\":%u,\"lin_vd\":%u}",
           d->head_dim, d->q_dim, d->kv_dim, d->rot_dim, d->lin_qkv, d->lin_vd);
    if (ml_mlb_get_header(m)->n_experts) { /* only for MoE models: others print as before */
        ml_mlb_moe_sizes ms;
        ml_mlb_moe_sizes_of(m, &ms);
        printf(",\"moe\":{\"moe_layers\":%u,\"expert_bytes\":%" PRIu64
               ",\"active_bytes\":%" PRIu64 "}",
               ms.moe_layers, ms.expert_bytes, ms.active_bytes);
    }
    printf(",\"parameters\":%" PRIu64 ",\"weight_bytes\":%" PRIu64 ",\"bits_per_weight\":%.6f",
           t.params, t.weight_bytes, bpw(&t));
    printf(",\"memory\":{\"ctx\":%" PRIu64 ",\"capped\":%s,\"cache_k\":\"%s\",\"cache_v\":\"%s\","
           "\"total_bytes\":%" PRIu64,
           t.ctx, t.capped ? "true" : "false", ml_cache_type_name(o->cache_k),
           ml_cache_type_name(o->cache_v), t.state_total);
    for (int k = 0; k < K_COUNT; k++)
        printf(",\"%s\":{\"layers\":%" PRIu64 ",\"bytes\":%" PRIu64 "}", kind_names[k],
               t.kind_layers[k], t.kind_bytes[k]);
    printf("},\"layers\":");
    json_layers(m, t.ctx, o);
    if (is_table(m)) {
        type_count c;
        count_types(m, &c);
        printf(",\"types\":{");
        print_type_counts(&c, 1);
        printf("}");
    }
    printf(",\"tensors\":");
    json_tensors(m);
    printf("}\n");
}

void mlb_print(const char *path, const ml_mlb *m, const options *o)
{
    if (o->json)
        print_json(path, m, o);
    else
        print_human(path, m, o);
}
