/* spec.h - speculative decoding as the commands offer it (ml-run,
 * ml-serve): llama.cpp's option names and checks, and the policy of how
 * many tokens to guess a step, which backs off after a miss.  The guesses
 * themselves come from the library (ml_draft_ngram) or a draft model
 * (ml-run's draft.c); what the commands share is here so that both decide
 * alike. */
#ifndef ML_CLI_SPEC_H
#define ML_CLI_SPEC_H

#include "cli.h"
#include "mlcore.h"

#include <stddef.h>
#include <stdint.h>

/* llama.cpp's defaults for ngram-simple */
#define DEFAULT_SPEC_N 12
#define DEFAULT_SPEC_M 48
/* Guesses a draft model may make a step: each costs a step of the draft
 * model, and the back-off keeps misses from costing many. */
#define DEFAULT_DRAFT_MAX 16
/* The first step guesses at most this many: most text does not repeat. */
#define SPEC_FIRST_CAP 4

/* --spec-type, llama.cpp's names. */
enum { CLI_SPEC_NGRAM = 1, CLI_SPEC_DRAFT = 2 };

typedef struct cli_spec {
    int type;                 /* CLI_SPEC_NGRAM or CLI_SPEC_DRAFT; 0: none */
    uint64_t n, m;            /* --spec-ngram-simple-size-n, -size-m */
    uint64_t max, min;        /* --spec-draft-n-max, --spec-draft-n-min */
} cli_spec;

/* The five options' table entries (ngram-simple's), with ids BASE .. BASE
 * + 4 (a command's enum keeps five in a row for them). */
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
 * 1 when it was one of them, 0 when not; usage errors for bad values.
 * `drafts`: whether --spec-type draft-simple is taken. */
int cli_spec_option(cli_spec *s, int id, int base, const char *arg, int drafts);
/* --spec-type TYPE: ngram-simple (or draft-simple with `drafts`), or a
 * usage error naming TYPE. */
void cli_spec_type(cli_spec *s, const char *arg, int drafts);
/* After parsing: the sizes' defaults and order; usage errors for sizes
 * without --spec-type and a minimum above the maximum. */
void cli_spec_finish(cli_spec *s);

/* One generation's speculation: how many it may guess next, and counts. */
typedef struct cli_spec_run {
    size_t cap;
    size_t drafted, accepted;
} cli_spec_run;

/* Lowers s->max to what a step can check (`most` tokens, the guesses
 * and the token before them) and starts r. */
void cli_spec_start(cli_spec *s, cli_spec_run *r, size_t most);
/* How many may be guessed now: r's cap, at most room_back - 1 (what the
 * context can take back; ml_ctx_seq_rewind_room) and `budget`. */
size_t cli_spec_most(const cli_spec_run *r, uint32_t room_back, size_t budget);
/* k guesses found: k, or 0 when fewer than --spec-draft-n-min. */
size_t cli_spec_enough(const cli_spec *s, size_t k);
/* ngram-simple's guesses of what follows hist[0..n_hist) (its last token
 * included) into out: cli_spec_most of them at most, cli_spec_enough. */
size_t cli_spec_guess(const cli_spec *s, const cli_spec_run *r, const ml_token *hist,
                      size_t n_hist, uint32_t room_back, size_t budget, ml_token *out);
/* k guesses were checked and the first `kept` held: the counts, and the
 * next step's cap (one more than kept after a miss but at least s->min,
 * twice k while they hold, up to s->max). */
void cli_spec_checked(const cli_spec *s, cli_spec_run *r, size_t k, size_t kept);

#endif
