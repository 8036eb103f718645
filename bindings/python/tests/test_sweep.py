import errno
import os
import time
from datetime import timedelta

import pytest

import fsafe

STAGE = ".fsafe-0123456789abcdef01234567.tmp"


def test_is_staging_name():
    assert fsafe.is_staging_name(STAGE)
    assert fsafe.is_staging_name(STAGE.encode())
    for name in (".fsafe-0123456789ABCDEF01234567.tmp",  # upper case
                 ".fsafe-0123456789abcdef0123456.tmp",    # 23 digits
                 "d/" + STAGE, STAGE + "x", "",
                 ".lock-0123456789abcdef01234567.tmp", "data.tmp"):
        assert not fsafe.is_staging_name(name), name


def make(path, age_s):
    path.write_bytes(b"left")
    t = time.time() - age_s
    os.utime(path, (t, t))


def test_sweep_by_age(tmp_path):
    make(tmp_path / STAGE, 7200)
    young = ".fsafe-aaaaaaaaaaaaaaaaaaaaaaaa.tmp"
    make(tmp_path / young, 60)
    make(tmp_path / "keep.tmp", 7200)
    (tmp_path / ".fsafe-bbbbbbbbbbbbbbbbbbbbbbbb.tmp").mkdir()
    assert fsafe.sweep(tmp_path, timedelta(hours=1), dry_run=True) == [STAGE]
    assert (tmp_path / STAGE).exists()
    assert fsafe.sweep(tmp_path, older_than=3600) == [STAGE]
    assert sorted(os.listdir(tmp_path)) == sorted(
        [young, "keep.tmp", ".fsafe-bbbbbbbbbbbbbbbbbbbbbbbb.tmp"])
    assert fsafe.sweep(str(tmp_path), timedelta(seconds=1)) == [young]
    assert fsafe.sweep(tmp_path, 0) == []


def test_sweep_spares_live_writer(tmp_path):
    f = fsafe.open_atomic(tmp_path / "t", "wb", tmpfile=False)
    try:
        assert fsafe.sweep(tmp_path, 0) == []
        assert len(os.listdir(tmp_path)) == 1
    finally:
        f.close()


def test_sweep_cancel(tmp_path):
    make(tmp_path / STAGE, 7200)
    c = fsafe.Cancel()
    assert not c.requested
    c.request()
    assert c.requested
    with pytest.raises(OSError) as info:
        fsafe.sweep(tmp_path, 0, cancel=c)
    assert info.value.errno == errno.ECANCELED
    assert info.value.removed == []
    assert (tmp_path / STAGE).exists()


def test_sweep_errors(tmp_path):
    with pytest.raises(FileNotFoundError) as info:
        fsafe.sweep(tmp_path / "none", 0)
    assert info.value.step == "sweep"
    with pytest.raises(ValueError):
        fsafe.sweep(tmp_path, -1)
