# serve.mk - ml-serve, the one command with dependencies beyond the
# library's: GNU libmicrohttpd (HTTP) and jansson (JSON), found with
# pkg-config and linked into ml-serve alone; its request parser's fuzz
# harness links jansson too.
#
#   make check-serve-load   8 clients x 20 requests against --parallel 4,
#                           every answer complete and equal to the same
#                           request run alone (tests/serve/load.sh)
#   make check-openai       the official openai Python client against
#                           ml-serve, streaming and not, and an agent framework on it (pip install openai openai-agents;
#                           tests/serve/openai-client.py)
#   make check-json-schema  response_format json_schema over a corpus of
#                           schemas, every answer validated by the
#                           jsonschema package (tests/serve/json-schema.sh)
#   make check-serve-nginx  docs/deploy/nginx-ml-serve.conf run by nginx
#                           (apt-get install nginx) in front of two
#                           replicas: answers equal to direct ones, none
#                           lost when one dies (tests/serve/nginx.sh)
#   make bench-serve        ml-serve against llama-server on the same
#                           weights (bench/bench-serve.sh)
#
# Builds that cannot link them (make check-m32) pass SKIP_TOOLS=ml-serve.

SERVE_PKGS := libmicrohttpd jansson
SERVE_CFLAGS := $(shell pkg-config --cflags $(SERVE_PKGS) 2>/dev/null)
SERVE_LIBS := $(shell pkg-config --libs $(SERVE_PKGS) 2>/dev/null)
SERVE_OBJ := $(patsubst %.c,$(B)/%.o,$(wildcard cmd/ml-serve/*.c))

$(SERVE_OBJ): ALL_CFLAGS += $(SERVE_CFLAGS)

$(B)/bin/ml-serve: $(SERVE_OBJ) $(CMD_COMMON_OBJ) $(JSON_SCHEMA_OBJ) $(B)/libmlcore.a
	@mkdir -p $(dir $@)
	$(if $(Q),@echo "  LD      $@")
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(SERVE_LIBS) $(LDLIBS_LIB)

# The request parser under the fuzzer and in the replay (fuzz.mk's rules
# with the parser's object and jansson added).
$(B)/fuzz/fuzz_serve_request.o: ALL_CFLAGS += $(SERVE_CFLAGS) -Icmd/ml-serve
$(B)/fuzz/lf_serve_request $(B)/fuzz/replay_serve_request: $(B)/cmd/ml-serve/request.o $(B)/cmd/ml-serve/schema.o \
    $(JSON_SCHEMA_OBJ)
# (the library again after the parser's object, which uses its grammars)
$(B)/fuzz/lf_serve_request $(B)/fuzz/replay_serve_request: LDLIBS_LIB += $(B)/libmlcore.a $(JANSSON_LIBS)
# The tool-call split, the same way.
$(B)/fuzz/fuzz_serve_tools.o: ALL_CFLAGS += $(SERVE_CFLAGS) -Icmd/ml-serve -Icmd/common
$(B)/fuzz/lf_serve_tools $(B)/fuzz/replay_serve_tools: $(B)/cmd/ml-serve/tools.o $(B)/cmd/ml-serve/tool_split.o \
                                                      $(B)/cmd/ml-serve/schema.o \
                                                      $(B)/cmd/ml-serve/request.o $(JSON_SCHEMA_OBJ)
$(B)/fuzz/lf_serve_tools $(B)/fuzz/replay_serve_tools: LDLIBS_LIB += $(B)/libmlcore.a $(JANSSON_LIBS) -lutf8proc -lm

.PHONY: check-serve-load check-openai check-json-schema check-serve-nginx bench-serve
check-serve-load: all $(TEST_TOOLS)
	MLCORE_BUILD=$(abspath $(B)) bash tests/serve/load.sh

check-openai: all $(TEST_TOOLS)
	MLCORE_BUILD=$(abspath $(B)) bash tests/serve/openai.sh

check-json-schema: all $(TEST_TOOLS)
	MLCORE_BUILD=$(abspath $(B)) bash tests/serve/json-schema.sh

check-serve-nginx: all $(TEST_TOOLS)
	MLCORE_BUILD=$(abspath $(B)) bash tests/serve/nginx.sh

bench-serve: all
	MLCORE_BUILD=$(abspath $(B)) BENCH_DIR=$(BENCH_DIR) bash bench/bench-serve.sh

# tests/serve/tool-split.c: the tool-call split and probe alone, for
# ml-serve.bats (built with ml-serve, linked with its objects).
ifneq ($(filter ml-serve,$(TOOLS)),)
TOOL_SPLIT := $(B)/tests/tool-split
cli tests: $(TOOL_SPLIT)
$(B)/tests/serve/tool-split.o: ALL_CFLAGS += $(SERVE_CFLAGS) -Icmd/ml-serve -Icmd/common
$(TOOL_SPLIT): $(B)/tests/serve/tool-split.o $(B)/cmd/ml-serve/tools.o $(B)/cmd/ml-serve/tool_split.o \
               $(B)/cmd/ml-serve/schema.o $(B)/cmd/ml-serve/request.o $(JSON_SCHEMA_OBJ) \
               $(B)/libmlcore.a
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(JANSSON_LIBS) $(LDLIBS_LIB)
endif
