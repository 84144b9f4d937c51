/* mlcore/kernels.h - which compute kernels the runtime uses.  The library
 * has one scalar reference implementation of its hot loops and variants
 * for instruction sets (AVX2, AVX-512 VNNI, AMX, NEON) that give
 * bit-identical results.  Each kernel (the quantizer, the products per
 * weight type, the float math: attention's float32 products and softmax,
 * the activation functions) is taken at run time from the variant that
 * measures fastest on this CPU (a short probe, once per process, at the
 * first model or query), or all from the one variant the
 * environment variable ML_KERNELS names (scalar, avx2, avx512lanes, avx512,
 * amx, neon, neondot; auto is the probe's choice), and kernel by kernel by items
 * ,KERNEL=VARIANT after it (KERNEL as ml_kernels_slot names them).
 * Included by mlcore.h. */
#ifndef MLCORE_KERNELS_H
#define MLCORE_KERNELS_H

#include <mlcore/base.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The name of the kernel variant the runtime would use now: "scalar",
 * "avx2", "avx512vnni-lanes" (avx512vnni with another prompt product for
 * the K-quants), "avx512vnni", "amx", "neon" or "neondot" (the widest this CPU
 * runs, on which the probe's choice is based, or the one ML_KERNELS
 * names; ml_kernels_slot_variant tells where each kernel comes from).  "none" when ML_KERNELS names an unknown
 * variant or one this CPU or build lacks; the runtime then refuses to
 * start.  Never NULL; the string is static.  Reads the environment on
 * every call. */
ML_API const char *ml_kernels_name(void);

/* The float-math variant in use: "scalar" (that of the scalar and,
 * having no NEON version yet, the NEON kernels), "avx2" (of avx2) or
 * "avx512" (of avx512vnni-lanes, avx512vnni and amx); "none" as above.  The same rules
 * otherwise. */
ML_API const char *ml_kernels_fmath_name(void);

/* How far ahead the decode kernels prefetch their weights: "near", "far"
 * or "far-k" (a profile of distances per CPU: far on AMD Zen 4, far-k on
 * Zen 5, near elsewhere, or the one the environment variable ML_PREFETCH
 * names: near, far, far-k, or auto for the CPU's); "none" as above, or when
 * ML_PREFETCH names no profile.  The profile is fixed for the process at
 * the first model or query; it changes no result. */
ML_API const char *ml_kernels_prefetch_name(void);

/* The kernels chosen one by one, i = 0, 1, ...: "quantize_q8_0",
 * "matvec_q8_0", "matvec_q4_0", "matmul_q8_0", "matmul_q4_0", "fmath";
 * NULL past the last. */
ML_API const char *ml_kernels_slot(unsigned i);

/* The variant kernel i comes from (a name as ml_kernels_name gives),
 * "none" as there, NULL past the last kernel.  The same rules. */
ML_API const char *ml_kernels_slot_variant(unsigned i);

#ifdef __cplusplus
}
#endif

#endif /* MLCORE_KERNELS_H */
