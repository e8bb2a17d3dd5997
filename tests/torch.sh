# shellcheck shell=bash
# have_torch [MODULE]: $TORCH_PY has PyTorch (torch.distributed, or MODULE,
# a dotted name under torch), found on its path without importing it:
# `import torch` costs 1-1.5 s of CPU, and a test that asks starts the
# processes that import it anyway (a torch that is there but does not
# import fails those cases rather than skipping them).  Sourced after lib.sh.
have_torch() {
    "$TORCH_PY" - "${1:-torch.distributed}" 2>/dev/null <<'PY'
import importlib.util, os, sys
parts = sys.argv[1].split(".")
spec = importlib.util.find_spec(parts[0])
where = list(spec.submodule_search_locations or []) if spec else []
for i, part in enumerate(parts[1:], 2):
    pkgs = [os.path.join(d, part) for d in where
            if os.path.isfile(os.path.join(d, part, "__init__.py"))]
    mods = [d for d in where if os.path.isfile(os.path.join(d, part + ".py"))]
    where = pkgs or (mods if i == len(parts) else [])
sys.exit(0 if where else 1)
PY
}
