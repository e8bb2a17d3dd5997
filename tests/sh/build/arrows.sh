#!/usr/bin/env bash
# The include arrows of docs/ARCHITECTURE.md: a component folder includes
# only its own files and the folders below it, so that the arrows go one
# way; and no two files include each other, however far round.
. "$(dirname "$0")/../../lib.sh"

# Levels, lowest first, and the library's internals amlrun may include:
# the headers of the files it links itself, and the headers of names.
. "$(dirname "$0")/levels.bash"
allowed=" ${launcher_links[*]/%/.h} ${launcher_headers[*]} "

# key_of DIR: key= the folder's entry in the levels, itself or, for a
# folder below a component (lib/rdzv/tcp), its component's (as calls.sh
# reads it); empty if neither has a level.
key_of() {
    key=$1
    [ -n "${level[$key]+x}" ] && return
    local rest=${1#*/}
    key=${1%%/*}/${rest%%/*}
    [[ $1 == */*/* && -n "${level[$key]+x}" ]] && return
    key=
}

cd "$TOP" || exit 1
edges=$TEST_TMP/edges
: >"$edges"
bad=()
unknown=()
for f in lib/*/*.[ch] lib/*/*/*.[ch] launcher/*.[ch] launcher/*/*.[ch]; do
    [ -f "$f" ] || continue
    from=$(dirname "$f")
    key_of "$from"
    from_key=$key
    [ -n "$from_key" ] || { unknown+=("$from"); continue; }
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
        key_of "$to"
        [ "$key" = "$from_key" ] && continue
        if [ -z "$key" ]; then
            unknown+=("$to")
        elif [ "$root" = launcher ] && [[ $path == lib/* ]]; then
            [[ $allowed == *" $path "* ]] ||
                bad+=("$f:$line includes $path (of the library's internals the launcher includes only$allowed)")
        elif [ "${level[$key]}" -ge "${level[$from_key]}" ]; then
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
