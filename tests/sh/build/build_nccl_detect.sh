#!/usr/bin/env bash
# The Makefile's search for NCCL: NCCL_HOME in pip's layout (include/, lib/
# with only libnccl.so.2), a wrong NCCL_HOME, no CUDA at all; and the build
# always says whether NCCL support is in.
. "$(dirname "$0")/../../lib.sh"
status() { make -s -n -C "$TOP" BUILD="$TEST_TMP/b" "$@" lib 2>&1 | grep -m1 "NCCL support"; }

cuda=/usr/local/cuda
if [ ! -f "$cuda/include/cuda_runtime_api.h" ] || [ ! -e "$cuda/lib64/libnccl.so.2" ]; then
    skip "NCCL detection" "no CUDA toolkit with NCCL under $cuda"
else
    mkdir -p "$TEST_TMP/pip/include" "$TEST_TMP/pip/lib"
    cp "$cuda/include/nccl.h" "$TEST_TMP/pip/include/"
    ln -s "$cuda/lib64/libnccl.so.2" "$TEST_TMP/pip/lib/libnccl.so.2"
    expect_eq "NCCL_HOME in pip's layout is found" "$(status NCCL_HOME="$TEST_TMP/pip")" \
        "libamldist: NCCL support: yes (nccl.h in $TEST_TMP/pip/include, $TEST_TMP/pip/lib/libnccl.so.2, libcudart in $cuda/lib64)"
    make -s -n -C "$TOP" NCCL_HOME="$TEST_TMP/none" lib >"$TEST_TMP/out" 2>&1
    check "a wrong NCCL_HOME stops the build" test "$?" -ne 0
    check "a wrong NCCL_HOME: says what is missing" grep -q "NCCL_HOME=$TEST_TMP/none has no include/nccl.h" "$TEST_TMP/out"
    check "the default build finds NCCL and says so" sh -c 'status() { make -s -n -C "$1" BUILD="$2/b" lib 2>&1 | grep -m1 "NCCL support"; }; status "$1" "$2" | grep -q "^libamldist: NCCL support: yes"' _ "$TOP" "$TEST_TMP"
fi
if [ -f /usr/include/cuda_runtime_api.h ]; then
    skip "no CUDA" "this system has CUDA's headers in /usr/include"
else
    status CUDA_HOME=/nonexistent NCCL_HOME= >"$TEST_TMP/no"
    check "no CUDA: says NCCL support is out, and why" \
        grep -q "^libamldist: NCCL support: no (cuda_runtime_api.h not under CUDA_HOME=/nonexistent or /usr/include; .*amldist-nccl-check and examples/nccl_allreduce are not built)$" "$TEST_TMP/no"
fi
