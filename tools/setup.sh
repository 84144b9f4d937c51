#!/usr/bin/env bash
# setup.sh - installs, from Debian's packages, what mlcore needs: the one
# list the README's two commands and .ci/run share, so they cannot drift.
#
#   tools/setup.sh            build and run the commands, ml-serve's two
#                             libraries included, and `make check` (bats, jq,
#                             curl, check and groff-base)
#   tools/setup.sh --tests    also what make check-all needs: clang, the
#                             32-bit multilib, the AArch64 cross compiler and
#                             qemu-user
#
# Uses sudo when not root; does nothing where apt-get is missing (then
# install the same packages by other means).
set -euo pipefail

# The build and `make check`: compiler, libraries, the test tools.
MAIN="make gcc libc6-dev pkg-config check zlib1g-dev libdeflate-dev libutf8proc-dev
      libmicrohttpd-dev libjansson-dev bats jq curl groff-base python3-pip unzip ca-certificates"
# `make check-all` on top: clang, -m32 and AArch64 builds under qemu
# (curl also fetches their pinned libraries).
# gcc-12-multilib, not the gcc-multilib meta-package: that one conflicts
# with every cross compiler (gcc-aarch64-linux-gnu here).
TESTS="clang gcc-12-multilib gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user"

want=$MAIN
case "${1:-}" in
--tests) want="$MAIN $TESTS" ;;
"") ;;
*) echo "usage: tools/setup.sh [--tests]" >&2; exit 2 ;;
esac

if ! command -v apt-get >/dev/null; then
    echo "setup.sh: no apt-get here; install: $want" >&2
    exit 0
fi
SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
# A mirror mid-sync can fail one index; the install below still works from
# the lists that did load, and fails loudly if it cannot.
$SUDO apt-get update -qq || echo "setup.sh: apt-get update failed; using the lists we have" >&2
# shellcheck disable=SC2086 # the lists are words
$SUDO apt-get install -y -qq --no-install-recommends $want >/dev/null
