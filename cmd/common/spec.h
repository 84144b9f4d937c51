/* spec.h - speculative decoding as the commands offer it (ml-run,
 * ml-serve): llama.cpp's option names and checks, and the policy of how
 * many tokens to guess a step, which backs off after a miss.  The guesses
 * themselves come from the library (ml_draft_ngram) or a draft model
 * (draft.h); what the commands share is here so that both decide alike. */
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
    const char *draft;        /* -md FILE: --spec-type draft-simple's model */
    uint64_t threads_draft;   /* -td N; 0: the model's threads */
    float p_min;              /* --spec-draft-p-min: the draft's confidence to go on */
} cli_spec;

/* The eight options' table entries, with ids BASE .. BASE + 7 (a
 * command's enum keeps eight in a row for them): --spec-type and its
 * sizes, then the draft model's three. */
#define CLI_SPEC_OPTS(BASE)                                                                     \
    {(BASE), 0, "spec-type", "TYPE",                                                            \
     "ngram-simple: guess the next tokens from the text so far and check them in one\n"        \
     "                           step (the output is the same, bit for bit); draft-simple:\n"  \
     "                           a draft model guesses them (-md)"},                            \
    {(BASE) + 1, 0, "spec-ngram-simple-size-n", "N",                                            \
     "the last N tokens are looked up (default " CLI_STR(DEFAULT_SPEC_N) ")"},                  \
    {(BASE) + 2, 0, "spec-ngram-simple-size-m", "M",                                            \
     "up to M tokens that followed them are guessed (default " CLI_STR(DEFAULT_SPEC_M) ")"},    \
    {(BASE) + 3, 0, "spec-draft-n-max", "N",                                                    \
     "guess at most N tokens a step (default: M; with -md " CLI_STR(DEFAULT_DRAFT_MAX) ")"},    \
    {(BASE) + 4, 0, "spec-draft-n-min", "N", "guess only when N or more are found (default 0)"}, \
    {(BASE) + 5, 0, "model-draft", "FILE",                                                      \
     "a draft model (.mlb, its .mlt beside it) that shares the model's vocabulary\n"           \
     "                           guesses the next tokens (--spec-type draft-simple)"},          \
    {(BASE) + 6, 0, "threads-draft", "N", "the draft model's threads (default: --threads)"},    \
    {(BASE) + 7, 0, "spec-draft-p-min", "P",                                                    \
     "the draft model guesses while its best token's probability is P or more (default 0)"}

/* llama.cpp's other spellings of them, for the command's cli_alias table. */
#define CLI_SPEC_ALIASES(BASE)                                                                  \
    {(BASE) + 5, "-md"}, {(BASE) + 5, "spec-draft-model"}, {(BASE) + 6, "-td"},                 \
        {(BASE) + 6, "spec-draft-threads"}, {(BASE) + 7, "draft-p-min"}

/* Option id (one of CLI_SPEC_OPTS(base)'s) with its argument into s:
 * 1 when it was one of them, 0 when not; usage errors for bad values. */
int cli_spec_option(cli_spec *s, int id, int base, const char *arg);
/* --spec-type TYPE: ngram-simple or draft-simple, or a usage error
 * naming TYPE. */
void cli_spec_type(cli_spec *s, const char *arg);
/* After parsing: a draft model implies draft-simple and excludes
 * ngram-simple (one kind of guesses a run: llama.cpp may chain several,
 * these commands do not); the draft's options need one; the sizes'
 * defaults and order.  Usage errors for what does not go together. */
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
/* The guesses a generation may still use: those past the token drawn
 * last, within max_tokens of which `kept` are kept already. */
size_t cli_spec_left(uint64_t max_tokens, uint64_t kept);

/* The step that checks a sequence's guesses: its context (what a step
 * costs by its tokens: ml_ctx_step_group), the tokens other sequences
 * already have in it, what the sequence can take back
 * (ml_ctx_seq_rewind_room) and the most guesses it may hold (the step's
 * spare rows, cli_spec_left). */
typedef struct cli_spec_step {
    const ml_ctx *ctx;
    size_t used;
    uint32_t room_back;
    size_t budget;
} cli_spec_step;

/* ngram-simple's guesses of what follows hist[0..n_hist) (its last token
 * included) into out: cli_spec_most of them, or more where the step is
 * computed in groups of tokens and they fill the last group for free (at
 * most --spec-draft-n-max, the room and the budget); cli_spec_enough. */
size_t cli_spec_guess(const cli_spec *s, const cli_spec_run *r, const cli_spec_step *step,
                      const ml_token *hist, size_t n_hist, ml_token *out);
/* k guesses were checked and the first `kept` held: the counts, and the
 * next step's cap (one more than kept after a miss but at least s->min,
 * twice k while they hold, up to s->max). */
void cli_spec_checked(const cli_spec *s, cli_spec_run *r, size_t k, size_t kept);

#endif
