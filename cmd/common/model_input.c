/* model_input.c - see model_input.h: a GGUF or an .mlb, by its magic; the
 * parts of a split GGUF. */
#include "model_input.h"

#include "cli.h"
#include "input.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int is_gguf(const void *magic, size_t len)
{
    return len >= 4 && memcmp(magic, "GGUF", 4) == 0;
}

/* A pipe (or standard input, whatever it is) read to its end. */
static int read_whole(const char *path, int fd, model_input *in, size_t *len)
{
    char *buf;
    size_t want;
    ml_status s = cli_read_all_ex(fd, &buf, len, &want);
    if (s == ML_E_IO)
        return cli_failf(path, ML_E_IO, "read: %s", strerror(errno));
    if (s) /* the library's words for a pipe it reads itself */
        return cli_failf(path, s,
                         "the input does not fit in memory: %zu bytes read, a buffer of %zu "
                         "cannot be allocated (give a file instead of a pipe)",
                         *len, want);
    in->buf = buf;
    return 0;
}

static int open_buffer(const char *path, model_input *in, size_t len)
{
    ml_error e;
    ml_status s = is_gguf(in->buf, len) ? ml_gguf_open_memory(in->buf, len, &in->gguf, &e)
                                        : ml_mlb_open_memory(in->buf, len, &in->mlb, &e);
    return s ? cli_fail(path, s, &e) : 0;
}

static int open_path(const char *path, int gguf, model_input *in)
{
    ml_error e;
    ml_status s = gguf ? ml_gguf_open(path, &in->gguf, &e) : ml_mlb_open(path, &in->mlb, &e);
    return s ? cli_fail(path, s, &e) : 0;
}

int model_input_open(const char *path, model_input *in)
{
    memset(in, 0, sizeof *in);
    size_t len = 0;
    int rc;
    if (strcmp(path, "-") == 0) {
        if ((rc = read_whole(path, 0, in, &len)))
            return rc;
        return open_buffer(path, in, len);
    }
    /* What cannot be opened or is a directory goes to the .mlb loader,
     * whose message for it is the one every command prints. */
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0 || S_ISDIR(st.st_mode)) {
        if (fd >= 0)
            close(fd);
        return open_path(path, 0, in);
    }
    if (!S_ISREG(st.st_mode)) { /* a FIFO or a device: read once */
        rc = read_whole(path, fd, in, &len);
        close(fd);
        return rc ? rc : open_buffer(path, in, len);
    }
    char magic[4];
    ssize_t got = pread(fd, magic, sizeof magic, 0);
    close(fd);
    /* A short or unreadable file is the loader's to report. */
    return open_path(path, got == 4 && is_gguf(magic, 4), in);
}

int model_input_open_parts(const char *const *paths, size_t n, model_input *in)
{
    if (n == 1)
        return model_input_open(paths[0], in);
    memset(in, 0, sizeof *in);
    char magic[4];
    int fd = open(paths[0], O_RDONLY | O_CLOEXEC);
    ssize_t got = fd < 0 ? -1 : pread(fd, magic, sizeof magic, 0);
    if (fd >= 0)
        close(fd);
    if (got == 4 && !is_gguf(magic, 4))
        return cli_failf(paths[0], ML_E_INVAL,
                         "one input at a time ('%s' is extra): only the parts of a split GGUF "
                         "are named together",
                         paths[1]);
    ml_error e;
    ml_status s = ml_gguf_open_parts(paths, n, &in->gguf, &e);
    return s ? cli_fail(paths[0], s, &e) : 0;
}

void model_input_close(model_input *in)
{
    ml_gguf_close(in->gguf);
    ml_mlb_close(in->mlb);
    free(in->buf);
    memset(in, 0, sizeof *in);
}
