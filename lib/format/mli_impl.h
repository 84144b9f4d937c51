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

/* An importance matrix of the given shape, every sum 0 (mli.c). */
ml_status ml__mli_alloc(const ml_mli_info *shape, ml_mli **out, ml_error *err);
/* llama.cpp's importance matrix at p (llama-imatrix's GGUF, or its older
 * .dat) as an .mli (mli_llama.c). */
ml_status ml__mli_from_llama(const uint8_t *p, size_t size, ml_mli **out, ml_error *err);
/* Whether p looks like a .dat of llama-imatrix (it has no magic). */
int ml__mli_looks_llama_dat(const uint8_t *p, size_t size);

#endif
