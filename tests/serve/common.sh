# common.sh - what the scripts of tests/serve/ share: the build's commands
# on PATH, a tiny fixture model with the Llama 2 tokenizer, and the
# server helpers of tests/cli/serve.bash.
set -euo pipefail
: "${MLCORE_BUILD:?set MLCORE_BUILD to the build directory (make sets it)}"
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PATH="$MLCORE_BUILD/bin:$PATH"
WORK=$(mktemp -d)
trap 'stop_server 2>/dev/null || true; rm -rf "$WORK"' EXIT
# shellcheck source=../cli/serve.bash
source "$HERE/../cli/serve.bash"
fail_with() {
    echo "$*" >&2
    return 1
}

"$MLCORE_BUILD/tests/mkmodel" -o "$WORK/m.mlb" --seed 3 vocab=32000 wtype=2 scale_f16=1 \
    shared_classifier=1 max_seq=2048
cp "$HERE/../fixtures/tok/llama2.mlt" "$WORK/m.mlt"
