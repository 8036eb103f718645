"""A writer SIGKILLed at any point leaves the old or the new content, and
at most a stage that is_staging_name() recognises and sweep() removes."""

import os
import random
import select
import signal

import pytest

import fsafe
from conftest import run_child

# Writes NEW, says so, and waits to be killed before it commits.
BEFORE_COMMIT = """
import sys, fsafe
f = fsafe.open_atomic(sys.argv[1], "wb", tmpfile=sys.argv[2] == "1")
f.write(b"NEW" * 1000)
print("written", flush=True)
sys.stdin.read()
f.commit()
"""

# Commits generation after generation, each a whole of one repeated line
# whose size differs, so a mix or a cut shows.
GENERATIONS = """
import sys, fsafe
path = sys.argv[1]
g = 0
print("started", flush=True)
while True:
    g += 1
    line = b"generation %d\\n" % g
    with fsafe.open_atomic(path, "wb", tmpfile=g % 2 == 0,
                           sync=g % 3 != 0) as f:
        for _ in range(1 + g % 7):
            f.write(line * 200)
"""


def readline(child, timeout=10.0):
    ready, _, _ = select.select([child.stdout], [], [], timeout)
    assert ready, "the child did not report in time"
    return child.stdout.readline()


def kill(child):
    child.kill()
    assert child.wait(timeout=10) == -signal.SIGKILL


def test_kill_between_write_and_commit(tmp_path):
    target = tmp_path / "t"
    target.write_bytes(b"OLD")
    child = run_child(BEFORE_COMMIT, str(target), "0", stdin=-1, stdout=-1)
    try:
        assert readline(child) == b"written\n"
    finally:
        kill(child)
    assert target.read_bytes() == b"OLD"
    stages = [n for n in os.listdir(tmp_path) if n != "t"]
    assert len(stages) == 1 and fsafe.is_staging_name(stages[0])
    # Younger than an hour: kept by the default age.
    assert fsafe.sweep(tmp_path) == []
    assert fsafe.sweep(tmp_path, 0) == stages
    assert os.listdir(tmp_path) == ["t"]


def test_kill_before_commit_with_tmpfile(tmp_path):
    target = tmp_path / "t"
    target.write_bytes(b"OLD")
    child = run_child(BEFORE_COMMIT, str(target), "1", stdin=-1, stdout=-1)
    try:
        assert readline(child) == b"written\n"
    finally:
        kill(child)
    assert target.read_bytes() == b"OLD"
    # An O_TMPFILE stage has no name: nothing to sweep, unless the
    # filesystem lacked O_TMPFILE and the writer fell back to a name.
    rest = [n for n in os.listdir(tmp_path) if n != "t"]
    assert all(fsafe.is_staging_name(n) for n in rest)
    assert sorted(fsafe.sweep(tmp_path, 0)) == sorted(rest)


def whole_generation(data):
    lines = data.splitlines(keepends=True)
    assert lines, "empty target"
    assert all(line == lines[0] for line in lines), "a mix of generations"
    g = int(lines[0].split()[1])
    assert len(lines) == 200 * (1 + g % 7), "a cut generation"
    return g


@pytest.mark.parametrize("seed", range(12))
def test_kill_at_random_points(tmp_path, seed):
    rnd = random.Random(seed)
    target = tmp_path / "t"
    fsafe.write_bytes(target, b"generation 0\n" * 200)
    child = run_child(GENERATIONS, str(target), stdout=-1)
    try:
        assert readline(child) == b"started\n"
        # Bounded: wait up to 30 ms, then kill wherever the child is.
        select.select([], [], [], rnd.uniform(0, 0.03))
    finally:
        kill(child)
    whole_generation(target.read_bytes())
    rest = sorted(n for n in os.listdir(tmp_path) if n != "t")
    assert len(rest) <= 1 and all(fsafe.is_staging_name(n) for n in rest)
    assert sorted(fsafe.sweep(tmp_path, 0)) == rest
    assert os.listdir(tmp_path) == ["t"]
