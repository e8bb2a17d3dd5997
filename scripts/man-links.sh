#!/bin/sh
# The names of the section-3 pages: every function a page lists under NAME
# (its .Nm lines) gets a page of its own that is a link to it, so that
# `man amldist_init` opens libamldist(3) as `man hwloc_get_obj_by_type` opens
# hwloc's page.  The NAME sections are the list (tests/sh/build/man.sh checks
# that they name every public function; tests/sh/build/man_links.sh that
# every exported symbol has its page).
#
#   scripts/man-links.sh --list PAGE...   "name page" a line, one per link
#   scripts/man-links.sh DIR PAGE...      writes DIR/name.3: ".so man3/page"
set -eu
list() {
    for page in "$@"; do
        awk -v page="${page##*/}" '
            /^\.Sh / { in_name = ($2 == "NAME"); next }
            in_name && $1 == ".Nm" && $2 != "" { print $2, page }
        ' "$page"
    done | while read -r name page; do
        # A name that has a page of its own keeps it.
        for p in "$@"; do [ "${p##*/}" != "$name.3" ] || continue 2; done
        printf '%s %s\n' "$name" "$page"
    done
}
if [ "${1:-}" = --list ]; then
    shift; list "$@"; exit 0
fi
dir=$1; shift
mkdir -p "$dir"
list "$@" | while read -r name page; do
    printf '.so man3/%s\n' "$page" >"$dir/$name.3"
done
