/* base.h - what every part of libmlcore's interface shares: the export
 * macro, the version, status codes and the ml_error detail, half-float
 * conversion, and output files written atomically with the ml_write_fn
 * sink that streaming writers take.  <mlcore.h> includes every part. */
#ifndef MLCORE_BASE_H
#define MLCORE_BASE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define ML_API __attribute__((visibility("default")))
#else
#define ML_API
#endif

#define ML_VERSION_STRING "0.1.0"

/* ------------------------------------------------------------------------
 * Status codes.  The numbers are stable.
 * ------------------------------------------------------------------------ */
typedef enum ml_status {
    ML_OK = 0,
    ML_E_IO = 1,          /* open, read, write, mmap or rename failed */
    ML_E_FORMAT = 2,      /* the bytes do not follow the format */
    ML_E_SHAPE = 3,       /* the header's dimensions are invalid */
    ML_E_NOMEM = 4,       /* out of memory, or a size does not fit size_t */
    ML_E_INVAL = 5,       /* the caller passed a bad argument */
    ML_E_UNSUPPORTED = 6, /* well-formed input this build does not handle */
    ML_E_MISMATCH = 7     /* a verification found a difference */
} ml_status;

/* Detail of a failure.  `offset` is the byte offset in the input the error
 * refers to, or -1 when none applies; `field` names the header field,
 * tensor or key ("" when none); `msg` is a complete sentence fragment such
 * as "n_kv_heads (offset 20): 5 does not divide n_heads 32". */
typedef struct ml_error {
    ml_status code;
    int sys_errno;     /* errno for ML_E_IO, else 0 */
    int64_t offset;    /* byte offset, or -1 */
    char field[64];    /* field, tensor or key name */
    char msg[320];     /* human-readable detail */
} ml_error;

/* A token id, below the vocabulary's size (at most 2^24): one type for
 * the tokenizer, the runtime and the sampler.  ML_TOKEN_NONE, above every
 * vocabulary, stands for "no token" (a tokenizer without BOS, a chunk
 * that keeps its own first token); its bytes are the -1 that .mlt files
 * store for a missing BOS or EOS. */
typedef uint32_t ml_token;
#define ML_TOKEN_NONE ((ml_token)UINT32_MAX)

/* "ML_OK", "ML_E_FORMAT", ... ; never NULL. */
ML_API const char *ml_status_name(ml_status s);
/* A short description: "malformed file", "invalid shape", ... */
ML_API const char *ml_strerror(ml_status s);

/* ------------------------------------------------------------------------
 * Half precision.  Exact conversion both ways (round to nearest even when
 * narrowing); NaN stays NaN, overflow becomes infinity.
 * ------------------------------------------------------------------------ */
ML_API float ml_f16_to_f32(uint16_t h);
ML_API uint16_t ml_f32_to_f16(float f);

/* ------------------------------------------------------------------------
 * Output files.  Written to a temporary file in the target's directory and
 * renamed into place by ml_outfile_commit, so a failure never leaves a
 * partial file under the final name.  The path "-" writes to stdout
 * directly (nothing to rename); so does an existing output that is not a
 * regular file (a device such as /dev/null, a FIFO), which is written in
 * place and never replaced.  A directory fails at open (ML_E_IO).
 * ------------------------------------------------------------------------ */
typedef struct ml_outfile ml_outfile;

/* Sink for streaming writers: returns ML_OK or an error status. */
typedef ml_status (*ml_write_fn)(void *ctx, const void *buf, size_t n, ml_error *err);

ML_API ml_status ml_outfile_open(const char *path, ml_outfile **out, ml_error *err);
ML_API ml_status ml_outfile_write(ml_outfile *f, const void *buf, size_t n, ml_error *err);
/* ml_write_fn adapter: ctx is an ml_outfile. */
ML_API ml_status ml_outfile_sink(void *ctx, const void *buf, size_t n, ml_error *err);
/* Flushes, syncs and renames into place; frees f in every case. */
ML_API ml_status ml_outfile_commit(ml_outfile *f, ml_error *err);
/* Removes the temporary file and frees f; accepts NULL. */
ML_API void ml_outfile_abort(ml_outfile *f);

#ifdef __cplusplus
}
#endif

#endif /* MLCORE_BASE_H */
