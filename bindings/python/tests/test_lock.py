import errno
import os
import signal

import pytest

import fsafe
from conftest import run_child

HOLD = """
import sys, fsafe
lock = fsafe.Lock(sys.argv[1], kernel=sys.argv[2] == "kernel")
lock.acquire()
print("held", flush=True)
sys.stdin.read()
"""


def test_context_manager(tmp_path):
    p = tmp_path / "lk"
    lock = fsafe.Lock(p, timeout=1)
    with lock as held:
        assert held is lock and lock.locked and p.exists()
        assert lock.broken == 0
        with pytest.raises(RuntimeError):
            lock.acquire()
    assert not lock.locked and not p.exists()
    with pytest.raises(RuntimeError):
        lock.release()
    with lock:  # reusable
        pass


@pytest.mark.parametrize("kernel", [False, True])
def test_held_no_wait_and_timeout(tmp_path, kernel):
    p = tmp_path / "lk"
    with fsafe.Lock(p, kernel=kernel):
        with pytest.raises(BlockingIOError) as info:
            fsafe.Lock(p, timeout=0, kernel=kernel).acquire()
        assert info.value.errno == errno.EWOULDBLOCK
        assert info.value.step == "held by another owner"
        with pytest.raises(TimeoutError) as info:
            with fsafe.Lock(p, timeout=0.05, kernel=kernel):
                pytest.fail("acquired a held lock")
        assert info.value.step == "held by another owner"


def test_modes_do_not_mix(tmp_path):
    p = tmp_path / "lk"
    with fsafe.Lock(p):
        with pytest.raises(OSError) as info:
            fsafe.Lock(p, timeout=0, kernel=True).acquire()
    assert info.value.errno == errno.EINVAL
    assert info.value.step == "held in link mode"


def test_directory_at_lock_name(tmp_path):
    with pytest.raises(IsADirectoryError) as info:
        fsafe.Lock(tmp_path, timeout=0).acquire()
    assert info.value.step.startswith("not a regular file")


@pytest.mark.parametrize("kernel", [False, True])
def test_dead_holder(tmp_path, kernel):
    p = tmp_path / "lk"
    child = run_child(HOLD, str(p), "kernel" if kernel else "link",
                      stdin=-1, stdout=-1)
    try:
        assert child.stdout.readline() == b"held\n"
        with pytest.raises(BlockingIOError):
            fsafe.Lock(p, timeout=0, kernel=kernel).acquire()
    finally:
        child.kill()
        child.wait(timeout=10)
    assert child.returncode == -signal.SIGKILL
    with fsafe.Lock(p, timeout=5, kernel=kernel) as lock:
        # A link-mode lock is broken on proof of death; the kernel frees
        # a kernel-mode one by itself.
        assert lock.broken == (0 if kernel else 1)


def test_released_in_child_is_refused(tmp_path):
    p = tmp_path / "lk"
    lock = fsafe.Lock(p)
    lock.acquire()
    pid = os.fork()
    if pid == 0:
        try:
            lock.release()
            code = 1
        except PermissionError as e:
            code = 0 if e.step.startswith("release in another") else 2
        except BaseException:
            code = 3
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert p.exists()
    lock.release()
