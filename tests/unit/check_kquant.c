/* check_kquant.c - the ggml block quantizers (ml_quantize_row_blocks:
 * Q4_K, Q5_K, Q6_K, IQ4_XS, Q5_0, Q5_1, IQ4_NL) and the mix rule
 * (ml_quant_mix_type).  The blocks are read back with
 * ml_gguf_dequantize_raw (ggml's formulas, bit-exact with gguf-py); their
 * error is compared with llama.cpp's own quantizers on the rows of
 * tests/fixtures/quant (tools/kquant-reference.py): ours must be no worse,
 * per type, distribution and weighting.  Also hostile rows (NaN, inf, zero,
 * huge, tiny and vanishing), refused arguments, determinism, and whole matrices over
 * threads (ml_quantize_matrix_blocks, ml_quant_error_add_blocks).  The
 * search's builds for AVX2 and AVX-512 write the baseline's bytes.
 * ML_KQUANT_REPORT=1 prints the ratios. */
#include "suites.h"
#include "testutil.h"

#include "kernels/kernels.h"
#include "quant/quant_impl.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define REF_BIN "tests/fixtures/quant/kquant-ref.bin"
#define REF_TXT "tests/fixtures/quant/kquant-ref.txt"

static const ml_type all_types[] = {ML_TYPE_Q4_K,   ML_TYPE_Q5_K, ML_TYPE_Q6_K,
                                    ML_TYPE_IQ4_XS, ML_TYPE_Q5_0, ML_TYPE_Q5_1,
                                    ML_TYPE_IQ4_NL};
#define N_TYPES (sizeof all_types / sizeof all_types[0])

/* Quantizes a row, dequantizes it with ggml's formulas into y. */
static void roundtrip(ml_type t, const float *x, size_t n, const float *imp, float *y)
{
    uint32_t elems, bytes, ggml;
    ck_assert(ml_type_block(t, &elems, &bytes, &ggml));
    uint8_t *q = malloc(n / elems * bytes);
    ml_error err;
    ck_assert(q);
    ck_assert_int_eq(ml_quantize_row_blocks(t, x, n, imp, q, &err), ML_OK);
    ck_assert_int_eq(ml_gguf_dequantize_raw(ggml, q, n, y, &err), ML_OK);
    free(q);
}

/* sum w (x - y)^2 in double, w = imp or 1. */
static double werr(const float *x, const float *y, const float *imp, size_t n)
{
    double e = 0.0;
    for (size_t j = 0; j < n; j++) {
        double d = (double)x[j] - (double)y[j];
        e += (imp ? (double)imp[j] : 1.0) * d * d;
    }
    return e;
}

static float gauss(tu_rng *r)
{
    double u1 = ((double)(tu_next(r) >> 11) + 0.5) / 9007199254740992.0;
    double u2 = (double)(tu_next(r) >> 11) / 9007199254740992.0;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

/* ---- round trip ---- */

START_TEST(test_roundtrip)
{
    enum { N = 512 };
    float x[N], y[N];
    tu_rng r = {0x38};
    for (size_t t = 0; t < N_TYPES; t++) {
        for (int j = 0; j < N; j++)
            x[j] = 0.05f * gauss(&r) + (j % 7 == 0 ? 0.01f : 0.0f);
        roundtrip(all_types[t], x, N, NULL, y);
        double sse = werr(x, y, NULL, N), ssq = 0.0;
        for (int j = 0; j < N; j++) {
            ck_assert(isfinite(y[j]));
            ssq += (double)x[j] * x[j];
        }
        /* 4-bit types: relative RMS error well under 12 %; 6-bit under 3 %. */
        double lim = all_types[t] == ML_TYPE_Q6_K ? 0.03 : 0.12;
        ck_assert_msg(sqrt(sse / ssq) < lim, "%s: relative RMS error %g",
                      ml_type_name(all_types[t]), sqrt(sse / ssq));
    }
}
END_TEST

/* Values on a Q5_0 grid come back exactly; values on a Q6_K or Q4_K grid
 * nearly (the sub-block step d * sc need not hit the grid's step exactly
 * with an f16 d). */
START_TEST(test_grid_values)
{
    float x[256], y[256];
    double ssq = 0.0;
    for (int j = 0; j < 256; j++) {
        x[j] = (float)((j * 7) % 32 - 16) * 0.125f;
        ssq += (double)x[j] * x[j];
    }
    roundtrip(ML_TYPE_Q5_0, x, 256, NULL, y);
    ck_assert_double_eq(werr(x, y, NULL, 256), 0.0);
    roundtrip(ML_TYPE_Q6_K, x, 256, NULL, y);
    ck_assert_double_lt(werr(x, y, NULL, 256), 1e-5 * ssq);
    ssq = 0.0;
    for (int j = 0; j < 256; j++) {
        x[j] = (float)((j * 5) % 16) * 0.25f;
        ssq += (double)x[j] * x[j];
    }
    roundtrip(ML_TYPE_Q4_K, x, 256, NULL, y);
    ck_assert_double_lt(werr(x, y, NULL, 256), 1e-5 * ssq);
}
END_TEST

/* ---- llama.cpp's errors ---- */

typedef struct refset {
    uint32_t nd, rows, cols;
    float *data; /* per distribution: imp[cols], x[rows * cols] */
    char names[8][32];
} refset;

static void load_refs(refset *s)
{
    FILE *f = fopen(REF_BIN, "rb");
    ck_assert_msg(f, "cannot open %s", REF_BIN);
    uint8_t h[20];
    ck_assert_int_eq(fread(h, 1, 20, f), 20);
    ck_assert(!memcmp(h, "KQREF001", 8));
    memcpy(&s->nd, h + 8, 4);
    memcpy(&s->rows, h + 12, 4);
    memcpy(&s->cols, h + 16, 4);
    ck_assert(s->nd >= 1 && s->nd <= 8 && s->cols % 256 == 0);
    size_t n = (size_t)s->nd * s->cols * (s->rows + 1);
    s->data = malloc(n * sizeof(float));
    ck_assert(s->data);
    ck_assert_uint_eq(fread(s->data, sizeof(float), n, f), n);
    fclose(f);
}

/* Our summed error on distribution d, as the manifest's. */
static double our_error(const refset *s, uint32_t d, ml_type t, int use_imp)
{
    const float *imp = s->data + (size_t)d * s->cols * (s->rows + 1);
    const float *x = imp + s->cols;
    float *y = malloc(s->cols * sizeof(float));
    ck_assert(y);
    double e = 0.0;
    for (uint32_t r = 0; r < s->rows; r++) {
        roundtrip(t, x + (size_t)r * s->cols, s->cols, use_imp ? imp : NULL, y);
        e += werr(x + (size_t)r * s->cols, y, use_imp ? imp : NULL, s->cols);
    }
    free(y);
    return e;
}

/* llama.cpp's per-element weights without an imatrix, in double: x^2
 * ("x2") or |x| + the rms of the 32-element block ("absrms"). */
static void own_weights(const float *x, size_t n, const char *kind, double *w)
{
    for (size_t b = 0; b < n; b += 32) {
        double s2 = 0.0;
        for (size_t j = b; j < b + 32; j++)
            s2 += (double)x[j] * x[j];
        double rms = sqrt(s2 / 32.0);
        for (size_t j = b; j < b + 32; j++)
            w[j] = !strcmp(kind, "x2") ? (double)x[j] * x[j] : rms + fabs((double)x[j]);
    }
}

/* Our error on llama.cpp's own measure: its weights passed as importances,
 * the error weighted by them (in double), summed over the rows. */
static double our_own_error(const refset *s, uint32_t d, ml_type t, const char *kind)
{
    const float *x = s->data + (size_t)d * s->cols * (s->rows + 1) + s->cols;
    double *w = malloc(s->cols * sizeof(double));
    float *imp = malloc(s->cols * sizeof(float)), *y = malloc(s->cols * sizeof(float));
    ck_assert(w && imp && y);
    double e = 0.0;
    for (uint32_t r = 0; r < s->rows; r++) {
        const float *xr = x + (size_t)r * s->cols;
        own_weights(xr, s->cols, kind, w);
        for (uint32_t j = 0; j < s->cols; j++)
            imp[j] = (float)w[j];
        roundtrip(t, xr, s->cols, imp, y);
        for (uint32_t j = 0; j < s->cols; j++) {
            double dd = (double)xr[j] - (double)y[j];
            e += w[j] * dd * dd;
        }
    }
    free(w);
    free(imp);
    free(y);
    return e;
}

static ml_type type_named(const char *name)
{
    for (size_t t = 0; t < N_TYPES; t++)
        if (!strcmp(ml_type_name(all_types[t]), name))
            return all_types[t];
    ck_abort_msg("unknown type %s in %s", name, REF_TXT);
    return ML_TYPE_F32;
}

START_TEST(test_vs_llama_cpp)
{
    refset s;
    load_refs(&s);
    FILE *f = fopen(REF_TXT, "r");
    ck_assert_msg(f, "cannot open %s", REF_TXT);
    char line[256], tname[32], dname[32], kind[16];
    int use, nref = 0, nown = 0, report = getenv("ML_KQUANT_REPORT") != NULL;
    unsigned di;
    double ref;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "dist %u %31s", &di, dname) == 2) {
            ck_assert(di < s.nd);
            strcpy(s.names[di], dname);
            continue;
        }
        if (sscanf(line, "own %31s %31s %15s %lf", tname, dname, kind, &ref) == 4) {
            uint32_t d = 0;
            while (d < s.nd && strcmp(s.names[d], dname))
                d++;
            ck_assert_msg(d < s.nd, "unknown distribution %s", dname);
            double ours = our_own_error(&s, d, type_named(tname), kind);
            if (report)
                fprintf(stderr, "kquant %-6s %-9s own=%s ours/llama.cpp = %.4f\n", tname, dname,
                        kind, ours / ref);
            ck_assert_msg(ours <= ref * (1.0 + 1e-9),
                          "%s %s on llama.cpp's %s measure: our error %.9g > %.9g (ratio %.4f)",
                          tname, dname, kind, ours, ref, ours / ref);
            nown++;
            continue;
        }
        if (sscanf(line, "ref %31s %31s %d %lf", tname, dname, &use, &ref) != 4)
            continue;
        uint32_t d = 0;
        while (d < s.nd && strcmp(s.names[d], dname))
            d++;
        ck_assert_msg(d < s.nd, "unknown distribution %s", dname);
        double ours = our_error(&s, d, type_named(tname), use);
        if (report)
            fprintf(stderr, "kquant %-6s %-9s imp=%d ours/llama.cpp = %.4f\n", tname, dname, use,
                    ours / ref);
        /* At least as good as llama.cpp, up to rounding in the sums. */
        ck_assert_msg(ours <= ref * (1.0 + 1e-9),
                      "%s %s imp=%d: our error %.9g > llama.cpp's %.9g (ratio %.4f)", tname,
                      dname, use, ours, ref, ours / ref);
        nref++;
    }
    fclose(f);
    free(s.data);
    ck_assert_int_eq(nref, (int)(N_TYPES * s.nd * 2)); /* nothing silently skipped */
    ck_assert_int_eq(nown, (int)(5 * s.nd));           /* the five searched types */
}
END_TEST

/* The bytes themselves, as CRC-32s over every fixture row of every
 * distribution, without then with importances: any change to the search
 * or its arithmetic shows here, and a build on another machine (the m32
 * and arm64 suites) must give the same bytes.  Update the table, with the
 * new ratios in docs/quant-decisions.md, when the search changes on
 * purpose (ML_KQUANT_GOLDEN=1 ML_KQUANT_REPORT=1 prints the new CRCs
 * without failing). */
static const struct {
    ml_type type;
    uint32_t crc;
} golden[] = {
    {ML_TYPE_Q4_K, 0x2a81ab1f}, {ML_TYPE_Q5_K, 0x5e60295e}, {ML_TYPE_Q6_K, 0x80881000},
    {ML_TYPE_IQ4_XS, 0xda86ead3}, {ML_TYPE_Q5_0, 0xe1af672b}, {ML_TYPE_Q5_1, 0x0104848d},
    {ML_TYPE_IQ4_NL, 0xf2b16f76},
};

START_TEST(test_golden_bytes)
{
    refset s;
    load_refs(&s);
    uint8_t *q = malloc((size_t)s.cols * 2);
    ck_assert(q);
    for (size_t t = 0; t < sizeof golden / sizeof golden[0]; t++) {
        uint32_t elems, bytes, crc = 0;
        ck_assert(ml_type_block(golden[t].type, &elems, &bytes, NULL));
        for (uint32_t d = 0; d < s.nd; d++)
            for (int use = 0; use < 2; use++)
                for (uint32_t r = 0; r < s.rows; r++) {
                    const float *imp = s.data + (size_t)d * s.cols * (s.rows + 1);
                    const float *x = imp + s.cols + (size_t)r * s.cols;
                    ck_assert_int_eq(ml_quantize_row_blocks(golden[t].type, x, s.cols,
                                                            use ? imp : NULL, q, NULL),
                                     ML_OK);
                    crc = ml_crc32(crc, q, s.cols / elems * bytes);
                }
        if (getenv("ML_KQUANT_REPORT"))
            fprintf(stderr, "kquant golden %s 0x%08x\n", ml_type_name(golden[t].type), crc);
        ck_assert_msg(getenv("ML_KQUANT_GOLDEN") || crc == golden[t].crc, "%s: CRC-32 0x%08x, expected 0x%08x",
                      ml_type_name(golden[t].type), crc, golden[t].crc);
    }
    free(q);
    free(s.data);
}
END_TEST

/* ---- the search's builds (kquant_blocks.h) ---- */

#if defined(__x86_64__)
typedef void (*rows_fn)(ml_type, const float *, size_t, const float *, uint8_t *);

/* Each build this CPU runs against the baseline's on the rows, with and
 * without imp. */
static void builds_agree(ml_type t, const float *x, size_t n, const float *imp, const char *what)
{
    uint32_t elems, bytes;
    ck_assert(ml_type_block(t, &elems, &bytes, NULL));
    const size_t size = n / elems * bytes;
    uint8_t *want = malloc(size), *got = malloc(size);
    ck_assert(want && got);
    const struct { const char *name; rows_fn fn; int level; } builds[] = {
        {"avx2", ml__kquant_rows_avx2, 1}, {"avx512", ml__kquant_rows_avx512, 2}};
    for (int use = 0; use < 2; use++) {
        ml__kquant_rows_base(t, x, n, use ? imp : NULL, want);
        for (size_t b = 0; b < sizeof builds / sizeof builds[0]; b++) {
            if (ml__cpu_x86_level() < builds[b].level)
                continue;
            memset(got, 0xa5, size);
            builds[b].fn(t, x, n, use ? imp : NULL, got);
            ck_assert_msg(memcmp(got, want, size) == 0, "%s %s rows (%s importances): %s build "
                          "differs from the baseline's", ml_type_name(t), what,
                          use ? "with" : "no", builds[b].name);
        }
    }
    free(want);
    free(got);
}

START_TEST(test_builds_agree)
{
    refset s;
    load_refs(&s);
    enum { N = 1024 };
    static float x[N], imp[N];
    tu_rng r = {77};
    for (size_t t = 0; t < N_TYPES; t++) {
        for (uint32_t d = 0; d < s.nd; d++) {
            const float *im = s.data + (size_t)d * s.cols * (s.rows + 1);
            builds_agree(all_types[t], im + s.cols, (size_t)s.rows * s.cols, NULL, "reference");
            builds_agree(all_types[t], im + s.cols, s.cols, im, "reference");
        }
        /* hostile: NaN, infinities, huge and tiny values, huge importances */
        for (int j = 0; j < N; j++) {
            const float g = gauss(&r);
            x[j] = j % 11 == 0 ? NAN : j % 13 == 0 ? INFINITY : j % 17 == 0 ? -FLT_MAX
                 : j % 7 == 0 ? g * 1e-30f : j % 5 == 0 ? g * 1e-6f : g;
            imp[j] = j % 19 == 0 ? FLT_MAX : j % 23 == 0 ? 0.0f : fabsf(gauss(&r));
        }
        builds_agree(all_types[t], x, N, imp, "hostile");
    }
    free(s.data);
}
END_TEST
#else
START_TEST(test_builds_agree)
{
    ck_assert_int_eq(ml__cpu_x86_level(), 0); /* one build: nothing to compare */
}
END_TEST
#endif

/* ---- hostile input ---- */

START_TEST(test_hostile)
{
    enum { N = 256 };
    float x[N], y[N];
    for (size_t t = 0; t < N_TYPES; t++) {
        ml_type ty = all_types[t];
        /* All zero: every value 0. */
        memset(x, 0, sizeof x);
        roundtrip(ty, x, N, NULL, y);
        for (int j = 0; j < N; j++)
            ck_assert_msg(y[j] == 0.0f, "%s zero row: y[%d] = %g", ml_type_name(ty), j, y[j]);
        /* NaN and infinities count as 0; the rest is quantized normally. */
        for (int j = 0; j < N; j++)
            x[j] = j % 3 == 0 ? NAN : j % 3 == 1 ? (j & 4 ? INFINITY : -INFINITY) : 0.5f;
        roundtrip(ty, x, N, NULL, y);
        for (int j = 0; j < N; j++) {
            ck_assert(isfinite(y[j]));
            if (j % 3 == 2)
                ck_assert_msg(fabsf(y[j] - 0.5f) < 0.05f, "%s: y[%d] = %g", ml_type_name(ty), j,
                              y[j]);
        }
        /* Huge values: finite blocks, clipped. */
        for (int j = 0; j < N; j++)
            x[j] = j & 1 ? FLT_MAX : -3e20f;
        roundtrip(ty, x, N, NULL, y);
        for (int j = 0; j < N; j++)
            ck_assert(isfinite(y[j]));
        /* Huge importances with huge values: still finite, no overflow in
         * the weighted sums. */
        float imp[N];
        for (int j = 0; j < N; j++) {
            imp[j] = j % 5 ? FLT_MAX : FLT_MIN;
            x[j] = (float)(j % 9 - 4) * 1e8f;
        }
        uint32_t elems, bytes, ggml;
        static uint8_t q[N * 2];
        ml_type_block(ty, &elems, &bytes, &ggml);
        ck_assert_int_eq(ml_quantize_row_blocks(ty, x, N, imp, q, NULL), ML_OK);
        ck_assert_int_eq(ml_gguf_dequantize_raw(ggml, q, N, y, NULL), ML_OK);
        for (int j = 0; j < N; j++)
            ck_assert(isfinite(y[j]));
        /* Tiny values: finite (scales may round to zero). */
        for (int j = 0; j < N; j++)
            x[j] = (float)(j % 5) * 1e-30f;
        roundtrip(ty, x, N, NULL, y);
        for (int j = 0; j < N; j++)
            ck_assert(isfinite(y[j]) && fabsf(y[j]) < 1e-3f);
    }
}
END_TEST

/* Tiny rows: larger f16 scales with smaller sub-scales keep the error
 * close to its usual size down to weights of 1e-5; and no block is ever
 * worse than writing zeros. */
START_TEST(test_tiny)
{
    enum { N = 1024 };
    float g[N], x[N], y[N];
    tu_rng r = {5};
    for (int j = 0; j < N; j++)
        g[j] = gauss(&r);
    for (size_t t = 0; t < N_TYPES; t++)
        for (float scale = 1e-5f; scale > 1e-12f; scale *= 0.1f) {
            double ssq = 0.0;
            for (int j = 0; j < N; j++) {
                x[j] = g[j] * scale;
                ssq += (double)x[j] * x[j];
            }
            roundtrip(all_types[t], x, N, NULL, y);
            double rel = sqrt(werr(x, y, NULL, N) / ssq);
            ck_assert_msg(rel <= (scale > 5e-6f ? 0.12 : 1.0), "%s at %g: relative error %g",
                          ml_type_name(all_types[t]), (double)scale, rel);
        }
}
END_TEST

START_TEST(test_refused)
{
    float x[256] = {0}, imp[256];
    uint8_t out[512];
    ml_error err;
    for (int j = 0; j < 256; j++)
        imp[j] = 1.0f;
    ck_assert_int_eq(ml_quantize_row_blocks(ML_TYPE_Q4_K, x, 128, NULL, out, &err), ML_E_INVAL);
    ck_assert_int_eq(ml_quantize_row_blocks(ML_TYPE_Q5_0, x, 48, NULL, out, &err), ML_E_INVAL);
    ck_assert_int_eq(ml_quantize_row_blocks(ML_TYPE_Q8_0, x, 256, NULL, out, &err), ML_E_INVAL);
    ck_assert_int_eq(ml_quantize_row_blocks(ML_TYPE_Q2_K, x, 256, NULL, out, &err), ML_E_INVAL);
    imp[7] = -1.0f;
    ck_assert_int_eq(ml_quantize_row_blocks(ML_TYPE_Q6_K, x, 256, imp, out, &err), ML_E_INVAL);
    ck_assert(strstr(err.msg, "column 7"));
    imp[7] = NAN;
    ck_assert_int_eq(ml_quantize_row_blocks(ML_TYPE_Q6_K, x, 256, imp, out, &err), ML_E_INVAL);
    /* Zero importances are allowed: the columns just do not count. */
    memset(imp, 0, sizeof imp);
    ck_assert_int_eq(ml_quantize_row_blocks(ML_TYPE_Q6_K, x, 256, imp, out, &err), ML_OK);
    ck_assert(ml_quant_block_supported(ML_TYPE_IQ4_XS));
    ck_assert(!ml_quant_block_supported(ML_TYPE_Q4_0));
}
END_TEST

/* A row is the concatenation of its blocks: quantizing it whole or block
 * by block gives the same bytes (no state carried between blocks). */
START_TEST(test_blockwise)
{
    enum { N = 1024 };
    float x[N], imp[N];
    static uint8_t a[N * 2], b[N * 2];
    tu_rng r = {7};
    for (int j = 0; j < N; j++) {
        x[j] = 0.02f * gauss(&r);
        imp[j] = 0.1f + (float)tu_below(&r, 100);
    }
    for (size_t t = 0; t < N_TYPES; t++) {
        uint32_t elems, bytes;
        ml_type_block(all_types[t], &elems, &bytes, NULL);
        ck_assert_int_eq(ml_quantize_row_blocks(all_types[t], x, N, imp, a, NULL), ML_OK);
        for (uint32_t k = 0; k < N / elems; k++)
            ck_assert_int_eq(ml_quantize_row_blocks(all_types[t], x + k * elems, elems,
                                                    imp + k * elems, b + k * bytes, NULL),
                             ML_OK);
        ck_assert(!memcmp(a, b, N / elems * bytes));
    }
}
END_TEST

/* ---- whole matrices ---- */

/* The threaded matrix function gives the row function's bytes for any
 * thread count; its error report matches a direct computation. */
START_TEST(test_matrix)
{
    enum { R = 7, C = 512 };
    static float x[R * C], imp[C], y[C];
    static uint8_t a[R * C], b[R * C];
    tu_rng r = {11};
    for (int j = 0; j < R * C; j++)
        x[j] = 0.03f * gauss(&r);
    for (int j = 0; j < C; j++)
        imp[j] = (float)(1 + tu_below(&r, 50));
    for (size_t t = 0; t < N_TYPES; t++) {
        size_t bytes;
        uint32_t elems, bb, ggml;
        ml_type_block(all_types[t], &elems, &bb, &ggml);
        ck_assert_int_eq(ml_quant_block_bytes(all_types[t], R, C, &bytes, NULL), ML_OK);
        ck_assert_uint_eq(bytes, (size_t)R * C / elems * bb);
        for (int k = 0; k < R; k++)
            ml_quantize_row_blocks(all_types[t], x + k * C, C, imp, a + k * (bytes / R), NULL);
        for (unsigned th = 0; th <= 8; th += 4) {
            memset(b, 0xAA, sizeof b);
            ck_assert_int_eq(ml_quantize_matrix_blocks(all_types[t], x, R, C, imp, th, "w", b,
                                                       bytes, NULL),
                             ML_OK);
            ck_assert(!memcmp(a, b, bytes));
        }
        ml_quant_error e = {0};
        double sse = 0.0;
        ml_quant_error_add_blocks(&e, x, R, C, all_types[t], a);
        for (int k = 0; k < R; k++) {
            ck_assert_int_eq(ml_gguf_dequantize_raw(ggml, a + k * (bytes / R), C, y, NULL),
                             ML_OK);
            sse += werr(x + k * C, y, NULL, C);
        }
        ck_assert_uint_eq(e.n, (uint64_t)R * C);
        ck_assert_double_eq_tol(e.sse, sse, 1e-12 * sse);
        ck_assert(e.max_abs > 0.0 && e.ssq > e.sse);
    }
}
END_TEST

START_TEST(test_matrix_refused)
{
    static float x[2 * 256], imp[256];
    static uint8_t out[2 * 210];
    ml_error err;
    size_t bytes;
    ck_assert_int_eq(ml_quant_block_bytes(ML_TYPE_Q6_K, 2, 256, &bytes, NULL), ML_OK);
    ck_assert_uint_eq(bytes, 420);
    ck_assert_int_eq(ml_quant_block_bytes(ML_TYPE_Q6_K, 2, 100, &bytes, &err), ML_E_INVAL);
    ck_assert_int_eq(ml_quant_block_bytes(ML_TYPE_F32, 2, 256, &bytes, &err), ML_E_INVAL);
    ck_assert_int_eq(ml_quant_block_bytes(ML_TYPE_Q6_K, UINT64_MAX / 8, 256, &bytes, &err),
                     ML_E_NOMEM);
    ck_assert_int_eq(ml_quantize_matrix_blocks(ML_TYPE_Q6_K, x, 2, 256, NULL, 1, "w", out, 419,
                                               &err),
                     ML_E_INVAL);
    ck_assert_int_eq(ml_quantize_matrix_blocks(ML_TYPE_Q6_K, NULL, 2, 256, NULL, 1, "w", out,
                                               420, &err),
                     ML_E_INVAL);
    x[256 + 9] = NAN;
    memset(out, 0x5A, sizeof out);
    ck_assert_int_eq(ml_quantize_matrix_blocks(ML_TYPE_Q6_K, x, 2, 256, NULL, 2, "blk.0.wq", out,
                                               420, &err),
                     ML_E_FORMAT);
    ck_assert(strstr(err.msg, "row 1, column 9"));
    ck_assert_str_eq(err.field, "blk.0.wq");
    ck_assert(out[0] == 0x5A && out[419] == 0x5A); /* nothing written */
    x[256 + 9] = 0.0f;
    imp[3] = -1.0f;
    ck_assert_int_eq(ml_quantize_matrix_blocks(ML_TYPE_Q6_K, x, 2, 256, imp, 2, NULL, out, 420,
                                               &err),
                     ML_E_INVAL);
    ck_assert(strstr(err.msg, "column 3"));
    /* Zero rows: nothing to do. */
    ck_assert_int_eq(ml_quantize_matrix_blocks(ML_TYPE_Q6_K, NULL, 0, 256, NULL, 4, NULL, NULL,
                                               0, &err),
                     ML_OK);
}
END_TEST

/* ---- the mix rule ---- */

static ml_type mix(ml_quant_mix m, ml_role role, uint32_t index, uint32_t count, uint64_t cols)
{
    ml_mix_tensor t = {.role = role, .index = index, .count = count, .cols = cols, .n_gqa = 1};
    return ml_quant_mix_type(m, &t);
}

START_TEST(test_mix)
{
    /* llama.cpp's use_more_bits for 32 layers: 0-3, 28-31, and 6, 9, ..., 27. */
    int more = 0;
    for (uint32_t i = 0; i < 32; i++) {
        int want = i < 4 || i >= 28 || (i - 4) % 3 == 2;
        ml_type v = mix(ML_MIX_Q4_K_M, ML_R_WV, i, 32, 4096);
        ml_type d = mix(ML_MIX_Q4_K_M, ML_R_W2, i, 32, 11008);
        ck_assert_int_eq(v, want ? ML_TYPE_Q6_K : ML_TYPE_Q4_K);
        ck_assert_int_eq(d, want ? ML_TYPE_Q6_K : ML_TYPE_Q4_K);
        ck_assert_int_eq(mix(ML_MIX_Q5_K_M, ML_R_W2, i, 32, 11008),
                         want ? ML_TYPE_Q6_K : ML_TYPE_Q5_K);
        ck_assert_int_eq(mix(ML_MIX_Q4_K_M, ML_R_WQ, i, 32, 4096), ML_TYPE_Q4_K);
        more += want;
    }
    ck_assert_int_eq(more, 16);
    ck_assert_int_eq(mix(ML_MIX_Q4_K_M, ML_R_WCLS, 0, 0, 4096), ML_TYPE_Q6_K);
    ck_assert_int_eq(mix(ML_MIX_Q4_K_M, ML_R_TOK_EMB, 0, 0, 4096), ML_TYPE_Q4_K);
    ml_mix_tensor tied = {.role = ML_R_TOK_EMB, .cols = 4096, .tied = 1};
    ck_assert_int_eq(ml_quant_mix_type(ML_MIX_IQ4_XS, &tied), ML_TYPE_Q6_K);
    tied.cols = 640; /* a classifier rows that 256 does not divide: Q8_0 */
    ck_assert_int_eq(ml_quant_mix_type(ML_MIX_Q4_K_M, &tied), ML_TYPE_Q8_0);
    ck_assert_int_eq(mix(ML_MIX_Q6_K, ML_R_W2, 0, 32, 4096), ML_TYPE_Q6_K);
    ck_assert_int_eq(mix(ML_MIX_Q6_K, ML_R_WK, 3, 32, 4096), ML_TYPE_Q6_K);
    /* IQ4_XS: attn_v Q5_K with GQA >= 4; ffn_down Q5_K in the first eighth
     * without an imatrix. */
    ml_mix_tensor v = {.role = ML_R_WV, .index = 5, .count = 32, .cols = 4096, .n_gqa = 4};
    ck_assert_int_eq(ml_quant_mix_type(ML_MIX_IQ4_XS, &v), ML_TYPE_Q5_K);
    v.n_gqa = 1;
    ck_assert_int_eq(ml_quant_mix_type(ML_MIX_IQ4_XS, &v), ML_TYPE_IQ4_XS);
    /* LQKV (GGUF's attn_qkv) counts as attn_v. */
    ck_assert_int_eq(mix(ML_MIX_Q4_K_M, ML_R_LQKV, 0, 24, 2048), ML_TYPE_Q6_K);
    ck_assert_int_eq(mix(ML_MIX_Q4_K_M, ML_R_LQKV, 4, 24, 2048), ML_TYPE_Q4_K);
    ck_assert_int_eq(mix(ML_MIX_Q4_K_M, ML_R_LQKV, 5, 24, 2048), ML_TYPE_Q6_K);
    ml_mix_tensor d = {.role = ML_R_W2, .index = 3, .count = 32, .cols = 4096};
    ck_assert_int_eq(ml_quant_mix_type(ML_MIX_IQ4_XS, &d), ML_TYPE_Q5_K);
    d.has_imatrix = 1;
    ck_assert_int_eq(ml_quant_mix_type(ML_MIX_IQ4_XS, &d), ML_TYPE_IQ4_XS);
    /* Fallbacks for rows 256 does not divide, then F16 when 32 does not. */
    ck_assert_int_eq(mix(ML_MIX_Q4_K_M, ML_R_WQ, 0, 1, 640), ML_TYPE_Q5_0);
    ck_assert_int_eq(mix(ML_MIX_Q5_K_M, ML_R_WQ, 0, 1, 640), ML_TYPE_Q5_1);
    ck_assert_int_eq(mix(ML_MIX_Q6_K, ML_R_WQ, 0, 1, 640), ML_TYPE_Q8_0);
    ck_assert_int_eq(mix(ML_MIX_IQ4_XS, ML_R_WQ, 0, 1, 640), ML_TYPE_IQ4_NL);
    ck_assert_int_eq(mix(ML_MIX_Q4_K_M, ML_R_WV, 0, 8, 640), ML_TYPE_Q8_0); /* Q6_K's */
    ck_assert_int_eq(mix(ML_MIX_Q4_K_M, ML_R_WQ, 0, 1, 100), ML_TYPE_F16);
    ck_assert_int_eq(mix(ML_MIX_Q6_K, ML_R_WCLS, 0, 1, 100), ML_TYPE_F16);
    ck_assert_int_eq(mix((ml_quant_mix)99, ML_R_WQ, 0, 1, 4096), ML_TYPE_F32);

    ml_quant_mix m;
    ck_assert_int_eq(ml_quant_mix_parse("q4_k_m", &m, NULL), ML_OK);
    ck_assert_int_eq(m, ML_MIX_Q4_K_M);
    ck_assert_int_eq(ml_quant_mix_parse("IQ4_XS", &m, NULL), ML_OK);
    ck_assert_str_eq(ml_quant_mix_name(m), "IQ4_XS");
    ck_assert_int_eq(ml_quant_mix_parse("Q3_K_M", &m, NULL), ML_E_INVAL);
    ck_assert_str_eq(ml_quant_mix_name((ml_quant_mix)0), "?");
}
END_TEST

Suite *suite_kquant(void)
{
    Suite *s = suite_create("kquant");
    TCase *tc = tcase_create("kquant");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_roundtrip);
    tcase_add_test(tc, test_grid_values);
    tcase_add_test(tc, test_vs_llama_cpp);
    tcase_add_test(tc, test_golden_bytes);
    tcase_add_test(tc, test_builds_agree);
    tcase_add_test(tc, test_hostile);
    tcase_add_test(tc, test_tiny);
    tcase_add_test(tc, test_refused);
    tcase_add_test(tc, test_blockwise);
    tcase_add_test(tc, test_matrix);
    tcase_add_test(tc, test_matrix_refused);
    tcase_add_test(tc, test_mix);
    suite_add_tcase(s, tc);
    return s;
}
