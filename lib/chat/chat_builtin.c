/* chat_builtin.c - the built-in chat templates (mlcore/chat.h), for
 * tokenizers that carry none.  Each is a short Jinja text of our own that
 * renders, for plain conversations (system, user and assistant turns),
 * the same bytes as the model maker's template it stands for;
 * tests/unit/check_chat_builtin.c proves each against that template's
 * jinja2 renders in tests/fixtures/chat/golden, and the fixtures' README
 * lists what differs.  The names are llama.cpp's built-in names for the
 * same formats, though llama.cpp's own renderers of "llama2" and "zephyr"
 * only approximate the model makers' templates.
 *
 * The texts rely on the interpreter's transformers setup (trim_blocks,
 * lstrip_blocks): a line ends in a block tag or in "{{- ... }}", so the
 * line breaks between them never reach the output. */
#include "base/internal.h"

#include <mlcore/chat.h>

#include <string.h>

typedef struct builtin {
    const char *name;
    const char *text;
} builtin;

/* Plain ChatML (teknium/OpenHermes-2.5-Mistral-7B); also Qwen 2.5's and
 * SmolLM2's when the conversation starts with a system message, since
 * theirs differ only by a default system prompt. */
static const char chatml[] =
    "{%- for message in messages %}\n"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}\n"
    "{%- endfor %}\n"
    "{%- if add_generation_prompt %}\n"
    "{{- '<|im_start|>assistant\\n' }}\n"
    "{%- endif %}\n";

/* meta-llama/Meta-Llama-3-8B-Instruct: no default system prompt, unlike
 * Llama 3.1's and later ones, which add dates and tool text. */
static const char llama3[] =
    "{%- for message in messages %}\n"
    "{{- bos_token if loop.first else '' }}\n"
    "{{- '<|start_header_id|>' + message.role + '<|end_header_id|>\\n\\n' }}\n"
    "{{- message.content | trim + '<|eot_id|>' }}\n"
    "{%- endfor %}\n"
    "{%- if add_generation_prompt %}\n"
    "{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}\n"
    "{%- endif %}\n";

/* meta-llama/Llama-2-7b-chat-hf.  The system message goes inside the
 * first [INST] and the trim covers the joined text, so the first user
 * turn keeps its leading spaces when there is a system message: Meta's
 * does the same.  Like Meta's it refuses turns that do not alternate and
 * has no generation prompt (the text ends with [/INST] already).  llama.cpp
 * detects Meta's template as "llama2-sys-strip"; its "llama2" renders no
 * <<SYS>> block. */
static const char llama2[] =
    "{%- set has_system = messages[0].role == 'system' %}\n"
    "{%- set turns = messages[1:] if has_system else messages %}\n"
    "{%- for message in turns %}\n"
    "{%- if (message.role == 'user') != (loop.index0 is even) %}\n"
    "{{- raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}\n"
    "{%- endif %}\n"
    "{%- set content = message.content %}\n"
    "{%- if loop.first and has_system %}\n"
    "{%- set content = '<<SYS>>\\n' + messages[0].content + '\\n<</SYS>>\\n\\n' + content %}\n"
    "{%- endif %}\n"
    "{%- if message.role == 'user' %}\n"
    "{{- bos_token + '[INST] ' + content | trim + ' [/INST]' }}\n"
    "{%- elif message.role == 'assistant' %}\n"
    "{{- ' ' + content | trim + ' ' + eos_token }}\n"
    "{%- endif %}\n"
    "{%- endfor %}\n";

/* mistralai/Mistral-7B-Instruct-v0.2's current template, which v0.1 shares
 * (llama.cpp's "mistral-v1"): an optional system message first, then
 * strictly user/assistant; other roles are refused as Mistral's are.
 * v0.3's template (llama.cpp's "mistral-v3") differs: no space before
 * [INST] or [/INST], and the system message in the last user turn. */
static const char mistral[] =
    "{%- set has_system = messages[0].role == 'system' %}\n"
    "{%- set turns = messages[1:] if has_system else messages %}\n"
    "{{- bos_token }}\n"
    "{%- for message in turns %}\n"
    "{%- if (message.role == 'user') != (loop.index0 is even) %}\n"
    "{{- raise_exception('After the optional system message, conversation roles must alternate "
    "user/assistant/user/assistant/...') }}\n"
    "{%- elif message.role == 'user' %}\n"
    "{{- ' [INST] ' + (messages[0].content + '\\n\\n' if loop.first and has_system else '') }}\n"
    "{{- message.content + ' [/INST]' }}\n"
    "{%- elif message.role == 'assistant' %}\n"
    "{{- ' ' + message.content + eos_token }}\n"
    "{%- else %}\n"
    "{{- raise_exception('Only user and assistant roles are supported, with the exception of an "
    "initial optional system message!') }}\n"
    "{%- endif %}\n"
    "{%- endfor %}\n";

/* Gemma 3's template (google/gemma-3-1b-it): Gemma has no system turn, so
 * a system message is folded, untrimmed, into the first user turn.  For
 * conversations without a system message this is Gemma 2's format too
 * (google/gemma-2-2b-it), whose template refuses a system message
 * instead.  Content is text only: Gemma 3's image parts are not rendered. */
static const char gemma[] =
    "{{- bos_token }}\n"
    "{%- set has_system = messages[0].role == 'system' %}\n"
    "{%- set turns = messages[1:] if has_system else messages %}\n"
    "{%- for message in turns %}\n"
    "{%- if (message.role == 'user') != (loop.index0 is even) %}\n"
    "{{- raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}\n"
    "{%- endif %}\n"
    "{{- '<start_of_turn>' + ('model' if message.role == 'assistant' else message.role) + '\\n' }}\n"
    "{{- messages[0].content + '\\n\\n' if loop.first and has_system else '' }}\n"
    "{{- message.content | trim + '<end_of_turn>\\n' }}\n"
    "{%- endfor %}\n"
    "{%- if add_generation_prompt %}\n"
    "{{- '<start_of_turn>model\\n' }}\n"
    "{%- endif %}\n";

/* microsoft/Phi-3.5-mini-instruct: an empty system message is left out,
 * and a conversation without a generation prompt ends with EOS. */
static const char phi3[] =
    "{%- for message in messages %}\n"
    "{%- if message.role in ['user', 'assistant'] or (message.role == 'system' and message.content) %}\n"
    "{{- '<|' + message.role + '|>\\n' + message.content + '<|end|>\\n' }}\n"
    "{%- endif %}\n"
    "{%- endfor %}\n"
    "{{- '<|assistant|>\\n' if add_generation_prompt else eos_token }}\n";

/* HuggingFaceH4/zephyr-7b-beta (TinyLlama-1.1B-Chat's is the same): every
 * turn ends with the tokenizer's EOS, where llama.cpp's "zephyr" always
 * writes "<|endoftext|>". */
static const char zephyr[] =
    "{%- for message in messages %}\n"
    "{%- if message.role in ['user', 'system', 'assistant'] %}\n"
    "{{- '<|' + message.role + '|>\\n' + message.content + eos_token + '\\n' }}\n"
    "{%- endif %}\n"
    "{%- if loop.last and add_generation_prompt %}\n"
    "{{- '<|assistant|>\\n' }}\n"
    "{%- endif %}\n"
    "{%- endfor %}\n";

static const builtin builtins[] = {
    {"chatml", chatml},
    {"llama2", llama2},
    {"llama3", llama3},
    {"mistral", mistral},
    {"mistral-v1", mistral},
    {"gemma", gemma},
    {"phi3", phi3},
    {"zephyr", zephyr},
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
