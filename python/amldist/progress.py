"""amldist.progress(step): tell amlrun that this rank reached `step`, in
pure Python (no libamldist, no compiler), for its hang detection, its
straggler line and --status:

    for step, batch in enumerate(loader):
        train(batch)
        amldist.progress(step)

and amldist.progress_expect(seconds) before a long step (a checkpoint's
save, an evaluation): the next progress() comes within that many seconds,
and amlrun's --hang-timeout does not take the rank for stalled until then
(as torchelastic's `expires(after=seconds)`).

amlrun shares a page of memory with its workers (a memfd that they inherit,
named by AMLDIST_PROGRESS_FD, the worker's slot by AMLDIST_PROGRESS_SLOT);
a call stores the step and time.monotonic_ns() there with no system call,
in the layout of lib/progress/page.h (the C library's amldist_progress()
writes the same).  Without amlrun, or with a bad value in either variable,
it does nothing and returns 0.  A child made by os.fork() records nothing
(its parent owns the slot), nor does a program that a worker starts: the
first process to call claims the slot."""
import mmap
import os
import stat
import struct
import threading
import time

FD_ENV = "AMLDIST_PROGRESS_FD"
SLOT_ENV = "AMLDIST_PROGRESS_SLOT"

# lib/progress/page.h: the header, then slots of SLOT_SIZE bytes; in a slot
# u64 lock (the C writers'), u64 calls, i32 owner, at 24 u64 expect (the
# count of calls when a long step was announced, plus 1), at 32 i64 until
# (when it ends), then at 64 the ring of RING {u64 step, i64 t_ns}.
MAGIC = 0x31474F5250444D41
HEADER = 64
RING = 64
SLOT_HEAD = 64
SLOT_SIZE = SLOT_HEAD + 16 * RING
MAX_SLOTS = 4096
_CALLS, _OWNER, _EXPECT = 1, 2, 3   # in 8-byte words from the slot's start
_UNTIL = 32                 # in bytes from the slot's start
EXPECT_MAX_S = 1e9          # the longest step announced (as the C call's)
_mark = struct.Struct("<Qq").pack_into
_until = struct.Struct("<q").pack_into

_now = time.monotonic_ns    # CLOCK_MONOTONIC, as the C library reads it
_words = None               # the page as u64 words, once found
_bytes = None               # and as bytes
_calls = 0                  # the word of this slot's count
_ring = 0                   # the byte offset of this slot's ring
_slot = 0                   # the byte offset of this slot
_looked = False             # the environment was read (found or not)
_lock = threading.Lock()    # the first call's look, once


def _number(text, top):
    """A decimal in [0, top], the whole text, else None."""
    if not text or not text.isdigit() or not text.isascii():
        return None
    value = int(text)
    return value if value <= top else None


def _open():
    """Map the page and claim the slot, or leave _words None."""
    global _words, _bytes, _calls, _ring, _slot
    fd = _number(os.environ.get(FD_ENV), 2**31 - 1)
    slot = _number(os.environ.get(SLOT_ENV), MAX_SLOTS - 1)
    if fd is None or slot is None:
        return
    try:
        st = os.fstat(fd)
        need = HEADER + (slot + 1) * SLOT_SIZE
        if not stat.S_ISREG(st.st_mode) or st.st_size < need:
            return
        page = mmap.mmap(fd, st.st_size, mmap.MAP_SHARED,
                         mmap.PROT_READ | mmap.PROT_WRITE)
    except (OSError, ValueError, OverflowError):
        return
    magic, nslots, slot_size, ring, header = struct.unpack_from(
        "<QIIII", page, 0)
    if (magic != MAGIC or slot_size != SLOT_SIZE or ring != RING
            or header != HEADER or slot >= nslots
            or HEADER + nslots * SLOT_SIZE > len(page)):
        page.close()
        return
    words = memoryview(page).cast("Q")
    base = (HEADER + slot * SLOT_SIZE) // 8
    # Claim the slot (the C library does it with a compare-and-swap; here a
    # store and a look back: two processes racing to their first call at
    # the same instant is the one case this does not settle).
    pid = os.getpid()
    if words[base + _OWNER] & 0xFFFFFFFF == 0:
        words[base + _OWNER] = pid
    if words[base + _OWNER] & 0xFFFFFFFF != pid:
        words.release()
        page.close()
        return
    _calls = base + _CALLS
    _slot = HEADER + slot * SLOT_SIZE
    _ring = _slot + SLOT_HEAD
    _bytes = memoryview(page)
    _words = words


def _forget_in_child():
    """After os.fork(), in the child: its parent writes the slot."""
    global _words, _looked, _lock
    _words, _looked, _lock = None, True, threading.Lock()


os.register_at_fork(after_in_child=_forget_in_child)


def _found():
    """The page's words once found (looked for at the first call), or
    None without one."""
    global _looked
    w = _words
    if w is None and not _looked:
        with _lock:
            if not _looked:
                _open()
                _looked = True
        w = _words
    return w


def progress(step):
    """Record that this process reached `step` (an int, 0 <= step < 2**64)
    now.  Returns 0, as amldist_progress() does."""
    w = _words
    if w is None:
        w = _found()
        if w is None:
            return 0
    # The mark, then the count (page.h: a reader takes marks up to the
    # count it saw).  Each is one store, in program order; Python has no
    # fences, so this relies on the machine not reordering stores, as
    # x86-64 does not.  Two threads calling at once may lose one mark (the
    # GIL keeps each store whole).
    c = w[_calls]
    try:
        _mark(_bytes, _ring + (c % RING) * 16, step, _now())
    except struct.error:
        raise ValueError(f"amldist.progress: step {step!r} is not an int "
                         "in [0, 2**64)") from None
    w[_calls] = c + 1
    return 0


def progress_expect(seconds):
    """Announce a long step: this process's next progress() comes within
    `seconds` (a number in [0, 1e9]; 0: none).  Until then amlrun does not
    take the rank for stalled; past it without a call, it does.  The next
    progress() ends the announcement.  Returns 0, as
    amldist_progress_expect() does; ValueError for another value."""
    try:
        s = float(seconds)
    except (TypeError, ValueError):
        s = float("nan")
    if not 0 <= s <= EXPECT_MAX_S:
        raise ValueError(f"amldist.progress_expect: {seconds!r} is not a "
                         "number of seconds in [0, 1e9]")
    w = _found()
    if w is None:
        return 0
    # When it ends, then the count it follows (page.h: `expect` last).
    c = w[_calls]
    _until(_bytes, _slot + _UNTIL, _now() + int(s * 1e9))
    w[_slot // 8 + _EXPECT] = c + 1
    return 0
