"""Issue 21's Python benchmark: 4 KiB durable writes per second from Python
through the fsafe binding (bindings/python) against the usual recipe
(tempfile in the directory, write, flush, os.fsync, os.replace, then
open + os.fsync + close of the directory), measured in one run.

    FSAFE_LIBRARY=build-bench/libfsafe.so \\
        python3 bench/python_binding.py DIR [ROUNDS] [K] [--json]

The binding is imported from the source tree (bindings/python), as its own
tests do; the library is the one FSAFE_LIBRARY names. Each round writes K
new files with each arm, each arm in a fresh directory of its own, the two
taking turns write by write (as bench/paired.c does), and times each arm's
own calls; a round's ratio is the binding's rate over the recipe's in that
round. Prints a Markdown table
(or, with --json, the per-round rates).
"""
import json
import os
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bindings", "python"))
sys.path.insert(0, os.path.join(ROOT, "bench", "peers"))

import fsafe  # noqa: E402  (after the path is set)
# The recipe is the peer driver's, the same the single-write rounds time.
from python import write_durable as recipe  # noqa: E402

SIZE = 4096


def binding(dirpath, target, data):
    fsafe.write_bytes(target, data)


ARMS = {"fsafe binding": binding, "tempfile recipe": recipe}


def one_round(root, r, k, bufs):
    """Seconds each arm spent in its own k writes; the arms alternate
    write by write (the first arm alternating too), each in a fresh
    directory of its own, so the disk's drift falls on both alike."""
    names = list(ARMS)
    dirs = {n: tempfile.mkdtemp(prefix="r%d-%s-" % (r, n.split()[0]), dir=root) for n in names}
    spent = dict.fromkeys(names, 0.0)
    os.sync()
    for i in range(k):
        for n in (names if (i + r) % 2 == 0 else names[::-1]):
            target = os.path.join(dirs[n], "t%d" % i)
            t0 = time.perf_counter()
            ARMS[n](dirs[n], target, bufs[i % len(bufs)])
            spent[n] += time.perf_counter() - t0
    for n in names:
        with open(os.path.join(dirs[n], "t%d" % (k - 1)), "rb") as f:
            if f.read() != bufs[(k - 1) % len(bufs)]:
                raise RuntimeError("%s: wrong content" % n)
    return spent


def main():
    args = [a for a in sys.argv[1:] if a != "--json"]
    if not args:
        sys.exit(__doc__)
    root = args[0]
    rounds = int(args[1]) if len(args) > 1 else 7
    k = int(args[2]) if len(args) > 2 else 200
    pattern = bytes((j * 131 + 1) & 0xFF for j in range(256)) * (SIZE // 256)
    bufs = [i.to_bytes(8, "little") + pattern[8:] for i in range(min(k, 100))]
    rates = {name: [] for name in ARMS}
    for r in range(rounds):
        for name, t in one_round(root, r, k, bufs).items():
            rates[name].append(k / t)
    if "--json" in sys.argv:
        print(json.dumps({"k": k, "rounds": rounds, "rates": rates,
                          "library": fsafe.library_version()}))
        return
    ratios = [a / b for a, b in zip(rates["fsafe binding"], rates["tempfile recipe"])]
    print("| arm (4 KiB, %d new files per round, %d rounds) | median writes/s | min–max |"
          % (k, rounds))
    print("|---|---:|---:|")
    for name in ARMS:
        v = rates[name]
        print("| %s | %.0f | %.0f–%.0f |" % (name, statistics.median(v), min(v), max(v)))
    print()
    print("binding ÷ recipe, median of per-round ratios: %.3f (min %.3f, max %.3f)"
          % (statistics.median(ratios), min(ratios), max(ratios)))


main()
