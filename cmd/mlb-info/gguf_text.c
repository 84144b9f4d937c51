/* gguf_text.c - mlb-info's text report on a GGUF: the file summary, every
 * metadata key with its type and value (arrays by their first elements,
 * long strings by their length and first line unless --template), the
 * tensor table, and what gguf2mlb would make of the file. */
#include "info.h"
#include "plan_report.h"

#include <inttypes.h>
#include <string.h>

/* The longest prefix of s[0..n) of at most max bytes that does not cut a
 * UTF-8 sequence (so the quoted text stays readable). */
static size_t utf8_cut(const char *s, size_t n, size_t max)
{
    if (n <= max)
        return n;
    while (max > 0 && ((unsigned char)s[max] & 0xC0) == 0x80)
        max--;
    return max;
}

static size_t count_lines(const char *s, size_t n)
{
    size_t lines = 1;
    for (size_t i = 0; i + 1 < n; i++)
        lines += s[i] == '\n';
    return lines;
}

/* How a long string shows. */
enum { STR_FIRST_LINE, STR_FULL, STR_CUT };

/* A short string quoted whole.  A long one (or one with a line break):
 * STR_FIRST_LINE, its size and its first line cut to TEXT_STRING_MAX
 * bytes; STR_FULL (--template), its size, then the text itself from the
 * next line on; STR_CUT (an array's element), cut and its size. */
static void text_string(const char *s, size_t n, int how)
{
    const char *nl = memchr(s, '\n', n);
    size_t lines = count_lines(s, n);
    if (n <= TEXT_STRING_MAX && !nl) {
        json_strn(stdout, s, n);
    } else if (how == STR_FULL) {
        printf("%zu bytes, %zu line%s:\n", n, lines, lines == 1 ? "" : "s");
        fwrite(s, 1, n, stdout);
        if (n && s[n - 1] != '\n')
            putchar('\n');
    } else if (how == STR_CUT) {
        json_strn(stdout, s, utf8_cut(s, n, TEXT_STRING_MAX));
        printf("... (%zu bytes)", n);
    } else {
        size_t first = nl ? (size_t)(nl - s) : n;
        size_t shown = utf8_cut(s, first, TEXT_STRING_MAX);
        printf("%zu bytes, %zu line%s, first: ", n, lines, lines == 1 ? "" : "s");
        json_strn(stdout, s, shown);
        if (shown < n)
            printf(" ...");
    }
}

static void text_scalar(const ml_gguf_value *v, int how)
{
    uint64_t u;
    int64_t i;
    double f;
    int b;
    const char *s;
    size_t n;
    switch (v->type) {
    case ML_GGUF_F32: ml_gguf_value_f64(v, &f, NULL); printf("%.9g", f); break;
    case ML_GGUF_F64: ml_gguf_value_f64(v, &f, NULL); printf("%.17g", f); break;
    case ML_GGUF_BOOL:
        if (ml_gguf_value_bool(v, &b, NULL) == ML_OK)
            printf("%s", b ? "true" : "false");
        else /* the reader keeps such a byte; the converter refuses it */
            printf("(not a bool: byte %u)", v->data[0]);
        break;
    case ML_GGUF_STRING:
        ml_gguf_value_str(v, &s, &n, NULL);
        text_string(s, n, how);
        break;
    case ML_GGUF_I8:
    case ML_GGUF_I16:
    case ML_GGUF_I32:
    case ML_GGUF_I64: ml_gguf_value_i64(v, &i, NULL); printf("%" PRId64, i); break;
    case ML_GGUF_ARRAY:
        printf("[%" PRIu64 " %s]", v->count, ml_gguf_vtype_name(v->elem_type));
        break;
    default: ml_gguf_value_u64(v, &u, NULL); printf("%" PRIu64, u); break;
    }
}

/* "384 elements: "<unk>", "<s>", ..." */
static void text_array(const ml_gguf_value *v, const options *o)
{
    uint64_t shown = o->all_arrays || v->count <= TEXT_ARRAY_HEAD ? v->count : TEXT_ARRAY_HEAD;
    printf("%" PRIu64 " element%s%s", v->count, v->count == 1 ? "" : "s", v->count ? ": " : "");
    for (uint64_t k = 0; k < shown; k++) {
        ml_gguf_value e;
        if (ml_gguf_array_get(v, k, &e, NULL))
            break;
        printf(k ? ", " : "");
        text_scalar(&e, STR_CUT);
    }
    if (shown < v->count)
        printf(", ...");
}

static void text_type(const ml_gguf_value *v, char *buf, size_t n)
{
    if (v->type == ML_GGUF_ARRAY)
        snprintf(buf, n, "[%s]", ml_gguf_vtype_name(v->elem_type));
    else
        snprintf(buf, n, "%s", ml_gguf_vtype_name(v->type));
}

static void text_metadata(const ml_gguf *g, const options *o)
{
    printf("metadata (key, type, value)\n");
    for (size_t i = 0; i < ml_gguf_n_kv(g); i++) {
        const ml_gguf_kv *kv = ml_gguf_kv_at(g, i);
        char type[24];
        text_type(&kv->value, type, sizeof type);
        printf("  %-40s %-8s ", kv->key, type);
        if (kv->value.type == ML_GGUF_ARRAY)
            text_array(&kv->value, o);
        else
            text_scalar(&kv->value, o->template_full ? STR_FULL : STR_FIRST_LINE);
        printf("\n");
    }
}

/* "[576, 49152]": ggml's order, the fastest dimension first, as stored. */
static void gguf_shape(const ml_gguf_tensor *t, char *buf, size_t n)
{
    size_t w = 0;
    for (uint32_t d = 0; d < t->n_dims && w < n; d++)
        w += (size_t)snprintf(buf + w, n - w, "%s%" PRIu64, d ? ", " : "[", t->dims[d]);
    if (w < n)
        snprintf(buf + w, n - w, "]");
}

/* A split model's tensors say which part holds them (their offsets are
 * within it). */
static void text_tensors(const ml_gguf *g)
{
    int split = ml_gguf_n_parts(g) > 1;
    printf("tensors (data offset from the start of the %s; shape fastest dimension first)\n",
           split ? "part" : "file");
    printf("  %-32s %-7s %-22s %12s %12s%s\n", "name", "type", "shape", "offset", "bytes",
           split ? "  part" : "");
    for (size_t i = 0; i < ml_gguf_n_tensors(g); i++) {
        const ml_gguf_tensor *t = ml_gguf_tensor_at(g, i);
        char sh[96];
        gguf_shape(t, sh, sizeof sh);
        printf("  %-32s %-7s %-22s %12" PRIu64 " %12" PRIu64, t->name, t->type_name, sh,
               t->file_offset, t->nbytes);
        if (split)
            printf("  %5u", t->part + 1);
        printf("\n");
    }
}

static void text_weights(const ml_convert_plan *plan)
{
    const ml_mlb_header *h = ml_convert_plan_header(plan);
    printf("  %-22s %s, %s scales", "weights", wtype_name(h->wtype, 0),
           h->scale_f16 ? "f16" : "f32");
    if (h->q8_mask) {
        printf(", Q8_0 classes:");
        print_q8_classes(h->q8_mask);
    }
    if (h->wtype != ML_WTYPE_Q8_0)
        printf(", %s rule", ml_convert_plan_q4_rule(plan) == ML_Q4_ROUND ? "round" : "fit");
    if (h->wtype == ML_WTYPE_TABLE) { /* what the .mlb's own line will say */
        type_count c = {0};
        for (size_t i = 0; i < ml_convert_plan_n_items(plan); i++)
            type_count_add(&c, ml_convert_plan_item(plan, i)->dst.type);
        printf("\n  %-22s", "types");
        print_type_counts(&c, 0);
    }
    printf("\n");
}

static void text_tokenizer(const prospect *p)
{
    if (p->tok_status) {
        printf("  %-22s none: %s: %s\n", "tokenizer", ml_status_name(p->tok_status),
               p->tok_err.msg);
        return;
    }
    const ml_mlt_convert_info *t = &p->tok;
    printf("  %-22s \"%s\"%s%s%s, %u tokens, %u merges, %u chat template%s\n", "tokenizer",
           t->model, t->pre[0] ? " (pre \"" : "", t->pre, t->pre[0] ? "\")" : "",
           t->header.n_vocab, t->header.n_merges, t->n_templates, t->n_templates == 1 ? "" : "s");
}

static void text_conversion(const prospect *p)
{
    char buf[64];
    printf("conversion (what gguf2mlb would write, with its defaults)\n");
    if (!p->has_model) {
        printf("  %-22s no: no tensors, so no model (gguf2mlb --tokenizer-only "
               "converts a vocabulary-only GGUF)\n", "convertible");
    } else if (!p->plan) {
        printf("  %-22s no: %s: %s\n", "convertible", ml_status_name(p->plan_status),
               p->plan_err.msg);
    } else {
        printf("  %-22s yes\n", "convertible");
        printf("  %-22s %s: %s\n", "architecture", ml_convert_plan_arch(p->plan),
               ml_convert_plan_arch_desc(p->plan));
        text_weights(p->plan);
        human_size(ml_convert_plan_size(p->plan), buf, sizeof buf);
        printf("  %-22s %s\n", "output size", buf);
    }
    text_tokenizer(p);
    if (!p->plan)
        return;
    plan_print_items(p->plan);
    plan_print_notes(p->plan);
}

/* A split model: how many parts, then one line per part. */
static void text_parts(const ml_gguf *g)
{
    char buf[64];
    size_t n = ml_gguf_n_parts(g);
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += ml_gguf_part_at(g, i)->file_size;
    human_size(total, buf, sizeof buf);
    printf("  %-22s %zu parts (gguf-split), %s in all, read as one model\n", "split", n, buf);
    for (size_t i = 0; i < n; i++) {
        const ml_gguf_part *pt = ml_gguf_part_at(g, i);
        char name[32];
        snprintf(name, sizeof name, "part %zu", i + 1);
        printf("  %-22s %s: %" PRIu64 " bytes, %zu tensor%s, data offset %" PRIu64 "\n", name,
               pt->path, pt->file_size, pt->n_tensors, pt->n_tensors == 1 ? "" : "s",
               pt->data_offset);
    }
}

void gguf_print_text(const char *path, const ml_gguf *g, const prospect *p, const options *o)
{
    char buf[64];
    uint64_t data = 0;
    for (size_t i = 0; i < ml_gguf_n_tensors(g); i++)
        data += ml_gguf_tensor_at(g, i)->nbytes;
    printf("%s\n", cli_name(path));
    printf("  %-22s GGUF version %u\n", "format", ml_gguf_version(g));
    if (ml_gguf_n_parts(g) > 1) {
        text_parts(g);
    } else {
        human_size(ml_gguf_file_size(g), buf, sizeof buf);
        printf("  %-22s %s\n", "file size", buf);
    }
    printf("  %-22s %u\n", "alignment", ml_gguf_alignment(g));
    printf("  %-22s %" PRIu64 "\n", "data offset", ml_gguf_data_offset(g));
    printf("  %-22s %zu\n", "metadata keys", ml_gguf_n_kv(g));
    human_size(data, buf, sizeof buf);
    printf("  %-22s %zu, %s\n", "tensors", ml_gguf_n_tensors(g), buf);
    text_metadata(g, o);
    text_tensors(g);
    text_conversion(p);
}
