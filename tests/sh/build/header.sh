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
# Only amldist_* symbols are exported by the shared library, each at a
# version of lib/amldist.map (the version nodes are the absolute symbols).
syms=$(nm -D --defined-only "$BUILD"/lib/libamldist.so.* | awk '$2 != "A" {print $3}')
bad=$(echo "$syms" | grep -v '^amldist_' || true)
expect_eq "shared library exports only amldist_*" "$bad" ""
unversioned=$(echo "$syms" | grep -v '@@AMLDIST_1\.[012345]$' || true)
expect_eq "every exported symbol is versioned AMLDIST_1.0, 1.1, 1.2, 1.3, 1.4 or 1.5" "$unversioned" ""
nodes=$(nm -D --defined-only "$BUILD"/lib/libamldist.so.* | awk '$2 == "A" {print $3}' | tr '\n' ' ')
expect_eq "the version nodes" "$nodes" "AMLDIST_1.0 AMLDIST_1.1 AMLDIST_1.2 AMLDIST_1.3 AMLDIST_1.4 AMLDIST_1.5 "
# 1.1 added amldist_build_info (amlrun --version -v),
# amldist_plan_export_xml (amlrun --output), amldist_plan_rank_omp_threads,
# amldist_rdzv_gpu_share, amldist_rdzv_warnings and amldist_topo_locality
# (NCCL topology files), and only those.
expect_eq "AMLDIST_1.1 holds what 1.1 added" \
    "$(echo "$syms" | grep '@@AMLDIST_1\.1$' | tr '\n' ' ')" \
    "amldist_build_info@@AMLDIST_1.1 amldist_plan_export_xml@@AMLDIST_1.1 amldist_plan_rank_omp_threads@@AMLDIST_1.1 amldist_rdzv_gpu_share@@AMLDIST_1.1 amldist_rdzv_warnings@@AMLDIST_1.1 amldist_topo_locality@@AMLDIST_1.1 "
# 1.2 added amldist_progress (the progress page of amlrun) and the control
# plane's calls of issue 20 (clock offsets, hang views, gathers, per-step
# marks: amldist_rdzv(3)).
expect_eq "AMLDIST_1.2 holds what 1.2 added" \
    "$(echo "$syms" | grep '@@AMLDIST_1\.2$' | tr '\n' ' ')" \
    "amldist_progress@@AMLDIST_1.2 amldist_rdzv_answer@@AMLDIST_1.2 amldist_rdzv_clock_offset_ns@@AMLDIST_1.2 amldist_rdzv_events_fd@@AMLDIST_1.2 amldist_rdzv_gather@@AMLDIST_1.2 amldist_rdzv_gather_free@@AMLDIST_1.2 amldist_rdzv_host_time_ns@@AMLDIST_1.2 amldist_rdzv_next_gather@@AMLDIST_1.2 amldist_rdzv_next_request@@AMLDIST_1.2 amldist_rdzv_put_marks@@AMLDIST_1.2 amldist_rdzv_request_free@@AMLDIST_1.2 amldist_rdzv_set_view@@AMLDIST_1.2 amldist_rdzv_take_marks@@AMLDIST_1.2 amldist_rdzv_watch@@AMLDIST_1.2 "
# 1.3 added amldist_progress_expect (a long step announced to the hang
# watch), and only that.
expect_eq "AMLDIST_1.3 holds what 1.3 added" \
    "$(echo "$syms" | grep '@@AMLDIST_1\.3$' | tr '\n' ' ')" \
    "amldist_progress_expect@@AMLDIST_1.3 "
# 1.4 added amldist_rdzv_join_failed (a node that cannot start ends the
# forming job at once), and only that.
expect_eq "AMLDIST_1.4 holds what 1.4 added" \
    "$(echo "$syms" | grep '@@AMLDIST_1\.4$' | tr '\n' ' ')" \
    "amldist_rdzv_join_failed@@AMLDIST_1.4 "
# 1.5 added amldist_rdzv_join_status (the status of a job another node's
# failure ended before this node got a round), and only that.
expect_eq "AMLDIST_1.5 holds what 1.5 added" \
    "$(echo "$syms" | grep '@@AMLDIST_1\.5$' | tr '\n' ' ')" \
    "amldist_rdzv_join_status@@AMLDIST_1.5 "
check "a program linked against it needs AMLDIST_1.0" \
    sh -c "objdump -p '$BUILD/bin/amlrun' | grep -q 'AMLDIST_1.0'"
soname=$(objdump -p "$BUILD"/lib/libamldist.so | awk '/SONAME/ {print $2}')
major=$(sed -n 's/^#define AMLDIST_VERSION_MAJOR //p' "$TOP/include/amldist.h")
expect_eq "soname carries the major version" "$soname" "libamldist.so.$major"
