/* main.c - runs every unit-test suite of libmlcore in one SRunner.  Tests
 * fork by default (a crash fails one test, not the run); CK_FORK=no runs
 * them in-process, as the sanitizer build does.  CK_RUN_SUITE and
 * CK_RUN_CASE select a suite or test case (libcheck reads them).  The exit
 * status is non-zero when any test fails. */
#include "suites.h"

#include <stdlib.h>

int main(void)
{
    SRunner *sr = srunner_create(NULL);
#define SUITE(name) srunner_add_suite(sr, suite_##name());
#include "suites.inc"
#undef SUITE
    /* The fork status is left at its default, CK_FORK_GETENV. */
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
