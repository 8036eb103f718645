import errno
import os

import pytest

import fsafe


def leftovers(d):
    return sorted(n for n in os.listdir(d) if fsafe.is_staging_name(n))


@pytest.mark.parametrize("tmpfile", [True, False])
def test_binary_commit(tmp_path, tmpfile):
    p = tmp_path / "b"
    p.write_bytes(b"old")
    with fsafe.open_atomic(p, "wb", tmpfile=tmpfile) as f:
        assert isinstance(f, fsafe.AtomicWriter)
        assert f.write(b"new ") == 4
        f.write(bytearray(b"con"))
        f.write(memoryview(b"tent"))
        assert p.read_bytes() == b"old"  # nothing visible before commit
    assert p.read_bytes() == b"new content"
    assert leftovers(tmp_path) == []


def test_text_mode(tmp_path):
    p = tmp_path / "t"
    with fsafe.open_atomic(p, "w", newline="\r\n") as f:
        assert isinstance(f, fsafe.AtomicTextWriter)
        f.write("caf\u00e9\n")
        print("line", file=f)
    assert p.read_bytes() == "caf\u00e9\r\nline\r\n".encode()
    with fsafe.open_atomic(p, "w", encoding="utf-16-le") as f:
        f.write("ab")
    assert p.read_bytes() == "ab".encode("utf-16-le")


@pytest.mark.parametrize("mode", ["w", "wb"])
@pytest.mark.parametrize("tmpfile", [True, False])
def test_exception_aborts(tmp_path, mode, tmpfile):
    p = tmp_path / "x"
    p.write_bytes(b"old")
    data = "new" if mode == "w" else b"new"
    with pytest.raises(ZeroDivisionError):
        with fsafe.open_atomic(p, mode, tmpfile=tmpfile) as f:
            f.write(data)
            1 / 0
    assert p.read_bytes() == b"old"
    assert os.listdir(tmp_path) == ["x"]


def test_close_without_commit_aborts(tmp_path):
    p = tmp_path / "c"
    f = fsafe.open_atomic(p, "wb", tmpfile=False)
    f.write(b"never")
    assert len(leftovers(tmp_path)) == 1  # the named stage, while open
    f.close()
    assert os.listdir(tmp_path) == []
    with pytest.raises(ValueError):
        f.write(b"more")


def test_explicit_commit_and_fileno(tmp_path):
    p = tmp_path / "f"
    f = fsafe.open_atomic(p, "wb", permissions=0o600)
    os.write(f.fileno(), b"by fd, ")
    f.write(b"then by write")
    f.commit()
    assert p.read_bytes() == b"by fd, then by write"
    with pytest.raises(ValueError):
        f.commit()


def test_create_only_at_open(tmp_path):
    p = tmp_path / "e"
    p.write_bytes(b"here")
    with pytest.raises(FileExistsError) as info:
        fsafe.open_atomic(p, "w", create_only=True)
    assert info.value.errno == errno.EEXIST and info.value.step
    assert p.read_bytes() == b"here"


def test_create_only_race_reported_at_commit(tmp_path):
    p = tmp_path / "r"
    f = fsafe.open_atomic(p, "wb", create_only=True)
    f.write(b"late")
    p.write_bytes(b"first")
    with pytest.raises(FileExistsError) as info:
        f.commit()
    assert info.value.step == "exists (create-only)"
    assert p.read_bytes() == b"first"
    assert os.listdir(tmp_path) == ["r"]


def test_conflict_at_commit(tmp_path):
    p = tmp_path / "k"
    p.write_bytes(b"v1")
    tok = fsafe.token(p)
    with pytest.raises(fsafe.ConflictError):
        with fsafe.open_atomic(p, "wb", if_unchanged=tok) as f:
            f.write(b"mine")
            fsafe.write_bytes(p, b"theirs")
    assert p.read_bytes() == b"theirs"


def test_directory_at_target(tmp_path):
    with pytest.raises(IsADirectoryError) as info:
        fsafe.open_atomic(tmp_path, "wb")
    assert info.value.step == "stat"


def test_read_only_directory(readonly_dir):
    base, expected = readonly_dir
    with pytest.raises(OSError) as info:
        fsafe.open_atomic(os.path.join(base, "x"), "w")
    assert info.value.errno == expected and info.value.step == "open"


def test_bad_mode(tmp_path):
    with pytest.raises(ValueError):
        fsafe.open_atomic(tmp_path / "x", "r")
    with pytest.raises(ValueError):
        fsafe.open_atomic(tmp_path / "x", "wb", encoding="utf-8")
    assert os.listdir(tmp_path) == []
