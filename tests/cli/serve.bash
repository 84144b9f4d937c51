# serve.bash - starting and stopping ml-serve for the tests (load serve),
# shared by ml-serve.bats and tests/serve/.  The server listens on a port
# the system picks (--port 0) and says which on its first line; the tests
# wait for that line and for /health, never for a time.

# start_server LOG ARGS...: ml-serve --port 0 ARGS in the background, its
# stderr in LOG; sets SERVER_PID and URL (http://127.0.0.1:PORT).
start_server() {
    local log=$1 end=$((SECONDS + 300))
    shift
    # emptied here, not only by the server's redirection (which happens
    # later, in the background): a log of an earlier server must not be
    # read for this one's port
    : >"$log"
    ml-serve --port 0 "$@" </dev/null >/dev/null 2>>"$log" 3>&- &
    SERVER_PID=$!
    until grep -qs 'listening on http://' "$log"; do
        if ! kill -0 "$SERVER_PID" 2>/dev/null; then
            cat "$log" >&2
            echo "ml-serve ended before it listened" >&2
            return 1
        fi
        ((SECONDS < end)) || { echo "ml-serve did not listen after 300 s" >&2; return 1; }
        sleep 0.005
    done
    URL=$(sed -n 's|.*listening on \(http://[^ ]*\)/ .*|\1|p' "$log" | head -1)
    curl -sf --retry 50 --retry-connrefused --retry-delay 0 "$URL/health" >/dev/null
}

# stop_server [SIGNAL]: signals the server (TERM) and waits for it; its
# exit status is the function's.
stop_server() {
    kill "-${1:-TERM}" "$SERVER_PID" 2>/dev/null || return 0
    wait "$SERVER_PID"
}

# wait_for_log LOG REGEX: waits until a line of LOG matches (the server's
# log lines come as requests complete).
wait_for_log() {
    local end=$((SECONDS + 300))
    until grep -Eq "$2" "$1"; do
        ((SECONDS < end)) || { echo "no line /$2/ in $1 after 300 s" >&2; cat "$1" >&2; return 1; }
        sleep 0.005
    done
}

# post PATH JSON [CURL-OPTION...]: POSTs JSON to the server; prints the body.
post() {
    local path=$1 body=$2
    shift 2
    curl -s "$@" -H 'Content-Type: application/json' --data-binary "$body" "$URL$path"
}

# status METHOD PATH [CURL-OPTION...]: the HTTP status only (the body goes to $BATS_TEST_TMPDIR/body).
status() {
    local method=$1 path=$2
    shift 2
    curl -s -o "${BATS_TEST_TMPDIR:-/tmp}/body" -w '%{http_code}' -X "$method" "$@" "$URL$path"
}
