/* fuzz_dequant.c - every dequantizer on raw blocks
 * (ml_gguf_dequantize_raw).  The first byte picks the ggml type; the rest
 * is as many whole blocks as fit.
 *
 * Oracles besides the sanitizers (the output buffer has exactly the floats
 * asked for): the whole run equals the blocks dequantized one at a time;
 * F32 is copied bit for bit, F16 is ml_f16_to_f32, BF16 the bits << 16;
 * types outside ml_gguf_type_supported are ML_E_UNSUPPORTED and write
 * nothing; a count that is not a whole number of blocks is ML_E_INVAL. */
#include "fuzz.h"

static void check_known_types(uint32_t type, const uint8_t *src, const float *y, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++) {
        uint32_t bits;
        memcpy(&bits, &y[i], 4);
        if (type == ML_GGML_F32) {
            uint32_t want = (uint32_t)src[4 * i] | (uint32_t)src[4 * i + 1] << 8 |
                            (uint32_t)src[4 * i + 2] << 16 | (uint32_t)src[4 * i + 3] << 24;
            FUZZ_CHECK(bits == want);
        } else if (type == ML_GGML_F16) {
            float want = ml_f16_to_f32((uint16_t)(src[2 * i] | src[2 * i + 1] << 8));
            FUZZ_CHECK(memcmp(&want, &y[i], 4) == 0);
        } else if (type == ML_GGML_BF16) {
            FUZZ_CHECK(bits == ((uint32_t)(src[2 * i] | src[2 * i + 1] << 8) << 16));
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint32_t type = data[0] < 64 ? data[0] : data[0] % ML_GGML_TYPE_COUNT;
    const uint8_t *src = data + 1;
    size_t n_src = size - 1;
    uint32_t be = 0, bb = 0;
    ml_error err;
    float one = 0;
    if (!ml_gguf_type_size(type, &be, &bb)) {
        fuzz_err_init(&err);
        ml_status st = ml_gguf_dequantize_raw(type, src, 0, &one, &err);
        fuzz_check_err(st, &err, 0);
        FUZZ_CHECK(st == ML_E_UNSUPPORTED);
        return 0;
    }
    FUZZ_CHECK(be >= 1 && bb >= 1);
    uint64_t nb = n_src / bb, n = nb * be;
    if (!ml_gguf_type_supported(type)) {
        fuzz_err_init(&err);
        ml_status st = ml_gguf_dequantize_raw(type, src, be, &one, &err);
        fuzz_check_err(st, &err, 0);
        FUZZ_CHECK(st == ML_E_UNSUPPORTED && one == 0);
        return 0;
    }
    if (be > 1) {
        fuzz_err_init(&err);
        ml_status st = ml_gguf_dequantize_raw(type, src, be - 1, &one, &err);
        fuzz_check_err(st, &err, 0);
        FUZZ_CHECK(st == ML_E_INVAL);
    }
    float *whole = malloc(n * sizeof *whole + 1);
    float *block = malloc(be * sizeof *block);
    FUZZ_CHECK(whole && block);
    fuzz_err_init(&err);
    ml_status st = ml_gguf_dequantize_raw(type, src, n, whole, &err);
    fuzz_check_err(st, &err, 0);
    FUZZ_CHECK(st == ML_OK);
    for (uint64_t b = 0; b < nb; b++) {
        FUZZ_CHECK(ml_gguf_dequantize_raw(type, src + b * bb, be, block, NULL) == ML_OK);
        FUZZ_CHECK(memcmp(block, whole + b * be, be * sizeof *block) == 0);
    }
    check_known_types(type, src, whole, n);
    free(whole);
    free(block);
    return 0;
}
