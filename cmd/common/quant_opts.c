/* quant_opts.c - the quantization options of gguf2mlb and ml-quant
 * (quant_opts.h). */
#include "quant_opts.h"

#include "cli.h"

#include <string.h>
#include <strings.h>

void quant_opts_init(quant_opts *q)
{
    *q = (quant_opts){0, -1, -1, -1, NULL, 0, 0};
}

int quant_opts_take(quant_opts *q, int id, const char *arg)
{
    switch (id) {
    case QOPT_WTYPE:
        if (strcasecmp(arg, "q8_0") == 0)
            q->wtype = ML_WTYPE_Q8_0;
        else if (strcasecmp(arg, "q4_0") == 0)
            q->wtype = ML_WTYPE_Q4_0;
        else if (strcasecmp(arg, "source") == 0) /* from a GGUF: each matrix keeps its type */
            q->wtype = ML_WTYPE_TABLE;
        else if (q->mixes_ok) {
            ml_quant_mix m;
            if (ml_quant_mix_parse(arg, &m, NULL))
                cli_usage_error("--wtype: '%s' is not q8_0, q4_0, source, q4_k_m, q5_k_m, q6_k "
                                "or iq4_xs",
                                arg);
            q->wtype = 0;
            q->mix = (int)m;
            return 1;
        } else
            cli_usage_error("--wtype: '%s' is not q8_0, q4_0 or source", arg);
        q->mix = 0;
        return 1;
    case QOPT_Q8_MASK: {
        uint32_t m;
        ml_error e;
        if (ml_q8_mask_parse(arg, &m, &e))
            cli_usage_error("--q8-mask: %s", e.msg);
        q->q8_mask = m;
        return 1;
    }
    case QOPT_Q4_RULE:
        if (strcmp(arg, "fit") == 0)
            q->q4_rule = ML_Q4_FIT;
        else if (strcmp(arg, "round") == 0)
            q->q4_rule = ML_Q4_ROUND;
        else
            cli_usage_error("--q4-rule: '%s' is not fit or round", arg);
        return 1;
    case QOPT_SCALE_F16:
    case QOPT_SCALE_F32:
        if (q->scale_f16 >= 0 && q->scale_f16 != (id == QOPT_SCALE_F16))
            cli_usage_error("--scale-f16 and --scale-f32 contradict each other");
        q->scale_f16 = id == QOPT_SCALE_F16;
        return 1;
    case QOPT_IMATRIX:
        q->imatrix = arg;
        return 1;
    default:
        return 0;
    }
}

void quant_opts_check(const quant_opts *q)
{
    if (q->mix && q->q8_mask >= 0)
        cli_usage_error("--q8-mask is for Q4_0 models; --wtype %s chooses every matrix's type",
                        ml_quant_mix_name((ml_quant_mix)q->mix));
    if (q->mix && q->q4_rule >= 0)
        cli_usage_error("--q4-rule is for Q4_0 models; --wtype %s has no Q4_0 matrices",
                        ml_quant_mix_name((ml_quant_mix)q->mix));
    if (q->wtype == ML_WTYPE_Q8_0 && q->q8_mask > 0)
        cli_usage_error("--q8-mask is for Q4_0 models; a Q8_0 model stores every matrix as Q8_0");
    if (q->imatrix && q->q4_rule == ML_Q4_ROUND)
        cli_usage_error("--imatrix needs the fit rule; --q4-rule round cannot use importances");
}
