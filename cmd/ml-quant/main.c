/* ml-quant - requantize a model into an .mlb: from a GGUF (the best source:
 * its tensors dequantized once, as gguf2mlb does) or from an .mlb (its
 * matrices quantized a second time), with another weight type, q8_mask,
 * Q4_0 rule, scale encoding or importance matrix; --stats reports each
 * tensor's error against its source (see ml-quant(1)).  The library does
 * the work (mlcore/convert.h, mlcore/requant.h). */
#include "cli.h"
#include "model_input.h"
#include "output.h"
#include "quant_opts.h"
#include "signals.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { OPT_OUTPUT, OPT_STATS, OPT_THREADS, OPT_DRY_RUN, OPT_FORCE, OPT_QUIET, OPT_REQUANT };

static const cli_opt opts[] = {
    {OPT_OUTPUT, 'o', "output", "FILE", "the model to write (.mlb); - for stdout; required"},
    {QOPT_WTYPE, 0, "wtype", "TYPE",
     "q8_0, q4_0, source, or a mix: q4_k_m, q5_k_m, q6_k, iq4_xs (default: the source's)"},
    {QOPT_Q8_MASK, 0, "q8-mask", "CLASSES", "Q4_0 models: matrices kept as Q8_0"},
    {QOPT_IMATRIX, 0, "imatrix", "FILE", "importance matrix (.mli, or llama-imatrix's GGUF or .dat) for Q4_0 (fit rule) or a mix"},
    {OPT_REQUANT, 0, "allow-requantize", NULL,
     "a mix from matrices quantized other than Q8_0"},
    {QOPT_Q4_RULE, 0, "q4-rule", "RULE", "fit or round (default: fit; from a GGUF, as gguf2mlb)"},
    {QOPT_SCALE_F16, 0, "scale-f16", NULL, "store scales as f16 (default: as the source)"},
    {QOPT_SCALE_F32, 0, "scale-f32", NULL, "store scales as f32"},
    {OPT_STATS, 0, "stats", NULL, "print each tensor's RMS and largest error against the source"},
    {OPT_THREADS, 't', "threads", "N", "quantizer threads (default: the number of CPUs)"},
    {OPT_DRY_RUN, 'n', "dry-run", NULL, "print what each tensor would become; write nothing"},
    {OPT_FORCE, 'f', "force", NULL, "overwrite an existing output file"},
    {OPT_QUIET, 'q', "quiet", NULL, "no progress line and no warnings"},
};

static const cli cmd = {
    "ml-quant",
    "IN.gguf [PART.gguf...]|IN.mlb -o OUT.mlb [options]",
    "Requantize a model into an .mlb, from a GGUF (best: one quantization) or an .mlb.\n"
    "IN may be - for standard input.  A split GGUF is read whole from its first\n"
    "part (NAME-00001-of-0000N.gguf), or from all its parts named in order.",
    "From a GGUF the defaults are gguf2mlb's (the weight type of the source's size\n"
    "class, the automatic q8_mask, f16 scales, the round rule for gemma3).  From\n"
    "an .mlb they are the source's (type, mask, scales) and the fit rule; a\n"
    "matrix whose type and scale encoding stay is copied bit for bit, Q4_0 to\n"
    "Q8_0 and f16 to f32 scales are exact, anything else is quantized a second\n"
    "time (with a warning).  A mix (llama-quantize's Q4_K_M, Q5_K_M, Q6_K,\n"
    "IQ4_XS) gives each matrix llama.cpp's type for it and writes a type table\n"
    "(wtype 3); it needs matrices that are F32, F16, BF16 or Q8_0 (others with\n"
    "--allow-requantize), best from the GGUF.  CLASSES: tok_emb, wcls, wq, wk, wg,\n"
    "lqkv, wv, lz, wo, lout, w1, w3, w2, all, none.  --stats writes to standard\n"
    "output (standard error with -o -).\n",
    opts,
    sizeof opts / sizeof opts[0],
};

typedef struct options {
    const char *in, *out;
    const char *const *parts; /* in, then a split GGUF's other parts */
    size_t n_parts;
    quant_opts q;
    unsigned threads;
    int stats, dry_run, force, quiet, allow_requantize;
} options;

static void parse(int argc, char **argv, options *o)
{
    const char *arg;
    int id, first;
    memset(o, 0, sizeof *o);
    quant_opts_init(&o->q);
    o->q.mixes_ok = 1;
    o->threads = cli_n_cpus(QUANT_MAX_THREADS);
    while ((id = cli_next(argc, argv, &arg, &first)) != -1) {
        if (quant_opts_take(&o->q, id, arg))
            continue;
        switch (id) {
        case OPT_OUTPUT: o->out = arg; break;
        case OPT_STATS: o->stats = 1; break;
        case OPT_THREADS:
            o->threads = (unsigned)cli_u64("--threads", arg, 1, QUANT_MAX_THREADS);
            break;
        case OPT_DRY_RUN: o->dry_run = 1; break;
        case OPT_FORCE: o->force = 1; break;
        case OPT_QUIET: o->quiet = 1; break;
        case OPT_REQUANT: o->allow_requantize = 1; break;
        }
    }
    if (first >= argc)
        cli_usage_error("no input file given");
    o->in = argv[first];
    o->parts = (const char *const *)argv + first; /* a split GGUF's parts */
    o->n_parts = (size_t)(argc - first);
    if (!o->out && !o->dry_run)
        cli_usage_error("name the output with -o OUT.mlb (or - for standard output)");
    quant_opts_check(&o->q);
    if (o->allow_requantize && !o->q.mix)
        cli_usage_error("--allow-requantize is for the mixes (--wtype q4_k_m, ...)");
}

/* ===========================================================================
 * Progress, --stats and --dry-run
 * ========================================================================= */

typedef struct report {
    const options *o;
    FILE *out; /* --stats lines */
    ml_quant_error total;
    unsigned requantized;
    cli_progress_line progress;
} report;

static void stats_line(report *r, const char *name, const char *type, const char *method,
                       const ml_quant_error *e)
{
    if (!r->o->stats)
        return;
    if (!e) {
        fprintf(r->out, "%-24s %-5s %-28s %12s %10s %12s\n", name, type, method, "0", "0", "0");
        return;
    }
    ml_quant_error_merge(&r->total, e);
    r->requantized++;
    fprintf(r->out, "%-24s %-5s %-28s %12.6g %10.6f %12.6g\n", name, type, method,
            sqrt(e->sse / (double)(e->n ? e->n : 1)), e->ssq > 0 ? sqrt(e->sse / e->ssq) : 0.0,
            e->max_abs);
}

static void stats_header(report *r)
{
    if (r->o->stats)
        fprintf(r->out, "%-24s %-5s %-28s %12s %10s %12s\n", "tensor", "type", "method",
                "rms_error", "rel_rms", "max_error");
}

static void stats_total(report *r)
{
    if (!r->o->stats)
        return;
    const ml_quant_error *e = &r->total;
    fprintf(r->out, "%-24s %-5s %-28s %12.6g %10.6f %12.6g\n", "total", "",
            r->requantized ? "quantized matrices" : "nothing quantized",
            sqrt(e->sse / (double)(e->n ? e->n : 1)), e->ssq > 0 ? sqrt(e->sse / e->ssq) : 0.0,
            e->max_abs);
}

static void on_gguf_tensor(void *ctx, const ml_convert_item *it, const ml_quant_error *e)
{
    report *r = ctx;
    char how[96];
    snprintf(how, sizeof how, "%s", it->method == ML_CONV_QUANTIZE ? "quantize" : "copy/exact");
    stats_line(r, it->dst.name, ml_type_name(it->dst.type), how, e);
}

static const char *method_name(ml_requant_method m)
{
    return m == ML_REQUANT_COPY ? "copy" : m == ML_REQUANT_EXACT ? "exact" : "quantize again";
}

static void on_mlb_tensor(void *ctx, const ml_tensor *t, ml_requant_method m,
                          const ml_quant_error *e)
{
    stats_line(ctx, t->name, ml_type_name(t->type), method_name(m), e);
}

/* ===========================================================================
 * Writing
 * ========================================================================= */

/* Writes the output whole and commits it. */
static int write_out(const options *o, cli_write_fn write, void *src)
{
    cli_catch_signals();
    ml_outfile *f;
    int rc = cli_output_convert(o->out, o->in, write, src, NULL, &f);
    return rc || !f ? rc : cli_output_commit(o->out, f);
}

typedef struct gguf_job {
    const ml_convert_plan *plan;
} gguf_job;

static ml_status write_gguf(void *src, ml_write_fn fn, void *sink, ml_error *err)
{
    return ml_convert_write(((gguf_job *)src)->plan, fn, sink, NULL, err);
}

typedef struct mlb_job {
    const ml_mlb *mlb;
    const ml_requant_opts *ro;
} mlb_job;

static ml_status write_mlb(void *src, ml_write_fn fn, void *sink, ml_error *err)
{
    mlb_job *j = src;
    return ml_requant_write(j->mlb, j->ro, fn, sink, err);
}

static int from_gguf(const options *o, const ml_gguf *g, const ml_mli *mli, report *r)
{
    ml_convert_opts co;
    ml_convert_opts_init(&co);
    co.wtype = o->q.wtype;
    co.q8_mask = o->q.q8_mask;
    if (o->q.scale_f16 >= 0)
        co.scale_f16 = o->q.scale_f16;
    co.q4_rule = o->q.q4_rule;
    co.imatrix = mli;
    co.mix = (ml_quant_mix)o->q.mix;
    co.allow_requantize = o->allow_requantize;
    co.threads = o->threads;
    co.progress = cli_progress_or_stop, co.progress_ctx = &r->progress;
    if (o->stats)
        co.on_tensor = on_gguf_tensor, co.tensor_ctx = r;
    ml_convert_plan *p;
    ml_error e;
    ml_status s = ml_convert_plan_new(g, &co, &p, &e);
    if (s)
        return cli_fail(s == ML_E_MISMATCH && o->q.imatrix ? o->q.imatrix : o->in, s, &e);
    int rc = EXIT_OK;
    if (o->dry_run) {
        char how[160];
        for (size_t i = 0; i < ml_convert_plan_n_items(p); i++) {
            const ml_convert_item *it = ml_convert_plan_item(p, i);
            ml_convert_item_describe(p, it, how, sizeof how);
            printf("%-24s %-5s %s\n", it->dst.name, ml_type_name(it->dst.type), how);
        }
        for (size_t i = 0; i < ml_convert_plan_n_notes(p); i++)
            printf("note: %s\n", ml_convert_plan_note(p, i));
        if (o->q.mix)
            printf("size: %" PRIu64 " bytes (%s)\n", ml_convert_plan_size(p),
                   ml_quant_mix_name((ml_quant_mix)o->q.mix));
    } else {
        stats_header(r);
        gguf_job j = {p};
        rc = write_out(o, write_gguf, &j);
        if (!rc)
            stats_total(r);
    }
    ml_convert_plan_free(p);
    return rc;
}

/* Counts the matrices quantized a second time (and prints the plan). */
static unsigned plan_mlb(const ml_mlb *src, const ml_mlb_header *h, const uint8_t *types,
                         int print)
{
    ml_mlb_layout it;
    ml_tensor t;
    ml_error e;
    unsigned again = 0;
    uint8_t *fl = NULL;
    if (h->layer_flags && (fl = malloc(h->n_layers)))
        for (uint32_t l = 0; l < h->n_layers; l++)
            fl[l] = ml_mlb_layer_flag(src, l);
    if (h->layer_flags && !fl)
        return 0;
    ml_mlb_layout_begin_types(&it, h, fl, types);
    int sf = ml_mlb_get_header(src)->scale_f16 != 0;
    while (ml_mlb_layout_next(&it, &t, &e) == 1) {
        const ml_tensor *from = ml_mlb_get(src, t.role, t.layer);
        if (!from || t.type == ML_TYPE_U8)
            continue;
        ml_requant_method m = t.type == ML_TYPE_F32 ? ML_REQUANT_COPY
                                                    : ml_requant_method_of(from, &t, sf,
                                                                           h->scale_f16 != 0);
        again += m == ML_REQUANT_QUANTIZE && from->type != ML_TYPE_F32 &&
                 from->type != ML_TYPE_F16 && from->type != ML_TYPE_BF16; /* floats: once */
        if (print)
            printf("%-24s %-5s %s%s%s\n", t.name, ml_type_name(t.type), method_name(m),
                   m == ML_REQUANT_QUANTIZE ? " from " : "",
                   m == ML_REQUANT_QUANTIZE ? ml_type_name(from->type) : "");
    }
    free(fl);
    return again;
}

static int from_mlb(const options *o, const ml_mlb *src, const ml_mli *mli, report *r)
{
    ml_requant_opts ro;
    ml_requant_opts_init(&ro);
    ro.wtype = o->q.wtype;
    ro.q8_mask = o->q.q8_mask;
    ro.scale_f16 = o->q.scale_f16;
    if (o->q.q4_rule >= 0)
        ro.q4_rule = o->q.q4_rule;
    ro.imatrix = mli;
    ro.mix = (ml_quant_mix)o->q.mix;
    ro.allow_requantize = o->allow_requantize;
    ro.threads = o->threads;
    ro.progress = cli_progress_or_stop, ro.progress_ctx = &r->progress;
    if (o->stats)
        ro.on_tensor = on_mlb_tensor, ro.tensor_ctx = r;
    ml_mlb_header h;
    ml_error e;
    ml_status s = ml_requant_header(src, &ro, &h, &e);
    if (s)
        return cli_fail(s == ML_E_MISMATCH && o->q.imatrix ? o->q.imatrix : o->in, s, &e);
    uint8_t *types;
    if ((s = ml_requant_types(src, &ro, &types, &e)))
        return cli_fail(o->in, s, &e);
    unsigned again = plan_mlb(src, &h, types, o->dry_run);
    if (o->dry_run && o->q.mix) {
        uint8_t *fl = h.layer_flags ? malloc(h.n_layers) : NULL;
        uint64_t end = 0;
        for (uint32_t l = 0; fl && l < h.n_layers; l++)
            fl[l] = ml_mlb_layer_flag(src, l);
        if ((!h.layer_flags || fl) &&
            ml_mlb_layout_size_types(&h, fl, types, &end, NULL, NULL) == ML_OK)
            printf("size: %" PRIu64 " bytes (%s)\n",
                   (end + ML_MLB_ALIGN - 1) / ML_MLB_ALIGN * ML_MLB_ALIGN,
                   ml_quant_mix_name((ml_quant_mix)o->q.mix));
        free(fl);
    }
    free(types);
    if (again && !o->quiet)
        cli_warn(o->in,
                 "warning: %u matrices are quantized a second time from an .mlb; quantize from "
                 "the GGUF for the best quality",
                 again);
    if (o->dry_run)
        return EXIT_OK;
    stats_header(r);
    mlb_job j = {src, &ro};
    int rc = write_out(o, write_mlb, &j);
    if (!rc)
        stats_total(r);
    return rc;
}

int main(int argc, char **argv)
{
    options o;
    cli_init(&cmd);
    parse(argc, argv, &o);
    model_input in = {0};
    ml_mli *mli = NULL;
    report r = {&o, o.out && strcmp(o.out, "-") == 0 ? stderr : stdout, {0}, 0,
                {o.out, !o.quiet && cli_stderr_is_tty()}};
    int rc = o.dry_run ? 0 : cli_check_output(o.in, o.out, o.force);
    if (!rc)
        rc = model_input_open_parts(o.parts, o.n_parts, &in);
    if (!rc && in.gguf && !o.dry_run)
        rc = cli_check_output_parts(in.gguf, o.out);
    if (!rc && o.q.imatrix) {
        ml_error e;
        ml_status s = ml_mli_open(o.q.imatrix, &mli, &e);
        if (s)
            rc = cli_fail(o.q.imatrix, s, &e);
    }
    if (!rc)
        rc = in.gguf ? from_gguf(&o, in.gguf, mli, &r) : from_mlb(&o, in.mlb, mli, &r);
    ml_mli_close(mli);
    model_input_close(&in);
    return cli_finish(rc);
}
