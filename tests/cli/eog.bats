#!/usr/bin/env bats
# eog.bats - the end-of-generation ids gguf2mlb writes into an .mlt's chat
# section are llama.cpp's, exactly, for every vocabulary fixture.  The
# reference is tests/fixtures/vocab/eog.tsv, written from llama.cpp's own
# load log by tools/eog-reference.sh, so these tests need neither
# llama.cpp nor the network.  No fixture is excepted: where llama.cpp had a
# bug for a vocabulary, its row would be named here with the reason.

bats_require_minimum_version 1.5.0

load helpers

VOCAB=$BATS_TEST_DIRNAME/../fixtures/vocab
TSV=$VOCAB/eog.tsv

# rows: the table's rows, without its comment lines.
rows() {
    grep -v '^#' "$TSV"
}

@test "eog.tsv: one row for every vocabulary fixture, ids increasing" {
    local want got file ids
    want=$(cd "$VOCAB" && printf '%s\n' *.gguf.gz)
    got=$(rows | cut -f1 | sort)
    [[ $got == "$want" ]] || fail_with "eog.tsv names"$'\n'"$got"$'\n'"but the fixtures are"$'\n'"$want"
    while IFS= read -r line <&3; do
        [[ $line =~ ^[^$'\t']+$'\t'[0-9]+(,[0-9]+)*$ ]] || fail_with "eog.tsv: not 'file<TAB>ids': $line"
        ids=${line#*$'\t'}
        [[ $(tr , '\n' <<<"$ids" | sort -n -u | paste -sd, -) == "$ids" ]] ||
            fail_with "eog.tsv: ids not increasing: $line"
    done 3< <(rows)
}

@test "gguf2mlb --tokenizer-only: the end-of-generation ids are llama.cpp's, fixture by fixture" {
    local d=$BATS_TEST_TMPDIR file want got n=0 bad=()
    while IFS=$'\t' read -r file want <&3; do
        gzip -dc "$VOCAB/$file" >"$d/v.gguf"
        run -0 --separate-stderr gguf2mlb -q -f --tokenizer-only -t "$d/v.mlt" "$d/v.gguf"
        got=$(mlt-dump --json "$d/v.mlt" | jq -er '[.eog[].id | tostring] | join(",")')
        [[ $got == "$want" ]] || bad+=("$file: ours $got, llama.cpp's $want")
        n=$((n + 1))
    done 3< <(rows)
    ((${#bad[@]} == 0)) || fail_with "end-of-generation ids differ:" "${bad[@]/#/$'\n'  }"
    ((n >= 12)) || fail_with "only $n rows in $TSV"
}
