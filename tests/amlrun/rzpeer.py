#!/usr/bin/env python3
"""A hostile peer of amlrun's control plane, speaking its wire on loopback
(lib/rdzv/wire.c, lib/net/frames.h), for tests/sh/rdzv/rdzv_hostile.sh.

    rzpeer.py host PORT STARTED
        An impostor host on 127.0.0.1:PORT: it answers a JOIN with an
        ASSIGN (two nodes, the agent node 1), waits until the file STARTED
        exists (the agent's worker runs), then sends FINISH 0.
    rzpeer.py agent PORT ENDPOINT TEXTFILE
        An agent that joins the job at 127.0.0.1:PORT with the token derived
        from ENDPOINT (a job without a secret: what anyone on the network
        can compute, or read from a JOIN), as node 1 of 2, and on its ASSIGN
        reports a failure of its rank with the bytes of TEXTFILE.  The
        environment may change the JOIN: RZPEER_TOKEN (the digest, in hex,
        as a capture reads it), RZPEER_RUN (the run id), RZPEER_ORDER
        ("none": no node rank), RZPEER_NODES (MIN:MAX), RZPEER_KEEPALIVE
        (MS:MISSES).

The plaintext frames of a job without a secret; a job with one runs the
handshake first (the crypto engineer's), which this peer does not know.
"""
import os
import socket
import struct
import sys
import threading
import time

MAGIC, PROTOCOL = 0x414D4C42, 3
RZ_PROTOCOL = 2  # the JOIN's (AMLDIST__RZ_PROTOCOL)
JOIN, REFUSE, ASSIGN, FAIL, STOP, DONE, FINISH, BEAT, WAIT = range(16, 25)


def fnv(data, h=0xCBF29CE484222325):
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def frame(kind, payload=b""):
    return struct.pack(">IHHI", MAGIC, PROTOCOL, kind, len(payload)) + payload


def read_frame(s):
    head = recv_exact(s, 12)
    _, _, kind, n = struct.unpack(">IHHI", head)
    return kind, recv_exact(s, n)


def recv_exact(s, n):
    out = b""
    while len(out) < n:
        got = s.recv(n - len(out))
        if not got:
            raise EOFError("peer closed")
        out += got
    return out


def beats(s, stop):
    while not stop.is_set():
        try:
            s.sendall(frame(BEAT))
        except OSError:
            return
        time.sleep(0.2)


def assign(node, nodes, addr=b"127.0.0.1"):
    # round, restarts, node, nodes, port, address length, flags, last
    # call, join timeout, runs (0: the nodes listed one by one)
    head = struct.pack(">10I", 0, 0, node, nodes, 29500, len(addr), 0,
                       30000, 300000, 0)
    per = b"".join(struct.pack(">3I", 1, 0, 1) for _ in range(nodes))
    return head + addr + per


def host(port, started):
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", port))
    ls.listen(4)
    print("listening", flush=True)
    s, _ = ls.accept()
    kind, _ = read_frame(s)
    assert kind == JOIN, kind
    s.sendall(frame(ASSIGN, assign(1, 2)))
    stop = threading.Event()
    threading.Thread(target=beats, args=(s, stop), daemon=True).start()
    deadline = time.time() + 60
    while not os.path.exists(started) and time.time() < deadline:
        time.sleep(0.05)
    s.sendall(frame(FINISH, struct.pack(">I", 0)))
    # Answer what comes (DONE, ...) until the agent leaves.
    try:
        while True:
            read_frame(s)
    except (EOFError, OSError):
        pass
    stop.set()


def agent(port, endpoint, textfile):
    with open(textfile, "rb") as f:
        text = f.read()
    env = os.environ.get
    token = fnv(endpoint.encode(), fnv(b"amldist-rdzv|"))
    if env("RZPEER_TOKEN"):
        token = int(env("RZPEER_TOKEN"), 16)
    run = fnv(env("RZPEER_RUN", "none").encode())
    order = env("RZPEER_ORDER", "1")
    order = 0xFFFFFFFF if order == "none" else int(order)
    lo, hi = (int(x) for x in env("RZPEER_NODES", "2:2").split(":"))
    ka, misses = (int(x) for x in env("RZPEER_KEEPALIVE", "1000:5").split(":"))
    host_addr = endpoint.rsplit(":", 1)[0]
    ident = int.from_bytes(os.urandom(8), "big")
    addr = b""
    # ... the machine, the address's length, the control plane's protocol
    # (lib/rdzv/rdzv_internal.h's AMLDIST__RZ_PROTOCOL)
    body = struct.pack(">QQQ11IQII", token, ident, run, 0, 1, order, lo, hi,
                       0, 0, ka, misses, 30000, 60000, 0, len(addr),
                       RZ_PROTOCOL) + addr
    s = socket.create_connection((host_addr, port))
    s.sendall(frame(JOIN, body))
    stop = threading.Event()
    threading.Thread(target=beats, args=(s, stop), daemon=True).start()
    try:
        while True:
            kind, p = read_frame(s)
            if kind == REFUSE:
                print("refused:", p[4:].decode(errors="replace"), flush=True)
                return 1
            if kind == ASSIGN:
                s.sendall(frame(FAIL, struct.pack(">4I", 0, 0, 0, 42) + text))
            if kind == STOP:
                s.sendall(frame(DONE, struct.pack(">3I", 0, 143, 0)))
            if kind == FINISH:
                return 0
    except (EOFError, OSError):
        return 0
    finally:
        stop.set()


if __name__ == "__main__":
    if sys.argv[1] == "host":
        host(int(sys.argv[2]), sys.argv[3])
    else:
        sys.exit(agent(int(sys.argv[2]), sys.argv[3], sys.argv[4]))
