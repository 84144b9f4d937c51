/* fuzz_mlb.c - the .mlb loader (ml_mlb_open_memory) and the streaming
 * verifier (ml_mlb_verify_stream) on the same bytes.
 *
 * Oracles besides the sanitizers: the error contract; every bound tensor
 * lies inside the input and is found again by name and by role; the
 * verifier, which applies the loader's rules and more, never accepts what
 * the loader refuses, and when both accept they agree on the header, the
 * tensors and their CRC-32s, and the file CRC is that of the input. */
#include "fuzz.h"

typedef struct seen {
    const ml_mlb *m; /* the loaded model, or NULL */
    const uint8_t *data;
    size_t n;        /* tensors reported */
} seen;

/* Touches every byte of a tensor, so that a binding outside the input
 * shows up under ASan, and checks it against the layout's numbers. */
static void check_tensor(const ml_mlb *m, const ml_tensor *t)
{
    uint64_t size = ml_mlb_file_size(m);
    const uint8_t *base = ml_mlb_file_data(m);
    FUZZ_CHECK(memchr(t->name, 0, sizeof t->name) != NULL);
    FUZZ_CHECK(t->offset % ML_MLB_ALIGN == 0);
    FUZZ_CHECK(t->offset <= size && t->nbytes <= size - t->offset);
    FUZZ_CHECK((const uint8_t *)t->data == base + t->offset);
    volatile uint8_t sink = 0;
    for (uint64_t i = 0; i < t->nbytes; i++)
        sink ^= base[t->offset + i];
    if (t->type == ML_TYPE_Q8_0 || t->type == ML_TYPE_Q4_0) {
        FUZZ_CHECK(t->scale_offset % ML_MLB_ALIGN == 0);
        FUZZ_CHECK(t->scale_offset <= size && t->scale_nbytes <= size - t->scale_offset);
        FUZZ_CHECK(t->cols % 32 == 0 && (t->scales != NULL) != (t->scales_f16 != NULL));
        FUZZ_CHECK((const uint8_t *)(t->scales ? (const void *)t->scales
                                               : (const void *)t->scales_f16) ==
                   base + t->scale_offset);
        uint64_t n_scales = (uint64_t)t->rows * (t->cols / 32);
        volatile float f = 0;
        for (uint64_t i = 0; i < n_scales; i++)
            f += ml_tensor_scale(t, i);
        (void)f;
    }
    uint32_t elems, bytes;
    if (ml_type_block(t->type, &elems, &bytes, NULL)) { /* a block matrix: rows of whole blocks */
        FUZZ_CHECK(t->cols % elems == 0 && t->scale_nbytes == 0 && !t->scales && !t->scales_f16);
        FUZZ_CHECK(t->nbytes == (uint64_t)t->rows * ml_tensor_row_bytes(t));
        float *row = malloc((size_t)t->cols * sizeof *row);
        ml_error err;
        fuzz_err_init(&err);
        if (row && t->rows) {
            ml_status s = ml_tensor_dequantize(t, t->rows - 1, 1, row, &err);
            FUZZ_CHECK(s == ML_OK || s == ML_E_UNSUPPORTED);
        }
        free(row);
    }
    (void)sink;
    FUZZ_CHECK(ml_mlb_find(m, t->name) == t);
    if (t->expert >= 0) /* experts share a role: each is found by its index */
        FUZZ_CHECK(ml_mlb_get_expert(m, t->role, t->layer, (uint32_t)t->expert) == t);
    else
        FUZZ_CHECK(ml_mlb_get(m, t->role, t->layer) == t);
    FUZZ_CHECK(ml_tensor_elements(t) == (uint64_t)t->rows * t->cols);
}

static void check_model(const ml_mlb *m)
{
    const ml_mlb_header *h = ml_mlb_get_header(m);
    const ml_mlb_derived *d = ml_mlb_get_derived(m);
    FUZZ_CHECK(memcmp(h->magic, "MLB1", 4) == 0);
    FUZZ_CHECK(d->head_dim > 0 && d->q_dim > 0);
    ml_error err;
    fuzz_err_init(&err);
    FUZZ_CHECK(ml_mlb_header_validate(h, ml_mlb_file_data(m), NULL, &err) == ML_OK);
    for (uint32_t l = 0; l < h->n_layers; l++)
        (void)ml_mlb_layer_state_bytes(h, ml_mlb_layer_flag(m, l), 1u + l);
    size_t n = ml_mlb_n_tensors(m);
    for (size_t i = 0; i < n; i++)
        check_tensor(m, ml_mlb_tensor(m, i));
    FUZZ_CHECK(ml_mlb_tensor(m, n) == NULL);
    FUZZ_CHECK(ml_mlb_find(m, "no.such.tensor") == NULL);
}

/* The verifier's view of each tensor must be the loader's. */
static void on_tensor(void *ctx, const ml_tensor *t, uint32_t crc)
{
    seen *s = ctx;
    if (s->m) {
        const ml_tensor *u = ml_mlb_tensor(s->m, s->n);
        FUZZ_CHECK(u != NULL);
        FUZZ_CHECK(strcmp(u->name, t->name) == 0 && u->offset == t->offset &&
                   u->nbytes == t->nbytes && u->scale_offset == t->scale_offset &&
                   u->scale_nbytes == t->scale_nbytes && u->type == t->type);
        uint32_t want = ml_crc32(0, s->data + t->offset, (size_t)t->nbytes);
        if (t->scale_nbytes)
            want = ml_crc32(want, s->data + t->scale_offset, (size_t)t->scale_nbytes);
        FUZZ_CHECK(crc == want);
    }
    s->n++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ml_error err;
    ml_mlb *m = NULL;
    fuzz_err_init(&err);
    ml_status ls = ml_mlb_open_memory(data, size, &m, &err);
    /* A truncated file: the loader names the first array that does not
     * fit by its own offset, which may lie in the padding past the end. */
    fuzz_check_err(ls, &err, size + ML_MLB_ALIGN);
    FUZZ_CHECK((ls == ML_OK) == (m != NULL));
    if (m)
        check_model(m);

    /* The same bytes through the verifier, in pieces of a size the input
     * chooses (1 byte to whole). */
    static const size_t steps[] = {0, 1, 7, 64, 255, 4096};
    fuzz_reader rd = {data, size, 0, steps[fuzz_hash(data, size < 64 ? size : 64) % 6]};
    seen s = {m, data, 0};
    ml_verify_report rep;
    memset(&rep, 0, sizeof rep);
    rep.on_tensor = on_tensor;
    rep.ctx = &s;
    fuzz_err_init(&err);
    ml_status vs = ml_mlb_verify_stream(fuzz_mem_read, &rd, &rep, &err);
    fuzz_check_err(vs, &err, size);
    FUZZ_CHECK(rep.bytes <= size && rep.n_tensors == s.n);
    if (vs == ML_OK) {
        FUZZ_CHECK(ls == ML_OK);
        FUZZ_CHECK(rep.bytes == size);
        FUZZ_CHECK(rep.file_crc == ml_crc32(0, data, size));
        FUZZ_CHECK(rep.n_tensors == ml_mlb_n_tensors(m));
        FUZZ_CHECK(memcmp(&rep.header, ml_mlb_get_header(m), sizeof rep.header) == 0);
    }
    /* Both read the header first: the same verdict on it. */
    if (ls != ML_OK && vs != ML_OK && size >= ML_MLB_HEADER_SIZE) {
        ml_mlb_header h;
        ml_mlb_header_decode(data, &h);
        if (ml_mlb_header_validate(&h, data, NULL, NULL) != ML_OK)
            FUZZ_CHECK(ls == vs);
    }
    ml_mlb_close(m);
    return 0;
}
