# mk/fuzz.mk - libFuzzer harnesses (fuzz/fuzz_<target>.c) and their replay.
#
#   make fuzz FUZZ_SECONDS=N   build every harness with clang's libFuzzer,
#                              ASan and UBSan in build-fuzz/ and run each for
#                              N seconds (default 60) on a scratch copy of
#                              fuzz/corpus/<target>/ and fuzz/regress/<target>/;
#                              FUZZ_TARGETS="mlb gguf" runs only those.
#                              Crashes land in build-fuzz/crash/<target>/.
#   make fuzz-replay           build each harness with $(CC) $(CFLAGS) and
#                              fuzz/replay.c in $(B)/fuzz/ and feed it every
#                              file of fuzz/corpus/<target>/ and
#                              fuzz/regress/<target>/ (part of `make check`
#                              and of `make sanitize`).
#   make fuzz-merge            fold build-fuzz/work/<target>/ into
#                              fuzz/corpus/<target>/, keeping only inputs that
#                              add coverage (libFuzzer -merge=1).

FUZZ_ALL := $(patsubst fuzz/fuzz_%.c,%,$(wildcard fuzz/fuzz_*.c))
FUZZ_TARGETS ?= $(FUZZ_ALL)
FUZZ_SECONDS ?= 60
FUZZ_B := build-fuzz
FUZZ_SAN := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all
# Per-run options; fuzz/<target>.options adds to them, fuzz/<target>.dict is
# used when present.  A slow input is a finding too (-timeout).
FUZZ_FLAGS ?= -timeout=20 -rss_limit_mb=2048 -malloc_limit_mb=1024 -print_final_stats=1

.PHONY: fuzz fuzz-bins fuzz-run fuzz-replay fuzz-merge

# Not parsers: the quantizers' search loops, the kernels and the runtime
# get no coverage feedback (they keep ASan and UBSan).  Their numeric
# branches would reward the fuzzer for new weight values, swelling the
# corpus with whole models, and cost most of the time of each run.
ifeq ($(B),$(FUZZ_B))
$(patsubst %.c,$(B)/%.o,$(wildcard lib/quant/*.c lib/convert/requant.c lib/kernels/*.c lib/runtime/*.c)): \
  ALL_CFLAGS += -fno-sanitize=fuzzer-no-link
endif

fuzz:
	$(MAKE) B=$(FUZZ_B) CC=clang CFLAGS="$(FUZZ_SAN) -fsanitize=fuzzer-no-link" \
	  LDFLAGS="$(FUZZ_SAN)" fuzz-bins
	$(MAKE) B=$(FUZZ_B) fuzz-run

fuzz-bins: $(FUZZ_TARGETS:%=$(B)/fuzz/lf_%)

$(B)/fuzz/lf_%: $(B)/fuzz/fuzz_%.o $(B)/libmlcore.a
	@mkdir -p $(dir $@)
	$(if $(Q),@echo "  LD      $@")
	$(Q)$(CC) $(CFLAGS) -fsanitize=fuzzer $(LDFLAGS) -o $@ $^ $(LDLIBS_LIB)

# Each target on a scratch corpus, so fuzz/corpus stays as committed.
fuzz-run:
	@set -e; for t in $(FUZZ_TARGETS); do \
	  w=$(B)/work/$$t; c=$(B)/crash/$$t; mkdir -p $$w $$c; \
	  cp fuzz/corpus/$$t/* $$w/ 2>/dev/null || true; \
	  cp fuzz/regress/$$t/* $$w/ 2>/dev/null || true; \
	  opts=$$(cat fuzz/$$t.options 2>/dev/null || true); \
	  dict=$$(test -f fuzz/$$t.dict && echo -dict=fuzz/$$t.dict || true); \
	  echo "fuzz: $$t for $(FUZZ_SECONDS) s"; \
	  $(B)/fuzz/lf_$$t $(FUZZ_FLAGS) $$opts $$dict -max_total_time=$(FUZZ_SECONDS) \
	    -artifact_prefix=$$c/ $$w; \
	done

fuzz-merge:
	@set -e; for t in $(FUZZ_TARGETS); do \
	  opts=$$(cat fuzz/$$t.options 2>/dev/null || true); \
	  $(FUZZ_B)/fuzz/lf_$$t -merge=1 $$opts fuzz/corpus/$$t $(FUZZ_B)/work/$$t; \
	done

# The replay: the same harnesses with an ordinary main().
FUZZ_REPLAY := $(FUZZ_ALL:%=$(B)/fuzz/replay_%)

$(B)/fuzz/replay_%: $(B)/fuzz/fuzz_%.o $(B)/fuzz/replay.o $(B)/libmlcore.a
	@mkdir -p $(dir $@)
	$(if $(Q),@echo "  LD      $@")
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(LDLIBS_LIB)

fuzz-replay: $(FUZZ_REPLAY)
	@set -e; for t in $(FUZZ_ALL); do \
	  ASAN_OPTIONS=detect_leaks=1 $(B)/fuzz/replay_$$t \
	    $$(ls -d fuzz/corpus/$$t fuzz/regress/$$t 2>/dev/null); \
	done

check: fuzz-replay

# `make sanitize` (CI's ASan + UBSan run) does not go through `check`: it
# replays the corpus in its own build directory first.
.PHONY: fuzz-replay-san
sanitize: fuzz-replay-san
fuzz-replay-san:
	$(MAKE) B=build-san CFLAGS="$(SAN)" LDFLAGS="$(SAN)" fuzz-replay
