"""The exceptions: every failure of the library is an OSError.

An error raised for errno E is also an instance of the builtin OSError
subclass Python picks for E (FileExistsError for EEXIST, TimeoutError for
ETIMEDOUT, ...), so ``except FileExistsError`` works as with ``open``.
"""

from __future__ import annotations

import errno as _errno
import os
import threading
from typing import Dict, Optional, Tuple

from . import _lib


class Error(OSError):
    """A failed fsafe call.

    ``errno`` is the errno of the failed step, ``step`` names that step as
    the library reports it ("fsync", "rename", "exists (create-only)",
    ...) or is None when the call gives no detail, ``code`` is the value
    the C function returned and ``published`` says whether the new content
    is visible at the target.
    """

    code: int
    step: Optional[str]
    published: bool

    def __init__(self, code: int, sys_errno: Optional[int],
                 step: Optional[str], published: bool,
                 filename: Optional[object] = None) -> None:
        super().__init__(sys_errno, _strerror(code), filename)
        self.code = code
        self.step = step
        self.published = published

    def __str__(self) -> str:
        parts = []
        if self.filename is not None:
            parts.append(os.fsdecode(self.filename))
        if self.step:
            parts.append(self.step)
        parts.append(self.strerror)
        return ": ".join(parts)

    def __reduce__(self):
        return (_rebuild, (self.code, self.errno, self.step, self.published,
                           self.filename))


class NotDurableError(Error):
    """The new content was published, but a sync after publication failed:
    readers see it now, whether it survives a power cut is unknown."""


class ConflictError(Error):
    """A conditional change lost its race (FSAFE_ECONFLICT): the target is
    no longer the version named, and nothing was changed."""


def _strerror(code: int) -> str:
    return _lib.lib().fsafe_strerror(code).decode("utf-8", "replace")


_classes: Dict[int, type] = {}
_classes_lock = threading.Lock()


def _class_for(sys_errno: int) -> type:
    """Error combined with the builtin subclass Python uses for the errno."""
    builtin = type(OSError(sys_errno, ""))
    if builtin is OSError:
        return Error
    with _classes_lock:
        cls = _classes.get(sys_errno)
        if cls is None:
            cls = type(builtin.__name__, (Error, builtin),
                       {"__module__": __name__})
            _classes[sys_errno] = cls
    return cls


def _rebuild(code, sys_errno, step, published, filename):
    return make(code, sys_errno, step, published, filename)


def make(code: int, sys_errno: Optional[int], step: Optional[str],
         published: bool, filename: Optional[object] = None) -> Error:
    """The exception for a failed call's result and detail."""
    if code == _lib.FSAFE_ENOTDURABLE:
        return NotDurableError(code, sys_errno, step, True, filename)
    if code == _lib.FSAFE_ECONFLICT:
        return ConflictError(code, sys_errno or None, step, published,
                             filename)
    if not sys_errno:
        sys_errno = -code
    return _class_for(sys_errno)(code, sys_errno, step, published, filename)


def from_detail(code: int, detail: Optional[_lib.Error],
                filename: Optional[object] = None) -> Error:
    """The exception for `code`, with the step and errno the library wrote
    into `detail` (an options struct's error member) when it did."""
    if detail is not None and detail.code == code:
        step = detail.step.decode("utf-8", "replace") if detail.step else None
        return make(code, detail.sys_errno, step, bool(detail.published),
                    filename)
    return make(code, None, None, code == _lib.FSAFE_ENOTDURABLE, filename)


def check(code: int, detail: Optional[_lib.Error] = None,
          filename: Optional[object] = None) -> int:
    """Return a non-negative result, raise for a negative one."""
    if code < 0:
        raise from_detail(code, detail, filename)
    return code


def errno_of(exc: BaseException) -> int:
    """The negative errno to hand back to the C library for an exception
    raised inside a callback."""
    if isinstance(exc, OSError) and exc.errno:
        return -exc.errno
    return -_errno.ECANCELED


__all__: Tuple[str, ...] = ("Error", "NotDurableError", "ConflictError")
