/* cli.h - what every mlcore command shares: one option table that drives
 * parsing and --help (with defaults as the code defines them), strict
 * number parsing, the exit-status table, error lines of the form
 * "PROG: FILE: ML_E_NAME: detail", and stdout: checks and a sink. */
#ifndef ML_CLI_H
#define ML_CLI_H

#include "mlcore.h"

#include <stdio.h>

/* A #defined default as the text --help shows: with
 * "#define DEFAULT_TEMP 0.8", CLI_STR(DEFAULT_TEMP) is "0.8", so the help
 * and the code take the number from one place. */
#define CLI_STR(x) CLI_STR_(x)
#define CLI_STR_(x) #x

/* Exit statuses, the same for every command (see each man page). */
enum {
    EXIT_OK = 0,
    EXIT_INVALID = 1,     /* invalid input or failed check */
    EXIT_USAGE = 2,
    EXIT_IO = 3,
    EXIT_UNSUPPORTED = 4
};

/* One option.  `arg` names the argument ("N", "FILE"), NULL for a flag.
 * `id` is returned by cli_next; -h/--help and -V/--version are added by
 * the parser and handled there. */
typedef struct cli_opt {
    int id;
    char short_name;     /* 0 for long-only options */
    const char *long_name;
    const char *arg;
    const char *help;
} cli_opt;

typedef struct cli {
    const char *prog;
    const char *synopsis;    /* "[options] FILE..." */
    const char *summary;     /* one line: what the command does */
    const char *epilogue;    /* printed after the options (may be NULL) */
    const cli_opt *opts;
    int n_opts;
} cli;

/* Sets the program name used in messages; ignores SIGPIPE so that a closed
 * stdout is seen as EPIPE and ends the command quietly. */
void cli_init(const cli *c);

/* Another long name for an option (llama.cpp's spelling, say): accepted
 * as the option `id`, shown in --help as "(also --NAME)" under it.  A
 * name that starts with '-' is a single-dash spelling ("-cnv", "-sys"),
 * matched only as a whole argument. */
typedef struct cli_alias {
    int id;
    const char *long_name;
} cli_alias;
/* The aliases of the command; call before cli_init.  a must stay alive. */
void cli_set_aliases(const cli_alias *a, int n);

/* Returns the next option's id with *arg set (or NULL), or -1 when the
 * options end (*optind_out then indexes the first operand).  Exits 0 for
 * --help and --version, 2 for a usage error. */
int cli_next(int argc, char **argv, const char **arg, int *optind_out);

/* Prints "PROG: message" and "Try 'PROG --help'..." to stderr; exits 2. */
void cli_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* Strict conversions of option arguments; a bad value is a usage error. */
uint64_t cli_u64(const char *opt, const char *arg, uint64_t min, uint64_t max);
/* A KV cache type, llama.cpp's name for it ("f32", "f16", "q8_0", "q4_0"). */
ml_cache_type cli_cache_type(const char *opt, const char *arg);
/* The types cli_cache_type takes, for --help. */
#define CLI_CACHE_TYPES "f32 (default), f16, q8_0 or q4_0"
/* 0 when the model of header h (file FILE) can cache keys as k and values
 * as v (ml_cache_type_check); otherwise prints "PROG: FILE: ML_E_...:
 * --cache-type-k TYPE: why" (--cache-type when both are that type,
 * --cache-type-v for the values alone) and returns the exit status. */
int cli_cache_fits(const char *file, const ml_mlb_header *h, ml_cache_type k, ml_cache_type v);

/* Maps a library status to the exit status. */
int cli_exit_status(ml_status s);

/* Prints "PROG: FILE: ML_E_NAME: detail" and returns the exit status.
 * A write that failed with EPIPE (the reader of our output went away, as
 * in `cmd | head -1`) is not reported: it prints nothing, makes
 * cli_stdout_ok() false so loops stop, and returns 0, as cli_finish does
 * for stdout. */
int cli_fail(const char *file, ml_status s, const ml_error *err);
/* cli_fail for the command's own findings: the detail is formatted here. */
int cli_failf(const char *file, ml_status s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Fills err as the library would (code, no field, no offset, the detail as
 * the message), for a finding that travels like a library error; returns
 * code. */
ml_status cli_set_error(ml_error *err, ml_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Prints "PROG: FILE: message" (FILE may be NULL); no status. */
void cli_warn(const char *file, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* 1 when stdout can still take data; 0 after a write error on it, or
 * after cli_fail was given an EPIPE (reader went away). */
int cli_stdout_ok(void);
/* Flushes and closes stdout: returns `status`, or 3 after a write error
 * other than EPIPE (which ends quietly with `status`). */
int cli_finish(int status);

/* ml_write_fn onto stdout (ctx unused): buffered, or flushed after every
 * piece so that generated text shows as it comes.  A failed write shows
 * in cli_stdout_ok and cli_finish. */
ml_status cli_stdout_sink(void *ctx, const void *buf, size_t n, ml_error *err);
ml_status cli_stdout_sink_flushed(void *ctx, const void *buf, size_t n, ml_error *err);

/* Seconds on the monotonic clock, for timings. */
double cli_seconds(void);

/* The CPUs online (1 when unknown), at most max: the default thread count. */
unsigned cli_n_cpus(unsigned max);

/* Whether progress may be drawn: stderr is a terminal. */
int cli_stderr_is_tty(void);

/* A progress line on stderr, only when it is a terminal, at most five
 * redraws a second: "PROG: NAME: 45% (1.2 of 2.5 GB)".  total 0 means
 * unknown (bytes only).  cli_progress_end erases the line. */
void cli_progress(const char *name, uint64_t done, uint64_t total);
void cli_progress_end(void);

/* The display name of an operand: "-" reads as "(stdin)". */
const char *cli_name(const char *path);
/* The display name of an output: "-" reads as "(stdout)". */
const char *cli_out_name(const char *path);

/* JSON output helpers (stdout). */
void json_str(FILE *f, const char *s);           /* quoted, escaped */
void json_strn(FILE *f, const char *s, size_t n); /* arbitrary bytes */
void json_f32(FILE *f, float v);  /* %.9g; NaN and infinities as strings */

#endif
