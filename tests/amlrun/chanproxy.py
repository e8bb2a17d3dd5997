#!/usr/bin/env python3
"""A recording and tampering proxy for the channel's tests (issue 21).

    chanproxy.py LISTEN_ADDR LISTEN_PORT TARGET_ADDR TARGET_PORT [ACTION...]

Relays each connection to the target, frame by frame (net/frames.h's
12-byte header: magic, protocol, type, length), and records both
directions' bytes as DIR/c2s.K and DIR/s2c.K (K: the connection's number,
from 1, of those that reached the target) with --record DIR.  Only the
first connection that reaches the target is tampered with:

    --flip DIR:N       flip one bit of frame N (from 0) in direction DIR
                       (c2s: client to server, s2c: the other way), in its
                       last byte (the tag, when sealed)
    --reorder DIR:N    swap frames N and N+1
    --truncate DIR:N   frame N cut short: 4 bytes less, and its length too
    --inject DIR:N:FILE  before frame N, the last FINISH (type 22) of the
                       recording FILE, else its last frame
    --replay FILE      connect to nobody: send FILE's bytes to the client
    --armed GLOB:COUNT N counts the frames of its direction from the first
                       one read once COUNT files match GLOB (the workers'
                       records: the round has formed and they run), the
                       earlier ones relayed as they are.  Without it N
                       counts from the connection's first frame, which
                       suits the handshake only: the heartbeats' timing
                       frames (TIMEQ/TIMEA) come when the clock says, so
                       which frame is the Nth of the round's depends on
                       how the machine schedules the agents

Loopback and the test's own namespaces only.  Prints "proxy: ..." lines
(what it did) on stderr, and "ready" on stdout once it listens.
"""
import glob
import socket
import struct
import sys
import threading

HDR = 12


def frames_of(buf):
    """The whole frames at the start of buf, and the rest."""
    out = []
    while len(buf) >= HDR:
        n = struct.unpack(">I", buf[8:12])[0]
        if len(buf) < HDR + n:
            break
        out.append(buf[:HDR + n])
        buf = buf[HDR + n:]
    return out, buf


def say(msg):
    sys.stderr.write("proxy: %s\n" % msg)
    sys.stderr.flush()


args = sys.argv[1:]
laddr, lport, taddr, tport = args[0], int(args[1]), args[2], int(args[3])
actions = {}
record = None
replay = None
armed = None
i = 4
while i < len(args):
    a = args[i]
    if a == "--record":
        record = args[i + 1]
    elif a == "--replay":
        replay = open(args[i + 1], "rb").read()
    elif a == "--armed":
        pattern, count = args[i + 1].rsplit(":", 1)
        armed = (pattern, int(count))
    else:
        parts = args[i + 1].split(":")
        actions[(a[2:], parts[0])] = parts[1:]
    i += 2


def injected(path):
    fr, _ = frames_of(open(path, "rb").read())
    fin = [f for f in fr if struct.unpack(">H", f[6:8])[0] == 22]
    return (fin or fr)[-1]


def tamper(direction, index, frame, held):
    """What to send for frame number index: a list of frames."""
    for (what, d), p in actions.items():
        if d != direction or int(p[0]) != index and not (
                what == "reorder" and int(p[0]) + 1 == index):
            continue
        ftype = struct.unpack(">H", frame[6:8])[0]
        if what == "flip":
            say("flipped %s frame %d (type %d)" % (d, index, ftype))
            return [frame[:-1] + bytes([frame[-1] ^ 1])]
        if what == "truncate":
            n = struct.unpack(">I", frame[8:12])[0] - 4
            say("cut %s frame %d (type %d) short" % (d, index, ftype))
            return [frame[:8] + struct.pack(">I", n) + frame[HDR:HDR + n]]
        if what == "inject":
            extra = injected(p[1])
            say("injected a recorded frame (type %d) before %s frame %d" %
                (struct.unpack(">H", extra[6:8])[0], d, index))
            return [extra, frame]
        if what == "reorder":
            if int(p[0]) == index:
                held.append(frame)
                return []
            say("swapped %s frames %d and %d" % (d, index - 1, index))
            return [frame] + [held.pop()]
    return [frame]


def is_armed():
    return armed is None or len(glob.glob(armed[0])) >= armed[1]


def pump(src, dst, direction, rec, first):
    buf = b""
    index = 0
    live = False  # armed: frames count from here
    held = []
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            if rec:
                rec.write(data)
                rec.flush()
            buf += data
            whole, buf = frames_of(buf)
            for f in whole:
                live = live or is_armed()
                if not (first and live):
                    dst.sendall(f)
                    continue
                out = tamper(direction, index, f, held)
                index += 1
                for o in out:
                    dst.sendall(o)
    except OSError:
        pass
    for s in (src, dst):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


reached = [0]  # connections that reached the target
lock = threading.Lock()


def serve(client, k):
    if replay is not None:
        say("replayed %d recorded bytes to connection %d" % (len(replay), k))
        try:
            client.sendall(replay)
            while client.recv(65536):
                pass
        except OSError:
            pass
        client.close()
        return
    try:
        server = socket.create_connection((taddr, tport))
    except OSError as e:
        say("connection %d: the target refused (%s)" % (k, e))
        client.close()
        return
    with lock:
        reached[0] += 1
        k = reached[0]
    first = k == 1
    recs = [open("%s/%s.%d" % (record, d, k), "wb") if record else None
            for d in ("c2s", "s2c")]
    t = threading.Thread(target=pump, args=(server, client, "s2c", recs[1],
                                            first), daemon=True)
    t.start()
    pump(client, server, "c2s", recs[0], first)
    t.join()
    client.close()
    server.close()


ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind((laddr, lport))
ls.listen(16)
print("ready", flush=True)
k = 0
while True:
    c, _ = ls.accept()
    k += 1
    threading.Thread(target=serve, args=(c, k), daemon=True).start()
