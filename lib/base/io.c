/* io.c - getting bytes in and out: read-only mappings of input files (or a
 * buffer read from a pipe), file-descriptor readers for streaming, and
 * output files written to a temporary name and renamed into place (devices
 * and FIFOs written in place). */
#include "base/io.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* A pipe that outgrows memory: say how far it got, since the pipe's size
 * is not known in advance. */
static ml_status too_big(ml_error *err, uint8_t *buf, size_t len, size_t want)
{
    free(buf);
    return ml__err(err, ML_E_NOMEM, "", -1,
                   "the input does not fit in memory: %zu bytes read, a buffer of %zu cannot be "
                   "allocated (give a file instead of a pipe)",
                   len, want);
}

/* Pipes and character devices are read whole into an aligned buffer. */
static ml_status read_all(int fd, ml__input *in, ml_error *err)
{
    size_t cap = 1 << 20, len = 0;
    uint8_t *buf = NULL;
    if (posix_memalign((void **)&buf, ML_MLB_ALIGN, cap))
        return too_big(err, NULL, 0, cap);
    for (;;) {
        if (len == cap) {
            uint8_t *nb = NULL;
            if (cap > SIZE_MAX / 2 || posix_memalign((void **)&nb, ML_MLB_ALIGN, cap * 2))
                return too_big(err, buf, len, cap > SIZE_MAX / 2 ? SIZE_MAX : cap * 2);
            memcpy(nb, buf, len);
            free(buf);
            buf = nb;
            cap *= 2;
        }
        ssize_t r = read(fd, buf + len, cap - len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            free(buf);
            return ml__err_io(err, "read", (int64_t)len);
        }
        if (r == 0)
            break;
        len += (size_t)r;
    }
    in->data = buf;
    in->size = len;
    in->owned = buf;
    return ML_OK;
}

/* Huge pages are 2 MiB on x86-64 (and on AArch64 with 4 KiB pages). */
#define HUGE_ALIGN ((size_t)2 << 20)

/* A mapped file copied into a fresh anonymous mapping (ml__input_copy). */
ml_status ml__input_copy(ml__input *in, ml_error *err)
{
    const size_t n = in->size;
    if (!in->mapped || n == 0)
        return ML_OK; /* a pipe's buffer, or nothing: as it is */
    if (n > SIZE_MAX - 2 * HUGE_ALIGN)
        return ml__err(err, ML_E_NOMEM, "", -1, "a file of %zu bytes cannot be copied here", n);
    const size_t len = (n + HUGE_ALIGN - 1) / HUGE_ALIGN * HUGE_ALIGN, map = len + HUGE_ALIGN;
    uint8_t *r = mmap(NULL, map, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (r == MAP_FAILED)
        return ml__err(err, ML_E_NOMEM, "", -1, "cannot allocate %zu bytes to copy the file into",
                       map);
    uint8_t *p = r + (HUGE_ALIGN - (uintptr_t)r % HUGE_ALIGN) % HUGE_ALIGN;
#ifdef MADV_HUGEPAGE
    (void)madvise(p, len, MADV_HUGEPAGE); /* a hint: refused, it is 4 KiB pages */
#endif
    memcpy(p, in->data, n);
    (void)mprotect(p, len, PROT_READ); /* read-only, as the mapping was */
    munmap((void *)in->data, n);
    in->data = p;
    in->mapped = 0;
    in->region = r;
    in->region_size = map;
    return ML_OK;
}

ml_status ml__input_open(const char *path, ml__input *in, ml_error *err)
{
    memset(in, 0, sizeof *in);
    int fd = strcmp(path, "-") == 0 ? 0 : open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return ml__err_io(err, "cannot open", -1);
    struct stat st;
    ml_status s = ML_OK;
    if (fstat(fd, &st) < 0) {
        s = ml__err_io(err, "cannot stat", -1);
    } else if (S_ISDIR(st.st_mode)) {
        errno = EISDIR;
        s = ml__err_io(err, "cannot read", -1);
    } else if (!S_ISREG(st.st_mode)) {
        s = read_all(fd, in, err);
    } else if ((uint64_t)st.st_size > (uint64_t)SIZE_MAX) {
        s = ml__err(err, ML_E_NOMEM, "", -1, "a file of %lld bytes cannot be mapped here",
                    (long long)st.st_size);
    } else if (st.st_size > 0) {
        void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            s = ml__err_io(err, "cannot map", -1);
        } else {
            in->data = p;
            in->size = (size_t)st.st_size;
            in->mapped = 1;
#ifdef MADV_HUGEPAGE
            /* A hint: what this mapping reads from disk comes into the page
             * cache as 2 MiB folios, each mapped by one TLB entry (Linux
             * 6.16+ on ext4 and XFS; without it a cold read leaves part of
             * a model in small folios, with it none). */
            (void)madvise(p, in->size, MADV_HUGEPAGE);
#endif
        }
    }
    if (fd != 0)
        close(fd);
    return s;
}

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22 /* Linux 5.14 */
#endif

void ml__prefault(const void *p, size_t n)
{
    const long page = sysconf(_SC_PAGESIZE);
    if (!p || !n || page <= 0)
        return;
    const uintptr_t a = (uintptr_t)p / (uintptr_t)page * (uintptr_t)page;
    const size_t len = (size_t)((uintptr_t)p - a) + n;
    if (madvise((void *)a, len, MADV_POPULATE_READ) != 0)
        (void)madvise((void *)a, len, MADV_WILLNEED);
}

void ml__input_close(ml__input *in)
{
    if (in->mapped && in->size)
        munmap((void *)in->data, in->size);
    if (in->region)
        munmap(in->region, in->region_size);
    free(in->owned);
    memset(in, 0, sizeof *in);
}

long ml_fd_reader(void *ctx, void *buf, size_t n, ml_error *err)
{
    int fd = *(int *)ctx;
    if (n > LONG_MAX)
        n = LONG_MAX;
    for (;;) {
        ssize_t r = read(fd, buf, n);
        if (r >= 0)
            return (long)r;
        if (errno != EINTR) {
            ml__err_io(err, "read", -1);
            return -1;
        }
    }
}

/* ---------------------------------------------------------------------------
 * Output files
 * ------------------------------------------------------------------------- */

struct ml_outfile {
    int fd;
    int is_stdout;
    int direct;   /* an existing device or FIFO: written in place */
    char *path;   /* final name */
    char *tmp;    /* temporary name in the same directory */
    uint8_t *buf; /* a temporary file's next HUGE_ALIGN bytes (write_chunked) */
    size_t fill;
};

/* An existing target that is not a regular file (/dev/null, /dev/full, a
 * FIFO, a terminal) is opened and written in place: renaming a temporary
 * file over it would replace the device or the pipe with a plain file.
 * Sets *in_place when f->fd is open; a regular or missing target is left
 * to the temporary file. */
static ml_status open_in_place(ml_outfile *f, const char *path, int *in_place, ml_error *err)
{
    struct stat st;
    *in_place = 0;
    if (stat(path, &st) < 0 || S_ISREG(st.st_mode))
        return ML_OK;
    if (S_ISDIR(st.st_mode)) {
        errno = EISDIR;
        return ml__err_io(err, "cannot write", -1);
    }
    f->fd = open(path, O_WRONLY | O_CLOEXEC | O_NOCTTY);
    if (f->fd < 0)
        return ml__err_io(err, "cannot open for writing", -1);
    f->direct = 1;
    *in_place = 1;
    return ML_OK;
}

ml_status ml_outfile_open(const char *path, ml_outfile **out, ml_error *err)
{
    *out = NULL;
    ml_outfile *f = calloc(1, sizeof *f);
    if (!f)
        return ml__err(err, ML_E_NOMEM, "", -1, "out of memory");
    f->fd = -1; /* so that an early abort closes nothing (not stdin) */
    if (strcmp(path, "-") == 0) {
        f->fd = 1;
        f->is_stdout = 1;
        *out = f;
        return ML_OK;
    }
    int in_place;
    ml_status s = open_in_place(f, path, &in_place, err);
    if (s || in_place) {
        if (s)
            free(f);
        else
            *out = f;
        return s;
    }
    size_t n = strlen(path);
    f->path = malloc(n + 1);
    f->tmp = malloc(n + 16);
    if (!f->path || !f->tmp) {
        ml_outfile_abort(f);
        return ml__err(err, ML_E_NOMEM, "", -1, "out of memory");
    }
    memcpy(f->path, path, n + 1);
    snprintf(f->tmp, n + 16, "%s.tmp.XXXXXX", path);
    f->fd = mkstemp(f->tmp);
    if (f->fd < 0) {
        int e = errno;
        free(f->tmp);
        f->tmp = NULL;
        ml_outfile_abort(f);
        errno = e;
        return ml__err_io(err, "cannot create a temporary file beside the output", -1);
    }
    /* mkstemp makes 0600; a model is not a secret. */
    mode_t um = umask(0);
    umask(um);
    fchmod(f->fd, 0666 & ~um);
    f->buf = malloc(HUGE_ALIGN); /* none: written as it comes, correct all the same */
    *out = f;
    return ML_OK;
}

static ml_status write_all(int fd, const uint8_t *p, size_t n, ml_error *err)
{
    while (n) {
        ssize_t w = write(fd, p, n > (1u << 30) ? (1u << 30) : n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return ml__err_io(err, "write", -1);
        p += w;
        n -= (size_t)w;
    }
    return ML_OK;
}

/* A new file reaches the kernel in whole 2 MiB pieces at 2 MiB offsets,
 * so that the page cache can hold it in 2 MiB folios (ext4 and XFS on
 * Linux 6.16 and later size a written folio by the write): a model read
 * right after its conversion is then mapped through huge pages, one TLB
 * entry per 2 MiB instead of 512, as it is after a cold read through
 * ml__input_open's mapping.  A model in 4 KiB folios reads through its
 * mapping more slowly than a huge-page copy, by how much depends on the
 * machine (docs/speed.md, `tg/no-mmap`); gguf2mlb's output, written in
 * 1 MiB pieces at any offset, was all in 4 KiB folios, and is now all in
 * 2 MiB ones. */
static ml_status write_chunked(ml_outfile *f, const uint8_t *p, size_t n, ml_error *err)
{
    while (n) {
        if (f->fill == 0 && n >= HUGE_ALIGN) {
            size_t k = n / HUGE_ALIGN * HUGE_ALIGN;
            ml_status s = write_all(f->fd, p, k, err);
            if (s)
                return s;
            p += k, n -= k;
            continue;
        }
        size_t k = HUGE_ALIGN - f->fill < n ? HUGE_ALIGN - f->fill : n;
        memcpy(f->buf + f->fill, p, k);
        f->fill += k, p += k, n -= k;
        if (f->fill == HUGE_ALIGN) {
            f->fill = 0;
            ml_status s = write_all(f->fd, f->buf, HUGE_ALIGN, err);
            if (s)
                return s;
        }
    }
    return ML_OK;
}

ml_status ml_outfile_write(ml_outfile *f, const void *buf, size_t n, ml_error *err)
{
    return f->buf ? write_chunked(f, buf, n, err) : write_all(f->fd, buf, n, err);
}

ml_status ml_outfile_sink(void *ctx, const void *buf, size_t n, ml_error *err)
{
    return ml_outfile_write(ctx, buf, n, err);
}

ml_status ml_outfile_commit(ml_outfile *f, ml_error *err)
{
    ml_status s = ML_OK;
    if (f->is_stdout) {
        free(f);
        return ML_OK;
    }
    if (f->direct) {
        if (close(f->fd) < 0)
            s = ml__err_io(err, "close", -1);
        free(f);
        return s;
    }
    if (f->fill)
        s = write_all(f->fd, f->buf, f->fill, err);
    if (s == ML_OK && fsync(f->fd) < 0 && errno != EINVAL)
        s = ml__err_io(err, "fsync", -1);
    if (close(f->fd) < 0 && s == ML_OK)
        s = ml__err_io(err, "close", -1);
    f->fd = -1;
    if (s == ML_OK && rename(f->tmp, f->path) < 0)
        s = ml__err_io(err, "rename into place", -1);
    if (s == ML_OK) {
        free(f->tmp);
        f->tmp = NULL;
    }
    ml_outfile_abort(f);
    return s;
}

void ml_outfile_abort(ml_outfile *f)
{
    if (!f)
        return;
    if (!f->is_stdout && f->fd >= 0)
        close(f->fd);
    if (f->tmp)
        unlink(f->tmp);
    free(f->buf);
    free(f->tmp);
    free(f->path);
    free(f);
}
