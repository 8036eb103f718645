import errno
import os
import pickle
import stat

import pytest

import fsafe
from fsafe import _errors, _lib


def test_write_bytes_round_trip(tmp_path):
    p = tmp_path / "a"
    fsafe.write_bytes(p, b"one")
    assert p.read_bytes() == b"one"
    fsafe.write_bytes(str(p), bytearray(b"two"))
    assert p.read_bytes() == b"two"
    fsafe.write_bytes(os.fsencode(p), memoryview(b"xthreex")[1:6])
    assert p.read_bytes() == b"three"
    fsafe.write_bytes(p, b"")
    assert p.read_bytes() == b""
    big = os.urandom(3 << 20)
    fsafe.write_bytes(p, big, sync=False)
    assert p.read_bytes() == big


def test_write_text_encoding(tmp_path):
    p = tmp_path / "t"
    fsafe.write_text(p, "h\u00e9llo")
    assert p.read_bytes() == "h\u00e9llo".encode()
    fsafe.write_text(p, "h\u00e9llo", encoding="latin-1")
    assert p.read_bytes() == b"h\xe9llo"


def test_mode_of_new_file_and_kept_mode(tmp_path):
    p = tmp_path / "m"
    old = os.umask(0)
    try:
        fsafe.write_bytes(p, b"1", mode=0o640)
        assert stat.S_IMODE(os.stat(p).st_mode) == 0o640
        fsafe.write_bytes(p, b"2", mode=0o600)  # an existing file keeps its
        assert stat.S_IMODE(os.stat(p).st_mode) == 0o640
    finally:
        os.umask(old)


def test_create_only(tmp_path):
    p = tmp_path / "c"
    fsafe.write_bytes(p, b"first", create_only=True)
    with pytest.raises(FileExistsError) as info:
        fsafe.write_bytes(p, b"second", create_only=True)
    e = info.value
    assert isinstance(e, fsafe.Error) and isinstance(e, OSError)
    assert e.errno == errno.EEXIST
    assert e.step == "exists (create-only)"
    assert e.filename == p and not e.published
    assert p.read_bytes() == b"first"


def test_directory_at_target(tmp_path):
    (tmp_path / "d").mkdir()
    with pytest.raises(IsADirectoryError) as info:
        fsafe.write_text(tmp_path / "d", "x")
    assert info.value.errno == errno.EISDIR
    assert info.value.step == "stat"


def test_read_only_directory(readonly_dir):
    base, expected = readonly_dir
    with pytest.raises(OSError) as info:
        fsafe.write_bytes(os.path.join(base, "x"), b"x")
    e = info.value
    assert isinstance(e, fsafe.Error)
    assert e.errno == expected and e.step == "open"
    assert "open" in str(e) and os.strerror(expected) in str(e)
    assert os.listdir(base) == []


def test_mkdir_and_dir_fd(tmp_path):
    fsafe.write_bytes(tmp_path / "x" / "y" / "z", b"deep", mkdir=True)
    assert (tmp_path / "x" / "y" / "z").read_bytes() == b"deep"
    with pytest.raises(FileNotFoundError):
        fsafe.write_bytes(tmp_path / "no" / "z", b"x")
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fsafe.write_bytes("rel", b"at", dir_fd=fd)
    finally:
        os.close(fd)
    assert (tmp_path / "rel").read_bytes() == b"at"


def test_follow_symlinks(tmp_path):
    (tmp_path / "real").write_bytes(b"old")
    os.symlink("real", tmp_path / "link")
    fsafe.write_bytes(tmp_path / "link", b"through")
    assert (tmp_path / "real").read_bytes() == b"through"
    fsafe.write_bytes(tmp_path / "link", b"replaced", follow_symlinks=False)
    assert not os.path.islink(tmp_path / "link")
    assert (tmp_path / "real").read_bytes() == b"through"
    assert (tmp_path / "link").read_bytes() == b"replaced"


def test_token_if_unchanged_conflict(tmp_path):
    p = tmp_path / "cas"
    with pytest.raises(FileNotFoundError):
        fsafe.token(p)
    p.write_bytes(b"v1")
    tok = fsafe.token(p)
    assert len(tok) == _lib.TOKEN_LEN - 1
    fsafe.write_bytes(p, b"v2", if_unchanged=tok)
    assert p.read_bytes() == b"v2"
    with pytest.raises(fsafe.ConflictError) as info:
        fsafe.write_bytes(p, b"v3", if_unchanged=tok)  # p changed since
    e = info.value
    assert isinstance(e, OSError) and e.code == _lib.FSAFE_ECONFLICT
    assert e.step and not e.published
    assert p.read_bytes() == b"v2"


def test_error_mapping():
    nd = _errors.make(_lib.FSAFE_ENOTDURABLE, errno.EIO, "fsync directory",
                      True, "/x")
    assert type(nd) is fsafe.NotDurableError
    assert nd.errno == errno.EIO and nd.published
    assert str(nd).startswith("/x: fsync directory: ")
    conflict = _errors.make(_lib.FSAFE_ECONFLICT, 0, "compare", False)
    assert type(conflict) is fsafe.ConflictError and conflict.errno is None
    timeout = _errors.make(-errno.ETIMEDOUT, 0, None, False)
    assert isinstance(timeout, TimeoutError)
    assert isinstance(timeout, fsafe.Error) and timeout.errno == errno.ETIMEDOUT
    plain = _errors.make(-errno.EIO, errno.EIO, "write", False)
    assert type(plain) is fsafe.Error and plain.step == "write"
    again = pickle.loads(pickle.dumps(nd))
    assert type(again) is fsafe.NotDurableError and again.step == nd.step


def test_library_version():
    assert fsafe.library_version().count(".") == 2
