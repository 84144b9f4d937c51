/* tools.h - tool calling: how the chat template writes a tool call
 * (found once by rendering a probe conversation through it), the
 * template variables a request with tools needs, the grammar that makes
 * a required or named call always parse, and the model's text split into
 * content, reasoning and OpenAI tool_calls, whole or streamed by one
 * state machine (so a stream's deltas add up to the whole answer). */
#ifndef ML_SERVE_TOOLS_H
#define ML_SERVE_TOOLS_H

#include "request.h"

#include <mlcore.h>

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

/* The ways templates write a call, as the model is trained to. */
typedef enum srv_tool_format {
    SRV_TOOLS_GENERIC,      /* none of its own: we describe the tools and a JSON reply */
    SRV_TOOLS_HERMES,       /* <tool_call>{"name": N, "arguments": A}</tool_call> */
    SRV_TOOLS_LLAMA3,       /* {"name": N, "parameters": A}, or after <|python_tag|> */
    SRV_TOOLS_MISTRAL,      /* [TOOL_CALLS][{"name": N, "arguments": A, "id": I}, ...] */
    SRV_TOOLS_MISTRAL_ARGS, /* [TOOL_CALLS]N[ARGS]A */
    SRV_TOOLS_GPT_OSS,      /* harmony: <|channel|>commentary to=functions.N ...<|message|>A */
    SRV_TOOLS_XML           /* <tool_call><function=N><parameter=K>V</parameter>...
                             * (Qwen3-Coder, Qwen 3.5, Nemotron 3) */
} srv_tool_format;
#define SRV_TOOLS_LAST SRV_TOOLS_XML

/* What the template does with tools, from the probe. */
typedef struct srv_tool_caps {
    srv_tool_format format;
    int renders_tools; /* it writes the tools' descriptions itself */
    int tool_role;     /* it renders "tool" messages (else they become user messages) */
    int string_args;   /* it writes arguments given as a JSON string unchanged (else
                        * they are given as objects) */
} srv_tool_caps;

/* Renders the probe conversations through t (at startup). */
void srv_tools_probe(const ml_jinja *t, srv_tool_caps *c);
/* "generic", "hermes", ... for the log and the tests. */
const char *srv_tool_format_name(srv_tool_format f);

/* The split of a reply is needed: the request has tools to call, or the
 * template's format has channels (gpt-oss) whose reasoning is split off
 * (reasoning: --reasoning-format is not none). */
int srv_tools_active(const srv_tool_caps *c, const srv_request *q, int reasoning);

/* Sets vars' "messages" (q's, with tool calls and results as the
 * template takes them) and, when tools are on, "tools"; 0, or -1 when
 * memory ran out. */
int srv_tools_vars(const srv_tool_caps *c, const srv_request *q, json_t *vars);

/* The grammar a request with tools is held to (a new text: a required or
 * named call in the template's format; with the generic format, a reply
 * of our JSON), NULL with e->status 0 when none is needed, NULL with e
 * filled for a tool's bad parameters schema (400, param "tools") or
 * memory (500). */
char *srv_tools_grammar(const srv_tool_caps *c, const srv_request *q, srv_error *e);

/* A reply's text split as it comes: content passes through until a call
 * may begin; from there the text is held and parsed at the end (gpt-oss's
 * channels are followed as they come). */
typedef struct srv_tool_split {
    srv_tool_format format;
    int active;     /* 0: everything is content */
    int holding;    /* private: a call (or a whole JSON reply) began */
    int seen;       /* private: some text that is not white space came */
    ml_buf hold;    /* private */
    uint64_t seed;  /* the calls' ids are made from it */
    int h_state, h_to;  /* private: gpt-oss's message and where its body goes */
    char h_name[128];   /* private: the function a commentary is to */
    ml_buf body;        /* private: that call's arguments so far */
    json_t *calls;      /* private: calls found as the text came */
} srv_tool_split;

void srv_tool_split_init(srv_tool_split *t, srv_tool_format format, int active, uint64_t seed);
/* Feeds s[0..n); appends the content and reasoning that are decided. */
ml_status srv_tool_split_put(srv_tool_split *t, const char *s, size_t n, ml_buf *content,
                             ml_buf *reasoning);
/* The end: the held text parsed; content and reasoning appended, and
 * *calls a new array of OpenAI tool calls (NULL when there are none). */
ml_status srv_tool_split_end(srv_tool_split *t, ml_buf *content, ml_buf *reasoning,
                             json_t **calls);
void srv_tool_split_free(srv_tool_split *t);

#endif
