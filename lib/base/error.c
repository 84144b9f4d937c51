/* error.c - status names and the filling of ml_error. */
#include "base/internal.h"

#include <errno.h>
#include <stdio.h>

const char *ml_status_name(ml_status s)
{
    switch (s) {
    case ML_OK: return "ML_OK";
    case ML_E_IO: return "ML_E_IO";
    case ML_E_FORMAT: return "ML_E_FORMAT";
    case ML_E_SHAPE: return "ML_E_SHAPE";
    case ML_E_NOMEM: return "ML_E_NOMEM";
    case ML_E_INVAL: return "ML_E_INVAL";
    case ML_E_UNSUPPORTED: return "ML_E_UNSUPPORTED";
    case ML_E_MISMATCH: return "ML_E_MISMATCH";
    }
    return "ML_E_UNKNOWN";
}

const char *ml_strerror(ml_status s)
{
    switch (s) {
    case ML_OK: return "success";
    case ML_E_IO: return "input/output error";
    case ML_E_FORMAT: return "malformed file";
    case ML_E_SHAPE: return "invalid shape";
    case ML_E_NOMEM: return "out of memory or size overflow";
    case ML_E_INVAL: return "invalid argument";
    case ML_E_UNSUPPORTED: return "unsupported input";
    case ML_E_MISMATCH: return "verification mismatch";
    }
    return "unknown status";
}

/* Copies src into dst (n bytes, always terminated) with control bytes
 * written as \xNN: names and strings in messages come from untrusted
 * files, and an escape sequence must not reach the user's terminal. */
static void escape_controls(char *dst, size_t n, const char *src)
{
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)src; *p && o + 1 < n; p++) {
        if (*p >= 0x20 && *p != 0x7f) {
            dst[o++] = (char)*p;
        } else if (o + 4 < n) {
            snprintf(dst + o, 5, "\\x%02x", *p);
            o += 4;
        } else {
            break;
        }
    }
    dst[o] = 0;
}

ml_status ml__err(ml_error *err, ml_status code, const char *field, int64_t offset,
                  const char *fmt, ...)
{
    if (!err)
        return code;
    char detail[sizeof err->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    err->code = code;
    err->sys_errno = 0;
    err->offset = offset;
    escape_controls(err->field, sizeof err->field, field ? field : "");
    /* Compose in a larger buffer, then cut: a long detail is truncated,
     * never dropped. */
    char full[sizeof err->msg + sizeof err->field + 64];
    if (field && *field && offset >= 0)
        snprintf(full, sizeof full, "%s (offset %lld): %s", field, (long long)offset, detail);
    else if (field && *field)
        snprintf(full, sizeof full, "%s: %s", field, detail);
    else if (offset >= 0)
        snprintf(full, sizeof full, "offset %lld: %s", (long long)offset, detail);
    else
        snprintf(full, sizeof full, "%s", detail);
    escape_controls(err->msg, sizeof err->msg, full);
    return code;
}

ml_status ml__err_io(ml_error *err, const char *what, int64_t offset)
{
    int e = errno;
    ml__err(err, ML_E_IO, "", offset, "%s: %s", what, strerror(e));
    if (err)
        err->sys_errno = e;
    return ML_E_IO;
}

void ml__magic_shown(const uint8_t m[4], char out[17])
{
    size_t k = 0;
    for (int i = 0; i < 4; i++) {
        if (m[i] >= 0x20 && m[i] < 0x7f && m[i] != '\\' && m[i] != '"') {
            out[k++] = (char)m[i];
        } else {
            snprintf(out + k, 5, "\\x%02x", m[i]);
            k += 4;
        }
    }
    out[k] = 0;
}
