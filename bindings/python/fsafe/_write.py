"""Atomic writes: the one-shot write and the managed writer.

After any crash a reader finds the whole old content or the whole new
content at the target; the staging name contract is fsafe.is_staging_name.
"""

from __future__ import annotations

import ctypes
import io
import os
import threading
from typing import Optional, Union

from . import _errors, _lib

PathArg = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]


def _write_flags(*, create_only: bool, sync: bool, follow_symlinks: bool,
                 mkdir: bool, tmpfile: bool = True) -> int:
    flags = 0
    if create_only:
        flags |= _lib.CREATE_ONLY
    if not sync:
        flags |= _lib.NO_SYNC
    if not follow_symlinks:
        flags |= _lib.NO_FOLLOW
    if mkdir:
        flags |= _lib.MKDIR
    if not tmpfile:
        flags |= _lib.NO_TMPFILE
    return flags


def _opts(flags: int, mode: Optional[int], if_unchanged: Optional[str],
          detail: _lib.Error) -> _lib.WriteOpts:
    token = None
    if if_unchanged is not None:
        token = if_unchanged.encode("ascii")
    return _lib.new_opts(_lib.WriteOpts, flags=flags, mode=mode or 0,
                         error=ctypes.pointer(detail), if_unchanged=token)


def write_bytes(path: PathArg, data: bytes, *, mode: Optional[int] = None,
                create_only: bool = False, sync: bool = True,
                follow_symlinks: bool = True, mkdir: bool = False,
                if_unchanged: Optional[str] = None,
                dir_fd: Optional[int] = None) -> None:
    """Replace (or create) `path` with `data`, atomically and durably.

    `mode` gives a new file's permissions (before umask; default 0o666);
    an existing target keeps its own. `create_only` refuses an existing
    target (FileExistsError). `sync=False` skips every sync (caches):
    still atomic against a crash of the process, not against a power cut.
    `follow_symlinks=False` replaces a symbolic link at `path` itself.
    `mkdir` creates missing parent directories. `if_unchanged` takes a
    token from fsafe.token(): publish only if the target is still that
    file, else ConflictError. `dir_fd` resolves `path` relative to it.

    Raises NotDurableError when the content was published but its sync
    failed; any other error leaves the target unchanged.
    """
    buf, size = _lib.as_buffer(data)
    detail = _lib.Error()
    opts = _opts(_write_flags(create_only=create_only, sync=sync,
                              follow_symlinks=follow_symlinks, mkdir=mkdir),
                 mode, if_unchanged, detail)
    rc = _lib.lib().fsafe_write_fileat(_lib.dirfd_of(dir_fd),
                                       _lib.fspath(path), buf, size,
                                       ctypes.byref(opts))
    _errors.check(rc, detail, path)


def write_text(path: PathArg, text: str, *, encoding: str = "utf-8",
               errors: str = "strict", **kwargs) -> None:
    """write_bytes() of `text` encoded; takes write_bytes()'s keywords."""
    write_bytes(path, text.encode(encoding, errors), **kwargs)


def token(path: PathArg, *, follow_symlinks: bool = True,
          dir_fd: Optional[int] = None) -> str:
    """The identity of the file a write of `path` would replace, for the
    `if_unchanged` argument. Take it before reading the file.
    FileNotFoundError when there is no such file."""
    out = ctypes.create_string_buffer(_lib.TOKEN_LEN)
    flags = 0 if follow_symlinks else _lib.NO_FOLLOW
    rc = _lib.lib().fsafe_token_get(_lib.dirfd_of(dir_fd), _lib.fspath(path),
                                    flags, out)
    _errors.check(rc, None, path)
    return out.value.decode("ascii")


class _Block:
    """Ends a ``with`` block: commit when it ended normally, abort on an
    exception, then close the file object (_close_file)."""

    def commit(self) -> None:
        raise NotImplementedError

    def abort(self) -> None:
        raise NotImplementedError

    def _close_file(self) -> None:
        raise NotImplementedError

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            if exc_type is None:
                self.commit()
            else:
                self.abort()
        finally:
            self._close_file()


class AtomicWriter(_Block, io.RawIOBase):
    """A binary file whose content replaces its target only on commit().

    Writes go straight to the staging file (no buffering in Python).
    Leaving a ``with`` block normally commits; an exception aborts, and so
    does close() or garbage collection of an uncommitted writer.
    """

    def __init__(self, path: PathArg, *, flags: int, mode: Optional[int],
                 if_unchanged: Optional[str], dir_fd: Optional[int]) -> None:
        super().__init__()
        self.name = path
        # Every use of the handle holds it: a commit or abort from another
        # thread waits for a write in progress instead of freeing the
        # handle under it, and a second commit finds it gone.
        self._mutex = threading.Lock()
        # The handle keeps a pointer to the detail: both live as long as it.
        self._detail = _lib.Error()
        self._opts = _opts(flags, mode, if_unchanged, self._detail)
        handle = ctypes.c_void_p()
        rc = _lib.lib().fsafe_writer_open(_lib.dirfd_of(dir_fd),
                                          _lib.fspath(path),
                                          ctypes.byref(self._opts),
                                          ctypes.byref(handle))
        _errors.check(rc, self._detail, path)
        self._w: Optional[int] = handle.value

    def _handle(self) -> int:
        if self._w is None:
            raise ValueError("I/O operation on a committed or aborted writer")
        return self._w

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:  # type: ignore[override]
        buf, size = _lib.as_buffer(data)
        with self._mutex:
            w = self._handle()
            self._detail.code = 0
            rc = _lib.lib().fsafe_writer_write(w, buf, size)
            _errors.check(rc, self._detail, self.name)
        return size

    def fileno(self) -> int:
        """The staging file's descriptor (write at its offset; never close
        it)."""
        with self._mutex:
            return _lib.lib().fsafe_writer_fd(self._handle())

    def commit(self) -> None:
        """Sync and publish. The writer is finished whatever the outcome."""
        with self._mutex:
            w = self._handle()
            self._w = None
            self._detail.code = 0
            rc = _lib.lib().fsafe_writer_commit(w)
            _errors.check(rc, self._detail, self.name)

    def abort(self) -> None:
        """Discard: the target is untouched and no staging file remains."""
        with self._mutex:
            w, self._w = self._w, None
            if w is not None:
                _lib.lib().fsafe_writer_abort(w)

    def close(self) -> None:
        self.abort()
        super().close()

    def _close_file(self) -> None:
        io.RawIOBase.close(self)  # already committed or aborted


class AtomicTextWriter(_Block, io.TextIOWrapper):
    """The text mode of open_atomic(): an AtomicWriter under a text layer
    that passes every write through at once, so nothing is left to flush
    into an aborted writer."""

    buffer: AtomicWriter

    def commit(self) -> None:
        self.flush()
        self.buffer.commit()

    def abort(self) -> None:
        self.buffer.abort()

    def _close_file(self) -> None:
        self.close()


def open_atomic(path: PathArg, mode: str = "wb", *,
                encoding: Optional[str] = None, errors: Optional[str] = None,
                newline: Optional[str] = None,
                permissions: Optional[int] = None,
                create_only: bool = False, sync: bool = True,
                follow_symlinks: bool = True, mkdir: bool = False,
                tmpfile: bool = True, if_unchanged: Optional[str] = None,
                dir_fd: Optional[int] = None):
    """Start replacing `path`; use as ``with open_atomic(p, "w") as f:``.

    `mode` is "wb" (an AtomicWriter) or "w" (an AtomicTextWriter, with
    `encoding` defaulting to UTF-8). Nothing is visible at the target until
    the block ends without an exception (or commit() is called); an
    exception, close() or abort() discards the new content. `permissions`
    is a new file's mode bits; `tmpfile=False` stages under a visible
    staging name instead of an O_TMPFILE; the other keywords are those of
    write_bytes().
    """
    if mode not in ("w", "wb", "wt"):
        raise ValueError(f"open_atomic: mode must be 'w' or 'wb', not {mode!r}")
    if mode == "wb" and (encoding or errors or newline is not None):
        raise ValueError("open_atomic: binary mode takes no encoding, errors "
                         "or newline")
    flags = _write_flags(create_only=create_only, sync=sync,
                         follow_symlinks=follow_symlinks, mkdir=mkdir,
                         tmpfile=tmpfile)
    raw = AtomicWriter(path, flags=flags, mode=permissions,
                       if_unchanged=if_unchanged, dir_fd=dir_fd)
    if mode == "wb":
        return raw
    return AtomicTextWriter(raw, encoding=encoding or "utf-8", errors=errors,
                            newline=newline, write_through=True)
