#!/usr/bin/env bash
# The public header compiles alone, pedantic, as C and as C++, with gcc and clang.
. "$(dirname "$0")/../../lib.sh"
src=$TEST_TMP/h.c
printf '#include <amldist.h>\nint main(void) { return amldist_version() == 0; }\n' >"$src"
cp "$src" "$TEST_TMP/h.cc"
for cc in gcc clang; do
    for std in c99 c11 c17; do
        check "header alone: $cc -std=$std -pedantic" \
            $cc -std=$std -pedantic -Wall -Wextra -Werror -I"$TOP/include" -c "$src" -o "$TEST_TMP/o.o"
    done
done
for cxx in g++ clang++; do
    check "header alone: $cxx -std=c++11 -pedantic" \
        $cxx -std=c++11 -pedantic -Wall -Wextra -Werror -I"$TOP/include" -c "$TEST_TMP/h.cc" -o "$TEST_TMP/o.o"
done
# Only amldist_* symbols are exported by the shared library.
bad=$(nm -D --defined-only "$BUILD"/lib/libamldist.so.* | awk '{print $3}' | grep -v '^amldist_' || true)
expect_eq "shared library exports only amldist_*" "$bad" ""
soname=$(objdump -p "$BUILD"/lib/libamldist.so | awk '/SONAME/ {print $2}')
major=$(sed -n 's/^#define AMLDIST_VERSION_MAJOR //p' "$TOP/include/amldist.h")
expect_eq "soname carries the major version" "$soname" "libamldist.so.$major"
