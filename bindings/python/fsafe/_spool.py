"""The spool (fsafe/spool.h): an append-only, numbered log of records with
a durable consumer cursor."""

from __future__ import annotations

import ctypes
import os
import threading
import weakref
from typing import Iterable, Iterator, NamedTuple, Optional, Tuple

from . import _errors, _lib
from ._handle import Child, Handle

SpoolStat = NamedTuple("SpoolStat",
                       [(name, int) for name in _lib.SPOOL_STAT_FIELDS])
SpoolStat.__doc__ = """The spool's counters (fsafe_spool_stat): `cursor`
(the next record to consume), `first_seq`, `next_seq`, `segments`,
`bytes`, and what the open found damaged."""


class Spool(Handle):
    """Records appended in order, numbered from 1, each durable when
    append returns; a reader yields (seq, bytes) from the consumer cursor
    and ack(seq) moves the cursor past seq::

        with fsafe.Spool("events", create=True) as sp:
            sp.append(b"one")
            with sp.reader() as r:
                for seq, data in r:
                    handle(data)
                    r.ack(seq)

    `read_only` changes nothing on disk (append and ack raise EBADF).
    `segment_size` and `max_record` are in bytes (0: the library's
    defaults, 64 MiB and 1 MiB).
    """

    def __init__(self, path: "os.PathLike[str] | str | bytes",
                 create: bool = False, *, read_only: bool = False,
                 segment_size: int = 0, max_record: int = 0,
                 dir_fd: Optional[int] = None) -> None:
        self.path = path
        self._mutex = threading.RLock()
        self._readers: "weakref.WeakSet[SpoolReader]" = weakref.WeakSet()
        flags = (_lib.SPOOL_CREATE if create else 0) | \
            (_lib.SPOOL_RDONLY if read_only else 0)
        self._detail = _lib.Error()
        self._opts = _lib.new_opts(
            _lib.SpoolOpts, flags=flags, segment_size=segment_size,
            max_record=max_record, error=ctypes.pointer(self._detail))
        handle = ctypes.c_void_p()
        rc = _lib.lib().fsafe_spool_open(_lib.dirfd_of(dir_fd),
                                         _lib.fspath(path),
                                         ctypes.byref(self._opts),
                                         ctypes.byref(handle))
        _errors.check(rc, self._detail, path)
        self._h = handle.value

    _WHAT = "fsafe.Spool: the spool"

    def close(self) -> None:
        """Close the spool and every reader still open on it."""
        with self._mutex:
            for reader in list(self._readers):
                reader.close()
            s, self._h = self._h, None
            if s is not None:
                _lib.lib().fsafe_spool_close(s)

    def append(self, *records) -> int:
        """Append the records (bytes-like) as one durable step; return
        the first one's number."""
        bufs = [_lib.as_buffer(r) for r in records]
        vec = (_lib.IoVec * max(1, len(bufs)))()
        for i, (buf, size) in enumerate(bufs):
            vec[i].iov_base = ctypes.cast(buf, ctypes.c_void_p)
            vec[i].iov_len = size
        first = ctypes.c_uint64()
        with self._mutex:
            # bufs keeps every buffer alive through the call.
            self._call(_lib.lib().fsafe_spool_append, vec, len(bufs),
                       ctypes.byref(first))
        return first.value

    def extend(self, records: Iterable) -> int:
        """append(*records)."""
        return self.append(*records)

    def reader(self, start: Optional[int] = None) -> "SpoolReader":
        """A reader from record `start`, or from the cursor (None)."""
        return SpoolReader(self, _lib.SPOOL_FROM_CURSOR if start is None
                           else start)

    def __iter__(self) -> Iterator[Tuple[int, bytes]]:
        """The records from the cursor on (a new reader)."""
        with self.reader() as r:
            yield from r

    def ack(self, seq: int) -> None:
        """Records up to and including `seq` are consumed (durably)."""
        with self._mutex:
            self._call(_lib.lib().fsafe_spool_ack, seq)

    def stat(self) -> SpoolStat:
        st = _lib.new_opts(_lib.SpoolStat)
        with self._mutex:
            self._call(_lib.lib().fsafe_spool_stat, ctypes.byref(st))
        return SpoolStat(*(getattr(st, f) for f in _lib.SPOOL_STAT_FIELDS))


class SpoolReader(Child):
    """An iterator of (seq, bytes) up to the last durable record; a later
    iteration picks up records appended since."""

    def __init__(self, spool: Spool, start: int) -> None:
        self._owner = self._spool = spool
        handle = ctypes.c_void_p()
        with spool._mutex:
            spool._call(_lib.lib().fsafe_spool_reader_open, start,
                        ctypes.byref(handle))
            self._h = handle.value
            spool._readers.add(self)

    _WHAT = "fsafe.SpoolReader: the reader"

    def __iter__(self) -> "SpoolReader":
        return self

    def __next__(self) -> Tuple[int, bytes]:
        data = ctypes.c_void_p()
        size = ctypes.c_size_t()
        seq = ctypes.c_uint64()
        sp = self._spool
        with sp._mutex:
            sp._detail.code = 0
            rc = _lib.lib().fsafe_spool_next(self._handle(),
                                             ctypes.byref(data),
                                             ctypes.byref(size),
                                             ctypes.byref(seq))
            _errors.check(rc, sp._detail, sp.path)
            if rc == 0:
                raise StopIteration
            # Valid only until the next call: copied under the mutex.
            return seq.value, ctypes.string_at(data, size.value)

    def ack(self, seq: int) -> None:
        """The spool's ack(): records up to `seq` are consumed."""
        self._handle()
        self._spool.ack(seq)

    def close(self) -> None:
        with self._spool._mutex:
            r, self._h = self._h, None
            if r is not None:
                self._spool._readers.discard(self)
                _lib.lib().fsafe_spool_reader_close(r)
