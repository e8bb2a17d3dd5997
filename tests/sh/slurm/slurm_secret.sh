#!/usr/bin/env bash
# Head-node mode's secret under Slurm (issue 21): `salloc -N2 amlrun
# --launcher slurm` hands its random secret to every node's amlrun through
# srun's environment, never on a command line: while the job runs, no
# process's /proc/PID/cmdline holds its bytes (srun, slurmstepd, both
# amlruns, the workers), and it is in no log or output of the job.
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/slurm.sh"
slurm_setup
d=$TEST_TMP
unset AMLDIST_JOB_TOKEN AMLDIST_JOB_TOKEN_FILE AMLDIST_REQUIRE_SECRET
export XDG_CONFIG_HOME=$d/config
W=$d/worker.sh
cat >"$W" <<'SH'
#!/bin/sh
printf '%s' "$AMLDIST_JOB_TOKEN" >"$AMLRUN_TEST_D/tok.$RANK"
touch "$AMLRUN_TEST_D/run.$RANK"
while [ ! -e "$AMLRUN_TEST_D/release" ]; do sleep 0.05; done
echo "rank $RANK done"
SH
chmod +x "$W"

rc=0
AMLRUN_TEST_D=$d slurm_on n0 $T salloc -N2 "$AMLRUN" --launcher slurm --nproc-per-node 1 \
    --log-dir "$d/logs" --no-python "$W" >"$d/out" 2>"$d/err" &
job=$!
end=$((SECONDS + 60))
until [ -e "$d/run.0" ] && [ -e "$d/run.1" ] || [ "$SECONDS" -ge "$end" ]; do sleep 0.05; done
check "salloc + amlrun --launcher slurm: both nodes' workers have the one secret" \
    sh -c '[ -s "$0" ] && cmp -s "$0" "$1" && grep -qx "[0-9a-f]\{32\}" "$0"' "$d/tok.0" "$d/tok.1"
steps=$(grep -lsa slurmstepd /proc/[0-9]*/cmdline | wc -l)
check "the step's processes are there to search ($steps slurmstepd)" test "$steps" -ge 1
if [ -s "$d/tok.0" ]; then
    # The pattern from a file: grep's own command line must not hold it.
    expect_eq "Slurm head-node mode: no process's command line holds the secret" \
        "$(grep -lsaF -f "$d/tok.0" /proc/[0-9]*/cmdline)" ""
fi
touch "$d/release"
wait "$job" || rc=$?
expect_eq "Slurm head-node mode: the job succeeds" "$rc" 0
if [ -s "$d/tok.0" ]; then
    expect_eq "Slurm head-node mode: no log or output holds the secret" \
        "$(grep -rlaF -f "$d/tok.0" "$d/logs" "$d/out" "$d/err" "$SLURM_DIR" 2>/dev/null)" ""
fi
[ "$rc" = 0 ] || sed 's/^/# stderr: /' "$d/err"
