import errno
import os

import pytest

import fsafe
from conftest import run_child


@pytest.fixture
def cp(tmp_path):
    with fsafe.Checkpoint(tmp_path / "cp", create=True, revision="r1") as c:
        yield c


def test_save_load_round_trip(cp, tmp_path):
    src = tmp_path / "big"
    src.write_bytes(bytes(range(256)) * 9000)  # more than one stream chunk
    assert cp.current == 0 and cp.generations() == []
    gen = cp.save({"a.json": b"{}", "empty": b"", "big": src,
                   "buf": bytearray(b"xyz"), "path-str": str(src)})
    assert gen == 1 and cp.current == 1 and cp.generations() == [1]
    snap = cp.load()
    assert dict(snap) == {"a.json": b"{}", "big": src.read_bytes(),
                          "buf": b"xyz", "empty": b"",
                          "path-str": src.read_bytes()}
    assert list(snap) == ["a.json", "big", "buf", "empty", "path-str"]
    assert snap.generation == 1 and snap.revision == "r1"
    assert not snap.other_revision and not snap.fell_back
    assert abs(snap.time.timestamp() - os.path.getmtime(tmp_path / "cp"
                                                        / "CURRENT")) < 5
    assert cp.save({"a.json": b"[]"}) == 2
    assert dict(cp.load()) == {"a.json": b"[]"}
    assert dict(cp.load(1))["buf"] == b"xyz"
    cp.verify()
    cp.verify(1)


def test_keep_and_generations(tmp_path):
    with fsafe.Checkpoint(tmp_path / "cp", create=True, keep=3) as cp:
        for i in range(5):
            cp.save({"n": b"%d" % i})
        assert cp.generations() == [3, 4, 5]


def test_other_revision_and_unclean(tmp_path):
    with fsafe.Checkpoint(tmp_path / "cp", create=True, revision="r1") as c:
        c.save({"f": b"1"})
    old = fsafe.Checkpoint(tmp_path / "cp", revision="r2")
    assert not old.was_unclean
    snap = old.load()
    assert snap.other_revision and snap.revision == "r1"
    old.close()
    # A writer that exits without closing, as a crash leaves it.
    child = run_child("import fsafe, os, sys; "
                      "c = fsafe.Checkpoint(sys.argv[1]); os._exit(0)",
                      str(tmp_path / "cp"))
    assert child.wait(timeout=30) == 0
    with fsafe.Checkpoint(tmp_path / "cp", revision="r2") as c:
        assert c.was_unclean
    kinds = [e.kind for e in fsafe.checkpoint_events(tmp_path / "cp")]
    assert kinds == ["saved", "loaded", "recovered"]


def test_events(cp, tmp_path):
    cp.save({"f": b"1"})
    cp.load()
    evs = list(cp.events())
    assert [(e.kind, e.generation, e.pid) for e in evs] == \
        [("saved", 1, os.getpid()), ("loaded", 1, os.getpid())]
    assert evs[0].time <= evs[1].time
    with pytest.raises(FileNotFoundError):
        list(fsafe.checkpoint_events(tmp_path / "none"))


def test_damage_and_fallback(cp, tmp_path):
    cp.save({"a": b"1"})
    cp.save({"a": b"2"})
    (tmp_path / "cp" / "gen-000000000002" / "a").write_bytes(b"3")
    with pytest.raises(fsafe.Error) as info:
        cp.load()
    assert info.value.errno == errno.EBADMSG
    assert info.value.damage_generation == 2
    assert info.value.damage_file == "a"
    with pytest.raises(fsafe.Error) as info:
        cp.verify(2)
    assert info.value.errno == errno.EBADMSG and info.value.damage_file == "a"
    snap = cp.load(fallback=True)
    assert snap.fell_back and snap.generation == 1 and dict(snap) == \
        {"a": b"1"}


def test_errors_with_step(cp, tmp_path):
    with pytest.raises(fsafe.Error) as info:
        cp.save({"../x": b""})
    assert info.value.errno == errno.EINVAL
    assert info.value.step == "add (bad name)"
    with pytest.raises(FileNotFoundError) as info:
        cp.load(9)
    assert info.value.step == "load (no such generation)"
    with pytest.raises(FileNotFoundError):
        cp.save({"ok": b"1", "copy": tmp_path / "missing"})
    assert cp.current == 0 and cp.generations() == []  # nothing saved
    assert cp.save({"ok": b"1"}) == 1  # the failed save was aborted
    with pytest.raises(BlockingIOError) as info:
        fsafe.Checkpoint(tmp_path / "cp", wait=False)
    assert info.value.step == "lock"
    with pytest.raises(fsafe.Error) as info:
        fsafe.Checkpoint(tmp_path / "cp2", create=True, revision="x" * 2000)
    assert info.value.errno == errno.EINVAL
    assert info.value.step == "revision (too long)"
    with pytest.raises(FileNotFoundError):
        fsafe.Checkpoint(tmp_path / "absent")
    with fsafe.Checkpoint(tmp_path / "cp", read_only=True) as ro:
        with pytest.raises(fsafe.Error) as info:
            ro.save({"a": b""})
        assert info.value.errno == errno.EROFS
        assert info.value.step == "begin (read-only)"


def test_use_after_close_raises(tmp_path):
    cp = fsafe.Checkpoint(tmp_path / "cp", create=True)
    cp.close()
    cp.close()  # a second close is a no-op, not a double free
    for call in (cp.load, cp.generations, cp.verify,
                 lambda: cp.save({"a": b""}), lambda: cp.current,
                 lambda: cp.was_unclean):
        with pytest.raises(ValueError):
            call()
