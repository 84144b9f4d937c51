/* dispatch.c - chooses the kernel table at run time: kernel by kernel,
 * the variant that measures fastest on this CPU among those it runs
 * (cpuid, through __builtin_cpu_supports), or the one variant the
 * environment variable ML_KERNELS names (and any kernel's own after it:
 * avx512,matvec_q4_0=avx2 reproduces a Zen 4's choice anywhere).  An unknown or unrunnable name is
 * an error, never a silent fallback: a user who asks for a variant and
 * gets another would compare the wrong things.  The x86 variants exist
 * only in x86-64 builds, NEON only in AArch64 ones (where every CPU has
 * it); elsewhere the scalar table is all there is.  The float32 products
 * (fmath.h) are one more kernel of the table (->fmath).
 *
 * Why measure rather than list CPUs: a variant that wins on one CPU loses
 * on another of the same instruction set (Zen 4 runs 512-bit instructions
 * as two halves, and its Q4_0 decode is slower in AVX-512 than in AVX2,
 * where an Intel Xeon's is faster), and the machines this runs on change
 * faster than a table of them could be measured.  The probe (probe.c)
 * runs once per process; its cost is in docs/speed-history.md. */
#include "kernels/kernels.h"

#include "kernels/fmath.h"

#include "mlcore.h"
#include "mlcore/kernels.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

extern const ml_kernels ml__kernels_avx2;
extern const ml_kernels ml__kernels_avx512;
extern const ml_kernels ml__kernels_avx512_lanes;
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

/* The family of an AMD CPU with AVX-512 (25: Zen 4, 26: Zen 5; Zen 3,
 * also 25, has none), 0 for any other CPU. */
static unsigned amd_avx512_family(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(0, &a, &b, &c, &d) || b != 0x68747541u /* "Auth" */ ||
        d != 0x69746e65u /* "enti" */ || c != 0x444d4163u /* "cAMD" */)
        return 0;
    __get_cpuid(1, &a, &b, &c, &d);
    const unsigned family = ((a >> 8) & 0xf) + ((a >> 20) & 0xff);
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") ? family : 0;
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

int ml__cpu_x86_level(void)
{
#if defined(__x86_64__)
    return cpu_has_avx512vnni() ? 2 : cpu_has_avx2() ? 1 : 0;
#else
    return 0;
#endif
}

/* Every variant the library knows, slowest first (but avx512lanes, which
 * sits below avx512 so that avx512 stays the widest).  `table` is NULL
 * where this build does not have it. */
typedef struct variant {
    const char *env;       /* the ML_KERNELS value */
    const ml_kernels *table;
    int (*runs)(void);     /* can this CPU run it? */
} variant;

static const variant variants[] = {
    {.env = "scalar", .table = &ml__kernels_scalar, .runs = cpu_has_nothing_special},
#if defined(__x86_64__)
    {.env = "avx2", .table = &ml__kernels_avx2, .runs = cpu_has_avx2},
    /* avx512's kernels, the K prompts but one way (blocks_avx512.c):
     * before avx512, which stays the widest, the one it must beat */
    {.env = "avx512lanes", .table = &ml__kernels_avx512_lanes, .runs = cpu_has_avx512vnni},
    {.env = "avx512", .table = &ml__kernels_avx512, .runs = cpu_has_avx512vnni},
    {.env = "amx", .table = &ml__kernels_amx, .runs = cpu_has_amx},
#else
    {.env = "avx2"},
    {.env = "avx512lanes"},
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

void ml__kernels_take(ml_kernels *to, ml_kslot s, const ml_kernels *from)
{
    switch (s) {
    case ML_KS_QUANTIZE_Q8_0:
        to->quantize_q8_0 = from->quantize_q8_0;
        to->quantize_q8_k = from->quantize_q8_k;
        break;
    case ML_KS_MATVEC_Q8_0: to->matvec_q8_0 = from->matvec_q8_0; break;
    case ML_KS_MATVEC_Q4_0: to->matvec_q4_0 = from->matvec_q4_0; break;
    case ML_KS_MATMUL_Q8_0:
        to->matmul_q8_0 = from->matmul_q8_0;
        to->matmul_x[0] = from->matmul_x[0];
        break;
    case ML_KS_MATMUL_Q4_0:
        to->matmul_q4_0 = from->matmul_q4_0;
        to->matmul_x[1] = from->matmul_x[1];
        break;
    case ML_KS_MATVEC_BLK: to->matvec_blk = from->matvec_blk; break;
    case ML_KS_MATMUL_BLK:
        to->matmul_blk = from->matmul_blk;
        to->matmul_blk_x = from->matmul_blk_x;
        to->blk_to_q8_0 = from->blk_to_q8_0;
        break;
    case ML_KS_FMATH: to->fmath = from->fmath; break;
    default: break;
    }
}

int ml__kernels_same(ml_kslot s, const ml_kernels *a, const ml_kernels *b)
{
    ml_kernels x, y;
    memset(&x, 0, sizeof x);
    memset(&y, 0, sizeof y);
    ml__kernels_take(&x, s, a);
    ml__kernels_take(&y, s, b);
    return memcmp(&x, &y, sizeof x) == 0;
}

/* The choice for the process: each slot's variant, and the table made of
 * them, named after the widest variant the CPU runs (the one it used to
 * run whole, and the base the probe moves away from). */
typedef struct choice {
    const variant *from[ML_KS_COUNT];
    ml_kernels table;
    int mixed; /* not all of one variant */
} choice;

static choice chosen;
static pthread_once_t chosen_once = PTHREAD_ONCE_INIT;

/* Another variant replaces the widest one for a kernel only when it is
 * this much faster on the probe's best times, in two probes: the margin
 * keeps near ties from flipping between runs, and the second probe (run
 * only for the kernels the first would switch) a burst of noise on a
 * busy machine, where the first probe alone now and then took one of two
 * level variants for clearly faster (docs/speed-history.md). */
#define SWITCH_MARGIN 1.10
#define PROBE_TURNS 5
#define ALL_SLOTS ((1u << ML_KS_COUNT) - 1)

typedef double probe_times[ML_KS_COUNT][ML_PROBE_MAX];

/* The variants the probe compares: every usable one but scalar (a SIMD
 * variant always beats it) where there is another. */
static size_t candidates(const variant **out)
{
    size_t n = 0;
    for (size_t i = 1; i < N_VARIANTS; i++)
        if (usable(&variants[i]) && n < ML_PROBE_MAX)
            out[n++] = &variants[i];
    if (n == 0)
        out[n++] = &variants[0];
    return n;
}

unsigned ml__kernels_beating(const double *t, size_t n)
{
    unsigned set = 0;
    for (size_t i = 0; i + 1 < n; i++)
        if (t[i] * SWITCH_MARGIN < t[n - 1])
            set |= 1u << i;
    return set;
}

size_t ml__kernels_fastest(const double *t, unsigned set, size_t n)
{
    size_t best = n - 1;
    for (size_t i = 0; i + 1 < n; i++) /* a tie: the later (wider) one */
        if ((set & 1u << i) && (best == n - 1 || t[i] <= t[best]))
            best = i;
    return best;
}

/* Each slot's winner in the two probes (the widest where there is none
 * or the probe cannot run). */
static void probe_winners(const variant *const *cand, size_t n, size_t *win)
{
    const ml_kernels *tables[ML_PROBE_MAX];
    probe_times first, second;
    unsigned won[ML_KS_COUNT], recheck = 0;
    for (size_t i = 0; i < n; i++)
        tables[i] = cand[i]->table;
    const int timed = n > 1 && ml__kernels_probe(tables, n, ALL_SLOTS, PROBE_TURNS, first);
    for (int s = 0; s < ML_KS_COUNT; s++) {
        won[s] = timed ? ml__kernels_beating(first[s], n) : 0;
        recheck |= won[s] ? 1u << s : 0;
    }
    if (recheck && !ml__kernels_probe(tables, n, recheck, PROBE_TURNS, second))
        recheck = 0;
    for (int s = 0; s < ML_KS_COUNT; s++) {
        unsigned confirmed = 0;
        if (recheck & 1u << s)
            confirmed = won[s] & ml__kernels_beating(second[s], n);
        win[s] = ml__kernels_fastest(second[s], confirmed, n);
    }
}

static void choose(void)
{
    const variant *cand[ML_PROBE_MAX];
    size_t win[ML_KS_COUNT];
    const size_t n = candidates(cand), widest = n - 1;
    probe_winners(cand, n, win);
    chosen.table = *cand[widest]->table;
    for (int s = 0; s < ML_KS_COUNT; s++) {
        chosen.from[s] = cand[win[s]];
        chosen.mixed |= win[s] != widest;
        ml__kernels_take(&chosen.table, (ml_kslot)s, cand[win[s]]->table);
    }
}

static const choice *the_choice(void)
{
    pthread_once(&chosen_once, choose);
    return &chosen;
}

static const char *const slot_names[ML_KS_COUNT] = {
    "quantize_q8_0", "matvec_q8_0", "matvec_q4_0", "matmul_q8_0",
    "matmul_q4_0",   "matvec_blk",  "matmul_blk",  "fmath",
};

/* Decode's prefetch distances (ml_prefetch, kernels_x86.h), a profile
 * per CPU, each measured on its machines (docs/speed-history.md, sections
 * 17, 20 and 38).  near: Intel Xeons (Sapphire and Emerald Rapids), where
 * 3 KiB of a K-quant beat 1 to 4 KiB and 6 + 2 KiB of Q4_0 beat 4 + 1 and
 * 3 + 1.  far: Zen 4, where the K-quants' decode read 13% more bytes a
 * second 8 KiB ahead than 3, and the two-row Q4_0 (AVX-512) 4% more 8
 * KiB ahead than 6; Q8_0 lost there when asked farther.  far-k: Zen 5,
 * where the K-quants gained 8 KiB ahead as on Zen 4 but Q4_0's two
 * threads lost at 8 + 2 KiB.  Other CPUs (Zen 3 unmeasured, AArch64,
 * which has its own) keep near. */
static const ml_prefetch prefetch_near = {3072, 1024, 6144, 2048, 3072, "near"};
static const ml_prefetch prefetch_far = {3072, 1024, 8192, 2048, 8192, "far"};
static const ml_prefetch prefetch_far_k = {3072, 1024, 6144, 2048, 8192, "far-k"};
static const ml_prefetch *const prefetch_profiles[] = {&prefetch_near, &prefetch_far,
                                                       &prefetch_far_k};
ml_prefetch ml__prefetch = {3072, 1024, 6144, 2048, 3072, "near"};
static pthread_once_t prefetch_once = PTHREAD_ONCE_INIT;

/* The profile ML_PREFETCH names (near, far, far-k; auto or unset: NULL,
 * the CPU's); *bad set when it names none. */
static const ml_prefetch *prefetch_named(int *bad)
{
    const char *env = getenv("ML_PREFETCH");
    *bad = 0;
    if (!env || !*env || strcmp(env, "auto") == 0)
        return NULL;
    for (size_t i = 0; i < sizeof prefetch_profiles / sizeof prefetch_profiles[0]; i++)
        if (strcmp(env, prefetch_profiles[i]->name) == 0)
            return prefetch_profiles[i];
    *bad = 1;
    return NULL;
}

/* This CPU's profile (the comment above prefetch_near). */
static const ml_prefetch *prefetch_of_cpu(void)
{
#if defined(__x86_64__)
    switch (amd_avx512_family()) {
    case 25:
        return &prefetch_far;
    case 26:
        return &prefetch_far_k;
    }
#endif
    return &prefetch_near;
}

static void set_prefetch(void)
{
    int bad;
    const ml_prefetch *p = prefetch_named(&bad);
    ml__prefetch = p ? *p : *prefetch_of_cpu();
}

/* What ML_KERNELS asks for: a variant for every kernel (NULL: the
 * chooser's), and a variant of a kernel's own (NULL: none). */
typedef struct request {
    const variant *base;
    const variant *own[ML_KS_COUNT];
} request;

/* The refusals: what is wrong, without the variable, which
 * ml__kernels_refused_var names. */
static const char unknown_variant[] =
    "unknown kernel variant (expected scalar, avx2, avx512lanes, avx512, amx, neon, neondot or "
    "auto, then optionally ,KERNEL=VARIANT with KERNEL one of quantize_q8_0, matvec_q8_0, "
    "matvec_q4_0, matmul_q8_0, matmul_q4_0, matvec_blk, matmul_blk, fmath)";

/* Why variant v cannot run here (NULL: it can). */
static const char *refusal(const variant *v)
{
    if (!v->table)
        return "this build has no such kernel variant (avx2, avx512lanes, avx512 and amx: "
               "x86-64 builds only; neon and neondot: AArch64 builds only)";
    if (!v->runs())
        return "this CPU lacks the instructions of the requested kernel variant";
    return NULL;
}

/* The variant named by the n characters at name (its ML_KERNELS value or
 * its table name), or NULL. */
static const variant *find_n(const char *name, size_t n)
{
    char buf[24];
    if (n >= sizeof buf)
        return NULL;
    memcpy(buf, name, n);
    buf[n] = 0;
    return find(buf);
}

/* One ",KERNEL=VARIANT" item of n characters into r; its error or NULL. */
static const char *read_own(const char *item, size_t n, request *r)
{
    const char *eq = memchr(item, '=', n);
    if (!eq)
        return unknown_variant;
    for (int s = 0; s < ML_KS_COUNT; s++)
        if (strlen(slot_names[s]) == (size_t)(eq - item) &&
            memcmp(item, slot_names[s], (size_t)(eq - item)) == 0) {
            r->own[s] = find_n(eq + 1, n - (size_t)(eq - item) - 1);
            return r->own[s] ? refusal(r->own[s]) : unknown_variant;
        }
    return unknown_variant;
}

static const char unknown_prefetch[] =
    "unknown prefetch profile (expected near, far, far-k or auto)";

const char *ml__kernels_refused_var(const char *why)
{
    return why == unknown_prefetch ? "ML_PREFETCH" : "ML_KERNELS";
}

/* ML_KERNELS=VARIANT[,KERNEL=VARIANT]... read into r (VARIANT auto, empty
 * or unset: the chooser's); 0 and *why on an error. */
static int read_request(request *r, const char **why)
{
    const char *env = getenv("ML_KERNELS"), *reason = NULL;
    memset(r, 0, sizeof *r);
    if (!env)
        env = "";
    size_t n = strcspn(env, ",");
    if (n && !(n == 4 && memcmp(env, "auto", 4) == 0)) {
        r->base = find_n(env, n);
        reason = r->base ? refusal(r->base) : unknown_variant;
    }
    for (const char *p = env + n; !reason && *p == ',';) {
        p++;
        const size_t len = strcspn(p, ",");
        reason = read_own(p, len, r);
        p += len;
    }
    int bad_prefetch;
    prefetch_named(&bad_prefetch);
    if (!reason && bad_prefetch)
        reason = unknown_prefetch;
    if (reason && why)
        *why = reason;
    if (!reason)
        pthread_once(&prefetch_once, set_prefetch);
    return reason == NULL;
}

/* The variant kernel s comes from under request r. */
static const variant *slot_variant(const request *r, int s)
{
    if (r->own[s])
        return r->own[s];
    return r->base ? r->base : the_choice()->from[s];
}

/* The table for every kernel: the base variant's or the chooser's. */
static const ml_kernels *base_table(const request *r)
{
    if (r->base)
        return r->base->table;
    const choice *c = the_choice();
    /* all of one variant: that variant's own table */
    return c->mixed ? &c->table : c->from[0]->table;
}

const ml_kernels *ml__kernels_select(const char **why)
{
    request r;
    return read_request(&r, why) ? base_table(&r) : NULL;
}

const ml_kernels *ml__kernels_select_into(ml_kernels *buf, const char **why)
{
    request r;
    if (!read_request(&r, why))
        return NULL;
    const ml_kernels *k = base_table(&r);
    int own = 0;
    for (int s = 0; s < ML_KS_COUNT; s++)
        own |= r.own[s] != NULL;
    if (!own)
        return k;
    *buf = *k;
    for (int s = 0; s < ML_KS_COUNT; s++)
        if (r.own[s])
            ml__kernels_take(buf, (ml_kslot)s, r.own[s]->table);
    return buf;
}

size_t ml__kernels_available(const ml_kernels **out, size_t cap)
{
    size_t n = 0;
    for (size_t i = 0; i < N_VARIANTS && n < cap; i++)
        if (usable(&variants[i]))
            out[n++] = variants[i].table;
    return n;
}

const char *ml_kernels_name(void)
{
    const ml_kernels *k = ml__kernels_select(NULL);
    return k ? k->name : "none";
}

const char *ml_kernels_fmath_name(void)
{
    ml_kernels buf;
    const ml_kernels *k = ml__kernels_select_into(&buf, NULL);
    return k ? k->fmath->name : "none";
}

const char *ml_kernels_slot(unsigned i)
{
    return i < ML_KS_COUNT ? slot_names[i] : NULL;
}

const char *ml_kernels_slot_variant(unsigned i)
{
    request r;
    if (i >= ML_KS_COUNT)
        return NULL;
    if (!read_request(&r, NULL))
        return "none";
    return slot_variant(&r, (int)i)->table->name;
}

const char *ml_kernels_prefetch_name(void)
{
    request r;
    return read_request(&r, NULL) ? ml__prefetch.name : "none";
}
