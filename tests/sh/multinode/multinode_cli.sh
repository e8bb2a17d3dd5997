#!/usr/bin/env bash
# Head-node mode's command line, through the real amlrun with --dry-run: the
# mpirun and srun commands it builds, the hostfile errors it reports (with
# FILE:LINE), its exit statuses, and that it knows every amlrun option that
# takes a value (it must, to find where the worker's command starts).
. "$(dirname "$0")/../../lib.sh"

# dry ARGS...: amlrun's dry run with a small, known environment.
dry() { env -i PATH=/usr/bin:/bin "$@"; }

got=$(dry "$AMLRUN" --hosts a,b --dry-run ./train.py --hosts x --lr 0.1)
expect_eq "--hosts a,b: mpirun command, options after the command left alone" "$got" \
    "mpirun -np 2 --host a:1,b:1 --npernode 1 --bind-to none -x PATH $AMLRUN --nnodes 2 ./train.py --hosts x --lr 0.1"

got=$(dry NCCL_IB_DISABLE=1 AMLRUN_X=1 AMLDIST_JOB_TOKEN=t-0123456789abcdef0123456789abcdef CUDA_VISIBLE_DEVICES=0,1 OMP_NUM_THREADS=4 \
      PYTHONPATH=/p MASTER_ADDR=a MASTER_PORT=1234 SECRET=s OMPI_MCA_btl=tcp "$AMLRUN" --hosts a:4,b:4 --dry-run t)
expect_eq "-x forwards PATH, PYTHONPATH, OMP_*, MASTER_ADDR, MASTER_PORT, AMLRUN_*, AMLDIST_*, NCCL_*, CUDA_*; not others" "$got" \
    "mpirun -np 2 --host a:1,b:1 --npernode 1 --bind-to none -x AMLDIST_JOB_TOKEN -x AMLRUN_X -x CUDA_VISIBLE_DEVICES -x MASTER_ADDR -x MASTER_PORT -x NCCL_IB_DISABLE -x OMP_NUM_THREADS -x PATH -x PYTHONPATH $AMLRUN --nnodes 2 --nproc-per-node 4 t"

got=$(dry "$AMLRUN" --nproc_per_node=8 --hosts=a,b,c --master_addr a --master-port 4000 --launcher mpirun \
      --log-dir 'my logs' --tee 3 -m --dry-run -- pkg.mod "it's" '')
expect_eq "options in any spelling; master options passed on; '--' kept; quoting" "$got" \
    "mpirun -np 3 --host a:1,b:1,c:1 --npernode 1 --bind-to none -x PATH $AMLRUN --nproc_per_node=8 --master_addr a --master-port 4000 --log-dir 'my logs' --tee 3 -m --nnodes 3 -- pkg.mod 'it'\\''s' ''"

printf '# DeepSpeed-style hostfile\nworker-0 slots=4\nworker-1 slots=4 # second\n\n' >"$TEST_TMP/hf"
got=$(dry "$AMLRUN" --hostfile "$TEST_TMP/hf" --nnodes 2:2 --dry-run t)
expect_eq "--hostfile: slots become --nproc-per-node; --nnodes N:N checked" "$got" \
    "mpirun -np 2 --host worker-0:1,worker-1:1 --npernode 1 --bind-to none -x PATH $AMLRUN --nnodes 2 --nproc-per-node 4 t"
got=$(dry "$AMLRUN" --hostfile "$TEST_TMP/hf" --nproc-per-node 2 --dry-run t)
expect_eq "--nproc-per-node wins over slots" "$got" \
    "mpirun -np 2 --host worker-0:1,worker-1:1 --npernode 1 --bind-to none -x PATH $AMLRUN --nproc-per-node 2 --nnodes 2 t"

# Slurm: chosen with --launcher slurm, or by SLURM_JOB_ID with a host list.
got=$(dry SLURM_JOB_ID=7 SLURM_JOB_NUM_NODES=4 "$AMLRUN" --launcher slurm --nproc-per-node 8 --dry-run t)
expect_eq "--launcher slurm: srun over the allocation" "$got" \
    "srun --nodes=4 --ntasks=4 --ntasks-per-node=1 --cpu-bind=none --kill-on-bad-exit=1 $AMLRUN --nproc-per-node 8 --nnodes 4 t"
got=$(dry SLURM_JOB_ID=7 "$AMLRUN" --hosts gpu1,gpu2 --dry-run t)
expect_eq "SLURM_JOB_ID + --hosts: srun on those nodes" "$got" \
    "srun --nodes=2 --ntasks=2 --ntasks-per-node=1 --nodelist=gpu1,gpu2 --cpu-bind=none --kill-on-bad-exit=1 $AMLRUN --nnodes 2 t"
got=$(dry SLURM_JOB_ID=7 "$AMLRUN" --hosts a,b --launcher mpirun --dry-run t | cut -d' ' -f1)
expect_eq "--launcher mpirun wins over SLURM_JOB_ID" "$got" "mpirun"

# errors: RC MESSAGE ARGS...: amlrun exits RC and says exactly MESSAGE.
errors() {
    local want_rc=$1 want_msg=$2 rc=0 out
    shift 2
    out=$(dry "$@" 2>&1 >/dev/null) || rc=$?
    local name="${*:2}"
    expect_eq "error: ${name//$TEST_TMP/TMP} -> $want_rc" "$rc: $out" "$want_rc: amlrun: $want_msg"
}
printf 'a slots=2\nb slots=two\n' >"$TEST_TMP/bad1"
errors 2 "$TEST_TMP/bad1:2: slots='two': want a whole number from 1 to 65536" \
    "$AMLRUN" --hostfile "$TEST_TMP/bad1" t
printf '# c\n\na slots=2\na slots=2\n' >"$TEST_TMP/bad2"
errors 2 "$TEST_TMP/bad2:4: host 'a' is listed twice (first at line 3)" \
    "$AMLRUN" --hostfile "$TEST_TMP/bad2" t
printf 'a cpus=2\n' >"$TEST_TMP/bad3"
errors 2 "$TEST_TMP/bad3:1: unknown key 'cpus' (want slots=N or max_slots=N)" \
    "$AMLRUN" --hostfile "$TEST_TMP/bad3" t
printf 'a slots=4\nb slots=8\n' >"$TEST_TMP/bad4"
errors 2 "$TEST_TMP/bad4:2: host 'b' has slots=8 but $TEST_TMP/bad4:1 (host 'a') has slots=4; amlrun starts the same number of processes on every host: make them equal or give --nproc-per-node" \
    "$AMLRUN" --hostfile "$TEST_TMP/bad4" t
errors 2 "cannot read hostfile $TEST_TMP/none: No such file or directory" \
    "$AMLRUN" --hostfile "$TEST_TMP/none" t
errors 2 "--hosts 'a,,b': item 2 has no host name" "$AMLRUN" --hosts a,,b t
errors 2 "--hostfile and --hosts both name the hosts: give one" \
    "$AMLRUN" --hosts a --hostfile "$TEST_TMP/hf" t
errors 2 "--nnodes 3, but --hosts names 2 hosts" "$AMLRUN" --hosts a,b --nnodes 3 t
errors 2 "--node-rank 1: in head-node mode each host's node rank comes from mpirun" \
    "$AMLRUN" --hosts a,b --node-rank 1 t
errors 2 "--launcher mpirun needs the hosts: give --hostfile FILE or --hosts a,b" \
    "$AMLRUN" --launcher mpirun t
errors 2 "--launcher slurm: how many nodes? Not inside an allocation (SLURM_JOB_NUM_NODES unset or bad): give --nnodes, --hosts or --hostfile" \
    "$AMLRUN" --launcher slurm t
errors 2 "no command given (see amlrun --help)" "$AMLRUN" --hosts a,b
# Without --dry-run it execs mpirun; one that cannot be found is status 127.
errors 127 "cannot run mpirun: No such file or directory" env PATH=/nonexistent "$AMLRUN" --hosts a,b t

# Head-node mode must know which of amlrun's options take a value, to find
# where the worker's command starts: it asks the option table
# (launcher/cli/opttable.c).  Every option `amlrun --help` lists, in both
# spellings, followed by the command `t`: "--nnodes 2" goes in just before
# the command, so a value taken for the command (or a command word taken for
# a value) shows in the tail.
help=$("$AMLRUN" --help)
valued=$(sed -n 's/^  \(-[a-zA-Z], \)\{0,1\}\(--[a-z-]*\) \([^ ][^ ]*\).*/\2 \3/p' <<<"$help")
flags=$(sed -n 's/^  \(-[a-zA-Z], \)\{0,1\}\(--[a-z-]*\)\(\[.*\|  .*\|\)$/\2/p' <<<"$help")
check "--help lists value-taking options (--nproc-per-node, --local-ranks-filter)" \
    grep -qx -e '--nproc-per-node .*' -e '--local-ranks-filter LIST' <<<"$valued"
check "--help lists flags (--standalone, --prefix)" grep -qx -e '--standalone' <<<"$flags"
# A value that the option handlers (launcher/cli/optapply.c) accept, from
# the help's metavariable.
value_for() {
    case ${1%%|*} in
        N | SEC) echo 2 ;; PORT) echo 4000 ;; HOST) echo h ;; HOST*) echo h:4000 ;;
        PROG) echo python3 ;; LIST | RANK) echo 0 ;; K=V*) echo join_timeout=5 ;;
        *) echo "${1%%|*}" ;;
    esac
}
while read -r opt meta; do
    case $opt in
        # they name the hosts, or are refused in head-node mode (above)
        --hostfile | --hosts | --node-rank) continue ;;
        # refused in every mode (torchrun 2.x's Python plug-in)
        --logs-specs) continue ;;
        # ask a running job (amlrun --status/--stacks [JOB]): no job to start
        --stacks | --status*) continue ;;
    esac
    val=$(value_for "$meta")
    # a LIST of signals, not of ranks
    [ "$opt" = --signals-to-handle ] && val=SIGTERM,SIGUSR1
    for spelling in "$opt" "--$(tr - _ <<<"${opt#--}")"; do
        got=$(dry "$AMLRUN" --hosts a,b --dry-run "$spelling" "$val" t 2>&1)
        expect_eq "head-node mode: $spelling $val t: the command is t" \
            "${got##* $AMLRUN }" "$(case $opt in
                --nnodes | --launcher) ;; *) printf '%s %s ' "$spelling" "$val" ;;
            esac)--nnodes 2 t"
    done
done <<<"$valued"
for opt in $flags; do
    case $opt in --dry-run | --topo | --help | --version | --make-secret | --status) continue ;; esac
    for spelling in "$opt" "--$(tr - _ <<<"${opt#--}")"; do
        got=$(dry "$AMLRUN" --hosts a,b --dry-run "$spelling" t 2>&1)
        expect_eq "head-node mode: $spelling t: a flag takes no value" \
            "${got##* $AMLRUN }" "$spelling --nnodes 2 t"
    done
done
