"""A handle closed while a call on it is in progress, from another thread
or from a callback, is freed only once that call has returned; every use
afterwards raises ValueError. Each case runs in a child Python, so a crash
of the interpreter shows as its exit status instead of ending the run."""

import subprocess
import sys

import pytest

from conftest import child_env

COMMON = """
import sys, threading, time, fsafe
path = sys.argv[1]

def started(busy, call):
    # Bounded wait until `call` holds the handle's lock, that is until it
    # is about to enter, or is inside, the C call.
    t = threading.Thread(target=call)
    t.start()
    deadline = time.monotonic() + 30
    while not busy.locked():
        assert time.monotonic() < deadline, "the call never started"
    return t
"""

CASES = {
    # A commit from another thread while a large write is in the C
    # library waits for the write, then publishes all of it.
    "writer-commit-during-write": """
big = b"x" * (64 << 20)
f = fsafe.open_atomic(path, "wb", sync=False)
t = started(f._mutex, lambda: f.write(big))
f.commit()
# Read before the writing thread ends: what commit published.
assert len(open(path, "rb").read()) == len(big)
t.join(timeout=60)
assert open(path, "rb").read() == big
try:
    f.commit()
    raise SystemExit("a second commit did not raise")
except ValueError:
    pass
""",
    # A close from another thread while a consumer waits in the library
    # waits for the wait to end (here its 1 s timeout).
    "inbox-close-during-wait": """
ib = fsafe.Inbox(path, create=True, inotify=False)
c = ib.consumer()
result = []
t = started(c._busy, lambda: result.append(c.wait(1)))
ib.close()
t.join(timeout=60)
assert result == [False], result
for call in (c.take, c.wait, ib.close, c.close):
    try:
        call()
    except ValueError:
        pass
""",
    # update()'s function closing the store: the update finishes on the
    # live handle, which is freed afterwards.
    "store-close-inside-update": """
s = fsafe.Store(path, create=True)
def fn(old):
    s.close()
    try:
        s[b"other"]
        raise SystemExit("a closed store answered")
    except ValueError:
        pass
    return b"new"
assert s.update(b"k", fn) == 1
with fsafe.Store(path) as again:
    assert again[b"k"] == b"new"
""",
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_close_during_a_call(tmp_path, case):
    rc = subprocess.run([sys.executable, "-c", COMMON + CASES[case],
                         str(tmp_path / "h")], env=child_env(),
                        capture_output=True, timeout=110)
    assert rc.returncode == 0, rc.stderr.decode(errors="replace")


def test_failure_without_detail_carries_no_stale_step(tmp_path):
    """The step of an earlier failure never labels a later one that the
    library gave no detail for (the handle's error is cleared first)."""
    import errno as errno_mod

    from fsafe import _handle, _lib

    class Fake(_handle.Handle):
        _WHAT = "a fake"
        path = str(tmp_path)

        def __init__(self):
            self._detail = _lib.Error()
            self._h = 1

        def close(self):
            self._h = None

    fake = Fake()
    fake._detail.code = -errno_mod.EIO
    fake._detail.sys_errno = errno_mod.EIO
    fake._detail.step = b"an earlier step"
    with pytest.raises(OSError) as info:
        fake._call(lambda h: -errno_mod.EIO)
    assert info.value.errno == errno_mod.EIO
    assert info.value.step is None
    fake.close()
    with pytest.raises(ValueError, match="a fake is closed"):
        fake._call(lambda h: 0)
