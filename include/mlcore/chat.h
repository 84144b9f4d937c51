/* mlcore/chat.h - chat conversations: built-in chat templates for
 * tokenizers that carry none, rendering a conversation through a
 * template, and encoding the result so that what the user wrote stays
 * text.  Included by mlcore.h. */
#ifndef MLCORE_CHAT_H
#define MLCORE_CHAT_H

#include <mlcore/base.h>

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

#ifdef __cplusplus
}
#endif

#endif /* MLCORE_CHAT_H */
