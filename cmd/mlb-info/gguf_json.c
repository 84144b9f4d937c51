/* gguf_json.c - mlb-info --json on a GGUF: one object with the file
 * summary, every metadata value exactly (integers as numbers, floats read
 * back to the same value, strings escaped, arrays whole up to
 * JSON_ARRAY_FULL elements or with --arrays), the tensors, and what
 * gguf2mlb would make of the file.  The keys are in mlb-info(1). */
#include "info.h"

#include <inttypes.h>
#include <math.h>

/* JSON has no NaN or infinities: those become strings, as json_f32 does. */
static void json_double(double v, int digits)
{
    if (isnan(v))
        printf("\"NaN\"");
    else if (isinf(v))
        printf(v > 0 ? "\"Infinity\"" : "\"-Infinity\"");
    else
        printf("%.*g", digits, v);
}

static void json_value(const ml_gguf_value *v, const options *o);

static void json_array_values(const ml_gguf_value *v, const options *o)
{
    uint64_t shown = o->all_arrays || v->count <= JSON_ARRAY_FULL ? v->count : JSON_ARRAY_HEAD;
    printf("[");
    for (uint64_t k = 0; k < shown; k++) {
        ml_gguf_value e;
        if (ml_gguf_array_get(v, k, &e, NULL))
            break; /* cannot happen: the reader walked every element */
        printf(k ? "," : "");
        json_value(&e, o);
    }
    printf("]");
    if (shown < v->count)
        printf(",\"truncated\":true");
}

/* A scalar as a JSON value; an array (as an element of another) as an
 * object with its element type, count and values. */
static void json_value(const ml_gguf_value *v, const options *o)
{
    uint64_t u;
    int64_t i;
    double f;
    int b;
    const char *s;
    size_t n;
    switch (v->type) {
    case ML_GGUF_F32: ml_gguf_value_f64(v, &f, NULL); json_double(f, 9); break;
    case ML_GGUF_F64: ml_gguf_value_f64(v, &f, NULL); json_double(f, 17); break;
    case ML_GGUF_BOOL:
        if (ml_gguf_value_bool(v, &b, NULL) == ML_OK)
            printf("%s", b ? "true" : "false");
        else /* a byte other than 0 and 1: its number, since it is no bool */
            printf("%u", v->data[0]);
        break;
    case ML_GGUF_STRING:
        ml_gguf_value_str(v, &s, &n, NULL);
        json_strn(stdout, s, n);
        break;
    case ML_GGUF_I8:
    case ML_GGUF_I16:
    case ML_GGUF_I32:
    case ML_GGUF_I64: ml_gguf_value_i64(v, &i, NULL); printf("%" PRId64, i); break;
    case ML_GGUF_ARRAY:
        printf("{\"type\":\"array\",\"elem_type\":\"%s\",\"count\":%" PRIu64 ",\"values\":",
               ml_gguf_vtype_name(v->elem_type), v->count);
        json_array_values(v, o);
        printf("}");
        break;
    default: ml_gguf_value_u64(v, &u, NULL); printf("%" PRIu64, u); break;
    }
}

static void json_metadata(const ml_gguf *g, const options *o)
{
    printf("{");
    for (size_t i = 0; i < ml_gguf_n_kv(g); i++) {
        const ml_gguf_kv *kv = ml_gguf_kv_at(g, i);
        const ml_gguf_value *v = &kv->value;
        printf(i ? "," : "");
        json_strn(stdout, kv->key, kv->key_len);
        printf(":{\"type\":\"%s\",\"offset\":%" PRIu64, ml_gguf_vtype_name(v->type), kv->offset);
        if (v->type == ML_GGUF_ARRAY) {
            printf(",\"elem_type\":\"%s\",\"count\":%" PRIu64 ",\"values\":",
                   ml_gguf_vtype_name(v->elem_type), v->count);
            json_array_values(v, o);
        } else {
            printf(",\"value\":");
            json_value(v, o);
        }
        printf("}");
    }
    printf("}");
}

static void json_tensors(const ml_gguf *g)
{
    printf("[");
    for (size_t i = 0; i < ml_gguf_n_tensors(g); i++) {
        const ml_gguf_tensor *t = ml_gguf_tensor_at(g, i);
        printf("%s{\"name\":", i ? "," : "");
        json_str(stdout, t->name);
        printf(",\"type\":\"%s\",\"shape\":[", t->type_name);
        for (uint32_t d = 0; d < t->n_dims; d++)
            printf("%s%" PRIu64, d ? "," : "", t->dims[d]);
        printf("],\"offset\":%" PRIu64 ",\"file_offset\":%" PRIu64 ",\"info_offset\":%" PRIu64
               ",\"bytes\":%" PRIu64 ",\"part\":%u}",
               t->offset, t->file_offset, t->info_offset, t->nbytes, t->part);
    }
    printf("]");
}

/* The files the model was read from: one, or a split model's parts. */
static void json_parts(const ml_gguf *g)
{
    printf("[");
    for (size_t i = 0; i < ml_gguf_n_parts(g); i++) {
        const ml_gguf_part *p = ml_gguf_part_at(g, i);
        printf("%s{\"file\":", i ? "," : "");
        json_str(stdout, cli_name(p->path[0] ? p->path : "-"));
        printf(",\"version\":%u,\"size\":%" PRIu64 ",\"alignment\":%u,\"data_offset\":%" PRIu64
               ",\"first_tensor\":%zu,\"tensor_count\":%zu}",
               p->version, p->file_size, p->alignment, p->data_offset, p->first_tensor,
               p->n_tensors);
    }
    printf("]");
}

static void json_error(ml_status s, const ml_error *e)
{
    printf("\"status\":\"%s\",\"exit_status\":%d,\"field\":", ml_status_name(s),
           cli_exit_status(s));
    json_str(stdout, e->field);
    printf(",\"offset\":%" PRId64 ",\"error\":", e->offset);
    json_str(stdout, e->msg);
}

static void json_tokenizer(const prospect *p)
{
    const ml_mlt_convert_info *t = &p->tok;
    printf("\"tokenizer\":{\"convertible\":%s,", p->tok_status ? "false" : "true");
    if (p->tok_status) {
        json_error(p->tok_status, &p->tok_err);
    } else {
        printf("\"model\":");
        json_str(stdout, t->model);
        printf(",\"pre\":");
        json_str(stdout, t->pre);
        printf(",\"tokens\":%u,\"merges\":%u,\"bos\":%d,\"eos\":%d,\"chat_templates\":%u",
               t->header.n_vocab, t->header.n_merges, (int)ml_mlt_id_i32(t->header.bos),
               (int)ml_mlt_id_i32(t->header.eos), t->n_templates);
    }
    printf("}");
}

static void json_items(const ml_convert_plan *plan)
{
    printf("\"arrays\":[");
    for (size_t i = 0; i < ml_convert_plan_n_items(plan); i++) {
        const ml_convert_item *it = ml_convert_plan_item(plan, i);
        char how[160];
        ml_convert_item_describe(plan, it, how, sizeof how);
        printf("%s{\"name\":", i ? "," : "");
        json_str(stdout, it->dst.name);
        printf(",\"type\":\"%s\",\"shape\":", ml_type_name(it->dst.type));
        if (it->dst.ndim == 1)
            printf("[%u]", it->dst.rows);
        else
            printf("[%u,%u]", it->dst.rows, it->dst.cols);
        printf(",\"source\":");
        if (it->src) {
            json_str(stdout, it->src->name);
            printf(",\"source_type\":\"%s\"", it->src->type_name);
        } else {
            printf("null,\"source_type\":null");
        }
        printf(",\"how\":");
        json_str(stdout, how);
        printf(",\"lossless\":%s}", it->lossless ? "true" : "false");
    }
    printf("]");
}

static void json_plan(const ml_convert_plan *plan)
{
    const ml_mlb_header *h = ml_convert_plan_header(plan);
    printf("\"architecture\":");
    json_str(stdout, ml_convert_plan_arch(plan));
    printf(",\"description\":");
    json_str(stdout, ml_convert_plan_arch_desc(plan));
    printf(",\"wtype\":\"%s\",\"scale_f16\":%s,\"q8_mask\":%u,\"q4_rule\":\"%s\",\"size\":%" PRIu64
           ",",
           wtype_name(h->wtype, 1), h->scale_f16 ? "true" : "false",
           h->q8_mask, ml_convert_plan_q4_rule(plan) == ML_Q4_ROUND ? "round" : "fit",
           ml_convert_plan_size(plan));
    json_items(plan);
    printf(",\"notes\":[");
    for (size_t i = 0; i < ml_convert_plan_n_notes(plan); i++) {
        printf(i ? "," : "");
        json_str(stdout, ml_convert_plan_note(plan, i));
    }
    printf("]");
}

static void json_conversion(const prospect *p)
{
    printf("{\"convertible\":%s,\"model\":%s,", p->plan ? "true" : "false",
           p->has_model ? "true" : "false");
    if (p->plan)
        json_plan(p->plan);
    else if (p->has_model)
        json_error(p->plan_status, &p->plan_err);
    else
        printf("\"reason\":\"no tensors, so no model (gguf2mlb --tokenizer-only converts a "
               "vocabulary-only GGUF)\"");
    printf(",");
    json_tokenizer(p);
    printf("}");
}

void gguf_print_json(const char *path, const ml_gguf *g, const prospect *p, const options *o)
{
    printf("{\"file\":");
    json_str(stdout, cli_name(path));
    printf(",\"format\":\"gguf\",\"version\":%u,\"size\":%" PRIu64 ",\"alignment\":%u"
           ",\"data_offset\":%" PRIu64 ",\"kv_count\":%zu,\"tensor_count\":%zu,\"metadata\":",
           ml_gguf_version(g), ml_gguf_file_size(g), ml_gguf_alignment(g),
           ml_gguf_data_offset(g), ml_gguf_n_kv(g), ml_gguf_n_tensors(g));
    json_metadata(g, o);
    printf(",\"parts\":");
    json_parts(g);
    printf(",\"tensors\":");
    json_tensors(g);
    printf(",\"conversion\":");
    json_conversion(p);
    printf("}\n");
}
