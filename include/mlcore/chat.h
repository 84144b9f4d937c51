/* mlcore/chat.h - chat conversations: built-in chat templates for
 * tokenizers that carry none, rendering a conversation through a
 * template, and encoding the result so that what the user wrote stays
 * text.  Included by mlcore.h. */
#ifndef MLCORE_CHAT_H
#define MLCORE_CHAT_H

#include <mlcore/base.h>
#include <mlcore/jinja.h>
#include <mlcore/mlt.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------
 * Built-in templates ("chatml", "llama3", "gemma", "mistral", ...): Jinja
 * texts written for this library that render as the model makers' own
 * templates do for plain conversations (tests/fixtures/chat proves each
 * against the real template it stands for).
 * ------------------------------------------------------------------------ */
/* The NUL-terminated text of the built-in template called name, or NULL. */
ML_API const char *ml_chat_builtin(const char *name);
/* The name of built-in template i, or NULL when i is past the last. */
ML_API const char *ml_chat_builtin_name(unsigned i);

/* ------------------------------------------------------------------------
 * Rendering and encoding a conversation
 * ------------------------------------------------------------------------ */
/* One message: role ("system", "user", "assistant", ...) NUL-terminated,
 * content of content_len bytes (bad UTF-8 becomes U+FFFD). */
typedef struct ml_chat_message {
    const char *role;
    const char *content;
    size_t content_len;
} ml_chat_message;

/* A rendered conversation: the text the model reads and where in it the
 * messages' contents are, which ml_chat_encode keeps as text. */
typedef struct ml_chat_prompt {
    char *text;       /* NUL-terminated, len bytes */
    size_t len;
    ml_span *user;    /* the contents' spans, increasing */
    size_t n_user;
    /* Private: the contents when they could not be placed (the template
     * changes them beyond trimming). */
    char **loose;
    size_t *loose_len, *loose_msg, n_loose;
} ml_chat_prompt;

/* Renders messages[0..n) through t as transformers' apply_chat_template
 * does, with add_generation_prompt and, from tok when it is not NULL,
 * bos_token and eos_token (the pieces of its BOS and EOS).  Fails as
 * ml_jinja_render_json does (a template's raise_exception is ML_E_INVAL).
 * Free *out with ml_chat_prompt_free, also after a failure. */
ML_API ml_status ml_chat_render(const ml_jinja *t, const ml_chat_message *messages, size_t n,
                                int add_generation_prompt, const ml_mlt *tok,
                                ml_chat_prompt *out, ml_error *err);
/* The same with the variables of a JSON object (ml_jinja_render_json's);
 * the contents located are the strings messages[i].content and, where a
 * content is a list of parts, their "text" strings. */
ML_API ml_status ml_chat_render_json(const ml_jinja *t, const char *vars, size_t len,
                                     ml_chat_prompt *out, ml_error *err);
ML_API void ml_chat_prompt_free(ml_chat_prompt *p);

/* Appends the ids of the rendered conversation to *out, as
 * ml_tok_encode_chat does with the contents' spans: the template's
 * markers become control tokens, the contents stay text.  A content that
 * could not be placed and holds a control token's text is ML_E_INVAL
 * (field "messages", offset the message's index). */
ML_API ml_status ml_chat_encode(ml_tok *k, const ml_chat_prompt *p, ml_ids *out, ml_error *err);

#ifdef __cplusplus
}
#endif

#endif /* MLCORE_CHAT_H */
