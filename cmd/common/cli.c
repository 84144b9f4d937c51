/* cli.c - shared command-line plumbing: option parsing from one table,
 * usage text, exit statuses, error lines and stdout discipline. */
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define ID_HELP (-1000)
#define ID_VERSION (-1001)
#define MAX_OPTS 64

static const cli *C;
static struct option longopts[2 * MAX_OPTS + 3];
static const cli_alias *aliases;
static int n_aliases;

void cli_set_aliases(const cli_alias *a, int n)
{
    aliases = a;
    n_aliases = n < MAX_OPTS ? n : MAX_OPTS;
}
static char shortopts[3 * MAX_OPTS + 8];

static void build_tables(void)
{
    int k = 0;
    size_t s = 0;
    shortopts[s++] = ':'; /* report a missing argument as ':', not '?' */
    for (int i = 0; i < C->n_opts && i < MAX_OPTS; i++) {
        const cli_opt *o = &C->opts[i];
        if (o->long_name)
            longopts[k++] = (struct option){o->long_name, o->arg ? required_argument : no_argument,
                                            NULL, 256 + i};
        for (int a = 0; a < n_aliases; a++)
            if (aliases[a].id == o->id && aliases[a].long_name[0] != '-')
                longopts[k++] = (struct option){aliases[a].long_name,
                                                o->arg ? required_argument : no_argument, NULL,
                                                256 + i};
        if (o->short_name) {
            shortopts[s++] = o->short_name;
            if (o->arg)
                shortopts[s++] = ':';
        }
    }
    longopts[k++] = (struct option){"help", no_argument, NULL, 'h'};
    longopts[k++] = (struct option){"version", no_argument, NULL, 'V'};
    longopts[k] = (struct option){NULL, 0, NULL, 0};
    shortopts[s++] = 'h';
    shortopts[s++] = 'V';
    shortopts[s] = 0;
}

void cli_init(const cli *c)
{
    C = c;
    signal(SIGPIPE, SIG_IGN);
    build_tables();
}

static void print_usage(FILE *f)
{
    fprintf(f, "Usage: %s %s\n%s\n\nOptions:\n", C->prog, C->synopsis, C->summary);
    for (int i = 0; i < C->n_opts; i++) {
        const cli_opt *o = &C->opts[i];
        char left[64];
        int n = 0;
        if (o->short_name)
            n = snprintf(left, sizeof left, "-%c%s", o->short_name, o->long_name ? ", " : "");
        else
            n = snprintf(left, sizeof left, "    ");
        if (o->long_name)
            n += snprintf(left + n, sizeof left - (size_t)n, "--%s", o->long_name);
        if (o->arg)
            snprintf(left + n, sizeof left - (size_t)n, " %s", o->arg);
        fprintf(f, "  %-24s %s\n", left, o->help);
        for (int a = 0; a < n_aliases; a++)
            if (aliases[a].id == o->id)
                fprintf(f, "  %-24s (also %s%s)\n", "", aliases[a].long_name[0] == '-' ? "" : "--",
                        aliases[a].long_name);
    }
    fprintf(f, "  %-24s %s\n  %-24s %s\n", "-h, --help", "print this help and exit",
            "-V, --version", "print the version and exit");
    if (C->epilogue)
        fprintf(f, "\n%s", C->epilogue);
    fprintf(f, "\nExit status: 0 success, 1 invalid input or failed check, 2 usage error,\n"
               "3 I/O error, 4 valid but unsupported input.  See %s(1).\n", C->prog);
}

void cli_usage_error(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "%s: ", C->prog);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry '%s --help' for more information.\n", C->prog);
    exit(EXIT_USAGE);
}

/* getopt reports the failing option in optopt or in argv[optind - 1]. */
static const char *bad_option(char **argv)
{
    static char buf[8];
    if (optopt && optopt < 256) {
        snprintf(buf, sizeof buf, "-%c", optopt);
        return buf;
    }
    return argv[optind - 1];
}

/* An alias spelled "-cnv" (llama.cpp's single-dash long options) becomes
 * the option's long name before getopt, which would read it as -c nv. */
static void single_dash_aliases(int argc, char **argv)
{
    static char names[MAX_OPTS][64];
    for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
        for (int a = 0; a < n_aliases; a++) {
            if (aliases[a].long_name[0] != '-' || strcmp(argv[i], aliases[a].long_name) != 0)
                continue;
            for (int o = 0; o < C->n_opts; o++)
                if (C->opts[o].id == aliases[a].id && C->opts[o].long_name) {
                    snprintf(names[a], sizeof names[a], "--%s", C->opts[o].long_name);
                    argv[i] = names[a];
                }
        }
}

/* --help wins wherever it stands before "--", even after a bad option or
 * value: asking for help is never an error. */
static void help_anywhere(int argc, char **argv)
{
    single_dash_aliases(argc, argv);
    for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
        if (strcmp(argv[i], "--help") == 0) {
            print_usage(stdout);
            exit(cli_finish(EXIT_OK));
        }
}

int cli_next(int argc, char **argv, const char **arg, int *optind_out)
{
    static int scanned;
    if (!scanned++)
        help_anywhere(argc, argv);
    opterr = 0;
    for (;;) {
        optopt = 0;
        int c = getopt_long(argc, argv, shortopts, longopts, NULL);
        *arg = optarg;
        *optind_out = optind;
        if (c == -1)
            return -1;
        if (c == 'h') {
            print_usage(stdout);
            exit(cli_finish(EXIT_OK));
        }
        if (c == 'V') {
            printf("%s (mlcore) %s\n", C->prog, ML_VERSION_STRING);
            exit(cli_finish(EXIT_OK));
        }
        /* A known long option given "=VALUE" it does not take: getopt sets
         * optopt to its id (or to 'h'/'V', which never fail as short ones). */
        if (c == '?' && (optopt >= 256 || optopt == 'h' || optopt == 'V'))
            cli_usage_error("option '%.*s' takes no argument",
                            (int)strcspn(argv[optind - 1], "="), argv[optind - 1]);
        if (c == '?')
            cli_usage_error("unknown option '%s'", bad_option(argv));
        if (c == ':')
            cli_usage_error("option '%s' needs an argument", bad_option(argv));
        if (c >= 256)
            return C->opts[c - 256].id;
        for (int i = 0; i < C->n_opts; i++)
            if (C->opts[i].short_name == c)
                return C->opts[i].id;
    }
}

uint64_t cli_u64(const char *opt, const char *arg, uint64_t min, uint64_t max)
{
    char *end;
    errno = 0;
    if (!arg || !*arg || *arg == '-' || *arg == '+' || *arg == ' ')
        cli_usage_error("%s: '%s' is not a number", opt, arg ? arg : "");
    unsigned long long v = strtoull(arg, &end, 10);
    if (errno || *end)
        cli_usage_error("%s: '%s' is not a number", opt, arg);
    if (v < min || v > max)
        cli_usage_error("%s: %llu is outside %llu..%llu", opt, v, (unsigned long long)min,
                        (unsigned long long)max);
    return v;
}

ml_cache_type cli_cache_type(const char *opt, const char *arg)
{
    ml_cache_type t;
    if (ml_cache_type_parse(arg, &t, NULL))
        cli_usage_error("%s: unknown cache type '%s' (expected f32, f16, q8_0 or q4_0)", opt,
                        arg ? arg : "");
    return t;
}

int cli_cache_fits(const char *file, const ml_mlb_header *h, ml_cache_type k, ml_cache_type v)
{
    ml_error err;
    ml_status s = ml_cache_type_check(h, k, &err);
    const char *opt = s && k == v ? "--cache-type" : "--cache-type-k";
    ml_cache_type t = k;
    if (!s) {
        s = ml_cache_type_check(h, v, &err);
        opt = "--cache-type-v";
        t = v;
    }
    if (!s)
        return 0;
    const char *name = ml_cache_type_name(t);
    return cli_failf(file, s, "%s %s: %s", opt, name ? name : "?", err.msg);
}

int cli_exit_status(ml_status s)
{
    switch (s) {
    case ML_OK: return EXIT_OK;
    case ML_E_FORMAT: case ML_E_SHAPE: case ML_E_MISMATCH: return EXIT_INVALID;
    case ML_E_INVAL: return EXIT_USAGE;
    case ML_E_UNSUPPORTED: return EXIT_UNSUPPORTED;
    case ML_E_IO: case ML_E_NOMEM: return EXIT_IO;
    }
    return EXIT_IO;
}

const char *cli_name(const char *path)
{
    return strcmp(path, "-") == 0 ? "(stdin)" : path;
}

const char *cli_out_name(const char *path)
{
    return strcmp(path, "-") == 0 ? "(stdout)" : path;
}

/* Set when a write failed because the reader of our output went away. */
static int output_gone;

int cli_fail(const char *file, ml_status s, const ml_error *err)
{
    if (s == ML_E_IO && err && err->sys_errno == EPIPE) {
        output_gone = 1;
        return EXIT_OK;
    }
    cli_progress_end();
    fflush(stdout);
    fprintf(stderr, "%s: %s%s%s: %s\n", C->prog, file ? cli_name(file) : "", file ? ": " : "",
            ml_status_name(s), err && err->msg[0] ? err->msg : ml_strerror(s));
    return cli_exit_status(s);
}

static ml_status set_error_v(ml_error *err, ml_status code, const char *fmt, va_list ap)
{
    memset(err, 0, sizeof *err);
    err->code = code;
    err->offset = -1;
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    return code;
}

ml_status cli_set_error(ml_error *err, ml_status code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    set_error_v(err, code, fmt, ap);
    va_end(ap);
    return code;
}

int cli_failf(const char *file, ml_status s, const char *fmt, ...)
{
    ml_error err;
    va_list ap;
    va_start(ap, fmt);
    set_error_v(&err, s, fmt, ap);
    va_end(ap);
    return cli_fail(file, s, &err);
}

void cli_warn(const char *file, const char *fmt, ...)
{
    va_list ap;
    cli_progress_end();
    fflush(stdout);
    fprintf(stderr, "%s: ", C->prog);
    if (file)
        fprintf(stderr, "%s: ", cli_name(file));
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

int cli_stdout_ok(void)
{
    return !ferror(stdout) && !output_gone;
}

int cli_finish(int status)
{
    int bad = fflush(stdout) != 0 || ferror(stdout);
    int e = errno;
    /* EBADF here means stdout was closed (cmd >&-) and nothing was written
     * to it (a pending byte would have failed fflush): nothing was lost. */
    if (fclose(stdout) != 0 && !bad && errno != EBADF) {
        bad = 1;
        e = errno;
    }
    if (bad && e != EPIPE) {
        fprintf(stderr, "%s: (stdout): ML_E_IO: write error: %s\n", C->prog, strerror(e));
        return status ? status : EXIT_IO;
    }
    return status;
}

ml_status cli_stdout_sink(void *ctx, const void *buf, size_t n, ml_error *err)
{
    (void)ctx;
    (void)err;
    fwrite(buf, 1, n, stdout);
    return ML_OK;
}

ml_status cli_stdout_sink_flushed(void *ctx, const void *buf, size_t n, ml_error *err)
{
    ml_status s = cli_stdout_sink(ctx, buf, n, err);
    fflush(stdout);
    return s;
}

double cli_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

unsigned cli_n_cpus(unsigned max)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1)
        return 1;
    return (unsigned long)n > max ? max : (unsigned)n;
}

int cli_stderr_is_tty(void)
{
    return isatty(2);
}

static int progress_shown;

void cli_progress(const char *name, uint64_t done, uint64_t total)
{
    static int tty = -1;
    static struct timespec last;
    if (tty < 0)
        tty = isatty(2);
    if (!tty)
        return;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    double dt = (double)(now.tv_sec - last.tv_sec) + (double)(now.tv_nsec - last.tv_nsec) / 1e9;
    if (progress_shown && dt < 0.2)
        return;
    last = now;
    if (total)
        fprintf(stderr, "\r%s: %s: %3.0f%% (%.2f of %.2f GB) ", C->prog, cli_name(name),
                100.0 * (double)done / (double)total, (double)done / 1e9, (double)total / 1e9);
    else
        fprintf(stderr, "\r%s: %s: %.2f GB ", C->prog, cli_name(name), (double)done / 1e9);
    progress_shown = 1;
}

void cli_progress_end(void)
{
    if (progress_shown)
        fputs("\r\033[K", stderr);
    progress_shown = 0;
}

/* Length of the valid UTF-8 sequence at s (at most n bytes), 0 if invalid. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    size_t len = s[0] < 0xc2 ? 0 : s[0] < 0xe0 ? 2 : s[0] < 0xf0 ? 3 : s[0] < 0xf5 ? 4 : 0;
    if (!len || len > n)
        return 0;
    for (size_t i = 1; i < len; i++)
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    if ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] > 0x9f) ||
        (s[0] == 0xf0 && s[1] < 0x90) || (s[0] == 0xf4 && s[1] > 0x8f))
        return 0; /* overlong, surrogate or above U+10FFFF */
    return len;
}

void json_strn(FILE *f, const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    fputc('"', f);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = p[i];
        if (c == '"' || c == '\\') {
            fprintf(f, "\\%c", c);
        } else if (c == '\n') {
            fputs("\\n", f);
        } else if (c == '\t') {
            fputs("\\t", f);
        } else if (c < 0x20 || c == 0x7f) {
            fprintf(f, "\\u%04x", c);
        } else if (c < 0x80) {
            fputc(c, f);
        } else {
            size_t len = utf8_len(p + i, n - i);
            if (len) { /* valid UTF-8 passes through */
                fwrite(p + i, 1, len, f);
                i += len - 1;
            } else { /* a byte that is not UTF-8: U+FFFD */
                fputs("\\ufffd", f);
            }
        }
    }
    fputc('"', f);
}

void json_str(FILE *f, const char *s)
{
    json_strn(f, s, strlen(s));
}

void json_f32(FILE *f, float v)
{
    if (v != v)
        fputs("\"NaN\"", f);
    else if (v > 3.4e38f)
        fputs("\"Infinity\"", f);
    else if (v < -3.4e38f)
        fputs("\"-Infinity\"", f);
    else
        fprintf(f, "%.9g", (double)v);
}
