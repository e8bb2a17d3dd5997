#!/usr/bin/python3
# What torch's TCPStore costs as a rendezvous (issue 40), beside
# bench/rdzv_host_bench.c's host in bench/rdzv_host.sh: the store a
# process of its own (torch.distributed.TCPStore, is_master), and N agents
# as threads of processes of at most 1,000 each at nice 19, each with its
# own store client (made once released) driving torchrun's own c10d
# rendezvous
# (DynamicRendezvousHandler over C10dRendezvousBackend: compare-and-set of
# the pickled state), all released at once.  Prints one line:
#
#     form_ms form_cpu_ms steady_cpu_ms_per_s - rss_mib - - -
#
#     form    the release to the last agent's next_rendezvous() returning
#     form_cpu    the store process's CPU from its start to then
#     steady  its CPU per second over SECS seconds of the formed job (the
#             handlers' keep-alives)
#     rss     the store's peak resident set (VmHWM), MiB
#
#     rdzv_tcpstore.py N SECS     (Debian's python3-torch 1.13)
import datetime
import multiprocessing as mp
import os
import socket
import sys
import threading
import time

from torch.distributed import TCPStore
from torch.distributed.elastic.rendezvous import RendezvousParameters
from torch.distributed.elastic.rendezvous.c10d_rendezvous_backend import C10dRendezvousBackend
from torch.distributed.elastic.rendezvous.dynamic_rendezvous import create_handler

PER = 1000


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def cpu_ms(pid):
    with open(f"/proc/{pid}/stat") as f:
        v = f.read().rsplit(")", 1)[1].split()
    return (int(v[11]) + int(v[12])) * 1000.0 / os.sysconf("SC_CLK_TCK")


def hwm_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


def store_main(port, ready):
    store = TCPStore("127.0.0.1", port, None, True,
                     datetime.timedelta(seconds=600), wait_for_workers=False)
    ready.set()
    while store:  # held: the server lives as long as its object
        time.sleep(3600)


def agents_main(port, n, lo, hi, gate, done, hold):
    os.nice(19)

    def one(i):
        gate.wait()  # then connect and join, as amlrun's agents do
        store = TCPStore("127.0.0.1", port, None, False,
                         datetime.timedelta(seconds=600))
        params = RendezvousParameters("c10d", f"127.0.0.1:{port}", "bench",
                                      n, n, join_timeout=600)
        h = create_handler(store, C10dRendezvousBackend(store, "bench"),
                           params)
        h.next_rendezvous()
        done.put(time.monotonic())
        hold.wait()  # formed: the keep-alives go on until the end
        h.shutdown()

    ts = [threading.Thread(target=one, args=(i,), daemon=True)
          for i in range(lo, hi)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


def main():
    n, secs = int(sys.argv[1]), int(sys.argv[2])
    port = free_port()
    ready = mp.Event()
    store = mp.Process(target=store_main, args=(port, ready), daemon=True)
    store.start()
    ready.wait()
    gate, hold, done = mp.Event(), mp.Event(), mp.Queue()
    kids = []
    for lo in range(0, n, PER):
        p = mp.Process(target=agents_main,
                       args=(port, n, lo, min(n, lo + PER), gate, done, hold))
        p.start()
        kids.append(p)
    time.sleep(1 + n / 1000)  # every thread waits on the gate
    t0 = time.monotonic()
    gate.set()
    last = max(done.get(timeout=600) for _ in range(n))
    form_ms = (last - t0) * 1000
    form_cpu = cpu_ms(store.pid)  # from its start, as the host's
    c1 = cpu_ms(store.pid)
    time.sleep(secs)
    steady = (cpu_ms(store.pid) - c1) / secs
    rss = hwm_mib(store.pid)
    hold.set()
    for p in kids:
        p.join(60)
    store.terminate()
    print(f"{form_ms:.1f} {form_cpu:.1f} {steady:.1f} - {rss:.1f} - - -")


if __name__ == "__main__":
    main()
