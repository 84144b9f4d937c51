/* mli_impl.h - private: where the runtime adds its sums of squares in an
 * importance matrix (mli.c). */
#ifndef ML_MLI_IMPL_H
#define ML_MLI_IMPL_H

#include "base/internal.h"

/* The first double of a slot of a layer (layer ignored for the classifier);
 * ml_mli_slot_size(m, slot) doubles follow. */
double *ml__mli_slot(ml_mli *m, ml_mli_slot slot, uint32_t layer);
/* Adds to the token counters. */
void ml__mli_count(ml_mli *m, uint64_t layer_tokens, uint64_t cls_tokens);

#endif
