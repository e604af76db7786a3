#!/bin/bash
# run.sh SRC BUILD - tact as a user embeds it: installs the build into a
# temporary prefix, checks that libtact.so exports only tact_*, builds every
# example out of tree against the install with pkg-config and with CMake,
# runs each and compares its output with examples/expected/, and links a
# program that defines tact's internal names against libtact.so.
set -euo pipefail
src=$(cd "$1" && pwd)
build=$(cd "$2" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tact-install-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "install test: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
pc=$(find "$tmp/prefix" -name tact.pc)
[ -n "$pc" ] || fail "no tact.pc installed"
export PKG_CONFIG_PATH=$(dirname "$pc")
libdir=$(pkg-config --variable=libdir tact)
for f in "$tmp/prefix/include/tact.h" "$libdir/libtact.a" "$libdir/libtact.so" "$libdir/cmake/tact/tactConfig.cmake"; do
    [ -e "$f" ] || fail "$f was not installed"
done
soname=$(objdump -p "$libdir/libtact.so" | awk '$1 == "SONAME" {print $2}')
[ "$soname" = libtact.so.0 ] || fail "soname is '$soname', not libtact.so.0"

# Only the public API leaves the shared library (A: the version node).
exported=$(nm -D --defined-only "$libdir/libtact.so" | awk '$2 != "A" {print $3}')
[ -n "$exported" ] || fail "libtact.so exports nothing"
stray=$(echo "$exported" | grep -v '^tact_' || true)
[ -z "$stray" ] || fail "libtact.so exports symbols outside the API: $(echo $stray | head -c 300)"
echo "libtact.so exports $(echo "$exported" | wc -l) symbols, all tact_*"

examples="worked_example mlp errors transport fashion_mlp"
# pkg-config
for ex in $examples; do
    cc -std=c11 -Wall -Wextra -Werror "$src/examples/$ex.c" $(pkg-config --cflags --libs tact) -lm \
        -Wl,-rpath,"$libdir" -o "$tmp/pc-$ex" || fail "$ex does not build with pkg-config"
done
cc -std=c11 -Wall -Wextra -Werror "$src/tests/install/own_symbols.c" $(pkg-config --cflags --libs tact) \
    -Wl,-rpath,"$libdir" -o "$tmp/own_symbols" || fail "own_symbols does not link"
# CMake
cmake -S "$src/examples" -B "$tmp/cmake" -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null || fail "find_package(tact) failed"
cmake --build "$tmp/cmake" >/dev/null || fail "the examples do not build with CMake"

cd "$tmp"
for ex in $examples; do
    for bin in "$tmp/pc-$ex" "$tmp/cmake/$ex"; do
        args=()
        [ "$ex" = transport ] && args=(tcp run.tlog)
        out=$("$bin" "${args[@]}") || fail "$bin exited with $?"
        diff <(echo "$out") "$src/examples/expected/$ex.txt" >&2 || fail "$bin printed other output (above)"
    done
done
"$build/tact" replay run.tlog >/dev/null || fail "the transport example's log does not replay"
"$tmp/own_symbols" || fail "a program with its own ta_grow, ta_malloc and ta_hash128 failed"
echo "every example built with pkg-config and CMake and printed what it should"
