"""The layout as libamldist derives it, and its export into os.environ."""
import ctypes
import dataclasses
import os
from typing import Optional

from . import _lib
from ._lib import lib

# amldist_field_t, in its order (the values are the ABI).
_FIELDS = ("rank", "world_size", "local_rank", "local_world_size",
           "node_rank", "num_nodes", "master_addr", "master_port")
# What init_process_group("env://") reads.
_ENV_NEEDS = {"rank": "RANK", "world_size": "WORLD_SIZE",
              "master_addr": "MASTER_ADDR", "master_port": "MASTER_PORT"}


@dataclasses.dataclass(frozen=True)
class Layout:
    """This process's place in the job.  A value the environment does not
    give is None; explain(name) says where a value came from, or why it is
    unknown.  launcher is the source: "torchrun", "amlrun", "ompi",
    "slurm", "mpich", "mvapich2", "pmix", "azureml", "env" (the canonical
    variables alone) or "default" (nothing: rank 0 of 1)."""
    rank: Optional[int]
    world_size: Optional[int]
    local_rank: Optional[int]
    local_world_size: Optional[int]
    node_rank: Optional[int]
    num_nodes: Optional[int]
    master_addr: Optional[str]
    master_port: Optional[int]
    launcher: str
    _why: dict = dataclasses.field(repr=False, compare=False)

    def explain(self, name):
        """Where the value of field `name` came from, e.g.
        "OMPI_COMM_WORLD_RANK=3", or why it is unknown."""
        if name not in self._why:
            raise ValueError(f"amldist: no layout field {name!r} "
                             f"(one of {', '.join(_FIELDS)})")
        return self._why[name]


def _flags(prefer):
    if prefer is None:
        return 0
    try:
        return {"canonical": _lib.PREFER_CANONICAL,
                "launcher": _lib.PREFER_LAUNCHER}[prefer]
    except KeyError:
        raise ValueError(f"amldist: prefer={prefer!r}: give 'canonical', "
                         "'launcher' or None") from None


def _value(getter, handle):
    """A getter's value, None when unknown; any other failure raises.  (The
    handle is valid here, so a NULL string means unknown.)"""
    raw = getter(handle)
    if getter.restype is ctypes.c_char_p:
        return _lib.text(raw)
    if raw == _lib.EUNKNOWN:
        return None
    return _lib.check(raw)


def _read(env, prefer):
    """(Layout, handle) from env; the caller frees the handle."""
    handle = ctypes.c_void_p()
    _lib.check(lib.amldist_init_from(ctypes.byref(handle), _lib.envp(env),
                                     _flags(prefer)))
    try:
        values = {f: _value(getattr(lib, "amldist_" + f), handle)
                  for f in _FIELDS}
        why = {f: _lib.text(lib.amldist_explain(handle, i))
               for i, f in enumerate(_FIELDS)}
        out = Layout(launcher=_lib.text(lib.amldist_source(handle)),
                     _why=why, **values)
    except BaseException:
        lib.amldist_free(handle)
        raise
    return out, handle


def layout(env=None, prefer=None):
    """The layout of this process from os.environ (or the mapping `env`),
    by libamldist's precedence: the innermost launcher first (amldist-env(7)).
    prefer="canonical" or "launcher" settles two sources that disagree
    instead of raising.  Raises LayoutError (a ValueError) with the
    library's message for a bad environment."""
    out, handle = _read(os.environ if env is None else env, prefer)
    lib.amldist_free(handle)
    return out


def export(env=None, prefer=None):
    """Write the layout into os.environ (or the mutable mapping `env`) as
    amlrun gives it to its workers: RANK, WORLD_SIZE, LOCAL_RANK,
    LOCAL_WORLD_SIZE, NODE_RANK, GROUP_RANK, GROUP_WORLD_SIZE, ROLE_RANK,
    ROLE_WORLD_SIZE, MASTER_ADDR, MASTER_PORT and AMLDIST_LAUNCHER=amlrun;
    an unknown value's variable is removed.  Afterwards
    torch.distributed.init_process_group("env://") works under any launcher
    libamldist reads.  Raises LayoutError, changing nothing, when a value
    env:// needs is unknown.  Returns the layout that was exported (its
    launcher is the original source; a later layout() reads the exported
    variables and says "amlrun")."""
    env = os.environ if env is None else env
    out, handle = _read(env, prefer)
    try:
        for field, var in _ENV_NEEDS.items():
            if getattr(out, field) is None:
                raise _lib.LayoutError(
                    f'init_process_group("env://") needs {var}, which is '
                    f"{out.explain(field)}; set {var}", _lib.EUNKNOWN,
                    "AMLDIST_EUNKNOWN",
                    _lib.text(lib.amldist_strerror(_lib.EUNKNOWN)))
        # The library composes the whole new environment from the current
        # one: which variables it writes and which it drops is its rule,
        # not repeated here.
        arr = _lib.c_void_pp()
        _lib.check(lib.amldist_export_envp(handle, _lib.envp(env),
                                           ctypes.byref(arr)))
    finally:
        lib.amldist_free(handle)
    try:
        new = {}
        i = 0
        while arr[i]:
            name, _, value = ctypes.string_at(arr[i]).partition(b"=")
            new[os.fsdecode(name)] = os.fsdecode(value)
            i += 1
    finally:
        lib.amldist_envp_free(arr)
    for name in [n for n in env if n not in new]:
        del env[name]
    for name, value in new.items():
        if env.get(name) != value:
            env[name] = value
    return out
