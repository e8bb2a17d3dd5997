#!/usr/bin/python3
"""torchrun for bench/launch.sh, with one lookup patched.

Debian's python3-torch 1.13 fails on Python 3.11 before starting anything:
Std.from_str() finds the value of --redirects/--tee by iterating over the
IntFlag Std, and since Python 3.11 that iteration no longer yields the
zero member NONE (nor the alias ALL), so "0" maps to None and torchrun
dies with "'NoneType' object has no attribute 'get'".  This wrapper
replaces that one lookup with Std(int(v)) and then runs torchrun's own
main() unchanged.
"""
import re
import sys

from torch.distributed.elastic.multiprocessing import api


def _from_str(cls, vm):
    if re.match(api._VALUE_REGEX, vm):
        return cls(int(vm))
    if re.match(api._MAPPING_REGEX, vm):
        return {int(i): cls(int(v)) for i, v in (m.split(":") for m in vm.split(","))}
    raise ValueError(f"{vm} does not match: <{api._VALUE_REGEX}> or <{api._MAPPING_REGEX}>")


api.Std.from_str = classmethod(_from_str)

from torch.distributed.run import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
