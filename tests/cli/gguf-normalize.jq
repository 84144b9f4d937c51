# gguf-normalize.jq - the part of mlb-info --json --arrays on a GGUF that
# gguf-py's gguf_dump also reports, as tab-separated lines (used through
# gguf-normalize.sh by mlb-info-gguf.bats and tools/gguf-dump-reference.py):
#   head NAME VALUE                          version, counts, alignment, data offset
#                                            (not for a file without tensors: there
#                                            ggml, and so mlb-info, start the data
#                                            right after the infos, gguf-py at the
#                                            next multiple of the alignment)
#   kv KEY TYPE OFFSET VALUE                 a scalar (VALUE as jq writes it)
#   kv KEY array:ELEM[:ELEM] OFFSET COUNT VALUES
#                                            an array: its leaf values, since
#                                            gguf_dump flattens nested arrays
#   tensor NAME TYPE SHAPE INFO_OFFSET DATA_OFFSET BYTES
def leaves: if type == "object" then .values[] | leaves else . end;
def chain: [.elem_type] + (if .elem_type == "array" and (.values | length) > 0
                           then (.values[0] | chain) else [] end);
(. as $d | ["version", "tensor_count", "kv_count", "alignment"]
 + (if .tensor_count > 0 then ["data_offset"] else [] end) | .[] as $k
 | ["head", $k, ($d[$k] | tostring)] | join("\t")),
(.metadata | to_entries[] | .key as $k | .value
 | if .type == "array"
   then [.values[] | leaves] as $l
        | ["kv", $k, (["array"] + chain | join(":")), (.offset | tostring),
           ($l | length | tostring), ($l | tojson)]
   else ["kv", $k, .type, (.offset | tostring), (.value | tojson)] end
 | join("\t")),
(.tensors[] | ["tensor", .name, .type, (.shape | tojson), (.info_offset | tostring),
               (.file_offset | tostring), (.bytes | tostring)] | join("\t"))
