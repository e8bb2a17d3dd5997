"""libamldist.so.1 through ctypes: finding it (at its first use), the
prototypes this module uses, and turning its negative codes into exceptions
that carry its message.  Only AMLDIST_1.0 functions are used, so any 1.x library works."""
import ctypes
import os
import sysconfig

SONAME = "libamldist.so.1"
MAJOR = 1


class Error(Exception):
    """A libamldist failure.  str() is the library's message, which names
    the variable and value that were wrong; .code is the negative
    AMLDIST_E* value, .name its name ("AMLDIST_EPARSE"), .strerror its short
    description."""

    def __init__(self, message, code=None, name=None, strerror=None):
        super().__init__(message)
        self.code, self.name, self.strerror = code, name, strerror


class LayoutError(Error, ValueError):
    """The environment (or an argument) holds a bad, missing or
    contradicting value: RANK=x, a rank without its world size, two
    launchers that disagree."""


class MachineError(Error, OSError):
    """The machine could not be read or bound (topology, system calls)."""


class OutOfMemory(Error, MemoryError):
    """The library ran out of memory."""


# Which exception each code raises; every other code is a plain Error.
_KINDS = {"AMLDIST_" + k: kind for kind, codes in (
    (LayoutError, "EINVAL EPARSE ERANGE EMISSING ECONFLICT EUNKNOWN"),
    (MachineError, "ESYS ETOPO EBIND"),
    (OutOfMemory, "ENOMEM")) for k in codes.split()}


def _checkout_library():
    """build/lib/libamldist.so.1 of the checkout this module is in, when it
    is run from one (PYTHONPATH=python after make); else None."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    top = os.path.dirname(here)
    if os.path.basename(here) != "python" or not os.path.isfile(
            os.path.join(top, "include", "amldist.h")):
        return None
    path = os.path.join(top, "build", "lib", SONAME)
    return path if os.path.isfile(path) else None


def _prefix_libraries():
    """The library where `make install` put it beside this module:
    PYTHONDIR is LIBDIR's pythonX.Y/site-packages (or Debian's
    python3/dist-packages), LIBDIR PREFIX/lib or its lib/<multiarch>; so
    <prefix>/lib/python3.11/site-packages/amldist finds <prefix>/lib.  A
    prefix outside the loader's path (make install PREFIX=$HOME/.local)
    needs no LD_LIBRARY_PATH.  The paths to try, found or not."""
    pkgs = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    pydir = os.path.dirname(pkgs)
    if not os.path.basename(pydir).startswith("python"):
        return []
    libdir = os.path.dirname(pydir)
    dirs = [libdir]
    multiarch = sysconfig.get_config_var("MULTIARCH")
    if multiarch:
        dirs.append(os.path.join(libdir, multiarch))
    return [os.path.join(d, SONAME) for d in dirs]


def _load():
    """The library: $AMLDIST_LIBRARY when set (a path, and nothing else is
    tried), else the soname through the dynamic loader (LD_LIBRARY_PATH, the
    ld.so cache: an installed library), else the one installed with this
    module (its prefix's lib), else the checkout's build."""
    named = os.environ.get("AMLDIST_LIBRARY")
    if named:
        tries = [named]
    else:
        tries = [SONAME] + _prefix_libraries()
        local = _checkout_library()
        if local:
            tries.append(local)
    why = []
    for path in tries:
        if os.path.isabs(path) and not os.path.exists(path) and not named:
            why.append(f"{path}: not there")
            continue
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            why.append(str(e) if path != SONAME else
                       f"{e} (the loader: LD_LIBRARY_PATH, ld.so.cache)")
            continue
        try:
            version = lib.amldist_version
        except AttributeError:
            why.append(f"{path}: not libamldist (no amldist_version)")
            continue
        version.restype = ctypes.c_uint
        major = version() >> 16
        if major != MAJOR:
            why.append(f"{path}: library version {major}.x, this module "
                       f"needs {MAJOR}.x")
            continue
        return lib
    hint = ("check AMLDIST_LIBRARY" if named else
            "install libamldist (make install, or the libamldist1 package), "
            "add its directory to LD_LIBRARY_PATH, or name the file in "
            "AMLDIST_LIBRARY")
    raise ImportError(f"amldist: cannot load {SONAME}: {'; '.join(why)} "
                      f"({hint})")


class _Library:
    """The library, loaded at its first use rather than at import, so that
    `import amldist` (and amldist.progress, which needs no library) works
    without it; a use then raises _load()'s ImportError, each time."""

    _cdll = None

    def __getattr__(self, name):
        cdll = _Library._cdll
        if cdll is None:
            cdll = _load()
            for fn, (res, args) in _PROTOS.items():
                f = getattr(cdll, fn)
                f.restype, f.argtypes = res, args
            _Library._cdll = cdll
        return getattr(cdll, name)


lib = _Library()

c_int, c_uint, c_char_p, c_void_p = (ctypes.c_int, ctypes.c_uint,
                                     ctypes.c_char_p, ctypes.c_void_p)
c_char_pp = ctypes.POINTER(ctypes.c_char_p)
# Returned arrays are read through a pointer of void * so that ctypes does
# not copy the strings away from the pointers amldist_envp_free() needs.
c_void_pp = ctypes.POINTER(ctypes.c_void_p)


class PlanOptions(ctypes.Structure):
    """amldist_plan_options_t at AMLDIST_PLAN_OPTIONS_VERSION 1: its fields
    are fixed for that version (the library reads any older version)."""
    _fields_ = [("version", c_uint), ("flags", c_uint), ("cpu_bind", c_int),
                ("cpu_list", c_char_p), ("mem_bind", c_int),
                ("nic_bind", c_int), ("gpu_bind", c_int),
                ("inherited_cpus", c_char_p)]


PLAN_OPTIONS_VERSION = 1
PLAN_NODE_WIDE = 1 << 1      # AMLDIST_PLAN_NODE_WIDE
TOPO_ALL_GPUS = 1 << 0       # AMLDIST_TOPO_ALL_GPUS
PREFER_CANONICAL = 1 << 0    # AMLDIST_PREFER_CANONICAL
PREFER_LAUNCHER = 1 << 1     # AMLDIST_PREFER_LAUNCHER
EUNKNOWN = -993              # AMLDIST_EUNKNOWN (the values are the ABI)

_PROTOS = {
    # name: (restype, argtypes)
    "amldist_init_from": (c_int, [c_void_pp, c_char_pp, c_uint]),
    "amldist_free": (None, [c_void_p]),
    "amldist_rank": (c_int, [c_void_p]),
    "amldist_world_size": (c_int, [c_void_p]),
    "amldist_local_rank": (c_int, [c_void_p]),
    "amldist_local_world_size": (c_int, [c_void_p]),
    "amldist_node_rank": (c_int, [c_void_p]),
    "amldist_num_nodes": (c_int, [c_void_p]),
    "amldist_master_addr": (c_char_p, [c_void_p]),
    "amldist_master_port": (c_int, [c_void_p]),
    "amldist_source": (c_char_p, [c_void_p]),
    "amldist_explain": (c_char_p, [c_void_p, c_int]),
    "amldist_export_envp": (c_int, [c_void_p, c_char_pp,
                                    ctypes.POINTER(c_void_pp)]),
    "amldist_envp_free": (None, [c_void_pp]),
    "amldist_strerror": (c_char_p, [c_int]),
    "amldist_err_name": (c_char_p, [c_int]),
    "amldist_last_error": (c_char_p, []),
    "amldist_version_string": (c_char_p, []),
    "amldist_topo_load": (c_int, [c_void_pp, c_char_p, c_uint]),
    "amldist_topo_free": (None, [c_void_p]),
    "amldist_topo_set_visible": (c_int, [c_void_p, c_char_p]),
    "amldist_topo_warnings": (c_char_p, [c_void_p]),
    "amldist_plan_options_set": (c_int, [ctypes.POINTER(PlanOptions),
                                         c_char_p, c_char_p]),
    "amldist_plan_compute": (c_int, [c_void_p, ctypes.POINTER(PlanOptions),
                                     c_int, c_void_pp]),
    "amldist_plan_free": (None, [c_void_p]),
    "amldist_plan_warnings": (c_char_p, [c_void_p]),
    "amldist_plan_rank_gpu": (c_int, [c_void_p, c_int]),
    "amldist_plan_rank_gpu_busid": (c_char_p, [c_void_p, c_int]),
    "amldist_plan_rank_cpus": (c_char_p, [c_void_p, c_int]),
    "amldist_plan_rank_numa": (c_int, [c_void_p, c_int]),
    "amldist_plan_rank_nic": (c_char_p, [c_void_p, c_int]),
}

def text(raw):
    """A C string from the library as str (None stays None)."""
    return None if raw is None else os.fsdecode(raw)


def error(code):
    """The exception for a negative code, with this thread's last message
    (the library keeps one per thread, and ctypes calls run on the calling
    thread)."""
    name = text(lib.amldist_err_name(code)) or str(code)
    short = text(lib.amldist_strerror(code))
    message = text(lib.amldist_last_error()) or short
    return _KINDS.get(name, Error)(message, code, name, short)


def check(rc):
    """rc when it is >= 0; else raise its exception."""
    if rc < 0:
        raise error(rc)
    return rc


def envp(env):
    """A NULL-terminated char *[] of "NAME=value" from a mapping, kept alive
    by the returned array object."""
    try:
        items = [os.fsencode(k) + b"=" + os.fsencode(v)
                 for k, v in env.items()]
    except TypeError:
        bad = next(k for k, v in env.items()
                   if not isinstance(k, (str, bytes))
                   or not isinstance(v, (str, bytes)))
        raise TypeError(f"amldist: environment entry {bad!r}: names and "
                        "values must be str, as in os.environ") from None
    arr = (ctypes.c_char_p * (len(items) + 1))(*items, None)
    return ctypes.cast(arr, c_char_pp)
