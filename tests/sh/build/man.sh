#!/usr/bin/env bash
# Every man page lints clean (mandoc -T lint -W warning) and renders with
# man -l; the library pages name every public function of the header.
. "$(dirname "$0")/../../lib.sh"
pages=("$TOP"/man/*.[1-8])
if [ ! -e "${pages[0]}" ]; then fail "man pages: none under man/"; exit 0; fi
for p in "${pages[@]}"; do
    name=$(basename "$p")
    if have mandoc; then
        lint=$(mandoc -T lint -W warning "$p" 2>&1)
        expect_eq "man $name: mandoc -T lint -W warning is clean" "$lint" ""
    else
        skip "man $name: mandoc lint" "mandoc not installed"
    fi
    if have man; then
        err=$(MANWIDTH=80 man -l "$p" 2>&1 >"$TEST_TMP/render")
        if [ -z "$err" ] && [ -s "$TEST_TMP/render" ]; then
            ok "man $name: man -l renders"
        else
            fail "man $name: man -l renders"; diag "$err"
        fi
    else
        skip "man $name: man -l" "man not installed"
    fi
done
# Every AMLDIST_API function is documented: those of amldist.h always, those
# of include/amldist/X.h once their page man/amldist_X.3 exists.
headers=("$TOP"/include/amldist.h)
for h in "$TOP"/include/amldist/*.h; do
    [ -e "$TOP/man/amldist_$(basename "$h" .h).3" ] && headers+=("$h")
done
missing=
for f in $(sed -n 's/^AMLDIST_API[^(]*[ *]\(amldist_[a-z0-9_]*\)(.*/\1/p' \
        "${headers[@]}" | sort -u); do
    grep -q "^\.Fn $f\b\|^\.Nm $f\b\|\\\\fB$f\\\\fR\|^\.B $f\b" "${pages[@]}" ||
        missing="$missing $f"
done
expect_eq "man pages document every public function" "$missing" ""
