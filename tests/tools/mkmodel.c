/* mkmodel - writes a valid .mlb with deterministic random weights, for the
 * tests and the benchmarks.  Not installed.
 *
 *   mkmodel [-o OUT|-] [--seed N] [--preset NAME] [--flags F,F,...] [--types C,C,...]
 *           [FIELD=VALUE...]
 *
 * FIELD is any header field by its mlb(5) name; --flags gives the per-layer
 * flag bytes, repeated cyclically over n_layers (and sets layer_flags);
 * --types gives type table codes, repeated cyclically over the matrices
 * (and sets wtype 3). */
#include "mlcore.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct preset {
    const char *name;
    const char *fields;  /* FIELD=VALUE list */
    const char *flags;   /* per-layer flags, or NULL */
} preset;

static const preset presets[] = {
    {"tiny", "dim=64 n_layers=2 n_heads=4 n_kv_heads=2 hidden_dim=128 vocab=256 max_seq=256 "
             "rope_theta=10000 norm_eps=1e-5 wtype=1", NULL},
    {"tiny-q4", "dim=64 n_layers=2 n_heads=4 n_kv_heads=2 hidden_dim=128 vocab=256 max_seq=256 "
                "rope_theta=10000 norm_eps=1e-5 wtype=2 q8_mask=3 scale_f16=1 shared_classifier=1",
     NULL},
    /* Every optional feature at once: biases, q/k norms, explicit head_dim,
     * gate, post norms, window, local and no-RoPE layers, linear attention,
     * mixed Q4_0/Q8_0, f16 scales, yarn. */
    {"full", "dim=64 n_layers=4 n_heads=4 n_kv_heads=2 hidden_dim=96 vocab=300 max_seq=512 "
             "rope_theta=1000000 norm_eps=1e-6 wtype=2 q8_mask=0x41 qkv_bias=1 head_dim=24 "
             "qk_norm=1 sliding_window=16 rope_local_theta=10000 act=1 post_norms=1 "
             "embed_scale=8 attn_scale=0.0625 scale_f16=1 attn_softcap=50 final_softcap=30 "
             "rot_dim=12 attn_gate=1 lin_k_heads=2 lin_v_heads=4 lin_k_dim=16 lin_v_dim=16 "
             "lin_conv=4 rope_type=3 rope_factor=4 rope_low_freq_factor=32 "
             "rope_high_freq_factor=1 rope_orig_max_seq=128 rope_attn_factor=1.1386",
     "1,2,4,8"},
    /* Qwen3-MoE's shape, small: every layer 8 experts of width 32, 2 used. */
    {"moe", "dim=64 n_layers=2 n_heads=4 n_kv_heads=2 hidden_dim=0 vocab=256 max_seq=256 "
            "rope_theta=10000 norm_eps=1e-5 wtype=1 qk_norm=1 n_experts=8 n_experts_used=2 "
            "expert_hidden_dim=32 moe_flags=1",
     NULL},
    /* Every array of the MoE format at once (mlb(5) MIXTURES OF EXPERTS):
     * router, selection and expert biases, a gated shared expert, sinks,
     * output bias, the clamped SwiGLU, one dense layer beside a MoE one. */
    {"moe-full", "dim=64 n_layers=2 n_heads=4 n_kv_heads=2 hidden_dim=64 vocab=256 max_seq=256 "
                 "rope_theta=10000 norm_eps=1e-5 wtype=2 q8_mask=0x41 scale_f16=1 qkv_bias=1 "
                 "sliding_window=8 act=2 swiglu_alpha=1.702 swiglu_limit=7 attn_sinks=1 "
                 "o_bias=1 n_experts=4 n_experts_used=2 expert_hidden_dim=32 moe_gating=1 "
                 "moe_flags=31 expert_scale=2.5 shared_hidden_dim=32 layer_flags=1",
     "17,0"},
    /* TinyLlama-1.1B's shape, about 1.1 GiB in Q8_0: benchmarks. */
    {"tinyllama", "dim=2048 n_layers=22 n_heads=32 n_kv_heads=4 hidden_dim=5632 vocab=32000 "
                  "max_seq=2048 rope_theta=10000 norm_eps=1e-5 wtype=1", NULL},
};

static void die(const char *msg, const char *arg)
{
    fprintf(stderr, "mkmodel: %s%s%s\n", msg, arg ? ": " : "", arg ? arg : "");
    exit(2);
}

static void set_field(ml_mlb_header *h, const char *kv)
{
    const char *eq = strchr(kv, '=');
    if (!eq)
        die("expected FIELD=VALUE", kv);
    size_t n, klen = (size_t)(eq - kv);
    const ml_mlb_field *f = ml_mlb_fields(&n);
    for (size_t i = 0; i < n; i++) {
        if (strlen(f[i].name) != klen || strncmp(f[i].name, kv, klen) != 0)
            continue;
        char *end;
        char *dst = (char *)h + f[i].member;
        if (f[i].type == ML_FIELD_CHARS) {
            memset(dst, 0, 4);
            memcpy(dst, eq + 1, strlen(eq + 1) < 4 ? strlen(eq + 1) : 4);
            return;
        }
        if (f[i].type == ML_FIELD_U32) {
            unsigned long v = strtoul(eq + 1, &end, 0);
            uint32_t u = (uint32_t)v;
            memcpy(dst, &u, 4);
        } else {
            float v = strtof(eq + 1, &end);
            memcpy(dst, &v, 4);
        }
        if (*end)
            die("bad value", kv);
        return;
    }
    die("unknown field", kv);
}

/* A comma-separated list of bytes, repeated cyclically over n entries. */
static uint8_t *cyclic_bytes(const char *list, uint32_t n, const char *what)
{
    uint8_t pattern[256];
    size_t np = 0;
    char *copy = strdup(list), *save = NULL;
    for (char *t = strtok_r(copy, ",", &save); t && np < 256; t = strtok_r(NULL, ",", &save))
        pattern[np++] = (uint8_t)strtoul(t, NULL, 0);
    free(copy);
    if (!np)
        die("empty list", what);
    uint8_t *out = calloc(n ? n : 1, 1);
    for (uint32_t i = 0; i < n; i++)
        out[i] = pattern[i % np];
    return out;
}

static void set_fields(ml_mlb_header *h, const char *list)
{
    char *copy = strdup(list), *save = NULL;
    for (char *tok = strtok_r(copy, " ", &save); tok; tok = strtok_r(NULL, " ", &save))
        set_field(h, tok);
    free(copy);
}

int main(int argc, char **argv)
{
    ml_mlb_header h;
    const char *out = "-", *flag_list = NULL, *type_list = NULL;
    uint64_t seed = 1;
    ml_mlb_header_init(&h);
    set_fields(&h, presets[0].fields);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-o") && i + 1 < argc) {
            out = argv[++i];
        } else if (!strcmp(a, "--seed") && i + 1 < argc) {
            seed = strtoull(argv[++i], NULL, 0);
        } else if (!strcmp(a, "--flags") && i + 1 < argc) {
            flag_list = argv[++i];
        } else if (!strcmp(a, "--types") && i + 1 < argc) {
            type_list = argv[++i];
        } else if (!strcmp(a, "--preset") && i + 1 < argc) {
            const char *name = argv[++i];
            size_t k = 0;
            while (k < sizeof presets / sizeof presets[0] && strcmp(presets[k].name, name))
                k++;
            if (k == sizeof presets / sizeof presets[0])
                die("unknown preset (tiny, tiny-q4, full, moe, moe-full, tinyllama)", name);
            ml_mlb_header_init(&h);
            set_fields(&h, presets[k].fields);
            flag_list = presets[k].flags;
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            printf("usage: mkmodel [-o OUT|-] [--seed N] [--preset tiny|tiny-q4|full|moe|moe-full|tinyllama] "
                   "[--flags F,F,...] [--types C,C,...] [FIELD=VALUE...]\n");
            return 0;
        } else {
            set_field(&h, a);
        }
    }
    uint8_t *flags = NULL, *types = NULL;
    if (flag_list) {
        flags = cyclic_bytes(flag_list, h.n_layers, "--flags");
        h.layer_flags = 1;
    }
    if (type_list) {
        h.wtype = ML_WTYPE_TABLE;
        types = cyclic_bytes(type_list, ml_mlb_matrix_count(&h, flags), "--types");
    }
    ml_outfile *f;
    ml_error err;
    ml_status s = ml_outfile_open(out, &f, &err);
    if (!s) {
        s = ml_mlb_write_random_types(&h, flags, types, seed, ml_outfile_sink, f, &err);
        if (s)
            ml_outfile_abort(f);
        else
            s = ml_outfile_commit(f, &err);
    }
    free(flags);
    free(types);
    if (s) {
        fprintf(stderr, "mkmodel: %s: %s: %s\n", out, ml_status_name(s), err.msg);
        return 1;
    }
    return 0;
}
