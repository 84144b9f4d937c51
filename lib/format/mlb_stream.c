/* mlb_stream.c - deep validation of an .mlb read once, in order, from any
 * source (a pipe included): the loader's rules, plus every byte of every
 * array (non-finite floats and scales, -128 quants, non-zero padding,
 * trailing bytes), with CRC-32 sums per tensor and for the whole input.
 * A wtype 3 file's type table is read (and kept: it is small) before the
 * matrices it sizes; block types' arrays are summed but not looked into.
 * Memory is one fixed buffer, whatever the model's size. */
#include "base/internal.h"

#include <stdlib.h>
#include <libdeflate.h>
#include <zlib.h>

#define CHUNK (1u << 20)

/* libdeflate's CRC-32 is the zlib polynomial computed with carry-less
 * multiplication where the CPU has it: several times faster than zlib's
 * crc32, and the same value (the unit tests compare the two). */
uint32_t ml_crc32(uint32_t crc, const void *buf, size_t n)
{
    return libdeflate_crc32(crc, buf, n);
}

typedef struct stream {
    ml_read_fn rd;
    void *rctx;
    const ml_verify_report *rep; /* for progress */
    uint8_t *buf;
    uint64_t pos;      /* bytes consumed so far */
    uint32_t file_crc;
    uint32_t last_crc; /* CRC-32 of the last chunk read_exact returned */
} stream;

/* Reads exactly n bytes (n <= CHUNK) or reports where the input ended and
 * how far short of `end` (the end of the whole array) it is. */
static ml_status read_exact(stream *st, size_t n, uint64_t end, const char *what, ml_error *err)
{
    size_t got = 0;
    while (got < n) {
        long r = st->rd(st->rctx, st->buf + got, n - got, err);
        if (r < 0)
            return ML_E_IO;
        if (r == 0)
            return ml__err(err, ML_E_FORMAT, what, (int64_t)(st->pos + got),
                           "the input ends here, %llu bytes short (truncated file)",
                           (unsigned long long)(end - (st->pos + got)));
        got += (size_t)r;
    }
    /* Each byte is summed once: the chunk's CRC is folded into the file's
     * (and by read_array into the tensor's) with crc32_combine. */
    st->last_crc = ml_crc32(0, st->buf, n);
    st->file_crc = (uint32_t)crc32_combine(st->file_crc, st->last_crc, (z_off_t)n);
    st->pos += n;
    if (st->rep->on_progress && n == CHUNK)
        st->rep->on_progress(st->rep->ctx, st->pos);
    return ML_OK;
}

/* Consumes padding up to `to`, which must be zero bytes. */
static ml_status skip_padding(stream *st, uint64_t to, const char *what, ml_error *err)
{
    while (st->pos < to) {
        uint64_t start = st->pos;
        size_t n = (size_t)(to - st->pos); /* < 64 */
        ml_status s = read_exact(st, n, to, what, err);
        if (s)
            return s;
        for (size_t i = 0; i < n; i++)
            if (st->buf[i])
                return ml__err(err, ML_E_FORMAT, what, (int64_t)(start + i),
                               "padding byte before this array is 0x%02x, must be 0", st->buf[i]);
    }
    return ML_OK;
}

typedef enum { K_BYTES, K_F32, K_Q8, K_F16 } content;

/* Checks one chunk of an array; `index` is the element index of buf[0]. */
static ml_status check_chunk(const uint8_t *buf, size_t n, content kind, const ml_tensor *t,
                             uint64_t start, const char *part, ml_error *err)
{
    switch (kind) {
    case K_Q8: {
        const uint8_t *hit = memchr(buf, 0x80, n);
        if (hit)
            return ml__err(err, ML_E_FORMAT, t->name, (int64_t)(start + (uint64_t)(hit - buf)),
                           "Q8_0 quant is -128 (quants must be in [-127, 127])");
        break;
    }
    case K_F32:
        for (size_t i = 0; i < n; i += 4)
            if ((ml__rd32(buf + i) & 0x7f800000u) == 0x7f800000u)
                return ml__err(err, ML_E_FORMAT, t->name, (int64_t)(start + i),
                               "%s value %s is not finite", part,
                               ml__rd32(buf + i) & 0x7fffff ? "NaN" : "infinity");
        break;
    case K_F16:
        for (size_t i = 0; i < n; i += 2)
            if ((ml__rd16(buf + i) & 0x7c00) == 0x7c00)
                return ml__err(err, ML_E_FORMAT, t->name, (int64_t)(start + i),
                               "f16 scale is not finite");
        break;
    case K_BYTES:
        break;
    }
    return ML_OK;
}

/* Reads one array of a tensor at `offset`, checking and summing it. */
static ml_status read_array(stream *st, const ml_tensor *t, uint64_t offset, uint64_t nbytes,
                            content kind, const char *part, uint32_t *crc, ml_error *err)
{
    ml_status s = skip_padding(st, offset, t->name, err);
    const uint64_t end = offset + nbytes;
    while (!s && nbytes) {
        size_t n = nbytes > CHUNK ? CHUNK : (size_t)nbytes;
        uint64_t start = st->pos;
        if ((s = read_exact(st, n, end, t->name, err)))
            break;
        *crc = (uint32_t)crc32_combine(*crc, st->last_crc, (z_off_t)n);
        s = check_chunk(st->buf, n, kind, t, start, part, err);
        nbytes -= n;
    }
    return s;
}

static ml_status verify_tensor(stream *st, const ml_tensor *t, const ml_mlb_header *h,
                               uint32_t *crc, ml_error *err)
{
    content kind = t->type == ML_TYPE_F32 ? K_F32 : t->type == ML_TYPE_Q8_0 ? K_Q8 : K_BYTES;
    *crc = 0;
    ml_status s = read_array(st, t, t->offset, t->nbytes, kind, "F32", crc, err);
    if (s || !t->scale_nbytes)
        return s;
    return read_array(st, t, t->scale_offset, t->scale_nbytes, h->scale_f16 ? K_F16 : K_F32,
                      "scale", crc, err);
}

/* After the last array: zero padding up to the next 64-byte boundary at
 * most, then the end of the input. */
static ml_status check_tail(stream *st, ml_error *err)
{
    uint64_t limit;
    ml__align_up(st->pos, ML_MLB_ALIGN, &limit);
    for (;;) {
        uint64_t start = st->pos;
        long r = st->rd(st->rctx, st->buf, CHUNK, err);
        if (r < 0)
            return ML_E_IO;
        if (r == 0)
            return ML_OK;
        st->file_crc = ml_crc32(st->file_crc, st->buf, (size_t)r);
        st->pos += (uint64_t)r;
        for (long i = 0; i < r; i++) {
            uint64_t at = start + (uint64_t)i;
            if (at >= limit)
                return ml__err(err, ML_E_FORMAT, "", (int64_t)at,
                               "trailing bytes after the last array");
            if (st->buf[i])
                return ml__err(err, ML_E_FORMAT, "", (int64_t)at,
                               "padding byte after the last array is 0x%02x, must be 0",
                               st->buf[i]);
        }
    }
}

/* Reads a U8 array (layer flags, type table) at `offset` into a copy: the
 * layout needs it before the arrays after it.  A MoE model's type table
 * may pass one chunk (3 entries per expert), so it is read chunk by chunk
 * and the copy grows with the bytes that actually arrived: a header that
 * claims a huge table costs no more memory than the input it sends. */
static ml_status read_small(stream *st, uint64_t offset, size_t n, const char *what,
                            uint8_t **out, ml_error *err)
{
    ml_status s = skip_padding(st, offset, what, err);
    uint64_t end = st->pos + n;
    uint8_t *copy = NULL;
    for (size_t done = 0; !s && (done < n || !copy);) {
        size_t k = n - done < CHUNK ? n - done : CHUNK;
        uint8_t *grown = realloc(copy, done + k ? done + k : 1);
        if (!grown) {
            s = ml__err(err, ML_E_NOMEM, "", -1, "out of memory");
            break;
        }
        copy = grown;
        if ((s = read_exact(st, k, end, what, err)))
            break;
        memcpy(copy + done, st->buf, k);
        done += k;
    }
    if (s) {
        free(copy);
        return s;
    }
    *out = copy;
    return ML_OK;
}

static ml_status verify_body(stream *st, ml_verify_report *rep, ml_error *err)
{
    const ml_mlb_header *h = &rep->header;
    uint8_t *flags = NULL, *types = NULL;
    uint32_t n_types = 0;
    ml_status s = ML_OK;
    ml_error local;
    if (!err)
        err = &local;
    /* n_layers <= 65536 was checked, so the copy is small. */
    if (h->layer_flags &&
        !(s = read_small(st, ML_MLB_HEADER_SIZE, h->n_layers, "layer_flags", &flags, err)))
        s = ml_mlb_layer_flags_validate(h, flags, err);
    if (!s && h->wtype == ML_WTYPE_TABLE) {
        n_types = ml_mlb_matrix_count(h, flags);
        s = read_small(st, ml_mlb_types_offset(h), n_types, "mat_types", &types, err);
    }
    ml_mlb_layout it;
    ml_tensor t;
    int r = 0;
    ml_mlb_layout_begin_types(&it, h, flags, types);
    while (!s && (r = ml_mlb_layout_next(&it, &t, err)) == 1) {
        uint32_t crc = 0;
        if (t.role == ML_R_LAYER_FLAGS) {
            crc = ml_crc32(0, flags, h->n_layers); /* already read above */
        } else if (t.role == ML_R_MAT_TYPES) {
            crc = ml_crc32(0, types, n_types);
        } else if ((s = verify_tensor(st, &t, h, &crc, err))) {
            break;
        }
        rep->n_tensors++;
        if (rep->on_tensor)
            rep->on_tensor(rep->ctx, &t, crc);
    }
    if (!s && r < 0)
        s = err->code;
    free(flags);
    free(types);
    return s ? s : check_tail(st, err);
}

ml_status ml_mlb_verify_stream(ml_read_fn rd, void *rctx, ml_verify_report *rep, ml_error *err)
{
    stream st = {rd, rctx, rep, NULL, 0, 0, 0};
    rep->bytes = 0;
    rep->file_crc = 0;
    rep->n_tensors = 0;
    memset(&rep->header, 0, sizeof rep->header);
    st.buf = malloc(CHUNK);
    if (!st.buf)
        return ml__err(err, ML_E_NOMEM, "", -1, "out of memory");
    ml_status s = ML_OK;
    long r = rd(rctx, st.buf, ML_MLB_HEADER_SIZE, err);
    size_t got = r > 0 ? (size_t)r : 0;
    while (r > 0 && got < ML_MLB_HEADER_SIZE) {
        r = rd(rctx, st.buf + got, ML_MLB_HEADER_SIZE - got, err);
        if (r > 0)
            got += (size_t)r;
    }
    if (r < 0) {
        s = ML_E_IO;
    } else if (got == 0) {
        s = ml__err(err, ML_E_FORMAT, "", 0, "empty file");
    } else if (got < ML_MLB_HEADER_SIZE) {
        s = ml__err(err, ML_E_FORMAT, "", 0,
                    "the input has %zu bytes, fewer than the 256-byte header", got);
    } else {
        st.file_crc = ml_crc32(0, st.buf, ML_MLB_HEADER_SIZE);
        st.pos = ML_MLB_HEADER_SIZE;
        ml_mlb_header_decode(st.buf, &rep->header);
        s = ml_mlb_header_validate(&rep->header, st.buf, NULL, err);
        if (!s)
            s = verify_body(&st, rep, err);
    }
    rep->bytes = st.pos;
    rep->file_crc = st.file_crc;
    free(st.buf);
    return s;
}
