# m32.mk - `make check-m32`: the library, the commands and the parser unit
# tests built for 32-bit x86 in build-m32/, and the tests run there.  Every
# size read from a file goes through overflow-checked 64-bit arithmetic and
# ml__to_size; only a build whose size_t has 32 bits shows that a size
# above 4 GiB fails cleanly instead of wrapping.
#
# Needs gcc-12-multilib (apt-get install gcc-12-multilib).  The i386 libraries
# (libdeflate, utf8proc, zlib, check, subunit, jansson) come from Debian's i386
# packages, fetched and checked by tools/cross-deps.sh into build-m32/sysroot
# and linked statically, so nothing is installed for i386.  -msse2
# -mfpmath=sse keeps float arithmetic in SSE registers as on x86-64
# instead of x87's extended precision.
#
#   make check-m32                          the parser suites below
#   make check-m32 M32_SUITES="mlt gguf"    others (suite names, as in check_NAME.c)
#   MLCORE_BUILD=$PWD/build-m32 bats tests/cli   afterwards: the command tests
#                                           on the 32-bit commands (a few minutes)

M32_B := build-m32
M32_SYSROOT := $(M32_B)/sysroot
M32_LIB = $(abspath $(M32_SYSROOT))/usr/lib/i386-linux-gnu
M32_CFLAGS = -O2 -g -m32 -msse2 -mfpmath=sse -Wno-psabi -I$(abspath $(M32_SYSROOT))/usr/include
# The suites that read, validate and write the file formats.
M32_SUITES ?= mlb_header mlb_flags mlb_load mlb_stream mlb_roundtrip mlb_write overflow f16 \
              gguf gguf_hostile gguf_dequant mlt mli mli_read pool quant kquant grammar json_schema
M32_UNIT_SRC = $(wildcard tests/unit/main.c tests/unit/testutil.c tests/unit/gguf_build.c \
                 tests/unit/check_tok_util.c tests/unit/check_convert_util.c \
                 $(M32_SUITES:%=tests/unit/check_%.c))

.PHONY: check-m32
check-m32: $(M32_SYSROOT)/.complete
	@# The suite list depends on M32_SUITES, which make cannot see as a
	@# prerequisite (and .SECONDARY keeps make from rebuilding a missing
	@# object behind an existing binary): relink the runner every time.
	@rm -f $(M32_B)/tests/suites.inc $(M32_B)/tests/unit/main.o $(M32_B)/tests/unit-tests
	$(MAKE) B=$(M32_B) CFLAGS="$(M32_CFLAGS)" LDFLAGS=-m32 \
	  CHECK_CFLAGS=-pthread CHECK_LIBS="$(M32_LIB)/libcheck.a $(M32_LIB)/libsubunit.a -lrt -lm -pthread" \
	  LDLIBS_LIB="$(M32_LIB)/libutf8proc.a $(M32_LIB)/libdeflate.a $(M32_LIB)/libz.a -lm -lpthread" \
	  JANSSON_CFLAGS= JANSSON_LIBS=$(M32_LIB)/libjansson.a \
	  UNIT_SRC="$(M32_UNIT_SRC)" SKIP_TOOLS=ml-serve all tests
	$(M32_B)/tests/unit-tests

$(M32_SYSROOT)/.complete: tools/cross-deps.sh
	bash tools/cross-deps.sh i386 $(M32_SYSROOT)
	@touch $@
