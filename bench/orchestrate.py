"""The measuring half of bench/run (which builds everything first).

Runs every implementation (the C floors and fsafe paths through the
`bench` program, and the peers' drivers) as one process per case, each
timing its own K writes (start-up excluded), interleaved round by round on
the same directories; counts system calls per write with strace; measures
the batch's peak memory; prints a Markdown report on stdout and saves the
raw numbers as JSON.

Not a test: nothing here is registered with CTest.
"""
import atexit
import ctypes
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import module_floors  # noqa: E402  (bench/, beside this file)

ENV = os.environ
BUILD = ENV["BENCH_BUILD"]
ROOT = ENV["BENCH_ROOT"]
ROUNDS = int(ENV.get("ROUNDS", "7"))
N_4K_DISK = int(ENV.get("N_4K_DISK", "100"))
N_1M_DISK = int(ENV.get("N_1M_DISK", "20"))
N_4K_TMPFS = int(ENV.get("N_4K_TMPFS", "1000"))
N_1M_TMPFS = int(ENV.get("N_1M_TMPFS", "100"))
N_SPONGE = int(ENV.get("N_SPONGE", "30"))
N_MANY = int(ENV.get("N_MANY", "1000"))  # the batch floor's case: files in one dir
MODULES = ENV.get("MODULES", "1") == "1"  # issue 19's module cases
ONLY = ENV.get("ONLY", "")  # comma-separated implementation names (debug)
DISK_ROOT = ENV["BENCH_DISK"]
TMPFS_ROOT = ENV.get("BENCH_TMPFS", "")
SCRATCH = {"disk": ENV.get("BENCH_DISK_SCRATCH", ""), "tmpfs": ENV.get("BENCH_TMPFS_SCRATCH", "")}

KIB4 = 4096
MIB1 = 1 << 20

BENCH = os.path.join(BUILD, "bench")
PAIRED = os.path.join(BUILD, "paired")
PAIRED_RUNS = int(ENV.get("PAIRED_RUNS", "15"))
N_PAIRED = {4096: int(ENV.get("N_PAIRED_4K", "300")),
            1 << 20: int(ENV.get("N_PAIRED_1M", "30"))}
NODE_PATH = os.path.join(BUILD, "node", "node_modules")

# Durability classes.
DUR_FULL = "file+dir"   # data synced before the rename, directory synced after
DUR_FILE = "file only"  # data synced before the rename; the rename is not
DUR_NONE = "none"       # no sync at all

libc = ctypes.CDLL(None, use_errno=True)


def log(msg):
    print("bench/run: " + msg, file=sys.stderr, flush=True)


class Impl:
    def __init__(self, name, group, dur, argv, what, batch=0, distinct_only=False,
                 per_process=False, env=None):
        self.name, self.group, self.dur, self.argv, self.what = name, group, dur, argv, what
        self.batch = batch
        self.distinct_only = distinct_only
        self.per_process = per_process
        self.env = env

    def k(self, base, size, mode):
        """Writes per run, or None when the case does not apply."""
        if mode == "same" and self.distinct_only:
            return None
        if self.per_process:
            return min(base, N_SPONGE)
        if self.batch:
            if size >= MIB1 and self.batch > 100:
                return None  # 1 GiB per run: left out
            return max(base, self.batch) // self.batch * self.batch
        return base


def c_impl(name, dur, what, **kw):
    return Impl(name, "fsafe" if name.startswith("fsafe") else "floor", dur,
                lambda d, k, s, m, n=name: [BENCH, "write", n, d, str(k), str(s), m], what, **kw)


IMPLS = [
    c_impl("floor-fdatasync", DUR_FULL,
           "hand-written: O_EXCL temp, write, fdatasync, close, rename, fsync(dir)"),
    c_impl("floor-fsync", DUR_FULL, "the same with fsync"),
    c_impl("floor-nosync", DUR_NONE, "hand-written: O_EXCL temp, write, close, rename"),
    c_impl("fsafe", DUR_FULL, "fsafe_write_fileat(dirfd, name, buf, len, NULL)"),
    c_impl("fsafe-nosync", DUR_NONE, "fsafe_write_fileat with FSAFE_NO_SYNC"),
    c_impl("fsafe-writer", DUR_FULL, "fsafe_writer_open / _write / _commit per file"),
    c_impl("fsafe-async", DUR_FULL,
           "fsafe_async_submit of K writes (at most 128 outstanding), wait + reap until all are done",
           distinct_only=True),
]
for n in (10, 100, 1000):
    IMPLS.append(c_impl("fsafe-batch%d" % n, DUR_FULL,
                        "fsafe_batch_add x %d, fsafe_batch_commit (io_uring)" % n,
                        batch=n, distinct_only=True))
for n in (10, 100, 1000):
    IMPLS.append(c_impl("fsafe-batch%d-pool" % n, DUR_FULL,
                        "the same with FSAFE_BATCH_NO_URING (thread pool)",
                        batch=n, distinct_only=True))
for pool in ("", "-pool"):
    IMPLS.append(c_impl("fsafe-batch1000-w128" + pool, DUR_FULL,
                        "fsafe-batch1000%s with max_inflight = 128 (the default under a "
                        "descriptor limit of 512 or less: sixteen overlapped windows of 64); only "
                        "in the 1000-file case" % pool,
                        batch=1000, distinct_only=True))
IMPLS.append(Impl("floor-group1000", "floor", DUR_FULL,
                  lambda d, k, s, m: [BENCH, "write", "floor-group1000", d, str(k), str(s), m],
                  "hand-written group commit (floor.c): O_EXCL temp + write for all 1000, "
                  "fdatasync of all from 16 threads, close + rename each, one fsync(dir); "
                  "the ceiling for a batch; only in the 1000-file case",
                  batch=1000, distinct_only=True))
IMPLS += [
    Impl("glib", "peer", DUR_FULL,
         lambda d, k, s, m: [os.path.join(BUILD, "peers", "glib"), d, str(k), str(s), m],
         "GLib g_file_set_contents_full(CONSISTENT|DURABLE, 0666)"),
    Impl("python", "peer", DUR_FULL,
         lambda d, k, s, m: [sys.executable, os.path.join(ROOT, "bench", "peers", "python.py"),
                             d, str(k), str(s), m],
         "Python NamedTemporaryFile(dir=), write, flush, os.fsync, os.replace, fsync(dir)"),
    Impl("node-sync", "peer", DUR_FILE,
         lambda d, k, s, m: ["node", os.path.join(ROOT, "bench", "peers", "node.js"), "sync",
                             d, str(k), str(s), m],
         "npm write-file-atomic .sync(), one after another", env={"NODE_PATH": NODE_PATH}),
    Impl("node-async", "peer", DUR_FILE,
         lambda d, k, s, m: ["node", os.path.join(ROOT, "bench", "peers", "node.js"), "async",
                             d, str(k), str(s), m],
         "npm write-file-atomic (promise), all K started at once, then awaited",
         env={"NODE_PATH": NODE_PATH}),
    Impl("go-renameio", "peer", DUR_FILE,
         lambda d, k, s, m: [os.path.join(BUILD, "peers", "renameio"), d, str(k), str(s), m],
         "Go renameio.WriteFile(name, data, 0666)"),
    Impl("sponge", "peer", DUR_NONE, None,
         "moreutils sponge TARGET < payload, one process per write (start-up included)",
         per_process=True),
]
if ONLY:
    keep = set(ONLY.split(",")) | {"floor-fdatasync", "floor-nosync"}
    IMPLS = [i for i in IMPLS if i.name in keep]
BY_NAME = {i.name: i for i in IMPLS}


def syncfs(path):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        libc.syncfs(fd)
    finally:
        os.close(fd)


def payload(size, i):
    pat = bytes((j * 131 + i * 7 + 1) & 0xFF for j in range(256))
    return (pat * (size // 256 + 1))[:size]


def run_sponge(d, k, size, mode, fs):
    src = os.path.join(SCRATCH[fs], "sponge-payload-%d" % size)
    if not os.path.exists(src):
        with open(src, "wb") as f:
            f.write(payload(size, 3))
    env = dict(os.environ, TMPDIR=SCRATCH[fs])
    names = [os.path.join(d, "target" if mode == "same" else "t%d" % i) for i in range(k)]
    t0 = time.perf_counter()
    for name in names:
        with open(src, "rb") as inp:
            subprocess.run(["sponge", name], stdin=inp, env=env, check=True)
    return time.perf_counter() - t0


# Disk case directories removed only when the measurement ends. Removing
# 1000 files frees blocks that this machine's disk (ext4 mounted with
# `discard`, on a thin-provisioned virtual disk) discards; the next case
# then writes into punched holes and every flush pays for the host's
# allocation: a batch of 1000 went from 0.15 s to 0.8-1.2 s, and GLib's
# 1000 writes from 0.7-0.8 s to 1.5-2.0 s, when each case followed the
# removal of the one before. The bench would measure its own clean-up.
DEFERRED = []


def remove_deferred():
    for d in DEFERRED:
        shutil.rmtree(d, ignore_errors=True)
    DEFERRED.clear()


atexit.register(remove_deferred)


def run_case(impl, fs, root, size, mode, k, tag):
    d = tempfile.mkdtemp(prefix=tag + "-", dir=root)
    try:
        if mode == "same":
            with open(os.path.join(d, "target"), "wb") as f:
                f.write(payload(size, 99))
                f.flush()
                os.fsync(f.fileno())
            dfd = os.open(d, os.O_RDONLY)
            os.fsync(dfd)
            os.close(dfd)
        syncfs(d)
        if impl.per_process:
            t = run_sponge(d, k, size, mode, fs)
        else:
            env = dict(os.environ, **(impl.env or {}))
            out = subprocess.run(impl.argv(d, k, size, mode), env=env, check=True,
                                 stdout=subprocess.PIPE, text=True).stdout
            t = float(out.strip().splitlines()[-1])
        last = os.path.join(d, "target" if mode == "same" else "t%d" % (k - 1))
        if os.path.getsize(last) != size:
            raise RuntimeError("%s: %s has the wrong size" % (impl.name, last))
        names = os.listdir(d)
        if mode == "distinct" and len(names) != k:
            raise RuntimeError("%s: %d files left, %d expected: %s" % (impl.name, len(names), k,
                                                                        sorted(names)[:5]))
        return t
    finally:
        if fs == "disk":
            DEFERRED.append(d)
        else:
            shutil.rmtree(d, ignore_errors=True)


def loadavg():
    with open("/proc/loadavg") as f:
        return [float(x) for x in f.read().split()[:3]]


# ---------------------------------------------------------------------------
# Measurement

# The batch floor's case: N_MANY files into one directory, by the batch and
# by everything that writes durably (or nearly) one by one.
MANY_IMPLS = {"floor-fdatasync", "fsafe", "fsafe-async", "fsafe-batch1000",
              "fsafe-batch1000-pool", "fsafe-batch1000-w128", "fsafe-batch1000-w128-pool",
              "floor-group1000",
              "glib", "python", "node-sync", "node-async",
              "go-renameio"}


def cases():
    """(fs, root, size, mode, label, K, implementations or None for all)"""
    out = []
    for fs, root in (("disk", DISK_ROOT), ("tmpfs", TMPFS_ROOT)):
        if not root:
            continue
        for size in (KIB4, MIB1):
            for mode in ("distinct", "same"):
                if fs == "disk":
                    base = N_4K_DISK if size == KIB4 else N_1M_DISK
                else:
                    base = N_4K_TMPFS if size == KIB4 else N_1M_TMPFS
                out.append((fs, root, size, mode, mode, base, None))
        if fs == "disk" and N_MANY:
            out.append((fs, root, KIB4, "distinct", "many", N_MANY, MANY_IMPLS))
    return out


MANY_ONLY = {"fsafe-batch1000-w128", "fsafe-batch1000-w128-pool", "floor-group1000"}


def applies(impl, only):
    if only is None:
        return impl.name not in MANY_ONLY
    return impl.name in only


def measure():
    rates = {}  # (fs, size, mode, impl) -> [writes/s per round]
    loads = []
    t_start = time.time()
    cs = cases()
    for r in range(ROUNDS):
        order = cs if r % 2 == 0 else cs[::-1]
        for fs, root, size, mode, label, base, only in order:
            impls = IMPLS if r % 2 == 0 else IMPLS[::-1]
            for impl in impls:
                k = impl.k(base, size, mode)
                if k is None or not applies(impl, only):
                    continue
                if only is not None:
                    k = base  # the same number of files for everyone
                t = run_case(impl, fs, root, size, mode, k, "r%d-%s" % (r, impl.name))
                rates.setdefault((fs, size, label, impl.name), []).append(k / t)
        loads.append(loadavg())
        log("round %d/%d done after %.0f s (load %s)" % (r + 1, ROUNDS, time.time() - t_start,
                                                       " ".join("%.2f" % x for x in loads[-1])))
    elapsed = time.time() - t_start
    remove_deferred()
    return rates, loads, elapsed


# ---------------------------------------------------------------------------
# System calls per write, cut at the drivers' markers

def count_between_markers(trace):
    counts = {}
    on = False
    with open(trace, errors="replace") as f:
        for line in f:
            line = line.split(" ", 1)[1].lstrip() if line[:1].isdigit() else line
            if "fsafe-bench:begin" in line:
                on = True
                continue
            if "fsafe-bench:end" in line:
                on = False
                continue
            if not on or line.startswith("<...") or line.startswith("+++") or line.startswith("---"):
                continue
            name = line.split("(", 1)[0]
            if name.replace("_", "").isalnum():
                counts[name] = counts.get(name, 0) + 1
    return counts


def syscalls():
    rows = []
    if not shutil.which("strace"):
        log("strace not found: system-call counts skipped")
        return rows
    log("counting system calls (strace)")
    for impl in IMPLS:
        for mode in ("distinct", "same"):
            k = impl.k(20, KIB4, mode)
            if k is None or impl.name in MANY_ONLY:
                continue
            d = tempfile.mkdtemp(prefix="strace-", dir=DISK_ROOT)
            trace = os.path.join(d, "..", os.path.basename(d) + ".trace")
            try:
                if mode == "same":
                    with open(os.path.join(d, "target"), "wb") as f:
                        f.write(payload(KIB4, 99))
                if impl.per_process:
                    # One process per write: the whole process is counted.
                    src = os.path.join(d, "payload")
                    with open(src, "wb") as f:
                        f.write(payload(KIB4, 1))
                    env = dict(os.environ, TMPDIR=SCRATCH["disk"])
                    with open(src, "rb") as inp:
                        subprocess.run(["strace", "-f", "-o", trace, "sponge",
                                        os.path.join(d, "target")], stdin=inp, env=env,
                                       check=True)
                    counts = {}
                    with open(trace, errors="replace") as f:
                        for line in f:
                            line = line.split(" ", 1)[1].lstrip() if line[:1].isdigit() else line
                            name = line.split("(", 1)[0]
                            if not line.startswith(("<...", "+++", "---")) and \
                                    name.replace("_", "").isalnum():
                                counts[name] = counts.get(name, 0) + 1
                    k = 1
                else:
                    env = dict(os.environ, **(impl.env or {}))
                    subprocess.run(["strace", "-f", "-o", trace] + impl.argv(d, k, KIB4, mode),
                                   env=env, check=True, stdout=subprocess.DEVNULL)
                    counts = count_between_markers(trace)
            finally:
                shutil.rmtree(d, ignore_errors=True)
                if os.path.exists(trace):
                    os.unlink(trace)
            rows.append((impl.name, mode, k, counts))
    return rows


def memory():
    out = {}
    log("peak memory of a 1000-file batch")
    for how in ("uring", "pool"):
        vals = []
        for _ in range(3):
            d = tempfile.mkdtemp(prefix="mem-", dir=DISK_ROOT)
            try:
                o = subprocess.run([BENCH, "mem", d, how], check=True, stdout=subprocess.PIPE,
                                   text=True).stdout.split()
                vals.append([int(x) for x in o])
            finally:
                shutil.rmtree(d, ignore_errors=True)
        out[how] = vals
    return out


# ---------------------------------------------------------------------------
# Paired single writes: floor, fsafe and GLib taking turns in one process

def paired_writes():
    """(fs, size, mode) -> [(floor s, fsafe s, glib s, their CPU s) per run]."""
    out = {}
    if not PAIRED_RUNS or (ONLY and "fsafe" not in ONLY.split(",")):
        return out
    log("paired single writes: %d runs per case" % PAIRED_RUNS)
    roots = [("disk", DISK_ROOT, 1)] + ([("tmpfs", TMPFS_ROOT, 10)] if TMPFS_ROOT else [])
    for r in range(PAIRED_RUNS):
        for fs, root, scale in roots:
            for size in (KIB4, MIB1):
                for mode in ("distinct", "same"):
                    d = tempfile.mkdtemp(prefix="paired-", dir=root)
                    if fs == "disk":
                        DEFERRED.append(d)
                    syncfs(d)
                    o = subprocess.run([PAIRED, d, str(N_PAIRED[size] * scale), str(size), mode],
                                       check=True, stdout=subprocess.PIPE,
                                       text=True).stdout.split()
                    if fs != "disk":
                        shutil.rmtree(d, ignore_errors=True)
                    t = dict(zip(o[0::2], map(float, o[1::2])))
                    out.setdefault((fs, size, mode), []).append(
                        tuple(t[n] for n in ("floor", "fsafe", "glib", "floor-cpu", "fsafe-cpu",
                                             "glib-cpu")))
    remove_deferred()
    return out


# ---------------------------------------------------------------------------
# Report

def fmt_rate(x):
    return "%.0f" % x if x >= 100 else "%.1f" % x


def fmt_us(rate):
    us = 1e6 / rate
    return "%.0f" % us if us >= 100 else "%.1f" % us


def paired(a, b):
    return statistics.median([x / y for x, y in zip(a, b)])


def fsname(fs):
    return "disk" if fs == "disk" else "tmpfs"


def report(rates, loads, elapsed, sc, mem, info, pairs):
    p = print
    p("## Run of %s" % info["date"])
    p()
    p("- command: `%s`" % info["command"])
    p("- settings: ROUNDS=%d N_4K_DISK=%d N_1M_DISK=%d N_4K_TMPFS=%d N_1M_TMPFS=%d N_SPONGE=%d "
      "N_MANY=%d" % (ROUNDS, N_4K_DISK, N_1M_DISK, N_4K_TMPFS, N_1M_TMPFS, N_SPONGE, N_MANY))
    p("- machine: %s" % info["machine"])
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    p("- descriptor limit (soft RLIMIT_NOFILE): %d, so a batch's default window "
      "(`max_inflight`) is %d" % (soft, min(1024, max(128, soft // 4))))
    # Relative to the repository when inside it: the report is committed.
    shown = DISK_ROOT
    if os.path.commonpath([DISK_ROOT, ROOT]) == ROOT:
        shown = os.path.relpath(DISK_ROOT, ROOT)
    p("- disk bench dir: `%s` on %s" % (shown, info["disk_fs"]))
    if TMPFS_ROOT:
        p("- tmpfs bench dir: `%s` (%s)" % (TMPFS_ROOT, info["tmpfs_how"]))
    p("- source: %s" % info["source"])
    p("- peers: %s" % info["peers"])
    la = [l[0] for l in loads]
    p("- load average: %s before; 1-min load after each round %s (min %.2f, max %.2f)"
      % (info["load_before"], " ".join("%.2f" % x for x in la), min(la), max(la)))
    p("- measuring time: %.0f s" % elapsed)
    p()
    p("Each cell is one process writing K files in a loop and timing only the loop;")
    p("every case gets a fresh directory and a syncfs first (on disk, removed only after the last round). `÷ floor` is the")
    p("median over rounds of (this rate ÷ the hand-written `floor-fdatasync` rate")
    p("in the same round and case); above 1 is faster than the floor.")
    p("Durability: **file+dir** = data synced before the rename and the directory")
    p("synced after (the write survives power loss once the call returns);")
    p("**file only** = data synced, rename not (after a crash the old content")
    p("may come back, but never an empty or torn file); **none** = no sync.")
    p()
    for fs, _root, size, mode, label, base, only in cases():
        key = lambda n: (fs, size, label, n)
        if key("floor-fdatasync") not in rates:
            continue
        floor = rates[key("floor-fdatasync")]
        if label == "many":
            p("### %s, 4 KiB payload, %d distinct targets in one directory (the batch floor)"
              % (fsname(fs), base))
        else:
            p("### %s, %s payload, %s targets" % (fsname(fs), "4 KiB" if size == KIB4 else
                                                   "1 MiB", mode))
        p()
        p("| implementation | durability | K | median writes/s | min–max writes/s | µs/write "
          "(median) | ÷ floor |")
        p("|---|---|---:|---:|---:|---:|---:|")
        for impl in IMPLS:
            v = rates.get(key(impl.name))
            if not v:
                continue
            p("| %s | %s | %d | %s | %s–%s | %s | %.3f |" % (
                impl.name, impl.dur, base if only else impl.k(base, size, mode),
                fmt_rate(statistics.median(v)),
                fmt_rate(min(v)), fmt_rate(max(v)), fmt_us(statistics.median(v)),
                paired(v, floor)))
        p()
    p("Implementations:")
    p()
    for impl in IMPLS:
        p("- `%s` (%s): %s" % (impl.name, impl.dur, impl.what))
    p()

    # System calls
    if sc:
        p("### System calls per write (4 KiB, disk)")
        p()
        p("`strace -f`, counted between the driver's two marker calls around its")
        p("loop of K writes (so interpreter and runtime start-up are outside), divided")
        p("by K; every thread counted. sponge: the whole process of one write.")
        p()
        p("| implementation | target | K | calls/write | per write (most frequent) |")
        p("|---|---|---:|---:|---|")
        for name, mode, k, counts in sc:
            tot = sum(counts.values())
            top = sorted(counts.items(), key=lambda x: (-x[1], x[0]))[:14]
            desc = " ".join("%s×%s" % (n, ("%g" % round(c / k, 2))) for n, c in top)
            p("| %s | %s | %d | %s | %s |" % (name, mode, k, "%g" % round(tot / k, 1), desc))
        p()

    # Memory
    if mem:
        p("### Peak memory of one batch of 1000 × 4 KiB caller-owned buffers")
        p()
        p("`bench mem`: the 1000 buffers (4000 KiB) are made and touched, the peak")
        p("RSS is reset (`/proc/self/clear_refs` 5), then the batch is built,")
        p("committed and freed; growth = VmHWM after − VmRSS at the reset. 3 runs.")
        p()
        p("| sync | VmRSS at reset (KiB) | VmHWM after (KiB) | growth (KiB) |")
        p("|---|---|---|---|")
        for how, vals in mem.items():
            p("| %s | %s | %s | %s |" % (how, " / ".join(str(v[0]) for v in vals),
                                         " / ".join(str(v[1]) for v in vals),
                                         " / ".join(str(v[2]) for v in vals)))
        p()

    if pairs:
        p("### Paired single writes (disk)")
        p()
        p("`paired DIR K SIZE distinct|same`: the floor (`floor-fdatasync`), fsafe and")
        p("GLib take turns write by write in one process, each in its own directory,")
        p("cycling through the six orders of three, so the disk's drift falls on all")
        p("three alike. A ratio is (the other's time in its K calls ÷ fsafe's), i.e.")
        p("fsafe's rate ÷ the other's; median and min–max over the runs.")
        p()
        p("| case | K × runs | fsafe ÷ floor | min–max | fsafe ÷ glib | min–max | ms per write (floor / fsafe / glib, median) |")
        p("|---|---:|---:|---:|---:|---:|---|")
        for (fsys, size, mode), runs in sorted(pairs.items()):
            if fsys != "disk":
                continue
            vf = [r[0] / r[1] for r in runs]
            vg = [r[2] / r[1] for r in runs]
            k = N_PAIRED[size]
            ms = " / ".join("%.3f" % (statistics.median(r[i] for r in runs) / k * 1e3)
                            for i in range(3))
            p("| %s, %s | %d × %d | %.3f | %.3f–%.3f | %.3f | %.3f–%.3f | %s |" % (
                "4 KiB" if size == KIB4 else "1 MiB", mode, k, len(runs),
                statistics.median(vf), min(vf), max(vf), statistics.median(vg), min(vg),
                max(vg), ms))
        p()

    # Floors
    p("### Floors of issue 6 in this run")
    p()
    floors = {}
    for size in (KIB4, MIB1):
        for mode in ("distinct", "same"):
            k = lambda n: ("disk", size, mode, n)
            if k("fsafe") not in rates:
                continue
            f = paired(rates[k("fsafe")], rates[k("floor-fdatasync")])
            peers = {n: paired(rates[k("fsafe")], rates[k(n)])
                     for n in ("glib", "python") if k(n) in rates}
            how = "separate runs"
            if ("disk", size, mode) in pairs:
                # The paired measurement is the finer instrument: it
                # decides against the floor and GLib when it ran.
                runs = pairs[("disk", size, mode)]
                f = statistics.median(r[0] / r[1] for r in runs)
                peers["glib"] = statistics.median(r[2] / r[1] for r in runs)
                how = "paired for floor and glib"
            ok = f >= 0.97 and all(v >= 1 for v in peers.values())
            floors[("single", size, mode)] = ok
            p("- single durable write, disk, %s, %s (%s): fsafe ÷ floor = %.3f (needs ≥ %.3f, i.e. "
              "issue 19); fsafe ÷ same-durability peer: %s → **%s**" % (
                  "4 KiB" if size == KIB4 else "1 MiB", mode, how, f, 0.97,
                  ", ".join("%s %.2f" % x for x in peers.items()),
                  "met" if ok else "missed"))
    k = lambda n: ("disk", KIB4, "many", n)
    for b in ("fsafe-batch1000", "fsafe-batch1000-pool", "fsafe-batch1000-w128",
              "fsafe-batch1000-w128-pool", "floor-group1000"):
        if k(b) not in rates:
            continue
        same_dur = [n for n in ("glib", "python") if k(n) in rates]
        one_by_one = [n for n in ("glib", "python", "node-sync", "go-renameio") if k(n) in rates]
        if not same_dur:
            continue
        per_round = [rates[k(b)][r] / max(rates[k(n)][r] for n in same_dur)
                     for r in range(ROUNDS)]
        best = max(same_dur, key=lambda n: statistics.median(rates[k(n)]))
        any_round = [rates[k(b)][r] / max(rates[k(n)][r] for n in one_by_one)
                     for r in range(ROUNDS)]
        med = statistics.median(per_round)
        p("- batch of 1000 × 4 KiB, %d files in one dir, disk (`%s`): %.0f writes/s, ÷ fastest same-"
          "durability peer one by one (per round; %s fastest by median, %.0f/s) = %.1f "
          "(min %.1f, max %.1f; needs ≥ 5) → **%s**; ÷ fastest peer of any durability one by "
          "one (incl. node-sync, go-renameio) = %.1f" % (
              N_MANY, b, statistics.median(rates[k(b)]), best, statistics.median(rates[k(best)]), med,
              min(per_round), max(per_round), "met" if med >= 5 else "missed",
              statistics.median(any_round)))
    if mem:
        worst = max(v[2] for vals in mem.values() for v in vals)
        p("- peak memory of the 1000-file batch: at most %d KiB above the buffers (needs < "
          "2048 KiB) → **%s**" % (worst, "met" if worst < 2048 else "missed"))
    p()
    p("- load average after: %s" % " ".join("%.2f" % x for x in loadavg()))
    return floors


def main():
    info = json.loads(ENV["BENCH_INFO"])
    info["load_before"] = " ".join("%.2f" % x for x in loadavg())
    sc = syscalls()
    mem = memory()
    log("measuring: %d rounds" % ROUNDS)
    rates, loads, elapsed = measure()
    pairs = paired_writes()
    mods = module_floors.measure(ROOT, BUILD, DISK_ROOT) if MODULES else None
    with open(os.path.join(BUILD, "results.json"), "w") as f:
        json.dump({"info": info, "loads": loads,
                   "rates": {"|".join(map(str, k)): v for k, v in rates.items()},
                   "syscalls": sc, "memory": mem,
                   "paired": {"%s|%d|%s" % k: v for k, v in pairs.items()},
                   "modules": mods}, f, indent=1)
    report(rates, loads, elapsed, sc, mem, info, pairs)
    if mods:
        print()
        module_floors.report(mods, pairs, info, BUILD)
        print("- load average at the end: %s" % " ".join("%.2f" % x for x in loadavg()))


main()
