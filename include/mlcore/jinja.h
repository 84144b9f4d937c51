/* jinja.h - a sandboxed interpreter for the Jinja subset of chat templates.
 *
 * Renders as Hugging Face transformers' apply_chat_template does (Python
 * jinja2's ImmutableSandboxedEnvironment with trim_blocks, lstrip_blocks
 * and loop controls; tojson as json.dumps with ensure_ascii off; the
 * globals raise_exception(msg) and strftime_now(fmt)).  Templates come
 * from model files and are distrusted: there is no file or network access,
 * and steps, nesting depth, output size and memory are bounded.
 *
 * The subset is what real chat templates use: expressions with Python's
 * semantics (int64, floats printed as Python does, str/list/dict/tuple,
 * slicing, printf-style %), if/elif/else, for (unpacking, inline if,
 * else, loop.*, break, continue), set (plain, tuple, namespace attribute,
 * block), macros, raw, filter and generation blocks, comments, whitespace
 * control with jinja2's trim_blocks and lstrip_blocks, the jinja2 filters
 * and tests templates call, str/dict/list methods, range, dict, namespace.
 * Mutating methods (list.append, dict.update, ...) fail as the sandbox
 * makes them fail.  No include, import, extends, call blocks or recursive
 * loops.  tests/fixtures/chat/README.md lists the known differences.
 *
 * Statuses: ML_E_FORMAT for a syntax error; ML_E_INVAL for an error raised
 * while rendering (raise_exception, a type error, an undefined name
 * called, a forbidden method such as list.append) and for bad variables
 * JSON; ML_E_NOMEM when the output or memory limit is reached;
 * ML_E_UNSUPPORTED when the step or depth limit is reached.  The error's
 * field is "template" and its offset the byte offset in the template (with
 * \r\n and \r counted as one \n), and the message starts with
 * "line L, column C: ".  Errors in the variables JSON use the field
 * "vars" and an offset in the JSON text. */
#ifndef MLCORE_JINJA_H
#define MLCORE_JINJA_H

#include <mlcore/base.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ml_jinja ml_jinja;

/* Limits and settings; a zero field takes its default. */
typedef struct ml_jinja_options {
    uint64_t max_steps;  /* evaluation steps per render; 0: 10,000,000 */
    uint32_t max_depth;  /* nesting of blocks, expressions, macro calls; 0: 256 */
    size_t max_output;   /* bytes of output; 0: 16 MiB */
    size_t max_memory;   /* bytes allocated per parse and per render; 0: 256 MiB */
    int64_t now;         /* strftime_now's time, seconds since the epoch,
                            formatted in UTC; 0: the current local time */
} ml_jinja_options;

/* Parses a template of len bytes (any bytes; not NUL-terminated).  opts
 * may be NULL; it is copied and also governs later renders. */
ML_API ml_status ml_jinja_parse(const char *text, size_t len, const ml_jinja_options *opts,
                                ml_jinja **out, ml_error *err);
/* Accepts NULL. */
ML_API void ml_jinja_free(ml_jinja *t);

/* Renders with the variables of a JSON object of len bytes, for a chat:
 * {"messages": [...], "add_generation_prompt": true, "bos_token": "<s>",
 * "eos_token": "</s>", "tools": [...], ...}.  A missing name is undefined
 * (transformers passes tools=None when there are none: give "tools": null
 * for that).  len 0 (json_vars may then be NULL) renders with no variables.
 * The JSON is read strictly (RFC 8259, UTF-8, nesting at most max_depth,
 * integers that fit int64).  A parsed template is not changed by rendering:
 * several threads may render it at once.  On success *out is a new NUL-terminated buffer (free with
 * free()) of *out_len bytes (out_len may be NULL); on failure *out is NULL. */
ML_API ml_status ml_jinja_render_json(const ml_jinja *t, const char *json_vars, size_t len,
                                      char **out, size_t *out_len, ml_error *err);

#ifdef __cplusplus
}
#endif

#endif /* MLCORE_JINJA_H */
