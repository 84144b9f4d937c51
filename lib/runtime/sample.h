/* sample.h - private: the sampler's two halves.  ml_sampler_next is the
 * penalties followed by the pick; the generator (generate.c) runs
 * the penalty as one of its logit processors and picks after the last
 * one, so that its tokens are the bits and draws of ml_sampler_next. */
#ifndef ML_SAMPLE_H
#define ML_SAMPLE_H

#include "base/internal.h"

/* 1 when s has a repeat, presence or frequency penalty. */
int ml__sampler_penalizes(const ml_sampler *s);
/* The penalties of s's parameters on the last repeat_last_n tokens of
 * hist[0..n); nothing when hist is NULL or every penalty is off. */
void ml__sampler_penalize(const ml_sampler *s, float *logits, const ml_token *hist, size_t n);
/* The token drawn from logits by s's filters and generator; no penalty. */
ml_token ml__sampler_pick(ml_sampler *s, float *logits);

#endif
