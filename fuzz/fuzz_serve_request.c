/* fuzz_serve_request.c - ml-serve's request parser (cmd/ml-serve/
 * request.c): any bytes as the body of each of the five kinds of request
 * (the first byte picks the kind, the rest is the body).
 *
 * Oracles besides the sanitizers: the parser succeeds or fails with an
 * HTTP status of 400 or 500, a terminated non-empty message and, on
 * success, fields within their documented ranges (sampling values,
 * max_tokens 0 only with a completion's echo, at
 * most SRV_MAX_STOPS non-empty stop strings, token ids below the
 * vocabulary, a message list for a chat, 1 to SRV_MAX_PROMPTS prompts for
 * a completion, each NUL-terminated text or token ids, prompts x n at
 * most SRV_MAX_CHOICES); the
 * same body parsed twice gives the same result. */
#include "fuzz.h"

#include "request.h"

#include <math.h>

enum { VOCAB = 1000 };

static void check_ok(const srv_request *r)
{
    FUZZ_CHECK(r->sp.temperature >= 0 && r->sp.temperature <= 2);
    FUZZ_CHECK(r->sp.top_p >= 0 && r->sp.top_p <= 1);
    FUZZ_CHECK(r->sp.min_p >= 0 && r->sp.min_p <= 1);
    FUZZ_CHECK(r->max_tokens == -1 || r->max_tokens >= 1 || (r->max_tokens == 0 && r->echo));
    FUZZ_CHECK(!r->echo || r->kind == SRV_COMPLETION);
    FUZZ_CHECK(r->n_stops <= SRV_MAX_STOPS);
    FUZZ_CHECK(r->top_logprobs <= 20 && (r->logprobs || !r->top_logprobs));
    FUZZ_CHECK(r->n_bias <= VOCAB);
    FUZZ_CHECK(!r->grammar == !r->grammar_text && (!r->grammar || r->grammar_len));
    for (size_t i = 0; i < r->n_bias; i++)
        FUZZ_CHECK(r->bias[i].id < VOCAB && !isnan(r->bias[i].bias) && r->bias[i].bias <= 100);
    for (size_t i = 0; i < r->n_stops; i++)
        FUZZ_CHECK(r->stops[i] && r->stops[i][0] && strlen(r->stops[i]) <= ML_STOP_MAX_LEN);
    for (size_t i = 0; i < r->n_tokens; i++)
        FUZZ_CHECK(r->tokens[i] < VOCAB);
    switch (r->kind) {
    case SRV_CHAT: FUZZ_CHECK(json_is_array(r->messages) && json_array_size(r->messages)); break;
    case SRV_COMPLETION: /* prompts, each a text or token ids (by design without a text) */
        FUZZ_CHECK(r->n_prompts >= 1 && r->n_prompts <= SRV_MAX_PROMPTS);
        FUZZ_CHECK(r->n_prompts * r->n <= SRV_MAX_CHOICES && r->text == NULL);
        for (size_t k = 0; k < r->n_prompts; k++) {
            const srv_prompt *q = &r->prompts[k];
            if (q->text)
                FUZZ_CHECK(strlen(q->text) == q->text_len && !q->tokens &&
                           (q->text_len || r->n_prompts == 1));
            else
                FUZZ_CHECK(q->n_tokens >= 1);
            for (size_t i = 0; i < q->n_tokens; i++)
                FUZZ_CHECK(q->tokens[i] < VOCAB);
        }
        break;
    case SRV_TOKENIZE: FUZZ_CHECK(r->text && strlen(r->text) == r->text_len); break;
    case SRV_DETOKENIZE: FUZZ_CHECK(r->text == NULL); break;
    case SRV_EMBEDDINGS:
        FUZZ_CHECK(json_is_array(r->inputs) && json_array_size(r->inputs) >= 1 &&
                   json_array_size(r->inputs) <= SRV_MAX_INPUTS);
        break;
    }
}

static void check_fail(const srv_error *e)
{
    FUZZ_CHECK(e->status == 400 || e->status == 500);
    FUZZ_CHECK(memchr(e->message, 0, sizeof e->message) && e->message[0]);
    FUZZ_CHECK(e->type != NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    srv_kind kind = (srv_kind)(data[0] % 5);
    const char *body = (const char *)data + 1;
    srv_request a, b;
    srv_error ea, eb;
    int ra = srv_request_parse(kind, body, size - 1, VOCAB, &a, &ea);
    int rb = srv_request_parse(kind, body, size - 1, VOCAB, &b, &eb);
    FUZZ_CHECK(ra == rb);
    if (ra == 0) {
        check_ok(&a);
        FUZZ_CHECK(a.n_stops == b.n_stops && a.n_tokens == b.n_tokens &&
                   a.max_tokens == b.max_tokens && a.stream == b.stream);
    } else {
        check_fail(&ea);
        FUZZ_CHECK(ea.status == eb.status && strcmp(ea.message, eb.message) == 0);
    }
    srv_request_free(&a);
    srv_request_free(&b);
    return 0;
}
