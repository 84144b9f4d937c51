/* mlcore/gguf.h - reading GGUF files (llama.cpp's format): metadata, tensor
 * infos, and dequantization of the tensor types real models use.
 * Included by mlcore.h. */
#ifndef MLCORE_GGUF_H
#define MLCORE_GGUF_H

#include <mlcore.h>

#endif
