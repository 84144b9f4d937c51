/* k_lanes.h - private to blocks_x86.h, which includes it twice: the
 * K-quant products with the tokens in the lanes (blocks_x86.h says how
 * they work) for KL_LANES tokens a group, sixteen in 512-bit registers
 * (prefill) and eight in 256-bit ones (a few tokens: a verify step, a
 * few sequences side by side), where half of a 512-bit group would be
 * idle at the price of a whole one.  The includer defines:
 *   KL_LANES   16 or 8
 *   KL_N(f)    the instance's name of f
 *   KL_X       the instance's activation group type
 *   KL_VI, KL_VF, KL_V(op), KL_ZERO_I()   the registers and intrinsics
 *   KL_JOIN(lo, hi)   a register from eight lanes' halves (hi unused at 8)
 * and undefines them after. */

/* A group of KL_LANES tokens' super-block. */
typedef struct KL_X {
    KL_VI c[64];    /* lane t: bytes 4c..4c+3 of token t's */
    KL_VI as[8];    /* lane t: sub-blocks 2p and 2p + 1's sums of x, 16 bits each */
    KL_VF xd;        /* lane t: token t's scale, +0 past the last token */
} KL_X;

/* Tokens [0, nt) of a group (nt <= KL_LANES) into xg[0..nsb): x their
 * activations (cols apart), xd their scales (nsb apart); the lanes past
 * nt zero. */
static void KL_N(kl_x_group)(ml_type T, const int8_t *x, size_t cols, const float *xd, size_t nt,
                       KL_X *xg)
{
    const size_t nsb = cols / 256;
    for (size_t k = 0; k < nsb; k++) {
        for (int q = 0; q < 8; q++) {
            __m256i v[2][8];
            UNROLL
            for (size_t h = 0; h < KL_LANES / 8; h++) {
                UNROLL
                for (size_t t = 0; t < 8; t++)
                    v[h][t] = 8 * h + t < nt ? load256(x + (8 * h + t) * cols + 256 * k + 32 * q)
                                             : _mm256_setzero_si256();
                transpose8x8(v[h]);
            }
            UNROLL
            for (int c = 0; c < 8; c++)
                xg[k].c[8 * q + c] = KL_JOIN(v[0][c], v[1][c]);
        }
        _Alignas(64) float d[KL_LANES];
        for (size_t t = 0; t < KL_LANES; t++)
            d[t] = t < nt ? xd[t * nsb + k] : 0.0f;
        xg[k].xd = KL_V(load_ps)(d);
        for (int p = 0; p < 8; p++)
            xg[k].as[p] = KL_ZERO_I();
    }
    for (size_t t = 0; t < nt; t++)
        kl_x_sums(T, x + t * cols, cols, t, (char *)xg, sizeof *xg, offsetof(KL_X, as),
                  sizeof(KL_VI));
}

/* k_s in the lanes: the same operations per lane. */
ALWAYS_INLINE KL_VF KL_N(kl_s)(ml_type T, KL_VI isum, KL_VI msum, KL_VF d, KL_VF dmin, KL_VF xdv)
{
    const KL_VF s = KL_V(mul_ps)(KL_V(cvtepi32_ps)(isum), KL_V(mul_ps)(d, xdv));
    if (k_dmin_at(T) < 0)
        return s;
    return KL_V(sub_ps)(s, KL_V(mul_ps)(KL_V(cvtepi32_ps)(msum), KL_V(mul_ps)(dmin, xdv)));
}

/* Eight rows x KL_LANES tokens over every super-block: out[row][token]. */
ALWAYS_INLINE void KL_N(kl_tile)(ml_type T, const kl_row *rows, const KL_X *xg, size_t nsb,
                           float out[KL_ROWS][KL_LANES])
{
    const int nsub = kl_nsub(T), per = 64 / nsub;
    KL_VF acc[KL_ROWS][8];
    for (int r = 0; r < KL_ROWS; r++)
        for (int a = 0; a < 8; a++)
            acc[r][a] = KL_V(setzero_ps)();
    for (size_t k = 0; k < nsb; k++) {
        const kl_row *rw = rows + k * KL_ROWS;
        const KL_X *x = xg + k;
        KL_VI is[KL_ROWS], ms[KL_ROWS];
        UNROLL
        for (int r = 0; r < KL_ROWS; r++)
            is[r] = ms[r] = KL_ZERO_I();
        UNROLL
        for (int s = 0; s < nsub; s++) {
            KL_VI v[KL_ROWS];
            UNROLL
            for (int r = 0; r < KL_ROWS; r++)
                v[r] = KL_ZERO_I();
            UNROLL
            for (int g = 0; g < per; g++) {
                const KL_VI xv = x->c[per * s + g];
                UNROLL
                for (int r = 0; r < KL_ROWS; r++)
                    v[r] = KL_V(dpbusd_epi32)(
                        v[r], KL_V(set1_epi32)(*(const kl_u32 *)(rw[r].q + 4 * (per * s + g))), xv);
            }
            UNROLL
            for (int r = 0; r < KL_ROWS; r++)
                is[r] = KL_V(add_epi32)(is[r], KL_V(mullo_epi32)(v[r], KL_V(set1_epi32)(rw[r].sc[s])));
        }
        UNROLL
        for (int p = 0; p < nsub / 2; p++)
            UNROLL
            for (int r = 0; r < KL_ROWS; r++)
                ms[r] = KL_V(dpwssd_epi32)(ms[r], KL_V(set1_epi32)(rw[r].mt[p]), x->as[p]);
        UNROLL
        for (int r = 0; r < KL_ROWS; r++) {
            /* Q6_K and IQ4_XS: ms is the offsets' part of isum */
            const int off = T == ML_TYPE_Q6_K || T == ML_TYPE_IQ4_XS;
            const KL_VI isum = off ? KL_V(sub_epi32)(is[r], ms[r]) : is[r];
            const KL_VF sv = KL_N(kl_s)(T, isum, off ? KL_ZERO_I() : ms[r],
                                   KL_V(set1_ps)(rw[r].d), KL_V(set1_ps)(rw[r].dmin), x->xd);
            acc[r][k % 8] = KL_V(add_ps)(acc[r][k % 8], sv);
        }
    }
    for (int r = 0; r < KL_ROWS; r++) /* rule 3's fold, lane by lane */
        KL_V(storeu_ps)(out[r], KL_V(add_ps)(KL_V(add_ps)(KL_V(add_ps)(acc[r][0], acc[r][4]),
                                                             KL_V(add_ps)(acc[r][2], acc[r][6])),
                                               KL_V(add_ps)(KL_V(add_ps)(acc[r][1], acc[r][5]),
                                                             KL_V(add_ps)(acc[r][3], acc[r][7]))));
}

static void KL_N(kl_tile_q4_k)(const kl_row *rows, const KL_X *xg, size_t nsb, float out[KL_ROWS][KL_LANES])
{
    KL_N(kl_tile)(ML_TYPE_Q4_K, rows, xg, nsb, out);
}

static void KL_N(kl_tile_iq4_xs)(const kl_row *rows, const KL_X *xg, size_t nsb,
                           float out[KL_ROWS][KL_LANES])
{
    KL_N(kl_tile)(ML_TYPE_IQ4_XS, rows, xg, nsb, out);
}

static void KL_N(kl_tile_q6_k)(const kl_row *rows, const KL_X *xg, size_t nsb, float out[KL_ROWS][KL_LANES])
{
    KL_N(kl_tile)(ML_TYPE_Q6_K, rows, xg, nsb, out);
}

/* A tile's results into y token by token (token k's eight rows at y + k
 * * ldy, k < nt): a row's tokens lie ldy floats apart, often a
 * multiple of 4 KiB, so storing them one by one wrote sixteen lines of
 * one L1 set eight times over. */
ALWAYS_INLINE void KL_N(kl_store)(float out[KL_ROWS][KL_LANES], size_t nt, float *y, size_t ldy)
{
    for (size_t h = 0; h < KL_LANES / 8; h++) {
        __m256i v[8];
        UNROLL
        for (int r = 0; r < 8; r++)
            v[r] = load256(out[r] + 8 * h);
        transpose8x8(v);
        for (size_t k = 0; k < 8 && 8 * h + k < nt; k++)
            _mm256_storeu_si256((__m256i *)(void *)(y + (8 * h + k) * ldy), v[k]);
    }
}

/* Rows [r0, r1) times the nc tokens (nc <= KL_CHUNK) whose form is xg:
 * token k's results at y + k * ldy.  rows: scratch for a tile's rows. */
static void KL_N(kl_chunk)(ml_type t, const uint8_t *w, size_t cols, size_t r0, size_t r1,
                     const KL_X *xg, size_t nc, kl_row *rows, float *y, size_t ldy)
{
    const size_t nsb = cols / 256;
    for (size_t r = r0; r < r1; r += KL_ROWS) {
        const size_t nr = r1 - r < KL_ROWS ? r1 - r : KL_ROWS;
        kl_rows(t, w, cols, r, nr, rows);
        for (size_t g = 0; g * KL_LANES < nc; g++) {
            const size_t tg = g * KL_LANES, nt = nc - tg < KL_LANES ? nc - tg : KL_LANES;
            float out[KL_ROWS][KL_LANES];
            if (t == ML_TYPE_Q6_K)
                KL_N(kl_tile_q6_k)(rows, xg + g * nsb, nsb, out);
            else if (t == ML_TYPE_IQ4_XS)
                KL_N(kl_tile_iq4_xs)(rows, xg + g * nsb, nsb, out);
            else
                KL_N(kl_tile_q4_k)(rows, xg + g * nsb, nsb, out);
            if (nr == KL_ROWS) {
                KL_N(kl_store)(out, nt, y + tg * ldy + r, ldy);
                continue;
            }
            for (size_t i = 0; i < nr; i++)
                for (size_t k = 0; k < nt; k++)
                    y[(tg + k) * ldy + r + i] = out[i][k];
        }
    }
}

