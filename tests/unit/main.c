/* main.c - runs every unit-test suite of libmlcore in one SRunner.  Tests
 * fork by default (a crash fails one test, not the run); CK_FORK=no runs
 * them in-process, as the sanitizer build does.  CK_RUN_SUITE and
 * CK_RUN_CASE select a suite or test case (libcheck reads them).  The exit
 * status is non-zero when any test fails. */
#include "suites.h"

#include <stdlib.h>

/* Every test case has one timeout, here, and none sets its own.  The
 * timeout catches a hang; it must never judge speed, so it is far above
 * any test's time: the slowest single test takes about 2 s on the 2-core
 * machine the suite is developed on, so 300 s leaves a machine 5x slower,
 * loaded by another job, a wide margin (tools/test-times.sh prints every
 * case's time and headroom).  CK_DEFAULT_TIMEOUT replaces it and
 * CK_TIMEOUT_MULTIPLIER scales it (make check-arm64 multiplies by 4 for
 * qemu); with CK_FORK=no libcheck cannot time tests out at all. */
#define TEST_TIMEOUT_S "300"

int main(void)
{
    /* tcase_create reads it, so it is set before the suites are built. */
    setenv("CK_DEFAULT_TIMEOUT", TEST_TIMEOUT_S, 0);
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
