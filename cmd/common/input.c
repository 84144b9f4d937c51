/* input.c - see input.h: whole inputs read into memory. */
#include "input.h"

#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A pipe's size is unknown: start small and double. */
#define FIRST_CAPACITY (1u << 16)

ml_status cli_read_all(int fd, char **out, size_t *len)
{
    size_t want;
    return cli_read_all_ex(fd, out, len, &want);
}

ml_status cli_read_all_ex(int fd, char **out, size_t *len, size_t *want)
{
    size_t cap = FIRST_CAPACITY, n = 0;
    char *buf = malloc(cap + 1);
    *len = 0;
    *want = cap + 1;
    while (buf) {
        if (n == cap) {
            *want = cap <= SIZE_MAX / 4 ? 2 * cap + 1 : SIZE_MAX;
            char *grown = cap <= SIZE_MAX / 4 ? realloc(buf, 2 * cap + 1) : NULL;
            if (!grown) {
                *len = n;
                break;
            }
            buf = grown;
            cap *= 2;
        }
        ssize_t r = read(fd, buf + n, cap - n);
        if (r > 0) {
            n += (size_t)r;
        } else if (r == 0) {
            buf[n] = 0;
            *out = buf;
            *len = n;
            return ML_OK;
        } else if (errno != EINTR) {
            int e = errno;
            free(buf);
            errno = e;
            return ML_E_IO;
        }
    }
    free(buf);
    return ML_E_NOMEM;
}

int cli_read_text(const char *path, char **out, size_t *len)
{
    int fd = strcmp(path, "-") == 0 ? 0 : open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return cli_failf(path, ML_E_IO, "cannot open: %s", strerror(errno));
    ml_status s = cli_read_all(fd, out, len);
    if (fd != 0)
        close(fd);
    if (s == ML_E_IO)
        return cli_failf(path, ML_E_IO, "read error");
    return s ? cli_fail(path, s, NULL) : 0;
}
