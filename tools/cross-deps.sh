#!/bin/bash
# cross-deps.sh - the libraries a build for another architecture links
# against, unpacked into a private sysroot: Debian's -dev packages of
# libdeflate, utf8proc, zlib, check, subunit (check's dependency) and
# jansson (ml-run's and ml-serve's JSON) for
# i386 (make check-m32) or arm64 (make check-arm64), fetched from
# deb.debian.org and checked against the SHA-256 sums below.
#
#   tools/cross-deps.sh i386|arm64 SYSROOT
#
# Why not apt: a foreign architecture is not enabled on this machine
# (`dpkg --add-architecture i386` broke apt-get update here once), and only
# the static libraries (.a) and headers are needed, which `dpkg-deb -x`
# unpacks without installing anything.  The compiler side is Debian's
# gcc-12-multilib (i386) or gcc-aarch64-linux-gnu (arm64).
#
# The versions are those of Debian 12 (bookworm); a new Debian release
# changes them here, with their sums.  Re-running is cheap: downloads are
# kept in SYSROOT/../debs and a package already unpacked is skipped.
set -euo pipefail

MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

die() {
    echo "cross-deps.sh: $*" >&2
    exit 1
}

[[ $# -eq 2 ]] || die "usage: tools/cross-deps.sh i386|arm64 SYSROOT"
arch=$1
sysroot=$2

# pool path  sha256
case $arch in
i386)
    triplet=i386-linux-gnu
    probe_cc=("${CC:-cc}" -m32)
    hint="install gcc-12-multilib (apt-get install gcc-12-multilib)"
    PACKAGES=(
        "pool/main/libd/libdeflate/libdeflate-dev_1.14-1_i386.deb 9b0ae8b9c1373a991abbe0b7d912f9ec8043cae7750a4daf63aca0183d34bf3f"
        "pool/main/u/utf8proc/libutf8proc-dev_2.8.0-1_i386.deb 1ab182285d5f06c27675aa183a2bdecf606e98d5bed39addb93f66737ab0b6db"
        "pool/main/z/zlib/zlib1g-dev_1.2.13.dfsg-1_i386.deb b2adaed3da68fd50f463407eda78b3d658932f675c99d979d0fbfcb4584457b9"
        "pool/main/c/check/check_0.15.2-2+b1_i386.deb 348ecbc26121813ebfaac7b6d08b16f05cdbe8a0a8821d2da3667261c8dd786d"
        "pool/main/s/subunit/libsubunit-dev_1.4.0-3_i386.deb adbfc76c2a8bd383035cf72c720cd372d494880b9f169522192f5d0762df5366"
        "pool/main/j/jansson/libjansson-dev_2.14-2_i386.deb f958a64799d1cc1bc53f2ab2f16445cdcc8f70e87a822648d1118cae4655bb13"
    )
    ;;
arm64)
    triplet=aarch64-linux-gnu
    probe_cc=("${CROSS_CC:-aarch64-linux-gnu-gcc}")
    hint="install gcc-aarch64-linux-gnu (apt-get install gcc-aarch64-linux-gnu)"
    PACKAGES=(
        "pool/main/libd/libdeflate/libdeflate-dev_1.14-1_arm64.deb 1b2d3d454ca7a6e7351c2f16b7460033fbc24e7ee4f55e07e29ebf84ae7fa26e"
        "pool/main/u/utf8proc/libutf8proc-dev_2.8.0-1_arm64.deb 13e455bf5ccfab6b7a5b6e990143aa97dc3a7be6e9f96983298fc5c164ead656"
        "pool/main/z/zlib/zlib1g-dev_1.2.13.dfsg-1_arm64.deb afb60f0bae432f2f0edfe2d674e99c1a13a147c9aa2b52f2f23e3df19ece76f5"
        "pool/main/c/check/check_0.15.2-2+b1_arm64.deb e9764cca2f2ac61b1e79aa60d22b9178e760831c946093acc5cfa9beca3142d1"
        "pool/main/s/subunit/libsubunit-dev_1.4.0-3_arm64.deb 76def1d89a306d4e4b08aff0e6b25f031e968efd8e457951c87f51915530be7b"
        "pool/main/j/jansson/libjansson-dev_2.14-2_arm64.deb e13afbd4a4bdcdc7a2c9b8409c551a20fb79b164c46ff0f97e2c8117c60ce982"
    )
    ;;
*)
    die "unknown architecture '$arch' (expected i386 or arm64)"
    ;;
esac

debs=$(dirname "$sysroot")/debs
mkdir -p "$sysroot" "$debs"

for tool in curl dpkg-deb sha256sum; do
    command -v "$tool" >/dev/null || die "$tool is needed"
done

# The C library and libgcc come with the compiler packages; say so plainly
# instead of failing later in the linker.
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
echo 'int main(void) { return 0; }' >"$probe/t.c"
if ! "${probe_cc[@]}" -o "$probe/t" "$probe/t.c" 2>/dev/null; then
    die "${probe_cc[*]} cannot build $arch programs; $hint"
fi

for entry in "${PACKAGES[@]}"; do
    read -r path sum <<<"$entry"
    deb="$debs/$(basename "$path")"
    stamp="$sysroot/.unpacked-$(basename "$path" .deb)"
    [[ -e $stamp ]] && continue
    if [[ ! -f $deb ]] || ! echo "$sum  $deb" | sha256sum -c --quiet - 2>/dev/null; then
        echo "cross-deps.sh: fetching $MIRROR/$path" >&2
        curl -fsSL --retry 3 -o "$deb.part" "$MIRROR/$path" || die "cannot fetch $MIRROR/$path"
        mv "$deb.part" "$deb"
    fi
    echo "$sum  $deb" | sha256sum -c --quiet - || die "$deb: SHA-256 mismatch (expected $sum)"
    dpkg-deb -x "$deb" "$sysroot"
    touch "$stamp"
done

# An i386 build on x86-64 finds the kernel's <asm/...> headers through the
# /usr/include/asm link that the gcc-multilib meta-package makes; that
# package conflicts with every cross compiler, so CI installs
# gcc-12-multilib instead and the link is made here, in the sysroot (the
# x86 asm headers serve 32 and 64 bits alike).
if [[ $arch == i386 && ! -e $sysroot/usr/include/asm ]]; then
    [[ -d /usr/include/x86_64-linux-gnu/asm ]] ||
        die "/usr/include/x86_64-linux-gnu/asm is missing (apt-get install linux-libc-dev)"
    ln -s /usr/include/x86_64-linux-gnu/asm "$sysroot/usr/include/asm"
fi

# Only the static libraries are used: drop the shared-library links (their
# targets are in the runtime packages, not fetched), so no linker can pick
# a dangling .so over the .a.
find "$sysroot/usr/lib/$triplet" -maxdepth 1 -name '*.so' -delete
for lib in libdeflate libutf8proc libz libcheck libsubunit libjansson; do
    [[ -f $sysroot/usr/lib/$triplet/$lib.a ]] || die "$lib.a missing from $sysroot"
done
