/* jinja_str.h - the string functions of jinja_str.c, for the builtins of
 * jinja_builtins.c.  Those that build a string put it in the render's
 * arena; like the rest of the interpreter they return -1 after recording
 * an error in r->c. */
#ifndef ML_JINJA_JINJA_STR_H
#define ML_JINJA_JINJA_STR_H

#include "jinja/jinja.h"

/* str.strip: which 1 left, 2 right, 3 both; chars a str or none
 * (whitespace).  A view of s, nothing allocated. */
jv jj_strip(jv s, jv chars, int which);
/* Maps every code point: mode 0 upper, 1 lower, 2 str.title,
 * 3 capitalize. */
int jj_case(jj_render *r, jv s, int mode, jv *out);
/* jinja2's title filter: words start after whitespace, - ( { [ <. */
int jj_title(jj_render *r, jv s, jv *out);
/* str.replace; count < 0: all. */
int jj_replace(jj_render *r, jv s, jv old, jv new_, int64_t count, jv *out);
/* str.find (from_right: rfind): the code point index, or -1. */
int jj_find(jv s, jv sub, int from_right, int64_t *out);
/* str.split (right: rsplit); sep none: runs of whitespace; maxsplit < 0: all. */
int jj_split(jj_render *r, jv s, jv sep, int64_t maxsplit, int right, jv *out, size_t pos);
/* str.startswith (end: endswith); p a str or a list of them. */
int jj_affix(jv s, jv p, int end);
/* str.count: non-overlapping matches; an empty sub matches between code points. */
int64_t jj_count(jv s, jv sub);
int jj_splitlines(jj_render *r, jv s, jv *out);
/* str.isdigit, isalpha, isspace, isalnum, islower, isupper (kind 0 to 5),
 * over ASCII. */
int jj_str_class(jv s, int kind);
/* str.format with {} {0} {name} and {{ }}; format specs are refused. */
int jj_format(jj_render *r, jv s, const jj_args *a, jv *out, size_t pos);
/* markupsafe's escape of a str: the result is safe. */
int jj_html_escape(jj_render *r, jv s, jv *out);
/* jinja2's indent filter: w the width (an int) or the padding (a str). */
int jj_indent(jj_render *r, jv s, jv w, jv first, jv blank, jv *out);
/* jinja2's wordcount: runs of word characters (\w: letters, digits, _, any
 * non-ASCII byte). */
int64_t jj_wordcount(jv v);
/* The code points of x in reverse order. */
int jj_reverse_str(jj_render *r, jv x, jv *out);

#endif
