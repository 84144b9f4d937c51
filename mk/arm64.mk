# arm64.mk - `make check-arm64`: the library and the unit tests
# cross-compiled for 64-bit ARM (AArch64) in build-arm64/ and run under
# qemu's user-mode emulator.  This machine has no ARM processor; the
# emulator runs the NEON kernels instruction for instruction, which is
# what the bit-identity tests need (speed on ARM is not measured here).
#
# Needs gcc-aarch64-linux-gnu, libc6-dev-arm64-cross and qemu-user
# (apt-get install).  The arm64 libraries (libdeflate, utf8proc, zlib, jansson,
# check, subunit) come from Debian's arm64 packages, fetched and checked by
# tools/cross-deps.sh into build-arm64/sysroot and linked statically.
#
#   make check-arm64                          the suites below
#   make check-arm64 ARM64_SUITES="mlt gguf"  others (suite names, as in check_NAME.c)

ARM64_B := build-arm64
ARM64_CC ?= aarch64-linux-gnu-gcc
ARM64_QEMU ?= qemu-aarch64 -L /usr/aarch64-linux-gnu
ARM64_SYSROOT := $(ARM64_B)/sysroot
ARM64_LIB = $(abspath $(ARM64_SYSROOT))/usr/lib/aarch64-linux-gnu
ARM64_CFLAGS = -O2 -g -I$(abspath $(ARM64_SYSROOT))/usr/include \
               -I$(abspath $(ARM64_SYSROOT))/usr/include/aarch64-linux-gnu
# The kernels and everything computed with them, and the parsers (an
# AArch64 build is also the first with unsigned char).
ARM64_SUITES ?= kernels kernels_blk fmath attention kv_cache linear_attn runtime runtime_blk pool quant kquant f16 mlb_load mlt gguf grammar
ARM64_UNIT_SRC = $(wildcard tests/unit/main.c tests/unit/testutil.c tests/unit/gguf_build.c \
                   tests/unit/check_tok_util.c tests/unit/check_convert_util.c \
                   $(ARM64_SUITES:%=tests/unit/check_%.c))

.PHONY: check-arm64
check-arm64: $(ARM64_SYSROOT)/.complete
	@# As in m32.mk: the suite list is not a prerequisite make can see.
	@rm -f $(ARM64_B)/tests/suites.inc $(ARM64_B)/tests/unit/main.o $(ARM64_B)/tests/unit-tests
	$(MAKE) B=$(ARM64_B) CC=$(ARM64_CC) CFLAGS="$(ARM64_CFLAGS)" \
	  CHECK_CFLAGS=-pthread CHECK_LIBS="$(ARM64_LIB)/libcheck.a $(ARM64_LIB)/libsubunit.a -lrt -lm -pthread" \
	  LDLIBS_LIB="$(ARM64_LIB)/libutf8proc.a $(ARM64_LIB)/libdeflate.a $(ARM64_LIB)/libz.a -lm -lpthread" \
	  UNIT_SRC="$(ARM64_UNIT_SRC)" $(ARM64_B)/libmlcore.a $(ARM64_B)/tests/unit-tests
	@# Emulation runs several times slower than native code: the one
	@# timeout of main.c, x4.
	CK_TIMEOUT_MULTIPLIER=4 $(ARM64_QEMU) $(ARM64_B)/tests/unit-tests

$(ARM64_SYSROOT)/.complete: tools/cross-deps.sh
	CROSS_CC=$(ARM64_CC) bash tools/cross-deps.sh arm64 $(ARM64_SYSROOT)
	@touch $@
