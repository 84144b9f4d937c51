/* spec.c - speculative decoding's options and back-off (spec.h). */
#include "spec.h"

#include <inttypes.h>
#include <string.h>

int cli_spec_option(cli_spec *s, int id, int base, const char *arg, int drafts)
{
    switch (id - base) {
    case 0: cli_spec_type(s, arg, drafts); return 1;
    case 1: s->n = cli_u64("--spec-ngram-simple-size-n", arg, 1, 1024); return 1;
    case 2: s->m = cli_u64("--spec-ngram-simple-size-m", arg, 1, 1024); return 1;
    case 3: s->max = cli_u64("--spec-draft-n-max", arg, 1, 1024); return 1;
    case 4: s->min = cli_u64("--spec-draft-n-min", arg, 0, 1024); return 1;
    default: return 0;
    }
}

void cli_spec_type(cli_spec *s, const char *arg, int drafts)
{
    if (strcmp(arg, "ngram-simple") == 0)
        s->type = CLI_SPEC_NGRAM;
    else if (drafts && strcmp(arg, "draft-simple") == 0)
        s->type = CLI_SPEC_DRAFT;
    else if (drafts)
        cli_usage_error("--spec-type: '%s' is not supported (ngram-simple and draft-simple are)",
                        arg);
    else
        cli_usage_error("--spec-type: '%s' is not supported (ngram-simple is)", arg);
}

void cli_spec_finish(cli_spec *s)
{
    if (!s->type && (s->n || s->m || s->max || s->min))
        cli_usage_error("--spec-draft-n-max, --spec-draft-n-min and --spec-ngram-simple-* need "
                        "--spec-type");
    if (!s->type)
        return;
    if (s->type == CLI_SPEC_DRAFT) {
        s->max = s->max ? s->max : DEFAULT_DRAFT_MAX;
    } else {
        s->n = s->n ? s->n : DEFAULT_SPEC_N;
        s->m = s->m ? s->m : DEFAULT_SPEC_M;
        s->max = s->max && s->max < s->m ? s->max : s->m;
    }
    if (s->min > s->max)
        cli_usage_error("--spec-draft-n-min %" PRIu64 " is above the draft's most, %" PRIu64,
                        s->min, s->max);
}

void cli_spec_start(cli_spec *s, cli_spec_run *r, size_t most)
{
    if (s->max + 1 > most)
        s->max = most > 1 ? most - 1 : 1;
    if (s->min > s->max) /* the step lowered the most */
        s->min = s->max;
    r->cap = s->max < SPEC_FIRST_CAP ? (size_t)s->max : SPEC_FIRST_CAP;
    if (r->cap < s->min) /* fewer would never guess */
        r->cap = (size_t)s->min;
    r->drafted = r->accepted = 0;
}

size_t cli_spec_most(const cli_spec_run *r, uint32_t room_back, size_t budget)
{
    if (room_back < 2)
        return 0;
    size_t most = r->cap < room_back - 1 ? r->cap : room_back - 1;
    return most < budget ? most : budget;
}

size_t cli_spec_enough(const cli_spec *s, size_t k)
{
    return k && k >= s->min ? k : 0;
}

size_t cli_spec_guess(const cli_spec *s, const cli_spec_run *r, const ml_token *hist,
                      size_t n_hist, uint32_t room_back, size_t budget, ml_token *out)
{
    size_t most = s->type == CLI_SPEC_NGRAM ? cli_spec_most(r, room_back, budget) : 0;
    return cli_spec_enough(s, ml_draft_ngram(hist, n_hist, (size_t)s->n, out, most));
}

void cli_spec_checked(const cli_spec *s, cli_spec_run *r, size_t k, size_t kept)
{
    r->drafted += k;
    r->accepted += kept;
    /* not below --spec-draft-n-min after a miss: fewer would never guess
     * again */
    size_t low = kept + 1 > s->min ? kept + 1 : (size_t)s->min;
    r->cap = kept == k ? (2 * k < s->max ? 2 * k : (size_t)s->max) : low;
}
