/* text.h - the tokenizer the running commands (ml-run, ml-imatrix,
 * ml-serve) open beside a model. */
#ifndef MLCORE_CLI_TEXT_H
#define MLCORE_CLI_TEXT_H

#include <mlcore.h>

#include <stddef.h>

/* Opens the tokenizer (path, or MODEL with .mlb replaced by .mlt when path
 * is NULL), checks it fits a vocabulary of `vocab`, and makes an encoder.
 * Reports failures; returns 0 or the exit status. */
/* MODEL's path with .mlb replaced by .mlt (or .mlt added): the tokenizer
 * beside it; a new string, NULL when out of memory. */
char *cli_tokenizer_beside(const char *model);

int cli_open_tokenizer(const char *path, const char *model, uint32_t vocab, ml_mlt **mlt,
                       ml_tok **tok);

#endif
