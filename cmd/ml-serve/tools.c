/* tools.c - tool calling's setup (tools.h): the template's format, the
 * template variables and the grammar of a request's calls.  The template
 * is asked, not guessed from its text: a probe conversation with one
 * tool, one call and one result is rendered through it, and the markers
 * it writes name the format the model was trained on.  The reply's split
 * is tool_split.c's. */
#include "tools.h"
#include "schema.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROBE_FN "mlprobe_fn"
#define PROBE_ARGS "{\"mlprobe_arg\": \"mlprobe_value\"}"

/* ------------------------------------------------------------------------
 * The probe
 * ------------------------------------------------------------------------ */
static json_t *probe_vars(int tools, int call, int result, int string_args)
{
    json_t *args = string_args ? json_string(PROBE_ARGS) : json_loads(PROBE_ARGS, 0, NULL);
    json_t *msgs = json_pack("[{s:s,s:s}]", "role", "user", "content", "MLPROBE_USER");
    if (call)
        json_array_append_new(
            msgs, json_pack("{s:s,s:s,s:[{s:s,s:s,s:{s:s,s:O}}]}", "role", "assistant", "content",
                            "", "tool_calls", "id", "call00001", "type", "function", "function",
                            "name", PROBE_FN, "arguments", args));
    if (call && result)
        json_array_append_new(msgs, json_pack("{s:s,s:s,s:s,s:s}", "role", "tool", "tool_call_id",
                                              "call00001", "name", PROBE_FN, "content",
                                              "MLPROBE_RESULT"));
    json_t *v = json_pack("{s:o,s:b,s:s,s:s}", "messages", msgs, "add_generation_prompt", 1,
                          "bos_token", "", "eos_token", "");
    if (v && tools)
        json_object_set_new(
            v, "tools",
            json_pack("[{s:s,s:{s:s,s:s,s:{s:s,s:{s:{s:s}},s:[s]}}}]", "type", "function",
                      "function", "name", PROBE_FN, "description", "MLPROBE_DESC", "parameters",
                      "type", "object", "properties", "mlprobe_arg", "type", "string",
                      "required", "mlprobe_arg"));
    json_decref(args);
    return v;
}

/* The probe rendered, or NULL when the template refuses it. */
static char *probe(const ml_jinja *t, int tools, int call, int result, int string_args)
{
    json_t *v = probe_vars(tools, call, result, string_args);
    char *vars = v ? json_dumps(v, JSON_COMPACT) : NULL, *out = NULL;
    ml_error err;
    json_decref(v);
    if (vars && ml_jinja_render_json(t, vars, strlen(vars), &out, NULL, &err))
        out = NULL;
    free(vars);
    return out;
}

/* A call written in the probe's text, by its markers. */
static srv_tool_format format_of(const char *r)
{
    const char *h = strstr(r, "<tool_call>");
    if (strstr(r, "to=functions." PROBE_FN))
        return SRV_TOOLS_GPT_OSS;
    if (strstr(r, "[TOOL_CALLS]" PROBE_FN "["))
        return SRV_TOOLS_MISTRAL_ARGS;
    if (strstr(r, "[TOOL_CALLS]["))
        return SRV_TOOLS_MISTRAL;
    if (strstr(r, "<function=" PROBE_FN ">\n<parameter=mlprobe_arg>"))
        return SRV_TOOLS_XML;
    for (; h; h = strstr(h, "<tool_call>")) { /* the call's, not the instructions' */
        h += strlen("<tool_call>");
        h += strspn(h, " \n");
        if (!strncmp(h, "{\"name\": \"" PROBE_FN "\"", strlen(PROBE_FN) + 10))
            return SRV_TOOLS_HERMES;
    }
    if (strstr(r, "{\"name\": \"" PROBE_FN "\", \"parameters\"") || strstr(r, "<|python_tag|>"))
        return SRV_TOOLS_LLAMA3;
    return SRV_TOOLS_GENERIC;
}

void srv_tools_probe(const ml_jinja *t, srv_tool_caps *c)
{
    memset(c, 0, sizeof *c);
    char *r = probe(t, 1, 1, 1, 0);
    if (r) {
        c->tool_role = strstr(r, "MLPROBE_RESULT") != NULL;
    } else if (!(r = probe(t, 1, 1, 0, 0))) {
        r = probe(t, 1, 0, 0, 0);
    }
    if (!r)
        return;
    c->format = format_of(r);
    c->renders_tools = strstr(r, "MLPROBE_DESC") != NULL;
    free(r);
    if ((r = probe(t, 1, 1, c->tool_role, 1)))
        c->string_args = strstr(r, PROBE_ARGS) != NULL;
    free(r);
}

const char *srv_tool_format_name(srv_tool_format f)
{
    static const char *const names[] = {"generic", "hermes", "llama3", "mistral", "mistral-args",
                                        "gpt-oss", "xml"};
    return names[f];
}

int srv_tools_active(const srv_tool_caps *c, const srv_request *q, int reasoning)
{
    return (q->tools && q->tool_choice != SRV_TOOL_NONE) ||
           (c->format == SRV_TOOLS_GPT_OSS && reasoning);
}

static int tools_on(const srv_request *q)
{
    return q->tools && q->tool_choice != SRV_TOOL_NONE;
}

/* ------------------------------------------------------------------------
 * The template's variables
 * ------------------------------------------------------------------------ */
/* Our own instructions, for templates that have no format of their own. */
static json_t *generic_system(const srv_request *q)
{
    char *list = json_dumps(q->tools, JSON_INDENT(2));
    const char *calls = q->parallel_tools
                            ? "{\"tool_calls\": [{\"name\": NAME, \"arguments\": {...}}, ...]}"
                            : "{\"tool_call\": {\"name\": NAME, \"arguments\": {...}}}";
    const char *answer = q->tool_choice == SRV_TOOL_AUTO
                             ? ", or {\"response\": TEXT} to answer the user directly"
                             : "";
    json_t *s = NULL;
    if (list) {
        size_t n = strlen(list) + strlen(calls) + strlen(answer) + 200;
        char *text = malloc(n);
        if (text) {
            snprintf(text, n,
                     "You can call these tools:\n%s\n\nReply with one JSON object and nothing "
                     "else: %s to call tools%s.",
                     list, calls, answer);
            s = json_string(text);
        }
        free(text);
    }
    free(list);
    return s;
}

/* An assistant turn's calls as our generic JSON reply, its content. */
static json_t *generic_calls_text(const json_t *calls)
{
    json_t *list = json_array(), *c;
    size_t i;
    json_array_foreach(calls, i, c) {
        json_t *f = json_object_get(c, "function"), *a = json_object_get(f, "arguments");
        json_t *obj = json_is_string(a) ? json_loads(json_string_value(a), 0, NULL) : NULL;
        json_array_append_new(list, json_pack("{s:O,s:O}", "name", json_object_get(f, "name"),
                                              "arguments", obj ? obj : a));
        json_decref(obj);
    }
    json_t *reply = json_array_size(list) == 1
                        ? json_pack("{s:O}", "tool_call", json_array_get(list, 0))
                        : json_pack("{s:O}", "tool_calls", list);
    char *text = reply ? json_dumps(reply, 0) : NULL;
    json_t *s = text ? json_string(text) : NULL;
    free(text);
    json_decref(reply);
    json_decref(list);
    return s;
}

/* Arguments given as a JSON string, as objects for templates that write
 * them with tojson (most do). */
static void object_args(json_t *calls)
{
    json_t *c;
    size_t i;
    json_array_foreach(calls, i, c) {
        json_t *f = json_object_get(c, "function"), *a = json_object_get(f, "arguments");
        json_t *obj = json_is_string(a) ? json_loads(json_string_value(a), 0, NULL) : NULL;
        if (json_is_object(obj))
            json_object_set(f, "arguments", obj);
        json_decref(obj);
    }
}

/* One message as the template takes it (m is a copy, changed in place).
 * gpt-oss's template reads an assistant turn's analysis from "thinking";
 * OpenAI's clients send it back as the reasoning_content we gave them
 * (llama.cpp's server copies it the same way). */
static int message(const srv_tool_caps *c, json_t *m)
{
    json_t *calls = json_object_get(m, "tool_calls");
    json_t *reasoning = json_object_get(m, "reasoning_content");
    if (c->format == SRV_TOOLS_GPT_OSS && json_is_string(reasoning) &&
        !json_object_get(m, "thinking") && json_object_set(m, "thinking", reasoning))
        return -1;
    if (json_is_array(calls) && c->format == SRV_TOOLS_GENERIC) {
        json_t *text = generic_calls_text(calls);
        if (!text || json_object_set_new(m, "content", text))
            return -1;
        json_object_del(m, "tool_calls");
    } else if (json_is_array(calls) && !c->string_args) {
        object_args(calls);
    }
    return 0;
}

static int is_tool(const json_t *m)
{
    const char *role = json_string_value(json_object_get(m, "role"));
    return role && !strcmp(role, "tool");
}

/* Tool messages msgs[i..) in a row, for a template without the role, as
 * one user message (templates that take only user and assistant turns
 * want them to alternate): {"tool_response": {...}} or, for several,
 * {"tool_responses": [...]}.  Appends it to out; the count taken in *n. */
static int tool_results(const json_t *msgs, size_t i, json_t *out, size_t *n)
{
    json_t *list = json_array(), *m;
    for (*n = 0; list && is_tool(m = json_array_get(msgs, i + *n)); ++*n)
        if (json_array_append_new(list, json_pack("{s:O?,s:O?}", "tool_call_id",
                                                  json_object_get(m, "tool_call_id"), "content",
                                                  json_object_get(m, "content"))))
            break;
    json_t *reply = !list ? NULL
                    : *n == 1 ? json_pack("{s:O}", "tool_response", json_array_get(list, 0))
                              : json_pack("{s:O}", "tool_responses", list);
    char *text = reply ? json_dumps(reply, 0) : NULL;
    int bad = !text || json_array_append_new(out, json_pack("{s:s,s:s}", "role", "user",
                                                            "content", text));
    free(text);
    json_decref(reply), json_decref(list);
    return bad ? -1 : 0;
}

/* The messages as the template takes them (a new array, or NULL). */
static json_t *messages(const srv_tool_caps *c, const json_t *msgs)
{
    json_t *out = json_array();
    size_t i = 0, n;
    while (out && i < json_array_size(msgs)) {
        json_t *m = json_deep_copy(json_array_get(msgs, i));
        int bad = !m;
        if (!bad && is_tool(m) && !c->tool_role) {
            bad = tool_results(msgs, i, out, &n);
            i += n;
        } else {
            bad = bad || message(c, m) || json_array_append(out, m);
            i++;
        }
        json_decref(m);
        if (bad) {
            json_decref(out);
            out = NULL;
        }
    }
    return out;
}

int srv_tools_vars(const srv_tool_caps *c, const srv_request *q, json_t *vars)
{
    json_t *msgs = messages(c, q->messages);
    int bad = !msgs;
    if (!bad && tools_on(q) && c->format == SRV_TOOLS_GENERIC) {
        json_t *sys = generic_system(q), *first = json_array_get(msgs, 0);
        const char *role = json_string_value(json_object_get(first, "role"));
        const char *had = json_string_value(json_object_get(first, "content"));
        if (sys && role && !strcmp(role, "system") && had) { /* ours after theirs */
            size_t n = strlen(had) + json_string_length(sys) + 3;
            char *both = malloc(n);
            if (both)
                snprintf(both, n, "%s\n\n%s", had, json_string_value(sys));
            bad = !both || json_object_set_new(first, "content", json_string(both));
            free(both);
            json_decref(sys);
        } else {
            bad = !sys || json_array_insert_new(
                              msgs, 0, json_pack("{s:s,s:o}", "role", "system", "content", sys));
        }
    }
    if (!bad && tools_on(q) && c->format != SRV_TOOLS_GENERIC)
        bad = json_object_set(vars, "tools", q->tools);
    bad = bad || json_object_set(vars, "messages", msgs);
    json_decref(msgs);
    return bad ? -1 : 0;
}

/* ------------------------------------------------------------------------
 * The grammar of a call
 * ------------------------------------------------------------------------ */
/* A GBNF string literal of s (JSON's escapes are GBNF's). */
static void lit(FILE *f, const char *s)
{
    json_t *j = json_string(s);
    char *t = j ? json_dumps(j, JSON_ENCODE_ANY) : NULL;
    fputs(t ? t : "\"\"", f);
    free(t);
    json_decref(j);
}

/* The tools a call may name: all, or the one tool_choice names. */
static int callable(const srv_request *q, size_t i)
{
    const char *name = srv_tool_name(json_array_get(q->tools, i));
    return q->tool_choice != SRV_TOOL_NAMED || (name && !strcmp(name, q->tool_name));
}

/* The rule "call": one call's text (its arguments: rule schemaI). */
static void call_rule(FILE *f, srv_tool_format fmt, const srv_request *q)
{
    fputs("call ::= ", f);
    int first = 1;
    for (size_t i = 0; i < json_array_size(q->tools); i++) {
        if (!callable(q, i))
            continue;
        const char *name = srv_tool_name(json_array_get(q->tools, i));
        char key[100];
        fputs(first ? "" : " | ", f);
        first = 0;
        switch (fmt) {
        case SRV_TOOLS_MISTRAL_ARGS:
            lit(f, name);
            fprintf(f, " (\"[CALL_ID]\" [a-zA-Z0-9]{9})? \"[ARGS]\" schema%zu", i);
            break;
        case SRV_TOOLS_GPT_OSS:
            snprintf(key, sizeof key, "<|channel|>commentary to=functions.%s <|constrain|>json<|message|>", name);
            lit(f, key);
            fprintf(f, " schema%zu", i);
            break;
        default: {
            const char *args = fmt == SRV_TOOLS_LLAMA3 ? "parameters" : "arguments";
            snprintf(key, sizeof key, "{\"name\": \"%s\", \"%s\": ", name, args);
            lit(f, key);
            fprintf(f, " schema%zu ", i);
            lit(f, fmt == SRV_TOOLS_MISTRAL ? ", \"id\": \"" : "}");
            if (fmt == SRV_TOOLS_MISTRAL)
                fputs(" [a-zA-Z0-9]{9} \"\\\"}\"", f);
        }
        }
    }
    fputc('\n', f);
}

/* The rule "root": the calls, per format ("answer"), after the rest of
 * a think block the prompt left open (reasoning without "</": the text
 * cannot end the block early). */
static void root_rule(FILE *f, srv_tool_format fmt, const srv_request *q)
{
    int many = q->parallel_tools;
    fputs(q->think_open ? "root ::= ([^<] | \"<\" [^/<])* \"</think>\" [ \\n]* answer\n"
                        : "root ::= answer\n",
          f);
    switch (fmt) {
    case SRV_TOOLS_HERMES:
        fprintf(f, "one ::= \"<tool_call>\\n\" call \"\\n</tool_call>\"\nanswer ::= one%s\n",
                many ? " (\"\\n\" one)*" : "");
        break;
    case SRV_TOOLS_LLAMA3:
    case SRV_TOOLS_GPT_OSS:
        fputs("answer ::= call\n", f);
        break;
    case SRV_TOOLS_MISTRAL:
        fprintf(f, "answer ::= \"[TOOL_CALLS][\" call%s \"]\"\n", many ? " (\", \" call)*" : "");
        break;
    case SRV_TOOLS_MISTRAL_ARGS:
        fprintf(f, "answer ::= \"[TOOL_CALLS]\" call%s\n", many ? " (\"[TOOL_CALLS]\" call)*" : "");
        break;
    case SRV_TOOLS_XML:
        fprintf(f, "answer ::= call%s\n", many ? " (\"\\n\" call)*" : "");
        break;
    case SRV_TOOLS_GENERIC:
        fprintf(f, "calls ::= %s\n",
                many ? "\"{\\\"tool_calls\\\": [\" call (\", \" call)* \"]}\""
                     : "\"{\\\"tool_call\\\": \" call \"}\"");
        fprintf(f, "answer ::= calls%s\n",
                q->tool_choice == SRV_TOOL_AUTO ? " | \"{\\\"response\\\": \" text \"}\"" : "");
        /* a JSON string (the schemas' own rules are each theirs) */
        fputs("text ::= \"\\\"\" ([^\"\\\\\\x00-\\x1f] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" "
              "[0-9a-fA-F]{4}))* \"\\\"\"\n", f);
        break;
    }
}

/* A parameter's value as the XML format writes it: a string raw (up to
 * the next '<'), an enum of strings as its raw values, anything else as
 * JSON (rule schemaK). */
static void xml_value(FILE *f, const json_t *prop, size_t k)
{
    const json_t *type = json_object_get(prop, "type"), *list = json_object_get(prop, "enum"), *v;
    size_t i;
    int strings = json_is_array(list) && json_array_size(list) > 0;
    json_array_foreach(list, i, v) strings = strings && json_is_string(v);
    if (strings) {
        fputs("(", f);
        json_array_foreach(list, i, v) {
            fputs(i ? " | " : "", f);
            lit(f, json_string_value(v));
        }
        fputs(")", f);
    } else if (json_is_string(type) && !strcmp(json_string_value(type), "string") &&
               !json_object_get(prop, "const") && !list)
        fputs("[^<]*", f);
    else
        fprintf(f, "schema%zu", k);
}

/* The rule "call" of the XML format: each callable tool's parameters in
 * its schema's order, the required ones always, the others optional;
 * props[] lists every property's schema in that order (rule schemaK). */
static void xml_call_rule(FILE *f, const srv_request *q)
{
    size_t k = 0;
    int first = 1;
    fputs("call ::= ", f);
    for (size_t i = 0; i < json_array_size(q->tools); i++) {
        const json_t *params = srv_tool_params(json_array_get(q->tools, i));
        const json_t *props = json_object_get(params, "properties"), *req, *prop, *r;
        const char *key;
        size_t j;
        req = json_object_get(params, "required");
        if (!callable(q, i)) {
            k += json_object_size(props);
            continue;
        }
        char head[100];
        snprintf(head, sizeof head, "<tool_call>\n<function=%s>\n",
                 srv_tool_name(json_array_get(q->tools, i)));
        fputs(first ? "" : " | ", f);
        first = 0;
        lit(f, head);
        json_object_foreach((json_t *)props, key, prop) {
            int required = 0;
            json_array_foreach(req, j, r) required |= json_is_string(r) &&
                                                    !strcmp(json_string_value(r), key);
            char open[160];
            snprintf(open, sizeof open, "<parameter=%s>\n", key);
            fputs(required ? " " : " (", f);
            lit(f, open);
            fputs(" ", f);
            xml_value(f, prop, k++);
            fputs(" \"\\n</parameter>\\n\"", f);
            fputs(required ? "" : ")?", f);
        }
        fputs(" \"</function>\\n</tool_call>\"", f);
    }
    fputc('\n', f);
}

/* The schemas the grammar's rules are made of: each tool's parameters,
 * or for the XML format each tool's properties (a new array); object
 * stands for a tool without parameters. */
static const json_t **grammar_schemas(const srv_tool_caps *c, const srv_request *q,
                                      const json_t *object, size_t *n)
{
    const int xml = c->format == SRV_TOOLS_XML;
    size_t cap = 0;
    for (size_t i = 0; i < json_array_size(q->tools); i++)
        cap += xml ? json_object_size(json_object_get(
                         srv_tool_params(json_array_get(q->tools, i)), "properties"))
                   : 1;
    const json_t **s = calloc(cap ? cap : 1, sizeof *s);
    *n = 0;
    for (size_t i = 0; s && i < json_array_size(q->tools); i++) {
        const json_t *params = srv_tool_params(json_array_get(q->tools, i));
        const char *key;
        json_t *prop;
        if (!xml) {
            s[(*n)++] = params ? params : object;
            continue;
        }
        json_object_foreach(json_object_get(params, "properties"), key, prop) s[(*n)++] = prop;
    }
    return s;
}

char *srv_tools_grammar(const srv_tool_caps *c, const srv_request *q, srv_error *e)
{
    size_t n;
    e->status = 0;
    if (!tools_on(q))
        return NULL;
    json_t *object = json_pack("{s:s}", "type", "object");
    const json_t **schemas = object ? grammar_schemas(c, q, object, &n) : NULL;
    char *rules = schemas ? srv_schema_rules(schemas, n, "tools", e) : NULL;
    if (!schemas)
        srv_fail(e, 500, "server_error", NULL, NULL, "Out of memory.");
    free(schemas);
    json_decref(object);
    int wanted = q->tool_choice != SRV_TOOL_AUTO || c->format == SRV_TOOLS_GENERIC;
    if (!rules || !wanted) {
        free(rules);
        return NULL;
    }
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (f) {
        fputs(rules, f);
        if (c->format == SRV_TOOLS_XML)
            xml_call_rule(f, q);
        else
            call_rule(f, c->format, q);
        root_rule(f, c->format, q);
    }
    free(rules);
    if (!f || fclose(f)) {
        free(text);
        srv_fail(e, 500, "server_error", NULL, NULL, "Out of memory.");
        return NULL;
    }
    return text;
}
