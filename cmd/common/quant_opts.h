/* quant_opts.h - the quantization options gguf2mlb and ml-quant share:
 * --wtype, --q8-mask, --q4-rule, --scale-f16/--scale-f32 and --imatrix,
 * parsed and cross-checked the same way for both.  Each command lists
 * them in its own option table (the defaults it documents differ) with
 * the ids below. */
#ifndef CLI_QUANT_OPTS_H
#define CLI_QUANT_OPTS_H

#include <mlcore/quant.h>

#include <stdint.h>

/* --threads goes up to this; the default, the CPUs, too. */
#define QUANT_MAX_THREADS 1024

/* Option ids, above any command's own. */
enum {
    QOPT_WTYPE = 1000,
    QOPT_Q8_MASK,
    QOPT_Q4_RULE,
    QOPT_SCALE_F16,
    QOPT_SCALE_F32,
    QOPT_IMATRIX
};

typedef struct quant_opts {
    uint32_t wtype;      /* ML_WTYPE_*, 0: not given */
    int64_t q8_mask;     /* -1: not given */
    int q4_rule;         /* ML_Q4_*, -1: not given */
    int scale_f16;       /* 1 f16, 0 f32, -1: not given */
    const char *imatrix; /* NULL: not given */
    int mixes_ok;        /* set by the command: --wtype may name a mix */
    int mix;             /* ml_quant_mix, 0: none (--wtype q4_k_m, ...) */
} quant_opts;

void quant_opts_init(quant_opts *q);
/* Takes option id with its argument; returns 0 when id is not one of
 * these.  A bad value is a usage error (exit 2). */
int quant_opts_take(quant_opts *q, int id, const char *arg);
/* The checks between them, after the last option. */
void quant_opts_check(const quant_opts *q);

#endif
