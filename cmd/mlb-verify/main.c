/* mlb-verify - deep validation of .mlb models read once, in order, from
 * files or pipes: the loader's rules plus every byte (see mlb-verify(1)).
 * --sums prints CRC-32 manifests; --check verifies files against one. */
#define _GNU_SOURCE /* F_SETPIPE_SZ */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { OPT_QUIET, OPT_SUMS, OPT_CHECK };

static const cli_opt opts[] = {
    {OPT_QUIET, 'q', "quiet", NULL, "print nothing on stdout; the exit status is the answer"},
    {OPT_SUMS, 's', "sums", NULL, "print a CRC-32 per tensor and for the whole file"},
    {OPT_CHECK, 'c', "check", "SUMFILE", "verify files against the sums in SUMFILE"},
};

static const cli cmd = {
    "mlb-verify", "[options] [FILE|-]...",
    "Read .mlb models completely and check every rule and every byte.\n"
    "With no FILE, or when FILE is -, read standard input.",
    "Sums lines read: CRC32 (8 hex digits), two spaces, the tensor name or\n"
    "(file) for the whole file, two spaces, the file name.\n",
    opts, sizeof opts / sizeof opts[0],
};

#define WHOLE_FILE "(file)"

/* One manifest line. */
typedef struct sum_entry {
    uint32_t crc;
    char *tensor;
    char *file;
    int seen;
} sum_entry;

typedef struct manifest {
    sum_entry *e;
    size_t n, cap;
} manifest;

/* What one verification collects, for printing or comparing. */
typedef struct run {
    const char *name;     /* file name as given */
    uint64_t size;        /* bytes, when known (regular files), for progress */
    int print_sums;
    manifest *expect;     /* entries to compare against (may be NULL) */
    const char *expect_file;
    int mismatches;
    int quiet;
} run;

/* Compares one sum with every entry the manifest has for it: a manifest
 * may list a file twice (sums appended again), and each entry must match. */
static void compare(run *r, const char *tensor, uint32_t crc)
{
    int found = 0;
    for (size_t i = 0; i < r->expect->n; i++) {
        sum_entry *e = &r->expect->e[i];
        if (strcmp(e->tensor, tensor) != 0 || strcmp(e->file, r->expect_file) != 0)
            continue;
        found = 1;
        e->seen = 1;
        if (e->crc != crc) {
            cli_warn(r->name, "ML_E_MISMATCH: %s: crc32 %08" PRIx32 ", expected %08" PRIx32,
                     tensor, crc, e->crc);
            r->mismatches++;
        }
    }
    if (!found) {
        cli_warn(r->name, "ML_E_MISMATCH: %s is not in the sums file", tensor);
        r->mismatches++;
    }
}

static void on_progress(void *ctx, uint64_t bytes)
{
    const run *r = ctx;
    if (!r->quiet)
        cli_progress(r->name, bytes, r->size);
}

static void on_tensor(void *ctx, const ml_tensor *t, uint32_t crc)
{
    run *r = ctx;
    if (r->print_sums)
        printf("%08" PRIx32 "  %s  %s\n", crc, t->name, r->name);
    if (r->expect)
        compare(r, t->name, crc);
}

/* Reads and checks one operand; fills *rep.  Returns the exit status. */
static int stream_one(run *r, ml_verify_report *rep)
{
    int fd = strcmp(r->name, "-") == 0 ? 0 : open(r->name, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return cli_failf(r->name, ML_E_IO, "cannot open: %s", strerror(errno));
#ifdef F_SETPIPE_SZ
    /* A 1 MiB pipe lets the writer run ahead of us; the default 64 KiB
     * makes both sides wait on each other. */
    fcntl(fd, F_SETPIPE_SZ, 1 << 20);
#endif
    struct stat st;
    r->size = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? (uint64_t)st.st_size : 0;
    rep->on_tensor = on_tensor;
    rep->on_progress = on_progress;
    rep->ctx = r;
    ml_error err;
    ml_status s = ml_mlb_verify_stream(ml_fd_reader, &fd, rep, &err);
    cli_progress_end();
    if (fd != 0)
        close(fd);
    return s ? cli_fail(r->name, s, &err) : EXIT_OK;
}

/* Entries of the manifest for this file that the model did not have. */
static void report_unseen(run *r)
{
    for (size_t i = 0; i < r->expect->n; i++) {
        sum_entry *e = &r->expect->e[i];
        if (strcmp(e->file, r->expect_file) == 0 && !e->seen) {
            cli_warn(r->name, "ML_E_MISMATCH: %s is in the sums file but not in the model",
                     e->tensor);
            r->mismatches++;
        }
    }
}

/* Verifies one operand and prints its line; returns the exit status. */
static int verify_one(run *r)
{
    ml_verify_report rep = {0};
    int status = stream_one(r, &rep);
    if (r->expect) { /* like sha256sum -c: every file gets OK or FAILED */
        if (!status) {
            compare(r, WHOLE_FILE, rep.file_crc);
            report_unseen(r);
            status = r->mismatches ? EXIT_INVALID : EXIT_OK;
        }
        if (!r->quiet)
            printf("%s: %s\n", cli_name(r->name), status ? "FAILED" : "OK");
        return status;
    }
    if (status)
        return status;
    if (r->print_sums) /* "-" stays "-": a manifest line names an operand */
        printf("%08" PRIx32 "  " WHOLE_FILE "  %s\n", rep.file_crc, r->name);
    else if (!r->quiet)
        printf("%s: OK, %zu tensors, %" PRIu64 " bytes, crc32 %08" PRIx32 "\n",
               cli_name(r->name), rep.n_tensors, rep.bytes, rep.file_crc);
    return EXIT_OK;
}

/* "CRC32  TENSOR  FILE" */
static int parse_line(char *line, sum_entry *e)
{
    size_t n = strlen(line);
    while (n && (line[n - 1] == '\n' || line[n - 1] == '\r'))
        line[--n] = 0;
    if (n < 13 || line[8] != ' ' || line[9] != ' ')
        return -1;
    char *end;
    line[8] = 0;
    if (strspn(line, "0123456789abcdefABCDEF") != 8)
        return -1;
    e->crc = (uint32_t)strtoul(line, &end, 16);
    char *tensor = line + 10, *sep = strstr(tensor, "  ");
    if (!sep || sep == tensor || !sep[2])
        return -1;
    *sep = 0;
    e->tensor = strdup(tensor);
    e->file = strdup(sep + 2);
    e->seen = 0;
    return e->tensor && e->file ? 0 : -1;
}

static void free_manifest(manifest *m)
{
    for (size_t i = 0; i < m->n; i++) {
        free(m->e[i].tensor);
        free(m->e[i].file);
    }
    free(m->e);
}

/* Reads SUMFILE; returns 0, or an exit status after printing why. */
static int read_manifest(const char *path, manifest *m)
{
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "r");
    if (!f)
        return cli_failf(path, ML_E_IO, "cannot open: %s", strerror(errno));
    char *line = NULL;
    size_t cap = 0;
    unsigned long lineno = 0;
    int status = 0;
    while (getline(&line, &cap, f) > 0) {
        lineno++;
        if (line[0] == '#' || line[0] == '\n')
            continue;
        sum_entry *e = ml_array_reserve(m->e, &m->cap, m->n + 1, sizeof *e);
        if (!e) {
            status = cli_fail(path, ML_E_NOMEM, NULL);
            break;
        }
        m->e = e;
        if (parse_line(line, &m->e[m->n]) < 0) {
            status = cli_failf(path, ML_E_FORMAT, "line %lu: expected 'CRC32  TENSOR  FILE'",
                               lineno);
            break;
        }
        m->n++;
    }
    free(line);
    if (f != stdin)
        fclose(f);
    if (!status && m->n == 0)
        status = cli_failf(path, ML_E_FORMAT, "no sums in the file");
    return status;
}

/* The distinct file names of a manifest, in order of appearance. */
static size_t manifest_files(const manifest *m, const char **names)
{
    size_t k = 0;
    for (size_t i = 0; i < m->n; i++) {
        size_t j = 0;
        while (j < k && strcmp(names[j], m->e[i].file))
            j++;
        if (j == k)
            names[k++] = m->e[i].file;
    }
    return k;
}

static int check_mode(const char *sumfile, char **files, int n_files, int quiet)
{
    manifest m = {0};
    int status = read_manifest(sumfile, &m);
    if (status) {
        free_manifest(&m);
        return status;
    }
    const char **names = malloc(m.n * sizeof *names);
    size_t n_names = names ? manifest_files(&m, names) : 0;
    if (!names)
        status = cli_fail(sumfile, ML_E_NOMEM, NULL);
    if (!status && n_files && n_names > 1) /* operands must name manifest files */
        for (int i = 0; i < n_files; i++) {
            size_t j = 0;
            while (j < n_names && strcmp(names[j], files[i]))
                j++;
            if (j == n_names)
                cli_usage_error("%s is not named in %s, which lists several files", files[i],
                                sumfile);
        }
    int count = n_files ? n_files : (int)n_names;
    for (int i = 0; names && i < count && cli_stdout_ok(); i++) {
        run r = {0};
        r.name = n_files ? files[i] : names[i];
        r.expect = &m;
        r.expect_file = n_files && n_names == 1 ? names[0] : r.name;
        r.quiet = quiet;
        for (size_t k = 0; k < m.n; k++)
            m.e[k].seen = 0;
        int e = verify_one(&r);
        if (e && !status)
            status = e;
    }
    free(names);
    free_manifest(&m);
    return status;
}

int main(int argc, char **argv)
{
    const char *arg, *sumfile = NULL;
    int id, first, quiet = 0, sums = 0, status = EXIT_OK;
    cli_init(&cmd);
    while ((id = cli_next(argc, argv, &arg, &first)) != -1) {
        switch (id) {
        case OPT_QUIET: quiet = 1; break;
        case OPT_SUMS: sums = 1; break;
        case OPT_CHECK: sumfile = arg; break;
        }
    }
    if (sums && sumfile)
        cli_usage_error("--sums and --check exclude each other");
    if (sumfile) {
        status = check_mode(sumfile, argv + first, argc - first, quiet);
        return cli_finish(status);
    }
    static char dash[] = "-";
    char *stdin_only[] = {dash};
    char **files = first < argc ? argv + first : stdin_only;
    int n = first < argc ? argc - first : 1;
    for (int i = 0; i < n && cli_stdout_ok(); i++) {
        run r = {0};
        r.name = files[i];
        r.print_sums = sums && !quiet;
        r.quiet = quiet;
        int e = verify_one(&r);
        if (e && !status)
            status = e;
    }
    return cli_finish(status);
}
