/* json_schema_int.c - the integers between bounds as GBNF
 * (json_schema_int.h): for each count of digits, the digit strings from
 * the low bound to the high one, split at the first digit where they
 * differ (the low bound's digit then at least its rest, the digits
 * between with any rest, the high bound's digit then at most its rest). */
#include "json_schema_int.h"

#include <string.h>

static const char NINES[] = "999999999999999999999999";
static const char ZEROS[] = "000000000000000000000000";

static int all_of(const char *s, char c, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] != c)
            return 0;
    return 1;
}

/* The n-digit strings from a to b (leading zeros are digits here). */
static void digits_between(FILE *o, const char *a, const char *b, size_t n)
{
    size_t i = 0;
    while (i < n && a[i] == b[i])
        i++;
    if (i)
        fprintf(o, "\"%.*s\"%s", (int)i, a, i < n ? " " : "");
    if (i == n)
        return;
    size_t rest = n - i - 1;
    if (!rest) {
        fprintf(o, "[%c-%c]", a[i], b[i]);
        return;
    }
    int low_whole = all_of(a + i + 1, '0', rest), high_whole = all_of(b + i + 1, '9', rest);
    char from = a[i], to = high_whole ? b[i] : (char)(b[i] - 1);
    const char *sep = "";
    fputc('(', o);
    if (!low_whole) { /* a's first digit, then at least the rest of a */
        fprintf(o, "\"%c\" (", a[i]);
        digits_between(o, a + i + 1, NINES, rest);
        fputc(')', o);
        sep = " | ";
        from++;
    }
    if (from <= to) {
        fprintf(o, "%s[%c-%c] [0-9]{%zu}", sep, from, to, rest);
        sep = " | ";
    }
    if (!high_whole) { /* b's first digit, then at most the rest of b */
        fprintf(o, "%s\"%c\" (", sep, b[i]);
        digits_between(o, ZEROS, b + i + 1, rest);
        fputc(')', o);
    }
    fputc(')', o);
}

/* Magnitudes from lo to hi (bounded) or up (at most 16 digits, as the
 * plain integer rule, or lo's). */
static void magnitudes(FILE *o, uint64_t lo, uint64_t hi, int bounded)
{
    char a[24], b[24], ten[24];
    snprintf(a, sizeof a, "%llu", (unsigned long long)lo);
    snprintf(b, sizeof b, "%llu", (unsigned long long)hi);
    size_t la = strlen(a), lb = bounded ? strlen(b) : (la > 16 ? la : 16);
    fputc('(', o);
    digits_between(o, a, lb == la && bounded ? b : NINES, la);
    if (lb > la) {
        size_t whole = bounded ? lb - 1 : lb; /* lengths la+1..whole in full */
        if (whole > la)
            fprintf(o, " | [1-9] [0-9]{%zu,%zu}", la, whole - 1);
        if (bounded) {
            snprintf(ten, sizeof ten, "1%.*s", (int)(lb - 1), ZEROS);
            fputs(" | ", o);
            digits_between(o, ten, b, lb);
        }
    }
    fputc(')', o);
}

void json_schema_uint_range(FILE *out, uint64_t lo, uint64_t hi, int bounded)
{
    magnitudes(out, lo, hi, bounded);
}

void json_schema_int_range(FILE *out, int64_t lo, int has_lo, int64_t hi, int has_hi)
{
    int alts = 0;
    if (!has_lo || lo < 0) { /* "-" and magnitudes from -hi (or 1) to -lo */
        uint64_t from = has_hi && hi < 0 ? 0 - (uint64_t)hi : 1;
        fputs("\"-\" ", out);
        magnitudes(out, from, has_lo ? 0 - (uint64_t)lo : 0, has_lo);
        alts++;
    }
    if (!has_hi || hi >= 0) {
        fputs(alts ? " | " : "", out);
        magnitudes(out, has_lo && lo > 0 ? (uint64_t)lo : 0, has_hi ? (uint64_t)hi : 0, has_hi);
    }
}
