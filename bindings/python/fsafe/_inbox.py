"""The inbox (fsafe/inbox.h): producers deliver messages into a directory,
consumers take, acknowledge or release them."""

from __future__ import annotations

import ctypes
import errno
import os
import threading
import weakref
from datetime import timedelta
from typing import List, NamedTuple, Optional, Union

from . import _errors, _lib
from ._handle import Child, Handle
from ._sweep import to_ms

_STATES = ("new", "claimed", "quarantined", "stray")


class Message(NamedTuple):
    """A taken message: its id, payload, the producer's sequence number
    and its path relative to the inbox directory (claimed/...)."""

    id: str
    data: bytes
    seq: int
    path: str


class Entry(NamedTuple):
    """One entry of list_inbox()."""

    name: str
    #: "new", "claimed", "quarantined" or "stray"
    state: str
    #: Its directory in the inbox: "new", "claimed/n-NAME", "quarantine".
    dir: str
    #: The named consumer holding a claim, else None.
    consumer: Optional[str]
    size: int
    #: Why a stray is not a message, else None.
    problem: Optional[str]


class Recovery(NamedTuple):
    """What recover() did."""

    returned: int   # claims of dead consumers returned to new/
    consumers: int  # dead consumers' claim directories removed
    swept: int      # abandoned staging files removed
    unjudged: int   # process consumers left alone (alive or unknown)


def _str(raw: Optional[bytes]) -> Optional[str]:
    return None if raw is None else os.fsdecode(raw)


def list_inbox(path: "os.PathLike[str] | str | bytes", *,
               dir_fd: Optional[int] = None) -> List[Entry]:
    """Every message waiting, every claim and every quarantined file of
    the inbox in `path`, in directory order; reads only."""
    found: List[Entry] = []

    def collect(entry, _arg):
        e = entry.contents
        state = _STATES[e.state] if 0 <= e.state < len(_STATES) \
            else str(e.state)
        found.append(Entry(_str(e.name), state, _str(e.dir),
                           _str(e.consumer), e.size, _str(e.problem)))
        return 0

    callback = _lib.INBOX_LIST_FN(collect)
    rc = _lib.lib().fsafe_inbox_list(_lib.dirfd_of(dir_fd),
                                     _lib.fspath(path), callback, None)
    _errors.check(rc, None, path)
    return found


class Inbox(Handle):
    """A directory inbox::

        with fsafe.Inbox("jobs", create=True) as ib:
            ib.deliver(b"payload")            # durable when it returns
            with ib.consumer() as c:
                msg = c.take()                # None when there is none
                work(msg.data)
                c.ack(msg)

    `keep_done` moves acknowledged messages to done/ instead of removing
    them; `inotify=False` makes wait() poll; `max_message` bounds a
    payload in bytes (0: the library's 64 MiB).
    """

    def __init__(self, path: "os.PathLike[str] | str | bytes",
                 create: bool = False, *, keep_done: bool = False,
                 inotify: bool = True, max_message: int = 0,
                 dir_fd: Optional[int] = None) -> None:
        self.path = path
        self._dir_fd = dir_fd
        self._mutex = threading.RLock()
        self._consumers: "weakref.WeakSet[Consumer]" = weakref.WeakSet()
        flags = (_lib.INBOX_CREATE if create else 0) | \
            (_lib.INBOX_KEEP_DONE if keep_done else 0) | \
            (0 if inotify else _lib.INBOX_NO_INOTIFY)
        self._detail = _lib.Error()
        self._opts = _lib.new_opts(_lib.InboxOpts, flags=flags,
                                   max_message=max_message,
                                   error=ctypes.pointer(self._detail))
        handle = ctypes.c_void_p()
        rc = _lib.lib().fsafe_inbox_open(_lib.dirfd_of(dir_fd),
                                         _lib.fspath(path),
                                         ctypes.byref(self._opts),
                                         ctypes.byref(handle))
        _errors.check(rc, self._detail, path)
        self._h = handle.value

    _WHAT = "fsafe.Inbox: the inbox"

    def close(self) -> None:
        """Close every consumer still open on it, then the inbox."""
        with self._mutex:
            for consumer in list(self._consumers):
                consumer.close()
            ib, self._h = self._h, None
            if ib is not None:
                _lib.lib().fsafe_inbox_close(ib)

    def deliver(self, data) -> str:
        """Deliver `data` (bytes-like) durably; return the message's id.
        NotDurableError: delivered, durability unknown."""
        buf, size = _lib.as_buffer(data)
        msg_id = ctypes.create_string_buffer(_lib.INBOX_ID_LEN + 1)
        with self._mutex:
            self._call(_lib.lib().fsafe_inbox_deliver, buf, size, msg_id)
        return msg_id.value.decode("ascii")

    def consumer(self, name: Optional[str] = None) -> "Consumer":
        """A consumer: of this process (None; its claims return to new/
        when it closes or dies) or named (its claims stay across
        processes until acknowledged or released)."""
        return Consumer(self, name)

    def recover(self, stage_age: Union[timedelta, float] =
                timedelta(hours=1)) -> Recovery:
        """Return dead process consumers' claims to new/ and sweep staging
        files older than `stage_age`."""
        out = _lib.new_opts(_lib.InboxRecovery)
        with self._mutex:
            self._call(_lib.lib().fsafe_inbox_recover, to_ms(stage_age),
                       ctypes.byref(out))
        return Recovery(out.returned, out.consumers, out.swept, out.unjudged)

    def list(self) -> List[Entry]:
        """list_inbox() of this inbox."""
        self._handle()
        return list_inbox(self.path, dir_fd=self._dir_fd)


class Consumer(Child):
    """Takes messages from an inbox; close() (or the with block's end)
    returns a process consumer's unacknowledged claims to new/."""

    def __init__(self, inbox: Inbox, name: Optional[str]) -> None:
        self._owner = self._inbox = inbox
        self.name = name
        # Held through wait(), which runs without the inbox's mutex, so
        # that a close() from another thread cannot free the handle under
        # it. Taken after the inbox's mutex, never before (wait() takes
        # only this one).
        self._busy = threading.Lock()
        handle = ctypes.c_void_p()
        with inbox._mutex:
            inbox._call(_lib.lib().fsafe_inbox_consumer_open,
                        None if name is None else name.encode(),
                        ctypes.byref(handle))
            self._h = handle.value
            inbox._consumers.add(self)

    _WHAT = "fsafe.Inbox consumer: the consumer"

    def _locked(self, fn, *args) -> int:
        with self._inbox._mutex:
            return self._call(fn, *args)

    def take(self) -> Optional[Message]:
        """Claim the oldest message this consumer can win; None when there
        is none to claim."""
        lib = _lib.lib()
        msg = ctypes.c_void_p()
        ib = self._inbox
        with ib._mutex:
            ib._detail.code = 0
            rc = lib.fsafe_inbox_take(self._handle(), ctypes.byref(msg))
            if rc == -errno.EAGAIN:
                return None
            _errors.check(rc, ib._detail, ib.path)
        try:
            return Message(
                lib.fsafe_inbox_msg_id(msg).decode("ascii"),
                ctypes.string_at(lib.fsafe_inbox_msg_data(msg),
                                 lib.fsafe_inbox_msg_len(msg)),
                lib.fsafe_inbox_msg_seq(msg),
                os.fsdecode(lib.fsafe_inbox_msg_path(msg)))
        finally:
            lib.fsafe_inbox_msg_free(msg)

    def wait(self, timeout: Union[timedelta, float, None] = None) -> bool:
        """Block until there may be something to take (True) or `timeout`
        (a timedelta or seconds; None: no limit) passed (False)."""
        ms = _lib.FSAFE_FOREVER if timeout is None else to_ms(timeout)
        ib = self._inbox
        # Not under the inbox's mutex: other threads deliver meanwhile.
        with self._busy:
            rc = _lib.lib().fsafe_inbox_wait(self._handle(), ms)
        if rc == -errno.ETIMEDOUT:
            return False
        _errors.check(rc, None, ib.path)
        return True

    @staticmethod
    def _id(msg: Union[Message, str]) -> bytes:
        return (msg.id if isinstance(msg, Message) else msg).encode("ascii")

    def ack(self, msg: Union[Message, str]) -> None:
        """Acknowledge a claimed message (or its id), durably."""
        self._locked(_lib.lib().fsafe_inbox_ack, self._id(msg))

    def release(self, msg: Union[Message, str]) -> None:
        """Return a claimed message (or its id) to new/, durably."""
        self._locked(_lib.lib().fsafe_inbox_release, self._id(msg))

    def release_all(self) -> int:
        """Return every claim of this consumer to new/; how many."""
        return self._locked(_lib.lib().fsafe_inbox_release_all)

    @property
    def quarantined(self) -> int:
        """Files this consumer's takes moved to quarantine."""
        with self._inbox._mutex:
            return _lib.lib().fsafe_inbox_quarantined(self._handle())

    def close(self) -> None:
        ib = self._inbox
        with ib._mutex, self._busy:
            c, self._h = self._h, None
            if c is not None:
                ib._consumers.discard(self)
                self._run(_lib.lib().fsafe_inbox_consumer_close, c)
