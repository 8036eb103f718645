"""The keyed store (fsafe/store.h) as a MutableMapping of bytes."""

from __future__ import annotations

import ctypes
import errno
import os
import threading
from collections.abc import MutableMapping
from datetime import timedelta
from typing import Iterator, List, Optional, Tuple, Union

from . import _errors, _lib
from ._handle import Handle
from ._sweep import to_ms


class _Verdict:
    def __init__(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return f"fsafe.Store.{self._name}"


BytesLike = Union[bytes, bytearray, memoryview]
UpdateResult = Union[BytesLike, _Verdict]


class Store(Handle, MutableMapping):
    """A directory of records, one per key, each published atomically.

    Keys and values are bytes (keys of 1 to 126 bytes). Every change is
    made under the store's lock, so versions count up without gaps and
    concurrent updaters in different processes never lose an update::

        with fsafe.Store("state", create=True) as s:
            s[b"config"] = b"..."
            s.update(b"counter", lambda old: b"%d" % (int(old or 0) + 1))

    `create` makes a missing directory (and its parents). `sync=False`
    skips syncs (records survive a process crash, not a power cut).
    `lock_timeout` bounds the wait for the store's lock (a timedelta or
    seconds; default 30 s; None waits without limit). `kernel_lock` is
    accepted and has no effect: the store's lock is always a kernel lock
    (keep stores on a local filesystem).
    `sweep` (default True) removes staging files abandoned more than
    `sweep_older_than` (default one hour) when opening.
    """

    #: update() verdict: change nothing.
    KEEP = _Verdict("KEEP")
    #: update() verdict: delete the key.
    DELETE = _Verdict("DELETE")

    def __init__(self, path: "os.PathLike[str] | str | bytes",
                 create: bool = False, *, sync: bool = True,
                 mode: Optional[int] = None,
                 lock_timeout: Union[timedelta, float, None, int] = 30,
                 kernel_lock: bool = False, sweep: bool = True,
                 sweep_older_than: Union[timedelta, float, None] = None,
                 dir_fd: Optional[int] = None) -> None:
        self.path = path
        self._mutex = threading.RLock()
        # A close() from inside update()'s function (the same thread,
        # holding the mutex) leaves the handle here for update() to close
        # once the C call returns, instead of freeing it under that call.
        self._in_update = False
        self._close_after_update: Optional[int] = None
        flags = (_lib.STORE_CREATE if create else 0) | \
            (_lib.STORE_LOCK_KERNEL if kernel_lock else 0) | \
            (0 if sweep else _lib.STORE_NO_SWEEP)
        if lock_timeout is None:
            timeout_ms = _lib.FSAFE_FOREVER
        else:
            # 0 would mean the default to the library: wait the least
            # it can count instead.
            timeout_ms = max(1, to_ms(lock_timeout))
        self._detail = _lib.Error()
        self._opts = _lib.new_opts(
            _lib.StoreOpts, flags=flags,
            write_flags=0 if sync else _lib.NO_SYNC, mode=mode or 0,
            sweep_older_than_ms=0 if sweep_older_than is None
            else max(1, to_ms(sweep_older_than)),
            lock_timeout_ms=timeout_ms, error=ctypes.pointer(self._detail))
        handle = ctypes.c_void_p()
        rc = _lib.lib().fsafe_store_open(_lib.dirfd_of(dir_fd),
                                         _lib.fspath(path),
                                         ctypes.byref(self._opts),
                                         ctypes.byref(handle))
        _errors.check(rc, self._detail, path)
        self._h = handle.value

    # ---- plumbing ---------------------------------------------------------

    _WHAT = "fsafe.Store: the store"

    @staticmethod
    def _key(key: BytesLike) -> Tuple[object, int]:
        if isinstance(key, str):
            raise TypeError("fsafe.Store: keys are bytes, not str")
        return _lib.as_buffer(key)

    @property
    def swept(self) -> int:
        """Staging files the open swept."""
        return _lib.lib().fsafe_store_swept(self._handle())

    def close(self) -> None:
        with self._mutex:
            s, self._h = self._h, None
            if s is not None and self._in_update:
                self._close_after_update = s
            elif s is not None:
                _lib.lib().fsafe_store_close(s)

    # ---- reads ------------------------------------------------------------

    def get_version(self, key: BytesLike) -> Tuple[bytes, int]:
        """The value and its version; KeyError when the key has none."""
        k, klen = self._key(key)
        buf = ctypes.c_void_p()
        size = ctypes.c_size_t()
        version = ctypes.c_uint64()
        with self._mutex:
            self._detail.code = 0
            rc = _lib.lib().fsafe_store_get(
                self._handle(), k, klen, ctypes.byref(buf),
                ctypes.byref(size), ctypes.byref(version))
            if rc == -errno.ENOENT:
                raise KeyError(bytes(key))
            _errors.check(rc, self._detail, self.path)
        try:
            return ctypes.string_at(buf, size.value), version.value
        finally:
            _lib.free(buf)

    def __getitem__(self, key: BytesLike) -> bytes:
        return self.get_version(key)[0]

    def version(self, key: BytesLike) -> int:
        """The key's version, 0 when it has no record."""
        try:
            return self.get_version(key)[1]
        except KeyError:
            return 0

    def keys_list(self) -> List[bytes]:
        """A sorted snapshot of the keys with a valid record."""
        it = ctypes.c_void_p()
        lib = _lib.lib()
        # The iterator reads through the store's handle: a close() from
        # another thread waits until it is freed.
        with self._mutex:
            self._call(lib.fsafe_store_list, None, ctypes.byref(it))
            try:
                keys = []
                entry = _lib.StoreEntry()
                while lib.fsafe_store_iter_next(it,
                                                ctypes.byref(entry)) == 1:
                    keys.append(ctypes.string_at(entry.key, entry.keylen))
                return keys
            finally:
                lib.fsafe_store_iter_free(it)

    def __iter__(self) -> Iterator[bytes]:
        return iter(self.keys_list())

    def __len__(self) -> int:
        return len(self.keys_list())

    def __contains__(self, key: object) -> bool:
        try:
            self.get_version(key)  # type: ignore[arg-type]
        except KeyError:
            return False
        return True

    # ---- changes ----------------------------------------------------------

    def put(self, key: BytesLike, value: BytesLike) -> int:
        """Store `value` under `key`; return the new version."""
        k, klen = self._key(key)
        v, vlen = _lib.as_buffer(value)
        version = ctypes.c_uint64()
        with self._mutex:
            self._call(_lib.lib().fsafe_store_put, k, klen, v, vlen,
                       ctypes.byref(version))
        return version.value

    def __setitem__(self, key: BytesLike, value: BytesLike) -> None:
        self.put(key, value)

    def put_if(self, key: BytesLike, value: BytesLike, expected: int) -> int:
        """put() only if the key's version is `expected` (0: the key must
        not exist); ConflictError otherwise. Returns the new version."""
        k, klen = self._key(key)
        v, vlen = _lib.as_buffer(value)
        version = ctypes.c_uint64()
        with self._mutex:
            self._call(_lib.lib().fsafe_store_put_if, k, klen, v, vlen,
                       expected, ctypes.byref(version))
        return version.value

    def __delitem__(self, key: BytesLike) -> None:
        k, klen = self._key(key)
        with self._mutex:
            self._detail.code = 0
            rc = _lib.lib().fsafe_store_delete(self._handle(), k, klen)
            if rc == -errno.ENOENT:
                raise KeyError(bytes(key))
            _errors.check(rc, self._detail, self.path)

    def update(self, key=(), fn=None, /, **kwargs):  # type: ignore[override]
        """Read-modify-write of one key under the store's lock.

        ``update(key, fn)`` calls ``fn(old)`` with the current value (None
        when the key has none); `fn` returns the new value (bytes),
        Store.KEEP to change nothing or Store.DELETE to delete the key.
        No other change of the store interleaves. An exception raised by
        `fn` aborts with no change and propagates. Returns the resulting
        version (0 when the key has no record afterwards).

        ``update(mapping)`` or ``update(**kwargs)`` puts each pair, as
        MutableMapping.update does, and returns None.
        """
        if fn is None:
            MutableMapping.update(self, key, **kwargs)
            return None
        if not callable(fn):
            raise TypeError("fsafe.Store.update: fn must be callable")
        k, klen = self._key(key)
        state = {"keep": None, "exc": None}

        def trampoline(old, old_len, new_buf, new_len, _arg):
            try:
                result = fn(None if old is None
                            else ctypes.string_at(old, old_len))
                if result is Store.KEEP:
                    return _lib.STORE_KEEP
                if result is Store.DELETE:
                    return _lib.STORE_DELETE
                if isinstance(result, str) or result is None:
                    raise TypeError("fsafe.Store.update: the function must "
                                    "return bytes, Store.KEEP or "
                                    "Store.DELETE, not "
                                    f"{type(result).__name__}")
                view = memoryview(result).cast("B")
                buf = (ctypes.c_char * len(view)).from_buffer_copy(view)
                # The library reads the value after the callback returns.
                state["keep"] = buf
                new_buf[0] = ctypes.addressof(buf)
                new_len[0] = len(view)
                return _lib.STORE_WRITE
            except BaseException as exc:  # re-raised after the C call
                state["exc"] = exc
                return _errors.errno_of(exc)

        callback = _lib.STORE_UPDATE_FN(trampoline)
        version = ctypes.c_uint64()
        with self._mutex:
            self._detail.code = 0
            handle = self._handle()
            self._in_update = True
            try:
                rc = _lib.lib().fsafe_store_update(handle, k, klen,
                                                   callback, None,
                                                   ctypes.byref(version))
            finally:
                self._in_update = False
                closed, self._close_after_update = \
                    self._close_after_update, None
                if closed is not None:
                    _lib.lib().fsafe_store_close(closed)
        if state["exc"] is not None:
            raise state["exc"]
        _errors.check(rc, self._detail, self.path)
        return version.value
