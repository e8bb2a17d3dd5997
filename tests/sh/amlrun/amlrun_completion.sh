#!/usr/bin/env bash
# amlrun's shell completion, written at build time from its option table:
# the bash function driven as bash drives it (COMP_WORDS, COMP_CWORD,
# COMP_LINE, COMP_POINT), its options held to --help's, each option's
# values to what the parser accepts (every word tried with --dry-run, on
# the Azure NDm A100 v4 XML so that "gpu" has GPUs, and the words its
# refusal of a bad value names) and to --help's list; the zsh function
# parses, loads, and completes on a pseudo-terminal.
. "$(dirname "$0")/../../lib.sh"
bash_file=$BUILD/completion/amlrun.bash
zsh_file=$BUILD/completion/_amlrun
if [ ! -f "$bash_file" ]; then fail "completion: $bash_file not built"; exit 0; fi
xml=$TOP/tests/topologies/azure-ndm-a100-v4.xml
unset HWLOC_XMLFILE CUDA_VISIBLE_DEVICES PET_NPROC_PER_NODE
check "amlrun.bash parses (bash -n)" bash -n "$bash_file"

d=$TEST_TMP/compl
mkdir -p "$d/logs" "$d/data"
touch "$d/train.py" "$d/tools.txt" "$d/hosts"

# complete WORD...: COMPREPLY for the command line WORD... (the last word
# the one under the cursor), sorted, one per line; bash splits at '=' as
# readline does, so "--cpu-bind=nu" is given as "--cpu-bind" "=" "nu".
complete_words() {
    (cd "$d" && bash -c '
        . "$1"; shift
        COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1))
        COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
        _amlrun
        printf "%s\n" "${COMPREPLY[@]}"' _ "$bash_file" "$@") | sort -u | sed '/^$/d'
}
lines() { printf '%s\n' "$@" | sort -u; }
spec=$("$AMLRUN" --complete-spec)

# --- every option of --help, and only those (as amlrun_man.sh reads --help)
from_help=$("$AMLRUN" --help | grep -oE -- '(^|[ ,(])--[a-z][a-z_-]*' | sed 's/^[ ,(]*//' | grep -v _ | sort -u)
from_completion=$(complete_words amlrun --)
expect_eq "amlrun --<TAB>: every option of --help, and only those" "$from_completion" "$from_help"
short_help=$("$AMLRUN" --help | grep -oE '^  -[a-zA-Z],' | tr -d ' ,' | sort -u)
short_completion=$(complete_words amlrun - | grep -v -- '^--')
expect_eq "amlrun -<TAB>: the short options of --help" "$short_completion" "$short_help"

# --- each option's values: the completion's, the parser's, --help's
while IFS=$'\t' read -r kind name arg values; do
    [ "$kind" = long ] && [ -n "$values" ] || continue
    case $values in '<'*) continue ;; esac
    if [ "$arg" = optional ]; then
        got=$(complete_words amlrun "--$name" = "")
    else
        got=$(complete_words amlrun "--$name" "")
    fi
    # shellcheck disable=SC2086
    expect_eq "--$name <TAB>: its values" "$got" "$(lines $values)"
    # What the option needs beside it to be tried alone.
    case $name in
    nproc-per-node|mode) ctx=() ;;
    rdzv-backend) ctx=(--nproc-per-node 1 --rdzv-endpoint 127.0.0.1:29400) ;;
    launcher) ctx=(--hosts a,b --nproc-per-node 1) ;;
    *) ctx=(--nproc-per-node 1) ;;
    esac
    bad=
    for v in $values; do
        if [ "$arg" = optional ]; then a=("--$name=$v"); else a=("--$name" "$v"); fi
        "$AMLRUN" --dry-run --topology "$xml" "${ctx[@]}" "${a[@]}" true >/dev/null 2>"$d/err"
        rc=$?
        # --status asks a running job: none is named "true" (1), but the
        # value was taken (a refused one is 2).
        [ "$name:$rc" = status:1 ] && rc=0
        [ "$rc" = 0 ] || bad="$bad $v($(head -c 200 "$d/err"))"
    done
    expect_eq "--$name: the parser accepts every value the completion offers" "$bad" ""
    if [ "$arg" = optional ]; then a=("--$name=bogus"); else a=("--$name" bogus); fi
    "$AMLRUN" --dry-run --topology "$xml" "${ctx[@]}" "${a[@]}" true >/dev/null 2>"$d/err"
    expect_eq "--$name bogus: refused (2), so the values above were tried" "$?" 2
    # The other way: the words the refusal names ("want a, b or c",
    # "expected ...") are the completion's, none missing from it.
    named=$(head -n 1 "$d/err" | sed -e 's/^[^:]*: [^:]*: \(want\|expected\|only\) //' \
        -e 's/ (see amlrun --help)$//' -e 's/--[a-z-]*=//' -e 's/, optionally.*//' \
        -e 's/,\{0,1\} or /, /g' | tr ',' '\n' | sed -e 's/^ *//' -e 's/ (.*)$//' -e "s/'//g" |
        grep -E '^[a-z0-9][a-z0-9-]*$' | sort -u)
    # shellcheck disable=SC2086
    expect_eq "--$name: the values its refusal names are the completion's" "$named" "$(lines $values)"
    # --help's line: "--name a|b|c" or "--name[=a]"; its lower-case words
    # are values, the capitals (N, LIST) placeholders.
    help_words=$("$AMLRUN" --help | sed -n "s/^ *\(-[a-zA-Z], \)\{0,1\}--$name[ =[]\{1,2\}\([^ ]*\).*/\2/p" |
        tr '|[]=' '\n\n\n\n' | grep -E '^[a-z0-9][a-z0-9-]*$' | sort -u)
    # shellcheck disable=SC2086
    expect_eq "--help lists the values of --$name" "$help_words" "$(lines $values)"
done <<<"$spec"

# --- the cases a user types
expect_eq "--cpu-bind <TAB>: the modes" "$(complete_words amlrun --cpu-bind "")" \
    "$(lines none numa exclusive socket package l3)"
expect_eq "--rdzv-backend <TAB>: static and the registry's (c10d, etcd)" \
    "$(complete_words amlrun --rdzv-backend "")" "$(lines static c10d etcd)"
expect_eq "--cpu-bind=nu<TAB> (split at '=' by bash)" "$(complete_words amlrun --cpu-bind = nu)" numa
expect_eq "--cpu<TAB>: the option it begins" "$(complete_words amlrun --cpu)" --cpu-bind
expect_eq "--cpu <TAB>: a prefix takes --cpu-bind's values" "$(complete_words amlrun --cpu "")" \
    "$(lines none numa exclusive socket package l3)"
expect_eq "--max_r<TAB>: torchrun's underscores kept" "$(complete_words amlrun --max_r)" --max_restarts
expect_eq "-r <TAB>: --redirects' values" "$(complete_words amlrun -r "")" "$(lines 0 1 2 3)"
expect_eq "-vt <TAB>: a cluster ending in -t" "$(complete_words amlrun -vt "")" "$(lines 0 1 2 3)"
expect_eq "--log-dir <TAB>: directories" "$(complete_words amlrun --log-dir "")" "$(lines data logs)"
expect_eq "--hostfile h<TAB>: files" "$(complete_words amlrun --hostfile h)" hosts
expect_eq "the command: files (train<TAB>)" "$(complete_words amlrun --nproc-per-node 2 train)" train.py
expect_eq "after the command, files: not amlrun's options" \
    "$(complete_words amlrun --nproc-per-node 2 train.py --cpu)" ""
expect_eq "after the command, files (to<TAB>)" "$(complete_words amlrun -r 3 train.py to)" tools.txt
expect_eq "after --, the command (tr<TAB>)" "$(complete_words amlrun --standalone -- tra | grep -x train.py)" train.py
expect_eq "the value of --nproc-per-node is not the command" \
    "$(complete_words amlrun --nproc-per-node tr)" ""

# --- zsh
if have zsh; then
    check "_amlrun parses (zsh -n)" zsh -n "$zsh_file"
    out=$(cd "$d" && zsh -f -c 'fpath=("$1" $fpath); autoload -U compinit; compinit -u -D
        autoload -U +X _amlrun && print -r -- ${+functions[_amlrun]}' _ "$(dirname "$zsh_file")" 2>&1)
    expect_eq "_amlrun loads in zsh's compinit" "$out" 1
    # An interactive zsh on a pseudo-terminal (zsh/zpty) types LINE and a
    # TAB; compadd, wrapped, writes what it is given to a file.  Each step
    # waits for its marker in the terminal's output, not for a time, and
    # nothing is typed before the prompt is up (zsh may drop typeahead when
    # its line editor starts).
    cat >"$d/drive.zsh" <<'EOF_ZSH'
zmodload zsh/zpty
dir=$1 out=$2 line=$3
zpty z "PS1='READY> ' zsh -f -i"
zpty -r z x '*READY> '
zpty -w z "fpath=($dir \$fpath); autoload -U compinit; compinit -u -D"
zpty -w z "compadd() { if (( \${@[(I)-a]} )); then print -r -- \"\${(P)\${@[-1]}}\" >>$out; else print -r -- \"\$*\" >>$out; fi; builtin compadd \"\$@\" }"
zpty -w z "print SETUP-DONE"
zpty -r z x '*SETUP-DONE*SETUP-DONE*READY> '
zpty -w -n z "$line"$'\t'
zpty -w -n z $'\C-u'
zpty -w z "print TAB-DONE"
zpty -r z x '*TAB-DONE*TAB-DONE*'
zpty -d z
EOF_ZSH
    zsh_complete() {
        rm -f "$d/zsh.out"
        (cd "$d" && timeout 120 zsh -f "$d/drive.zsh" "$(dirname "$zsh_file")" "$d/zsh.out" "$1") >/dev/null 2>&1
        cat "$d/zsh.out" 2>/dev/null
    }
    expect_eq "zsh: amlrun --cpu-bind <TAB>" "$(zsh_complete 'amlrun --cpu-bind ')" \
        "none numa exclusive socket package l3"
    expect_eq "zsh: amlrun --rdzv-backend <TAB>" "$(zsh_complete 'amlrun --rdzv-backend ')" "static c10d etcd"
    expect_eq "zsh: amlrun -r <TAB>" "$(zsh_complete 'amlrun -r ')" "0 1 2 3"
    check "zsh: amlrun --rdzv-b<TAB> offers --rdzv-backend" \
        sh -c "printf '%s\n' \"\$1\" | grep -qx -- --rdzv-backend" _ "$(zsh_complete 'amlrun --rdzv-b')"
    check "zsh: amlrun --nproc-per-node 2 trai<TAB>: the file" \
        sh -c "printf '%s\n' \"\$1\" | grep -q 'train.py'" _ "$(zsh_complete 'amlrun --nproc-per-node 2 trai')"
else
    skip "zsh completion" "zsh not installed"
fi
