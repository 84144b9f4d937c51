/* mlt-dump - look into .mlt tokenizers (mlt(5)): a header summary by
 * default (with the end-of-generation ids and the chat templates); the
 * vocabulary, the merges, a chat template's text, encoding text to ids
 * and decoding ids to text on request, as text for people and pipes or
 * --json for scripts. */
#include "chat.h"
#include "cli.h"
#include "input.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

enum { OPT_VOCAB, OPT_MERGES, OPT_ENCODE, OPT_DECODE, OPT_LINES, OPT_JSON, OPT_BOS, OPT_NO_BOS,
       OPT_SKIP, OPT_KEEP_SPACE, OPT_PRINT_TEMPLATE, OPT_RENDER, OPT_TEMPLATE, OPT_TEMPLATE_NAME,
       OPT_NO_GEN, OPT_IDS, OPT_NULL };

static const cli_opt opts[] = {
    {OPT_VOCAB, 'v', "vocab", NULL, "print every token: id, attr, piece"},
    {OPT_MERGES, 'm', "merges", NULL, "print every merge: rank, left, right, result"},
    {OPT_ENCODE, 'e', "encode", "TEXT", "print the ids of TEXT (- reads standard input)"},
    {OPT_DECODE, 'd', "decode", NULL, "print the text of the ID operands (or of ids on stdin)"},
    {OPT_LINES, 'l', "lines", NULL, "with --encode: one line of ids per input line"},
    {OPT_NULL, 'z', "null", NULL,
     "with --encode: one line of ids per NUL-terminated input text (texts with newlines)"},
    {OPT_JSON, 'j', "json", NULL, "print JSON for scripts"},
    {OPT_BOS, 0, "bos", NULL, "with --encode: always put the BOS id first"},
    {OPT_NO_BOS, 0, "no-bos", NULL, "with --encode: never put the BOS id first"},
    {OPT_SKIP, 0, "skip-bos-eos", NULL, "with --decode: leave out the BOS and EOS ids"},
    {OPT_KEEP_SPACE, 0, "keep-space", NULL, "with --decode: keep the space of the leading \xe2\x96\x81"},
    {OPT_PRINT_TEMPLATE, 0, "print-template", "NAME",
     "print the chat template NAME (default: the model's own)"},
    {OPT_RENDER, 0, "render", "MESSAGES", "print the chat template rendered for MESSAGES (JSON)"},
    {OPT_TEMPLATE, 0, "template", "FILE", "with --render: this Jinja file, not the model's template"},
    {OPT_TEMPLATE_NAME, 0, "chat-template", "NAME",
     "with --render: the tokenizer's template NAME, or a built-in (chatml, llama3, gemma, ...)"},
    {OPT_NO_GEN, 0, "no-generation-prompt", NULL, "with --render: no assistant turn opened"},
    {OPT_IDS, 0, "ids", NULL,
     "with --render: the ids it encodes to, the messages kept text (as ml-run --chat)"},
};

static const cli cmd = {
    "mlt-dump", "[options] FILE [ID...]",
    "Validate an .mlt tokenizer and print its header, vocabulary or merges,\n"
    "or encode text and decode ids with it.  FILE may be - for standard input.",
    "Examples:\n"
    "  mlt-dump m.mlt                      header summary\n"
    "  mlt-dump --vocab m.mlt | grep hello\n"
    "  echo hi | mlt-dump --encode - m.mlt\n"
    "  mlt-dump --decode m.mlt 9906 1917\n"
    "  mlt-dump --print-template default m.mlt\n"
    "  echo '[{\"role\":\"user\",\"content\":\"Hi\"}]' | mlt-dump --render - m.mlt\n",
    opts, sizeof opts / sizeof opts[0],
};

typedef struct options {
    int vocab, merges, decode, lines, json, bos, skip, keep_space;
    char separator; /* --lines '\n', --null '\0' */
    const char *encode; /* TEXT, "-" or NULL */
    const char *print_template; /* NAME or NULL */
    const char *render, *template_file; /* MESSAGES and --template FILE, or NULL */
    const char *template_name;          /* --chat-template NAME, or NULL */
    int ids;                            /* --render --ids */
    int no_gen;
} options;

static const char *attr_name(unsigned a)
{
    return a == ML_MLT_ADDED ? "added" : a == ML_MLT_BYTE ? "byte" : a == ML_MLT_USER ? "user" : "normal";
}

/* A piece for people: valid UTF-8 as it is, backslash, tab, newline,
 * control and invalid bytes as \\ \t \n \xHH, so every piece reads back
 * unambiguously and stays on one line. */
static void print_piece(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint8_t c = p[i];
        if (c == '\\') {
            fputs("\\\\", stdout);
        } else if (c == '\t') {
            fputs("\\t", stdout);
        } else if (c == '\n') {
            fputs("\\n", stdout);
        } else if (c < 0x20 || c == 0x7f) {
            printf("\\x%02x", c);
        } else if (c < 0x80) {
            putchar(c);
        } else {
            size_t len = c < 0xc2 ? 0 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : c < 0xf5 ? 4 : 0;
            int ok = len && len <= n - i;
            for (size_t k = 1; ok && k < len; k++)
                ok = (p[i + k] & 0xc0) == 0x80;
            if (ok && ((c == 0xe0 && p[i + 1] < 0xa0) || (c == 0xed && p[i + 1] > 0x9f) ||
                       (c == 0xf0 && p[i + 1] < 0x90) || (c == 0xf4 && p[i + 1] > 0x8f)))
                ok = 0;
            /* C1 controls (U+0080..U+009F) are escaped too. */
            if (ok && c == 0xc2 && p[i + 1] < 0xa0)
                ok = 0;
            if (ok) {
                fwrite(p + i, 1, len, stdout);
                i += len - 1;
            } else {
                printf("\\x%02x", c);
            }
        }
    }
}

static void print_hex(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        printf("%02x", p[i]);
}

static void json_token(const ml_mlt *t, uint32_t id)
{
    ml_mlt_token k = ml_mlt_get_token(t, id);
    printf("{\"id\":%u,\"attr\":\"%s\",\"piece\":", id, attr_name(k.attr));
    json_strn(stdout, (const char *)k.bytes, k.len);
    printf(",\"hex\":\"");
    print_hex(k.bytes, k.len);
    printf("\"}");
}

static const char *kind_name(uint32_t kind)
{
    return kind == ML_MLT_KIND_SPM ? "SentencePiece-style BPE" : "byte-level BPE";
}

static const char *pretok_name(const ml_mlt_header *h)
{
    uint32_t f = h->flags;
    if (h->kind == ML_MLT_KIND_SPM)
        return f & ML_MLT_NO_PREFIX ? "none; spaces as \xe2\x96\x81, no prefix"
               : f & ML_MLT_PREFIX_FIRST ? "none; spaces as \xe2\x96\x81, prefix at the start"
                                         : "none; spaces as \xe2\x96\x81, prefix after every added token";
    if (f & ML_MLT_GPT2_REGEX)
        return f & ML_MLT_SPLIT_DIGITS ? "digits split off, then the GPT-2 regex" : "GPT-2 regex";
    if (f & ML_MLT_MARKS_REGEX)
        return "Llama 3 regex with [\\p{L}\\p{M}]+ letters (Qwen3.5)";
    if (f & ML_MLT_O200K_REGEX)
        return f & ML_MLT_SPLIT_DIGITS ? "digits split off, then the o200k regex"
                                       : "o200k regex (case-aware words, gpt-oss)";
    return f & ML_MLT_SINGLE_DIGITS ? "Llama 3 regex with single digits" : "Llama 3 regex";
}

/* c[attr]: normal, added (control), byte, user-defined added. */
static void count_attrs(const ml_mlt *t, uint32_t c[4])
{
    c[0] = c[1] = c[2] = c[3] = 0;
    for (uint32_t i = 0; i < ml_mlt_get_header(t)->n_vocab; i++)
        c[ml_mlt_get_token(t, i).attr]++;
}

static void print_special(const char *name, const ml_mlt *t, ml_token id, const char *meaning)
{
    printf("  %-22s %-15d ", name, (int)ml_mlt_id_i32(id));
    if (id != ML_TOKEN_NONE) {
        ml_mlt_token k = ml_mlt_get_token(t, id);
        print_piece(k.bytes, k.len);
    } else {
        printf("none");
    }
    printf(" (%s)\n", meaning);
}

/* The end-of-generation ids and the chat templates (mlt(5) CHAT SECTION). */
static void print_chat(const ml_mlt *t)
{
    printf("  %-22s %-15u ", "end of generation", ml_mlt_n_eog(t));
    for (uint32_t i = 0; i < ml_mlt_n_eog(t); i++) {
        ml_mlt_token k = ml_mlt_get_token(t, ml_mlt_eog(t, i));
        printf("%s%u ", i ? ", " : "", ml_mlt_eog(t, i));
        print_piece(k.bytes, k.len);
    }
    printf("%s\n", ml_mlt_n_eog(t) ? "" : "none");
    printf("  %-22s %-15u ", "chat templates", ml_mlt_n_templates(t));
    for (uint32_t i = 0; i < ml_mlt_n_templates(t); i++) {
        ml_mlt_template k = ml_mlt_get_template(t, i);
        printf("%s%.*s (%u bytes)", i ? ", " : "", (int)k.name_len, k.name, k.len);
    }
    printf("%s\n", ml_mlt_n_templates(t) ? "" : "none");
}

static void json_chat(const ml_mlt *t)
{
    printf(",\"eog\":[");
    for (uint32_t i = 0; i < ml_mlt_n_eog(t); i++) {
        printf("%s", i ? "," : "");
        json_token(t, ml_mlt_eog(t, i));
    }
    printf("],\"templates\":[");
    for (uint32_t i = 0; i < ml_mlt_n_templates(t); i++) {
        ml_mlt_template k = ml_mlt_get_template(t, i);
        printf("%s{\"name\":", i ? "," : "");
        json_strn(stdout, k.name, k.name_len);
        printf(",\"bytes\":%u}", k.len);
    }
    printf("]");
}

/* The text of a chat template, as it is (JSON: its name and text). */
static int print_template(const char *path, const ml_mlt *t, const char *name, int json)
{
    ml_mlt_template k;
    if (!ml_mlt_find_template(t, name, &k)) {
        cli_warn(path, "ML_E_INVAL: no chat template named '%s' (%s)", name,
                 ml_mlt_n_templates(t) ? "mlt-dump FILE lists them" : "the tokenizer has none");
        return EXIT_INVALID;
    }
    if (json) {
        printf("{\"name\":");
        json_strn(stdout, k.name, k.name_len);
        printf(",\"text\":");
        json_strn(stdout, k.text, k.len);
        printf("}\n");
    } else {
        fwrite(k.text, 1, k.len, stdout);
    }
    return EXIT_OK;
}

/* A special token's piece as a JSON string ("" when there is none). */
static void json_special(FILE *f, const ml_mlt *t, ml_token id)
{
    ml_mlt_token k = id != ML_TOKEN_NONE ? ml_mlt_get_token(t, id) : (ml_mlt_token){NULL, 0, 0};
    json_strn(f, k.len ? (const char *)k.bytes : "", k.len);
}

/* The variables of a render: MESSAGES (an array of messages, or an object
 * with "messages" and any other variables, which win over ours), the
 * generation prompt, BOS and EOS, as one JSON object in a new string. */
static char *render_vars(const ml_mlt *t, const char *msgs, size_t len, int gen, size_t *out_len,
                         int64_t *shift)
{
    const ml_mlt_header *h = ml_mlt_get_header(t);
    size_t i = strspn(msgs, " \t\r\n");
    char *buf = NULL;
    FILE *f = open_memstream(&buf, out_len);
    if (!f)
        return NULL;
    fprintf(f, "{\"add_generation_prompt\":%s,\"bos_token\":", gen ? "true" : "false");
    json_special(f, t, h->bos);
    fputs(",\"eos_token\":", f);
    json_special(f, t, h->eos);
    if (i < len && msgs[i] == '{') { /* its own members after ours */
        size_t j = i + 1 + strspn(msgs + i + 1, " \t\r\n");
        fputs(j < len && msgs[j] == '}' ? "" : ",", f);
        fflush(f);
        *shift = (int64_t)ftello(f) - (int64_t)(i + 1);
        fwrite(msgs + i + 1, 1, len - i - 1, f);
    } else {
        fputs(",\"messages\":", f);
        fflush(f);
        *shift = (int64_t)ftello(f);
        fwrite(msgs, 1, len, f);
        fputc('}', f);
    }
    if (fclose(f)) {
        free(buf);
        return NULL;
    }
    return buf;
}

/* The library's message reads "vars (offset N): ..."; N moves back by
 * shift, to count from the start of the messages' file. */
static void shift_offset(ml_error *err, int64_t shift)
{
    const char *rest = strstr(err->msg, "): ");
    char msg[sizeof err->msg];
    if (!rest || strncmp(err->msg, "vars (offset ", 13) != 0)
        return;
    err->offset -= shift;
    snprintf(msg, sizeof msg, "vars (offset %lld)%s", (long long)err->offset, rest + 1);
    memcpy(err->msg, msg, sizeof msg);
}

static void print_id_list(const ml_ids *ids, int json)
{
    printf(json ? "{\"ids\":[" : "");
    for (size_t i = 0; i < ids->n; i++)
        printf("%s%u", i ? (json ? "," : " ") : "", ids->v[i]);
    printf(json ? "]}\n" : "\n");
}

/* --render --ids: the ids ml-run --chat evaluates, the messages' text
 * kept text (no control token comes from a message). */
static int print_chat_ids(const char *path, const ml_mlt *t, const ml_chat_prompt *p, int json)
{
    ml_tok *k;
    ml_ids ids = {0};
    ml_error err;
    ml_status s = ml_tok_new(t, &k, &err);
    if (s)
        return cli_fail(path, s, &err);
    if ((s = ml_chat_encode(k, p, &ids, &err)))
        cli_fail(path, s, &err);
    else
        print_id_list(&ids, json);
    ml_ids_free(&ids);
    ml_tok_free(k);
    return s == ML_E_INVAL ? EXIT_INVALID : cli_exit_status(s);
}

/* --render: the conversation as the model's template writes it, exactly
 * the text a chat would encode. */
static int render(const char *path, const ml_mlt *t, const options *o)
{
    char *msgs = NULL, *vars = NULL;
    size_t msgs_len, vars_len;
    int64_t shift = 0; /* where the messages' bytes lie in vars */
    const char *tpl_name = o->template_file ? o->template_file
                           : o->template_name && !ml_mlt_find_template(t, o->template_name, NULL)
                               ? o->template_name
                               : path;
    ml_jinja *j = NULL;
    ml_error err;
    int rc = cli_chat_template(path, t, o->template_name, o->template_file, &j);
    if (!rc)
        rc = cli_read_text(o->render, &msgs, &msgs_len);
    if (!rc && !(vars = render_vars(t, msgs, msgs_len, !o->no_gen, &vars_len, &shift)))
        rc = cli_fail(NULL, ML_E_NOMEM, NULL);
    ml_status s = ML_OK;
    ml_chat_prompt p = {0};
    if (!rc && (s = ml_chat_render_json(j, vars, vars_len, &p, &err))) {
        /* the messages are what the template refused, or could not read:
         * a JSON error's offset is then one in the messages' file */
        int in_vars = strcmp(err.field, "vars") == 0;
        if (in_vars && err.offset >= shift)
            shift_offset(&err, shift);
        cli_fail(in_vars ? cli_name(o->render) : tpl_name, s, &err);
        rc = s == ML_E_INVAL ? EXIT_INVALID : cli_exit_status(s);
    }
    if (!rc && o->ids)
        rc = print_chat_ids(path, t, &p, o->json);
    else if (!rc)
        fwrite(p.text, 1, p.len, stdout);
    ml_chat_prompt_free(&p);
    ml_jinja_free(j);
    free(vars);
    free(msgs);
    return rc;
}

static void print_header(const char *path, const ml_mlt *t)
{
    const ml_mlt_header *h = ml_mlt_get_header(t);
    uint32_t c[4];
    char names[160], user[48] = "";
    count_attrs(t, c);
    ml_mlt_flag_names(h->flags, names, sizeof names);
    if (c[3])
        snprintf(user, sizeof user, " (%u user-defined)", c[3]);
    printf("%s\n", cli_name(path));
    printf("  %-22s .mlt version %u\n", "format", h->version);
    printf("  %-22s %" PRIu64 " bytes\n", "file size", ml_mlt_file_size(t));
    printf("  %-22s %-15u %s\n", "kind", h->kind, kind_name(h->kind));
    printf("  %-22s %-15u %u normal, %u added%s, %u byte\n", "n_vocab", h->n_vocab, c[0],
           c[1] + c[3], user, c[2]);
    printf("  %-22s %u\n", "n_merges", h->n_merges);
    print_special("bos", t, h->bos, "beginning of sequence");
    print_special("eos", t, h->eos, "end of sequence");
    printf("  %-22s %-15u %s\n", "flags", h->flags, h->flags ? names : "none");
    printf("  %-22s %s\n", "pre-tokenizer", pretok_name(h));
    printf("  %-22s %s\n", "normalization", h->flags & ML_MLT_NFC ? "NFC" : "none");
    print_chat(t);
}

static void json_header(const char *path, const ml_mlt *t)
{
    const ml_mlt_header *h = ml_mlt_get_header(t);
    uint32_t c[4];
    char names[160];
    count_attrs(t, c);
    ml_mlt_flag_names(h->flags, names, sizeof names);
    printf("{\"file\":");
    json_str(stdout, cli_name(path));
    printf(",\"size\":%" PRIu64 ",\"version\":%u,\"kind\":%u,\"n_vocab\":%u,\"n_merges\":%u,"
           "\"bos\":%d,\"eos\":%d,\"flags\":%u,\"flag_names\":",
           ml_mlt_file_size(t), h->version, h->kind, h->n_vocab, h->n_merges,
           (int)ml_mlt_id_i32(h->bos), (int)ml_mlt_id_i32(h->eos), h->flags);
    json_str(stdout, names);
    printf(",\"normal\":%u,\"added\":%u,\"user_defined\":%u,\"byte\":%u", c[0], c[1] + c[3],
           c[3], c[2]);
    json_chat(t);
    printf("}\n");
}

static void dump_vocab(const ml_mlt *t, int json)
{
    uint32_t n = ml_mlt_get_header(t)->n_vocab;
    for (uint32_t i = 0; i < n && cli_stdout_ok(); i++) {
        if (json) {
            json_token(t, i);
            putchar('\n');
            continue;
        }
        ml_mlt_token k = ml_mlt_get_token(t, i);
        printf("%u\t%s\t", i, attr_name(k.attr));
        print_piece(k.bytes, k.len);
        putchar('\n');
    }
}

static void dump_merges(const ml_mlt *t, int json)
{
    uint32_t n = ml_mlt_get_header(t)->n_merges;
    for (uint32_t r = 0; r < n && cli_stdout_ok(); r++) {
        uint32_t a, b, m;
        ml_mlt_get_merge(t, r, &a, &b, &m);
        if (json) {
            printf("{\"rank\":%u,\"left\":%u,\"right\":%u,\"merged\":%u}\n", r, a, b, m);
            continue;
        }
        printf("%u\t%u\t%u\t%u\t", r, a, b, m);
        ml_mlt_token k = ml_mlt_get_token(t, a);
        print_piece(k.bytes, k.len);
        putchar('\t');
        k = ml_mlt_get_token(t, b);
        print_piece(k.bytes, k.len);
        putchar('\t');
        k = ml_mlt_get_token(t, m);
        print_piece(k.bytes, k.len);
        putchar('\n');
    }
}

static ml_status print_ids(ml_tok *k, const char *text, size_t len, int bos, int json,
                           ml_error *err)
{
    ml_ids ids = {0};
    ml_status s = ml_tok_encode(k, text, len, bos, &ids, err);
    if (s)
        return s;
    print_id_list(&ids, json);
    ml_ids_free(&ids);
    return ML_OK;
}

static int do_encode(const char *path, const ml_mlt *t, const options *o)
{
    ml_tok *k;
    ml_error err;
    ml_status s = ml_tok_new(t, &k, &err);
    if (s)
        return cli_fail(path, s, &err);
    char *buf = NULL;
    size_t len;
    if (strcmp(o->encode, "-") == 0) {
        if ((s = cli_read_all(0, &buf, &len))) {
            int read_errno = errno;
            ml_tok_free(k);
            if (s == ML_E_IO)
                return cli_failf("-", ML_E_IO, "read error: %s", strerror(read_errno));
            return cli_fail("-", s, NULL);
        }
    } else {
        len = strlen(o->encode);
    }
    const char *text = buf ? buf : o->encode;
    if (!o->lines) {
        s = print_ids(k, text, len, o->bos, o->json, &err);
    } else {
        size_t start = 0;
        while (start < len && !s && cli_stdout_ok()) {
            const char *nl = memchr(text + start, o->separator, len - start);
            size_t end = nl ? (size_t)(nl - text) : len;
            s = print_ids(k, text + start, end - start, o->bos, o->json, &err);
            start = end + 1;
        }
    }
    free(buf);
    ml_tok_free(k);
    return s ? cli_fail(path, s, &err) : EXIT_OK;
}

static int is_number(const char *s)
{
    if (!*s)
        return 0;
    for (; *s; s++)
        if (*s < '0' || *s > '9')
            return 0;
    return 1;
}

/* A token id operand: digits only (checked by is_number), below 2^32. */
static uint32_t parse_id(const char *s)
{
    errno = 0;
    unsigned long long v = strtoull(s, NULL, 10);
    if (errno || v > UINT32_MAX)
        cli_usage_error("'%s' is not a token id", s);
    return (uint32_t)v;
}

/* Decodes ids from the operands or, without any, from standard input. */
static int do_decode(const char *path, const ml_mlt *t, const options *o, char **ids, int n_ids)
{
    ml_tok_stream st;
    ml_error err;
    ml_status s = ML_OK;
    unsigned dopts = (o->skip ? ML_TOK_SKIP_BOS_EOS : 0) | (o->keep_space ? ML_TOK_KEEP_SPACE : 0);
    ml_tok_stream_init(&st, t, dopts);
    if (o->json) {
        /* Collect, then print as one JSON string. */
        uint32_t *v = malloc(((size_t)n_ids + 1) * sizeof *v);
        if (!v)
            return cli_fail(NULL, ML_E_NOMEM, NULL);
        for (int i = 0; i < n_ids; i++)
            v[i] = parse_id(ids[i]);
        char *text;
        size_t len;
        s = ml_tok_decode(t, v, (size_t)n_ids, dopts, &text, &len, &err);
        free(v);
        if (s)
            return cli_fail(path, s, &err);
        printf("{\"text\":");
        json_strn(stdout, text, len);
        printf("}\n");
        free(text);
        return EXIT_OK;
    }
    for (int i = 0; i < n_ids && !s; i++)
        s = ml_tok_stream_put(&st, parse_id(ids[i]), cli_stdout_sink, NULL, &err);
    if (!s)
        s = ml_tok_stream_end(&st, cli_stdout_sink, NULL, &err);
    if (!s)
        putchar('\n');
    return s ? cli_fail(path, s, &err) : EXIT_OK;
}

/* Ids as whitespace-separated numbers on standard input; *buf_out holds
 * the text they point into. */
static int stdin_ids(char ***out, int *n, char **buf_out)
{
    char *buf;
    size_t len;
    if (cli_read_all(0, &buf, &len))
        return -1;
    *buf_out = buf;
    char **v = malloc((len / 2 + 2) * sizeof *v);
    if (!v) {
        free(buf);
        return -1;
    }
    int k = 0;
    for (char *tok = strtok(buf, " \t\r\n"); tok; tok = strtok(NULL, " \t\r\n")) {
        if (!is_number(tok))
            cli_usage_error("'%s' on standard input is not a token id", tok);
        v[k++] = tok;
    }
    *out = v;
    *n = k;
    return 0;
}

int main(int argc, char **argv)
{
    options o = {0};
    const char *arg;
    int id, first;
    cli_init(&cmd);
    o.bos = ML_TOK_BOS_AUTO;
    while ((id = cli_next(argc, argv, &arg, &first)) != -1) {
        switch (id) {
        case OPT_VOCAB: o.vocab = 1; break;
        case OPT_MERGES: o.merges = 1; break;
        case OPT_ENCODE: o.encode = arg; break;
        case OPT_DECODE: o.decode = 1; break;
        case OPT_LINES: o.lines = 1, o.separator = '\n'; break;
        case OPT_NULL: o.lines = 1, o.separator = 0; break;
        case OPT_JSON: o.json = 1; break;
        case OPT_BOS: o.bos = ML_TOK_BOS_YES; break;
        case OPT_NO_BOS: o.bos = ML_TOK_BOS_NO; break;
        case OPT_SKIP: o.skip = 1; break;
        case OPT_KEEP_SPACE: o.keep_space = 1; break;
        case OPT_PRINT_TEMPLATE: o.print_template = arg; break;
        case OPT_RENDER: o.render = arg; break;
        case OPT_TEMPLATE: o.template_file = arg; break;
        case OPT_TEMPLATE_NAME: o.template_name = arg; break;
        case OPT_IDS: o.ids = 1; break;
        case OPT_NO_GEN: o.no_gen = 1; break;
        }
    }
    if (o.vocab + o.merges + (o.encode != NULL) + o.decode + (o.print_template != NULL) +
            (o.render != NULL) > 1)
        cli_usage_error("--vocab, --merges, --encode, --decode, --print-template and --render "
                        "exclude each other");
    if ((o.template_file || o.template_name || o.no_gen || o.ids) && !o.render)
        cli_usage_error("--template, --chat-template, --no-generation-prompt and --ids go with "
                        "--render");
    if (o.template_file && o.template_name)
        cli_usage_error("--template and --chat-template exclude each other");
    if (o.lines && !o.encode)
        cli_usage_error("--lines and --null go with --encode");
    /* With --decode the FILE is the operand that is not a number (the
     * others are ids), or the first one if all are numbers. */
    const char *path = NULL;
    char **ids = malloc(((size_t)argc + 1) * sizeof *ids);
    int n_ids = 0, file_at = first;
    if (o.decode)
        for (int i = first; i < argc; i++)
            if (!is_number(argv[i])) {
                file_at = i;
                break;
            }
    for (int i = first; i < argc; i++) {
        if (i == file_at)
            path = argv[i];
        else if (o.decode && is_number(argv[i]))
            ids[n_ids++] = argv[i];
        else
            cli_usage_error("one FILE only (extra operand '%s')", argv[i]);
    }
    if (!path)
        cli_usage_error("no FILE given");
    if (o.encode && strcmp(o.encode, "-") == 0 && strcmp(path, "-") == 0)
        cli_usage_error("the text and the tokenizer cannot both come from standard input");
    char *ids_text = NULL;
    ml_mlt *t;
    ml_error err;
    ml_status s = ml_mlt_open(path, &t, &err);
    if (s) {
        free(ids);
        return cli_finish(cli_fail(path, s, &err));
    }
    int status = EXIT_OK;
    if (o.vocab) {
        dump_vocab(t, o.json);
    } else if (o.merges) {
        dump_merges(t, o.json);
    } else if (o.print_template) {
        status = print_template(path, t, o.print_template, o.json);
    } else if (o.render) {
        if (strcmp(o.render, "-") == 0 && strcmp(path, "-") == 0)
            cli_usage_error("the messages and the tokenizer cannot both come from standard input");
        status = render(path, t, &o);
    } else if (o.encode) {
        status = do_encode(path, t, &o);
    } else if (o.decode) {
        if (!n_ids && strcmp(path, "-") != 0) {
            free(ids);
            ids = NULL;
            if (stdin_ids(&ids, &n_ids, &ids_text)) {
                ml_mlt_close(t);
                return cli_finish(cli_failf("-", ML_E_IO, "cannot read the ids"));
            }
        }
        status = do_decode(path, t, &o, ids, n_ids);
    } else if (o.json) {
        json_header(path, t);
    } else {
        print_header(path, t);
    }
    ml_mlt_close(t);
    free(ids);
    free(ids_text);
    return cli_finish(status);
}
