"""This rank's GPU, CPUs and NIC: what amlrun gave it, or else libamldist's
plan for it (the plan amlrun would have made)."""
import ctypes
import dataclasses
import os
from typing import Optional, Tuple

from . import _lib
from ._layout import layout
from ._lib import lib

# What amlrun sets for a rank it bound (amldist_plan_rank_env()); export()
# sets none of them, so they say that a launcher made the binding.
_AMLRUN_VARS = ("AMLDIST_GPU", "AMLDIST_GPU_INDEX", "AMLDIST_CPUS",
                "AMLDIST_NUMA", "AMLDIST_NIC")


@dataclasses.dataclass(frozen=True)
class Binding:
    """source: "amlrun" (the AMLDIST_* variables amlrun set for this rank)
    or "plan" (libamldist's plan for this local rank, computed here).
    gpu: the CUDA index to use (torch.cuda.set_device), gpu_busid its PCI
    bus id; cpus: the CPUs this process may run on now
    (os.sched_getaffinity); planned_cpus: the CPUs the rank is bound to
    under amlrun, or the plan's share for it; numa: its NUMA node; nic: its
    nearest NIC; warnings: the plan's notes, one per line.  None: no GPU,
    no NIC, no cpu binding, or unknown."""
    source: str
    gpu: Optional[int]
    gpu_busid: Optional[str]
    cpus: Tuple[int, ...]
    planned_cpus: Optional[Tuple[int, ...]]
    numa: Optional[int]
    nic: Optional[str]
    warnings: str = ""


def cpu_list(text):
    """"0-3,8,10-11" as (0, 1, 2, 3, 8, 10, 11); "" or None as None."""
    if not text:
        return None
    cpus = set()
    for part in text.split(","):
        first, _, last = part.partition("-")
        cpus.update(range(int(first), int(last or first) + 1))
    return tuple(sorted(cpus))


def _int(text):
    return None if text in (None, "") else int(text)


def _from_amlrun(env, affinity):
    try:
        return Binding("amlrun", _int(env.get("AMLDIST_GPU_INDEX")),
                       env.get("AMLDIST_GPU") or None, affinity,
                       cpu_list(env.get("AMLDIST_CPUS")),
                       _int(env.get("AMLDIST_NUMA")),
                       env.get("AMLDIST_NIC") or None)
    except ValueError:
        bad = {v: env[v] for v in _AMLRUN_VARS if v in env}
        raise _lib.LayoutError(f"malformed amlrun binding variables {bad}",
                               None, "AMLDIST_EPARSE", None) from None


def _plan_of(topology, env, lrank, nlocal):
    """The plan's values for local rank lrank of nlocal."""
    topo = ctypes.c_void_p()
    path = None if topology is None else os.fsencode(topology)
    # Every GPU, then CUDA_VISIBLE_DEVICES as `env` gives it.
    _lib.check(lib.amldist_topo_load(ctypes.byref(topo), path,
                                     _lib.TOPO_ALL_GPUS))
    plan = ctypes.c_void_p()
    try:
        visible = env.get("CUDA_VISIBLE_DEVICES")
        _lib.check(lib.amldist_topo_set_visible(
            topo, None if visible is None else os.fsencode(visible)))
        opts = _lib.PlanOptions(version=_lib.PLAN_OPTIONS_VERSION,
                                flags=_lib.PLAN_NODE_WIDE)
        # amlrun's defaults, by their names (the options' enum values stay
        # the library's business).
        for name, value in ((b"cpu-bind", b"exclusive"),
                            (b"nic-bind", b"export")):
            _lib.check(lib.amldist_plan_options_set(ctypes.byref(opts), name,
                                                    value))
        # Each process of the node computes the same plan for itself, over
        # the node's CPUs rather than its own affinity (AMLDIST_PLAN_NODE_WIDE).
        _lib.check(lib.amldist_plan_compute(topo, ctypes.byref(opts), nlocal,
                                            ctypes.byref(plan)))
        gpu = lib.amldist_plan_rank_gpu(plan, lrank)
        numa = lib.amldist_plan_rank_numa(plan, lrank)
        notes = [_lib.text(lib.amldist_topo_warnings(topo)),
                 _lib.text(lib.amldist_plan_warnings(plan))]
        return dict(
            gpu=None if gpu == _lib.EUNKNOWN else _lib.check(gpu),
            gpu_busid=_lib.text(lib.amldist_plan_rank_gpu_busid(plan, lrank)),
            planned_cpus=cpu_list(_lib.text(
                lib.amldist_plan_rank_cpus(plan, lrank))),
            numa=None if numa == _lib.EUNKNOWN else _lib.check(numa),
            nic=_lib.text(lib.amldist_plan_rank_nic(plan, lrank)),
            warnings="\n".join(n.rstrip("\n") for n in notes if n))
    finally:
        lib.amldist_plan_free(plan)
        lib.amldist_topo_free(topo)


def binding(env=None, topology=None):
    """This rank's GPU, CPUs and NIC (see Binding).  Under amlrun, what it
    set for the rank; otherwise the plan libamldist makes for this local
    rank among the node's local_world_size ranks (amlrun's defaults:
    --cpu-bind exclusive, the nearest NIC), over this machine or the hwloc
    XML file `topology`.  The plan is not applied: cpus stays what the
    process has."""
    env = os.environ if env is None else env
    affinity = tuple(sorted(os.sched_getaffinity(0)))
    if topology is None and any(v in env for v in _AMLRUN_VARS):
        return _from_amlrun(env, affinity)
    where = layout(env)
    if where.local_rank is None:
        return Binding("plan", None, None, affinity, None, None, None,
                       "no plan: the local rank is unknown ("
                       + where.explain("local_rank") + ")")
    nlocal, note = where.local_world_size, ""
    if nlocal is None:
        nlocal = where.local_rank + 1
        note = ("the local world size is unknown ("
                + where.explain("local_world_size") + "): planned as "
                f"{nlocal} ranks")
    got = _plan_of(topology, env, where.local_rank, nlocal)
    got["warnings"] = "\n".join(w for w in (got["warnings"], note) if w)
    return Binding("plan", cpus=affinity, **got)
