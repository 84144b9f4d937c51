/* tool_split.c - a reply split into content, reasoning and tool calls
 * (tools.h), per format.  Parsing is forgiving where models are (white
 * space, a missing closing tag) and strict where a client depends on it:
 * a call is reported only when its JSON parses, else the text stays
 * content.  gpt-oss's channels are followed as they come, so that its
 * reasoning and answer stream; the other formats pass text through until
 * a call may begin and parse the rest at the end. */
#include "marks.h"
#include "tools.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------
 * Parsing a reply
 * ------------------------------------------------------------------------ */
static size_t skip_ws(const char *s, size_t n, size_t i)
{
    while (i < n && strchr(" \t\r\n", s[i]) && s[i])
        i++;
    return i;
}

/* The JSON value at s[i..n) (its end in *end), or NULL. */
static json_t *json_at(const char *s, size_t n, size_t i, size_t *end)
{
    json_error_t err;
    if (i >= n) /* nothing there (s may even be NULL) */
        return NULL;
    json_t *v = json_loadb(s + i, n - i, JSON_DISABLE_EOF_CHECK | JSON_DECODE_ANY, &err);
    if (v)
        *end = i + (size_t)err.position;
    return v;
}

/* An id for call k: "call_" and 24 letters and digits (9 for Mistral's
 * templates, which refuse any other). */
static json_t *call_id(const srv_tool_split *t, size_t k)
{
    static const char abc[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    int mistral = t->format == SRV_TOOLS_MISTRAL || t->format == SRV_TOOLS_MISTRAL_ARGS;
    char id[32] = "call_";
    char *p = mistral ? id : id + 5;
    uint64_t x = t->seed ^ (k + 1) * 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < (mistral ? 9 : 24); i++) {
        x ^= x >> 31, x *= 0xbf58476d1ce4e5b9ull, x ^= x >> 29;
        *p++ = abc[x % 62];
    }
    *p = 0;
    return json_string(id);
}

/* Appends a call of name with arguments (an object, or a string of
 * JSON) to calls; 0, or -1 when the call is not one. */
static int add_call(const srv_tool_split *t, json_t *calls, const json_t *name, const json_t *args,
                    const json_t *id)
{
    if (!json_is_string(name) || !(json_is_object(args) || json_is_string(args)))
        return -1;
    char *a = json_is_string(args) ? NULL : json_dumps(args, JSON_COMPACT);
    const char *at = a ? a : json_string_value(args);
    int mistral_id = json_is_string(id) && json_string_length(id) == 9;
    json_t *c = json_pack("{s:o,s:s,s:{s:O,s:s}}", "id",
                          mistral_id ? json_incref((json_t *)id) : call_id(t, json_array_size(calls)),
                          "type", "function", "function", "name", name, "arguments", at ? at : "");
    free(a);
    return c && at && !json_array_append_new(calls, c) ? 0 : -1;
}

/* A call object {"name", "arguments"|"parameters", "id"?}. */
static int add_object(const srv_tool_split *t, json_t *calls, const json_t *o)
{
    const json_t *args = json_object_get(o, "arguments");
    return add_call(t, calls, json_object_get(o, "name"),
                    args ? args : json_object_get(o, "parameters"), json_object_get(o, "id"));
}

/* <tool_call>{...}</tool_call>, any number, text around them content. */
static void parse_hermes(const srv_tool_split *t, const char *s, size_t n, ml_buf *content,
                         json_t *calls)
{
    static const char OPEN[] = "<tool_call>", CLOSE[] = "</tool_call>";
    size_t i = 0;
    while (i < n) {
        size_t at = srv_mark_find(s, n, i, OPEN), end;
        ml_buf_append(content, s + i, at - i);
        if (at == n)
            return;
        json_t *o = json_at(s, n, skip_ws(s, n, at + strlen(OPEN)), &end);
        if (!json_is_object(o) || add_object(t, calls, o)) {
            json_decref(o);
            ml_buf_append(content, s + at, n - at);
            return;
        }
        json_decref(o);
        end = skip_ws(s, n, end);
        if (n - end >= strlen(CLOSE) && !memcmp(s + end, CLOSE, strlen(CLOSE)))
            end += strlen(CLOSE);
        i = skip_ws(s, n, end);
    }
}

/* A parameter's value in the XML format: JSON where it is a number,
 * boolean, null, object or array, else the text as a string (the
 * templates write strings raw, the rest with tojson). */
static json_t *xml_value_of(const char *s, size_t n)
{
    if (n && s[0] == '\n')
        s++, n--;
    if (n && s[n - 1] == '\n')
        n--;
    json_error_t err;
    json_t *v = json_loadb(s, n, JSON_DECODE_ANY, &err);
    if (v && !json_is_string(v))
        return v;
    json_decref(v);
    return json_stringn(s, n);
}

/* <tool_call><function=N><parameter=K>V</parameter>...</function></tool_call>,
 * any number, the text around them content. */
static void parse_xml(const srv_tool_split *t, const char *s, size_t n, ml_buf *content,
                      json_t *calls)
{
    static const char OPEN[] = "<tool_call>", FN[] = "<function=", PARAM[] = "<parameter=",
                      END_PARAM[] = "</parameter>", END_FN[] = "</function>",
                      CLOSE[] = "</tool_call>";
    size_t i = 0;
    while (i < n) {
        size_t at = srv_mark_find(s, n, i, OPEN);
        ml_buf_append(content, s + i, at - i);
        if (at == n)
            return;
        size_t j = skip_ws(s, n, at + strlen(OPEN)), name_end = srv_mark_find(s, n, j, ">");
        json_t *args = json_object(), *name = NULL;
        int ok = args && n - j > strlen(FN) && !memcmp(s + j, FN, strlen(FN)) && name_end < n &&
                 (name = json_stringn(s + j + strlen(FN), name_end - j - strlen(FN)));
        for (j = ok ? skip_ws(s, n, name_end + 1) : n;
             ok && n - j > strlen(PARAM) && !memcmp(s + j, PARAM, strlen(PARAM));) {
            size_t key_end = srv_mark_find(s, n, j, ">"), v_end = srv_mark_find(s, n, key_end, END_PARAM);
            char key[128];
            ok = key_end < n && v_end < n;
            if (ok) {
                size_t kl = key_end - j - strlen(PARAM);
                snprintf(key, sizeof key, "%.*s", (int)(kl < 127 ? kl : 127), s + j + strlen(PARAM));
                ok = !json_object_set_new(args, key, xml_value_of(s + key_end + 1,
                                                                  v_end - key_end - 1));
                j = skip_ws(s, n, v_end + strlen(END_PARAM));
            }
        }
        ok = ok && n - j >= strlen(END_FN) && !memcmp(s + j, END_FN, strlen(END_FN)) &&
             !add_call(t, calls, name, args, NULL);
        json_decref(args), json_decref(name);
        if (!ok) {
            ml_buf_append(content, s + at, n - at);
            return;
        }
        j = skip_ws(s, n, j + strlen(END_FN));
        if (n - j >= strlen(CLOSE) && !memcmp(s + j, CLOSE, strlen(CLOSE)))
            j += strlen(CLOSE);
        i = skip_ws(s, n, j);
    }
}

/* key="value" or key=number pairs of name.call(...), as an object. */
static json_t *call_kwargs(const char *s, size_t n)
{
    json_t *o = json_object();
    size_t i = 0;
    while (o && i < n) {
        i = skip_ws(s, n, i);
        size_t k = i, end;
        while (i < n && s[i] != '=')
            i++;
        if (i == n || i == k)
            break;
        char key[128];
        snprintf(key, sizeof key, "%.*s", (int)(i - k) < 127 ? (int)(i - k) : 127, s + k);
        json_t *v = json_at(s, n, i + 1, &end);
        if (!v || json_object_set_new(o, key, v))
            break;
        i = skip_ws(s, n, end);
        if (i < n && s[i] == ',')
            i++;
    }
    if (o && i < n) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* Llama 3.x: the reply is one call {"name", "parameters"}, or a built-in
 * call after <|python_tag|>: JSON, or name.call(key="value", ...). */
static void parse_llama3(const srv_tool_split *t, const char *s, size_t n, ml_buf *content,
                         json_t *calls)
{
    static const char TAG[] = "<|python_tag|>";
    size_t i = skip_ws(s, n, 0), end;
    size_t tag = srv_mark_find(s, n, 0, TAG);
    if (tag < n)
        i = skip_ws(s, n, tag + strlen(TAG));
    json_t *o = i < n && s[i] == '{' ? json_at(s, n, i, &end) : NULL;
    if (json_is_object(o) && !add_object(t, calls, o) && skip_ws(s, n, end) == n) {
        ml_buf_append(content, s, tag < n ? tag : 0);
        json_decref(o);
        return;
    }
    json_decref(o);
    json_array_clear(calls);
    size_t dot = srv_mark_find(s, n, i, ".call("), close = n;
    while (close > i && s[close - 1] != ')')
        close--;
    if (tag < n && dot < n && close > dot + 6) {
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)(dot - i) < 127 ? (int)(dot - i) : 127, s + i);
        json_t *args = call_kwargs(s + dot + 6, close - 1 - (dot + 6)), *nm = json_string(name);
        int ok = args && nm && !add_call(t, calls, nm, args, NULL);
        json_decref(args), json_decref(nm);
        if (ok) {
            ml_buf_append(content, s, tag);
            return;
        }
    }
    ml_buf_append(content, s, n);
}

/* [TOOL_CALLS][{...}, ...] or [TOOL_CALLS]name[ARGS]{...}... */
static void parse_mistral(const srv_tool_split *t, const char *s, size_t n, ml_buf *content,
                          json_t *calls)
{
    static const char TAG[] = "[TOOL_CALLS]", ARGS[] = "[ARGS]", ID[] = "[CALL_ID]";
    size_t at = srv_mark_find(s, n, 0, TAG), i = at, end = at;
    ml_buf_append(content, s, at);
    while (i < n && n - i >= strlen(TAG) && !memcmp(s + i, TAG, strlen(TAG))) {
        i = skip_ws(s, n, i + strlen(TAG));
        if (t->format == SRV_TOOLS_MISTRAL) {
            json_t *list = json_at(s, n, i, &end), *o;
            size_t k;
            int bad = !json_is_array(list) || !json_array_size(list);
            json_array_foreach(list, k, o) bad = bad || add_object(t, calls, o);
            json_decref(list);
            if (bad)
                break;
        } else {
            size_t a = srv_mark_find(s, n, i, ARGS), b = srv_mark_find(s, a, i, "["), c = srv_mark_find(s, a, i, ID);
            char name[128], id[16];
            snprintf(name, sizeof name, "%.*s", (int)(b - i) < 127 ? (int)(b - i) : 127, s + i);
            c += c < a ? strlen(ID) : 0; /* Mistral Small 3.2's [CALL_ID]id */
            snprintf(id, sizeof id, "%.*s", (int)(a - c) < 15 ? (int)(a - c) : 15, s + c);
            json_t *args = a < n ? json_at(s, n, a + strlen(ARGS), &end) : NULL;
            json_t *nm = json_string(name), *jid = c < a ? json_string(id) : NULL;
            int bad = a == n || (b < a && c == a) || !json_is_object(args) ||
                      add_call(t, calls, nm, args, jid);
            json_decref(args), json_decref(nm), json_decref(jid);
            if (bad)
                break;
        }
        i = skip_ws(s, n, end);
    }
    if (i < n) { /* not calls after all: all of it stays text */
        json_array_clear(calls);
        ml_buf_append(content, s + at, n - at);
    }
}

/* Harmony (gpt-oss), followed as it comes: messages
 * <|channel|>C[ to=functions.N]...<|message|>B, each ended by <|end|>,
 * <|call|>, <|return|>, the next <|start|> or <|channel|>, or the text's
 * end; analysis is reasoning, a commentary to functions.N a call, any
 * other channel content; text before the first channel is content. */
enum { H_START, H_HEADER, H_BODY, H_BETWEEN };
enum { TO_CONTENT, TO_REASONING, TO_CALL };

static const char H_CHANNEL[] = "<|channel|>", H_MESSAGE[] = "<|message|>";
static const char *const H_ENDS[] = {"<|end|>", "<|call|>", "<|return|>", "<|start|>",
                                     "<|channel|>"};

/* Drops the first n held bytes. */
static void drop(srv_tool_split *t, size_t n)
{
    if (!n) /* (the buffer may not be there yet) */
        return;
    memmove(t->hold.data, t->hold.data + n, t->hold.len - n);
    t->hold.len -= n;
}

/* A message's header decided: where its body goes. */
static void harmony_header(srv_tool_split *t, const char *h, size_t n)
{
    static const char TO[] = "to=functions.";
    size_t to = srv_mark_find(h, n, 0, TO);
    t->h_to = TO_CONTENT;
    if (to < n) {
        size_t a = to + strlen(TO), b = a;
        while (b < n && !strchr(" <", h[b]))
            b++;
        snprintf(t->h_name, sizeof t->h_name, "%.*s", (int)(b - a < 127 ? b - a : 127), h + a);
        t->h_to = TO_CALL;
    } else if (srv_mark_find(h, n, 0, "analysis") < n) {
        t->h_to = TO_REASONING;
    }
}

/* A call's body ended: a call when it parses, else content. */
static ml_status harmony_call(srv_tool_split *t, ml_buf *content)
{
    size_t end;
    json_t *args = json_at(t->body.data, t->body.len, skip_ws(t->body.data, t->body.len, 0), &end);
    json_t *name = json_string(t->h_name);
    ml_status st = ML_OK;
    if ((!t->calls && !(t->calls = json_array())) ||
        add_call(t, t->calls, name, args, NULL))
        st = t->body.len ? ml_buf_append(content, t->body.data, t->body.len) : ML_OK;
    json_decref(args), json_decref(name);
    t->body.len = 0;
    return st;
}

/* Body text out to where it goes. */
static ml_status harmony_out(srv_tool_split *t, size_t n, ml_buf *content, ml_buf *reasoning)
{
    ml_buf *to = t->h_to == TO_CALL ? &t->body : t->h_to == TO_REASONING ? reasoning : content;
    ml_status st = n ? ml_buf_append(to, t->hold.data, n) : ML_OK;
    if (!st)
        drop(t, n);
    return st;
}

/* The earliest message end in h[0..n) (*which: its index), or n. */
static size_t harmony_end(const char *h, size_t n, size_t *which)
{
    size_t best = n;
    for (size_t k = 0; k < sizeof H_ENDS / sizeof *H_ENDS; k++) {
        size_t e = srv_mark_find(h, n, 0, H_ENDS[k]);
        if (e < best)
            best = e, *which = k;
    }
    return best;
}

/* The longest end of h[0..n) that may begin a message end. */
static size_t harmony_partial(const char *h, size_t n)
{
    size_t most = 0;
    for (size_t k = 0; k < sizeof H_ENDS / sizeof *H_ENDS; k++) {
        size_t p = srv_mark_partial(h, n, H_ENDS[k]);
        most = p > most ? p : most;
    }
    return most;
}

/* One decision on the held text; 1 when another may follow.  end: no
 * more text comes. */
static int harmony_step(srv_tool_split *t, int end, ml_buf *content, ml_buf *reasoning,
                        ml_status *st)
{
    const char *h = t->hold.data;
    size_t n = t->hold.len, at, which = 0;
    switch (t->h_state) {
    case H_START:
    case H_BETWEEN:
        at = srv_mark_find(h, n, 0, H_CHANNEL);
        if (at == n) { /* before the first channel: content; between: the role */
            size_t keep = end ? 0 : srv_mark_partial(h, n, H_CHANNEL);
            if (t->h_state == H_START)
                *st = ml_buf_append(content, h, n - keep);
            drop(t, n - keep);
            return 0;
        }
        if (t->h_state == H_START && at)
            *st = ml_buf_append(content, h, at);
        drop(t, at + strlen(H_CHANNEL));
        t->h_state = H_HEADER;
        return 1;
    case H_HEADER:
        at = srv_mark_find(h, n, 0, H_MESSAGE);
        if (at == n) {
            if (end) { /* a header that never ended: kept as it was */
                *st = ml_buf_append(content, H_CHANNEL, strlen(H_CHANNEL));
                if (!*st)
                    *st = ml_buf_append(content, h, n), drop(t, n);
            }
            return 0;
        }
        harmony_header(t, h, at);
        drop(t, at + strlen(H_MESSAGE));
        t->h_state = H_BODY;
        return 1;
    default: /* H_BODY */
        at = harmony_end(h, n, &which);
        if (at == n) {
            *st = harmony_out(t, end ? n : n - harmony_partial(h, n), content, reasoning);
            if (!*st && end && t->h_to == TO_CALL)
                *st = harmony_call(t, content);
            return 0;
        }
        *st = harmony_out(t, at, content, reasoning);
        if (!*st && t->h_to == TO_CALL)
            *st = harmony_call(t, content);
        /* <|channel|> (the last end) opens the next message's header at once */
        drop(t, strlen(H_ENDS[which]));
        t->h_state = which == sizeof H_ENDS / sizeof *H_ENDS - 1 ? H_HEADER : H_BETWEEN;
        return !*st;
    }
}

static ml_status harmony_put(srv_tool_split *t, int end, ml_buf *content, ml_buf *reasoning)
{
    ml_status st = ML_OK;
    while (harmony_step(t, end, content, reasoning, &st) && !st)
        ;
    return st;
}

/* Our JSON reply: {"tool_call": C}, {"tool_calls": [C...]} or
 * {"response": TEXT}; anything else is content. */
static void parse_generic(const srv_tool_split *t, const char *s, size_t n, ml_buf *content,
                          json_t *calls)
{
    size_t end;
    json_t *o = json_at(s, n, skip_ws(s, n, 0), &end), *one, *many, *text, *c;
    size_t k;
    int ok = json_is_object(o) && skip_ws(s, n, end) == n;
    if (ok && (one = json_object_get(o, "tool_call")))
        ok = !add_object(t, calls, one);
    else if (ok && json_is_array(many = json_object_get(o, "tool_calls")))
        json_array_foreach(many, k, c) ok = ok && !add_object(t, calls, c);
    else if (ok && json_is_string(text = json_object_get(o, "response")))
        ml_buf_append(content, json_string_value(text), json_string_length(text));
    else
        ok = 0;
    json_decref(o);
    if (!ok) {
        json_array_clear(calls);
        ml_buf_append(content, s, n);
    }
}

/* ------------------------------------------------------------------------
 * The split, whole or streamed
 * ------------------------------------------------------------------------ */
void srv_tool_split_init(srv_tool_split *t, srv_tool_format format, int active, uint64_t seed)
{
    memset(t, 0, sizeof *t);
    t->format = format, t->active = active, t->seed = seed;
}

void srv_tool_split_free(srv_tool_split *t)
{
    ml_buf_free(&t->hold);
    ml_buf_free(&t->body);
    json_decref(t->calls);
}

/* Where a call begins in the format's text, for the streaming split. */
static const char *marker(srv_tool_format f)
{
    switch (f) {
    case SRV_TOOLS_HERMES:
    case SRV_TOOLS_XML: return "<tool_call>";
    case SRV_TOOLS_LLAMA3: return "<|python_tag|>";
    case SRV_TOOLS_MISTRAL:
    case SRV_TOOLS_MISTRAL_ARGS: return "[TOOL_CALLS]";
    default: return NULL; /* the whole reply is held */
    }
}

ml_status srv_tool_split_put(srv_tool_split *t, const char *s, size_t n, ml_buf *content,
                             ml_buf *reasoning)
{
    if (!t->active)
        return n ? ml_buf_append(content, s, n) : ML_OK;
    if (n && ml_buf_append(&t->hold, s, n))
        return ML_E_NOMEM;
    if (t->format == SRV_TOOLS_GPT_OSS)
        return harmony_put(t, 0, content, reasoning);
    const char *tag = marker(t->format), *h = t->hold.data;
    size_t len = t->hold.len;
    if (t->holding || !tag)
        return ML_OK;
    /* Llama 3 writes a call as the reply's first text: held from its '{' */
    size_t first = skip_ws(h, len, 0);
    if (t->format == SRV_TOOLS_LLAMA3 && !t->seen && (first == len || h[first] == '{')) {
        t->holding = first < len;
        return ML_OK;
    }
    t->seen = 1;
    size_t at = srv_mark_find(h, len, 0, tag), out = at < len ? at : len - srv_mark_partial(h, len, tag);
    ml_status st = out ? ml_buf_append(content, h, out) : ML_OK;
    if (!st && out) {
        memmove(t->hold.data, h + out, len - out);
        t->hold.len = len - out;
    }
    if (!st)
        t->holding = at < len;
    return st;
}

ml_status srv_tool_split_end(srv_tool_split *t, ml_buf *content, ml_buf *reasoning,
                             json_t **calls)
{
    *calls = NULL;
    if (t->active && t->format == SRV_TOOLS_GPT_OSS) {
        ml_status st = harmony_put(t, 1, content, reasoning);
        if (!st && json_array_size(t->calls))
            *calls = t->calls, t->calls = NULL;
        return st;
    }
    if (!t->active || !t->hold.len)
        return ML_OK;
    json_t *list = json_array();
    if (!list)
        return ML_E_NOMEM;
    const char *s = t->hold.data;
    size_t n = t->hold.len;
    switch (t->format) {
    case SRV_TOOLS_HERMES: parse_hermes(t, s, n, content, list); break;
    case SRV_TOOLS_LLAMA3: parse_llama3(t, s, n, content, list); break;
    case SRV_TOOLS_MISTRAL:
    case SRV_TOOLS_MISTRAL_ARGS: parse_mistral(t, s, n, content, list); break;
    case SRV_TOOLS_GPT_OSS: break; /* followed as it came */
    case SRV_TOOLS_GENERIC: parse_generic(t, s, n, content, list); break;
    case SRV_TOOLS_XML: parse_xml(t, s, n, content, list); break;
    }
    t->hold.len = 0;
    if (json_array_size(list))
        *calls = list;
    else
        json_decref(list);
    return ML_OK;
}
