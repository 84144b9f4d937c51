/* output.c - see output.h: checking, writing and committing the commands'
 * output files. */
#include "output.h"

#include "cli.h"
#include "signals.h"

#include <string.h>
#include <sys/stat.h>

static int same_file(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

int cli_check_output(const char *in, const char *path, int force)
{
    struct stat so, si;
    if (!path || strcmp(path, "-") == 0 || stat(path, &so) != 0)
        return 0;
    if (strcmp(in, "-") != 0 && stat(in, &si) == 0 && same_file(&so, &si)) {
        cli_warn(path, "is the input file; choose another output");
        return EXIT_USAGE;
    }
    if (!force && S_ISREG(so.st_mode)) {
        cli_warn(path, "exists; use -f to overwrite it");
        return EXIT_USAGE;
    }
    return 0;
}

int cli_check_output_parts(const ml_gguf *g, const char *path)
{
    int rc = 0;
    for (size_t i = 1; i < ml_gguf_n_parts(g) && !rc; i++)
        rc = cli_check_output(ml_gguf_part_at(g, i)->path, path, 1);
    return rc;
}

int cli_output_open(const char *path, ml_outfile **f)
{
    ml_error err;
    ml_status s = ml_outfile_open(path, f, &err);
    return s ? cli_fail(cli_out_name(path), s, &err) : 0;
}

int cli_output_commit(const char *path, ml_outfile *f)
{
    ml_error err;
    ml_status s = ml_outfile_commit(f, &err);
    return s ? cli_fail(cli_out_name(path), s, &err) : 0;
}

int cli_output_mli(const char *path, ml_outfile *f, const ml_mli *m)
{
    ml_error err;
    ml_status s = ml_mli_write(m, ml_outfile_sink, f, &err);
    if (!s)
        return cli_output_commit(path, f);
    ml_outfile_abort(f);
    return cli_fail(cli_out_name(path), s, &err);
}

int cli_output_convert(const char *path, const char *in, cli_write_fn write, void *src,
                       ml_outfile *sibling, ml_outfile **f)
{
    int rc = cli_output_open(path, f);
    if (rc) {
        ml_outfile_abort(sibling);
        return rc;
    }
    ml_error err;
    ml_status s = write(src, ml_outfile_sink, *f, &err);
    cli_progress_end();
    if (!s && !cli_stop_signal())
        return 0;
    ml_outfile_abort(*f);
    ml_outfile_abort(sibling);
    *f = NULL;
    if (cli_stop_signal())
        cli_die_by_signal();
    return cli_fail(s == ML_E_IO && err.sys_errno ? cli_out_name(path) : in, s, &err);
}
