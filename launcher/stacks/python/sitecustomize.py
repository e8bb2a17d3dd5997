# amlrun's hook for reading a Python worker's stacks (launcher/stacks/).
#
# amlrun puts this directory first in the worker's PYTHONPATH and names a
# pipe (AMLDIST_STACK_FD) and a signal (AMLDIST_STACK_SIGNAL), and preloads
# its guard (guard.c, last in LD_PRELOAD), which lets go of the pipe when
# the program installs a handler of its own for the signal from C.  Here
# faulthandler is registered to write every thread's Python stack into that
# pipe when the signal comes; nothing else runs until then, and the
# training program is not changed.  Then the worker is made to look as if
# amlrun had not been there: the variables, the guard's LD_PRELOAD entry and
# this directory leave os.environ and sys.path (a program the worker starts
# gets none of it; the user's own LD_PRELOAD entries stay), and
# the next sitecustomize on the path (Debian ships one) runs as it would
# have.  Python with -S or -I never reads this file: amlrun then says that
# it has no Python frames for the worker.
import os
import sys


def _amldist_register():
    fd = os.environ.pop("AMLDIST_STACK_FD", None)
    sig = os.environ.pop("AMLDIST_STACK_SIGNAL", None)
    if fd is None or sig is None:
        return
    try:
        import faulthandler
        import stat

        fd, sig = int(fd), int(sig)
        # Only the pipe amlrun gave: a number reused for another file (the
        # pipe closed by the program) must not get dumps.
        if not stat.S_ISFIFO(os.fstat(fd).st_mode):
            return
        faulthandler.register(sig, file=fd, all_threads=True, chain=False)
        _amldist_guard(sig, fd, faulthandler)
    except Exception:
        pass  # no Python frames: amlrun says so, the worker runs on


def _amldist_guard(sig, fd, faulthandler):
    # A program that takes the signal for a handler of its own gets it, and
    # never amlrun's: the hook lets go first (faulthandler off, its end of
    # the pipe closed, which amlrun looks for before it signals).  Every
    # signal.signal() call goes through _signal.signal, which costs no
    # import; a handler set from C is not seen.
    import _signal

    real = _signal.signal

    def signal(signalnum, handler):
        if signalnum == sig and _signal.signal is signal:
            _signal.signal = real
            try:
                faulthandler.unregister(sig)
                os.close(fd)
            except Exception:
                pass
        return real(signalnum, handler)

    signal.__doc__ = real.__doc__
    _signal.signal = signal


def _amldist_unpreload():
    # amlrun put the guard last ("user's:guard", or the guard alone); a
    # guard entry anywhere else is not amlrun's.
    guard = os.environ.pop("AMLDIST_STACK_GUARD", None)
    preload = os.environ.get("LD_PRELOAD")
    if not guard or preload is None:
        return
    if preload == guard:
        del os.environ["LD_PRELOAD"]
    elif preload.endswith(":" + guard):
        os.environ["LD_PRELOAD"] = preload[:-len(guard) - 1]


def _amldist_unhook():
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.environ.get("PYTHONPATH")
    if path is not None:
        parts = path.split(os.pathsep)
        if parts and parts[0] == here:
            rest = os.pathsep.join(parts[1:])
            if rest:
                os.environ["PYTHONPATH"] = rest
            else:
                del os.environ["PYTHONPATH"]
    sys.path[:] = [p for p in sys.path
                   if os.path.abspath(p or os.curdir) != here]
    # The sitecustomize this one stands in front of, run as itself.
    import importlib.machinery
    import importlib.util

    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", sys.path)
    if spec is None or spec.loader is None:
        return False
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)
    return True


_amldist_register()
_amldist_unpreload()
del _amldist_register, _amldist_guard, _amldist_unpreload
if not _amldist_unhook():
    # No sitecustomize behind this one (a Python built from source, a
    # venv): leave as none had been found.  site.py passes over an
    # ImportError named "sitecustomize" in silence, and the import system
    # takes this module out of sys.modules; what ran above stays done.
    raise ImportError("no sitecustomize after amlrun's", name="sitecustomize")
