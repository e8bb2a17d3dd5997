#!/usr/bin/env bash
# Differential test of lib/util/hostlist.c, the Slurm hostlist parser behind
# SLURM_STEP_NODELIST / SLURM_JOB_NODELIST, against Slurm's own:
# `scontrol show hostnames LIST` (issue 11, item 4).  No daemon: scontrol
# only needs a slurm.conf to read.  Every list must expand to the same
# hosts in the same order, or be refused by both, except the differences
# listed below with their reasons, which must stay exactly that.
. "$(dirname "$0")/../../lib.sh"
if ! have scontrol; then
    skip "hostlist against scontrol" "no scontrol (slurm-client: scripts/install-deps.sh)"
    exit 0
fi
LIB=$BUILD/lib/libamldist.a
if [ ! -f "$LIB" ]; then fail "hostlist against scontrol: $LIB is built"; exit 0; fi

# Our side: one list per line in, "OK host..." or "ERR" out.
cat >"$TEST_TMP/hl.c" <<'EOF2'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/internal.h"
#include "util/parse.h"

static int put(const char *host, long index, void *arg)
{
    (void)arg;
    printf("%s%s", index ? " " : "", host);
    return 0;
}

int main(void)
{
    static char line[1 << 20];
    while (fgets(line, sizeof line, stdin)) {
        line[strcspn(line, "\n")] = '\0';
        if (amldist__hostlist_count(line) < 0) {
            puts("ERR");
            continue;
        }
        fputs("OK ", stdout);
        amldist__hostlist_foreach(line, put, NULL);
        putchar('\n');
    }
    return 0;
}
EOF2
if ! cc -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -I"$TOP/include" -I"$TOP/lib" \
     "$TEST_TMP/hl.c" "$LIB" -lhwloc -ldl -lpthread -o "$TEST_TMP/hl" 2>"$TEST_TMP/cc.err"; then
    fail "hostlist against scontrol: the driver builds"; sed 's/^/# /' "$TEST_TMP/cc.err"; exit 0
fi
printf 'ClusterName=x\nSlurmctldHost=localhost\nAuthType=auth/none\nCredType=cred/none\nNodeName=n1\nPartitionName=p Nodes=n1\n' \
    >"$TEST_TMP/slurm.conf"
export SLURM_CONF=$TEST_TMP/slurm.conf
slurm_side() {
    local out
    out=$(timeout 10 scontrol show hostnames "$1" 2>&1)
    case $out in *"Invalid hostlist"*|*"error:"*) echo ERR ;; *) echo "OK $(tr '\n' ' ' <<<"$out" | sed 's/ $//')" ;; esac
}

lists=(
    # plain names and commas
    node1 a,b,c z,a login1,login1 node-1.cluster.local,node-2.cluster.local
    gpu-a100-01 x
    # ranges and zero padding
    'gpu[009-011]' 'n[8-10]' 'n[08-10]' 'n[098-101]' 'n[0-2]' 'n[000]' 'n[7]'
    'n[1-010]' 'n[9,010,11]' 'n[00099-00101]' 'n[01-1]' 'n[1,2-3,5]' 'n[3-3]'
    'n[1,1]' 'n[5,3,1]' 'n[0-0]' 'n[99-100]' 'n[0999-1001]' 'x[000000001-000000003]'
    # several names, several brackets, nested prefixes
    'gpu[009-011,013],login1,rack[1-2]-n[01-02]' 'rack[1-2]-n[01-02]'
    'r[1-2]n[1-3]' 'a[1,3]b[5]c[7-8]' 'n[1-2]-[3-4]' 'n[1-2][3-4]'
    'a[1-2],b,c[3,5-6]' 'n[1-2],m[3-4]' 'rack[1-2]-n[01-02],b' 'x[1-2].dom[3]'
    'cn[01-02]-ib[1-2]-p[0-1]' 'a[1-2]b[1-2]c[1-2]' 'a1[0-2]' 'n1[9-11]' 'n[1-2],n[1-2]'
    '10.0.0.[1-3]' '10.0.[0-1].[254-255]' '10.0.0.1,10.0.0.2'
    # big ranges: Slurm's limit is 65536 hosts in one range
    'n[0-65535]' 'n[00000-65535]' 'big[1-4096],small[1-2]' 'n[0-255][0-255]'
    # malformed: both must refuse
    'n[3-1]' 'x[a-b]' 'n[-1]' 'n[]' 'a[[1]]' 'a[1[2]]' 'n[1-2-3]' 'n[1--2]'
    'n[0-65536]' 'n[1,]' 'n[,1]'
    # malformed lists that scontrol repairs (see ours_stricter)
    'a,,b' 'a,' ',a' 'a[1-2' 'a1-2]' 'a]' 'a b' 'n[1-]' 'n[1-3],,'
    # a suffix after one bracket group (see ours_wider)
    'n[1-2]x' 'n[1-2]x,m' 'a,n[1-2]x' 'n[1-2]x.y'
)
# scontrol accepts these, libamldist refuses them: Slurm never writes them
# into SLURM_*NODELIST, and an empty name, an unclosed bracket or a blank
# there is a corrupted variable, better refused than guessed.
declare -A ours_stricter=(
    ['a,,b']='an empty name' ['a,']='an empty name' [',a']='an empty name'
    ['n[1-3],,']='empty names'
    ['a[1-2']='an unclosed bracket (scontrol: "a]")' ['a1-2]']='a stray "]"'
    ['a]']='a stray "]"' ['a b']='a blank (scontrol splits there)'
    ['n[1-]']='a range without its end (scontrol: "n1")'
)
# libamldist accepts these, scontrol 22.05 refuses them: a suffix after a
# single bracket group, which Slurm's own lists never have but later Slurm
# versions and other tools write ("n[1-2]x" is n1x n2x).
declare -A ours_wider=(
    ['n[1-2]x']=suffix ['n[1-2]x,m']=suffix ['a,n[1-2]x']=suffix ['n[1-2]x.y']=suffix
    # Slurm refuses more than 65536 hosts in one range; libamldist's limit
    # is on the whole list (AMLDIST__HOSTLIST_MAX).
    ['n[0-65536]']='65537 hosts in one range'
)
# Both accept, in another order: with three or more bracket groups Slurm
# 22.05 does not vary the last group fastest and the first slowest
# (cn01-ib1-p0 cn01-ib1-p1 cn02-ib1-p0 ...); libamldist keeps the
# cartesian order of two groups for any number.  Slurm writes no such
# lists into SLURM_*NODELIST, and the first host, the master, is the same.
declare -A other_order=(
    ['cn[01-02]-ib[1-2]-p[0-1]']='three groups' ['a[1-2]b[1-2]c[1-2]']='three groups'
)

printf '%s\n' "${lists[@]}" | "$TEST_TMP/hl" >"$TEST_TMP/ours"
mapfile -t ours <"$TEST_TMP/ours"
same=0 bad=0
for i in "${!lists[@]}"; do
    l=${lists[$i]} o=${ours[$i]}
    s=$(slurm_side "$l")
    if [ -n "${ours_stricter[$l]+x}" ]; then
        if [ "$o" = ERR ] && [ "${s%% *}" = OK ]; then continue; fi
        fail "hostlist '$l': libamldist refuses (${ours_stricter[$l]}), scontrol accepts"
        diag "ours: ${o:0:200}"; diag "scontrol: ${s:0:200}"; bad=$((bad + 1)); continue
    fi
    if [ -n "${ours_wider[$l]+x}" ]; then
        if [ "${o%% *}" = OK ] && [ "$s" = ERR ]; then continue; fi
        fail "hostlist '$l': libamldist accepts (${ours_wider[$l]}), scontrol refuses"
        diag "ours: ${o:0:200}"; diag "scontrol: ${s:0:200}"; bad=$((bad + 1)); continue
    fi
    if [ -n "${other_order[$l]+x}" ]; then
        if [ "$o" != "$s" ] && [ "${o%% *}" = OK ] && [ "${s%% *}" = OK ] &&
           [ "$(tr ' ' '\n' <<<"${o#OK }" | sort)" = "$(tr ' ' '\n' <<<"${s#OK }" | sort)" ] &&
           [ "$(cut -d' ' -f2 <<<"$o")" = "$(cut -d' ' -f2 <<<"$s")" ]; then continue; fi
        fail "hostlist '$l': the same hosts as scontrol's, in another order (${other_order[$l]}), the same first"
        diag "ours: ${o:0:200}"; diag "scontrol: ${s:0:200}"; bad=$((bad + 1)); continue
    fi
    if [ "$o" = "$s" ]; then
        same=$((same + 1))
    else
        fail "hostlist '$l': libamldist and scontrol agree"
        diag "ours: ${o:0:300}"; diag "scontrol: ${s:0:300}"; bad=$((bad + 1))
    fi
done
check "hostlist: ${#lists[@]} lists, $same the same as scontrol's, ${#ours_stricter[@]} refused on purpose, ${#ours_wider[@]} accepted beyond scontrol 22.05, ${#other_order[@]} in cartesian order" \
    test "$bad" -eq 0

# Random well-formed lists: prefixes, padding, several groups and names.
RANDOM=$$
rand_list() {
    local names=$((1 + RANDOM % 3)) n g groups out="" name lo hi w
    for ((n = 0; n < names; n++)); do
        name="p$((RANDOM % 3))"
        groups=$((1 + RANDOM % 2))
        for ((g = 0; g < groups; g++)); do
            lo=$((RANDOM % 120)); hi=$((lo + RANDOM % 15)); w=$((1 + RANDOM % 4))
            printf -v lo "%0${w}d" "$lo"
            if ((RANDOM % 2)); then name+="[$lo-$hi,$((hi + 2 + RANDOM % 5))]"
            else name+="[$lo-$hi]"; fi
            # Text between two groups (after the last one: ours_wider).
            ((g + 1 < groups && RANDOM % 2)) && name+="-r"
        done
        out+="${out:+,}$name"
    done
    echo "$out"
}
rbad=0
for _ in $(seq 60); do
    l=$(rand_list)
    o=$(printf '%s\n' "$l" | "$TEST_TMP/hl")
    s=$(slurm_side "$l")
    if [ "$o" != "$s" ]; then
        rbad=$((rbad + 1)); diag "random '$l': ours ${o:0:200} / scontrol ${s:0:200}"
    fi
done
check "hostlist: 60 random lists with padding and several groups, the same as scontrol's" test "$rbad" -eq 0
