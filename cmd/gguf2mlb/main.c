/* gguf2mlb - convert a GGUF model (llama.cpp's format) into an .mlb model
 * and an .mlt tokenizer (see gguf2mlb(1)).  The library plans and writes
 * (mlcore/convert.h) and cmd/common/output.c writes the files (temporary
 * name, rename at the end, removed on failure or on SIGINT/SIGTERM); this
 * file handles options, when each output is written or given up, and
 * --dry-run's report. */
#include "cli.h"
#include "output.h"
#include "plan_report.h"
#include "quant_opts.h"
#include "signals.h"

#include <mlcore/convert.h>
#include <mlcore/convert_tok.h>

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

enum {
    OPT_OUTPUT,
    OPT_TOKENIZER,
    OPT_NO_TOKENIZER,
    OPT_THREADS,
    OPT_DRY_RUN,
    OPT_FORCE,
    OPT_QUIET,
    OPT_TOKENIZER_ONLY
};

static const cli_opt opts[] = {
    {OPT_OUTPUT, 'o', "output", "FILE", "the model (default: beside IN, .mlb); - for stdout"},
    {OPT_TOKENIZER, 't', "tokenizer", "FILE", "the tokenizer (default: beside the model, .mlt)"},
    {OPT_NO_TOKENIZER, 0, "no-tokenizer", NULL, "write no tokenizer"},
    {OPT_TOKENIZER_ONLY, 0, "tokenizer-only", NULL,
     "write only the tokenizer (also from a vocabulary-only GGUF)"},
    {QOPT_WTYPE, 0, "wtype", "TYPE",
     "q8_0, q4_0, or source: each matrix keeps its GGUF type (default: source when the "
     "matrices mix other block types, else the source's size class)"},
    {QOPT_Q8_MASK, 0, "q8-mask", "CLASSES",
     "Q4_0 models: matrices kept as Q8_0 (default: see below)"},
    {QOPT_SCALE_F16, 0, "scale-f16", NULL, "store scales as f16 (default)"},
    {QOPT_SCALE_F32, 0, "scale-f32", NULL, "store scales as f32"},
    {QOPT_Q4_RULE, 0, "q4-rule", "RULE", "fit or round (default: round for gemma3, else fit)"},
    {QOPT_IMATRIX, 0, "imatrix", "FILE", "importance matrix (.mli, or llama-imatrix's GGUF or .dat) for the Q4_0 fit rule"},
    {OPT_THREADS, 0, "threads", "N", "quantizer threads (default: the number of CPUs)"},
    {OPT_DRY_RUN, 'n', "dry-run", NULL, "print metadata, architecture and plan; write nothing"},
    {OPT_FORCE, 'f', "force", NULL, "overwrite existing output files"},
    {OPT_QUIET, 'q', "quiet", NULL, "no progress line and no warnings"},
};

static const cli cmd = {
    "gguf2mlb",
    "[options] IN.gguf [PART.gguf...]",
    "Convert a GGUF model (llama.cpp) into an .mlb model and an .mlt tokenizer.\n"
    "IN may be - for standard input (then -o is needed).  A split GGUF is read\n"
    "whole from its first part (NAME-00001-of-0000N.gguf), or from all its parts\n"
    "named in order.",
    "Defaults: the model is written beside the input (m.gguf -> m.mlb), the\n"
    "tokenizer beside the model (m.mlt; none with -o - unless -t is given),\n"
    "with f16 scales.  The weight type keeps the source's size class: Q4_0 when\n"
    "most weights are stored in 5 bits or fewer (Q4_0, Q4_1, Q4_K, Q3_K, Q2_K,\n"
    "IQ4_*), else Q8_0; a Q4_0 model then keeps as Q8_0 every class (tok_emb,\n"
    "wcls, wq/wk, wv, wo, w1/w3, w2) whose source is mostly 8-bit or wider.\n"
    "Q8_0 and Q4_0 matrices written as the same type are copied bit for bit.\n"
    "CLASSES is a comma-separated list of tok_emb, wcls, wq, wk, wg, lqkv, wv,\n"
    "lz, wo, lout, w1, w3, w2, all, none.\n",
    opts,
    sizeof opts / sizeof opts[0],
};

typedef struct options {
    const char *in, *out, *tok;
    const char *const *parts; /* in, then a split GGUF's other parts */
    size_t n_parts;
    int tok_explicit, no_tok, tok_only, dry_run, force, quiet;
    quant_opts q;
    char *owned[2]; /* default names made here */
    ml_convert_opts conv;
} options;

/* ===========================================================================
 * Options
 * ========================================================================= */

/* The length of gguf-split's "-00001-of-00003.gguf" at the end of name
 * (five digits or more each), else 0. */
static size_t split_suffix(const char *name)
{
    size_t n = strlen(name), i = n;
    if (n < 5 || strcasecmp(name + n - 5, ".gguf") != 0)
        return 0;
    i -= 5;
    for (int field = 0; field < 2; field++) {
        size_t digits = 0;
        while (i > 0 && name[i - 1] >= '0' && name[i - 1] <= '9')
            i--, digits++;
        const char *sep = field == 0 ? "-of-" : "-";
        size_t l = strlen(sep);
        if (digits < 5 || i < l || strncmp(name + i - l, sep, l) != 0)
            return 0;
        i -= l;
    }
    return i > 0 ? n - i : 0;
}

/* Beside the input with another extension; a split model's parts name it
 * by their common prefix (m-00001-of-00003.gguf -> m.mlb). */
static char *default_name(const char *in, const char *ext)
{
    size_t n = strlen(in);
    if (split_suffix(in))
        n -= split_suffix(in);
    else if (n > 5 && strcasecmp(in + n - 5, ".gguf") == 0)
        n -= 5;
    else if (n > 4 && strcasecmp(in + n - 4, ".mlb") == 0)
        n -= 4;
    char *s = malloc(n + strlen(ext) + 1);
    if (!s) {
        fprintf(stderr, "gguf2mlb: out of memory\n");
        exit(EXIT_IO);
    }
    memcpy(s, in, n);
    strcpy(s + n, ext);
    return s;
}

/* --tokenizer-only: no model, the tokenizer from -t (or -o, the output
 * by another name) or beside the input. */
static void tokenizer_only_names(options *o)
{
    if (o->no_tok || o->dry_run)
        cli_usage_error("--tokenizer-only goes with neither --no-tokenizer nor --dry-run");
    if (o->out && o->tok)
        cli_usage_error("--tokenizer-only writes one file: -o or -t, not both");
    if (o->out)
        o->tok = o->out, o->out = NULL;
    if (!o->tok && strcmp(o->in, "-") == 0)
        cli_usage_error("reading standard input: name the tokenizer with -t");
    if (!o->tok)
        o->tok = o->owned[1] = default_name(o->in, ".mlt");
    o->tok_explicit = 1; /* the tokenizer is the whole job: its failures are fatal */
}

static void parse(int argc, char **argv, options *o)
{
    const char *arg;
    int id, first;
    memset(o, 0, sizeof *o);
    quant_opts_init(&o->q);
    ml_convert_opts_init(&o->conv);
    o->conv.threads = cli_n_cpus(QUANT_MAX_THREADS);
    while ((id = cli_next(argc, argv, &arg, &first)) != -1) {
        if (quant_opts_take(&o->q, id, arg))
            continue;
        switch (id) {
        case OPT_OUTPUT: o->out = arg; break;
        case OPT_TOKENIZER: o->tok = arg, o->tok_explicit = 1; break;
        case OPT_NO_TOKENIZER: o->no_tok = 1; break;
        case OPT_TOKENIZER_ONLY: o->tok_only = 1; break;
        case OPT_THREADS:
            o->conv.threads = (unsigned)cli_u64("--threads", arg, 1, QUANT_MAX_THREADS);
            break;
        case OPT_DRY_RUN: o->dry_run = 1; break;
        case OPT_FORCE: o->force = 1; break;
        case OPT_QUIET: o->quiet = 1; break;
        }
    }
    o->conv.wtype = o->q.wtype;
    o->conv.q8_mask = o->q.q8_mask;
    o->conv.q4_rule = o->q.q4_rule;
    if (o->q.scale_f16 >= 0)
        o->conv.scale_f16 = o->q.scale_f16;
    if (first >= argc)
        cli_usage_error("no input file given");
    o->in = argv[first];
    o->parts = (const char *const *)argv + first; /* a split GGUF's parts */
    o->n_parts = (size_t)(argc - first);
    quant_opts_check(&o->q);
    if (o->no_tok && o->tok)
        cli_usage_error("--tokenizer and --no-tokenizer contradict each other");
    if (o->tok_only) {
        tokenizer_only_names(o);
        return;
    }
    if (!o->out) {
        if (strcmp(o->in, "-") == 0 && !o->dry_run)
            cli_usage_error("reading standard input: name the output with -o");
        if (strcmp(o->in, "-") != 0)
            o->out = o->owned[0] = default_name(o->in, ".mlb");
    }
    if (!o->tok && !o->no_tok && o->out && strcmp(o->out, "-") != 0)
        o->tok = o->owned[1] = default_name(o->out, ".mlt");
    if (o->out && o->tok && strcmp(o->out, o->tok) == 0)
        cli_usage_error("the model and the tokenizer cannot both be '%s'", o->out);
    if (o->out && o->tok && strcmp(o->out, "-") == 0 && strcmp(o->tok, "-") == 0)
        cli_usage_error("the model and the tokenizer cannot both go to standard output");
}

/* ===========================================================================
 * --dry-run report
 * ========================================================================= */

static void print_scalar(const ml_gguf_value *v)
{
    uint64_t u;
    int64_t i;
    double f;
    int b;
    switch (v->type) {
    case ML_GGUF_F32:
    case ML_GGUF_F64:
        ml_gguf_value_f64(v, &f, NULL);
        printf("%.9g", f);
        break;
    case ML_GGUF_BOOL:
        if (ml_gguf_value_bool(v, &b, NULL) == ML_OK)
            printf("%s", b ? "true" : "false");
        else
            printf("(bool %u)", v->data[0]);
        break;
    case ML_GGUF_STRING: {
        const char *s;
        size_t n;
        ml_gguf_value_str(v, &s, &n, NULL);
        json_strn(stdout, s, n > 72 ? 72 : n);
        if (n > 72)
            printf("... (%zu bytes)", n);
        break;
    }
    case ML_GGUF_I8:
    case ML_GGUF_I16:
    case ML_GGUF_I32:
    case ML_GGUF_I64:
        ml_gguf_value_i64(v, &i, NULL);
        printf("%" PRId64, i);
        break;
    default:
        ml_gguf_value_u64(v, &u, NULL);
        printf("%" PRIu64, u);
        break;
    }
}

static void print_value(const ml_gguf_value *v)
{
    if (v->type != ML_GGUF_ARRAY) {
        print_scalar(v);
        return;
    }
    printf("[%" PRIu64 " %s]", v->count, ml_gguf_vtype_name(v->elem_type));
    if (v->elem_type == ML_GGUF_ARRAY || v->elem_type == ML_GGUF_STRING || v->count > 16)
        return;
    printf(" ");
    for (uint64_t k = 0; k < v->count; k++) {
        ml_gguf_value e;
        if (ml_gguf_array_get(v, k, &e, NULL))
            break;
        printf(k ? ", " : "");
        print_scalar(&e);
    }
}

static void print_metadata(const ml_gguf *g)
{
    printf("metadata\n");
    for (size_t i = 0; i < ml_gguf_n_kv(g); i++) {
        const ml_gguf_kv *kv = ml_gguf_kv_at(g, i);
        printf("  %-44s %-7s ", kv->key, ml_gguf_vtype_name(kv->value.type));
        print_value(&kv->value);
        printf("\n");
    }
}

/* The GGUF line: a split model's counts are the whole model's, its size
 * that of all its parts. */
static void dry_run_source(const options *o, const ml_gguf *g)
{
    size_t parts = ml_gguf_n_parts(g);
    uint64_t size = 0;
    for (size_t i = 0; i < parts; i++)
        size += ml_gguf_part_at(g, i)->file_size;
    printf("%s\n  %-22s version %u, %zu tensors, %zu keys, alignment %u, %" PRIu64 " bytes",
           cli_name(o->in), "GGUF", ml_gguf_version(g), ml_gguf_n_tensors(g), ml_gguf_n_kv(g),
           ml_gguf_alignment(g), size);
    if (parts > 1)
        printf(" in %zu parts", parts);
    printf("\n");
}

static void dry_run(const options *o, const ml_gguf *g, const ml_convert_plan *p)
{
    dry_run_source(o, g);
    print_metadata(g);
    printf("architecture\n  %-22s %s\n", ml_convert_plan_arch(p), ml_convert_plan_arch_desc(p));
    plan_print_header(p);
    plan_print_items(p);
    plan_print_notes(p);
    printf("output\n  %-22s %" PRIu64 " bytes\n", o->out ? cli_name(o->out) : "(model)",
           ml_convert_plan_size(p));
    if (o->tok)
        plan_print_tokenizer(o->tok, g);
}

/* ===========================================================================
 * Output files
 * ========================================================================= */

/* Writes the tokenizer into an uncommitted output file.  *tf is NULL when
 * none is written (no -t and the GGUF's vocabulary cannot be converted). */
static int write_tokenizer(const options *o, const ml_gguf *g, uint32_t model_vocab,
                           ml_outfile **tf)
{
    ml_error e;
    ml_mlt_convert_info info;
    int rc = cli_output_open(o->tok, tf);
    if (rc)
        return rc;
    ml_status s = ml_mlt_from_gguf_ex(g, ml_outfile_sink, *tf, &info, &e);
    if (!s && info.header.n_vocab > model_vocab) /* mlt(5): at most the model's vocab */
        s = cli_set_error(&e, ML_E_SHAPE, "tokenizer.ggml.tokens: %u tokens, but the model has %u "
                          "embeddings", info.header.n_vocab, model_vocab);
    if (!s)
        return 0;
    ml_outfile_abort(*tf);
    *tf = NULL;
    if (s == ML_E_IO && e.sys_errno)
        return cli_fail(cli_out_name(o->tok), s, &e);
    if (o->tok_explicit || s == ML_E_IO || s == ML_E_NOMEM)
        return cli_fail(o->in, s, &e);
    if (!o->quiet)
        cli_warn(o->in, "no tokenizer written: %s: %s", ml_status_name(s), e.msg);
    return 0;
}

static void report_clamps(const options *o, const ml_convert_stats *st)
{
    if (st->clamped_q8 && !o->quiet)
        cli_warn(o->in,
                 "warning: %" PRIu64 " Q8_0 quants of -128 (the first in %s) were written as "
                 "-127, since .mlb forbids -128",
                 st->clamped_q8, st->first_clamped);
}

typedef struct model_job {
    const ml_convert_plan *plan;
    ml_convert_stats stats;
} model_job;

static ml_status write_model(void *src, ml_write_fn fn, void *sink, ml_error *err)
{
    model_job *j = src;
    return ml_convert_write(j->plan, fn, sink, &j->stats, err);
}

/* The default keeps the source's size class: when that means matrices of
 * another 4-bit type (Q4_1, K-quants) requantized to Q4_0, which costs
 * quality, one line says what was traded and which option keeps it. */
static void note_requantized(const options *o, const ml_gguf *g, const ml_convert_plan *p)
{
    size_t n = 0;
    const char *from = NULL;
    for (size_t i = 0; i < ml_convert_plan_n_items(p); i++) {
        const ml_convert_item *it = ml_convert_plan_item(p, i);
        if (it->method == ML_CONV_QUANTIZE && it->dst.type == ML_TYPE_Q4_0 && it->src) {
            n++;
            from = from ? from : ml_gguf_type_name(it->src->type);
        }
    }
    if (!n || o->quiet || o->q.wtype)
        return;
    ml_convert_opts q8 = o->conv;
    q8.wtype = ML_WTYPE_Q8_0;
    q8.q8_mask = 0;
    q8.imatrix = NULL;
    ml_convert_plan *p8 = NULL;
    if (ml_convert_plan_new(g, &q8, &p8, NULL) != ML_OK)
        return;
    cli_warn(o->in, "note: %zu matrices (the first from %s) are requantized to Q4_0, which "
                    "loses precision; --wtype q8_0 keeps the source's quality (%.1f MB, not %.1f MB)",
             n, from, ml_convert_plan_size(p8) / 1e6, ml_convert_plan_size(p) / 1e6);
    ml_convert_plan_free(p8);
}

/* The tokenizer first (a bad vocabulary may refuse the conversion), then
 * the model; both are committed once the model is whole. */
static int convert(const options *o, const ml_gguf *g, const ml_convert_plan *p)
{
    int rc;
    if ((rc = cli_check_output(o->in, o->out, o->force)) ||
        (rc = cli_check_output_parts(g, o->out)) ||
        (o->tok && (rc = cli_check_output(o->in, o->tok, o->force))) ||
        (o->tok && (rc = cli_check_output_parts(g, o->tok))))
        return rc;
    cli_catch_signals();
    ml_outfile *mf, *tf = NULL;
    if (o->tok && (rc = write_tokenizer(o, g, ml_convert_plan_header(p)->vocab, &tf)))
        return rc;
    model_job j = {p, {0}};
    if ((rc = cli_output_convert(o->out, o->in, write_model, &j, tf, &mf)) || !mf)
        return rc;
    report_clamps(o, &j.stats);
    if ((rc = cli_output_commit(o->out, mf))) {
        ml_outfile_abort(tf);
        return rc;
    }
    return tf ? cli_output_commit(o->tok, tf) : EXIT_OK;
}

/* The tokenizer alone, from a model's or a vocabulary-only GGUF. */
static int tokenizer_only(const options *o, const ml_gguf *g)
{
    int rc = cli_check_output(o->in, o->tok, o->force);
    if (!rc)
        rc = cli_check_output_parts(g, o->tok);
    if (rc)
        return rc;
    cli_catch_signals();
    ml_outfile *tf = NULL;
    if ((rc = write_tokenizer(o, g, UINT32_MAX, &tf)))
        return rc;
    return cli_output_commit(o->tok, tf);
}

int main(int argc, char **argv)
{
    options o;
    cli_init(&cmd);
    parse(argc, argv, &o);

    ml_gguf *g = NULL;
    ml_mli *mli = NULL;
    ml_convert_plan *p = NULL;
    ml_error e;
    ml_status s;
    int rc = EXIT_OK;
    cli_progress_line pr = {o.out ? o.out : o.in, !o.quiet};
    o.conv.progress = cli_progress_or_stop; /* stops at SIGINT/SIGTERM/SIGHUP */
    o.conv.progress_ctx = &pr;
    if ((s = ml_gguf_open_parts(o.parts, o.n_parts, &g, &e))) {
        rc = cli_fail(o.in, s, &e);
        goto done;
    }
    if (o.tok_only) {
        rc = tokenizer_only(&o, g);
        goto done;
    }
    if (o.q.imatrix) {
        if ((s = ml_mli_open(o.q.imatrix, &mli, &e))) {
            rc = cli_fail(o.q.imatrix, s, &e);
            goto done;
        }
        o.conv.imatrix = mli;
    }
    if ((s = ml_convert_plan_new(g, &o.conv, &p, &e))) {
        rc = cli_fail(s == ML_E_MISMATCH && o.q.imatrix ? o.q.imatrix : o.in, s, &e);
        goto done;
    }
    note_requantized(&o, g, p);
    if (o.dry_run)
        dry_run(&o, g, p);
    else
        rc = convert(&o, g, p);
done:
    ml_convert_plan_free(p);
    ml_mli_close(mli);
    ml_gguf_close(g);
    free(o.owned[0]);
    free(o.owned[1]);
    return cli_finish(rc);
}
