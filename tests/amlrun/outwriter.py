"""Writer for the amlrun output-integrity test.

usage: outwriter.py LINES [killmid]
Writes LINES lines to stdout and LINES to stderr, interleaved, in chunks
cut at random places (so lines straddle writes and pipe reads), lines of
random length (sometimes longer than a pipe buffer).  Each line is
  R<rank> S<stream> N<seq> <payload> C<crc32 of everything before " C">
The last stdout line has no newline.  With "killmid" rank 1 SIGKILLs
itself in the middle of its last stderr line, which then ends at the
marker "CUT".
"""
import os
import random
import signal
import sys
import zlib

count = int(sys.argv[1])
rank = int(os.environ["RANK"])
killmid = len(sys.argv) > 2 and sys.argv[2] == "killmid" and rank == 1
rng = random.Random(rank * 7919 + 17)
alphabet = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .:/"
# Payloads are slices of one random text at random places: a line's bytes
# drawn one by one cost this test 8 s of CPU in the writers (the test is
# about amlrun's relay, not about Python's random).
POOL = 1 << 18
pool = rng.randbytes(POOL).translate(bytes(alphabet[i % len(alphabet)] for i in range(256)))


def line(stream, seq):
    r = rng.random()
    n = rng.randrange(0, 200) if r < 0.997 else rng.randrange(200, 100000)
    at = rng.randrange(0, POOL - n)
    body = b"R%d S%d N%d %s" % (rank, stream, seq, pool[at:at + n])
    return body + b" C%08x" % zlib.crc32(body)


pending = {1: bytearray(), 2: bytearray()}


def flush(stream, everything=False):
    buf = pending[stream]
    while buf and (everything or len(buf) > 8192):
        cut = len(buf) if everything else rng.randrange(1, len(buf) + 1)
        os.write(stream, bytes(buf[:cut]))
        del buf[:cut]


for seq in range(count):
    for stream in (1, 2):
        text = line(stream, seq)
        last = seq == count - 1
        if last and stream == 1:
            pending[1] += text  # no newline at the very end
        elif last and stream == 2 and killmid:
            flush(1, True)
            flush(2, True)
            os.write(2, text[: len(text) // 2] + b"CUT")
            os.kill(os.getpid(), signal.SIGKILL)
        else:
            pending[stream] += text + b"\n"
        flush(stream)
flush(1, True)
flush(2, True)
