#!/usr/bin/env bash
# torchrun's TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE: the prefix of every
# tee'd line, made as torchrun 2.x's agent makes it, with Python's
# string.Template(...).safe_substitute(role_name, rank, local_rank); the
# expected lines are made here by Python's string.Template itself, for
# templates a hostile user would write.  (torchrun 1.13, the one that runs
# here, predates the variable.)
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/amlrun/common.sh"
d=$TEST_TMP/lineprefix
mkdir -p "$d"
cat >"$d/w.py" <<'PY'
import os, sys
r = os.environ["RANK"]
os.write(1, ("out %s\n" % r).encode())
os.write(2, ("err %s\n" % r).encode())
PY
# want TEMPLATE ROLE STREAM RANKS...: the lines torchrun would print.
want() {
    "$TORCH_PY" - "$@" <<'PY'
import string, sys
t, role, stream = sys.argv[1:4]
for r in sys.argv[4:]:
    p = string.Template(t).safe_substitute(role_name=role, rank=int(r), local_rank=int(r))
    print(p + stream + " " + r)
PY
}

i=0
for t in '[${role_name}${local_rank}]:' '[$rank|$local_rank|$role_name] ' \
         '$$rank ${rank}x $rankx ${ROLE_NAME} $RANK $' '${rank ${} $1 $-' \
         '{${local_rank}}${rank}${role_name}' 'no placeholders: ' '%r %l $%r'; do
    i=$((i + 1))
    TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE=$t "$AMLRUN" -q --nproc-per-node 3 \
        --master-port "$(free_port)" --role trainer --tee 3 "$d/w.py" >"$d/out" 2>"$d/err"
    for stream in out err; do
        got=$(grep -v "^amlrun: " "$d/$stream" | sort)
        expect_eq "template $i '$t': std$stream as torchrun's" "$got" \
            "$(want "$t" trainer $stream 0 1 2 | sort)"
    done
done

t='<${rank}> '
got=$(TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE=$t "$AMLRUN" -q --nproc-per-node 2 \
      --master-port "$(free_port)" -t 0:1,1:2 "$d/w.py" 2>&1 | sort)
expect_eq "-t 0:1,1:2: only the tee'd streams get the template" "$got" \
    "$(printf '%s\n' '<0> out 0' 'err 0' '<1> err 1' 'out 1' | sort)"
got=$(TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE=$t "$AMLRUN" -q --nproc-per-node 2 \
      --master-port "$(free_port)" "$d/w.py" 2>&1 | sort)
expect_eq "without --tee nothing is prefixed (as torchrun)" "$got" \
    "$(printf '%s\n' 'out 0' 'err 0' 'err 1' 'out 1' | sort)"
got=$(TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE=$t "$AMLRUN" -q --nproc-per-node 1 \
      --master-port "$(free_port)" --prefix='R%r:' "$d/w.py" 2>/dev/null)
expect_eq "amlrun's own --prefix=FMT wins over the template" "$got" "R0:out 0"
got=$(TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE= "$AMLRUN" -q --nproc-per-node 1 \
      --master-port "$(free_port)" --tee 1 "$d/w.py" 2>/dev/null)
expect_eq "an empty template leaves the default prefix (as torchrun)" "$got" "[default0]:out 0"

# Without a template, torchrun's TailLog header: "[{role}{local_rank}]:"
# (torchrun 1.13 and 2.x), the local rank, not the rank: node 1 of two on
# this machine prints "[trainer0]:out 2".  amlrun's --prefix keeps
# "[rank%r]:".
p=$(free_port)
"$AMLRUN" -q --nnodes 2 --node-rank 1 --nproc-per-node 2 --master-addr 127.0.0.1 \
    --master-port "$p" --role trainer --tee 1 "$d/w.py" >"$d/n1" 2>/dev/null &
n1=$!
got0=$("$AMLRUN" -q --nnodes 2 --node-rank 0 --nproc-per-node 2 --master-addr 127.0.0.1 \
       --master-port "$p" --role trainer --tee 1 "$d/w.py" 2>/dev/null | sort)
wait "$n1"
expect_eq "--tee 1 on two nodes: torchrun's [<role><local rank>]: on node 0" \
    "$got0" "$(printf '%s\n' '[trainer0]:out 0' '[trainer1]:out 1')"
expect_eq "--tee 1 on two nodes: torchrun's [<role><local rank>]: on node 1" \
    "$(sort "$d/n1")" "$(printf '%s\n' '[trainer0]:out 2' '[trainer1]:out 3')"
got=$(TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE= "$AMLRUN" -q --nproc-per-node 1 \
      --master-port "$(free_port)" --prefix "$d/w.py" 2>/dev/null)
expect_eq "amlrun's --prefix: [rank%r]: as before" "$got" "[rank0]:out 0"
