/* chat.c - ml-run --chat: the prompt as one user turn through the model's
 * chat template, or a conversation read a turn at a time.  Each turn
 * renders the whole conversation again (as the model's makers render it)
 * and evaluates only what differs from the tokens the context already
 * holds, so earlier turns cost nothing twice.  In a conversation Ctrl-C
 * ends the reply, not the program. */
#include "chat.h"
#include "cli.h"
#include "input.h"
#include "run.h"
#include "signals.h"
#include "text.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct convo {
    ml_chat_message *m; /* contents owned */
    size_t n, cap;
    ml_jinja *tpl;
    const char *tpl_name; /* for messages: the file or the tokenizer */
} convo;

static int add_message(convo *c, const char *role, const char *text, size_t len)
{
    ml_chat_message *m = ml_array_reserve(c->m, &c->cap, c->n + 1, sizeof *m);
    if (!m)
        return cli_fail(NULL, ML_E_NOMEM, NULL);
    c->m = m;
    char *copy = malloc(len + 1);
    if (!copy)
        return cli_fail(NULL, ML_E_NOMEM, NULL);
    memcpy(copy, text, len);
    copy[len] = 0;
    c->m[c->n++] = (ml_chat_message){role, copy, len};
    return 0;
}

static void convo_free(convo *c)
{
    for (size_t i = 0; i < c->n; i++)
        free((char *)c->m[i].content);
    free(c->m);
    ml_jinja_free(c->tpl);
}

/* A failed render or encoding: what the template or a message refused. */
static int turn_failed(const convo *c, ml_status s, const ml_error *err)
{
    cli_fail(strcmp(err->field, "messages") == 0 ? NULL : c->tpl_name, s, err);
    return s == ML_E_INVAL ? EXIT_INVALID : cli_exit_status(s);
}

/* The conversation as ids: rendered with the assistant's turn opened. */
static int conversation_ids(run *r, const convo *c, ml_ids *ids)
{
    ml_chat_prompt p;
    ml_error err;
    ml_status s = ml_chat_render(c->tpl, c->m, c->n, 1, r->mlt, &p, &err);
    if (!s && r->o.verbose)
        fprintf(stderr, "ml-run: the prompt as the template writes it:\n%s\n", p.text);
    if (!s)
        s = ml_chat_encode(r->tok, &p, ids, &err);
    ml_chat_prompt_free(&p);
    return s ? turn_failed(c, s, &err) : 0;
}

/* Keeps the tokens the context holds that the new prompt starts with
 * (at least one must be evaluated, for its logits); the rest of ids
 * follows them in r->ids. */
static int reuse_prefix(run *r, const ml_ids *ids)
{
    size_t held = ml_ctx_pos(r->ctx), keep = 0;
    while (keep < held && keep < ids->n && r->ids[keep] == ids->v[keep])
        keep++;
    if (keep == ids->n)
        keep--;
    keep = ml_ctx_seq_keep(r->ctx, 0, (uint32_t)keep);
    r->n_ids = keep;
    for (size_t i = keep; i < ids->n; i++)
        if (run_push_id(r, ids->v[i]) < 0)
            return cli_fail(NULL, ML_E_NOMEM, NULL);
    r->n_reused = keep;
    return 0;
}

/* One turn: the assistant's reply to the conversation so far, printed
 * and added to it. */
static int turn(run *r, convo *c)
{
    ml_ids ids = {0};
    int e = conversation_ids(r, c, &ids);
    if (!e && ids.n == 0)
        e = cli_failf(NULL, ML_E_INVAL, "the template renders nothing");
    if (!e && ids.n >= ml_ctx_n_ctx(r->ctx))
        e = cli_failf(NULL, ML_E_INVAL,
                      "the conversation has %zu tokens; the context holds %u (raise --ctx, at "
                      "most max_seq %u)",
                      ids.n, ml_ctx_n_ctx(r->ctx), r->h->max_seq);
    if (!e)
        e = reuse_prefix(r, &ids);
    ml_ids_free(&ids);
    if (e)
        return e;
    r->n_prompt = r->n_ids - r->n_reused;
    r->n_gen = 0;
    r->n_turns++;
    double t0 = cli_seconds();
    e = run_eval(r, r->n_reused, r->n_ids);
    if (!e)
        e = run_draft_prompt(r);
    r->t_prompt = cli_seconds() - t0;
    if (!e && !cli_stop_signal())
        e = run_generate(r);
    if (!e)
        e = add_message(c, "assistant", r->reply.data ? r->reply.data : "", r->reply.len);
    if (!e && !r->o.ids)
        fputc('\n', stdout), fflush(stdout); /* a reply is a message: it ends its line */
    return e;
}

/* The prompt of -p, -f or standard input, as one user turn. */
static int prompt_turn(run *r, convo *c)
{
    char *text = NULL;
    size_t len = 0;
    int e = 0;
    if (r->o.prompt)
        len = strlen(r->o.prompt);
    else
        e = cli_read_text(r->o.file ? r->o.file : "-", &text, &len);
    if (!e)
        e = add_message(c, "user", r->o.prompt ? r->o.prompt : text, len);
    free(text);
    return e ? e : turn(r, c);
}

/* Reads a turn from standard input: a line, continued by a final '\'.
 * 1 at the end of the input, /exit, or an error or signal (reported by
 * the caller through cli_stop_signal). */
static int read_turn(int tty, char **line, size_t *cap, ml_buf *turn_text)
{
    turn_text->len = 0;
    for (;;) {
        if (tty)
            fputs(turn_text->len ? ". " : "> ", stderr);
        ssize_t n = getline(line, cap, stdin);
        if (n < 0)
            return 1;
        if (n && (*line)[n - 1] == '\n')
            (*line)[--n] = 0;
        int more = n && (*line)[n - 1] == '\\';
        if (ml_buf_reserve(turn_text, (size_t)n + 2))
            return 1;
        char *t = turn_text->data;
        memcpy(t + turn_text->len, *line, (size_t)n - (size_t)more);
        turn_text->len += (size_t)n - (size_t)more;
        t[turn_text->len] = 0;
        if (more) {
            t[turn_text->len++] = '\n';
            continue;
        }
        if (strcmp(t, "/exit") == 0)
            return 1;
        if (turn_text->len)
            return 0;
    }
}

/* The conversation: a turn, its reply, its timings, until the end. */
static int conversation(run *r, convo *c)
{
    int tty = isatty(STDIN_FILENO), e = 0;
    char *line = NULL;
    ml_buf text = {0};
    size_t cap = 0;
    if (tty && !r->o.quiet)
        fputs("ml-run: chat; /exit or end of input (Ctrl-D) to end, Ctrl-C to stop a reply, "
              "'\\' at a line's end to go on\n",
              stderr);
    while (!e && read_turn(tty, &line, &cap, &text) == 0) {
        e = add_message(c, "user", text.data, text.len);
        if (!e)
            e = turn(r, c);
        if (!e && cli_take_interrupt())
            fputs(tty ? "" : "ml-run: reply stopped\n", stderr);
        if (!e && !cli_stop_signal())
            run_timings(r);
        if (cli_stop_signal())
            break;
    }
    free(line);
    ml_buf_free(&text);
    return e;
}

int chat(run *r)
{
    convo c = {0};
    char *beside = r->o.tok ? NULL : cli_tokenizer_beside(r->o.model);
    const char *tok = r->o.tok ? r->o.tok : beside ? beside : r->o.model;
    int e = cli_chat_template(tok, r->mlt, r->o.chat_template, r->o.chat_template_file, &c.tpl);
    c.tpl_name = r->o.chat_template_file ? r->o.chat_template_file : tok;
    if (!e && r->o.system)
        e = add_message(&c, "system", r->o.system, strlen(r->o.system));
    int has_prompt = r->o.prompt || r->o.file;
    int talk = r->o.interactive || (!has_prompt && isatty(STDIN_FILENO));
    if (!e && (has_prompt || !talk))
        e = prompt_turn(r, &c);
    if (!e && talk) {
        if (has_prompt && !cli_take_interrupt())
            run_timings(r);
        e = conversation(r, &c);
        r->timings_shown = 1;
    }
    convo_free(&c);
    free(beside);
    return e;
}
