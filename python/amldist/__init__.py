"""amldist: the distributed-training layout of this process as libamldist
derives it, from whatever launched it (amlrun, torchrun, mpirun, srun,
Azure ML, Kubernetes, or nothing), through ctypes.

    import amldist, torch.distributed as dist
    job = amldist.export()                # RANK, WORLD_SIZE, MASTER_* ...
    dist.init_process_group("gloo", init_method="env://")
    print(job)                            # rank, world_size, ..., launcher
    print(amldist.binding())              # this rank's GPU, CPUs and NIC

    amldist.progress(step)                # once a step: amlrun's hang
                                          # detection and straggler line
    amldist.progress_expect(600)          # before a step of up to 10 min

The library is libamldist.so.1: $AMLDIST_LIBRARY, else the dynamic
loader's search, loaded at its first use (amldist.progress, pure Python,
needs none).  See python/README.md and libamldist(3)."""
from ._lib import Error, LayoutError, MachineError, OutOfMemory, lib as _c
from ._layout import Layout, layout, export
from ._binding import Binding, binding
from .progress import progress, progress_expect

# Shown as amldist.LayoutError in tracebacks, as users name them.
for _cls in (Error, LayoutError, MachineError, OutOfMemory, Layout, Binding):
    _cls.__module__ = __name__

__version__ = "1.5.0"
__all__ = ["layout", "export", "binding", "Layout", "Binding", "Error",
           "LayoutError", "MachineError", "OutOfMemory", "library_version",
           "progress", "progress_expect"]


def library_version():
    """The version of the libamldist actually loaded, e.g. "1.2.0"."""
    return _c.amldist_version_string().decode()
