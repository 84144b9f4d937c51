// json-schema-llama.cpp - llama.cpp's json_schema_to_grammar on the schema
// read from stdin (tools/json-schema-reference.sh links it against the
// libllama-common.so of a llama.cpp build); exit 1 with its message when
// it refuses.
#include "json-schema-to-grammar.h"

#include <iostream>
#include <sstream>

int main() {
    std::stringstream in;
    in << std::cin.rdbuf();
    try {
        std::cout << json_schema_to_grammar(common_json::parse(in.str()), /* force_gbnf */ true);
    } catch (const std::exception & e) {
        std::cerr << e.what() << "\n";
        return 1;
    }
    return 0;
}
