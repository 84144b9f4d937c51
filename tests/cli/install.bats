#!/usr/bin/env bats
# install.bats - `make install` into a DESTDIR: the commands, both
# libraries, the headers, the pkg-config file and the man pages land where
# they should; a program builds against them with pkg-config, statically
# and dynamically; `make uninstall` removes every file again.
bats_require_minimum_version 1.5.0
load helpers

setup_file() {
    REPO=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
    export REPO
}

# The sanitizer build's library needs its runtime in the test program too.
san_flags() {
    if nm "$MLCORE_BUILD/libmlcore.a" 2>/dev/null | grep -q __asan_; then
        echo "-fsanitize=address,undefined"
    fi
}

@test "make install and make uninstall under DESTDIR" {
    local root="$BATS_TEST_TMPDIR/root"
    run -0 make -C "$REPO" -s B="$MLCORE_BUILD" install DESTDIR="$root" PREFIX=/usr
    for f in usr/bin/mlb-info usr/bin/mlb-verify usr/lib/libmlcore.a \
        usr/lib/libmlcore.so.0.1.0 usr/include/mlcore.h usr/include/mlcore/quant.h \
        usr/lib/pkgconfig/mlcore.pc usr/share/man/man1/mlb-info.1 \
        usr/share/man/man1/mlb-verify.1 usr/share/man/man5/mlb.5 usr/share/man/man3/mlcore.3; do
        [[ -f $root/$f ]] || fail_with "missing $f"
    done
    [[ $(readlink "$root/usr/lib/libmlcore.so") == libmlcore.so.0 ]]
    [[ $(readlink "$root/usr/lib/libmlcore.so.0") == libmlcore.so.0.1.0 ]]
    [[ -x $root/usr/bin/mlb-info ]]
    run -0 "$root/usr/bin/mlb-info" --version
    [[ $output == "mlb-info (mlcore) 0.1.0" ]]

    # A program using the installed header and library through pkg-config.
    cat >"$BATS_TEST_TMPDIR/t.c" <<'C'
#include <mlcore.h>
#include <stdio.h>
int main(int argc, char **argv)
{
    ml_mlb *m;
    ml_error err;
    ml_status s = ml_mlb_open(argv[argc - 1], &m, &err);
    if (s) {
        printf("%s %s\n", ml_status_name(s), err.msg);
        return 1;
    }
    printf("%zu tensors, dim %u\n", ml_mlb_n_tensors(m), ml_mlb_get_header(m)->dim);
    ml_mlb_close(m);
    return 0;
}
C
    local pc="pkg-config --define-variable=prefix=$root/usr"
    export PKG_CONFIG_PATH="$root/usr/lib/pkgconfig"
    "$MKMODEL" -o "$BATS_TEST_TMPDIR/m.mlb"
    run -0 cc $(san_flags) "$BATS_TEST_TMPDIR/t.c" -o "$BATS_TEST_TMPDIR/t-static" \
        $($pc --cflags mlcore) "$root/usr/lib/libmlcore.a" $($pc --libs-only-l --static mlcore | sed 's/-lmlcore//')
    run -0 "$BATS_TEST_TMPDIR/t-static" "$BATS_TEST_TMPDIR/m.mlb"
    [[ $output == "21 tensors, dim 64" ]]
    run -0 cc $(san_flags) "$BATS_TEST_TMPDIR/t.c" -o "$BATS_TEST_TMPDIR/t-shared" \
        $($pc --cflags --libs mlcore)
    LD_LIBRARY_PATH="$root/usr/lib" run -0 "$BATS_TEST_TMPDIR/t-shared" "$BATS_TEST_TMPDIR/m.mlb"
    [[ $output == "21 tensors, dim 64" ]]

    run -0 make -C "$REPO" -s B="$MLCORE_BUILD" uninstall DESTDIR="$root" PREFIX=/usr
    run -0 find "$root" -type f -o -type l
    [[ -z $output ]] || fail_with "left after uninstall: $output"
}

@test "every public header compiles on its own, C and C++; only the umbrella includes them all" {
    local h n
    for h in "$REPO"/include/mlcore.h "$REPO"/include/mlcore/*.h; do
        n=${h#"$REPO"/include/}
        printf '#include <%s>\nint mlcore_header_check;\n' "$n" >"$BATS_TEST_TMPDIR/h.c"
        run -0 cc -std=c11 -Wall -Wextra -Werror -I"$REPO/include" -fsyntax-only "$BATS_TEST_TMPDIR/h.c"
        if command -v c++ >/dev/null; then
            cp "$BATS_TEST_TMPDIR/h.c" "$BATS_TEST_TMPDIR/h.cc"
            run -0 c++ -Wall -Werror -I"$REPO/include" -fsyntax-only "$BATS_TEST_TMPDIR/h.cc"
        fi
    done
    # no part includes the umbrella back (the loop this layout removed)
    run -1 grep -l '#include <mlcore.h>' "$REPO"/include/mlcore/*.h
}
