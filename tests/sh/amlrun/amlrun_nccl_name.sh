#!/usr/bin/env bash
# NCCL's asynchronous error handling under the name the workers' torch
# reads, as the torchrun of that torch sets it: NCCL_ASYNC_ERROR_HANDLING
# for torch < 2.2 (Debian's 1.13 here), TORCH_NCCL_ASYNC_ERROR_HANDLING
# alone for torch >= 2.2 (which warns on every rank when the old name is
# set; a torch 2.8 package is stood in by its version.py on PYTHONPATH,
# which is all amlrun reads of it), both when the torch is unknown.  The
# workers' own environment is checked, not only --dry-run's.
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/amlrun/common.sh"
d=$TEST_TMP/ncclname
mkdir -p "$d/t28/torch" "$d/t21/torch" "$d/t22/torch" "$d/empty"
: >"$d/t28/torch/__init__.py"; : >"$d/t21/torch/__init__.py"; : >"$d/t22/torch/__init__.py"
echo "__version__ = '2.8.0+cu128'" >"$d/t28/torch/version.py"
echo "__version__: str = '2.1.2'" >"$d/t21/torch/version.py"
printf "from typing import Optional\n__version__ = '2.2.0'\n" >"$d/t22/torch/version.py"
cat >"$d/w.py" <<'PY'
import os
os.write(1, ("%s %s\n" % (os.environ.get("NCCL_ASYNC_ERROR_HANDLING", "-"),
                          os.environ.get("TORCH_NCCL_ASYNC_ERROR_HANDLING", "-"))).encode())
PY
unset NCCL_ASYNC_ERROR_HANDLING TORCH_NCCL_ASYNC_ERROR_HANDLING

# names CASE WANT [VAR=VALUE...] -- AMLRUN-ARGS: each of 2 workers prints
# "<old> <new>" ('-' for unset).
names() {
    local name=$1 want=$2; shift 2
    local envs=()
    while [ "$1" != -- ]; do envs+=("$1"); shift; done
    shift
    local out
    out=$(cd "$d" && env "${envs[@]}" timeout 60 "$AMLRUN" -q --nproc-per-node 2 \
          --master-port "$(free_port)" "$@" 2>"$d/err" | sort -u)
    expect_eq "$name" "$out" "$want"
}
names "torch 1.13 (Debian's): the old name only, as torchrun 1.13" "1 -" -- w.py
names "torch 2.8: the new name only, as torchrun 2.8" "- 1" PYTHONPATH="$d/t28" -- w.py
names "torch 2.2 (the first with the new name): the new name only" "- 1" \
    PYTHONPATH="$d/t22" -- w.py
names "torch 2.1 (annotated version.py): the old name only" "1 -" PYTHONPATH="$d/t21" -- w.py
names "--no-python python3 w.py: the interpreter is probed too" "- 1" \
    PYTHONPATH="$d/t28" -- --no-python "$TORCH_PY" w.py
names "a user's TORCH_NCCL_ASYNC_ERROR_HANDLING=0 under torch 1.13 stands alone" "- 0" \
    TORCH_NCCL_ASYNC_ERROR_HANDLING=0 -- w.py
names "a user's NCCL_ASYNC_ERROR_HANDLING=0 under torch 2.8 stands alone" "0 -" \
    NCCL_ASYNC_ERROR_HANDLING=0 PYTHONPATH="$d/t28" -- w.py
# A Python without torch (python3 -I -S ignores PYTHONPATH and every site
# directory: the probe then finds no torch whatever is installed): both.
printf '#!/bin/sh\nexec %s -I -S "$@"\n' "$TORCH_PY" >"$d/empty/python3"
chmod +x "$d/empty/python3"
if "$d/empty/python3" -c 'import torch' 2>/dev/null; then
    skip "no torch: both names" "torch importable under python3 -I -S"
else
    names "no torch under the worker's Python: both names" "1 1" -- --python "$d/empty/python3" w.py
fi
# The probe loads nothing of torch: a torch whose __init__ fails is still
# read by its version.py.
mkdir -p "$d/bad/torch"
echo "raise SystemExit('imported')" >"$d/bad/torch/__init__.py"
echo "__version__ = '2.9.1'" >"$d/bad/torch/version.py"
line=$(cd "$d" && PYTHONPATH="$d/bad" "$AMLRUN" --dry-run -v --nproc-per-node 1 w.py 2>&1)
check "the probe never imports torch (-v: torch 2.9)" grep -q "torch 2.9 under $TORCH_PY" <<<"$line"
check "... and the dry run shows the new name only" \
    sh -c 'grep "^rank 0 " | grep " TORCH_NCCL_ASYNC_ERROR_HANDLING=1" | grep -vq " NCCL_ASYNC_ERROR_HANDLING="' <<<"$line"
