"""Unit tests of the amldist module over the real libamldist, with synthetic
environments given as mappings (the process's own is left alone, except
where export() into os.environ itself is tested).  Run by
tests/sh/python/python_unit.sh; AMLDIST_LIBRARY names the library, AMLRUN
the amlrun whose plans binding() must match, AMLDIST_TOPOLOGIES a folder of
hwloc XML files."""
import dataclasses
import glob
import os
import subprocess
import sys
import unittest

import amldist

OMPI = {"OMPI_COMM_WORLD_RANK": "5", "OMPI_COMM_WORLD_SIZE": "8",
        "OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_LOCAL_SIZE": "4"}


class LayoutTest(unittest.TestCase):
    def test_canonical_values_as_given(self):
        env = {"RANK": "6", "WORLD_SIZE": "8", "LOCAL_RANK": "2",
               "LOCAL_WORLD_SIZE": "4", "NODE_RANK": "1",
               "GROUP_WORLD_SIZE": "2", "MASTER_ADDR": "10.1.2.3",
               "MASTER_PORT": "4567", "TORCHELASTIC_RUN_ID": "x"}
        got = amldist.layout(env=env)
        self.assertEqual(
            (got.rank, got.world_size, got.local_rank, got.local_world_size,
             got.node_rank, got.num_nodes, got.master_addr, got.master_port),
            (6, 8, 2, 4, 1, 2, "10.1.2.3", 4567))
        self.assertEqual(got.launcher, "torchrun")
        self.assertEqual(got.explain("rank"), "RANK=6")

    def test_ompi_only(self):
        got = amldist.layout(env=OMPI)
        self.assertEqual((got.rank, got.world_size, got.local_rank,
                          got.local_world_size, got.launcher),
                         (5, 8, 1, 4, "ompi"))
        self.assertEqual(got.explain("rank"), "OMPI_COMM_WORLD_RANK=5")

    def test_unknown_is_none_with_a_reason(self):
        got = amldist.layout(env={"RANK": "1", "WORLD_SIZE": "4"})
        self.assertEqual((got.rank, got.world_size), (1, 4))
        for f in ("local_rank", "local_world_size", "node_rank",
                  "master_addr"):
            self.assertIsNone(getattr(got, f), f)
            self.assertIn("unknown", got.explain(f))

    def test_reads_os_environ_by_default(self):
        saved = dict(os.environ)
        try:
            for k in [k for k in os.environ if k not in ("PATH", "HOME")]:
                del os.environ[k]
            os.environ.update(OMPI)
            self.assertEqual(amldist.layout(), amldist.layout(env=OMPI))
        finally:
            os.environ.clear()
            os.environ.update(saved)

    def test_bad_value_names_variable(self):
        with self.assertRaises(amldist.LayoutError) as cm:
            amldist.layout(env={"RANK": "x", "WORLD_SIZE": "2"})
        e = cm.exception
        self.assertIsInstance(e, ValueError)
        self.assertIsInstance(e, amldist.Error)
        self.assertIn('RANK="x"', str(e))
        self.assertEqual(e.name, "AMLDIST_EPARSE")
        self.assertLess(e.code, 0)

    def test_missing_half_names_it(self):
        with self.assertRaises(amldist.LayoutError) as cm:
            amldist.layout(env={"RANK": "1"})
        self.assertIn("WORLD_SIZE", str(cm.exception))

    def test_conflict_and_prefer(self):
        env = dict(OMPI, RANK="4", WORLD_SIZE="8")
        with self.assertRaises(amldist.LayoutError) as cm:
            amldist.layout(env=env)
        self.assertIn("RANK=4", str(cm.exception))
        self.assertIn("OMPI_COMM_WORLD_RANK=5", str(cm.exception))
        self.assertEqual(amldist.layout(env=env, prefer="canonical").rank, 4)
        self.assertEqual(amldist.layout(env=env, prefer="launcher").rank, 5)
        with self.assertRaises(ValueError):
            amldist.layout(env=env, prefer="mpirun")

    def test_values_must_be_strings(self):
        with self.assertRaises(TypeError) as cm:
            amldist.layout(env={"RANK": 1, "WORLD_SIZE": "2"})
        self.assertIn("'RANK'", str(cm.exception))

    def test_explain_unknown_field(self):
        with self.assertRaises(ValueError):
            amldist.layout(env={}).explain("ranks")


class ExportTest(unittest.TestCase):
    def test_export_from_ompi(self):
        env = dict(OMPI, MASTER_ADDR="node0", KEEP="me", LOCAL_RANK="3")
        before = amldist.layout(env=env)
        got = amldist.export(env=env)
        self.assertEqual(got.launcher, "ompi")
        self.assertEqual(env["KEEP"], "me")
        want = {"RANK": before.rank, "WORLD_SIZE": before.world_size,
                "LOCAL_RANK": before.local_rank,
                "LOCAL_WORLD_SIZE": before.local_world_size,
                "MASTER_ADDR": before.master_addr,
                "MASTER_PORT": before.master_port}
        self.assertEqual({k: env[k] for k in want},
                         {k: str(v) for k, v in want.items()})
        self.assertEqual(env["AMLDIST_LAUNCHER"], "amlrun")
        # Read back: the same job, now as amlrun's variables.
        after = amldist.layout(env=env)
        self.assertEqual(after.launcher, "amlrun")
        self.assertEqual(after, dataclasses.replace(before,
                                                    launcher="amlrun"))

    def test_twice_is_once(self):
        env = dict(OMPI, MASTER_ADDR="node0")
        amldist.export(env=env)
        once = dict(env)
        again = amldist.export(env=env)
        self.assertEqual(env, once)
        self.assertEqual((again.rank, again.launcher), (5, "amlrun"))

    def test_unknown_values_are_removed(self):
        """A stale value of an outer launcher never survives as ours."""
        env = {"PMI_RANK": "1", "PMI_SIZE": "4", "MASTER_ADDR": "h0",
               "LOCAL_RANK": "3", "NODE_RANK": "1"}
        got = amldist.export(env=env)
        self.assertEqual(got.launcher, "mpich")
        self.assertIsNone(got.local_rank)
        self.assertNotIn("LOCAL_RANK", env)
        self.assertNotIn("NODE_RANK", env)
        self.assertEqual((env["RANK"], env["WORLD_SIZE"]), ("1", "4"))

    def test_unknown_master_raises_and_changes_nothing(self):
        env = {"PMI_RANK": "1", "PMI_SIZE": "4", "OTHER": "1"}
        copy = dict(env)
        with self.assertRaises(amldist.LayoutError) as cm:
            amldist.export(env=env)
        self.assertIn("MASTER_ADDR", str(cm.exception))
        self.assertEqual(env, copy)
        env["MASTER_ADDR"] = "node0"
        amldist.export(env=env)
        self.assertEqual((env["RANK"], env["MASTER_ADDR"]), ("1", "node0"))

    def test_export_reaches_children(self):
        """os.environ, and with it C's environ: a child process sees it."""
        saved = dict(os.environ)
        try:
            for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                      "AMLDIST_LAUNCHER", "TORCHELASTIC_RUN_ID"):
                os.environ.pop(k, None)
            os.environ.update(OMPI, MASTER_ADDR="node0")
            amldist.export()
            self.assertEqual(os.environ["RANK"], "5")
            out = subprocess.run(["sh", "-c", "echo $RANK/$WORLD_SIZE"],
                                 capture_output=True, text=True).stdout
            self.assertEqual(out.strip(), "5/8")
        finally:
            os.environ.clear()
            os.environ.update(saved)


def dry_run(amlrun, xml, n):
    """Each rank's variables from `amlrun --dry-run --topology xml`."""
    out = subprocess.run(
        [amlrun, "--dry-run", "--topology", xml, "--nproc-per-node", str(n),
         "--master-port", "29500", "/bin/true"],
        capture_output=True, text=True, env={"PATH": os.environ["PATH"]})
    ranks = []
    for line in out.stdout.splitlines():
        if line.startswith("rank ") and " -- " in line:
            words = line.split(": ", 1)[1].split(" -- ")[0].split()
            ranks.append(dict(w.split("=", 1) for w in words))
    return ranks


class BindingTest(unittest.TestCase):
    def test_same_plan_as_amlrun(self):
        """binding() over an XML file gives each local rank what amlrun's
        plan gives it, read back through binding() from amlrun's own
        variables."""
        amlrun = os.environ.get("AMLRUN")
        xmls = sorted(glob.glob(os.path.join(
            os.environ.get("AMLDIST_TOPOLOGIES", "/nonexistent"), "*",
            "*.xml")))
        if not amlrun or not xmls:
            self.skipTest("AMLRUN or AMLDIST_TOPOLOGIES not given")
        compared = 0
        for xml in xmls:
            for n in (1, 3, 8):
                ranks = dry_run(amlrun, xml, n)
                if len(ranks) != n:
                    continue    # a topology amlrun refuses to plan
                for r, env in enumerate(ranks):
                    theirs = amldist.binding(env=env)
                    mine = amldist.binding(env={
                        "LOCAL_RANK": str(r), "LOCAL_WORLD_SIZE": str(n),
                        "RANK": str(r), "WORLD_SIZE": str(n)}, topology=xml)
                    self.assertEqual(theirs.source, "amlrun")
                    self.assertEqual(mine.source, "plan")
                    for f in ("gpu", "gpu_busid", "planned_cpus", "numa",
                              "nic"):
                        self.assertEqual(getattr(mine, f), getattr(theirs, f),
                                         f"{xml} rank {r} of {n}: {f}")
                    compared += 1
        self.assertGreater(compared, 20)

    def test_amlrun_variables(self):
        env = {"AMLDIST_GPU": "0000:07:00.0", "AMLDIST_GPU_INDEX": "2",
               "AMLDIST_CPUS": "0-2,8", "AMLDIST_NUMA": "1",
               "AMLDIST_NIC": "mlx5_3"}
        got = amldist.binding(env=env)
        self.assertEqual((got.source, got.gpu, got.gpu_busid,
                          got.planned_cpus, got.numa, got.nic),
                         ("amlrun", 2, "0000:07:00.0", (0, 1, 2, 8), 1,
                          "mlx5_3"))
        self.assertEqual(set(got.cpus), os.sched_getaffinity(0))

    def test_bad_amlrun_variable(self):
        with self.assertRaises(amldist.LayoutError) as cm:
            amldist.binding(env={"AMLDIST_CPUS": "0-x"})
        self.assertIn("AMLDIST_CPUS", str(cm.exception))

    def test_this_machine(self):
        got = amldist.binding(env={"LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1",
                                   "RANK": "0", "WORLD_SIZE": "1"})
        self.assertEqual(got.source, "plan")
        self.assertEqual(set(got.cpus), os.sched_getaffinity(0))

    def test_unknown_local_rank(self):
        got = amldist.binding(env={"RANK": "1", "WORLD_SIZE": "4"})
        self.assertIsNone(got.gpu)
        self.assertIn("local rank is unknown", got.warnings)

    def test_missing_topology_file(self):
        with self.assertRaises(amldist.MachineError) as cm:
            amldist.binding(env={}, topology="/nonexistent/topo.xml")
        self.assertIn("/nonexistent/topo.xml", str(cm.exception))


class LoadTest(unittest.TestCase):
    def test_bad_library_path(self):
        # The library loads at its first use: import works, the first call
        # that needs it raises the ImportError.
        env = dict(os.environ, AMLDIST_LIBRARY="/nonexistent/libamldist.so.1")
        out = subprocess.run([sys.executable, "-c",
                              "import amldist; amldist.layout()"],
                             capture_output=True, text=True, env=env)
        self.assertNotEqual(out.returncode, 0)
        self.assertIn("ImportError", out.stderr)
        self.assertIn("/nonexistent/libamldist.so.1", out.stderr)

    def test_versions_agree(self):
        self.assertEqual(amldist.library_version().split(".")[0],
                         amldist.__version__.split(".")[0])


# The progress page as amlrun makes it (lib/progress/page.h), read back
# with struct: the pure-Python writer must store the C library's layout.
from amldist import progress as _progress_fn  # noqa: E402
_pg = sys.modules["amldist.progress"]


def _page(nslots):
    """A memfd laid out as amlrun's page, inheritable, and its mmap."""
    import mmap
    import struct
    fd = os.memfd_create("test-progress", 0)
    os.set_inheritable(fd, True)
    size = _pg.HEADER + nslots * _pg.SLOT_SIZE
    os.ftruncate(fd, size)
    m = mmap.mmap(fd, size)
    struct.pack_into("<QIIII", m, 0, _pg.MAGIC, nslots, _pg.SLOT_SIZE,
                     _pg.RING, _pg.HEADER)
    return fd, m


def _slot(m, i):
    """(calls, owner, [(step, t_ns) of each call, oldest first])."""
    import struct
    base = _pg.HEADER + i * _pg.SLOT_SIZE
    _, calls, owner = struct.unpack_from("<QQi", m, base)
    marks = [struct.unpack_from("<Qq", m, base + _pg.SLOT_HEAD +
                                (k % _pg.RING) * 16)
             for k in range(max(0, calls - _pg.RING), calls)]
    return calls, owner, marks


def _run(code, fd=None, **env):
    """Python code in a new process, with this module; its stdout."""
    full = dict(os.environ, **env)
    full["PYTHONPATH"] = os.path.dirname(os.path.dirname(amldist.__file__))
    full.pop("AMLDIST_PROGRESS_FD", None)
    full.pop("AMLDIST_PROGRESS_SLOT", None)
    if fd is not None:
        full["AMLDIST_PROGRESS_FD"] = str(fd)
    full.update(env)
    out = subprocess.run([sys.executable, "-c", code], env=full, text=True,
                         capture_output=True, pass_fds=() if fd is None
                         else (fd,), check=True)
    return out.stdout


class ProgressTest(unittest.TestCase):
    def test_without_amlrun_returns_zero(self):
        self.assertEqual(_run("import amldist; print(amldist.progress(1))"),
                         "0\n")

    def test_no_library_needed(self):
        out = _run("import amldist; print(amldist.progress(1))",
                   AMLDIST_LIBRARY="/nonexistent/libamldist.so.1")
        self.assertEqual(out, "0\n")

    def test_writes_the_layout(self):
        import time
        fd, m = _page(3)
        before = time.monotonic_ns()
        out = _run("import amldist, os\n"
                   "for s in (5, 7, 2**64 - 1): amldist.progress(s)\n"
                   "print(os.getpid())", fd, AMLDIST_PROGRESS_SLOT="2")
        after = time.monotonic_ns()
        calls, owner, marks = _slot(m, 2)
        self.assertEqual(calls, 3)
        self.assertEqual(owner, int(out))
        self.assertEqual([s for s, _ in marks], [5, 7, 2**64 - 1])
        ts = [t for _, t in marks]
        self.assertEqual(ts, sorted(ts))
        self.assertTrue(before <= ts[0] and ts[-1] <= after)
        self.assertEqual(_slot(m, 1)[0], 0)
        os.close(fd)

    def test_expect_writes_the_layout(self):
        # page.h: at 24 the count of calls then plus 1, at 32 the end.
        import struct
        import time
        fd, m = _page(1)
        before = time.monotonic_ns()
        out = _run("import amldist\n"
                   "amldist.progress(1); amldist.progress(2)\n"
                   "print(amldist.progress_expect(60))", fd,
                   AMLDIST_PROGRESS_SLOT="0")
        self.assertEqual(out, "0\n")
        expect, until = struct.unpack_from("<Qq", m, _pg.HEADER + 24)
        self.assertEqual(expect, 3)
        self.assertTrue(before + 60 * 10**9 <= until)
        self.assertTrue(until <= time.monotonic_ns() + 60 * 10**9)
        os.close(fd)

    def test_expect_bad_values(self):
        for bad in (-1, float("nan"), float("inf"), 2e9, "x", None):
            with self.assertRaises(ValueError):
                amldist.progress_expect(bad)
        self.assertEqual(amldist.progress_expect(0), 0)

    def test_ring_wraps(self):
        fd, m = _page(1)
        _run("import amldist\nfor s in range(1, 201): amldist.progress(s)",
             fd, AMLDIST_PROGRESS_SLOT="0")
        calls, _, marks = _slot(m, 0)
        self.assertEqual(calls, 200)
        self.assertEqual([s for s, _ in marks], list(range(137, 201)))
        os.close(fd)

    def test_slot_of_another_process(self):
        # The first process to call owns the slot; a second records nothing.
        fd, m = _page(1)
        for _ in range(2):
            _run("import amldist; amldist.progress(1)", fd,
                 AMLDIST_PROGRESS_SLOT="0")
        self.assertEqual(_slot(m, 0)[0], 1)
        os.close(fd)

    def test_forked_child_records_nothing(self):
        fd, m = _page(1)
        _run("import amldist, os\n"
             "pid = os.fork()\n"
             "if pid == 0:\n"
             "    amldist.progress(99); os._exit(0)\n"
             "os.waitpid(pid, 0)\n"
             "amldist.progress(1)", fd, AMLDIST_PROGRESS_SLOT="0")
        calls, owner, marks = _slot(m, 0)
        self.assertEqual((calls, [s for s, _ in marks]), (1, [1]))
        os.close(fd)

    def test_bad_values_are_no_page(self):
        fd, m = _page(1)
        for fd_text, slot in (("abc", "0"), ("-1", "0"), ("99", "0"),
                              ("", "0"), ("0", "0"), (str(fd), "1"),
                              (str(fd), "x"), (str(fd), "-0"),
                              (str(fd), "\u0661")):
            out = _run("import amldist; print(amldist.progress(1))", fd,
                       AMLDIST_PROGRESS_FD=fd_text,
                       AMLDIST_PROGRESS_SLOT=slot)
            self.assertEqual(out, "0\n", (fd_text, slot))
        self.assertEqual(_slot(m, 0)[0], 0)
        # A file that is not a page (no magic).
        import tempfile
        with tempfile.TemporaryFile() as f:
            f.truncate(_pg.HEADER + _pg.SLOT_SIZE)
            os.set_inheritable(f.fileno(), True)
            out = _run("import amldist; print(amldist.progress(1))",
                       f.fileno(), AMLDIST_PROGRESS_SLOT="0")
        self.assertEqual(out, "0\n")
        os.close(fd)

    def test_bad_step(self):
        fd, m = _page(1)
        out = _run("import amldist\n"
                   "for s in (-1, 2**64, 1.5, '3'):\n"
                   "    try:\n"
                   "        amldist.progress(s)\n"
                   "    except (ValueError, TypeError) as e:\n"
                   "        print(type(e).__name__)\n"
                   "amldist.progress(4)", fd, AMLDIST_PROGRESS_SLOT="0")
        self.assertEqual(out.split(), ["ValueError"] * 4)
        # Nothing half-written: the one good call is the one mark.
        calls, _, marks = _slot(m, 0)
        self.assertEqual((calls, [s for s, _ in marks]), (1, [4]))
        os.close(fd)


if __name__ == "__main__":
    unittest.main()
