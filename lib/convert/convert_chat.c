/* convert_chat.c - what a chat needs from a GGUF vocabulary, for the .mlt
 * chat section (mlt(5)): the ids that end a generation and the chat
 * templates.
 *
 * The end-of-generation set is llama.cpp's (llama-vocab.cpp, at load):
 * the EOS, EOT and EOM ids of tokenizer.ggml.*_token_id; every token
 * whose text is one of the end-of-turn markers below; the fill-in-middle
 * pad, repository and file-separator tokens (by key, or by text when the
 * key is absent); then its two corrections: <|end|> is not an end when
 * the vocabulary also has <|return|> and <|call|> (or <|calls|> and
 * <|flush|>), and </s> is not when <|tool_response> or <|plamo:eos|> is.
 *
 * Templates: tokenizer.chat_template is "default", and each
 * tokenizer.chat_template.NAME keeps its NAME. */
#include "convert/convert_impl.h"

#include <stdlib.h>

#define K_TOKENS "tokenizer.ggml.tokens"
#define K_TEMPLATE "tokenizer.chat_template"

/* Token texts that end a turn, a message or a text (llama.cpp's list). */
static const char *const end_texts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
    "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
    "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
    "<\357\275\234end\342\226\201of\342\226\201sentence\357\275\234>", /* <｜end▁of▁sentence｜> */
    "[e~[",
};

/* Fill-in-middle tokens that end a generation, by key or by text. */
static const struct fim {
    const char *key;
    const char *texts[6];
} fims[] = {
    {"tokenizer.ggml.fim_pad_token_id", {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"}},
    {"tokenizer.ggml.fim_rep_token_id",
     {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"}},
    {"tokenizer.ggml.fim_sep_token_id", {"<|file_sep|>"}},
};

static const char *const id_keys[] = {
    "tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id",
};

static int is(const char *s, size_t n, const char *lit)
{
    return strlen(lit) == n && memcmp(s, lit, n) == 0;
}

static int in_list(const char *s, size_t n, const char *const *list, size_t count)
{
    for (size_t i = 0; i < count && list[i]; i++)
        if (is(s, n, list[i]))
            return 1;
    return 0;
}

static void add_id(ml__conv_chat *out, uint32_t id)
{
    for (uint32_t i = 0; i < out->n_eog; i++)
        if (out->eog[i] == id)
            return;
    if (out->n_eog < ML_MLT_MAX_EOG)
        out->eog[out->n_eog++] = id;
}

/* An id key: absent, -1 or 0xFFFFFFFF (llama.cpp's "none") add nothing;
 * found is set when the key gives an id. */
static ml_status add_key(const ml_gguf *g, const char *key, uint32_t n_vocab, ml__conv_chat *out,
                         int *found, ml_error *err)
{
    const ml_gguf_kv *kv = ml_gguf_find(g, key);
    *found = 0;
    if (!kv)
        return ML_OK;
    int64_t v;
    ml_status s = ml_gguf_value_i64(&kv->value, &v, err);
    if (s || v == -1 || v == (int64_t)UINT32_MAX)
        return s;
    if (v < 0 || v >= (int64_t)n_vocab)
        return ml__err(err, ML_E_FORMAT, key, (int64_t)kv->value.offset,
                       "token id %lld is not below the %u tokens", (long long)v, n_vocab);
    add_id(out, (uint32_t)v);
    *found = 1;
    return ML_OK;
}

/* Text of token id, which the vocabulary conversion has already checked. */
static void token_text(const ml_gguf_value *tokens, uint32_t id, const char **p, size_t *n)
{
    ml_gguf_value el;
    *p = "";
    *n = 0;
    if (ml_gguf_array_get(tokens, id, &el, NULL) == ML_OK)
        ml_gguf_value_str(&el, p, n, NULL);
}

/* Removes the id whose text is `text`, if any. */
static void drop_text(const ml_gguf_value *tokens, ml__conv_chat *out, const char *text)
{
    for (uint32_t i = 0; i < out->n_eog; i++) {
        const char *p;
        size_t n;
        token_text(tokens, out->eog[i], &p, &n);
        if (is(p, n, text)) {
            out->eog[i] = out->eog[--out->n_eog];
            return;
        }
    }
}

static int eog_has(const ml_gguf_value *tokens, const ml__conv_chat *out, const char *text)
{
    for (uint32_t i = 0; i < out->n_eog; i++) {
        const char *p;
        size_t n;
        token_text(tokens, out->eog[i], &p, &n);
        if (is(p, n, text))
            return 1;
    }
    return 0;
}

static ml_status read_eog(const ml_gguf *g, ml__conv_chat *out, ml_error *err)
{
    ml_gguf_value tokens;
    ml_status s = ml_gguf_get_array(g, K_TOKENS, &tokens, NULL, err);
    if (s)
        return s;
    uint32_t n_vocab = (uint32_t)tokens.count;
    int fim_found[3], found;
    for (size_t k = 0; k < sizeof id_keys / sizeof id_keys[0]; k++)
        if ((s = add_key(g, id_keys[k], n_vocab, out, &found, err)))
            return s;
    for (size_t f = 0; f < 3; f++)
        if ((s = add_key(g, fims[f].key, n_vocab, out, &fim_found[f], err)))
            return s;
    for (uint32_t id = 0; id < n_vocab; id++) {
        const char *p;
        size_t n;
        token_text(&tokens, id, &p, &n);
        int end = in_list(p, n, end_texts, sizeof end_texts / sizeof end_texts[0]);
        for (size_t f = 0; f < 3 && !end; f++)
            end = !fim_found[f] && in_list(p, n, fims[f].texts, 6);
        if (end)
            add_id(out, id);
    }
    if (eog_has(&tokens, out, "<|end|>") &&
        ((eog_has(&tokens, out, "<|return|>") &&
          (eog_has(&tokens, out, "<|call|>") || eog_has(&tokens, out, "<|calls|>"))) ||
         ((eog_has(&tokens, out, "<|call|>") || eog_has(&tokens, out, "<|calls|>")) &&
          eog_has(&tokens, out, "<|flush|>"))))
        drop_text(&tokens, out, "<|end|>");
    if (eog_has(&tokens, out, "<|tool_response>") || eog_has(&tokens, out, "<|plamo:eos|>"))
        drop_text(&tokens, out, "</s>");
    return ML_OK;
}

/* One template value: a string .mlt can hold. */
static ml_status add_template(const ml_gguf_kv *kv, const char *name, size_t name_len,
                              ml__conv_chat *out, ml_error *err)
{
    const char *text;
    size_t len;
    ml_status s = ml_gguf_value_str(&kv->value, &text, &len, err);
    if (s)
        return s;
    int64_t off = (int64_t)kv->value.offset;
    if (out->n_templates == ML_MLT_MAX_TEMPLATES)
        return ml__err(err, ML_E_UNSUPPORTED, kv->key, off, "more than %u chat templates",
                       (unsigned)ML_MLT_MAX_TEMPLATES);
    if (name_len == 0 || name_len > ML_MLT_TEMPLATE_NAME_MAX)
        return ml__err(err, ML_E_UNSUPPORTED, kv->key, (int64_t)kv->offset,
                       "a template name of %zu bytes (an .mlt holds 1 to %u)", name_len,
                       (unsigned)ML_MLT_TEMPLATE_NAME_MAX);
    for (size_t i = 0; i < name_len; i++) {
        char ch = name[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '_' || ch == '.' || ch == '-'))
            return ml__err(err, ML_E_UNSUPPORTED, kv->key, (int64_t)kv->offset,
                           "the template name has byte 0x%02x (an .mlt name is A-Z a-z 0-9 _ . -)",
                           (unsigned char)ch);
    }
    if (len == 0 || len > ML_MLT_TEMPLATE_MAX)
        return ml__err(err, ML_E_UNSUPPORTED, kv->key, off,
                       "a template of %zu bytes (an .mlt holds 1 to %u)", len,
                       (unsigned)ML_MLT_TEMPLATE_MAX);
    if (memchr(text, 0, len))
        return ml__err(err, ML_E_FORMAT, kv->key, off, "the template has a NUL byte");
    for (uint32_t i = 0; i < out->n_templates; i++)
        if (out->tmpl[i].name_len == name_len && memcmp(out->tmpl[i].name, name, name_len) == 0)
            return ml__err(err, ML_E_UNSUPPORTED, kv->key, (int64_t)kv->offset,
                           "a second template named \"%.*s\"", (int)name_len, name);
    ml_mlt_template *t = &out->tmpl[out->n_templates++];
    *t = (ml_mlt_template){name, (uint32_t)name_len, text, (uint32_t)len};
    return ML_OK;
}

static ml_status read_templates(const ml_gguf *g, ml__conv_chat *out, ml_error *err)
{
    const size_t plen = strlen(K_TEMPLATE);
    for (size_t i = 0; i < ml_gguf_n_kv(g); i++) {
        const ml_gguf_kv *kv = ml_gguf_kv_at(g, i);
        ml_status s = ML_OK;
        if (strcmp(kv->key, K_TEMPLATE) == 0)
            s = add_template(kv, "default", 7, out, err);
        else if (kv->key_len > plen + 1 && memcmp(kv->key, K_TEMPLATE ".", plen + 1) == 0)
            s = add_template(kv, kv->key + plen + 1, kv->key_len - plen - 1, out, err);
        if (s)
            return s;
    }
    return ML_OK;
}

ml_status ml__conv_chat_read(const ml_gguf *g, ml_token eos, ml__conv_chat *out, ml_error *err)
{
    memset(out, 0, sizeof *out);
    ml_status s = read_eog(g, out, err);
    if (!s)
        s = read_templates(g, out, err);
    if (s)
        return s;
    out->chat = (ml_mlt_chat){out->eog, out->n_eog, out->tmpl, out->n_templates};
    /* A section only when it says more than the header's EOS. */
    out->needed = out->n_templates > 0 || out->n_eog > (eos != ML_TOKEN_NONE ? 1u : 0u);
    return ML_OK;
}
