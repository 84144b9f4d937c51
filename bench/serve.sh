# shellcheck shell=bash
# serve.sh - sourced by the bench scripts that time a server: a port to
# start one on and a wait until it answers.
#
#   free_port              prints a free loopback port (the kernel's pick;
#                          taken again at once by a server)
#   wait_health URL PID LOG  waits until GET URL/health answers 200
#                          (llama-server says 503 while it loads); fails,
#                          printing LOG, when the server died, or after
#                          600 s
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

wait_health() {
    local end=$((SECONDS + 600))
    until curl -sf -o /dev/null "$1/health"; do
        kill -0 "$2" 2>/dev/null || { cat "$3" >&2; echo "the server ended" >&2; return 1; }
        ((SECONDS < end)) || { echo "no /health after 600 s" >&2; return 1; }
        sleep 0.1
    done
}
