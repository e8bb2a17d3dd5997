#!/usr/bin/env bash
# amlrun beside real torchrun (Debian's torch 1.13, through
# bench/torchrun-wrapper.py): the same command lines and PET_* variables,
# and every worker's torchrun variables, argv and interpreter compared rank
# by rank.  Values that differ by design are masked per case: the random
# master port and address of a c10d rendezvous.  TORCHELASTIC_ERROR_FILE and
# TORCHELASTIC_USE_AGENT_STORE are not compared here.
# amldist-test: slow (one of the longest: tests/run.sh starts it early)
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/amlrun/common.sh"
d=$TEST_TMP/compat
mkdir -p "$d"
unset OMP_NUM_THREADS

# torchrun: bench/torchrun-wrapper.py's, each run a fork of one interpreter
# that imported torch once (tests/amlrun/torchrun_forks.py): the same code
# as `torchrun ARGS` from a shell, without the second or so of CPU that
# importing torch costs each of the 16 runs here.
coproc TR { exec "$TORCH_PY" "$HELPERS/torchrun_forks.py" 2>"$d/forks.err"; }
tr_pid=$TR_PID tr_in=${TR[1]} tr_out=${TR[0]}
NREQ=0
# tr_start [VAR=VALUE | -u VAR]... -- ARGS...: `torchrun ARGS` in $d with
# that environment, started; its directory (out, err) in REQ.
tr_start() {
    local envs=()
    while [ "$1" != -- ]; do envs+=("$1"); shift; done
    shift
    REQ=$d/tr.$((++NREQ))
    mkdir "$REQ"
    (cd "$d" && env "${envs[@]}" env -0) >"$REQ/env"
    printf '%s\0' "$@" >"$REQ/argv"
    echo "$REQ" >&"$tr_in"
}
# tr_wait: until the next run ends, its status in TR_RC ("none"
# when the interpreter died or did not answer for 150 s).
tr_wait() {
    read -r -t 150 _ TR_RC <&"$tr_out" || TR_RC=none
}

cat >"$d/w.py" <<'PY'
import json, os, sys
KEYS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK",
        "GROUP_WORLD_SIZE", "ROLE_RANK", "ROLE_WORLD_SIZE", "ROLE_NAME",
        "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RESTART_COUNT",
        "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_RUN_ID",
        "NCCL_ASYNC_ERROR_HANDLING", "TORCH_NCCL_ASYNC_ERROR_HANDLING",
        "OMP_NUM_THREADS")
# One write per line: under python -u, print() writes each of its items on
# its own, and torchrun's workers share one stdout, so lines would mix.
line = " ".join(["rank=%s" % os.environ.get("RANK")] +
                ["%s=%s" % (k, os.environ.get(k, "-")) for k in sorted(KEYS)] +
                ["name=" + __name__, "exe=" + sys.executable,
                 "argv=" + json.dumps(sys.argv, separators=(",", ":"))])
os.write(1, (line + "\n").encode())
PY
cp "$d/w.py" "$d/wscript"; chmod 644 "$d/wscript"

# ranks OUT MASK: the rank lines of OUT in rank order, with the values of
# the variables in MASK replaced by '*'.
ranks() {
    local sed=() k
    for k in $2; do sed+=(-e "s/ $k=[^ ]*/ $k=*/"); done
    grep '^rank=' "$1" | sed "${sed[@]}" -e 's/$//' | sort -t= -k2 -n
}

# side NAME NPROC MASK [VAR=VALUE | -u VAR]... -- ARGS...: torchrun ARGS and
# amlrun ARGS in $d with the same environment; each rank's line must match.
side() {
    local name=$1 nproc=$2 mask=$3; shift 3
    local envs=()
    while [ "$1" != -- ]; do envs+=("$1"); shift; done
    shift
    tr_start "${envs[@]}" -- "$@"
    tr_wait
    local trc=$TR_RC
    cp "$REQ/out" "$d/t.out"
    cp "$REQ/err" "$d/t.err"
    (cd "$d" && env "${envs[@]}" timeout 120 "$AMLRUN" -q "$@") >"$d/a.out" 2>"$d/a.err"
    local arc=$?
    expect_eq "$name: both exit 0" "$trc $arc" "0 0"
    [ "$trc" = 0 ] || sed 's/^/# torchrun: /' "$d/t.err" | tail -5
    [ "$arc" = 0 ] || sed 's/^/# amlrun: /' "$d/a.err" | tail -5
    compare "$name" "$nproc" "$mask"
}

compare() {
    local name=$1 nproc=$2 mask=$3 r
    ranks "$d/t.out" "$mask" >"$d/t.ranks"
    ranks "$d/a.out" "$mask" >"$d/a.ranks"
    expect_eq "$name: $nproc workers under each" \
        "$(wc -l <"$d/t.ranks") $(wc -l <"$d/a.ranks")" "$nproc $nproc"
    for ((r = 0; r < nproc; r++)); do
        expect_eq "$name: rank $r as under torchrun" \
            "$(grep "^rank=$r " "$d/a.ranks")" "$(grep "^rank=$r " "$d/t.ranks")"
    done
}

port=$(free_port)
tr_start -- --master_port "$port" w.py
tr_wait
if [ "$TR_RC" != 0 ] || ! grep -q '^rank=0 ' "$REQ/out"; then
    cat "$d/forks.err" "$REQ/err" 2>/dev/null | tail -3 | sed 's/^/# /'
    skip "amlrun beside torchrun" "torchrun (torch.distributed.run under $TORCH_PY) cannot run here"
    exit 0
fi

side "torchrun's options" 2 "" -- --nproc_per_node 2 --master_port "$(free_port)" \
    --role trainer --rdzv_conf 'join_timeout=5,foo=bar' --monitor_interval 0.5 \
    --start_method fork --rdzv_id job7 --max_restarts 2 w.py a --b
side "PET_* variables instead of options" 2 "" PET_NPROC_PER_NODE=2 PET_NNODES=1 \
    PET_NODE_RANK=0 PET_MASTER_ADDR=127.0.0.1 PET_MASTER_PORT="$(free_port)" \
    PET_RDZV_ID=pet PET_MAX_RESTARTS=1 PET_ROLE=worker PET_RDZV_BACKEND=static \
    PET_RDZV_CONF=timeout=60 PET_MONITOR_INTERVAL=1 PET_START_METHOD=spawn -- w.py
side "an option beats its PET_ variable" 2 "" PET_NPROC_PER_NODE=3 PET_ROLE=x -- \
    --nproc_per_node 2 --role y --master_port "$(free_port)" w.py
side "PET_RDZV_ENDPOINT beats --master_addr" 2 "" \
    PET_RDZV_ENDPOINT="127.0.0.1:$(free_port)" -- --nproc_per_node 2 --master_addr 10.9.9.9 w.py
cpus=$(getconf _NPROCESSORS_ONLN)
if [ "$cpus" -le 16 ]; then
    side "--nproc_per_node cpu" "$cpus" "" OMP_NUM_THREADS=1 -- --nproc_per_node cpu \
        --master_port "$(free_port)" w.py
else
    skip "--nproc_per_node cpu" "$cpus CPUs: too many workers for a test"
fi
side "a script without .py" 2 "" -- --nproc_per_node 2 --master_port "$(free_port)" wscript x
side "-m module" 2 "" -- --nproc_per_node 2 --master_port "$(free_port)" -m w y
side "--no_python" 2 "" -- --nproc_per_node 2 --master_port "$(free_port)" \
    --no_python "$TORCH_PY" w.py z
side "--run_path" 2 "" -- --nproc_per_node 2 --master_port "$(free_port)" --run_path \
    "$d/w.py" r
side "PYTHON_EXEC" 2 "" -u AMLRUN_PYTHON PYTHON_EXEC="$TORCH_PY" -- --nproc_per_node 2 \
    --master_port "$(free_port)" w.py
side "c10d rendezvous" 2 "MASTER_ADDR MASTER_PORT" -- --nproc_per_node 2 \
    --rdzv_backend c10d --rdzv_endpoint "127.0.0.1:$(free_port)" --rdzv_id c10djob w.py

# Two nodes of two workers each, told apart only by PET_NODE_RANK: the
# torchruns meet at the master; every rank of both nodes is compared.
p=$(free_port)
for n in 0 1; do
    tr_start PET_NNODES=2 PET_NODE_RANK=$n PET_NPROC_PER_NODE=2 PET_MASTER_PORT=$p \
        PET_MASTER_ADDR=127.0.0.1 -- w.py
done
tr_wait
tr_wait
cat "$d/tr.$((NREQ - 1))"/out "$d/tr.$((NREQ - 1))"/err "$REQ/out" "$REQ/err" >"$d/t.out"
pids=()
for n in 0 1; do
    (cd "$d" && PET_NNODES=2 PET_NODE_RANK=$n PET_NPROC_PER_NODE=2 PET_MASTER_PORT=$p \
        PET_MASTER_ADDR=127.0.0.1 timeout 120 "$AMLRUN" -q w.py) >"$d/amlrun$n.out" 2>&1 &
    pids+=($!)
done
wait "${pids[@]}"
cat "$d/amlrun0.out" "$d/amlrun1.out" >"$d/a.out"
compare "two nodes by PET_NODE_RANK" 4 ""

# -t 3: the tee'd lines' prefix, torchrun's "[<role><local rank>]:"
cat >"$d/tee.py" <<'PY'
import os
r = os.environ["RANK"]
os.write(1, ("hello %s\n" % r).encode())
os.write(2, ("oops %s\n" % r).encode())
PY
tr_start -- --nproc_per_node 2 --master_port "$(free_port)" --role trainer --tee 3 tee.py
tr_wait
trc=$TR_RC
(cd "$d" && timeout 120 "$AMLRUN" -q --nproc_per_node 2 --master_port "$(free_port)" \
    --role trainer --tee 3 tee.py) >"$d/a.out" 2>"$d/a.err"
expect_eq "--tee 3: both exit 0" "$trc $?" "0 0"
tee_lines() { cat "$@" | grep -aE '^\[[a-z]+[0-9]+\]:(hello|oops) ' | sort; }
expect_eq "--tee 3: the prefixed lines as torchrun's ([trainer0]:...)" \
    "$(tee_lines "$d/a.out" "$d/a.err")" "$(tee_lines "$REQ/out" "$REQ/err")"
check "--tee 3: torchrun's lines were there to compare" grep -q '^\[trainer1\]:oops 1' "$REQ/err"

# The torchruns' interpreter ends when its requests do; waited for, so that
# nothing outlives the test (and tests/run.sh counts its CPU).
eval "exec $tr_in>&-"
wait "$tr_pid"
