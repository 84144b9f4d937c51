/* convert_rope.c - recovering Llama 3.x RoPE scaling from a GGUF.
 *
 * llama.cpp's converter writes no keys for "llama3" scaling; it bakes the
 * scaling into rope_freqs.weight, one divisor r_i per rotated pair, which
 * llama.cpp divides that pair's frequency by.  The .mlb header wants the
 * parameters instead (mlb(5), rope_type 1).  The divisors are
 *     r_i = 1                        when 1/wavelen_i > hi/orig  (high band)
 *     r_i = factor                   when 1/wavelen_i < lo/orig  (low band)
 *     r_i = 1 / ((1 - s)/factor + s) otherwise, s = (orig/wavelen_i - lo)/(hi - lo)
 * with wavelen_i = 2 pi / theta^(-2i/head_dim).  factor is the largest r_i.
 * In the smooth band s is a straight line in x = 1/wavelen, so two smooth
 * pairs give the two thresholds a = lo/orig and b = hi/orig.  Only these
 * ratios matter: scaling orig, lo and hi together changes no r_i.  We pick
 * the reading with lo = 1 (every released Llama 3.x uses low_freq_factor 1)
 * when 1/a is a whole context length, else orig from the metadata or 8192.
 * With fewer than two smooth pairs the thresholds are only bounded; we pick
 * values inside the bounds (hi = 4 lo when that fits, as released models
 * have).  Whatever was picked is then checked: the spec's formula must give
 * back every r_i within a relative 1e-5, or the tensor is refused. */
#include "convert/convert_impl.h"

#include <math.h>

#define TWO_PI  6.283185307179586
#define REL_TOL 1e-5

/* 1 / wavelength of pair i. */
static double inv_wavelen(uint32_t i, uint32_t head_dim, float theta)
{
    return pow((double)theta, -2.0 * (double)i / (double)head_dim) / TWO_PI;
}

double ml__llama3_divisor(const ml__llama3_rope *p, uint32_t i, uint32_t head_dim, float theta)
{
    double x = inv_wavelen(i, head_dim, theta);
    double wavelen = 1.0 / x;
    double orig = (double)p->orig, lo = (double)p->low, hi = (double)p->high, f = (double)p->factor;
    if (wavelen < orig / hi)
        return 1.0;
    if (wavelen > orig / lo)
        return f;
    double s = (orig / wavelen - lo) / (hi - lo);
    return 1.0 / ((1.0 - s) / f + s);
}

/* The thresholds a < b (in 1/wavelength) from the smooth pairs, by least
 * squares of s against x; or, with too few of them, inside the bounds the
 * two outer bands set. */
typedef struct bands {
    uint32_t first_mid, last_mid, n_mid;
    double xl; /* largest x of the low band, 0 if none */
    double xh; /* smallest x of the high band, INFINITY if none */
} bands;

static double smooth_s(float r, double f)
{
    return (1.0 / (double)r - 1.0 / f) / (1.0 - 1.0 / f);
}

static void fit_thresholds(const float *r, const bands *bd, double f, uint32_t hd, float theta,
                           double *a, double *b)
{
    if (bd->n_mid >= 2) {
        double sx = 0, ss = 0, sxx = 0, sxs = 0, n = bd->n_mid;
        for (uint32_t i = bd->first_mid; i <= bd->last_mid; i++) {
            double x = inv_wavelen(i, hd, theta), s = smooth_s(r[i], f);
            sx += x, ss += s, sxx += x * x, sxs += x * s;
        }
        double slope = (n * sxs - sx * ss) / (n * sxx - sx * sx);
        double icpt = (ss - slope * sx) / n;
        *a = -icpt / slope;
        *b = *a + 1.0 / slope;
        return;
    }
    if (bd->n_mid == 1) {
        double xm = inv_wavelen(bd->first_mid, hd, theta), sm = smooth_s(r[bd->first_mid], f);
        /* s = (x - a)/(b - a) with b = 4a, when the bounds allow it */
        double a4 = xm / (1.0 + 3.0 * sm);
        if (a4 >= bd->xl && 4.0 * a4 <= bd->xh) {
            *a = a4, *b = 4.0 * a4;
            return;
        }
        double wmax = INFINITY;
        if (sm > 0)
            wmax = (xm - bd->xl) / sm;
        if (sm < 1 && isfinite(bd->xh))
            wmax = fmin(wmax, (bd->xh - xm) / (1.0 - sm));
        double w = isfinite(wmax) ? wmax / 2 : xm;
        *a = xm - sm * w, *b = xm + (1.0 - sm) * w;
        return;
    }
    /* No smooth pair: any a < b between the bands reproduces the tensor. */
    if (bd->xl > 0 && 4.0 * bd->xl * 1.25 <= bd->xh) {
        *a = bd->xl * 1.125, *b = 4.0 * *a;
    } else if (bd->xl > 0 && isfinite(bd->xh)) {
        *a = bd->xl + (bd->xh - bd->xl) / 3, *b = bd->xl + 2 * (bd->xh - bd->xl) / 3;
    } else if (bd->xl > 0) {
        *a = bd->xl * 1.125, *b = 4.0 * *a;
    } else {
        *b = bd->xh * 0.875, *a = *b / 4.0;
    }
}

/* Classifies the pairs; 0 when the divisors are not ordered as llama3
 * scaling orders them (high band, smooth band, low band by pair index). */
static int classify(const float *r, uint32_t n, float f, bands *bd, uint32_t hd, float theta)
{
    int stage = 0; /* 0 high, 1 smooth, 2 low */
    bd->n_mid = 0, bd->xl = 0, bd->xh = INFINITY;
    for (uint32_t i = 0; i < n; i++) {
        int band = r[i] == 1.0f ? 0 : r[i] == f ? 2 : 1;
        if (band < stage)
            return 0;
        stage = band;
        double x = inv_wavelen(i, hd, theta);
        if (band == 0 && x < bd->xh)
            bd->xh = x;
        if (band == 2 && x > bd->xl)
            bd->xl = x;
        if (band == 1) {
            if (!bd->n_mid++)
                bd->first_mid = i;
            bd->last_mid = i;
        }
        if (i && r[i] < r[i - 1])
            return 0;
    }
    return 1;
}

/* A value within a relative 1e-4 of a multiple of 1/16 becomes that
 * multiple: the least-squares fit of float32 data lands next to the round
 * numbers configurations use (low 1, high 4), not on them. */
static float snap(double v)
{
    double m = floor(v * 16.0 + 0.5) / 16.0;
    return (float)(m > 0 && fabs(v - m) <= 1e-4 * m ? m : v);
}

/* orig, lo and hi from the thresholds: lo = 1 when 1/a is a whole context
 * length, else the hinted (or Llama 3's 8192) context. */
static void pick_scale(double a, double b, uint32_t orig_hint, ml__llama3_rope *out)
{
    double orig = 1.0 / a;
    double rounded = floor(orig + 0.5);
    if (orig_hint)
        orig = orig_hint;
    else if (rounded >= 1 && rounded <= ML_MLB_VOCAB_LIMIT &&
             fabs(orig - rounded) <= 1e-3 * rounded)
        orig = rounded;
    else
        orig = 8192;
    out->orig = (uint32_t)orig;
    out->low = snap(a * orig);
    out->high = snap(b * orig);
}

ml_status ml__llama3_recover(const float *r, uint32_t n, uint32_t hd, float theta,
                             uint32_t orig_hint, const char *name, ml__llama3_rope *out,
                             ml_error *err)
{
    memset(out, 0, sizeof *out);
    if (n == 0 || hd != 2 * n || !(theta > 1.0f) || !isfinite(theta))
        return ml__err(err, ML_E_UNSUPPORTED, name, -1,
                       "%u divisors for a head of %u with RoPE base %g: not llama3 scaling", n, hd,
                       (double)theta);
    float f = 1.0f;
    for (uint32_t i = 0; i < n; i++) {
        if (!isfinite(r[i]) || r[i] < 1.0f)
            return ml__err(err, ML_E_UNSUPPORTED, name, -1,
                           "divisor %u is %g; llama3 scaling gives values of at least 1", i,
                           (double)r[i]);
        if (r[i] > f)
            f = r[i];
    }
    bands bd = {0};
    if (f == 1.0f || !classify(r, n, f, &bd, hd, theta))
        return ml__err(err, ML_E_UNSUPPORTED, name, -1,
                       f == 1.0f ? "every divisor is 1: no scaling to recover"
                                 : "the divisors are not ordered as llama3 scaling orders them");
    double a, b;
    fit_thresholds(r, &bd, f, hd, theta, &a, &b);
    if (!(a > 0) || !(b > a) || !isfinite(b))
        return ml__err(err, ML_E_UNSUPPORTED, name, -1,
                       "the smooth band does not fit llama3 scaling (thresholds %g, %g)", a, b);
    out->factor = f;
    out->n_mid = bd.n_mid;
    pick_scale(a, b, orig_hint, out);
    if (!(out->low > 0) || !(out->high > out->low) || !isfinite(out->high) || out->orig == 0)
        return ml__err(err, ML_E_UNSUPPORTED, name, -1,
                       "recovered parameters out of range (low %g, high %g, original context %u)",
                       (double)out->low, (double)out->high, out->orig);
    for (uint32_t i = 0; i < n; i++) {
        double d = ml__llama3_divisor(out, i, hd, theta);
        double rel = fabs(d - (double)r[i]) / (double)r[i];
        if (rel > out->max_rel_err)
            out->max_rel_err = rel;
        if (rel > REL_TOL)
            return ml__err(err, ML_E_UNSUPPORTED, name, -1,
                           "llama3 scaling (factor %g, low %g, high %g, original context %u) gives "
                           "%.9g for pair %u, the tensor has %.9g",
                           (double)out->factor, (double)out->low, (double)out->high, out->orig, d,
                           i, (double)r[i]);
    }
    return ML_OK;
}
