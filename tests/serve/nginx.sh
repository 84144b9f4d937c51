#!/usr/bin/env bash
# nginx.sh - `make check-serve-nginx`: docs/deploy/nginx-ml-serve.conf,
# as docs/deploy.md tells a user to install it, run by Debian's nginx on
# loopback in front of two ml-serve replicas.  8 clients send 6 requests
# each (completions and chats, streamed and not, each with its own seed);
# every answer must be complete and equal to the same request sent
# straight to a replica.  Then one replica is killed and 8 more requests
# must all be answered by the other: nothing is lost.
source "$(dirname "$0")/common.sh"
command -v nginx >/dev/null || PATH=$PATH:/usr/sbin
command -v nginx >/dev/null || fail_with "check-serve-nginx needs nginx: apt-get install nginx"
conf=$HERE/../../docs/deploy/nginx-ml-serve.conf

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Two replicas (start_server sets URL and SERVER_PID for each in turn).
start_server "$WORK/log1" -m "$WORK/m.mlb" -t 1 --parallel 2 --chat-template llama2
url1=$URL pid1=$SERVER_PID
start_server "$WORK/log2" -m "$WORK/m.mlb" -t 1 --parallel 2 --chat-template llama2
url2=$URL pid2=$SERVER_PID
trap 'kill "$pid1" "$pid2" 2>/dev/null; [[ -f $WORK/nginx.pid ]] && kill "$(cat "$WORK/nginx.pid")"; [[ -n ${KEEP:-} ]] || rm -rf "$WORK"' EXIT

# The documented file with this run's ports, inside a minimal nginx.conf.
front=$(free_port)
sed -e "s/127.0.0.1:8081/${url1#http://}/; s/127.0.0.1:8082/${url2#http://}/" \
    -e "s/listen 127.0.0.1:8080/listen 127.0.0.1:$front/" "$conf" >"$WORK/ml-serve.conf"
grep -q "${url1#http://}" "$WORK/ml-serve.conf" && grep -q "listen 127.0.0.1:$front" "$WORK/ml-serve.conf" ||
    fail_with "the ports of $conf were not where this script expects them"
mkdir -p "$WORK/nginx"
{
    [[ $(id -u) == 0 ]] && echo "user root;"
    cat <<NGINX
daemon on;
pid $WORK/nginx.pid;
error_log $WORK/nginx-error.log;
events { worker_connections 256; }
http {
    access_log $WORK/nginx-access.log;
    client_body_temp_path $WORK/nginx/body;
    proxy_temp_path $WORK/nginx/proxy;
    fastcgi_temp_path $WORK/nginx/fastcgi;
    uwsgi_temp_path $WORK/nginx/uwsgi;
    scgi_temp_path $WORK/nginx/scgi;
    include $WORK/ml-serve.conf;
}
NGINX
} >"$WORK/nginx.conf"
nginx -p "$WORK/nginx" -c "$WORK/nginx.conf" -e "$WORK/nginx-error.log" ||
    fail_with "nginx did not start: $(cat "$WORK/nginx-error.log")"
FRONT=http://127.0.0.1:$front
for _ in $(seq 100); do curl -sf "$FRONT/health" >/dev/null && break; sleep 0.05; done

# body N: request N's path and JSON (one line: PATH BODY).
body() {
    local n=$1 stream=false
    ((n % 3 == 0)) && stream=true
    if ((n % 2)); then
        printf '/v1/chat/completions {"messages":[{"role":"user","content":"Question %d"}],"max_tokens":%d,"temperature":1,"seed":%d,"stream":%s}\n' \
            "$n" $((4 + n % 9)) "$n" "$stream"
    else
        printf '/v1/completions {"prompt":"Request %d:","max_tokens":%d,"temperature":0.9,"seed":%d,"stream":%s}\n' \
            "$n" $((4 + n % 9)) "$n" "$stream"
    fi
}

# text URL N: the text of request N's answer (streamed or whole).
text() {
    local path json
    read -r path json <<<"$(body "$2")"
    curl -sS --max-time 120 -H 'Content-Type: application/json' --data-binary "$json" "$1$path" |
        sed -n -e 's/^data: //' -e '/^{/p' |
        jq -sj 'map(.choices[0] | (.text // .message.content // .delta.content // "")) | add'
}

check() { # check N: through nginx equals straight to replica 1
    local a= b=
    a=$(text "$FRONT" "$1") && b=$(text "$url1" "$1") && [[ -n $a && $a == "$b" ]] ||
        { echo "request $1: through nginx '$a', straight '$b'" >&2; return 1; }
}

pids=()
for c in $(seq 0 7); do
    (for r in $(seq 0 5); do check $((c * 6 + r)) || exit 1; done) &
    pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || fail_with "a client got a wrong or missing answer"; done
# Both replicas served some of them.
for log in "$WORK/log1" "$WORK/log2"; do
    [[ $(grep -c ' 200 ' "$log") -gt 0 ]] || fail_with "$log served nothing"
done

disown "$pid2" # no "Killed" line from the shell
kill -KILL "$pid2"
while kill -0 "$pid2" 2>/dev/null; do sleep 0.01; done
for n in $(seq 100 107); do check "$n" || fail_with "request $n was lost after a replica died"; done
echo "check-serve-nginx: 56 requests through nginx, each equal to a direct one; none lost with a replica down"
