/* input.h - reading a whole input into memory: a descriptor to its end
 * (standard input for ml-quant and mlt-dump), and a text file or standard
 * input with its failure reported (ml-run, ml-imatrix). */
#ifndef MLCORE_CLI_INPUT_H
#define MLCORE_CLI_INPUT_H

#include <mlcore.h>

#include <stddef.h>

/* Reads fd to its end into a buffer with a NUL after the last byte (not
 * counted in *len), retrying reads a signal interrupted.  Returns ML_OK,
 * ML_E_NOMEM, or ML_E_IO with errno as the failed read left it.  Reports
 * nothing: each command words its own message. */
ml_status cli_read_all(int fd, char **out, size_t *len);
/* The same; on ML_E_NOMEM *len is the bytes read and *want the buffer
 * that could not be had, for a message that says how far it got. */
ml_status cli_read_all_ex(int fd, char **out, size_t *len, size_t *want);

/* Reads a whole file ("-": stdin) into a NUL-terminated buffer; on failure
 * reports it (cli_fail) and returns the exit status. */
int cli_read_text(const char *path, char **out, size_t *len);

#endif
