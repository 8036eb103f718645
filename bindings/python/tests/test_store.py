import errno
import os
from collections.abc import MutableMapping

import pytest

import fsafe
from conftest import run_child


@pytest.fixture
def store(tmp_path):
    with fsafe.Store(tmp_path / "s", create=True) as s:
        yield s


def test_mapping_round_trip(store):
    assert isinstance(store, MutableMapping)
    assert len(store) == 0 and list(store) == []
    store[b"b"] = b"2"
    store[b"a\x00z"] = bytearray(b"1")
    store[b"e"] = b""
    assert store[b"b"] == b"2" and store[b"a\x00z"] == b"1"
    assert store[b"e"] == b""
    assert list(store) == [b"a\x00z", b"b", b"e"]  # sorted by key bytes
    assert len(store) == 3 and b"b" in store and b"x" not in store
    assert dict(store.items()) == {b"a\x00z": b"1", b"b": b"2", b"e": b""}
    del store[b"b"]
    assert b"b" not in store
    with pytest.raises(KeyError):
        store[b"b"]
    with pytest.raises(KeyError):
        del store[b"b"]
    assert store.get(b"b", b"dflt") == b"dflt"
    assert store.pop(b"e") == b""
    store.update({b"m": b"1", b"n": b"2"})  # MutableMapping's form too
    assert store[b"m"] == b"1" and store[b"n"] == b"2"


def test_versions_and_put_if(store):
    assert store.version(b"k") == 0
    assert store.put_if(b"k", b"v1", 0) == 1
    assert store.put(b"k", b"v2") == 2
    assert store.get_version(b"k") == (b"v2", 2)
    with pytest.raises(fsafe.ConflictError) as info:
        store.put_if(b"k", b"lost", 1)
    assert info.value.step == "compare version"
    assert isinstance(info.value, OSError)
    assert store.get_version(b"k") == (b"v2", 2)
    assert store.put_if(b"k", b"v3", 2) == 3


def test_update_verdicts(store):
    assert store.update(b"n", lambda old: b"1" if old is None else old) == 1
    assert store.update(b"n", lambda old: b"%d" % (int(old) + 1)) == 2
    assert store[b"n"] == b"2"
    assert store.update(b"n", lambda old: fsafe.Store.KEEP) == 2
    assert store.get_version(b"n") == (b"2", 2)
    assert store.update(b"n", lambda old: b"") == 3
    assert store[b"n"] == b""
    assert store.update(b"n", lambda old: fsafe.Store.DELETE) == 0
    assert b"n" not in store


def test_update_errors_change_nothing(store):
    store[b"k"] = b"v"
    with pytest.raises(ZeroDivisionError):
        store.update(b"k", lambda old: 1 / 0)
    with pytest.raises(TypeError):
        store.update(b"k", lambda old: None)
    with pytest.raises(TypeError):
        store.update(b"k", lambda old: "text")
    with pytest.raises(FileExistsError):
        store.update(b"k", lambda old: (_ for _ in ()).throw(
            FileExistsError(errno.EEXIST, "mine")))
    assert store.get_version(b"k") == (b"v", 1)

    def nested(old):
        store[b"other"] = b"x"  # a change inside the callback: EDEADLK
        return old
    with pytest.raises(OSError) as info:
        store.update(b"k", nested)
    assert info.value.errno == errno.EDEADLK
    assert b"other" not in store


def test_key_errors(store):
    with pytest.raises(TypeError, match="keys are bytes"):
        store["str"] = b"x"
    with pytest.raises(OSError) as info:
        store[b"k" * 127] = b"x"
    assert info.value.errno == errno.ENAMETOOLONG and info.value.step == "key"
    store[b"k" * 126] = b"max"
    with pytest.raises(OSError) as info:
        store[b""] = b"x"
    assert info.value.errno == errno.EINVAL


def test_open_errors(tmp_path, readonly_dir):
    with pytest.raises(FileNotFoundError) as info:
        fsafe.Store(tmp_path / "none")
    assert info.value.step
    (tmp_path / "file").write_bytes(b"")
    with pytest.raises(NotADirectoryError):
        fsafe.Store(tmp_path / "file")
    base, expected = readonly_dir
    with pytest.raises(OSError) as info:
        fsafe.Store(os.path.join(base, "s"), create=True)
    assert info.value.errno == expected and info.value.step


def test_damaged_record(store, tmp_path):
    store[b"k"] = b"v"
    (tmp_path / "s" / ("k-" + b"k".hex())).write_bytes(b"garbage")
    with pytest.raises(OSError) as info:
        store[b"k"]
    assert info.value.errno == errno.EBADMSG and info.value.step
    assert list(store) == []


def test_closed(tmp_path):
    s = fsafe.Store(tmp_path / "s", create=True)
    s.close()
    s.close()
    with pytest.raises(ValueError):
        s[b"k"] = b"v"


def test_sweep_on_open(tmp_path):
    d = tmp_path / "s"
    d.mkdir()
    stage = d / ".fsafe-0123456789abcdef01234567.tmp"
    stage.write_bytes(b"left")
    os.utime(stage, (1, 1))
    with fsafe.Store(d) as s:
        assert s.swept == 1
    assert not stage.exists()


UPDATER = """
import sys, fsafe
with fsafe.Store(sys.argv[1]) as s:
    for _ in range(int(sys.argv[2])):
        s.update(b"n", lambda old: b"%d" % (int(old or b"0") + 1))
"""


def test_concurrent_updaters_lose_nothing(tmp_path):
    fsafe.Store(tmp_path / "s", create=True).close()
    children = [run_child(UPDATER, str(tmp_path / "s"), "25")
                for _ in range(3)]
    with fsafe.Store(tmp_path / "s") as s:
        for _ in range(25):
            s.update(b"n", lambda old: b"%d" % (int(old or b"0") + 1))
        for c in children:
            assert c.wait(timeout=60) == 0
        assert s.get_version(b"n") == (b"100", 100)
