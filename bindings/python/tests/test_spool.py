import errno

import pytest

import fsafe


@pytest.fixture
def spool(tmp_path):
    with fsafe.Spool(tmp_path / "sp", create=True) as sp:
        yield sp


def test_append_read_ack_round_trip(spool, tmp_path):
    assert spool.append(b"one") == 1
    assert spool.append(b"two", bytearray(b"three"), b"",
                        memoryview(b"four")) == 2
    assert spool.extend([b"five"]) == 6
    with spool.reader() as r:
        assert list(r) == [(1, b"one"), (2, b"two"), (3, b"three"),
                           (4, b""), (5, b"four"), (6, b"five")]
        assert list(r) == []
        spool.append(b"six")
        assert next(r) == (7, b"six")  # appended since: picked up
        r.ack(3)
    st = spool.stat()
    assert (st.cursor, st.first_seq, st.next_seq) == (4, 1, 8)
    assert st.segments == 1 and st.bytes > 0 and st.lost == 0
    assert [seq for seq, _ in spool] == [4, 5, 6, 7]
    assert list(spool.reader(6)) == [(6, b"five"), (7, b"six")]
    spool.ack(7)
    assert list(spool) == []
    spool.close()
    # The cursor is durable: a new handle starts after it.
    with fsafe.Spool(tmp_path / "sp") as again:
        assert again.stat().cursor == 8
        again.append(b"eight")
        assert list(again) == [(8, b"eight")]


def test_segments_roll_and_drop(tmp_path):
    with fsafe.Spool(tmp_path / "sp", create=True, segment_size=200,
                     max_record=100) as sp:
        for i in range(20):
            sp.append(b"%02d" % i * 20)
        st = sp.stat()
        assert st.segments > 2
        sp.ack(19)
        after = sp.stat()
        assert after.segments < st.segments and after.first_seq > 1
        assert list(sp) == [(20, b"19" * 20)]


def test_errors_with_step(spool, tmp_path):
    with fsafe.Spool(tmp_path / "small", create=True, segment_size=4096,
                     max_record=16) as sp:
        with pytest.raises(fsafe.Error) as info:
            sp.append(b"ok", b"x" * 17)
        assert info.value.errno == errno.EMSGSIZE
        assert info.value.step == "append (record above max_record)"
        assert sp.stat().next_seq == 1  # nothing appended
    with pytest.raises(FileNotFoundError) as info:
        fsafe.Spool(tmp_path / "absent")
    assert info.value.step == "open"
    with pytest.raises(fsafe.Error) as info:
        fsafe.Spool(tmp_path / "bad", create=True, segment_size=10)
    assert info.value.errno == errno.EINVAL
    assert info.value.step == "options (segment_size below one record)"
    spool.append(b"r")
    spool.close()  # a read-only open takes the lock too
    with fsafe.Spool(tmp_path / "sp", read_only=True) as ro:
        assert list(ro) == [(1, b"r")]
        with pytest.raises(fsafe.Error) as info:
            ro.append(b"x")
        assert info.value.errno == errno.EBADF
        assert info.value.step == "append (read-only)"
        with pytest.raises(fsafe.Error) as info:
            ro.ack(1)
        assert info.value.errno == errno.EBADF


def test_use_after_close_raises(tmp_path):
    sp = fsafe.Spool(tmp_path / "sp", create=True)
    sp.append(b"x")
    r = sp.reader()
    sp.close()  # closes the reader first
    sp.close()
    r.close()
    for call in (lambda: sp.append(b""), sp.reader, sp.stat,
                 lambda: sp.ack(1), lambda: next(r), lambda: r.ack(1),
                 lambda: list(sp)):
        with pytest.raises(ValueError):
            call()
