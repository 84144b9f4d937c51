/* spec.c - speculative decoding's options and back-off (spec.h). */
#include "spec.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* --spec-draft-p-min P: a probability, 0 to 1. */
static float p_min(const char *arg)
{
    char *end;
    errno = 0;
    float v = strtof(arg, &end);
    if (errno || end == arg || *end || !(v >= 0 && v <= 1))
        cli_usage_error("--spec-draft-p-min: '%s' is not a number in [0, 1]", arg);
    return v;
}

int cli_spec_option(cli_spec *s, int id, int base, const char *arg)
{
    switch (id - base) {
    case 0: cli_spec_type(s, arg); return 1;
    case 1: s->n = cli_u64("--spec-ngram-simple-size-n", arg, 1, 1024); return 1;
    case 2: s->m = cli_u64("--spec-ngram-simple-size-m", arg, 1, 1024); return 1;
    case 3: s->max = cli_u64("--spec-draft-n-max", arg, 1, 1024); return 1;
    case 4: s->min = cli_u64("--spec-draft-n-min", arg, 0, 1024); return 1;
    case 5: s->draft = arg; return 1;
    case 6: s->threads_draft = cli_u64("--threads-draft", arg, 1, 256); return 1;
    case 7: s->p_min = p_min(arg); return 1;
    default: return 0;
    }
}

void cli_spec_type(cli_spec *s, const char *arg)
{
    if (strcmp(arg, "ngram-simple") == 0)
        s->type = CLI_SPEC_NGRAM;
    else if (strcmp(arg, "draft-simple") == 0)
        s->type = CLI_SPEC_DRAFT;
    else
        cli_usage_error("--spec-type: '%s' is not supported (ngram-simple and draft-simple are)",
                        arg);
}

/* A draft model: what it implies and what it excludes. */
static void check_draft(cli_spec *s)
{
    if (s->draft && s->type == CLI_SPEC_NGRAM)
        cli_usage_error("--model-draft guesses with a model (--spec-type draft-simple), not with "
                        "--spec-type ngram-simple");
    if (s->draft)
        s->type = CLI_SPEC_DRAFT; /* llama.cpp infers the type from the draft model too */
    if (s->type == CLI_SPEC_DRAFT && !s->draft)
        cli_usage_error("--spec-type draft-simple needs a draft model (-md FILE)");
    if (s->threads_draft && !s->draft)
        cli_usage_error("--threads-draft needs a draft model (-md FILE)");
    if (s->p_min > 0 && !s->draft)
        cli_usage_error("--spec-draft-p-min needs a draft model (-md FILE)");
    if (s->draft && (s->n || s->m))
        cli_usage_error("--spec-ngram-simple-size-n and -size-m are ngram-simple's, not a draft "
                        "model's");
}

void cli_spec_finish(cli_spec *s)
{
    check_draft(s);
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

/* want, at most room_back - 1 and budget. */
static size_t within(size_t want, uint32_t room_back, size_t budget)
{
    if (room_back < 2)
        return 0;
    size_t most = want < room_back - 1 ? want : room_back - 1;
    return most < budget ? most : budget;
}

size_t cli_spec_most(const cli_spec_run *r, uint32_t room_back, size_t budget)
{
    return within(r->cap, room_back, budget);
}

size_t cli_spec_enough(const cli_spec *s, size_t k)
{
    return k && k >= s->min ? k : 0;
}

size_t cli_spec_left(uint64_t max_tokens, uint64_t kept)
{
    return max_tokens > kept ? (size_t)(max_tokens - kept - 1) : 0;
}

/* An n-gram's guesses cost only their rows' share of the step (they are
 * found at once, not a model's step each), and a step computed in
 * groups of tokens costs as much for its last group's empty places as
 * for guesses in them: `most` guesses are filled up to their group's
 * end where allowed.  Where the most allowed ends a quarter of a group
 * or less into a group of its own, those are left out: a group's cost
 * for a few guesses at the far end of a draft. */
static size_t fill_group(const cli_spec *s, const cli_spec_step *st, size_t most)
{
    /* the most guesses the step may hold, whatever the cap */
    const size_t top = st->used + 1 + within((size_t)s->max, st->room_back, st->budget);
    const size_t n = st->used + 1 + most, g = ml_ctx_step_group(st->ctx, (uint32_t)n);
    if (g <= 1 || n > top) /* n > top: most was not within the allowed */
        return most;
    const size_t end = (n + g - 1) / g * g, part = top % g;
    if (end <= top)
        return end - st->used - 1;
    if (part && part <= g / 4 && top - part > st->used + 1)
        return top - part - st->used - 1;
    return top - st->used - 1;
}

size_t cli_spec_guess(const cli_spec *s, const cli_spec_run *r, const cli_spec_step *step,
                      const ml_token *hist, size_t n_hist, ml_token *out)
{
    size_t most = s->type == CLI_SPEC_NGRAM ? cli_spec_most(r, step->room_back, step->budget) : 0;
    if (most)
        most = fill_group(s, step, most);
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
