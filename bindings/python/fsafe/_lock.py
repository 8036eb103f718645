"""Exclusive locks between processes (fsafe/lock.h)."""

from __future__ import annotations

import ctypes
import os
from datetime import timedelta
from typing import Optional, Union

from . import _errors, _lib
from ._sweep import to_ms


class Lock:
    """An exclusive lock named by `path`, as a context manager::

        with fsafe.Lock("state/.lock", timeout=5):
            ...

    `timeout` is a timedelta or seconds: None waits without limit, 0 tries
    once (BlockingIOError when held), otherwise TimeoutError once it has
    passed. A holder's death frees the lock: link mode (the default)
    breaks it on proof the owner is dead; `kernel=True` takes an
    open-file-description lock the kernel frees (local filesystems only).
    Never mix the two modes on one name. `force` also breaks locks whose
    owner cannot be judged (another host): it ends mutual exclusion if
    that owner lives. Release in the process that acquired it.
    """

    def __init__(self, path: "os.PathLike[str] | str | bytes",
                 timeout: Union[timedelta, float, None] = None, *,
                 kernel: bool = False, force: bool = False,
                 dir_fd: Optional[int] = None) -> None:
        self.path = path
        self._dir_fd = dir_fd
        flags = (_lib.LOCK_KERNEL if kernel else 0) | \
            (_lib.LOCK_FORCE if force else 0)
        timeout_ms = _lib.FSAFE_FOREVER
        if timeout is not None:
            timeout_ms = to_ms(timeout)
            if timeout_ms == 0:
                flags |= _lib.LOCK_NO_WAIT
        # The handle keeps a pointer to the detail: both live as long as it.
        self._detail = _lib.Error()
        self._opts = _lib.new_opts(_lib.LockOpts, flags=flags,
                                   timeout_ms=timeout_ms or 0,
                                   error=ctypes.pointer(self._detail))
        self._l: Optional[int] = None
        self._broken = 0

    @property
    def locked(self) -> bool:
        """True while this object holds the lock."""
        return self._l is not None

    @property
    def broken(self) -> int:
        """Dead or stale locks the last acquisition broke (0 normally)."""
        return self._broken

    def acquire(self) -> None:
        if self._l is not None:
            raise RuntimeError("fsafe.Lock: already held by this object")
        handle = ctypes.c_void_p()
        self._detail.code = 0
        rc = _lib.lib().fsafe_lock_acquire(_lib.dirfd_of(self._dir_fd),
                                           _lib.fspath(self.path),
                                           ctypes.byref(self._opts),
                                           ctypes.byref(handle))
        _errors.check(rc, self._detail, self.path)
        self._l = handle.value
        self._broken = _lib.lib().fsafe_lock_broken(self._l)

    def release(self) -> None:
        """Release. An error (e.g. ESTALE: the lock was broken or removed
        while held, mutual exclusion may have been lost) is raised after
        the handle is freed."""
        if self._l is None:
            raise RuntimeError("fsafe.Lock: not held")
        handle, self._l = self._l, None
        self._detail.code = 0
        rc = _lib.lib().fsafe_lock_release(handle)
        _errors.check(rc, self._detail, self.path)

    def __enter__(self) -> "Lock":
        self.acquire()
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.release()

    def __del__(self) -> None:
        # A forgotten lock is released rather than leaked with its handle;
        # in a child after fork() the library refuses (EPERM), harmlessly.
        handle, self._l = getattr(self, "_l", None), None
        if handle is not None:
            _lib.lib().fsafe_lock_release(handle)
