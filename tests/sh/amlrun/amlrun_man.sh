#!/usr/bin/env bash
# amlrun(1) passes mandoc's lint, renders, and lists exactly the options
# that --help lists.
. "$(dirname "$0")/../../lib.sh"
page=$TOP/man/amlrun.1
lint=$(mandoc -T lint -W warning "$page" 2>&1)
expect_eq "amlrun.1: mandoc -T lint -W warning is clean" "$lint" ""
check "amlrun.1: renders with man -l" sh -c "MANWIDTH=80 man -l '$page' 2>/dev/null | grep -q 'EXIT STATUS'"
from_help=$("$AMLRUN" --help | grep -oE -- '(^|[ ,(])--[a-z][a-z_-]*' | sed 's/^[ ,(]*//' | grep -v _ | sort -u)
from_man=$(grep -oE 'Fl \\-[a-z][a-z_-]*' "$page" | sed 's/^Fl \\/-/' | grep -v _ | sort -u)
expect_eq "every --help option is in amlrun.1, and only those" "$from_man" "$from_help"
for s in -m -v -q -h -V; do
    check "short option $s in --help and amlrun.1" sh -c \
        "'$AMLRUN' --help | grep -q -- ' $s, ' && grep -q '^\.It Fl ${s#-} ,' '$page'"
done
for section in "Ss Modes" "Sh ENVIRONMENT" "Sh EXIT STATUS" "Sh EXAMPLES"; do
    check "amlrun.1 has $section" grep -q "^\.$section" "$page"
done
check "amlrun.1 shows an Azure ML command job with mpirun ... amlrun" \
    sh -c "grep -q 'type: mpi' '$page' && grep -q '^\.Dl mpirun .* amlrun' '$page'"
