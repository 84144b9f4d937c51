/* model_input.h - opening a model that may be a GGUF or an .mlb, told apart
 * by its magic (ml-quant, mlb-info).  A regular file is mapped by the
 * library; standard input and other pipes are read whole first, since the
 * magic cannot be peeked at without consuming it. */
#ifndef MLCORE_CLI_MODEL_INPUT_H
#define MLCORE_CLI_MODEL_INPUT_H

#include <mlcore.h>

typedef struct model_input {
    ml_gguf *gguf; /* exactly one of gguf and mlb is set after a success */
    ml_mlb *mlb;
    void *buf;     /* a pipe's bytes, read whole (owned) */
} model_input;

/* Opens PATH ("-": standard input) and validates it with the parser its
 * magic names; anything that is not "GGUF" goes to the .mlb loader, whose
 * messages say what the file looks like.  Reports a failure (cli_fail)
 * and returns its exit status; 0 on success. */
int model_input_open(const char *path, model_input *in);
/* The parts of a split GGUF named one by one (paths[0] first), or with
 * n == 1 model_input_open.  A model split by gguf-split opens whole from
 * its first part alone (mlcore/gguf.h). */
int model_input_open_parts(const char *const *paths, size_t n, model_input *in);
/* Accepts a zeroed or failed input. */
void model_input_close(model_input *in);

#endif
