/* check_mlb_header.c - the .mlb header: every row and clause of the
 * validation table in docs/mlb-decisions.md (steps 2-13), one table row per
 * test.  Each row starts from a valid header built in C, mutates fields (or
 * raw reserved bytes), and asserts the exact ml_status, err.field and
 * err.offset from ml_mlb_header_validate, from the same header decoded from
 * its bytes, from the loader and from the streaming verifier; boundary
 * values are tested on both sides.  Also: zero-means-default headers and
 * their derived values, encode/decode of every field at the spec's offsets,
 * the field table against the spec, the magic hints and status names. */
#include "suites.h"
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct hcase {
    const char *name;
    const char *set;   /* tu_apply mutations of the base header */
    ml_status st;
    const char *field; /* expected err.field */
    int64_t offset;    /* expected err.offset */
} hcase;

#define OKC(n, s) {n, s, ML_OK, "", -1}
#define FMT(n, s, f, o) {n, s, ML_E_FORMAT, f, o}
#define SHP(n, s, f, o) {n, s, ML_E_SHAPE, f, o}

/* Valid RoPE scalings and linear attention, extended by later tokens. */
#define L3 "rope_type=1 rope_factor=8 rope_low_freq_factor=1 rope_high_freq_factor=4 rope_orig_max_seq=8192"
#define LIN "rope_type=2 rope_factor=2"
#define YARN "rope_type=3 rope_factor=4 rope_low_freq_factor=32 rope_high_freq_factor=1 rope_orig_max_seq=4096 rope_attn_factor=1.1"
#define LA "lin_k_heads=2 lin_v_heads=4 lin_k_dim=16 lin_v_dim=16 lin_conv=4"
#define MOE "hidden_dim=0 n_experts=8 n_experts_used=2 expert_hidden_dim=32"
#define SWIGLU "swiglu_alpha=1.702 swiglu_limit=7"

/* A 0/1 field: 1 is fine, 2 and 0xffffffff are not. */
#define BOOL_ROWS(f, o)                                   \
    OKC(#f " 1", #f "=1"), FMT(#f " 2", #f "=2", #f, o), \
    FMT(#f " 0xffffffff", #f "=0xffffffff", #f, o)

/* A float that must be finite and >= 0. */
#define NONNEG_ROWS(f, o)                                                          \
    OKC(#f " 0", #f "=0"), OKC(#f " -0.0 (>= 0 holds)", #f "=-0"),                 \
    OKC(#f " 1e-45", #f "=1e-45"), OKC(#f " 3e38", #f "=3e38"),                    \
    FMT(#f " -1", #f "=-1", #f, o), FMT(#f " -1e-45", #f "=-1e-45", #f, o),        \
    FMT(#f " NaN", #f "=nan", #f, o), FMT(#f " -NaN", #f "=-nan", #f, o),          \
    FMT(#f " +inf", #f "=inf", #f, o), FMT(#f " -inf", #f "=-inf", #f, o)

static const hcase cases[] = {
    OKC("base header", ""),
    /* 2. magic */
    FMT("magic GGUF", "magic=GGUF", "magic", 0),
    FMT("magic MLB2", "magic=MLB2", "magic", 0),
    FMT("magic lowercase", "magic=mlb1", "magic", 0),
    FMT("magic MLT1", "magic=MLT1", "magic", 0),
    FMT("magic zero bytes", "magic=", "magic", 0),
    FMT("magic HTML", "magic=<!DO", "magic", 0),
    /* 3. version */
    FMT("version 0", "version=0", "version", 4),
    FMT("version 2", "version=2", "version", 4),
    FMT("version 0xffffffff", "version=0xffffffff", "version", 4),
    /* 4. wtype */
    OKC("wtype 1", "wtype=1"),
    OKC("wtype 2", "wtype=2"),
    FMT("wtype 0", "wtype=0", "wtype", 44),
    OKC("wtype 3", "wtype=3"),
    FMT("wtype 4", "wtype=4", "wtype", 44),
    FMT("wtype 0x101", "wtype=0x101", "wtype", 44),
    /* 5. q8_mask */
    OKC("q8_mask 127 in Q4_0", "q8_mask=127"),
    OKC("q8_mask 64 in Q4_0", "q8_mask=64"),
    FMT("q8_mask 128", "q8_mask=128", "q8_mask", 72),
    FMT("q8_mask 255", "q8_mask=255", "q8_mask", 72),
    FMT("q8_mask 0x80000000", "q8_mask=0x80000000", "q8_mask", 72),
    FMT("q8_mask 1 in Q8_0", "wtype=1 q8_mask=1", "q8_mask", 72),
    FMT("q8_mask 64 in Q8_0", "wtype=1 q8_mask=64", "q8_mask", 72),
    FMT("q8_mask 128 in Q8_0", "wtype=1 q8_mask=128", "q8_mask", 72),
    FMT("q8_mask 1 with a type table", "wtype=3 q8_mask=1", "q8_mask", 72),
    FMT("q8_mask 64 with a type table", "wtype=3 q8_mask=64", "q8_mask", 72),
    /* 6. booleans */
    BOOL_ROWS(qkv_bias, 76),
    BOOL_ROWS(qk_norm, 84),
    BOOL_ROWS(layer_flags, 96),
    BOOL_ROWS(post_norms, 108),
    BOOL_ROWS(scale_f16, 120),
    BOOL_ROWS(attn_gate, 136),
    OKC("shared_classifier 1", "shared_classifier=1"),
    OKC("shared_classifier 2 (any non-zero)", "shared_classifier=2"),
    OKC("shared_classifier 0xffffffff", "shared_classifier=0xffffffff"),
    /* 7. act (2: the clamped SwiGLU, with its alpha and limit) */
    OKC("act 1", "act=1"),
    OKC("act 2 with alpha and limit", "act=2 " SWIGLU),
    FMT("act 3", "act=3", "act", 104),
    FMT("act 0xffffffff", "act=0xffffffff", "act", 104),
    FMT("act 2 without alpha", "act=2 swiglu_limit=7", "swiglu_alpha", 192),
    FMT("act 2 alpha -0.0", "act=2 swiglu_alpha=-0 swiglu_limit=7", "swiglu_alpha", 192),
    FMT("act 2 alpha -1", "act=2 swiglu_alpha=-1 swiglu_limit=7", "swiglu_alpha", 192),
    FMT("act 2 alpha NaN", "act=2 swiglu_alpha=nan swiglu_limit=7", "swiglu_alpha", 192),
    FMT("act 2 alpha inf", "act=2 swiglu_alpha=inf swiglu_limit=7", "swiglu_alpha", 192),
    FMT("act 2 without limit", "act=2 swiglu_alpha=1.702", "swiglu_limit", 196),
    FMT("act 2 limit NaN", "act=2 swiglu_alpha=1.702 swiglu_limit=nan", "swiglu_limit", 196),
    FMT("act 2 limit inf", "act=2 swiglu_alpha=1.702 swiglu_limit=inf", "swiglu_limit", 196),
    FMT("act 0 with a stray limit", "swiglu_limit=7", "swiglu_limit", 196),
    FMT("act 1 with a stray alpha -0.0", "act=1 swiglu_alpha=-0", "swiglu_alpha", 192),
    FMT("act 0 with a stray alpha NaN", "swiglu_alpha=nan", "swiglu_alpha", 192),
    BOOL_ROWS(attn_sinks, 200),
    BOOL_ROWS(o_bias, 204),
    /* 9. pooling: 0 unstated, 1 mean, 2 CLS, 3 last */
    OKC("pooling 1", "pooling=1"), OKC("pooling 2", "pooling=2"), OKC("pooling 3", "pooling=3"),
    FMT("pooling 4 (llama.cpp's rank)", "pooling=4", "pooling", 160),
    FMT("pooling 0xffffffff", "pooling=0xffffffff", "pooling", 160),
    FMT("order: act before pooling", "act=3 pooling=9", "act", 104),
    /* 8. sliding_window */
    OKC("sliding_window 1", "sliding_window=1"),
    OKC("sliding_window 2^24", "sliding_window=16777216"),
    FMT("sliding_window 2^24+1", "sliding_window=16777217", "sliding_window", 92),
    FMT("sliding_window 0xffffffff", "sliding_window=0xffffffff", "sliding_window", 92),
    /* 9. floats */
    OKC("rope_theta 1e-45", "rope_theta=1e-45"),
    FMT("rope_theta 0", "rope_theta=0", "rope_theta", 36),
    FMT("rope_theta -0.0", "rope_theta=-0", "rope_theta", 36),
    FMT("rope_theta -1", "rope_theta=-1", "rope_theta", 36),
    FMT("rope_theta NaN", "rope_theta=nan", "rope_theta", 36),
    FMT("rope_theta +inf", "rope_theta=inf", "rope_theta", 36),
    FMT("rope_theta -inf", "rope_theta=-inf", "rope_theta", 36),
    NONNEG_ROWS(norm_eps, 40),
    NONNEG_ROWS(rope_local_theta, 100),
    NONNEG_ROWS(embed_scale, 112),
    NONNEG_ROWS(attn_scale, 116),
    NONNEG_ROWS(attn_softcap, 124),
    NONNEG_ROWS(final_softcap, 128),
    /* 10. RoPE: plain */
    FMT("plain: rope_factor 1", "rope_factor=1", "rope_factor", 56),
    FMT("plain: rope_factor NaN", "rope_factor=nan", "rope_factor", 56),
    FMT("plain: rope_factor -0.0", "rope_factor=-0", "rope_factor", 56),
    FMT("plain: rope_low_freq_factor 1", "rope_low_freq_factor=1", "rope_low_freq_factor", 60),
    FMT("plain: rope_low_freq_factor -0.0", "rope_low_freq_factor=-0", "rope_low_freq_factor", 60),
    FMT("plain: rope_high_freq_factor 1", "rope_high_freq_factor=1", "rope_high_freq_factor", 64),
    FMT("plain: rope_high_freq_factor -0.0", "rope_high_freq_factor=-0", "rope_high_freq_factor", 64),
    FMT("plain: rope_orig_max_seq 1", "rope_orig_max_seq=1", "rope_orig_max_seq", 68),
    FMT("plain: rope_attn_factor 1", "rope_attn_factor=1", "rope_attn_factor", 88),
    FMT("plain: rope_attn_factor -0.0", "rope_attn_factor=-0", "rope_attn_factor", 88),
    FMT("plain: rope_attn_factor NaN", "rope_attn_factor=nan", "rope_attn_factor", 88),
    /* llama3 */
    OKC("llama3 valid", L3),
    OKC("llama3 high just above low", L3 " rope_high_freq_factor=1.00000012"),
    FMT("llama3 rope_factor 0", L3 " rope_factor=0", "rope_factor", 56),
    FMT("llama3 rope_factor -1", L3 " rope_factor=-1", "rope_factor", 56),
    FMT("llama3 rope_factor NaN", L3 " rope_factor=nan", "rope_factor", 56),
    FMT("llama3 rope_factor inf", L3 " rope_factor=inf", "rope_factor", 56),
    FMT("llama3 low 0", L3 " rope_low_freq_factor=0", "rope_low_freq_factor", 60),
    FMT("llama3 low -1", L3 " rope_low_freq_factor=-1", "rope_low_freq_factor", 60),
    FMT("llama3 low NaN", L3 " rope_low_freq_factor=nan", "rope_low_freq_factor", 60),
    FMT("llama3 low inf", L3 " rope_low_freq_factor=inf", "rope_low_freq_factor", 60),
    FMT("llama3 high == low", L3 " rope_high_freq_factor=1", "rope_high_freq_factor", 64),
    FMT("llama3 high < low", L3 " rope_high_freq_factor=0.5", "rope_high_freq_factor", 64),
    FMT("llama3 high NaN", L3 " rope_high_freq_factor=nan", "rope_high_freq_factor", 64),
    FMT("llama3 high inf", L3 " rope_high_freq_factor=inf", "rope_high_freq_factor", 64),
    FMT("llama3 rope_orig_max_seq 0", L3 " rope_orig_max_seq=0", "rope_orig_max_seq", 68),
    FMT("llama3 rope_attn_factor 1", L3 " rope_attn_factor=1", "rope_attn_factor", 88),
    FMT("llama3 rope_attn_factor -0.0", L3 " rope_attn_factor=-0", "rope_attn_factor", 88),
    /* linear */
    OKC("linear valid", LIN),
    FMT("linear rope_factor 0", LIN " rope_factor=0", "rope_factor", 56),
    FMT("linear rope_factor -2", LIN " rope_factor=-2", "rope_factor", 56),
    FMT("linear rope_factor NaN", LIN " rope_factor=nan", "rope_factor", 56),
    FMT("linear rope_factor inf", LIN " rope_factor=inf", "rope_factor", 56),
    FMT("linear rope_low_freq_factor 1", LIN " rope_low_freq_factor=1", "rope_low_freq_factor", 60),
    FMT("linear rope_low_freq_factor -0.0", LIN " rope_low_freq_factor=-0", "rope_low_freq_factor", 60),
    FMT("linear rope_high_freq_factor 1", LIN " rope_high_freq_factor=1", "rope_high_freq_factor", 64),
    FMT("linear rope_orig_max_seq 1", LIN " rope_orig_max_seq=1", "rope_orig_max_seq", 68),
    FMT("linear rope_attn_factor 1", LIN " rope_attn_factor=1", "rope_attn_factor", 88),
    FMT("linear rope_attn_factor -0.0", LIN " rope_attn_factor=-0", "rope_attn_factor", 88),
    /* yarn */
    OKC("yarn valid", YARN),
    OKC("yarn beta_fast just above beta_slow", YARN " rope_low_freq_factor=1.00000012"),
    FMT("yarn rope_factor 0", YARN " rope_factor=0", "rope_factor", 56),
    FMT("yarn rope_factor -4", YARN " rope_factor=-4", "rope_factor", 56),
    FMT("yarn rope_factor NaN", YARN " rope_factor=nan", "rope_factor", 56),
    FMT("yarn rope_factor inf", YARN " rope_factor=inf", "rope_factor", 56),
    FMT("yarn beta_slow 0", YARN " rope_high_freq_factor=0", "rope_high_freq_factor", 64),
    FMT("yarn beta_slow -1", YARN " rope_high_freq_factor=-1", "rope_high_freq_factor", 64),
    FMT("yarn beta_slow NaN", YARN " rope_high_freq_factor=nan", "rope_high_freq_factor", 64),
    FMT("yarn beta_slow inf", YARN " rope_high_freq_factor=inf", "rope_high_freq_factor", 64),
    FMT("yarn both betas 0: beta_slow named first", YARN " rope_high_freq_factor=0 rope_low_freq_factor=0",
        "rope_high_freq_factor", 64),
    FMT("yarn beta_fast == beta_slow", YARN " rope_low_freq_factor=1", "rope_low_freq_factor", 60),
    FMT("yarn beta_fast < beta_slow", YARN " rope_low_freq_factor=0.5", "rope_low_freq_factor", 60),
    FMT("yarn beta_fast NaN", YARN " rope_low_freq_factor=nan", "rope_low_freq_factor", 60),
    FMT("yarn beta_fast inf", YARN " rope_low_freq_factor=inf", "rope_low_freq_factor", 60),
    FMT("yarn rope_orig_max_seq 0", YARN " rope_orig_max_seq=0", "rope_orig_max_seq", 68),
    FMT("yarn rope_attn_factor 0", YARN " rope_attn_factor=0", "rope_attn_factor", 88),
    FMT("yarn rope_attn_factor -0.0", YARN " rope_attn_factor=-0", "rope_attn_factor", 88),
    FMT("yarn rope_attn_factor -1", YARN " rope_attn_factor=-1", "rope_attn_factor", 88),
    FMT("yarn rope_attn_factor NaN", YARN " rope_attn_factor=nan", "rope_attn_factor", 88),
    FMT("yarn rope_attn_factor inf", YARN " rope_attn_factor=inf", "rope_attn_factor", 88),
    /* other rope types */
    FMT("rope_type 4", "rope_type=4", "rope_type", 52),
    FMT("rope_type 4 with yarn parameters", YARN " rope_type=4", "rope_type", 52),
    FMT("rope_type 0xffffffff", "rope_type=0xffffffff", "rope_type", 52),
    /* 11. reserved bytes (every byte is covered by a loop test too) */
    FMT("reserved byte 208", "raw:208=1", "reserved", 208),
    FMT("reserved byte 220 = 0x80", "raw:220=0x80", "reserved", 220),
    FMT("reserved byte 255", "raw:255=0xff", "reserved", 255),
    FMT("reserved: the first non-zero byte is named", "raw:255=1 raw:230=2", "reserved", 230),
    /* 12. dimensions */
    OKC("dim 32", "dim=32"),
    OKC("dim 65536", "dim=65536"),
    SHP("dim 0", "dim=0", "dim", 8),
    SHP("dim 65568", "dim=65568", "dim", 8),
    SHP("dim 65537", "dim=65537", "dim", 8),
    SHP("dim 0xffffffff", "dim=0xffffffff", "dim", 8),
    SHP("dim 48 not a multiple of 32", "dim=48", "dim", 8),
    SHP("dim 33", "dim=33 n_heads=1 n_kv_heads=1", "dim", 8),
    OKC("n_layers 1", "n_layers=1"),
    OKC("n_layers 65536", "n_layers=65536"),
    SHP("n_layers 0", "n_layers=0", "n_layers", 12),
    SHP("n_layers 65537", "n_layers=65537", "n_layers", 12),
    OKC("n_heads 1", "n_heads=1 n_kv_heads=1"),
    OKC("n_heads 3 dividing dim 96", "dim=96 n_heads=3 n_kv_heads=3"),
    SHP("n_heads 0", "n_heads=0", "n_heads", 16),
    SHP("n_heads 65537", "n_heads=65537 n_kv_heads=1", "n_heads", 16),
    SHP("n_heads 65536 (in range) does not divide dim", "n_heads=65536 n_kv_heads=1", "n_heads", 16),
    SHP("n_heads 65536 with head_dim 2: q_dim above 65536", "n_heads=65536 n_kv_heads=1 head_dim=2",
        "head_dim", 80),
    SHP("n_heads 3 does not divide dim 64", "n_heads=3 n_kv_heads=1", "n_heads", 16),
    OKC("n_heads 3 with head_dim 32 (need not divide dim)", "n_heads=3 n_kv_heads=1 head_dim=32"),
    OKC("n_kv_heads 1", "n_kv_heads=1"),
    OKC("n_kv_heads = n_heads", "n_kv_heads=4"),
    SHP("n_kv_heads 0", "n_kv_heads=0", "n_kv_heads", 20),
    SHP("n_kv_heads 3 does not divide 4", "n_kv_heads=3", "n_kv_heads", 20),
    SHP("n_kv_heads 8 above n_heads", "n_kv_heads=8", "n_kv_heads", 20),
    SHP("n_kv_heads 65537", "n_kv_heads=65537", "n_kv_heads", 20),
    OKC("hidden_dim 32", "hidden_dim=32"),
    OKC("hidden_dim 65536", "hidden_dim=65536"),
    SHP("hidden_dim 0", "hidden_dim=0", "hidden_dim", 24),
    SHP("hidden_dim 65568", "hidden_dim=65568", "hidden_dim", 24),
    SHP("hidden_dim 100 not a multiple of 32", "hidden_dim=100", "hidden_dim", 24),
    SHP("vocab 0", "vocab=0", "vocab", 28),
    SHP("vocab 2", "vocab=2", "vocab", 28),
    OKC("vocab 3", "vocab=3"),
    OKC("vocab 2^24", "vocab=16777216"),
    SHP("vocab 2^24+1", "vocab=16777217", "vocab", 28),
    SHP("max_seq 0", "max_seq=0", "max_seq", 32),
    OKC("max_seq 1", "max_seq=1"),
    OKC("max_seq 2^24", "max_seq=16777216"),
    SHP("max_seq 2^24+1", "max_seq=16777217", "max_seq", 32),
    OKC("head_dim 8 differs from dim / n_heads", "head_dim=8"),
    OKC("head_dim = dim / n_heads explicitly", "head_dim=16"),
    SHP("head_dim 15 odd", "head_dim=15", "head_dim", 80),
    SHP("derived head_dim 3 odd (dim 96, 32 heads)", "dim=96 n_heads=32 n_kv_heads=1", "head_dim", 80),
    SHP("q_dim 4 x 2 = 8 not a multiple of 32", "head_dim=2", "head_dim", 80),
    SHP("q_dim 3 x 30 = 90 not a multiple of 32", "n_heads=3 n_kv_heads=1 head_dim=30", "head_dim", 80),
    OKC("q_dim 32 x 2048 = 65536", "n_heads=32 head_dim=2048"),
    SHP("q_dim 32 x 2050 = 65600", "n_heads=32 head_dim=2050", "head_dim", 80),
    OKC("q_dim 4 x 16384 = 65536", "head_dim=16384"),
    SHP("q_dim 4 x 16392 = 65568", "head_dim=16392", "head_dim", 80),
    SHP("q_dim 4 x 2^31 does not wrap", "head_dim=0x80000000", "head_dim", 80),
    SHP("q_dim 4 x 0xfffffffe does not wrap", "head_dim=0xfffffffe", "head_dim", 80),
    OKC("rot_dim 2", "rot_dim=2"),
    OKC("rot_dim = head_dim", "rot_dim=16"),
    OKC("rot_dim = explicit head_dim", "head_dim=24 rot_dim=24"),
    SHP("rot_dim 1 odd", "rot_dim=1", "rot_dim", 132),
    SHP("rot_dim 15 odd", "rot_dim=15", "rot_dim", 132),
    SHP("rot_dim 18 above head_dim", "rot_dim=18", "rot_dim", 132),
    SHP("rot_dim 0xfffffffe", "rot_dim=0xfffffffe", "rot_dim", 132),
    /* 13. linear attention */
    OKC("linear attention valid", LA),
    OKC("lin_conv 1", LA " lin_conv=1"),
    OKC("lin_conv 256", LA " lin_conv=256"),
    OKC("lin_k_heads 4 lin_v_heads 8", LA " lin_k_heads=4 lin_v_heads=8"),
    OKC("lin_k_heads 1 lin_k_dim 65536", LA " lin_k_heads=1 lin_k_dim=65536"),
    OKC("lin_k_heads 2 x lin_k_dim 32768 = 65536", LA " lin_k_dim=32768"),
    OKC("lin_v_heads 4 x lin_v_dim 8 = 32", LA " lin_v_dim=8"),
    OKC("lin_v_heads 4 x lin_v_dim 16384 = 65536", LA " lin_v_dim=16384"),
    OKC("lin_k_heads = lin_v_heads = 65536", "lin_k_heads=65536 lin_v_heads=65536 lin_k_dim=1 lin_v_dim=1 lin_conv=1"),
    SHP("lin_k_heads 0, lin_v_heads set", "lin_v_heads=4", "lin_k_heads", 140),
    SHP("lin_k_heads 0, lin_k_dim set", "lin_k_dim=16", "lin_k_heads", 140),
    SHP("lin_k_heads 0, lin_v_dim set", "lin_v_dim=16", "lin_k_heads", 140),
    SHP("lin_k_heads 0, lin_conv set", "lin_conv=4", "lin_k_heads", 140),
    SHP("lin_k_heads 65537", LA " lin_k_heads=65537", "lin_k_heads", 140),
    SHP("lin_v_heads 0", LA " lin_v_heads=0", "lin_v_heads", 144),
    SHP("lin_v_heads 65537", LA " lin_v_heads=65537", "lin_v_heads", 144),
    SHP("lin_k_dim 0", LA " lin_k_dim=0", "lin_k_dim", 148),
    SHP("lin_k_dim 65537", LA " lin_k_dim=65537", "lin_k_dim", 148),
    SHP("lin_v_dim 0", LA " lin_v_dim=0", "lin_v_dim", 152),
    SHP("lin_v_dim 65537", LA " lin_v_dim=65537", "lin_v_dim", 152),
    SHP("lin_conv 0", LA " lin_conv=0", "lin_conv", 156),
    SHP("lin_conv 257", LA " lin_conv=257", "lin_conv", 156),
    SHP("lin_v_heads 4 not a multiple of lin_k_heads 3", LA " lin_k_heads=3", "lin_v_heads", 144),
    SHP("lin_v_heads 6 not a multiple of 4", LA " lin_v_heads=6", "lin_v_heads", 144),
    SHP("lin_v_heads 2 not a multiple of 4", LA " lin_k_heads=1 lin_v_heads=2", "lin_v_heads", 144),
    SHP("lin_k_heads 2 x lin_k_dim 32769 above 65536", LA " lin_k_dim=32769", "lin_k_dim", 148),
    SHP("lin_v_heads 4 x lin_v_dim 4 = 16 not a multiple of 32", LA " lin_v_dim=4", "lin_v_dim", 152),
    SHP("lin_v_heads 4 x lin_v_dim 16392 above 65536", LA " lin_v_dim=16392", "lin_v_dim", 152),
    SHP("lin_v_heads 8 x lin_v_dim 65536 above 65536", LA " lin_v_heads=8 lin_v_dim=65536", "lin_v_dim", 152),
    /* 14. mixtures of experts */
    OKC("experts without a dense FFN", MOE),
    OKC("experts and a dense width (mixed layers)", MOE " hidden_dim=64"),
    OKC("n_experts 1", MOE " n_experts=1 n_experts_used=1"),
    OKC("n_experts 1024", MOE " n_experts=1024"),
    SHP("n_experts 1025", MOE " n_experts=1025", "n_experts", 164),
    SHP("n_experts 0xffffffff", MOE " n_experts=0xffffffff", "n_experts", 164),
    SHP("hidden_dim 0 without experts", "hidden_dim=0", "hidden_dim", 24),
    SHP("n_experts 0 but n_experts_used set", "n_experts_used=2", "n_experts", 164),
    SHP("n_experts 0 but expert_hidden_dim set", "expert_hidden_dim=32", "n_experts", 164),
    SHP("n_experts 0 but moe_gating set", "moe_gating=1", "n_experts", 164),
    SHP("n_experts 0 but moe_flags set", "moe_flags=1", "n_experts", 164),
    SHP("n_experts 0 but expert_scale -0.0", "expert_scale=-0", "n_experts", 164),
    SHP("n_experts 0 but shared_hidden_dim set", "shared_hidden_dim=32", "n_experts", 164),
    SHP("n_experts_used 0", MOE " n_experts_used=0", "n_experts_used", 168),
    OKC("n_experts_used = n_experts", MOE " n_experts_used=8"),
    SHP("n_experts_used 9 above n_experts 8", MOE " n_experts_used=9", "n_experts_used", 168),
    OKC("n_experts_used 64", MOE " n_experts=128 n_experts_used=64"),
    SHP("n_experts_used 65", MOE " n_experts=128 n_experts_used=65", "n_experts_used", 168),
    SHP("expert_hidden_dim 0", MOE " expert_hidden_dim=0", "expert_hidden_dim", 172),
    SHP("expert_hidden_dim 48", MOE " expert_hidden_dim=48", "expert_hidden_dim", 172),
    OKC("expert_hidden_dim 65536", MOE " expert_hidden_dim=65536"),
    SHP("expert_hidden_dim 65568", MOE " expert_hidden_dim=65568", "expert_hidden_dim", 172),
    OKC("a shared expert with its gate", MOE " shared_hidden_dim=64 moe_flags=17"),
    SHP("shared_hidden_dim 48", MOE " shared_hidden_dim=48", "shared_hidden_dim", 188),
    SHP("shared_hidden_dim 65568", MOE " shared_hidden_dim=65568", "shared_hidden_dim", 188),
    OKC("moe_gating 1", MOE " moe_gating=1"),
    OKC("moe_gating 2", MOE " moe_gating=2"),
    FMT("moe_gating 3", MOE " moe_gating=3", "moe_gating", 176),
    OKC("moe_flags 15", MOE " moe_flags=15"),
    FMT("moe_flags 32", MOE " moe_flags=32", "moe_flags", 180),
    FMT("moe_flags 0x80000000", MOE " moe_flags=0x80000000", "moe_flags", 180),
    FMT("moe_flags 16 without a shared expert", MOE " moe_flags=16", "moe_flags", 180),
    OKC("expert_scale 2.5", MOE " expert_scale=2.5"),
    FMT("expert_scale -1", MOE " expert_scale=-1", "expert_scale", 184),
    FMT("expert_scale NaN", MOE " expert_scale=nan", "expert_scale", 184),
    FMT("expert_scale inf", MOE " expert_scale=inf", "expert_scale", 184),
    /* Check order: the first failing step wins. */
    FMT("order: magic before version", "magic=GGUF version=2", "magic", 0),
    FMT("order: version before wtype", "version=2 wtype=9", "version", 4),
    FMT("order: wtype before q8_mask", "wtype=9 q8_mask=128", "wtype", 44),
    FMT("order: q8_mask before booleans", "q8_mask=128 qkv_bias=2", "q8_mask", 72),
    FMT("order: booleans before act", "attn_gate=2 act=2", "attn_gate", 136),
    FMT("order: act before sliding_window", "act=3 sliding_window=0xffffffff", "act", 104),
    FMT("order: sliding_window before floats", "sliding_window=0xffffffff rope_theta=0", "sliding_window", 92),
    FMT("order: floats before RoPE", "final_softcap=-1 rope_type=9", "final_softcap", 128),
    FMT("order: RoPE before reserved", "rope_type=9 raw:220=1", "rope_type", 52),
    FMT("order: reserved (FORMAT) before dimensions (SHAPE)", "raw:220=1 dim=0", "reserved", 220),
    FMT("order: floats (expert_scale) before the swiglu fields", "expert_scale=-1 swiglu_limit=7",
        "expert_scale", 184),
    FMT("order: swiglu fields before RoPE", "swiglu_limit=7 rope_type=9", "swiglu_limit", 196),
    SHP("order: linear attention before experts", "lin_conv=1 n_experts=2000", "lin_k_heads", 140),
    SHP("order: expert shapes (SHAPE) before gating (FORMAT)", MOE " n_experts_used=0 moe_gating=9",
        "n_experts_used", 168),
    FMT("order: FORMAT before SHAPE", "vocab=0 act=7", "act", 104),
    SHP("order: ranges before multiples", "dim=48 vocab=2", "vocab", 28),
    SHP("order: dimensions before linear attention", "rot_dim=3 lin_conv=1", "rot_dim", 132),
};

#define N_CASES ((int)(sizeof cases / sizeof cases[0]))

/* Builds the case's header struct and raw bytes. */
static void build_case(const hcase *c, ml_mlb_header *h, uint8_t raw[ML_MLB_HEADER_SIZE])
{
    uint8_t enc[ML_MLB_HEADER_SIZE];
    tu_base_header(h);
    ml_mlb_header_encode(h, raw);
    tu_apply(h, raw, c->set);
    ml_mlb_header_encode(h, enc);
    memcpy(raw, enc, 208); /* fields from h, reserved bytes as mutated */
}

START_TEST(test_validation_row)
{
    const hcase *c = &cases[_i];
    ml_mlb_header h, h2;
    uint8_t raw[ML_MLB_HEADER_SIZE];
    ml_mlb_derived d;
    ml_error err;
    char what[200];
    build_case(c, &h, raw);

    snprintf(what, sizeof what, "[%s] validate", c->name);
    tu_err_reset(&err);
    memset(&d, 0xa5, sizeof d);
    ml_status s = ml_mlb_header_validate(&h, raw, &d, &err);
    TU_CHECK_ERR(what, s, err, c->st, c->field, c->offset);
    if (c->st != ML_OK) {
        /* The message names the field first. */
        ck_assert_msg(strncmp(err.msg, c->field, strlen(c->field)) == 0, "%s: msg %s", what,
                      err.msg);
        /* NULL err and NULL derived are accepted. */
        ck_assert_int_eq(ml_mlb_header_validate(&h, raw, NULL, NULL), c->st);
    } else {
        tu_dims td;
        tu_derive(&h, &td);
        ck_assert_uint_eq(d.head_dim, td.head_dim);
        ck_assert_uint_eq(d.q_dim, td.q_dim);
        ck_assert_uint_eq(d.kv_dim, td.kv_dim);
        ck_assert_uint_eq(d.rot_dim, td.rot_dim);
        ck_assert_uint_eq(d.lin_qkv, h.lin_k_heads ? td.lin_qkv : 0);
        ck_assert_uint_eq(d.lin_vd, h.lin_k_heads ? td.lin_vd : 0);
    }

    /* The same header decoded from its bytes. */
    snprintf(what, sizeof what, "[%s] decoded", c->name);
    ml_mlb_header_decode(raw, &h2);
    ck_assert_mem_eq(&h, &h2, sizeof h);
    tu_err_reset(&err);
    s = ml_mlb_header_validate(&h2, raw, NULL, &err);
    TU_CHECK_ERR(what, s, err, c->st, c->field, c->offset);

    /* The loader and the streaming verifier apply the same rules first.  A
     * valid header alone is a file too short for its first array. */
    const char *lfield = c->field;
    int64_t loff = c->offset;
    ml_status lst = c->st;
    if (c->st == ML_OK) {
        lst = ML_E_FORMAT;
        lfield = h.layer_flags            ? "layer_flags"
                 : h.wtype == ML_WTYPE_TABLE ? "mat_types"
                                             : "tok_emb";
        loff = 256;
    }
    tu_buf b;
    tu_buf_copy(&b, raw, sizeof raw, 0);
    static char dummy;
    ml_mlb *m = (ml_mlb *)(void *)&dummy; /* must be reset to NULL */
    snprintf(what, sizeof what, "[%s] loader", c->name);
    tu_err_reset(&err);
    s = ml_mlb_open_memory(b.p, b.len, &m, &err);
    ck_assert_ptr_null(m);
    TU_CHECK_ERR(what, s, err, lst, lfield, loff);

    snprintf(what, sizeof what, "[%s] stream", c->name);
    tu_reader rd;
    ml_verify_report rep;
    memset(&rep, 0, sizeof rep);
    tu_reader_init(&rd, raw, sizeof raw, (uint64_t)_i, 7);
    tu_err_reset(&err);
    s = ml_mlb_verify_stream(tu_mem_read, &rd, &rep, &err);
    TU_CHECK_ERR(what, s, err, lst, lfield, loff);
    tu_buf_free(&b);
}
END_TEST

/* Every reserved byte, with several values; raw NULL skips the check. */
START_TEST(test_reserved_every_byte)
{
    static const uint8_t vals[] = {1, 0x80, 0xff};
    ml_mlb_header h;
    uint8_t raw[ML_MLB_HEADER_SIZE];
    ml_error err;
    tu_base_header(&h);
    for (unsigned i = 208; i < 256; i++) {
        for (unsigned v = 0; v < 3; v++) {
            ml_mlb_header_encode(&h, raw);
            raw[i] = vals[v];
            tu_err_reset(&err);
            TU_CHECK_ERR("reserved", ml_mlb_header_validate(&h, raw, NULL, &err), err,
                         ML_E_FORMAT, "reserved", i);
            ck_assert_int_eq(ml_mlb_header_validate(&h, NULL, NULL, &err), ML_OK);
        }
    }
}
END_TEST

/* Offsets 52-71, 72, 76, 80-95 and 132-159 all zero: valid, with the
 * defaults the spec gives. */
START_TEST(test_zero_means_default)
{
    static const unsigned ranges[][2] = {{52, 72}, {72, 76}, {76, 80}, {80, 96}, {132, 160}};
    ml_mlb_header h;
    uint8_t raw[ML_MLB_HEADER_SIZE];
    ml_mlb_derived d;
    ml_error err;
    tu_base_header(&h);
    /* Start from a header that uses all of those fields. */
    tu_apply(&h, NULL, YARN " q8_mask=5 qkv_bias=1 head_dim=24 qk_norm=1 sliding_window=8 "
                       "rot_dim=12 attn_gate=1 " LA);
    ml_mlb_header_encode(&h, raw);
    ck_assert_int_eq(ml_mlb_header_validate(&h, raw, &d, &err), ML_OK);
    ck_assert_uint_eq(d.head_dim, 24);
    ck_assert_uint_eq(d.rot_dim, 12);
    for (size_t i = 0; i < sizeof ranges / sizeof ranges[0]; i++)
        memset(raw + ranges[i][0], 0, ranges[i][1] - ranges[i][0]);
    ml_mlb_header_decode(raw, &h);
    ck_assert_uint_eq(h.rope_type, 0);
    ck_assert_uint_eq(h.q8_mask, 0);
    ck_assert_uint_eq(h.head_dim, 0);
    ck_assert_uint_eq(h.lin_k_heads, 0);
    memset(&d, 0xa5, sizeof d);
    tu_err_reset(&err);
    ml_status s = ml_mlb_header_validate(&h, raw, &d, &err);
    ck_assert_msg(s == ML_OK, "%s", err.msg);
    ck_assert_uint_eq(d.head_dim, 64 / 4);
    ck_assert_uint_eq(d.rot_dim, d.head_dim);
    ck_assert_uint_eq(d.q_dim, 64);
    ck_assert_uint_eq(d.kv_dim, 32);
    ck_assert_uint_eq(d.lin_qkv, 0);
    ck_assert_uint_eq(d.lin_vd, 0);
    /* The body of such a header has no biases, norms, gate or wcls choice
     * changes: compare with the reference layout. */
    uint64_t end, lend;
    size_t n, ln;
    n = tu_ref_layout(&h, NULL, NULL, 0, &end);
    ck_assert_int_eq(ml_mlb_layout_size(&h, NULL, &lend, &ln, &err), ML_OK);
    ck_assert_uint_eq(ln, n);
    ck_assert_uint_eq(lend, end);
}
END_TEST

/* Derived values for a few shapes. */
START_TEST(test_derived_values)
{
    ml_mlb_header h;
    ml_mlb_derived d;
    ml_error err;
    tu_base_header(&h);
    ck_assert_int_eq(ml_mlb_header_validate(&h, NULL, &d, &err), ML_OK);
    ck_assert_uint_eq(d.head_dim, 16);
    ck_assert_uint_eq(d.q_dim, 64);
    ck_assert_uint_eq(d.kv_dim, 32);
    ck_assert_uint_eq(d.rot_dim, 16);
    tu_apply(&h, NULL, "head_dim=24 n_heads=4 n_kv_heads=1 rot_dim=6 " LA);
    ck_assert_int_eq(ml_mlb_header_validate(&h, NULL, &d, &err), ML_OK);
    ck_assert_uint_eq(d.head_dim, 24);
    ck_assert_uint_eq(d.q_dim, 96);
    ck_assert_uint_eq(d.kv_dim, 24);
    ck_assert_uint_eq(d.rot_dim, 6);
    ck_assert_uint_eq(d.lin_qkv, 2 * 2 * 16 + 4 * 16);
    ck_assert_uint_eq(d.lin_vd, 64);
    /* On failure *d is left alone. */
    memset(&d, 0xa5, sizeof d);
    h.dim = 0;
    ck_assert_int_eq(ml_mlb_header_validate(&h, NULL, &d, &err), ML_E_SHAPE);
    ck_assert_uint_eq(d.head_dim, 0xa5a5a5a5u);
}
END_TEST

/* ml_mlb_fields() against the spec's table. */
START_TEST(test_field_table)
{
    size_t n = 0;
    const ml_mlb_field *f = ml_mlb_fields(&n);
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(n, tu_n_fields);
    ck_assert_uint_eq(n, 52);
    ck_assert_ptr_eq(ml_mlb_fields(NULL), f);
    ml_mlb_header h;
    for (size_t i = 0; i < n; i++) {
        ck_assert_str_eq(f[i].name, tu_fields[i].name);
        ck_assert_uint_eq(f[i].offset, tu_fields[i].offset);
        ck_assert_uint_eq(f[i].member, tu_fields[i].member);
        ml_field_type want = tu_fields[i].kind == TU_CHARS ? ML_FIELD_CHARS
                             : tu_fields[i].kind == TU_U32 ? ML_FIELD_U32
                                                           : ML_FIELD_F32;
        ck_assert_int_eq(f[i].type, want);
        ck_assert_ptr_nonnull(f[i].meaning);
        ck_assert(f[i].meaning[0] != 0);
        if (i > 0)
            ck_assert_uint_eq(f[i].offset, f[i - 1].offset + 4);
        /* The accessors read the member the entry names. */
        memset(&h, 0, sizeof h);
        uint32_t v = 0x3f800000u + (uint32_t)i;
        memcpy((char *)&h + tu_fields[i].member, &v, 4);
        if (f[i].type == ML_FIELD_U32)
            ck_assert_uint_eq(ml_mlb_field_u32(&h, &f[i]), v);
        if (f[i].type == ML_FIELD_F32) {
            float x = ml_mlb_field_f32(&h, &f[i]), y;
            memcpy(&y, &v, 4);
            ck_assert(memcmp(&x, &y, 4) == 0);
        }
    }
    ck_assert_uint_eq(f[n - 1].offset + 4, 208);
}
END_TEST

/* Every field lands at its spec offset, little-endian, and comes back. */
START_TEST(test_encode_decode_every_field)
{
    ml_mlb_header h, back;
    uint8_t raw[ML_MLB_HEADER_SIZE];
    memset(&h, 0, sizeof h);
    for (size_t i = 0; i < tu_n_fields; i++) {
        uint32_t v = 0x01020304u * (uint32_t)(i + 1) ^ 0x80000000u;
        memcpy((char *)&h + tu_fields[i].member, &v, 4);
    }
    memcpy(h.magic, "M\x80\x01Z", 4);
    memset(raw, 0xee, sizeof raw);
    ml_mlb_header_encode(&h, raw);
    ck_assert_mem_eq(raw, "M\x80\x01Z", 4);
    for (size_t i = 1; i < tu_n_fields; i++) {
        uint32_t v = 0x01020304u * (uint32_t)(i + 1) ^ 0x80000000u;
        const uint8_t *p = raw + tu_fields[i].offset;
        uint32_t got = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                       (uint32_t)p[3] << 24;
        ck_assert_msg(got == v, "%s at %u: 0x%08x, expected 0x%08x", tu_fields[i].name,
                      tu_fields[i].offset, got, v);
    }
    for (unsigned i = 208; i < 256; i++)
        ck_assert_uint_eq(raw[i], 0);
    memset(&back, 0x77, sizeof back);
    ml_mlb_header_decode(raw, &back);
    ck_assert_mem_eq(&back, &h, sizeof h);

    /* Float bit patterns (NaN payloads, -0.0) survive. */
    uint32_t nan_bits = 0xffc01234u, negz = 0x80000000u;
    memcpy(&h.rope_theta, &nan_bits, 4);
    memcpy(&h.rope_attn_factor, &negz, 4);
    ml_mlb_header_encode(&h, raw);
    ck_assert_uint_eq(raw[36], 0x34);
    ck_assert_uint_eq(raw[39], 0xff);
    ck_assert_uint_eq(raw[91], 0x80);
    ml_mlb_header_decode(raw, &back);
    ck_assert_mem_eq(&back, &h, sizeof h);
}
END_TEST

/* Random bytes decode and re-encode to the same first 208 bytes. */
START_TEST(test_decode_random_bytes)
{
    tu_rng r = {42};
    ml_mlb_header h;
    uint8_t raw[ML_MLB_HEADER_SIZE], again[ML_MLB_HEADER_SIZE];
    for (int k = 0; k < 2000; k++) {
        for (unsigned i = 0; i < sizeof raw; i++)
            raw[i] = (uint8_t)tu_next(&r);
        ml_mlb_header_decode(raw, &h);
        TU_REQUIRE(h.dim == ((uint32_t)raw[8] | (uint32_t)raw[9] << 8 |
                             (uint32_t)raw[10] << 16 | (uint32_t)raw[11] << 24), "dim");
        ml_mlb_header_encode(&h, again);
        TU_REQUIRE(memcmp(again, raw, 208) == 0, "round %d: fields differ", k);
        for (unsigned i = 208; i < 256; i++)
            TU_REQUIRE(again[i] == 0, "round %d: reserved byte %u", k, i);
        /* Validation of garbage never crashes and never says OK with
         * non-zero reserved bytes. */
        ml_error err;
        ml_status s = ml_mlb_header_validate(&h, raw, NULL, &err);
        TU_REQUIRE(s == ML_E_FORMAT || s == ML_E_SHAPE, "round %d: %s", k, ml_status_name(s));
    }
}
END_TEST

START_TEST(test_header_init)
{
    ml_mlb_header h, z;
    ml_error err;
    memset(&h, 0x55, sizeof h);
    ml_mlb_header_init(&h);
    ck_assert_mem_eq(h.magic, "MLB1", 4);
    ck_assert_uint_eq(h.version, 1);
    memset(&z, 0, sizeof z);
    memcpy(z.magic, "MLB1", 4);
    z.version = 1;
    ck_assert_mem_eq(&h, &z, sizeof h);
    /* Not valid by itself: wtype 0 is the first rule it breaks. */
    tu_err_reset(&err);
    TU_CHECK_ERR("init", ml_mlb_header_validate(&h, NULL, NULL, &err), err, ML_E_FORMAT, "wtype",
                 44);
}
END_TEST

/* The wrong-file hints of the magic check. */
START_TEST(test_magic_hints)
{
    static const struct { const char *magic; const char *hint; } m[] = {
        {"GGUF", "GGUF"}, {"MLT1", "tokenizer"}, {"MLI1", "importance"},
        {"MLB2", "unknown generation"}, {"<!DO", "HTML"}, {"<htm", "HTML"}, {"<HTM", "HTML"},
    };
    ml_mlb_header h;
    ml_error err;
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++) {
        tu_base_header(&h);
        memcpy(h.magic, m[i].magic, 4);
        ck_assert_int_eq(ml_mlb_header_validate(&h, NULL, NULL, &err), ML_E_FORMAT);
        ck_assert_msg(strstr(err.msg, m[i].hint) != NULL, "%s: %s", m[i].magic, err.msg);
    }
    tu_base_header(&h);
    memcpy(h.magic, "\x01\\\xff" "A", 4);
    ck_assert_int_eq(ml_mlb_header_validate(&h, NULL, NULL, &err), ML_E_FORMAT);
    ck_assert_msg(strstr(err.msg, "\\x01\\x5c\\xffA") != NULL, "%s", err.msg);
}
END_TEST

START_TEST(test_status_names)
{
    static const char *names[] = {"ML_OK", "ML_E_IO", "ML_E_FORMAT", "ML_E_SHAPE",
                                  "ML_E_NOMEM", "ML_E_INVAL", "ML_E_UNSUPPORTED", "ML_E_MISMATCH"};
    ck_assert_int_eq(ML_OK, 0);
    ck_assert_int_eq(ML_E_IO, 1);
    ck_assert_int_eq(ML_E_FORMAT, 2);
    ck_assert_int_eq(ML_E_SHAPE, 3);
    ck_assert_int_eq(ML_E_NOMEM, 4);
    ck_assert_int_eq(ML_E_INVAL, 5);
    ck_assert_int_eq(ML_E_UNSUPPORTED, 6);
    ck_assert_int_eq(ML_E_MISMATCH, 7);
    for (int i = 0; i < 8; i++) {
        ck_assert_str_eq(ml_status_name((ml_status)i), names[i]);
        ck_assert_ptr_nonnull(ml_strerror((ml_status)i));
        ck_assert(ml_strerror((ml_status)i)[0] != 0);
    }
    ck_assert_str_eq(ml_strerror(ML_E_FORMAT), "malformed file");
    ck_assert_str_eq(ml_strerror(ML_E_SHAPE), "invalid shape");
    ck_assert_ptr_nonnull(ml_status_name((ml_status)42));
    ck_assert_ptr_nonnull(ml_strerror((ml_status)42));
    ck_assert_str_eq(ml_type_name(ML_TYPE_F32), "F32");
    ck_assert_str_eq(ml_type_name(ML_TYPE_Q8_0), "Q8_0");
    ck_assert_str_eq(ml_type_name(ML_TYPE_Q4_0), "Q4_0");
    ck_assert_str_eq(ml_type_name(ML_TYPE_U8), "U8");
}
END_TEST

Suite *suite_mlb_header(void)
{
    Suite *s = suite_create("mlb_header");
    TCase *tc = tcase_create("validation_table");
    tcase_add_loop_test(tc, test_validation_row, 0, N_CASES);
    tcase_add_test(tc, test_reserved_every_byte);
    tcase_add_test(tc, test_zero_means_default);
    tcase_add_test(tc, test_derived_values);
    suite_add_tcase(s, tc);
    tc = tcase_create("encoding");
    tcase_add_test(tc, test_field_table);
    tcase_add_test(tc, test_encode_decode_every_field);
    tcase_add_test(tc, test_decode_random_bytes);
    tcase_add_test(tc, test_header_init);
    tcase_add_test(tc, test_magic_hints);
    tcase_add_test(tc, test_status_names);
    suite_add_tcase(s, tc);
    return s;
}
