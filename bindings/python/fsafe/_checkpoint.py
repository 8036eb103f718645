"""The checkpoint (fsafe/checkpoint.h): a set of files saved and loaded as
one generation."""

from __future__ import annotations

import ctypes
import os
import threading
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Dict, Iterator, List, NamedTuple, Optional, Union

from . import _errors, _lib
from ._handle import Handle

#: A file's content for save(): its bytes, or the path of a file to copy.
Content = Union[bytes, bytearray, memoryview, str, "os.PathLike[str]"]

_CHUNK = 1 << 20


def _time(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc)


class Event(NamedTuple):
    """One record of the audit trail."""

    time: datetime
    pid: int
    #: "saved", "loaded", "recovered", "removed", "quarantined", "repaired"
    kind: str
    generation: int


class Snapshot(Mapping):
    """A loaded generation: a read-only mapping of file name -> bytes."""

    def __init__(self, files: Dict[str, bytes], generation: int,
                 revision: str, time: datetime, warnings: int) -> None:
        self._files = files
        self.generation = generation
        #: The writer revision that saved it.
        self.revision = revision
        #: When it was committed (UTC).
        self.time = time
        #: Saved by another revision than the handle's.
        self.other_revision = bool(warnings & _lib.CHECKPOINT_OTHER_REVISION)
        #: The requested generation was damaged: an older one was loaded.
        self.fell_back = bool(warnings & _lib.CHECKPOINT_FELL_BACK)

    def __getitem__(self, name: str) -> bytes:
        return self._files[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._files)

    def __len__(self) -> int:
        return len(self._files)


def _damage_error(rc: int, detail: _lib.Error,
                  damage: _lib.CheckpointDamage, path) -> _errors.Error:
    exc = _errors.from_detail(rc, detail, path)
    # Which generation and file failed a check, when the library said.
    exc.damage_generation = damage.generation
    exc.damage_file = os.fsdecode(damage.file) if damage.code else None
    return exc


class Checkpoint(Handle):
    """A directory of generations, each a set of files that is loaded
    whole or not at all::

        with fsafe.Checkpoint("state", create=True, revision="2.1") as cp:
            gen = cp.save({"manifest.json": data, "model.bin": "/tmp/m"})
            snap = cp.load()          # snap["manifest.json"] == data

    One writer process at a time holds the directory's lock: the open
    waits for it unless `wait=False` (BlockingIOError). `read_only`
    inspects without the lock (save fails with EROFS). `keep` is the
    number of generations kept (default 2); `link=False` writes every
    file even when it equals the previous generation's.
    """

    def __init__(self, path: "os.PathLike[str] | str | bytes",
                 create: bool = False, *, revision: Optional[str] = None,
                 keep: int = 0, wait: bool = True, read_only: bool = False,
                 link: bool = True, mode: Optional[int] = None,
                 dir_fd: Optional[int] = None) -> None:
        self.path = path
        self._dir_fd = dir_fd
        self._mutex = threading.RLock()
        flags = (_lib.CHECKPOINT_CREATE if create else 0) | \
            (0 if wait else _lib.CHECKPOINT_NO_WAIT) | \
            (_lib.CHECKPOINT_READ_ONLY if read_only else 0) | \
            (0 if link else _lib.CHECKPOINT_NO_LINK)
        # The handle keeps pointers to the detail and the revision: both
        # live as long as this object.
        self._detail = _lib.Error()
        self._revision = None if revision is None else revision.encode()
        self._opts = _lib.new_opts(
            _lib.CheckpointOpts, flags=flags, keep=keep,
            revision=self._revision, mode=mode or 0,
            error=ctypes.pointer(self._detail))
        handle = ctypes.c_void_p()
        rc = _lib.lib().fsafe_checkpoint_open(_lib.dirfd_of(dir_fd),
                                              _lib.fspath(path),
                                              ctypes.byref(self._opts),
                                              ctypes.byref(handle))
        _errors.check(rc, self._detail, path)
        self._h = handle.value

    _WHAT = "fsafe.Checkpoint: the checkpoint"

    def close(self) -> None:
        """Clean close: the next open finds no unclean shutdown."""
        with self._mutex:
            cp, self._h = self._h, None
            if cp is not None:
                self._run(_lib.lib().fsafe_checkpoint_close, cp)

    @property
    def was_unclean(self) -> bool:
        """The previous writer did not close (it crashed)."""
        with self._mutex:
            return bool(_lib.lib().fsafe_checkpoint_was_unclean(
                self._handle()))

    @property
    def current(self) -> int:
        """The current generation's number, 0 when there is none."""
        with self._mutex:
            return _lib.lib().fsafe_checkpoint_current(self._handle())

    # ---- saving -----------------------------------------------------------

    def save(self, files: "Mapping[str, Content]") -> int:
        """Save `files` (name -> bytes, or the path of a file to copy) as
        one new generation; return its number. On an error nothing
        changed (NotDurableError: it was published, not synced)."""
        lib = _lib.lib()
        with self._mutex:
            tx = ctypes.c_void_p()
            self._call(lib.fsafe_checkpoint_begin, ctypes.byref(tx))
            # The library reads the buffers at commit: keep them alive.
            keep: List[object] = []
            try:
                for name, content in files.items():
                    self._add(tx, name, content, keep)
            except BaseException:
                lib.fsafe_checkpoint_abort(tx)
                raise
            generation = ctypes.c_uint64()
            self._run(lib.fsafe_checkpoint_commit, tx,
                      ctypes.byref(generation))
            return generation.value

    def _add(self, tx: ctypes.c_void_p, name: str, content: Content,
             keep: List[object]) -> None:
        lib = _lib.lib()
        cname = os.fsencode(name)
        self._detail.code = 0
        if isinstance(content, (str, os.PathLike)):
            stream = ctypes.c_void_p()
            _errors.check(lib.fsafe_checkpoint_add_stream(
                tx, cname, ctypes.byref(stream)), self._detail, name)
            self._copy(stream, content)
            return
        buf, size = _lib.as_buffer(content)
        keep.append(buf)
        _errors.check(lib.fsafe_checkpoint_add(tx, cname, buf, size),
                      self._detail, name)

    def _copy(self, stream: ctypes.c_void_p, source) -> None:
        """Stream the file `source` into `stream`, which it closes."""
        lib = _lib.lib()
        rc = 0
        try:
            with open(source, "rb") as f:
                while rc == 0:
                    chunk = f.read(_CHUNK)
                    if not chunk:
                        break
                    self._detail.code = 0
                    rc = lib.fsafe_checkpoint_stream_write(stream, chunk,
                                                           len(chunk))
        finally:
            if rc == 0:
                self._detail.code = 0
            rc2 = lib.fsafe_checkpoint_stream_close(stream)
        _errors.check(rc or rc2, self._detail, source)

    # ---- loading ----------------------------------------------------------

    def load(self, generation: int = 0, *,
             fallback: bool = False) -> Snapshot:
        """The files of `generation` (0: the current one), every byte
        checked. FileNotFoundError when there is none; an Error with errno
        EBADMSG when a file is damaged (its `damage_generation` and
        `damage_file` say which); `fallback` loads the newest intact older
        generation instead (the snapshot's `fell_back` is then True)."""
        lib = _lib.lib()
        damage = _lib.CheckpointDamage()
        opts = _lib.new_opts(
            _lib.CheckpointLoadOpts, generation=generation,
            flags=_lib.CHECKPOINT_FALLBACK if fallback else 0,
            damage=ctypes.pointer(damage))
        snap = ctypes.c_void_p()
        with self._mutex:
            self._detail.code = 0
            rc = lib.fsafe_checkpoint_load(self._handle(), ctypes.byref(opts),
                                           ctypes.byref(snap))
            if rc < 0:
                raise _damage_error(rc, self._detail, damage, self.path)
        try:
            files = {}
            for i in range(lib.fsafe_checkpoint_snapshot_count(snap)):
                name = os.fsdecode(lib.fsafe_checkpoint_snapshot_name(snap, i))
                files[name] = ctypes.string_at(
                    lib.fsafe_checkpoint_snapshot_data(snap, i),
                    lib.fsafe_checkpoint_snapshot_size(snap, i))
            return Snapshot(
                files, lib.fsafe_checkpoint_snapshot_generation(snap),
                lib.fsafe_checkpoint_snapshot_revision(snap).decode(
                    "utf-8", "replace"),
                _time(lib.fsafe_checkpoint_snapshot_time_ms(snap)), rc)
        finally:
            lib.fsafe_checkpoint_snapshot_free(snap)

    def generations(self) -> List[int]:
        """The generations load can use, oldest first."""
        lib = _lib.lib()
        with self._mutex:
            size = 0
            while True:
                seqs = (ctypes.c_uint64 * max(size, 1))()
                n = self._call(lib.fsafe_checkpoint_generations, seqs, size)
                if n <= size:
                    return list(seqs[:n])
                size = n

    def verify(self, generation: int = 0) -> None:
        """Check every file of `generation` (0: current); raise as load."""
        damage = _lib.CheckpointDamage()
        with self._mutex:
            self._detail.code = 0
            rc = _lib.lib().fsafe_checkpoint_verify(
                self._handle(), generation, ctypes.byref(damage))
            if rc < 0:
                raise _damage_error(rc, self._detail, damage, self.path)

    def events(self) -> Iterator[Event]:
        """The audit trail of this checkpoint (see events())."""
        return events(self.path, dir_fd=self._dir_fd)


def events(path: "os.PathLike[str] | str | bytes", *,
           dir_fd: Optional[int] = None) -> Iterator[Event]:
    """The intact events of the checkpoint in `path`, oldest first (a
    damaged record, a torn tail, is skipped). Reads without the lock;
    FileNotFoundError when there is no log."""
    lib = _lib.lib()
    found: List[Event] = []

    def collect(ev, _arg):
        e = ev.contents
        name = lib.fsafe_checkpoint_event_name(e.kind)
        found.append(Event(_time(e.time_ms), e.pid,
                           name.decode() if name else str(e.kind),
                           e.generation))
        return 0

    callback = _lib.CHECKPOINT_EVENT_FN(collect)
    damaged = ctypes.c_size_t()
    rc = lib.fsafe_checkpoint_events(_lib.dirfd_of(dir_fd), _lib.fspath(path),
                                     callback, None, ctypes.byref(damaged))
    _errors.check(rc, None, path)
    return iter(found)
