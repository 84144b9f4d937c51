/* chat_builtin.c - the built-in chat templates (mlcore/chat.h). */
#include "base/internal.h"

#include <mlcore/chat.h>

#include <string.h>

typedef struct builtin {
    const char *name;
    const char *text;
} builtin;

static const builtin builtins[] = {
    {"chatml", "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + "
               "message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}"
               "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"},
};

const char *ml_chat_builtin(const char *name)
{
    for (size_t i = 0; name && i < sizeof builtins / sizeof builtins[0]; i++)
        if (!strcmp(builtins[i].name, name))
            return builtins[i].text;
    return NULL;
}

const char *ml_chat_builtin_name(unsigned i)
{
    return i < sizeof builtins / sizeof builtins[0] ? builtins[i].name : NULL;
}
