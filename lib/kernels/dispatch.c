/* dispatch.c - chooses the kernel table at run time: the best variant the
 * CPU runs (cpuid, through __builtin_cpu_supports), or the one the
 * environment variable ML_KERNELS names.  An unknown or unrunnable name is
 * an error, never a silent fallback: a user who asks for a variant and
 * gets another would compare the wrong things.  The x86 variants exist
 * only in x86-64 builds, NEON only in AArch64 ones (where every CPU has
 * it); elsewhere the scalar table is all there is.  The float32 products
 * (fmath.h) are not chosen apart: each table names its own (->fmath). */
#include "kernels/kernels.h"

#include "kernels/fmath.h"

#include "mlcore.h"
#include "mlcore/kernels.h"

#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

extern const ml_kernels ml__kernels_avx2;
extern const ml_kernels ml__kernels_avx512;
extern const ml_kernels ml__kernels_amx;

/* fmath_avx2.c's products are fused multiply-adds (fmath.h). */
static int cpu_has_avx2(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

/* What kernels_avx512.c is compiled for (see the Makefile). */
static int cpu_has_avx512vnni(void)
{
    __builtin_cpu_init();
    return cpu_has_avx2() && __builtin_cpu_supports("avx512f") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vnni");
}

/* kernels_amx.c's table: AVX-512 VNNI, the AMX-TILE and AMX-INT8 bits
 * (cpuid leaf 7, EDX 24 and 25), the tile state enabled in XCR0 (bits 17
 * and 18) and Linux's permission for this process to use it, asked for
 * once (arch_prctl ARCH_REQ_XCOMP_PERM of XFEATURE_XTILEDATA; it covers
 * every thread).  Elsewhere, or when the kernel refuses, AVX-512 it is. */
static int cpu_has_amx(void)
{
#if defined(__linux__)
    static int known = -1;
    if (known >= 0)
        return known;
    unsigned a, b, c, d;
    known = 0;
    if (!cpu_has_avx512vnni() || !__get_cpuid_count(7, 0, &a, &b, &c, &d) ||
        (d & (3u << 24)) != (3u << 24))
        return 0;
    unsigned xcr0_lo, xcr0_hi;
    __asm__ volatile("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
    if ((xcr0_lo & (3u << 17)) != (3u << 17))
        return 0;
    known = syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XTILEDATA */) == 0;
    return known;
#else
    return 0;
#endif
}
#endif

#if defined(__aarch64__)
#include <sys/auxv.h>

extern const ml_kernels ml__kernels_neon;
extern const ml_kernels ml__kernels_neondot;

#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1 << 20)
#endif

static int cpu_has_dotprod(void)
{
    return (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
}
#endif

static int cpu_has_nothing_special(void)
{
    return 1;
}

/* Every variant the library knows, slowest first.  `table` is NULL where
 * this build does not have it. */
typedef struct variant {
    const char *env;       /* the ML_KERNELS value */
    const ml_kernels *table;
    int (*runs)(void);     /* can this CPU run it? */
} variant;

static const variant variants[] = {
    {.env = "scalar", .table = &ml__kernels_scalar, .runs = cpu_has_nothing_special},
#if defined(__x86_64__)
    {.env = "avx2", .table = &ml__kernels_avx2, .runs = cpu_has_avx2},
    {.env = "avx512", .table = &ml__kernels_avx512, .runs = cpu_has_avx512vnni},
    {.env = "amx", .table = &ml__kernels_amx, .runs = cpu_has_amx},
#else
    {.env = "avx2"},
    {.env = "avx512"},
    {.env = "amx"},
#endif
#if defined(__aarch64__)
    {.env = "neon", .table = &ml__kernels_neon, .runs = cpu_has_nothing_special},
    {.env = "neondot", .table = &ml__kernels_neondot, .runs = cpu_has_dotprod},
#else
    {.env = "neon"},
    {.env = "neondot"},
#endif
};
#define N_VARIANTS (sizeof variants / sizeof variants[0])

static int usable(const variant *v)
{
    return v->table && v->runs();
}

/* The variant ML_KERNELS names: its ML_KERNELS value or its table name. */
static const variant *find(const char *name)
{
    for (size_t i = 0; i < N_VARIANTS; i++)
        if (strcmp(name, variants[i].env) == 0 ||
            (variants[i].table && strcmp(name, variants[i].table->name) == 0))
            return &variants[i];
    return NULL;
}

const ml_kernels *ml__kernels_select(const char **why)
{
    const char *env = getenv("ML_KERNELS");
    if (env && *env && strcmp(env, "auto") != 0) {
        const variant *v = find(env);
        const char *reason = NULL;
        if (!v)
            reason = "ML_KERNELS: unknown kernel variant (expected scalar, avx2, avx512, amx, "
                     "neon, neondot or auto)";
        else if (!v->table)
            reason = "ML_KERNELS: this build has no such kernel variant (avx2, avx512 and amx: "
                     "x86-64 builds only; neon and neondot: AArch64 builds only)";
        else if (!v->runs())
            reason = "ML_KERNELS: this CPU lacks the instructions of the requested kernel variant";
        if (reason) {
            if (why)
                *why = reason;
            return NULL;
        }
        return v->table;
    }
    for (size_t i = N_VARIANTS; i-- > 0;)
        if (usable(&variants[i]))
            return variants[i].table;
    return &ml__kernels_scalar; /* not reached: scalar always runs */
}

size_t ml__kernels_available(const ml_kernels **out, size_t cap)
{
    size_t n = 0;
    for (size_t i = 0; i < N_VARIANTS; i++)
        if (usable(&variants[i])) {
            if (n < cap)
                out[n] = variants[i].table;
            n++;
        }
    return n;
}

const char *ml_kernels_name(void)
{
    const ml_kernels *k = ml__kernels_select(NULL);
    return k ? k->name : "none";
}

const char *ml_kernels_fmath_name(void)
{
    const ml_kernels *k = ml__kernels_select(NULL);
    return k ? k->fmath->name : "none";
}
