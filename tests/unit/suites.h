/* suites.h - the libcheck suites of the unit tests.  The list is made by
 * the Makefile from every "Suite *suite_NAME(void)" definition in
 * tests/unit/check_*.c (build/tests/suites.inc), so adding a suite means
 * adding a file, nothing else. */
#ifndef ML_SUITES_H
#define ML_SUITES_H

#include <check.h>

#define SUITE(name) Suite *suite_##name(void);
#include "suites.inc"
#undef SUITE

#endif
