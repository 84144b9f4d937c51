/* signals.c - see signals.h: a flag for the first termination signal,
 * re-raised once the command has cleaned up. */
#include "signals.h"

#include "cli.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
    if (stop_signal) { /* a second one: give up at once */
        signal(sig, SIG_DFL);
        raise(sig);
    }
    stop_signal = sig;
}

void cli_catch_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
}

int cli_stop_signal(void)
{
    return stop_signal;
}

int cli_take_interrupt(void)
{
    if (stop_signal != SIGINT)
        return 0;
    stop_signal = 0;
    return 1;
}

void cli_die_by_signal(void)
{
    int sig = stop_signal;
    fflush(stdout);
    signal(sig, SIG_DFL);
    raise(sig);
    _exit(128 + sig);
}

int cli_progress_or_stop(void *ctx, uint64_t done, uint64_t total)
{
    const cli_progress_line *p = ctx;
    if (p->show)
        cli_progress(p->name, done, total);
    return cli_stop_signal() != 0;
}
