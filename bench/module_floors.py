"""Issue 19's module floors, for bench/orchestrate.py: runs module_paired
(the store, batch, checkpoint and spool cases), inbox_bench and the Python
binding's benchmark, counts system calls per operation, and prints the
report's closing sections: the system-call table, the module cases, the
single table of floors (floor | measured | required | met) and the chart
(gnuplot, PNG).

Every verdict is a ratio measured in one run: the arms of a case take
turns inside one process (module_paired.c, paired.c), or alternate round by
round (inbox_bench.c, python_binding.py); the median of the per-run ratios
is judged.
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

ENV = os.environ
MOD_RUNS = int(ENV.get("MOD_RUNS", "7"))
MOD_RUNS_10K = int(ENV.get("MOD_RUNS_10K", "3"))
CK_LARGE = int(ENV.get("CK_LARGE", str(4 << 20)))
INBOX_N = int(ENV.get("INBOX_N", "200"))
INBOX_ROUNDS = int(ENV.get("INBOX_ROUNDS", "7"))
PY_ROUNDS = int(ENV.get("PY_ROUNDS", "7"))
PY_K = int(ENV.get("PY_K", "200"))
CK_TURNS = 6  # checkpoint saves per run, and loads after them
CK_BYTES = 2048 + 65536 + (1 << 20)  # the three files a load reads

# (label, module_paired arguments after DIR, runs); turns per run first.
def module_cases():
    out = [("batch1000", ["batch", "1", "1000"], MOD_RUNS),
           ("batch10", ["batch10", "30"], MOD_RUNS),
           ("store", ["store", "60"], MOD_RUNS),
           ("checkpoint", ["checkpoint", str(CK_TURNS), str(CK_LARGE)], MOD_RUNS)]
    for b, turns in ((1, 200), (64, 100), (1024, 20)):
        out.append(("spool%d" % b, ["spool", str(turns), str(b)], MOD_RUNS))
    if MOD_RUNS_10K:
        out.append(("batch10000", ["batch", "1", "10000"], MOD_RUNS_10K))
    return out


TRACE_OPS = [("write-path-new", 20), ("write-path-replace", 20), ("write-dirfd-new", 20),
             ("write-dirfd-replace", 20), ("batch-item", 100), ("store-put", 20),
             ("store-delete", 20), ("inbox-deliver", 20), ("inbox-take-ack", 20),
             ("spool-append-1", 20), ("spool-append-64", 20), ("spool-append-1024", 20),
             ("checkpoint-save", 5)]
FLUSHES = ("fsync", "fdatasync", "sync_file_range", "syncfs", "msync")


def log(msg):
    print("bench/run: " + msg, file=sys.stderr, flush=True)


def measure_modules(build, root, deferred):
    """{label: [{arm: seconds} per run]}, cases interleaved run by run."""
    out = {}
    cases = module_cases()
    for r in range(max(c[2] for c in cases)):
        for label, args, runs in (cases if r % 2 == 0 else cases[::-1]):
            if r >= runs:
                continue
            d = tempfile.mkdtemp(prefix="mod-%s-" % label, dir=root)
            deferred.append(d)
            o = subprocess.run([os.path.join(build, "module_paired"), args[0], d] + args[1:],
                               check=True, stdout=subprocess.PIPE, text=True).stdout.split()
            out.setdefault(label, []).append(dict(zip(o[0::2], map(float, o[1::2]))))
        log("module cases: run %d done" % (r + 1))
    return out


def inbox(build, root):
    """inbox_bench's table and its per-round-ratio medians (1 and 4)."""
    d = tempfile.mkdtemp(prefix="inbox-", dir=root)
    log("inbox: %d messages per producer, %d rounds" % (INBOX_N, INBOX_ROUNDS))
    try:
        table = subprocess.run([os.path.join(build, "inbox_bench"), d, str(INBOX_N),
                                str(INBOX_ROUNDS)], check=True, stdout=subprocess.PIPE,
                               text=True).stdout
    finally:
        shutil.rmtree(d, ignore_errors=True)
    ratio = {}
    for line in table.splitlines():
        if line.startswith("per-round ratios, "):
            head, vals = line.split(":")
            ratio[int(head.split(",")[1].split()[0])] = [float(x) for x in vals.split()]
    return table, ratio


def count_trace(trace):
    counts, on = {}, False
    with open(trace, errors="replace") as f:
        for line in f:
            line = line.split(" ", 1)[1].lstrip() if line[:1].isdigit() else line
            if "fsafe-bench:begin" in line:
                on = True
            elif "fsafe-bench:end" in line:
                on = False
            elif on and not line.startswith(("<...", "+++", "---")):
                name = line.split("(", 1)[0]
                if name.replace("_", "").isalnum():
                    counts[name] = counts.get(name, 0) + 1
    return counts


def module_syscalls(build, root):
    rows = []
    if not shutil.which("strace"):
        log("strace not found: per-operation counts skipped")
        return rows
    log("counting system calls per operation (strace)")
    for op, n in TRACE_OPS:
        d = tempfile.mkdtemp(prefix="trace-", dir=root)
        trace = d + ".trace"
        try:
            subprocess.run(["strace", "-f", "-o", trace, os.path.join(build, "module_paired"),
                            "trace", op, os.path.join(d, "w"), str(n)], check=True)
            rows.append((op, n, count_trace(trace)))
        finally:
            shutil.rmtree(d, ignore_errors=True)
            if os.path.exists(trace):
                os.unlink(trace)
    return rows


def python_binding(bench_root, build, root):
    lib = os.path.join(build, "libfsafe.so")
    if not os.path.exists(lib):
        return None
    log("Python binding: %d rounds of %d writes" % (PY_ROUNDS, PY_K))
    d = tempfile.mkdtemp(prefix="python-", dir=root)
    try:
        o = subprocess.run([sys.executable, os.path.join(bench_root, "bench", "python_binding.py"),
                            d, str(PY_ROUNDS), str(PY_K), "--json"],
                           env=dict(os.environ, FSAFE_LIBRARY=lib, PYTHONDONTWRITEBYTECODE="1"),
                           check=True, stdout=subprocess.PIPE, text=True).stdout
    finally:
        shutil.rmtree(d, ignore_errors=True)
    return json.loads(o)


def measure(bench_root, build, root):
    deferred = []
    try:
        res = {"modules": measure_modules(build, root, deferred)}
    finally:
        for d in deferred:
            shutil.rmtree(d, ignore_errors=True)
    res["inbox_table"], res["inbox"] = inbox(build, root)
    res["syscalls"] = module_syscalls(build, root)
    res["python"] = python_binding(bench_root, build, root)
    return res


# ---------------------------------------------------------------------------
# Report

def ratios(runs, num, den):
    """Per run: time of `num` ÷ time of `den` (so: den's speed ÷ num's)."""
    return [r[num] / r[den] for r in runs]


def summary(v):
    return statistics.median(v), min(v), max(v)


class Floors:
    """The rows of the closing table, and the chart's bars."""

    def __init__(self):
        self.rows = []  # (module, floor, measured text, required text, met or None)
        self.bars = []  # (label, measured speed ratio, required speed ratio)

    def ratio(self, module, what, v, need, bar=None, note=""):
        """v: per-run speed ratios (higher is better); need: the least."""
        med, lo, hi = summary(v)
        self.rows.append((module, what, "%.3f (%.3f–%.3f)%s" % (med, lo, hi, note),
                          "≥ %.3f" % need, med >= need))
        self.bars.append((bar or what, med, need))

    def time_ratio(self, module, what, v, most, bar):
        """v: per-run time ratios (lower is better); most: the limit."""
        med, lo, hi = summary(v)
        self.rows.append((module, what, "%.3f× (%.3f–%.3f)" % (med, lo, hi),
                          "≤ %.2f×" % most, med <= most))
        self.bars.append((bar, 1 / med, 1 / most))

    def count(self, module, what, value, most):
        self.rows.append((module, what, "%g" % round(value, 2), "≤ %g" % most, value <= most))

    def shown(self, module, what, text, required):
        self.rows.append((module, what, text, required, None))


def single_write_floors(fl, pairs):
    """From the paired single writes (disk: speed; tmpfs: CPU)."""
    for (fs, size, mode), runs in sorted(pairs.items()):
        case = "%s %s, %s" % ("4 KiB" if size == 4096 else "1 MiB",
                              "new" if mode == "distinct" else "replace", fs)
        short = "%s%s" % ("4K" if size == 4096 else "1M", "new" if mode == "distinct" else "repl")
        if fs == "disk":
            fl.ratio("single write", "%s: fsafe ÷ hand-written floor" % case,
                     [r[0] / r[1] for r in runs], 0.97, "write %s ÷ floor" % short)
            fl.ratio("single write", "%s: fsafe ÷ GLib" % case,
                     [r[2] / r[1] for r in runs], 1.0, "write %s ÷ GLib" % short)
        else:
            fl.ratio("single write", "%s: GLib's CPU ÷ fsafe's CPU per write" % case,
                     [r[5] / r[4] for r in runs], 1.0, "CPU %s ÷ GLib" % short)


def syscall_floors(fl, rows):
    per = {op: sum(c.values()) / n for op, n, c in rows}
    for api, most in (("path", 10), ("dirfd", 8)):
        for mode in ("new", "replace"):
            op = "write-%s-%s" % (api, mode)
            if op in per:
                fl.count("single write", "system calls per write, %s API, %s" % (api, mode),
                         per[op], most)


def module_floors(fl, m, inbox_ratio, sc, py):
    for n in (1000, 10000):
        runs = m.get("batch%d" % n)
        if runs:
            fl.ratio("batch", "batch of %d × 4 KiB ÷ the atomic loop without sync" % n,
                     ratios(runs, "loop", "batch"), 1.0, "batch%d ÷ no-sync loop" % n)
            fl.ratio("batch", "batch of %d × 4 KiB ÷ GLib one by one" % n,
                     ratios(runs, "glib", "batch"), 8.0, "batch%d ÷ GLib" % n)
    if m.get("batch10"):
        fl.ratio("batch", "batch of 10 ÷ 10 single writes (per file)",
                 ratios(m["batch10"], "singles10", "batch10"), 1.0, "batch10 ÷ 10 singles")
    if m.get("store"):
        fl.ratio("store", "put (new key, 4 KiB) ÷ single durable write",
                 ratios(m["store"], "write", "put"), 0.9, "store put ÷ write")
        fl.ratio("store", "delete ÷ single durable write of 4 KiB",
                 ratios(m["store"], "write", "delete"), 0.9, "store delete ÷ write")
    if m.get("checkpoint"):
        c = m["checkpoint"]
        fl.time_ratio("checkpoint", "save of 3 files (2 KiB, 64 KiB, 1 MiB) ÷ 3 single writes",
                      ratios(c, "checkpoint3", "writes3"), 1.3, "checkpoint3 ÷ 3 writes")
        fl.time_ratio("checkpoint", "save of one %d MiB file ÷ one single write" % (CK_LARGE >> 20),
                      ratios(c, "checkpoint1", "write1"), 1.2, "checkpoint1 ÷ write")
        loaded = CK_BYTES * CK_TURNS / 1e6
        load = statistics.median(loaded / r["load"] for r in c)
        reload = statistics.median(loaded / r["reload"] for r in c)
        read = statistics.median(loaded / r["read"] for r in c)
        fl.shown("checkpoint", "load (verify) of the 3-file generation, page cache warm",
                 "%.0f MB/s, into the last snapshot's memory (reload) %.0f MB/s; "
                 "reading the same files into mapped memory %.0f MB/s (÷ %.2f, %.2f)"
                 % (load, reload, read, load / read, reload / read),
                 "memory speed (no figure in the issue: not judged)")
    for b in (1, 64, 1024):
        runs = m.get("spool%d" % b)
        if runs:
            fl.ratio("spool", "append of %d × 100 B ÷ raw write + fdatasync" % b,
                     ratios(runs, "raw", "spool"), 0.95, "spool %d ÷ raw" % b)
    for procs in (1, 4):
        if procs in inbox_ratio:
            fl.ratio("inbox", "deliver, %d producer%s ÷ hand-written floor" % (
                procs, "s" if procs > 1 else ""), inbox_ratio[procs], 1.0,
                "inbox %dp ÷ floor" % procs, note=", per round")
    for op, n, c in sc:
        if op == "inbox-take-ack":
            fl.count("inbox", "flushes (fsync/fdatasync) per take+ack",
                     sum(c.get(x, 0) for x in FLUSHES) / n, 2)
    if py:
        r = [a / b for a, b in zip(py["rates"]["fsafe binding"], py["rates"]["tempfile recipe"])]
        med, lo, hi = summary(r)
        fl.shown("Python (issue 21)", "4 KiB durable writes/s, binding ÷ tempfile recipe",
                 "%.3f (%.3f–%.3f)" % (med, lo, hi), "shown (no floor in the issue)")
        fl.bars.append(("Python binding ÷ recipe", med, None))


def chart(fl, build, title):
    """bench/report.png: each floor's measured ratio (bar) and its least
    (mark), as the speed of fsafe ÷ the speed of what it is held against."""
    if not shutil.which("gnuplot") or not fl.bars:
        log("gnuplot missing: no chart")
        return None
    data = os.path.join(build, "report.dat")
    with open(data, "w") as f:
        for i, (label, v, need) in enumerate(fl.bars):
            f.write('%d "%s" %.4f %s %d\n' % (i, label, v, "%.4f" % need if need else "NaN",
                                              0 if need is None else (1 if v >= need else 2)))
    png = os.path.join(build, "report.png")
    script = """
set terminal pngcairo size 1400,800 font "sans,10" background "white"
set output '%s'
set title "%s"
set ylabel "fsafe ÷ reference (speed; above 1 is faster)"
set logscale y 2
set yrange [0.25:256]
set ytics (0.25, 0.5, 0.8, 1, 1.25, 2, 4, 8, 16, 32, 64, 128, 256)
set grid ytics
set style fill solid 0.8 border -1
set boxwidth 0.7
set xtics rotate by 45 right font ",10" nomirror
set xrange [-0.7:%d]
set key top left opaque
set bmargin 14
set arrow from graph 0, first 1 to graph 1, first 1 nohead dt 2 lc rgb "#555555"
set palette defined (0 "#888888", 1 "#3a7d44", 2 "#c0392b")
unset colorbox
set cbrange [0:2]
plot '%s' using 1:3:5:xtic(2) with boxes lc palette notitle, \\
     '' using 1:4 with points pt 7 ps 1.3 lc rgb "black" title "required (least)"
""" % (png, title, len(fl.bars), data)
    r = subprocess.run(["gnuplot"], input=script, text=True, capture_output=True)
    if r.returncode != 0:
        log("gnuplot failed: " + r.stderr.strip())
        return None
    return png


def report(res, pairs, info, build):
    p = print
    m = res["modules"]
    fl = Floors()

    p("### Module cases (disk, paired in one process)")
    p()
    p("`module_paired CASE DIR TURNS …`: the arms take turns in one process, each in a")
    p("directory of its own, each turn in the next order of the arms; seconds are the")
    p("time each arm spent in its own calls, summed over the turns of one run (median")
    p("over runs); the ratio is judged per run, then the median taken.")
    p()
    p("| case | runs | arms: seconds per run (median) |")
    p("|---|---:|---|")
    for label, runs in m.items():
        arms = [a for a in runs[0]]
        p("| %s | %d | %s |" % (label, len(runs), ", ".join(
            "%s %.4f" % (a, statistics.median(r[a] for r in runs)) for a in arms)))
    p()
    p("### Inbox (`inbox_bench`, rounds interleaved)")
    p()
    p(res["inbox_table"].rstrip())
    p()
    if res["python"]:
        py = res["python"]
        p("### Python: 4 KiB durable writes per second (issue 21)")
        p()
        p("`python_binding.py`: `fsafe.write_bytes` from the source tree's binding over")
        p("this build's `libfsafe.so`, against tempfile + write + flush + `os.fsync` +")
        p("`os.replace` + directory fsync; %d new files per arm and round, %d rounds, the"
          % (py["k"], py["rounds"]))
        p("arms taking turns write by write, each timing its own calls.")
        p()
        p("| arm | median writes/s | min–max |")
        p("|---|---:|---:|")
        for name, v in py["rates"].items():
            p("| %s | %.0f | %.0f–%.0f |" % (name, statistics.median(v), min(v), max(v)))
        p()
    if res["syscalls"]:
        p("### System calls per operation (4 KiB unless named, disk)")
        p()
        p("`strace -f` of `module_paired trace OP DIR N`, counted between its two markers")
        p("around N operations (set-up outside, one write among it: a thread seeds its")
        p("staging-name generator with one `getrandom` at its first name), divided by N;")
        p("every thread counted (io_uring work is one `io_uring_enter`, not the syncs it")
        p("does). Flushes: fsync, fdatasync, sync_file_range.")
        p()
        p("| operation | N | calls/op | flushes/op | per op (most frequent) |")
        p("|---|---:|---:|---:|---|")
        for op, n, c in res["syscalls"]:
            top = sorted(c.items(), key=lambda x: (-x[1], x[0]))[:12]
            p("| %s | %d | %g | %g | %s |" % (
                op, n, round(sum(c.values()) / n, 2),
                round(sum(c.get(x, 0) for x in FLUSHES) / n, 2),
                " ".join("%s×%g" % (k, round(v / n, 2)) for k, v in top)))
        p()

    single_write_floors(fl, pairs)
    syscall_floors(fl, res["syscalls"])
    module_floors(fl, m, res["inbox"], res["syscalls"], res["python"])
    png = chart(fl, build, "fsafe against its floors, %s, %s" % (info["date"], info["source"]))
    if png:
        p("![each floor: measured ratio (bar: green met, red missed) and the least "
          "required (black mark)](report.png)")
        p()
    p("### Floors of issue 19 in this run")
    p()
    p("Ratios are speeds (fsafe ÷ the reference; above 1 is faster) unless marked ×")
    p("(a time ratio). Median over runs, min–max in brackets.")
    p()
    p("| module | floor | measured | required | met |")
    p("|---|---|---|---|---|")
    for module, what, meas, need, met in fl.rows:
        p("| %s | %s | %s | %s | %s |" % (module, what, meas, need,
                                          "—" if met is None else ("**met**" if met else
                                                                   "**not met**")))
    p()
    return {"rows": fl.rows, "bars": fl.bars}
