/* fuzz_convert.c - the GGUF -> .mlb mapping on fuzzed GGUF files (metadata
 * and tensor infos): ml_convert_plan_new, the plan's accessors, and
 * ml_convert_write into memory; and the vocabulary -> .mlt conversion
 * (ml_mlt_from_gguf_ex) of the same file.  A hash of the input picks the
 * options (automatic, Q8_0 or Q4_0 weights, f16 or f32 scales, fit or
 * round), so the seeds' bytes stay a valid GGUF.
 *
 * Oracles besides the sanitizers: the error contract; the plan's header
 * passes ml_mlb_header_validate, its items follow the .mlb layout and name
 * tensors of the GGUF; what ml_convert_write writes has the plan's size
 * and passes both ml_mlb_open_memory and ml_mlb_verify_stream with the
 * plan's header; a converted vocabulary passes ml_mlt_open_memory.  Work
 * is bounded: models above MAX_OUT bytes or MAX_ELEMS weights (source and
 * destination elements) are planned but not written. */
#include "fuzz.h"

#define MAX_OUT (4u << 20)
#define MAX_ELEMS (1u << 20)

static void check_plan(const ml_convert_plan *p, const ml_gguf *g)
{
    const ml_mlb_header *h = ml_convert_plan_header(p);
    ml_error err;
    fuzz_err_init(&err);
    ml_status st = ml_mlb_header_validate(h, NULL, NULL, &err);
    fuzz_check_err(st, &err, 0);
    FUZZ_CHECK(st == ML_OK);
    const uint8_t *flags = ml_convert_plan_flags(p), *types = ml_convert_plan_types(p);
    FUZZ_CHECK((flags != NULL) == (h->layer_flags != 0));
    FUZZ_CHECK((types != NULL) == (h->wtype == ML_WTYPE_TABLE));
    if (flags)
        FUZZ_CHECK(ml_mlb_layer_flags_validate(h, flags, NULL) == ML_OK);
    FUZZ_CHECK(ml_convert_plan_arch(p) != NULL && ml_convert_plan_arch_desc(p) != NULL);
    int rule = ml_convert_plan_q4_rule(p);
    FUZZ_CHECK(rule == ML_Q4_FIT || rule == ML_Q4_ROUND);
    /* The items are the body in file order, as the layout iterator says. */
    ml_mlb_layout it;
    ml_tensor t;
    ml_mlb_layout_begin_types(&it, h, flags, types);
    size_t n = ml_convert_plan_n_items(p), i = 0;
    while (ml_mlb_layout_next(&it, &t, NULL) == 1) {
        if (t.type == ML_TYPE_U8)
            continue; /* layer flags and type table come from the plan's */
        FUZZ_CHECK(i < n);
        const ml_convert_item *item = ml_convert_plan_item(p, i++);
        FUZZ_CHECK(strcmp(item->dst.name, t.name) == 0 && item->dst.offset == t.offset &&
                   item->dst.nbytes == t.nbytes && item->dst.type == t.type);
        FUZZ_CHECK((item->src == NULL) == ((item->transform & ML_CONV_ZEROS) != 0));
        if (item->src)
            FUZZ_CHECK(ml_gguf_find_tensor(g, item->src->name) == item->src);
        char buf[256];
        ml_convert_item_describe(p, item, buf, sizeof buf);
        FUZZ_CHECK(memchr(buf, 0, sizeof buf) != NULL);
    }
    FUZZ_CHECK(i == n);
    for (size_t k = 0; k < ml_convert_plan_n_notes(p); k++)
        FUZZ_CHECK(ml_convert_plan_note(p, k) != NULL);
    uint64_t end = 0;
    FUZZ_CHECK(ml_mlb_layout_size_types(h, flags, types, &end, NULL, NULL) == ML_OK);
    FUZZ_CHECK(ml_convert_plan_size(p) >= end && ml_convert_plan_size(p) - end < ML_MLB_ALIGN);
}

static uint64_t plan_weights(const ml_convert_plan *p)
{
    uint64_t sum = 0;
    for (size_t i = 0; i < ml_convert_plan_n_items(p); i++) {
        const ml_convert_item *item = ml_convert_plan_item(p, i);
        sum += (uint64_t)item->dst.rows * item->dst.cols;
        if (item->src)
            sum += item->src->n_elements;
    }
    return sum;
}

/* The written model must load and verify, with the plan's header. */
static void check_output(const ml_convert_plan *p, const fuzz_buf *out)
{
    FUZZ_CHECK(out->n == ml_convert_plan_size(p));
    ml_mlb *m = NULL;
    ml_error err;
    fuzz_err_init(&err);
    ml_status st = ml_mlb_open_memory(out->p, out->n, &m, &err);
    if (st)
        fprintf(stderr, "converted model does not load: %s: %s\n", ml_status_name(st), err.msg);
    FUZZ_CHECK(st == ML_OK);
    FUZZ_CHECK(memcmp(ml_mlb_get_header(m), ml_convert_plan_header(p), sizeof(ml_mlb_header)) == 0);
    ml_mlb_close(m);
    fuzz_reader rd = {out->p, out->n, 0, 0};
    ml_verify_report rep;
    memset(&rep, 0, sizeof rep);
    fuzz_err_init(&err);
    st = ml_mlb_verify_stream(fuzz_mem_read, &rd, &rep, &err);
    if (st)
        fprintf(stderr, "converted model does not verify: %s: %s\n", ml_status_name(st), err.msg);
    FUZZ_CHECK(st == ML_OK);
}

static void convert(const ml_gguf *g, uint32_t h, size_t size)
{
    ml_convert_opts o;
    ml_convert_opts_init(&o);
    static const uint32_t wtypes[] = {0, ML_WTYPE_TABLE, ML_WTYPE_Q8_0, ML_WTYPE_Q4_0};
    o.wtype = wtypes[h & 3];
    o.scale_f16 = (h >> 2 & 3) != 0;
    o.q4_rule = (h >> 4 & 3) == 0 ? ML_Q4_ROUND : -1;
    ml_convert_plan *p = NULL;
    ml_error err;
    fuzz_err_init(&err);
    ml_status st = ml_convert_plan_new(g, &o, &p, &err);
    fuzz_check_err(st, &err, size);
    FUZZ_CHECK((st == ML_OK) == (p != NULL));
    if (getenv("FUZZ_VERBOSE"))
        fprintf(stderr, "plan (wtype %u): %s%s%s\n", o.wtype, ml_status_name(st), st ? ": " : "",
                st ? err.msg : "");
    if (!p)
        return;
    check_plan(p, g);
    if (ml_convert_plan_size(p) <= MAX_OUT && plan_weights(p) <= MAX_ELEMS) {
        fuzz_buf out = {0};
        ml_convert_stats stats;
        fuzz_err_init(&err);
        st = ml_convert_write(p, fuzz_buf_sink, &out, &stats, &err);
        fuzz_check_err(st, &err, size);
        /* Refusals of values (NaN, a scale beyond f16) are allowed. */
        if (getenv("FUZZ_VERBOSE"))
            fprintf(stderr, "write: %s%s%s\n", ml_status_name(st), st ? ": " : "",
                    st ? err.msg : "");
        FUZZ_CHECK(st == ML_OK || st == ML_E_FORMAT || st == ML_E_UNSUPPORTED);
        if (st == ML_OK) {
            FUZZ_CHECK(stats.bytes == out.n);
            check_output(p, &out);
        }
        free(out.p);
    }
    ml_convert_plan_free(p);
}

static void convert_vocab(const ml_gguf *g, size_t size)
{
    ml_mlt_convert_info info;
    fuzz_buf out = {0};
    ml_error err;
    fuzz_err_init(&err);
    ml_status st = ml_mlt_from_gguf_ex(g, fuzz_buf_sink, &out, &info, &err);
    fuzz_check_err(st, &err, size);
    if (getenv("FUZZ_VERBOSE"))
        fprintf(stderr, "vocabulary: %s%s%s\n", ml_status_name(st), st ? ": " : "",
                st ? err.msg : "");
    if (st == ML_OK) {
        ml_mlt *t = NULL;
        fuzz_err_init(&err);
        st = ml_mlt_open_memory(out.p, out.n, &t, &err);
        if (st)
            fprintf(stderr, "converted vocabulary does not open: %s: %s\n", ml_status_name(st),
                    err.msg);
        FUZZ_CHECK(st == ML_OK);
        FUZZ_CHECK(memcmp(ml_mlt_get_header(t), &info.header, sizeof info.header) == 0);
        ml_mlt_close(t);
    } else {
        FUZZ_CHECK(out.n == 0); /* nothing written unless it all succeeds */
    }
    free(out.p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ml_gguf *g = NULL;
    ml_error err;
    fuzz_err_init(&err);
    ml_status st = ml_gguf_open_memory(data, size, &g, &err);
    fuzz_check_err(st, &err, size);
    if (!g)
        return 0;
    convert(g, fuzz_hash(data, size), size);
    convert_vocab(g, size);
    ml_gguf_close(g);
    return 0;
}
