/* mlcore/quant.h - the quantizers of the .mlb format (mlb(5), "Quantization
 * rule"): Q8_0 with f32 or f16 scales, Q4_0 by the weighted fit search or
 * llama.cpp's rounding, importance-matrix weighting.  Included by mlcore.h. */
#ifndef MLCORE_QUANT_H
#define MLCORE_QUANT_H

#include <mlcore.h>

#endif
