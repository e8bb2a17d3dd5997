#!/usr/bin/env bash
# Differential test against the Azure ML guide's aml_mpienv.py: for the Open
# MPI / Azure ML environments it covers, examples/hello must print what the
# seed's set_environment_variables_for_nccl_backend() and get_*() compute.
# The seed's logic is re-expressed below (not copied); the cases where we
# differ on purpose are listed in amldist-env(7) and checked to differ in
# exactly the documented way.
. "$(dirname "$0")/../../lib.sh"
HELLO=$BUILD/examples/hello
if [ ! -x "$HELLO" ]; then fail "differential: $HELLO not built"; exit 0; fi
exec /usr/bin/python3 - "$HELLO" <<'PY'
import subprocess, sys

hello = sys.argv[1]

def seed(env):
    """aml_mpienv.py, re-expressed: returns the variables it would set (or
    the exception it would raise) and what its get_*() helpers return."""
    env = dict(env)
    try:
        env["RANK"] = env["OMPI_COMM_WORLD_RANK"]
        env["WORLD_SIZE"] = env["OMPI_COMM_WORLD_SIZE"]
        single = int(env["OMPI_COMM_WORLD_LOCAL_SIZE"]) == int(env["WORLD_SIZE"])
        if not single:
            env["MASTER_ADDR"] = env["AZ_BATCH_MASTER_NODE"].split(":")[0]
            if "MASTER_PORT" not in env:
                env["MASTER_PORT"] = str(6105)
        else:
            env["MASTER_ADDR"] = env["AZ_BATCHAI_MPI_MASTER_NODE"]
            env["MASTER_PORT"] = "54965"
    except KeyError as e:
        return {"error": "KeyError %s" % e}
    return {
        "RANK": env["RANK"], "WORLD_SIZE": env["WORLD_SIZE"],
        "LOCAL_RANK": env["OMPI_COMM_WORLD_LOCAL_RANK"],
        "LOCAL_WORLD_SIZE": env["OMPI_COMM_WORLD_LOCAL_SIZE"],
        "MASTER_ADDR": env["MASTER_ADDR"], "MASTER_PORT": env["MASTER_PORT"],
    }

def ours(env):
    p = subprocess.run(["env", "-i"] + ["%s=%s" % kv for kv in env.items()]
                       + [hello], capture_output=True, text=True)
    if p.returncode != 0:
        return {"error": p.stderr.strip()}
    return dict(l.split("=", 1) for l in p.stdout.splitlines())

def ompi(rank, size, lrank, lsize, **extra):
    e = {"OMPI_COMM_WORLD_RANK": str(rank), "OMPI_COMM_WORLD_SIZE": str(size),
         "OMPI_COMM_WORLD_LOCAL_RANK": str(lrank),
         "OMPI_COMM_WORLD_LOCAL_SIZE": str(lsize),
         "OMPI_COMM_WORLD_NODE_RANK": str(lrank), "AMLDIST_NO_PMIX": "1"}
    e.update(extra)
    return e

AZ = {"AZ_BATCH_MASTER_NODE": "10.0.0.4:6000",
      "AZ_BATCHAI_MPI_MASTER_NODE": "10.0.0.5"}
KEYS = ["RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
        "MASTER_ADDR", "MASTER_PORT"]

# (name, environment, deliberate difference: {key: our value} or None)
cases = []
for rank in range(4):    # one node, four ranks
    cases.append(("1 node rank %d" % rank, ompi(rank, 4, rank, 4, **AZ), None))
for rank in range(8):    # two nodes of four, by slot and round robin
    cases.append(("2 nodes by slot rank %d" % rank,
                  ompi(rank, 8, rank % 4, 4, **AZ), None))
    cases.append(("2 nodes by node rank %d" % rank,
                  ompi(rank, 8, rank // 2, 4, **AZ), None))
cases += [
    ("per-node launcher, 3 nodes", ompi(2, 3, 0, 1, **AZ), None),
    ("multi-node keeps MASTER_PORT", ompi(1, 8, 1, 4, MASTER_PORT="7000", **AZ), None),
    ("multi-node host name master",
     ompi(3, 4, 1, 2, AZ_BATCH_MASTER_NODE="master-0:6000"), None),
    ("one process", ompi(0, 1, 0, 1, **AZ), None),
    # Deliberate differences (amldist-env(7), DIFFERENCES FROM aml_mpienv.py):
    ("single node keeps MASTER_PORT",
     ompi(1, 2, 1, 2, MASTER_PORT="7000", **AZ), {"MASTER_PORT": "7000"}),
    ("MASTER_ADDR already set is kept",
     ompi(1, 8, 1, 4, MASTER_ADDR="10.9.9.9", **AZ), {"MASTER_ADDR": "10.9.9.9"}),
    ("AZ_BATCH_MASTER_NODE with [IPv6]:port",
     ompi(1, 8, 1, 4, AZ_BATCH_MASTER_NODE="[fd00::4]:6000"),
     {"MASTER_ADDR": "fd00::4"}),
    ("single node without AZ_BATCHAI_MPI_MASTER_NODE",
     ompi(0, 2, 0, 2, AZ_BATCH_MASTER_NODE="10.0.0.4:6000"),
     {"MASTER_ADDR": "10.0.0.4", "MASTER_PORT": "54965"}),
    ("multi-node without any Azure variable",
     ompi(0, 8, 0, 4), {"MASTER_ADDR": "unknown", "MASTER_PORT": "29500"}),
]

def launch_worker(node, nodes, nproc, local):
    """A worker of the guide's launch.py, one per node under Azure ML's
    mpirun: the launcher ran set_environment_variables_for_nccl_backend()
    (its MPI world is the nodes), then gave each worker RANK, LOCAL_RANK
    and WORLD_SIZE, and no LOCAL_WORLD_SIZE."""
    e = ompi(node, nodes, 0, 1, **AZ)
    e.update(seed(e))
    del e["LOCAL_WORLD_SIZE"], e["LOCAL_RANK"]
    e.update({"RANK": str(node * nproc + local), "LOCAL_RANK": str(local),
              "WORLD_SIZE": str(nodes * nproc)})
    return e

def seed_launch(env):
    """What launch.py's worker sees through the seed: its own variables,
    the seed's master, and get_local_size() (the MPI local size, 1)."""
    return {"RANK": env["RANK"], "WORLD_SIZE": env["WORLD_SIZE"],
            "LOCAL_RANK": env["LOCAL_RANK"],
            "LOCAL_WORLD_SIZE": env["OMPI_COMM_WORLD_LOCAL_SIZE"],
            "MASTER_ADDR": env["MASTER_ADDR"],
            "MASTER_PORT": env["MASTER_PORT"]}

# launch.py's workers, 2 nodes of 4: the seed's numbers, and (deliberate
# difference) LOCAL_WORLD_SIZE 4, the workers of this node, not the MPI
# local size 1 that its get_local_size() returns.
launch_cases = [("launch.py worker node %d local %d" % (n, l),
                 launch_worker(n, 2, 4, l), {"LOCAL_WORLD_SIZE": "4"})
                for n in range(2) for l in range(4)]

failed = 0
for name, env, differ in launch_cases:
    want, got = seed_launch(env), ours(env)
    bad = "error" in got or any(got.get(k) != want[k] for k in KEYS
                                if k not in differ)
    bad = bad or any(got.get(k) != v or want[k] == v
                     for k, v in differ.items())
    print(("not ok - " if bad else "ok - ") + "differential: " + name +
          " (deliberate difference: LOCAL_WORLD_SIZE)")
    if bad:
        failed += 1
        print("# seed: %s\n# ours: %s" % (want, got))
for name, env, differ in cases:
    want, got = seed(env), ours(env)
    if differ is None:
        bad = "error" in want or "error" in got or any(
            want[k] != got.get(k) for k in KEYS)
    else:
        # The seed gives something else (or raises); we give the documented.
        bad = "error" in got or any(got.get(k) != v for k, v in differ.items())
        bad = bad or ("error" not in want and
                      all(want[k] == got.get(k) for k in differ))
        name += " (deliberate difference)"
    print(("not ok - " if bad else "ok - ") + "differential: " + name)
    if bad:
        failed += 1
        print("# seed: %s\n# ours: %s" % (want, got))
sys.exit(1 if failed else 0)
PY
