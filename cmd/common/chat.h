/* chat.h - the chat template a command renders a conversation with
 * (ml-run --chat, mlt-dump --render). */
#ifndef MLCORE_CLI_CHAT_H
#define MLCORE_CLI_CHAT_H

#include <mlcore.h>

/* The template, parsed: the Jinja file `file` when it is not NULL; else
 * `name` when it is not NULL, a template of the tokenizer by that name
 * (mlt-dump lists them) or else a built-in (chatml, llama3, ...); else the
 * tokenizer's "default".  tok_path names the tokenizer in messages.
 * Reports failures; returns 0 or the exit status (2 for an unknown name,
 * 1 when the tokenizer has no template or the template does not parse). */
int cli_chat_template(const char *tok_path, const ml_mlt *t, const char *name, const char *file,
                      ml_jinja **out);

/* The built-in names, comma-separated, for messages and --help. */
const char *cli_chat_builtin_names(void);

#endif
