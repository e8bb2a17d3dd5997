#!/usr/bin/env python3
"""The fuzz targets' kept corpora, one text file a target
(tests/fuzz/corpus/NAME.hex: an input a line, in hex), so that a run starts
where longer runs got to rather than from the few hand-written seeds.

  corpus.py unpack NAME.hex DIR   each input into DIR, named by its SHA-1
                                  as libFuzzer names them (again: no copy)
  corpus.py pack DIR NAME.hex     every file of DIR, sorted, one a line

To grow one: run the target longer into a directory of its own, merge
(`build-fuzz/NAME -merge=1 -max_len=512 NEW tests/fuzz/corpus/NAME OLD...`,
after unpacking NAME.hex into OLD), then pack NEW."""
import hashlib
import os
import sys


def unpack(src, out):
    os.makedirs(out, exist_ok=True)
    with open(src) as f:
        for line in f:
            data = bytes.fromhex(line.strip())
            path = os.path.join(out, hashlib.sha1(data).hexdigest())
            if not os.path.exists(path):
                with open(path, "wb") as g:
                    g.write(data)


def pack(src, out):
    lines = []
    for name in os.listdir(src):
        with open(os.path.join(src, name), "rb") as f:
            lines.append(f.read().hex())
    with open(out, "w") as g:
        g.writelines(h + "\n" for h in sorted(set(lines)))


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] not in ("unpack", "pack"):
        sys.exit(__doc__)
    (unpack if sys.argv[1] == "unpack" else pack)(sys.argv[2], sys.argv[3])
