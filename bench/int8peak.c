/* int8peak.c - this machine's peak int8 multiply-add throughput with the
 * dot-product instructions mlcore's kernels are built on, all threads at
 * once: the ceiling prefill (which is compute-bound) is set against, as
 * bandwidth.c's figure is the ceiling of decode.
 *
 *   int8peak [-t THREADS]        (or `int8peak THREADS`, like bandwidth.c)
 *
 * Per instruction set the CPU runs (cpuid at run time on x86, so one build
 * probes every variant; NEON sdot where the build targets it), each thread
 * loops over ACCS independent accumulators, enough to be bound by
 * throughput, not by latency: these asm loops measured the same with 12
 * chains as with 24 (an earlier intrinsics test at 256 bits had seemed
 * latency-bound at 12), so 24 leaves room for a CPU
 * with more units or a longer latency.  Counted as
 * GOP/s, one multiply-add being 2 ops (vpdpbusd ymm = 32 multiply-adds,
 * zmm = 64; vpmaddubsw+vpmaddwd+vpaddd on ymm = 32; sdot q = 16); best
 * of 5 timed runs of ~0.1 s.  Prints, for a script to parse:
 *     ISA THREADS GOPS          one line per instruction set measured
 *     rule3-512 THREADS GOPS    vpdpbusd on zmm with rule 3's float steps
 *                               beside them (loop_rule3_512): the ceiling
 *                               of the AVX-512 prefill tiles
 *     peak ISA THREADS GOPS     the fastest instruction set (rule3-512 is
 *                               not one)
 * where ISA is amx-int8-k64, amx-int8-k32, avx512vnni-512,
 * avx512vnni-256, avxvnni-256, avx2-256 or neon-sdot-128 (amx-int8-k32:
 * TDPBSSD on one 32-byte block, as kernels_amx.c issues it).
 * Built and run by bench/bench-run.sh; by hand:
 *     cc -O2 -pthread bench/int8peak.c -o int8peak && ./int8peak -t 2 */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE /* syscall */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_THREADS 64
/* Independent accumulators per thread: 24 of 32 vector registers (AVX-512,
 * NEON), 12 of 16 where only the VEX encodings exist (AVX-VNNI, AVX2). */
#define ACCS 24
#define ACCS_VEX 12

/* One probe: runs `iters` rounds of its accumulators. */
typedef struct probe {
    const char *name;
    int (*runs)(void);
    void (*loop)(uint64_t iters);
    unsigned multiply_adds_per_iter;
    int rule3; /* a loop with rule 3's float steps: a ceiling, not an instruction set's peak */
} probe;

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The loops are written in assembly: with intrinsics over an array of
 * accumulators GCC 12 spills and copies registers inside the loop (seen
 * in objdump), which measures its register allocation, not the unit.
 * The operands' values do not matter to integer units' speed, so the
 * registers are not initialized.  Clobber names above xmm15 need the
 * AVX-512 target. */
#define R8(m, a, b, c, d, e, f, g, h) m(a) m(b) m(c) m(d) m(e) m(f) m(g) m(h)
#define DP512(r) "vpdpbusd %%zmm0, %%zmm1, %%zmm" #r "\n\t"
#define DP256(r) "vpdpbusd %%ymm0, %%ymm1, %%ymm" #r "\n\t"
#define DPVEX(r) "%{vex%} vpdpbusd %%ymm0, %%ymm1, %%ymm" #r "\n\t"
/* AVX2's int8 product as kernels_avx2.c does it: vpmaddubsw (u8 x s8
 * pairs summed to i16), vpmaddwd by ones (ymm15; to i32), vpaddd into an
 * accumulator.  The products do not depend on the accumulators, so one
 * temporary (ymm2, renamed each time) serves all. */
#define MADD(r) "vpmaddubsw %%ymm1, %%ymm0, %%ymm2\n\tvpmaddwd %%ymm15, %%ymm2, %%ymm2\n\t" \
                "vpaddd %%ymm2, %%ymm" #r ", %%ymm" #r "\n\t"
#define CLOBBER_16 "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", \
                   "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15"
#define CLOBBER_32 CLOBBER_16, "xmm16", "xmm17", "xmm18", "xmm19", "xmm20", "xmm21", "xmm22", \
                   "xmm23", "xmm24", "xmm25"
#define TARGET_512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))

TARGET_512 static void loop_vnni512(uint64_t iters)
{
    __asm__ volatile("1:\n\t" R8(DP512, 2, 3, 4, 5, 6, 7, 8, 9) R8(DP512, 10, 11, 12, 13, 14, 15, 16, 17)
                         R8(DP512, 18, 19, 20, 21, 22, 23, 24, 25) "dec %0\n\tjnz 1b"
                     : "+r"(iters)
                     :
                     : CLOBBER_32, "cc");
}

TARGET_512 static void loop_vnni256(uint64_t iters)
{
    __asm__ volatile("1:\n\t" R8(DP256, 2, 3, 4, 5, 6, 7, 8, 9) R8(DP256, 10, 11, 12, 13, 14, 15, 16, 17)
                         R8(DP256, 18, 19, 20, 21, 22, 23, 24, 25) "dec %0\n\tjnz 1b"
                     : "+r"(iters)
                     :
                     : CLOBBER_32, "cc");
}

/* Rule 3 (lib/kernels/kernels.h) adds float steps to every block sum the
 * products make: (float)isum, times (wd * xd), added to an accumulator,
 * no FMA: per 16 block sums (one zmm), 1 vcvtdq2ps, 2 vmulps, 1 vaddps.
 * A block of 32 multiply-adds is half a zmm vpdpbusd, so 8 vpdpbusd make
 * 16 sums.  Where those float instructions compete for the multiply-
 * add's execution ports (on some CPUs vmulps shares vpdpbusd's; the
 * measured ratios are in docs/speed.md) this is the fastest
 * rate of int8 products any kernel bound by rule 3 can reach; the
 * multiply-adds are counted, not the float steps.  Per round: 16
 * vpdpbusd on zmm2-17, two sets of the float steps, each converting an
 * integer accumulator and adding into its own float one (zmm24, zmm25):
 * the only chain through a round is one vaddps, as in the kernels, so
 * the loop measures the units, not a latency. */
#define RULE3_512(i, m, a, s)                                                                    \
    "vcvtdq2ps %%zmm" #i ", %%zmm" #m "\n\t"                                                  \
    "vmulps %%zmm0, %%zmm1, %%zmm" #a "\n\t"                                                  \
    "vmulps %%zmm" #m ", %%zmm" #a ", %%zmm" #m "\n\t"                                        \
    "vaddps %%zmm" #m ", %%zmm" #s ", %%zmm" #s "\n\t"
TARGET_512 static void loop_rule3_512(uint64_t iters)
{
    __asm__ volatile("1:\n\t" R8(DP512, 2, 3, 4, 5, 6, 7, 8, 9) RULE3_512(2, 18, 19, 24)
                         R8(DP512, 10, 11, 12, 13, 14, 15, 16, 17) RULE3_512(10, 20, 21, 25)
                         "dec %0\n\tjnz 1b"
                     : "+r"(iters)
                     :
                     : CLOBBER_32, "cc");
}

static int has_vnni512(void)
{
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
}

/* AVX-VNNI: vpdpbusd in its VEX encoding (Alder Lake on), 16 registers
 * (%{ %} is a literal brace in GCC asm). */
__attribute__((target("avx2"))) static void loop_avxvnni(uint64_t iters)
{
    __asm__ volatile("1:\n\t" R8(DPVEX, 2, 3, 4, 5, 6, 7, 8, 9) DPVEX(10) DPVEX(11) DPVEX(12)
                         DPVEX(13) "dec %0\n\tjnz 1b"
                     : "+r"(iters)
                     :
                     : CLOBBER_16, "cc");
}

/* cpuid leaf 7 subleaf 1, EAX bit 4 (not every compiler's
 * __builtin_cpu_supports knows "avxvnni"); its registers are AVX2's. */
static int has_avxvnni(void)
{
    unsigned a, b, c, d;
    return __builtin_cpu_supports("avx2") && __get_cpuid_count(7, 1, &a, &b, &c, &d) &&
           (a >> 4 & 1);
}

__attribute__((target("avx2"))) static void loop_avx2(uint64_t iters)
{
    __asm__ volatile("vpcmpeqw %%ymm15, %%ymm15, %%ymm15\n\t"
                     "vpsrlw $15, %%ymm15, %%ymm15\n\t" /* 1 in every i16 */
                     "1:\n\t" R8(MADD, 3, 4, 5, 6, 7, 8, 9, 10) MADD(11) MADD(12) MADD(13)
                         MADD(14) "dec %0\n\tjnz 1b"
                     : "+r"(iters)
                     :
                     : CLOBBER_16, "cc");
}

static int has_avx2(void)
{
    return __builtin_cpu_supports("avx2");
}

/* AMX (kernels_amx.c): TDPBSSD into four result tiles from two pairs of
 * operand tiles, 16 x 16 x K multiply-adds each: K = 64, the
 * instruction's peak, and K = 32, one Q8_0 block a product, the form
 * the kernel uses (its per-block scales need each block's sums apart).
 * Each thread loads its tile configuration (a constant: see
 * kernels_amx.c); Linux must first let the process use the tile state. */
#define AMX_TARGET __attribute__((target("amx-tile,amx-int8")))
typedef struct amx_config {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} __attribute__((aligned(64))) amx_config;
static const amx_config amx_k64 = {1, 0, {0}, {64, 64, 64, 64, 64, 64, 64, 64},
                                   {16, 16, 16, 16, 16, 16, 16, 16}};
static const amx_config amx_k32 = {1, 0, {0}, {64, 64, 64, 64, 32, 32, 64, 64},
                                   {16, 16, 16, 16, 16, 16, 8, 8}};

AMX_TARGET static void amx_loop(const amx_config *c, uint64_t iters)
{
    _tile_loadconfig(c);
    for (uint64_t i = 0; i < iters; i++) {
        _tile_dpbssd(0, 4, 6);
        _tile_dpbssd(1, 4, 7);
        _tile_dpbssd(2, 5, 6);
        _tile_dpbssd(3, 5, 7);
    }
    _tile_release();
}

static void loop_amx64(uint64_t iters)
{
    amx_loop(&amx_k64, iters);
}

static void loop_amx32(uint64_t iters)
{
    amx_loop(&amx_k32, iters);
}

/* cpuid leaf 7 EDX bits 24 and 25 (AMX-TILE, AMX-INT8), the tile state
 * enabled in XCR0 (bits 17, 18), and Linux's permission (arch_prctl
 * ARCH_REQ_XCOMP_PERM of XTILEDATA), as lib/kernels/dispatch.c asks. */
static int has_amx(void)
{
    unsigned a, b, c, d, lo, hi;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || (d & (3u << 24)) != (3u << 24) ||
        !__builtin_cpu_supports("avx2"))
        return 0;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (lo & (3u << 17)) == (3u << 17) && syscall(SYS_arch_prctl, 0x1023, 18) == 0;
}

static const probe probes[] = {
    {"amx-int8-k64", has_amx, loop_amx64, 4 * 16 * 16 * 64, 0},
    {"amx-int8-k32", has_amx, loop_amx32, 4 * 16 * 16 * 32, 0},
    {"avx512vnni-512", has_vnni512, loop_vnni512, ACCS * 64, 0},
    {"avx512vnni-256", has_vnni512, loop_vnni256, ACCS * 32, 0},
    {"avxvnni-256", has_avxvnni, loop_avxvnni, ACCS_VEX * 32, 0},
    {"avx2-256", has_avx2, loop_avx2, ACCS_VEX * 32, 0},
    {"rule3-512", has_vnni512, loop_rule3_512, 16 * 64, 1},
};

#elif defined(__aarch64__) && defined(__ARM_FEATURE_DOTPROD)
#define R8(m, a, b, c, d, e, f, g, h) m(a) m(b) m(c) m(d) m(e) m(f) m(g) m(h)
#define SDOT(r) "sdot v" #r ".4s, v0.16b, v1.16b\n\t"
static void loop_sdot(uint64_t iters)
{
    __asm__ volatile("1:\n\t" R8(SDOT, 2, 3, 4, 5, 6, 7, 8, 9) R8(SDOT, 10, 11, 12, 13, 14, 15, 16, 17)
                         R8(SDOT, 18, 19, 20, 21, 22, 23, 24, 25) "subs %0, %0, #1\n\tbne 1b"
                     : "+r"(iters)
                     :
                     : "v0", "v1", "v2", "v3", "v4", "v5", "v6", "v7", "v8", "v9", "v10", "v11",
                       "v12", "v13", "v14", "v15", "v16", "v17", "v18", "v19", "v20", "v21", "v22",
                       "v23", "v24", "v25", "cc");
}

static int has_sdot(void)
{
    return 1; /* the build targets it */
}

static const probe probes[] = {
    {"neon-sdot-128", has_sdot, loop_sdot, ACCS * 16, 0},
};
#else
static const probe probes[] = {{NULL, NULL, NULL, 0, 0}};
#endif

#define N_PROBES (sizeof probes / sizeof probes[0])

typedef struct job {
    const probe *p;
    uint64_t iters;
} job;

static void *run_job(void *arg)
{
    job *j = arg;
    j->p->loop(j->iters);
    return NULL;
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Wall time of `threads` threads each running `iters` rounds. */
static double timed(const probe *p, unsigned threads, uint64_t iters)
{
    pthread_t th[MAX_THREADS];
    job jobs[MAX_THREADS];
    double t0 = now();
    for (unsigned k = 0; k < threads; k++) {
        jobs[k] = (job){p, iters};
        pthread_create(&th[k], NULL, run_job, &jobs[k]);
    }
    for (unsigned k = 0; k < threads; k++)
        pthread_join(th[k], NULL);
    return now() - t0;
}

static double gops(const probe *p, unsigned threads)
{
    uint64_t iters = 1u << 12;
    while (timed(p, 1, iters) < 0.02) /* also warms the clocks up */
        iters *= 2;
    iters *= 5; /* ~0.1 s */
    double best = 1e9;
    for (int r = 0; r < 5; r++) {
        double dt = timed(p, threads, iters);
        best = dt < best ? dt : best;
    }
    return 2.0 * p->multiply_adds_per_iter * (double)iters * threads / best / 1e9;
}

int main(int argc, char **argv)
{
    unsigned threads = 2;
    if (argc == 3 && strcmp(argv[1], "-t") == 0)
        threads = (unsigned)atoi(argv[2]);
    else if (argc == 2)
        threads = (unsigned)atoi(argv[1]);
    else if (argc != 1)
        threads = 0;
    if (threads < 1 || threads > MAX_THREADS) {
        fprintf(stderr, "usage: int8peak [-t THREADS]   (1..%d)\n", MAX_THREADS);
        return 2;
    }
#if defined(__x86_64__)
    __builtin_cpu_init();
#endif
    const probe *best_p = NULL;
    double best = 0;
    for (size_t i = 0; i < N_PROBES; i++) {
        const probe *p = &probes[i];
        if (!p->name || !p->runs())
            continue;
        double g = gops(p, threads);
        printf("%s %u %.1f\n", p->name, threads, g);
        fflush(stdout);
        if (!p->rule3 && g > best)
            best = g, best_p = p;
    }
    if (!best_p) {
        fprintf(stderr, "int8peak: no int8 dot-product instruction in this build or CPU\n");
        return 1;
    }
    printf("peak %s %u %.1f\n", best_p->name, threads, best);
    return 0;
}
