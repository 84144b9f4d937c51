/* rope.c - RoPE inverse frequencies as mlb(5) defines them: plain, llama3,
 * linear and yarn scaling for the global base, and the unscaled local base
 * of Gemma 3's sliding layers.  Frequencies run over the rotated
 * dimensions (rot_dim), as the reference models compute them for partial
 * rotary; with rot_dim = head_dim this is the spec's formula exactly. */
#include "runtime/runtime.h"

#include <math.h>

/* The llama3 rule: high frequencies unchanged, low ones divided by the
 * factor, a smooth blend between (transformers' _compute_llama3_parameters). */
static double llama3(double inv, const ml_mlb_header *h)
{
    double f = h->rope_factor, lo = h->rope_low_freq_factor, hi = h->rope_high_freq_factor;
    double orig = h->rope_orig_max_seq;
    double wavelen = 2 * M_PI / inv;
    if (wavelen < orig / hi)
        return inv;
    if (wavelen > orig / lo)
        return inv / f;
    double s = (orig / wavelen - lo) / (hi - lo);
    return (1 - s) * inv / f + s * inv;
}

/* The dimension at which r rotations fit into the original context. */
static double yarn_dim(double r, double rot, const ml_mlb_header *h)
{
    return rot * log(h->rope_orig_max_seq / (2 * M_PI * r)) / (2 * log(h->rope_theta));
}

void ml__rope_freqs(const ml_mlb_header *h, const ml_mlb_derived *d, int local, float *inv)
{
    double rot = d->rot_dim;
    double base = local ? h->rope_local_theta : h->rope_theta;
    uint32_t half = d->rot_dim / 2;
    double ylo = 0, yhi = 1;
    if (!local && h->rope_type == ML_ROPE_YARN) {
        ylo = floor(yarn_dim(h->rope_low_freq_factor, rot, h)); /* beta_fast */
        yhi = ceil(yarn_dim(h->rope_high_freq_factor, rot, h)); /* beta_slow */
        if (ylo < 0)
            ylo = 0;
        if (yhi > rot - 1)
            yhi = rot - 1;
        if (yhi == ylo) /* as transformers does, to avoid a zero division */
            yhi += 0.001;
    }
    for (uint32_t i = 0; i < half; i++) {
        double x = pow(base, -2.0 * i / rot);
        if (!local) {
            switch (h->rope_type) {
            case ML_ROPE_LLAMA3: x = llama3(x, h); break;
            case ML_ROPE_LINEAR: x /= h->rope_factor; break;
            case ML_ROPE_YARN: {
                double ramp = (i - ylo) / (yhi - ylo);
                ramp = ramp < 0 ? 0 : ramp > 1 ? 1 : ramp;
                x = x / h->rope_factor * ramp + x * (1 - ramp);
                break;
            }
            default: break;
            }
        }
        inv[i] = (float)x;
    }
}
