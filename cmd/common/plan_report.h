/* plan_report.h - what gguf2mlb would make of a GGUF, printed for people:
 * the .mlb header of a conversion plan, its arrays tensor by tensor, its
 * notes and the tokenizer.  gguf2mlb --dry-run and mlb-info on a GGUF
 * print these same lines. */
#ifndef MLCORE_CLI_PLAN_REPORT_H
#define MLCORE_CLI_PLAN_REPORT_H

#include <mlcore.h>
#include <mlcore/convert.h>

/* "header" and every field, then "layer flags" when the plan has them. */
void plan_print_header(const ml_convert_plan *p);
/* "plan (...)", one line per array, and the count of lossless ones. */
void plan_print_items(const ml_convert_plan *p);
/* "notes" and one line each; nothing when there are none. */
void plan_print_notes(const ml_convert_plan *p);
/* One line: the tokenizer NAME would hold, converted and checked but not
 * written, or why there is none. */
void plan_print_tokenizer(const char *name, const ml_gguf *g);
/* "[rows]" or "[rows, cols]" of an .mlb array. */
void plan_shape(char *buf, size_t n, const ml_tensor *t);

#endif
