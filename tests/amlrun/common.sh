# Helpers for the amlrun shell tests (sourced after tests/lib.sh).

export AMLRUN_PYTHON=$TORCH_PY
HELPERS=$TOP/tests/amlrun

# Output with the line a succeeding job ends with taken off ("amlrun: 2
# ranks exited 0 in 1.2 s (restarts 0)"), for the tests that compare the
# rest whole; amlrun_hang.sh checks the line itself.
no_success_line() {
    sed '/^amlrun: [0-9]* ranks\{0,1\} exited 0 in [0-9]*\.[0-9] s (restarts [0-9]*)$/d'
}

# wait_for COUNT TIMEOUT DIR REGEX: until COUNT names in DIR match REGEX
# from their start (a prefix, or 'ready\.0\.[0-9]*$'), or TIMEOUT s.
wait_for() {
    local want=$1 limit=$2 dir=$3 prefix=$4
    local deadline=$((SECONDS + limit))
    while :; do
        nfiles "$dir" "$prefix"
        [ "$NFILES" -ge "$want" ] && return 0
        [ "$SECONDS" -ge "$deadline" ] && return 1
        nap 0.02
    done
}

# wait_line FILE TEXT [SEC]: until FILE has a line TEXT, or SEC s (default
# 60); 1 when it did not come.
wait_line() {
    local end=$((SECONDS + ${3:-60}))
    until grep -qx "$2" "$1" 2>/dev/null; do
        [ "$SECONDS" -lt "$end" ] || return 1
        nap 0.05
    done
}

# A TCP port nobody listens on, for MASTER_PORT (tests run side by side).
free_port() {
    "$TORCH_PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# Processes whose environment carries MARKER (workers and their children
# inherit it from amlrun's environment).
marked_pids() {
    grep -lsa "$1" /proc/[0-9]*/environ 2>/dev/null |
        sed -n 's|^/proc/\([0-9]*\)/environ$|\1|p' | grep -vx "$$" || true
}

# wait_gone MARKER TIMEOUT: until no process carries MARKER.
wait_gone() {
    local deadline=$((SECONDS + $2))
    while [ -n "$(marked_pids "$1")" ]; do
        [ "$SECONDS" -ge "$deadline" ] && return 1
        nap 0.05
    done
    return 0
}

# wait_grep TIMEOUT PATTERN FILE: until FILE has a line matching PATTERN.
wait_grep() {
    local deadline=$((SECONDS + $1))
    until grep -q "$2" "$3" 2>/dev/null; do
        [ "$SECONDS" -ge "$deadline" ] && return 1
        nap 0.02
    done
}
