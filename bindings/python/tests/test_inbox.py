import errno
import os
import select
import signal
import threading

import pytest

import fsafe
from conftest import run_child


@pytest.fixture
def inbox(tmp_path):
    with fsafe.Inbox(tmp_path / "ib", create=True) as ib:
        yield ib


def test_deliver_take_ack_round_trip(inbox):
    ids = [inbox.deliver(b"one"), inbox.deliver(bytearray(b"two")),
           inbox.deliver(memoryview(b"")), inbox.deliver(b"\0" * 70000)]
    assert all(len(i) == 60 for i in ids) and ids == sorted(ids)
    with inbox.consumer() as c:
        got = []
        while True:
            msg = c.take()
            if msg is None:
                break
            assert msg.path.startswith("claimed/p-")
            assert msg.path.endswith(msg.id)
            got.append(msg)
            c.ack(msg)
        assert [m.id for m in got] == ids
        assert [m.data for m in got] == [b"one", b"two", b"", b"\0" * 70000]
        assert [m.seq for m in got] == [0, 1, 2, 3]
        assert c.take() is None and c.quarantined == 0
    assert inbox.list() == []


def test_release_and_named_consumer(inbox):
    first = inbox.deliver(b"a")
    inbox.deliver(b"b")
    with inbox.consumer("worker-1") as c:
        assert c.name == "worker-1"
        m = c.take()
        assert m.id == first
        c.release(m.id)  # an id works as well as the message
        assert sorted(c.take().data for _ in range(2)) == [b"a", b"b"]
        assert c.take() is None
        assert first in [e.name for e in inbox.list()]
        assert all(e.state == "claimed" and e.consumer == "worker-1"
                   and e.dir == "claimed/n-worker-1" for e in inbox.list())
    # A named consumer keeps its claims after close, release_all returns
    # them.
    with inbox.consumer("worker-1") as c:
        assert c.take() is None
        assert c.release_all() == 2
    assert sorted((e.state, e.dir) for e in inbox.list()) == \
        [("new", "new"), ("new", "new")]
    assert inbox.list()[0].size > 0 and inbox.list()[0].problem is None


def test_wait(inbox):
    with inbox.consumer() as c:
        assert c.wait(0) is False
        assert c.wait(0.02) is False
        t = threading.Thread(target=inbox.deliver, args=(b"x",))
        t.start()
        assert c.wait(10) is True  # bounded: the thread delivers at once
        t.join()
        assert c.take().data == b"x"


def test_list_strays(inbox, tmp_path):
    os.mkfifo(tmp_path / "ib" / "new" / "fifo")
    [entry] = fsafe.list_inbox(tmp_path / "ib")
    assert entry.state == "stray" and entry.name == "fifo"
    assert entry.problem and entry.consumer is None
    with pytest.raises(FileNotFoundError):
        fsafe.list_inbox(tmp_path / "none")


TAKE_AND_DIE = """
import sys, fsafe
ib = fsafe.Inbox(sys.argv[1])
c = ib.consumer()
print(c.take().id, flush=True)
sys.stdin.read()
"""


def test_recover_after_a_killed_consumer(inbox, tmp_path):
    msg_id = inbox.deliver(b"work")
    child = run_child(TAKE_AND_DIE, str(tmp_path / "ib"), stdin=-1,
                      stdout=-1)
    try:
        ready, _, _ = select.select([child.stdout], [], [], 30)
        assert ready and child.stdout.readline().decode().strip() == msg_id
    finally:
        child.kill()
        assert child.wait(timeout=10) == -signal.SIGKILL
        child.stdout.close()
        child.stdin.close()
    assert [e.state for e in inbox.list()] == ["claimed"]
    rec = inbox.recover(0)
    assert (rec.returned, rec.consumers, rec.swept) == (1, 1, 0)
    assert [(e.state, e.name) for e in inbox.list()] == [("new", msg_id)]
    with inbox.consumer() as c:
        assert c.take().data == b"work"


def test_errors_with_step(inbox, tmp_path):
    with fsafe.Inbox(tmp_path / "small", create=True, max_message=4) as ib:
        with pytest.raises(fsafe.Error) as info:
            ib.deliver(b"12345")
        assert info.value.errno == errno.EMSGSIZE
        assert info.value.step == "deliver (above max_message)"
    with pytest.raises(FileNotFoundError) as info:
        fsafe.Inbox(tmp_path / "absent")
    assert info.value.step == "open"
    with pytest.raises(fsafe.Error) as info:
        inbox.consumer("bad/name")
    assert info.value.errno == errno.EINVAL
    assert info.value.step == "consumer name"
    with inbox.consumer() as c:
        with pytest.raises(FileNotFoundError) as info:
            c.ack("0" * 60)
        assert info.value.step
        with pytest.raises(FileNotFoundError):
            c.release("0" * 60)


def test_use_after_close_raises(tmp_path):
    ib = fsafe.Inbox(tmp_path / "ib", create=True)
    ib.deliver(b"m")
    c = ib.consumer()
    msg = c.take()
    ib.close()  # closes the consumer first: its claim goes back
    ib.close()
    c.close()
    for call in (lambda: ib.deliver(b""), ib.consumer, ib.recover, ib.list,
                 c.take, lambda: c.ack(msg), lambda: c.release(msg),
                 c.release_all, c.wait, lambda: c.quarantined):
        with pytest.raises(ValueError):
            call()
    assert [e.state for e in fsafe.list_inbox(tmp_path / "ib")] == ["new"]
