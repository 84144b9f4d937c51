# valgrind.mk - `make valgrind`: every command on every fixture under
# valgrind's memcheck (tools/valgrind-all.sh): no invalid access, no use of
# uninitialised memory, no definite or indirect leak.  Slow (tens of
# minutes on two cores), so not part of `make check`; on a shared machine
# run it as `nice -n 19 make valgrind`.
#
#   make valgrind                       all of it, with the build in $(B)
#   make valgrind VALGRIND_FILTER=mlt   only the runs whose command matches
#
# It uses the ordinary -O2 -g build: memcheck needs no instrumentation,
# and the code it checks is the code that ships.

VALGRIND_FILTER ?=

.PHONY: valgrind
valgrind: all $(TEST_TOOLS)
	MLCORE_BUILD=$(abspath $(B)) bash tools/valgrind-all.sh '$(VALGRIND_FILTER)'
