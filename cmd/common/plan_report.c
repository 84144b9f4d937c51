/* plan_report.c - see plan_report.h: a conversion plan in words. */
#include "plan_report.h"

#include "cli.h"

#include <mlcore/convert_tok.h>

#include <inttypes.h>
#include <stdio.h>

void plan_print_header(const ml_convert_plan *p)
{
    const ml_mlb_header *h = ml_convert_plan_header(p);
    const uint8_t *flags = ml_convert_plan_flags(p);
    size_t nf;
    const ml_mlb_field *f = ml_mlb_fields(&nf);
    printf("header\n");
    for (size_t i = 0; i < nf; i++) {
        char v[32];
        if (f[i].type == ML_FIELD_CHARS)
            snprintf(v, sizeof v, "%.4s", h->magic);
        else if (f[i].type == ML_FIELD_U32)
            snprintf(v, sizeof v, "%" PRIu32, ml_mlb_field_u32(h, &f[i]));
        else
            snprintf(v, sizeof v, "%.9g", (double)ml_mlb_field_f32(h, &f[i]));
        printf("  %-22s %-15s %s\n", f[i].name, v, f[i].meaning);
    }
    if (!flags)
        return;
    printf("layer flags\n ");
    for (uint32_t l = 0; l < h->n_layers; l++)
        printf(" %u", flags[l]);
    printf("\n  (1 sliding window, 2 local RoPE base, 4 no RoPE, 8 linear attention)\n");
}

void plan_shape(char *buf, size_t n, const ml_tensor *t)
{
    if (t->ndim == 1)
        snprintf(buf, n, "[%u]", t->rows);
    else
        snprintf(buf, n, "[%u, %u]", t->rows, t->cols);
}

void plan_print_items(const ml_convert_plan *p)
{
    printf("plan (GGUF tensor -> .mlb array, source -> target type, how)\n");
    size_t n = ml_convert_plan_n_items(p), lossless = 0;
    for (size_t i = 0; i < n; i++) {
        const ml_convert_item *it = ml_convert_plan_item(p, i);
        char how[160], sh[32];
        ml_convert_item_describe(p, it, how, sizeof how);
        plan_shape(sh, sizeof sh, &it->dst);
        printf("  %-32s %-18s %-6s %-5s %-14s %s%s\n", it->src ? it->src->name : "-", it->dst.name,
               it->src ? it->src->type_name : "-", ml_type_name(it->dst.type), sh, how,
               it->lossless ? " [lossless]" : "");
        lossless += it->lossless != 0;
    }
    printf("  %zu arrays, %zu lossless\n", n, lossless);
}

void plan_print_tokenizer(const char *name, const ml_gguf *g)
{
    ml_mlt_convert_info info;
    ml_error e;
    ml_status s = ml_mlt_from_gguf_ex(g, NULL, NULL, &info, &e);
    if (s) {
        printf("  %-22s no tokenizer: %s: %s\n", cli_name(name), ml_status_name(s), e.msg);
        return;
    }
    char flags[128];
    ml_mlt_flag_names(info.header.flags, flags, sizeof flags);
    printf("  %-22s tokenizer: %s \"%s\"%s%s%s, kind %u, %u tokens, %u merges, bos %d, eos %d, "
           "flags %u%s%s\n",
           cli_name(name), "tokenizer.ggml.model", info.model, info.pre[0] ? " (pre \"" : "",
           info.pre, info.pre[0] ? "\")" : "", info.header.kind, info.header.n_vocab,
           info.header.n_merges, ml_mlt_id_i32(info.header.bos), ml_mlt_id_i32(info.header.eos),
           info.header.flags, flags[0] ? " " : "", flags);
}

void plan_print_notes(const ml_convert_plan *p)
{
    if (!ml_convert_plan_n_notes(p))
        return;
    printf("notes\n");
    for (size_t i = 0; i < ml_convert_plan_n_notes(p); i++)
        printf("  %s\n", ml_convert_plan_note(p, i));
}
