/* draft.c - guesses of the next tokens for speculative decoding
 * (generate.h): an n-gram lookup in the text so far, as llama.cpp's
 * ngram-simple drafts.  Text repeats (code rewritten with one change, a
 * passage quoted), and what followed the last n tokens the last time they
 * occurred is a good guess of what follows them now; when that reaches
 * the present, the text is taken to repeat with that period. */
#include <mlcore/generate.h>

#include <string.h>

size_t ml_draft_ngram(const ml_token *hist, size_t n_hist, size_t size_n, ml_token *draft,
                      size_t max_draft)
{
    if (!hist || !draft || size_n == 0 || max_draft == 0 || n_hist <= size_n)
        return 0;
    const ml_token *key = hist + n_hist - size_n;
    /* the most recent earlier occurrence, with at least one token after it */
    for (size_t at = n_hist - size_n; at-- > 0;) {
        if (hist[at] != key[0] || memcmp(hist + at, key, size_n * sizeof *key) != 0)
            continue;
        /* what followed, copied on as a repeat where it reaches the
         * present (a period shorter than the draft goes on repeating) */
        size_t from = at + size_n;
        for (size_t j = 0; j < max_draft; j++)
            draft[j] = from + j < n_hist ? hist[from + j] : draft[from + j - n_hist];
        return max_draft;
    }
    return 0;
}
