/* signals.h - stopping a long write cleanly: the first SIGINT, SIGTERM or
 * SIGHUP only sets a flag the progress callback reports, so the library
 * stops at its next chunk and the command removes its temporary output;
 * then the command re-raises the signal so the exit status says what
 * happened.  A second signal ends the process at once. */
#ifndef MLCORE_CLI_SIGNALS_H
#define MLCORE_CLI_SIGNALS_H

#include <stdint.h>

void cli_catch_signals(void);
/* The signal caught, or 0. */
int cli_stop_signal(void);
/* A conversation's Ctrl-C stops the reply, not the program: 1 (and the
 * flag cleared) when the signal caught is SIGINT, else 0. */
int cli_take_interrupt(void);
/* Re-raises the caught signal (exit status 128 + signal); does not return. */
void cli_die_by_signal(void) __attribute__((noreturn));

/* The progress callback of a long write (ml_convert_progress_fn; ctx a
 * cli_progress_line): draws the progress line of `name` when `show`, and
 * asks the library to stop once a signal was caught. */
typedef struct cli_progress_line {
    const char *name;
    int show;
} cli_progress_line;
int cli_progress_or_stop(void *ctx, uint64_t done, uint64_t total);

#endif
