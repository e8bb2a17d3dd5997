#!/usr/bin/env bash
# `man amldist_init` after make install: every function the shared library
# exports (nm -D) has its page, a link to the section-3 page that documents
# it, and man renders that page.  `man amlrun` with man-db's default path:
# the default PREFIX puts the pages in one of its directories, and another
# PREFIX's pages are found from its bin/ in PATH, as man-db does.
. "$(dirname "$0")/../../lib.sh"
if ! have man || ! have nm; then skip "man links" "man or nm not installed"; exit 0; fi
tmake BUILD="$BUILD" all >/dev/null 2>&1
syms=$(nm -D --defined-only "$BUILD/lib/libamldist.so.1" | awk '$2 == "T" { sub(/@.*/, "", $3); print $3 }' | sort)
check "the library exports functions" test -n "$syms"
d=$TEST_TMP/dest
tmake BUILD="$BUILD" install DESTDIR="$d" >"$TEST_TMP/log" 2>&1
expect_eq "make install (default PREFIX) DESTDIR=...: exit 0" "$?" 0
man=$d/usr/local/share/man
nopage= wrong= blank=
# The text man renders for each page, once a page: the functions are links
# to a handful of section pages, and rendering one costs groff a tenth of a
# second (a hundred functions: most of the test's CPU).
declare -A text=()
for f in $syms; do
    # The page man opens for it, and the text it renders.
    page=$(cd / && MANPATH=$man man -w "$f" 2>/dev/null)
    case $page in "$man"/man3/*.3) ;; *) nopage="$nopage $f"; continue ;; esac
    awk '/^\.Sh NAME/ { n = 1; next } /^\.Sh/ { n = 0 } n && $1 == ".Nm" { print $2 }' "$page" |
        grep -qx "$f" || wrong="$wrong $f"
    if [ -z "${text[$page]+set}" ]; then
        text[$page]=$TEST_TMP/text.${#text[@]}
        (cd / && MANPATH=$man MANWIDTH=80 man "$f" 2>/dev/null) >"${text[$page]}"
    fi
    grep -q "$f" "${text[$page]}" || blank="$blank $f"
done
expect_eq "every exported function has a page (man -w)" "$nopage" ""
expect_eq "which documents it under NAME" "$wrong" ""
expect_eq "and man renders it" "$blank" ""
links=$(find "$man/man3" -name '*.3' | wc -l)
# A page may be named after its one function (amldist_progress.3).
names=$( (echo "$syms"; for p in "$TOP"/man/*.3; do basename "$p" .3; done) | sort -u | wc -l)
expect_eq "no page beyond the functions and the section pages" "$links" "$names"
check "amlrun.1 under the default PREFIX's share/man" test -f "$man/man1/amlrun.1"
expect_eq "man -w amlrun finds it there" "$(cd / && MANPATH=$man man -w amlrun)" "$man/man1/amlrun.1"
# man-db's default path (no MANPATH) holds /usr/local/share/man, the default
# PREFIX's: PATH as a login shell's.
env -u MANPATH PATH=/usr/local/bin:/usr/bin:/bin manpath 2>/dev/null | tr ':' '\n' | grep -qx /usr/local/share/man
expect_eq "man-db's default path holds /usr/local/share/man" "$?" 0
# Another PREFIX: man finds the pages from its bin/ in PATH.
tmake BUILD="$BUILD" install PREFIX=/opt/amldist DESTDIR="$d" >"$TEST_TMP/log" 2>&1
for f in amlrun amldist_init amldist_plan_rank_omp_threads; do
    got=$(cd / && env -u MANPATH PATH="$d/opt/amldist/bin:/usr/bin:/bin" man -w "$f" 2>&1)
    case $got in "$d"/opt/amldist/share/man/*) ok "PREFIX=/opt/amldist, its bin in PATH: man -w $f" ;;
    *) fail "PREFIX=/opt/amldist, its bin in PATH: man -w $f"; diag "$got" ;; esac
done
# make uninstall takes the links away with the pages.
for p in /usr/local /opt/amldist; do
    tmake BUILD="$BUILD" uninstall PREFIX=$p DESTDIR="$d" >/dev/null 2>&1
done
expect_eq "make uninstall leaves no page behind" "$(find "$d" -type f -o -type l | wc -l)" 0
