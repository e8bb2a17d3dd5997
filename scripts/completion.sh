#!/bin/sh
# Writes amlrun's shell completion from its option table, at build time:
#   scripts/completion.sh bash|zsh AMLRUN >OUT
# AMLRUN --complete-spec prints the table (launcher/cli/opttable.c): one
# "long NAME ARG VALUES" or "short C NAME" line per option, tab-separated,
# ARG none, required or optional, VALUES the words the option takes or
# <file>, <dir>, <command>.  What is written here is the same for every
# table: the options and their values come only from the spec, so the
# completion cannot list an option that --help does not.
set -eu
shell=$1 amlrun=$2
spec=$("$amlrun" --complete-spec)
[ -n "$spec" ] || { echo "completion.sh: $amlrun printed no option table" >&2; exit 1; }

bash_completion() {
    echo "# bash completion for amlrun, written by scripts/completion.sh from"
    echo "# amlrun's option table at build time: do not edit."
    echo
    printf '%s\n' "$spec" | awk -F '\t' -v q="'" '
        $1 == "long" { long = long (long ? " " : "") $2
                       if ($3 == "required") req = req (req ? "|" : "") $2
                       if ($3 == "optional") opt = opt (opt ? "|" : "") $2
                       if ($4 != "") vals = vals "        " $2 ") _amlrun_v=" q $4 q " ;;\n" }
        $1 == "short" { shorts = shorts (shorts ? " " : "") "-" $2
                        short_case = short_case "        " $2 ") echo " $3 " ;;\n" }
        END {
            print "_amlrun_long=" q long q
            print "_amlrun_short=" q shorts q
            print "# What long option $1 takes: none, required or optional (--opt=V)."
            print "_amlrun_arg() {"
            print "    case $1 in"
            if (req) print "        " req ") echo required ;;"
            if (opt) print "        " opt ") echo optional ;;"
            print "        *) echo none ;;"
            print "    esac"
            print "}"
            print "# The values of long option $1, in _amlrun_v."
            print "_amlrun_values() {"
            print "    _amlrun_v="
            print "    case $1 in"
            printf "%s", vals
            print "    esac"
            print "}"
            print "# The long option of short option $1."
            print "_amlrun_short_long() {"
            print "    case $1 in"
            printf "%s", short_case
            print "    esac"
            print "}"
        }'
    cat <<'EOF'

# The option a typed word names, as amlrun reads it: '_' as '-', its own
# spelling or the one option it begins (--max_restart); empty otherwise.
_amlrun_resolve() {
    local w=${1#--} o found= n=0
    w=${w%%=*}
    w=${w//_/-}
    for o in $_amlrun_long; do
        if [[ $o == "$w" ]]; then
            echo "$o"
            return
        fi
        [[ $o == "$w"* ]] && found=$o && n=$((n + 1))
    done
    [[ $n -eq 1 ]] && echo "$found"
}

# COMPREPLY: the values of option $1 that begin with $2.
_amlrun_value() {
    _amlrun_values "$1"
    case $_amlrun_v in
    '<file>') COMPREPLY=($(compgen -f -- "$2")); compopt -o filenames 2>/dev/null ;;
    '<dir>') COMPREPLY=($(compgen -d -- "$2")); compopt -o filenames 2>/dev/null ;;
    '<command>') COMPREPLY=($(compgen -c -- "$2")) ;;
    *) COMPREPLY=($(compgen -W "$_amlrun_v" -- "$2")) ;;
    esac
}

_amlrun() {
    COMPREPLY=()
    # bash splits "--opt=value" at '=' (COMP_WORDBREAKS): join it back.
    local -a words=()
    local i cword w split=0 joining=0 last
    for ((i = 0; i < ${#COMP_WORDS[@]} && i <= COMP_CWORD; i++)); do
        w=${COMP_WORDS[i]}
        last=$((${#words[@]} - 1))
        if [[ $w == = && $last -gt 0 && ${words[last]} == --* &&
              ${words[last]} != *=* ]]; then
            words[last]+==
            joining=1
        elif [[ $joining -eq 1 ]]; then
            words[last]+=$w
            joining=0
        else
            words+=("$w")
            continue
        fi
        [[ $i -eq $COMP_CWORD ]] && split=1
    done
    cword=$((${#words[@]} - 1))
    local cur=${words[cword]} o c
    # Where amlrun's options end and the command begins.
    for ((i = 1; i < cword; i++)); do
        w=${words[i]}
        case $w in
        --) ((i++)); break ;;
        --*=*) ;;
        --*)
            o=$(_amlrun_resolve "$w")
            if [[ -n $o && $(_amlrun_arg "$o") == required ]]; then
                ((i++))
                if [[ $i -eq $cword ]]; then
                    _amlrun_value "$o" "$cur"
                    return
                fi
            fi
            ;;
        -?*)
            # -mv, -r3, -r 3: the first option that takes a value ends it.
            for ((c = 1; c < ${#w}; c++)); do
                o=$(_amlrun_short_long "${w:c:1}")
                [[ -n $o && $(_amlrun_arg "$o") == required ]] || continue
                if [[ $c -eq $((${#w} - 1)) ]]; then
                    ((i++))
                    if [[ $i -eq $cword ]]; then
                        _amlrun_value "$o" "$cur"
                        return
                    fi
                fi
                break
            done
            ;;
        *) break ;;
        esac
    done
    if [[ $i -lt $cword || ( $i -eq $cword && ( $cur != -* || ${words[i-1]} == -- ) ) ]]; then
        # The command (a script, a program) and its arguments: files.
        if [[ $i -eq $cword && $cur != */* ]]; then
            COMPREPLY=($(compgen -c -- "$cur") $(compgen -f -- "$cur"))
        else
            COMPREPLY=($(compgen -f -- "$cur"))
        fi
        compopt -o filenames 2>/dev/null
        return
    fi
    case $cur in
    --*=*)
        o=$(_amlrun_resolve "$cur")
        [[ -z $o || $(_amlrun_arg "$o") == none ]] && return
        _amlrun_value "$o" "${cur#*=}"
        # Unsplit (no '=' in COMP_WORDBREAKS), the word is the whole of it.
        if [[ $split -eq 0 ]]; then
            for ((c = 0; c < ${#COMPREPLY[@]}; c++)); do
                COMPREPLY[c]=${cur%%=*}=${COMPREPLY[c]}
            done
        fi
        ;;
    --*)
        local all=() n
        for n in $_amlrun_long; do all+=("--$n"); done
        COMPREPLY=($(compgen -W "${all[*]}" -- "$cur"))
        # Typed with '_' (torchrun's spelling): complete it so.
        if [[ $cur == *_* ]]; then
            local under=${cur//_/-}
            COMPREPLY=($(compgen -W "${all[*]}" -- "$under"))
            for ((c = 0; c < ${#COMPREPLY[@]}; c++)); do
                COMPREPLY[c]=${COMPREPLY[c]//-/_}
                COMPREPLY[c]=--${COMPREPLY[c]#__}
            done
        fi
        ;;
    -*)
        local all=($_amlrun_short) n
        for n in $_amlrun_long; do all+=("--$n"); done
        COMPREPLY=($(compgen -W "${all[*]}" -- "$cur"))
        ;;
    esac
}
complete -F _amlrun amlrun
EOF
}

zsh_completion() {
    echo "#compdef amlrun"
    echo "# zsh completion for amlrun, written by scripts/completion.sh from"
    echo "# amlrun's option table at build time: do not edit."
    echo
    echo "local -a args"
    echo "args=("
    printf '%s\n' "$spec" | awk -F '\t' -v q="'" '
        function action(v) {
            if (v == "<file>") return ":file:_files"
            if (v == "<dir>") return ":directory:_files -/"
            if (v == "<command>") return ":command:_command_names -e"
            if (v == "") return ":value: "
            return ":value:(" v ")"
        }
        $1 == "long" { arg[$2] = $3; val[$2] = $4
            if ($3 == "none") spec = "--" $2
            else if ($3 == "required") spec = "--" $2 "=" action($4)
            else spec = "--" $2 "=-" action($4)
            print "    " q spec q }
        $1 == "short" {
            if (arg[$3] == "required") print "    " q "-" $2 "+" action(val[$3]) q
            else print "    " q "-" $2 q }'
    cat <<'EOF'
    '1:command or script:_files'
    '*::argument:_files'
)
_arguments -S -s : "${args[@]}"
EOF
}

case $shell in
bash) bash_completion ;;
zsh) zsh_completion ;;
*) echo "usage: scripts/completion.sh bash|zsh AMLRUN" >&2; exit 2 ;;
esac
