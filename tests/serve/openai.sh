#!/usr/bin/env bash
# openai.sh - `make check-openai`: ml-serve answering the official openai
# Python client (pip install openai), tests/serve/openai-client.py, and
# an agent framework on it (pip install openai-agents), openai-agent.py.
source "$(dirname "$0")/common.sh"
python3 -c 'import openai' 2>/dev/null ||
    fail_with "check-openai needs the openai package: pip install openai"
start_server "$WORK/log" -m "$WORK/m.mlb" -t 1 --parallel 2 --chat-template llama2 --api-key k3y
python3 -c 'import agents' 2>/dev/null ||
    fail_with "check-openai needs the openai-agents package: pip install openai-agents"
python3 "$HERE/openai-client.py" "$URL/v1" k3y
python3 "$HERE/openai-agent.py" "$URL/v1" k3y
stop_server
