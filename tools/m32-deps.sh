#!/bin/bash
# m32-deps.sh - the 32-bit x86 (i386) libraries the -m32 build links
# against, unpacked into a private sysroot: Debian's i386 -dev packages of
# libdeflate, utf8proc, zlib, check and subunit (check's dependency),
# fetched from deb.debian.org and checked against the SHA-256 sums below.
#
#   tools/m32-deps.sh SYSROOT      (make check-m32 runs it: build-m32/sysroot)
#
# Why not apt: the i386 architecture is not enabled on this machine
# (`dpkg --add-architecture i386` broke apt-get update here once), and only
# the static libraries (.a) and headers are needed, which `dpkg-deb -x`
# unpacks without installing anything.  The compiler side is Debian's
# gcc-multilib (apt-get install gcc-multilib).
#
# The versions are those of Debian 12 (bookworm); a new Debian release
# changes them here, with their sums.  Re-running is cheap: downloads are
# kept in SYSROOT/../debs and a package already unpacked is skipped.
set -euo pipefail

MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

# pool path  sha256
PACKAGES=(
    "pool/main/libd/libdeflate/libdeflate-dev_1.14-1_i386.deb 9b0ae8b9c1373a991abbe0b7d912f9ec8043cae7750a4daf63aca0183d34bf3f"
    "pool/main/u/utf8proc/libutf8proc-dev_2.8.0-1_i386.deb 1ab182285d5f06c27675aa183a2bdecf606e98d5bed39addb93f66737ab0b6db"
    "pool/main/z/zlib/zlib1g-dev_1.2.13.dfsg-1_i386.deb b2adaed3da68fd50f463407eda78b3d658932f675c99d979d0fbfcb4584457b9"
    "pool/main/c/check/check_0.15.2-2+b1_i386.deb 348ecbc26121813ebfaac7b6d08b16f05cdbe8a0a8821d2da3667261c8dd786d"
    "pool/main/s/subunit/libsubunit-dev_1.4.0-3_i386.deb adbfc76c2a8bd383035cf72c720cd372d494880b9f169522192f5d0762df5366"
)

die() {
    echo "m32-deps.sh: $*" >&2
    exit 1
}

[[ $# -eq 1 ]] || die "usage: tools/m32-deps.sh SYSROOT"
sysroot=$1
debs=$(dirname "$sysroot")/debs
mkdir -p "$sysroot" "$debs"

for tool in curl dpkg-deb sha256sum; do
    command -v "$tool" >/dev/null || die "$tool is needed"
done

# The 32-bit C library and libgcc come with gcc-multilib; say so plainly
# instead of failing later in the linker.
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
echo 'int main(void) { return 0; }' >"$probe/t.c"
if ! "${CC:-cc}" -m32 -o "$probe/t" "$probe/t.c" 2>/dev/null; then
    die "${CC:-cc} cannot build 32-bit programs; install gcc-multilib (apt-get install gcc-multilib)"
fi

for entry in "${PACKAGES[@]}"; do
    read -r path sum <<<"$entry"
    deb="$debs/$(basename "$path")"
    stamp="$sysroot/.unpacked-$(basename "$path" .deb)"
    [[ -e $stamp ]] && continue
    if [[ ! -f $deb ]] || ! echo "$sum  $deb" | sha256sum -c --quiet - 2>/dev/null; then
        echo "m32-deps.sh: fetching $MIRROR/$path" >&2
        curl -fsSL --retry 3 -o "$deb.part" "$MIRROR/$path" || die "cannot fetch $MIRROR/$path"
        mv "$deb.part" "$deb"
    fi
    echo "$sum  $deb" | sha256sum -c --quiet - || die "$deb: SHA-256 mismatch (expected $sum)"
    dpkg-deb -x "$deb" "$sysroot"
    touch "$stamp"
done

# Only the static libraries are used: drop the shared-library links (their
# targets are in the runtime packages, not fetched), so no linker can pick
# a dangling .so over the .a.
find "$sysroot/usr/lib/i386-linux-gnu" -maxdepth 1 -name '*.so' -delete
for lib in libdeflate libutf8proc libz libcheck libsubunit; do
    [[ -f $sysroot/usr/lib/i386-linux-gnu/$lib.a ]] || die "$lib.a missing from $sysroot"
done
