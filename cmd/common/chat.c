/* chat.c - the chat template a command renders with (chat.h). */
#include "chat.h"

#include "cli.h"
#include "input.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *cli_chat_builtin_names(void)
{
    static char buf[256];
    if (!buf[0])
        for (unsigned i = 0; ml_chat_builtin_name(i); i++)
            snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "%s%s", i ? ", " : "",
                     ml_chat_builtin_name(i));
    return buf;
}

/* The text by name: the tokenizer's template of that name, or a built-in. */
static int named(const char *tok_path, const ml_mlt *t, const char *name, const char **text,
                 size_t *len, const char **src)
{
    ml_mlt_template k;
    if (ml_mlt_find_template(t, name, &k)) {
        *text = k.text, *len = k.len, *src = tok_path;
        return 0;
    }
    if ((*text = ml_chat_builtin(name))) {
        *len = strlen(*text), *src = name;
        return 0;
    }
    cli_usage_error("--chat-template: '%s' is neither a template of %s nor a built-in (%s)", name,
                    cli_name(tok_path), cli_chat_builtin_names());
}

int cli_chat_template(const char *tok_path, const ml_mlt *t, const char *name, const char *file,
                      ml_jinja **out)
{
    char *owned = NULL;
    const char *text = NULL, *src = tok_path;
    size_t len = 0;
    ml_mlt_template k;
    int rc = 0;
    if (file) {
        rc = cli_read_text(file, &owned, &len);
        text = owned, src = file;
    } else if (name) {
        rc = named(tok_path, t, name, &text, &len, &src);
    } else if (ml_mlt_find_template(t, "default", &k)) {
        text = k.text, len = k.len;
    } else {
        cli_warn(tok_path, "ML_E_INVAL: the tokenizer has no chat template (give one: "
                           "--chat-template NAME, one of %s, or --chat-template-file FILE)",
                 cli_chat_builtin_names());
        return EXIT_INVALID;
    }
    ml_error err;
    ml_status s = rc ? ML_OK : ml_jinja_parse(text, len, NULL, out, &err);
    free(owned);
    return rc ? rc : s ? cli_fail(src, s, &err) : 0;
}
