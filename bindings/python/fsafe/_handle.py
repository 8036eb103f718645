"""What every object that owns a libfsafe handle shares: the closed guard,
the one door for errors (the handle's recorded step), and the
context-manager and finaliser shape."""

from __future__ import annotations

from typing import Any, Callable, Optional

from . import _errors


class Handle:
    """Owns the C handle `_h` (None once closed). Subclasses set `_WHAT`
    ("fsafe.Store: the store"), and provide `_detail` (the fsafe_error the
    handle fills), `path` (what errors name) and close(). A `with` block
    closes; so does garbage collection of an object left open."""

    _WHAT = "fsafe: the handle"
    _h: Optional[int] = None

    def _handle(self) -> int:
        h = self._h
        if h is None:
            raise ValueError(f"{self._WHAT} is closed")
        return h

    def _run(self, fn: Callable[..., int], *args: Any) -> int:
        """fn(*args); a failure is raised with the step the handle
        recorded. The caller holds the owner's mutex."""
        self._detail.code = 0
        return _errors.check(fn(*args), self._detail, self.path)

    def _call(self, fn: Callable[..., int], *args: Any) -> int:
        """_run() of a function whose first argument is this handle."""
        return self._run(fn, self._handle(), *args)

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "_h", None) is None:
            return
        try:
            self.close()
        except Exception:  # nothing can be raised from a finaliser
            pass


class Child(Handle):
    """A handle made from another (a consumer of an inbox, a reader of a
    spool): it shares its owner's mutex, error detail and path."""

    _owner: Any

    @property
    def _detail(self):
        return self._owner._detail

    @property
    def path(self):
        return self._owner.path
