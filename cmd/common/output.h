/* output.h - the commands' output files: refusing to overwrite the input
 * or an existing file, and writing one through ml_outfile (a temporary
 * name renamed into place when complete, removed on failure), failures
 * reported naming the output ("(stdout)" for -). */
#ifndef MLCORE_CLI_OUTPUT_H
#define MLCORE_CLI_OUTPUT_H

#include <mlcore.h>

/* Refuses an output that is the input `in`, or a regular file that exists
 * without --force: says so and returns the usage status.  0 when path may
 * be written (- and NULL always may). */
int cli_check_output(const char *in, const char *path, int force);
/* The same for the other parts of a split GGUF (its first part is the
 * `in` of cli_check_output): an output that is one of them is refused. */
int cli_check_output_parts(const ml_gguf *g, const char *path);

/* ml_outfile_open and ml_outfile_commit with the failure reported;
 * return 0 or the exit status. */
int cli_output_open(const char *path, ml_outfile **f);
int cli_output_commit(const char *path, ml_outfile *f);

/* Writes an importance matrix into the open output f and commits it, or
 * removes f when that fails.  Every error names the output. */
int cli_output_mli(const char *path, ml_outfile *f, const ml_mli *m);

/* What produces a converted output's bytes: src written through fn(sink). */
typedef ml_status (*cli_write_fn)(void *src, ml_write_fn fn, void *sink, ml_error *err);

/* A conversion of the input `in` into path: opens the output, runs write
 * (whose progress callback stops at a signal, signals.h) and ends the
 * progress line.  On success *f holds the whole output, not yet committed.
 * On failure, or when a signal stopped it, the output is removed, and
 * `sibling` too (an output written before it and not committed; may be
 * NULL); a stop then re-raises the signal.  A failure of the output itself
 * (I/O with an errno) names path, any other names the input.  *f is NULL
 * after a failure, also when it returns 0: the reader of standard output
 * went away, which ends the command quietly (cli_fail). */
int cli_output_convert(const char *path, const char *in, cli_write_fn write, void *src,
                       ml_outfile *sibling, ml_outfile **f);

#endif
