/* run.h - what ml-run's files share: the options, the state of one run,
 * and the steps (session.c) a plain generation (main.c) and a chat
 * (chat.c) are made of. */
#ifndef ML_RUN_H
#define ML_RUN_H

#include <mlcore.h>

#include "draft.h"
#include "spec.h"

#include <stddef.h>

#define MAX_STOPS ML_STOP_MAX
#define MAX_BIAS 256 /* --logit-bias options of one run */

/* Defaults run_open applies and --help shows. */
#define DEFAULT_CTX 4096
#define DEFAULT_BATCH 512

typedef struct options {
    const char *model, *tok, *prompt, *file, *logits, *ppl, *imatrix;
    int ids, no_bos, ignore_eos, verbose, quiet, no_escape, repeat_off;
    int chat, interactive;              /* --chat, -i */
    const char *system;                 /* -sys TEXT */
    const char *chat_template, *chat_template_file;
    const char *grammar, *grammar_file; /* --grammar TEXT, --grammar-file FILE */
    const char *json_schema, *json_schema_file; /* --json-schema TEXT, --json-schema-file */
    char *stops[MAX_STOPS];
    size_t n_stops;
    uint64_t n_predict, ctx, threads, batch;
    ml_cache_type cache_k, cache_v; /* how the KV cache holds keys, values */
    int no_mmap;          /* --no-mmap: the model read into memory, not mapped */
    int seed_set;
    ml_sampler_params sp;
    ml_logit_bias bias[MAX_BIAS]; /* --logit-bias */
    size_t n_bias;
    cli_spec spec;                 /* --spec-type, its sizes and -md's options */
} options;


/* Everything one run holds; released by run_close. */
typedef struct run {
    options o;
    ml_mlb *mlb;
    ml_model *model;
    ml_mlt *mlt;
    ml_tok *tok;
    ml_ctx *ctx;
    ml_gen *gen;         /* the sampler, stop strings and decoder of a generation */
    ml_grammar *grammar; /* --grammar, --grammar-file */
    ml_grammar_proc *gproc; /* its logit processor, reset at each generation */
    ml_outfile *logits;
    ml_mli *imatrix;
    const ml_mlb_header *h;
    ml_token *ids;       /* prompt and generated tokens */
    size_t n_ids, cap_ids;
    float *row;          /* logits: one row, or n_batch rows for --logits */
    size_t nb;           /* tokens per evaluation step (the context's batch) */
    double t_load, t_prompt, t_gen;
    size_t n_prompt, n_gen;
    size_t n_reused;     /* chat: prompt tokens kept from the turn before */
    size_t n_turns;      /* chat: turns answered so far */
    ml_buf reply;        /* chat: the text generated, as printed */
    int timings_shown;   /* chat: each turn printed its own */
    ml_token *draft;     /* --spec-type: the guesses and the token before them */
    float *rows;         /* and their logits, a row each */
    cli_spec_run spec_run; /* guesses the next step may make; made and kept, all turns */
    cli_draft *drafter;  /* -md: the draft model, its sequence 0 following ids */
} run;

/* session.c: the model, its context, the tokenizer (with --ids only when
 * one is given or lies beside the model) and the generator; 0 or the exit
 * status, reported. */
int run_open(run *r);
void run_close(run *r);
int run_push_id(run *r, ml_token id);
/* Evaluates ids[from..to) and leaves the last row's logits in r->row. */
int run_eval(run *r, size_t from, size_t to);
/* Generates and prints up to -n tokens after ids[0..n_ids), whose last
 * logits are in r->row. */
int run_generate(run *r);
void run_timings(const run *r);

/* -md: the draft model's context reads ids[0..n_ids) (the prompt, while
 * its time counts as the prompt's; not when nothing is generated); 0 or
 * the exit status, reported. */
int run_draft_prompt(run *r);

/* --chat: one turn of the prompt, or a conversation (chat.c). */
int chat(run *r);

#endif


