/* mlcore/convert_tok.h - the vocabulary of a GGUF file (tokenizer.ggml.*)
 * written as an .mlt tokenizer (mlt(5)); gguf2mlb -t uses it.  Included by
 * mlcore.h.
 *
 * The .mlt encodes text as the Hugging Face tokenizer the GGUF was made
 * from would, so where llama.cpp's converter lost or changed something, the
 * conversion restores what the tokenizer.json had (docs/tokenizer-
 * conversion.md gives the reasons and the evidence):
 *
 *   tokenizer.ggml.model "llama" (SentencePiece) -> kind 1:
 *     - pieces as stored (UTF-8 with U+2581 for spaces); BYTE tokens
 *       "<0xXX>" become attr 2 holding the byte; CONTROL, USER_DEFINED and
 *       UNKNOWN tokens attr 1; USER_DEFINED tokens get back the U+2581 that
 *       llama.cpp's converter turned into spaces;
 *     - merges derived from the pieces and scores as transformers'
 *       SentencePiece converter derives them: every split of a piece P into
 *       two pieces L R, at a character boundary, is a merge; merges are
 *       ranked by P's score, highest first, then longer L, then longer R
 *       (in characters), then by the ids of P, L and R.  USER_DEFINED
 *       pieces count as score 0 (SentencePiece's; llama.cpp's converter
 *       writes -1000).  Only NORMAL, UNDEFINED and USER_DEFINED pieces
 *       take part;
 *     - flag 128 (no ▁ prefix) when tokenizer.ggml.add_space_prefix is
 *       false, or absent in a Gemma file (general.architecture gemma*).
 *   tokenizer.ggml.model "gpt2" (byte-level BPE) -> kind 2:
 *     - NORMAL and UNDEFINED tokens decoded from GPT-2's byte-to-character
 *       map to the raw bytes; the others stored as they are;
 *     - merges "LEFT RIGHT" (split at the first space after the first
 *       byte, as llama.cpp does) looked up as (left, right, merged) ids;
 *     - flags from tokenizer.ggml.pre: llama-bpe, llama3, llama-v3 and
 *       smaug-bpe (Llama 3) 2; qwen2 8+16; qwen35 16+256 (also qwen2 in a
 *       general.architecture qwen35 or qwen35moe file); smollm 32+64;
 *       gpt-2 32.  Other pre-tokenizers, and add_space_prefix true, are
 *       ML_E_UNSUPPORTED.
 *   Both: bos and eos from tokenizer.ggml.bos_token_id / eos_token_id
 *   (ML_TOKEN_NONE when absent, -1 or 0xFFFFFFFF); flag 1 from tokenizer.ggml.add_bos_token, or when
 *   absent llama.cpp's default (SentencePiece and the llama-bpe family
 *   yes, the rest no), and only when there is a BOS id.
 *   A chat section (flag 512) when the vocabulary has chat templates
 *   (tokenizer.chat_template is "default", tokenizer.chat_template.NAME
 *   keeps NAME) or end-of-generation ids besides EOS: the EOT and EOM ids,
 *   and the tokens llama.cpp treats as ends of generation
 *   (lib/convert/convert_chat.c lists them).
 *
 * Errors: ML_E_FORMAT names the key (field) and the file offset of the
 * offending value, with the element index in the message, for missing
 * keys, wrong types, ids out of range, malformed byte tokens or GPT-2
 * text, empty tokens, merges without a space or naming no token, and NaN
 * scores.  ML_E_UNSUPPORTED for tokenizer models and pre-tokenizers .mlt
 * cannot express, more than 2^24 tokens, and SentencePiece vocabularies
 * whose scores are all equal (the merge order is then lost).
 */
#ifndef MLCORE_CONVERT_TOK_H
#define MLCORE_CONVERT_TOK_H

#include <mlcore/base.h>
#include <mlcore/gguf.h>
#include <mlcore/mlt.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What a conversion wrote. */
typedef struct ml_mlt_convert_info {
    ml_mlt_header header;  /* kind, flags, bos, eos, n_vocab, n_merges */
    uint32_t n_added;      /* tokens with attr 1 */
    uint32_t n_bytes;      /* tokens with attr 2 */
    uint32_t n_respaced;   /* kind 1: USER_DEFINED tokens whose spaces became U+2581 */
    char model[16];        /* tokenizer.ggml.model */
    char pre[48];          /* tokenizer.ggml.pre, "" when absent (cut to fit) */
    uint32_t n_eog;        /* with a chat section: end-of-generation ids */
    uint32_t n_templates;  /* with a chat section: chat templates */
} ml_mlt_convert_info;

/* Writes the .mlt of g's vocabulary through fn (rules above).  Nothing is
 * written unless the whole conversion succeeds; the .mlt is built in
 * memory and passes ml_mlt_open's rules. */
ML_API ml_status ml_mlt_from_gguf(const ml_gguf *g, ml_write_fn fn, void *ctx, ml_error *err);

/* The same, also filling *info (may be NULL).  fn may be NULL: everything
 * is converted and checked, nothing is written. */
ML_API ml_status ml_mlt_from_gguf_ex(const ml_gguf *g, ml_write_fn fn, void *ctx,
                                     ml_mlt_convert_info *info, ml_error *err);

#ifdef __cplusplus
}
#endif

#endif
