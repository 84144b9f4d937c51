/* spec.h - speculative decoding as the commands offer it (ml-run,
 * ml-serve): llama.cpp's option names and checks, and the policy of how
 * many tokens to guess a step, which backs off after a miss.  The guesses
 * themselves are the library's (ml_draft_ngram); what each command shares
 * is here so that both decide alike. */
#ifndef ML_CLI_SPEC_H
#define ML_CLI_SPEC_H

#include "cli.h"
#include "mlcore.h"

#include <stddef.h>
#include <stdint.h>

#define DEFAULT_SPEC_N 12
#define DEFAULT_SPEC_M 48
/* The first step guesses at most this many: most text does not repeat. */
#define SPEC_FIRST_CAP 4

typedef struct cli_spec {
    int on;                   /* --spec-type ngram-simple */
    uint64_t n, m;            /* --spec-ngram-simple-size-n, -size-m */
    uint64_t max, min;        /* --spec-draft-n-max, --spec-draft-n-min */
} cli_spec;

/* The five options' table entries, with ids BASE .. BASE + 4 (a
 * command's enum keeps five in a row for them). */
#define CLI_SPEC_OPTS(BASE)                                                                     \
    {(BASE), 0, "spec-type", "TYPE",                                                            \
     "ngram-simple: guess the next tokens from the text so far and check them in one\n"        \
     "                           step (the output is the same, bit for bit)"},                  \
    {(BASE) + 1, 0, "spec-ngram-simple-size-n", "N",                                            \
     "the last N tokens are looked up (default " CLI_STR(DEFAULT_SPEC_N) ")"},                  \
    {(BASE) + 2, 0, "spec-ngram-simple-size-m", "M",                                            \
     "up to M tokens that followed them are guessed (default " CLI_STR(DEFAULT_SPEC_M) ")"},    \
    {(BASE) + 3, 0, "spec-draft-n-max", "N", "guess at most N tokens a step (default: M)"},     \
    {(BASE) + 4, 0, "spec-draft-n-min", "N", "guess only when N or more are found (default 0)"}

/* Option id (one of CLI_SPEC_OPTS(base)'s) with its argument into s:
 * 1 when it was one of them, 0 when not; usage errors for bad values. */
int cli_spec_option(cli_spec *s, int id, int base, const char *arg);
/* --spec-type TYPE: ngram-simple, or a usage error naming TYPE. */
void cli_spec_type(cli_spec *s, const char *arg);
/* After parsing: the sizes' defaults and order; usage errors for sizes
 * without --spec-type and a minimum above the maximum. */
void cli_spec_finish(cli_spec *s);

/* One generation's speculation: how many it may guess next, and counts. */
typedef struct cli_spec_run {
    size_t cap;
    size_t drafted, accepted;
} cli_spec_run;

void cli_spec_start(const cli_spec *s, cli_spec_run *r);
/* Guesses of what follows hist[0..n_hist) (its last token included) into
 * out (room for s->max), at most room_back - 1 of them (what the context
 * can take back; ml_ctx_seq_rewind_room) and `budget`: their number, 0
 * when too few are found. */
size_t cli_spec_guess(const cli_spec *s, cli_spec_run *r, const ml_token *hist, size_t n_hist,
                      uint32_t room_back, size_t budget, ml_token *out);
/* k guesses were checked and the first `kept` held: the counts, and the
 * next step's cap (one more than kept after a miss but at least s->min,
 * twice k while they hold, up to s->max). */
void cli_spec_checked(const cli_spec *s, cli_spec_run *r, size_t k, size_t kept);

#endif
