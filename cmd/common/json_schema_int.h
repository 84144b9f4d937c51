/* json_schema_int.h - the decimal texts of the integers from lo to hi
 * (json_schema.c's integer rules, for minimum, maximum and their
 * exclusive forms): no leading zeros, no "-0".  A side without a bound
 * stops at 16 digits, as the plain integer rule does (or at the other
 * bound's count of digits when that is more). */
#ifndef MLCORE_CLI_JSON_SCHEMA_INT_H
#define MLCORE_CLI_JSON_SCHEMA_INT_H

#include <stdint.h>
#include <stdio.h>

/* Writes to out a GBNF alternative list of those texts; lo <= hi when
 * both are bounded (has_lo, has_hi), and at least one is. */
void json_schema_int_range(FILE *out, int64_t lo, int has_lo, int64_t hi, int has_hi);
/* The same for the magnitudes from lo to hi, or up when !bounded (a
 * group, for the integer part of a bounded number). */
void json_schema_uint_range(FILE *out, uint64_t lo, uint64_t hi, int bounded);

#endif
