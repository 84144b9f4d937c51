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
extern const ml_kernels ml__kernels_avx2;
extern const ml_kernels ml__kernels_avx512;

static int cpu_has_avx2(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2");
}

/* What kernels_avx512.c is compiled for (see the Makefile). */
static int cpu_has_avx512vnni(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("avx512f") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vnni");
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
#else
    {.env = "avx2"},
    {.env = "avx512"},
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
            reason = "ML_KERNELS: unknown kernel variant (expected scalar, avx2, avx512, neon, "
                     "neondot or auto)";
        else if (!v->table)
            reason = "ML_KERNELS: this build has no such kernel variant (avx2 and avx512: x86-64 "
                     "builds only; neon and neondot: AArch64 builds only)";
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

const ml_fmath *ml__fmath(const ml_kernels *k)
{
    return k->fmath;
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
