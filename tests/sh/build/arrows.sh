#!/usr/bin/env bash
# The include arrows of docs/ARCHITECTURE.md: a component folder includes
# only its own files and the folders below it, so that the arrows go one
# way; and no two files include each other, however far round.
. "$(dirname "$0")/../../lib.sh"

# Levels, lowest first, and the library's files amlrun links itself.
. "$(dirname "$0")/levels.bash"
linked=" ${launcher_links[*]/%/.h} "

cd "$TOP" || exit 1
edges=$TEST_TMP/edges
: >"$edges"
bad=()
unknown=()
for f in lib/*/*.[ch] launcher/*.[ch] launcher/*/*.[ch]; do
    [ -f "$f" ] || continue
    from=$(dirname "$f")
    [ -n "${level[$from]+x}" ] || { unknown+=("$from"); continue; }
    while IFS=: read -r line target; do
        case $f in lib/*) root=lib ;; *) root=launcher ;; esac
        if [ -f "$root/$target" ]; then
            path=$root/$target
        elif [ -f "$from/$target" ]; then
            path=$from/$target
        elif [ "$root" = launcher ] && [ -f "lib/$target" ]; then
            path=lib/$target # the launcher's one use of a library source
        else
            continue # a public header (include/) or a system one
        fi
        echo "$f $path" >>"$edges"
        to=$(dirname "$path")
        [ "$to" = "$from" ] && continue
        if [ -z "${level[$to]+x}" ]; then
            unknown+=("$to")
        elif [ "${level[$to]}" -ge "${level[$from]}" ] &&
            ! { [ "$root" = launcher ] && [[ $linked == *" $path "* ]]; }; then
            bad+=("$f:$line includes $path ($from may not include $to)")
        fi
    done < <(grep -n '^#include "' "$f" | sed 's/^\([0-9]*\):#include "\([^"]*\)".*/\1:\2/')
done
expect_eq "every component folder has a level in this test and docs/ARCHITECTURE.md" \
    "$(printf '%s\n' "${unknown[@]}" | sort -u | sed '/^$/d')" ""
expect_eq "includes go one way only (down the levels)" "$(printf '%s\n' "${bad[@]}" | sed '/^$/d')" ""
loops=$(tsort "$edges" 2>&1 >/dev/null | grep -v '^tsort: -: input contains a loop:' || true)
expect_eq "no include circles between files" "$loops" ""
check "docs/ARCHITECTURE.md names every component folder" \
    sh -c 'for d in lib/*/ launcher/*/; do grep -q "${d%/}" docs/ARCHITECTURE.md || { echo "missing: $d"; exit 1; }; done'
