"""The staging-name contract and the sweep of abandoned staging files."""

from __future__ import annotations

import ctypes
import os
from datetime import timedelta
from typing import List, Optional, Union

from . import _errors, _lib

Age = Union[timedelta, int, float]


def is_staging_name(name: Union[str, bytes]) -> bool:
    """True exactly for a bare file name (no '/') of the form an atomic
    write stages under. Recognise leftovers only through this."""
    return bool(_lib.lib().fsafe_is_staging_name(os.fsencode(name)))


class Cancel:
    """A cancellation token for sweep(): request() from any thread."""

    def __init__(self) -> None:
        handle = ctypes.c_void_p()
        _errors.check(_lib.lib().fsafe_cancel_new(ctypes.byref(handle)))
        self._c = handle.value

    def request(self) -> None:
        _lib.lib().fsafe_cancel_request(self._c)

    @property
    def requested(self) -> bool:
        return bool(_lib.lib().fsafe_cancel_requested(self._c))

    def __del__(self) -> None:
        c, self._c = getattr(self, "_c", None), None
        if c is not None:
            _lib.lib().fsafe_cancel_free(c)


def to_ms(age: Age) -> int:
    """A duration (timedelta or seconds) in whole milliseconds."""
    seconds = age.total_seconds() if isinstance(age, timedelta) else age
    if seconds < 0:
        raise ValueError("fsafe: a duration cannot be negative")
    return int(seconds * 1000)


def sweep(directory: "os.PathLike[str] | str | bytes",
          older_than: Age = timedelta(hours=1), *,
          cancel: Optional[Cancel] = None, dry_run: bool = False,
          dir_fd: Optional[int] = None) -> List[str]:
    """Remove abandoned staging files directly in `directory` whose mtime
    is more than `older_than` (a timedelta, or seconds) in the past and
    which no live writer holds; return their names (what would be removed,
    with `dry_run`). Never follows a link nor enters a subdirectory.

    On failure, and on cancellation (an Error with errno ECANCELED), the
    exception's ``removed`` attribute lists what was removed before it.
    """
    result = ctypes.c_void_p()
    lib = _lib.lib()
    rc = lib.fsafe_sweep(_lib.dirfd_of(dir_fd), _lib.fspath(directory),
                         to_ms(older_than),
                         _lib.SWEEP_DRY_RUN if dry_run else 0,
                         cancel._c if cancel is not None else None,
                         ctypes.byref(result))
    try:
        names = [os.fsdecode(lib.fsafe_sweep_result_name(result, i))
                 for i in range(lib.fsafe_sweep_result_count(result))] \
            if result.value else []
    finally:
        lib.fsafe_sweep_result_free(result)
    if rc < 0:
        exc = _errors.make(rc, None, "sweep", False, directory)
        exc.removed = names  # type: ignore[attr-defined]
        raise exc
    return names
