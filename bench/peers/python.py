"""Peer driver: Python's usual durable replace.

    python3 python.py DIR K SIZE distinct|same

Per write: tempfile.NamedTemporaryFile(dir=DIR, delete=False), write,
flush, os.fsync, close, os.replace onto the target, then open the
directory, os.fsync it and close it. K writes in one process; prints the
elapsed seconds. The loop sits between the access() markers that bench/run
cuts strace output at.
"""
import os
import sys
import tempfile
import time

MAX_BUFS = 1000


def write_durable(dirpath, target, data):
    with tempfile.NamedTemporaryFile(dir=dirpath, delete=False) as f:
        try:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        except BaseException:
            os.unlink(f.name)
            raise
    os.replace(f.name, target)
    fd = os.open(dirpath, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def main():
    dirpath, k, size, mode = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    nbuf = min(k, MAX_BUFS)
    pattern = bytes((j * 131 + 1) & 0xFF for j in range(256))
    bufs = []
    for i in range(nbuf):
        b = bytearray((pattern * (size // 256 + 1))[:size])
        b[:8] = (i + 1).to_bytes(8, "little")
        bufs.append(bytes(b))
    names = [os.path.join(dirpath, "target" if mode == "same" else "t%d" % i) for i in range(k)]
    os.access("fsafe-bench:begin", os.F_OK)
    t0 = time.perf_counter()
    for i in range(k):
        write_durable(dirpath, names[i], bufs[i % nbuf])
    t = time.perf_counter() - t0
    os.access("fsafe-bench:end", os.F_OK)
    print("%.9f" % t)


if __name__ == "__main__":
    main()
