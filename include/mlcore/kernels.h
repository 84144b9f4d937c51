/* mlcore/kernels.h - which compute kernels the runtime uses.  The library
 * has one scalar reference implementation of its hot loops and variants
 * for instruction sets (AVX2, AVX-512 VNNI, AMX, NEON) that give
 * bit-identical results; one is chosen at run time from the CPU, or by the
 * environment variable ML_KERNELS (scalar, avx2, avx512, amx, neon,
 * neondot or auto).  The
 * variant brings its float math (attention's float32 products and softmax,
 * the activation functions), also bit-identical everywhere.
 * Included by mlcore.h. */
#ifndef MLCORE_KERNELS_H
#define MLCORE_KERNELS_H

#include <mlcore/base.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The name of the kernel variant the runtime would use now: "scalar",
 * "avx2", "avx512vnni", "amx", "neon" or "neondot" (the best this CPU runs, or
 * the one ML_KERNELS names).  "none" when ML_KERNELS names an unknown
 * variant or one this CPU or build lacks; the runtime then refuses to
 * start.  Never NULL; the string is static.  Reads the environment on
 * every call. */
ML_API const char *ml_kernels_name(void);

/* The float-math variant that comes with it: "scalar" (with the scalar
 * and, having no NEON version yet, the NEON kernels), "avx2" (with avx2)
 * or "avx512" (with avx512vnni and amx); "none" as above.  The same rules
 * otherwise. */
ML_API const char *ml_kernels_fmath_name(void);

#ifdef __cplusplus
}
#endif

#endif /* MLCORE_KERNELS_H */
