# The levels of docs/ARCHITECTURE.md's map, once, for the two checks of its
# arrows (sourced, not run: tests/run.sh runs *.sh only): arrows.sh (the
# includes) and calls.sh (the calls).  A folder may include and call folders
# of a lower level only; for the calls, a folder below a component folder
# (lib/rdzv/etcd) has its component's level unless it is named here itself.

# shellcheck disable=SC2034 # read by the scripts that source this file
declare -A level=(
    [lib/util]=0
    [lib/sources]=1 [lib/topo]=1 [lib/progress]=1
    [lib/layout]=2 [lib/plan]=2
    [lib/net]=3
    [lib/bootstrap]=4
    [lib/rdzv]=5 [lib/nccl]=5
    [launcher/output]=10
    [launcher/contain]=11 [launcher/stacks]=11
    [launcher/cli]=12 [launcher/query]=12
    [launcher/worker]=13
    [launcher/job]=14
    [launcher/plugins]=15
    [launcher/head]=16 [launcher/run]=16
    [launcher]=17
)

# The library's files that amlrun links as objects of its own (the
# Makefile's RUN_LIB_SRCS; the library hides their symbols): the launcher
# may include their headers and call their hidden functions, and of the
# library's other internals include only the headers of names below.
# shellcheck disable=SC2034
launcher_links=(
    lib/net/loop lib/util/clock lib/util/secret lib/util/dltable
    lib/progress/page lib/progress/straggler lib/progress/hang
)
# Headers of the library's that the launcher includes for their names
# alone, nothing to link (a static inline function of a header is its
# includer's own code to calls.sh): the registry of rendezvous backends.
# shellcheck disable=SC2034
launcher_headers=(lib/rdzv/backends.h)
