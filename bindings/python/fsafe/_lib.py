"""Loading libfsafe and declaring the C prototypes the binding calls.

Every other module gets the library through ``lib()`` so that loading
happens once, on first use, and a missing library fails with a message
that says where it was looked for.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import threading
from typing import Optional

#: Resolve paths relative to the current directory (AT_FDCWD on Linux).
AT_FDCWD = -100

FSAFE_ENOTDURABLE = -16001
FSAFE_ECONFLICT = -16002
FSAFE_FOREVER = 2**64 - 1

# Atomic write flags (fsafe.h).
NO_SYNC = 1 << 0
CREATE_ONLY = 1 << 1
NO_FOLLOW = 1 << 2
MKDIR = 1 << 3
NO_TMPFILE = 1 << 4

SWEEP_DRY_RUN = 1 << 0

LOCK_NO_WAIT = 1 << 0
LOCK_FORCE = 1 << 1
LOCK_KERNEL = 1 << 2

STORE_CREATE = 1 << 0
STORE_NO_SWEEP = 1 << 1
STORE_LOCK_KERNEL = 1 << 2
STORE_KEEP = 1
STORE_WRITE = 2
STORE_DELETE = 3

TOKEN_LEN = 73

INBOX_CREATE = 1 << 0
INBOX_KEEP_DONE = 1 << 1
INBOX_NO_INOTIFY = 1 << 2
INBOX_ID_LEN = 60

SPOOL_CREATE = 1 << 0
SPOOL_RDONLY = 1 << 1
SPOOL_FROM_CURSOR = 2**64 - 1

CHECKPOINT_NO_WAIT = 1 << 0
CHECKPOINT_CREATE = 1 << 1
CHECKPOINT_READ_ONLY = 1 << 2
CHECKPOINT_NO_LINK = 1 << 3
CHECKPOINT_FALLBACK = 1 << 0
CHECKPOINT_OTHER_REVISION = 1
CHECKPOINT_FELL_BACK = 2
CHECKPOINT_NAME_MAX = 255

c_mode_t = ctypes.c_uint  # mode_t is unsigned int on Linux


class Error(ctypes.Structure):
    _fields_ = [
        ("code", ctypes.c_int),
        ("sys_errno", ctypes.c_int),
        ("step", ctypes.c_char_p),
        ("published", ctypes.c_bool),
    ]


class WriteOpts(ctypes.Structure):
    _fields_ = [
        ("size", ctypes.c_size_t),
        ("flags", ctypes.c_uint),
        ("mode", c_mode_t),
        ("error", ctypes.POINTER(Error)),
        ("if_unchanged", ctypes.c_char_p),
    ]


class LockOpts(ctypes.Structure):
    _fields_ = [
        ("size", ctypes.c_size_t),
        ("flags", ctypes.c_uint),
        ("timeout_ms", ctypes.c_uint64),
        ("grace_ms", ctypes.c_uint64),
        ("error", ctypes.POINTER(Error)),
    ]


class StoreOpts(ctypes.Structure):
    _fields_ = [
        ("size", ctypes.c_size_t),
        ("flags", ctypes.c_uint),
        ("write_flags", ctypes.c_uint),
        ("mode", c_mode_t),
        ("sweep_older_than_ms", ctypes.c_uint64),
        ("lock_timeout_ms", ctypes.c_uint64),
        ("error", ctypes.POINTER(Error)),
    ]


class StoreEntry(ctypes.Structure):
    _fields_ = [
        ("key", ctypes.c_void_p),
        ("keylen", ctypes.c_size_t),
        ("version", ctypes.c_uint64),
        ("len", ctypes.c_uint64),
    ]


class InboxOpts(ctypes.Structure):
    _fields_ = [
        ("size", ctypes.c_size_t),
        ("flags", ctypes.c_uint),
        ("max_message", ctypes.c_uint64),
        ("write_flags", ctypes.c_uint),
        ("error", ctypes.POINTER(Error)),
    ]


class InboxEntry(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("state", ctypes.c_int),    # enum fsafe_inbox_state
        ("dir", ctypes.c_char_p),
        ("consumer", ctypes.c_char_p),
        ("size", ctypes.c_uint64),
        ("problem", ctypes.c_char_p),
    ]


class InboxRecovery(ctypes.Structure):
    _fields_ = [
        ("size", ctypes.c_size_t),
        ("returned", ctypes.c_uint),
        ("consumers", ctypes.c_uint),
        ("swept", ctypes.c_uint),
        ("unjudged", ctypes.c_uint),
    ]


class SpoolOpts(ctypes.Structure):
    _fields_ = [
        ("size", ctypes.c_size_t),
        ("flags", ctypes.c_uint),
        ("segment_size", ctypes.c_uint64),
        ("max_record", ctypes.c_uint32),
        ("error", ctypes.POINTER(Error)),
        ("damage", ctypes.c_void_p),  # fsafe_damage_fn, unused: NULL
        ("damage_arg", ctypes.c_void_p),
    ]


SPOOL_STAT_FIELDS = (
    "cursor", "first_seq", "next_seq", "segments", "bytes", "quarantined",
    "truncated", "dropped", "quarantined_bytes", "salvaged", "lost",
    "cursor_ahead", "quarantine_entries")


class SpoolStat(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t)] + \
        [(name, ctypes.c_uint64) for name in SPOOL_STAT_FIELDS]


class IoVec(ctypes.Structure):
    _fields_ = [
        ("iov_base", ctypes.c_void_p),
        ("iov_len", ctypes.c_size_t),
    ]


class CheckpointOpts(ctypes.Structure):
    _fields_ = [
        ("size", ctypes.c_size_t),
        ("flags", ctypes.c_uint),
        ("keep", ctypes.c_uint),
        ("revision", ctypes.c_char_p),
        ("mode", c_mode_t),
        ("error", ctypes.POINTER(Error)),
    ]


class CheckpointDamage(ctypes.Structure):
    _fields_ = [
        ("generation", ctypes.c_uint64),
        ("code", ctypes.c_int),
        ("file", ctypes.c_char * (CHECKPOINT_NAME_MAX + 1)),
    ]


class CheckpointLoadOpts(ctypes.Structure):
    _fields_ = [
        ("size", ctypes.c_size_t),
        ("flags", ctypes.c_uint),
        ("generation", ctypes.c_uint64),
        ("damage", ctypes.POINTER(CheckpointDamage)),
    ]


class CheckpointEvent(ctypes.Structure):
    _fields_ = [
        ("time_ms", ctypes.c_int64),
        ("pid", ctypes.c_int),      # pid_t is int on Linux
        ("kind", ctypes.c_int),     # an enum of small positive values
        ("generation", ctypes.c_uint64),
    ]


def new_opts(cls: type, **fields: object) -> ctypes.Structure:
    """An options struct with `size` set, as the *_INIT macros make it."""
    opts = cls(**fields)
    opts.size = ctypes.sizeof(cls)
    return opts


STORE_UPDATE_FN = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t,
    ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_size_t),
    ctypes.c_void_p)

INBOX_LIST_FN = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.POINTER(InboxEntry), ctypes.c_void_p)

CHECKPOINT_EVENT_FN = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.POINTER(CheckpointEvent), ctypes.c_void_p)

_P = ctypes.c_void_p
_INT = ctypes.c_int
_SZ = ctypes.c_size_t
_U64 = ctypes.c_uint64
_PU64 = ctypes.POINTER(ctypes.c_uint64)
_STR = ctypes.c_char_p

# name: (result type, argument types)
_PROTOTYPES = {
    "fsafe_version": (_STR, []),
    "fsafe_strerror": (_STR, [_INT]),
    "fsafe_is_staging_name": (ctypes.c_bool, [_STR]),
    "fsafe_token_get": (_INT, [_INT, _STR, ctypes.c_uint, ctypes.c_char_p]),
    "fsafe_write_fileat": (_INT, [_INT, _STR, _P, _SZ,
                                  ctypes.POINTER(WriteOpts)]),
    "fsafe_writer_open": (_INT, [_INT, _STR, ctypes.POINTER(WriteOpts),
                                 ctypes.POINTER(_P)]),
    "fsafe_writer_write": (_INT, [_P, _P, _SZ]),
    "fsafe_writer_fd": (_INT, [_P]),
    "fsafe_writer_commit": (_INT, [_P]),
    "fsafe_writer_abort": (None, [_P]),
    "fsafe_cancel_new": (_INT, [ctypes.POINTER(_P)]),
    "fsafe_cancel_request": (None, [_P]),
    "fsafe_cancel_requested": (ctypes.c_bool, [_P]),
    "fsafe_cancel_free": (None, [_P]),
    "fsafe_sweep": (_INT, [_INT, _STR, _U64, ctypes.c_uint, _P,
                           ctypes.POINTER(_P)]),
    "fsafe_sweep_result_count": (_SZ, [_P]),
    "fsafe_sweep_result_name": (_STR, [_P, _SZ]),
    "fsafe_sweep_result_free": (None, [_P]),
    "fsafe_lock_acquire": (_INT, [_INT, _STR, ctypes.POINTER(LockOpts),
                                  ctypes.POINTER(_P)]),
    "fsafe_lock_broken": (ctypes.c_uint, [_P]),
    "fsafe_lock_release": (_INT, [_P]),
    "fsafe_store_open": (_INT, [_INT, _STR, ctypes.POINTER(StoreOpts),
                                ctypes.POINTER(_P)]),
    "fsafe_store_swept": (ctypes.c_uint, [_P]),
    "fsafe_store_close": (None, [_P]),
    "fsafe_store_put": (_INT, [_P, _P, _SZ, _P, _SZ, _PU64]),
    "fsafe_store_put_if": (_INT, [_P, _P, _SZ, _P, _SZ, _U64, _PU64]),
    "fsafe_store_get": (_INT, [_P, _P, _SZ, ctypes.POINTER(_P),
                               ctypes.POINTER(_SZ), _PU64]),
    "fsafe_store_delete": (_INT, [_P, _P, _SZ]),
    "fsafe_store_update": (_INT, [_P, _P, _SZ, STORE_UPDATE_FN, _P, _PU64]),
    "fsafe_store_list": (_INT, [_P, _P, ctypes.POINTER(_P)]),
    "fsafe_store_iter_next": (_INT, [_P, ctypes.POINTER(StoreEntry)]),
    "fsafe_store_iter_free": (None, [_P]),
    "fsafe_inbox_open": (_INT, [_INT, _STR, ctypes.POINTER(InboxOpts),
                                ctypes.POINTER(_P)]),
    "fsafe_inbox_close": (None, [_P]),
    "fsafe_inbox_deliver": (_INT, [_P, _P, _SZ, ctypes.c_char_p]),
    "fsafe_inbox_consumer_open": (_INT, [_P, _STR, ctypes.POINTER(_P)]),
    "fsafe_inbox_consumer_close": (_INT, [_P]),
    "fsafe_inbox_take": (_INT, [_P, ctypes.POINTER(_P)]),
    "fsafe_inbox_wait": (_INT, [_P, _U64]),
    "fsafe_inbox_ack": (_INT, [_P, _STR]),
    "fsafe_inbox_release": (_INT, [_P, _STR]),
    "fsafe_inbox_release_all": (_INT, [_P]),
    "fsafe_inbox_quarantined": (ctypes.c_uint, [_P]),
    "fsafe_inbox_msg_id": (_STR, [_P]),
    "fsafe_inbox_msg_path": (_STR, [_P]),
    "fsafe_inbox_msg_data": (_P, [_P]),
    "fsafe_inbox_msg_len": (_SZ, [_P]),
    "fsafe_inbox_msg_seq": (_U64, [_P]),
    "fsafe_inbox_msg_free": (None, [_P]),
    "fsafe_inbox_list": (_INT, [_INT, _STR, INBOX_LIST_FN, _P]),
    "fsafe_inbox_recover": (_INT, [_P, _U64, ctypes.POINTER(InboxRecovery)]),
    "fsafe_spool_open": (_INT, [_INT, _STR, ctypes.POINTER(SpoolOpts),
                                ctypes.POINTER(_P)]),
    "fsafe_spool_close": (None, [_P]),
    "fsafe_spool_append": (_INT, [_P, ctypes.POINTER(IoVec), _SZ, _PU64]),
    "fsafe_spool_reader_open": (_INT, [_P, _U64, ctypes.POINTER(_P)]),
    "fsafe_spool_next": (_INT, [_P, ctypes.POINTER(_P), ctypes.POINTER(_SZ),
                                _PU64]),
    "fsafe_spool_reader_close": (None, [_P]),
    "fsafe_spool_ack": (_INT, [_P, _U64]),
    "fsafe_spool_stat": (_INT, [_P, ctypes.POINTER(SpoolStat)]),
    "fsafe_checkpoint_open": (_INT, [_INT, _STR,
                                     ctypes.POINTER(CheckpointOpts),
                                     ctypes.POINTER(_P)]),
    "fsafe_checkpoint_was_unclean": (ctypes.c_bool, [_P]),
    "fsafe_checkpoint_current": (_U64, [_P]),
    "fsafe_checkpoint_current_error": (_INT, [_P]),
    "fsafe_checkpoint_close": (_INT, [_P]),
    "fsafe_checkpoint_begin": (_INT, [_P, ctypes.POINTER(_P)]),
    "fsafe_checkpoint_add": (_INT, [_P, _STR, _P, _SZ]),
    "fsafe_checkpoint_add_stream": (_INT, [_P, _STR, ctypes.POINTER(_P)]),
    "fsafe_checkpoint_stream_write": (_INT, [_P, _P, _SZ]),
    "fsafe_checkpoint_stream_close": (_INT, [_P]),
    "fsafe_checkpoint_commit": (_INT, [_P, _PU64]),
    "fsafe_checkpoint_abort": (None, [_P]),
    "fsafe_checkpoint_load": (_INT, [_P, ctypes.POINTER(CheckpointLoadOpts),
                                     ctypes.POINTER(_P)]),
    "fsafe_checkpoint_snapshot_generation": (_U64, [_P]),
    "fsafe_checkpoint_snapshot_revision": (_STR, [_P]),
    "fsafe_checkpoint_snapshot_time_ms": (ctypes.c_int64, [_P]),
    "fsafe_checkpoint_snapshot_count": (_SZ, [_P]),
    "fsafe_checkpoint_snapshot_name": (_STR, [_P, _SZ]),
    "fsafe_checkpoint_snapshot_size": (_U64, [_P, _SZ]),
    "fsafe_checkpoint_snapshot_data": (_P, [_P, _SZ]),
    "fsafe_checkpoint_snapshot_free": (None, [_P]),
    "fsafe_checkpoint_generations": (_INT, [_P, _PU64, _SZ]),
    "fsafe_checkpoint_verify": (_INT, [_P, _U64,
                                       ctypes.POINTER(CheckpointDamage)]),
    "fsafe_checkpoint_event_name": (_STR, [_INT]),
    "fsafe_checkpoint_events": (_INT, [_INT, _STR, CHECKPOINT_EVENT_FN, _P,
                                       ctypes.POINTER(_SZ)]),
}

_lock = threading.Lock()
_lib: Optional[ctypes.CDLL] = None
_free = None


def _candidates() -> list:
    explicit = os.environ.get("FSAFE_LIBRARY")
    if explicit:
        # Named by the user (the build tree's libfsafe.so for tests): that
        # one or nothing, so a test never runs against another copy.
        return [explicit]
    found = ctypes.util.find_library("fsafe")
    return [name for name in (found, "libfsafe.so.0", "libfsafe.so") if name]


def _load() -> ctypes.CDLL:
    errors = []
    for name in _candidates():
        try:
            dll = ctypes.CDLL(name, use_errno=True)
            break
        except OSError as exc:
            errors.append(f"{name}: {exc}")
    else:
        raise ImportError(
            "fsafe: cannot load libfsafe (set FSAFE_LIBRARY to the path of "
            "libfsafe.so): " + "; ".join(errors))
    for fn_name, (restype, argtypes) in _PROTOTYPES.items():
        fn = getattr(dll, fn_name)
        fn.restype = restype
        fn.argtypes = argtypes
    return dll


def lib() -> ctypes.CDLL:
    """The loaded library, with every prototype declared."""
    global _lib
    if _lib is None:
        with _lock:
            if _lib is None:
                _lib = _load()
    return _lib


def free(ptr: int) -> None:
    """Release memory the library malloc'd (e.g. fsafe_store_get's copy)."""
    global _free
    if _free is None:
        fn = ctypes.CDLL(None).free
        fn.restype = None
        fn.argtypes = [ctypes.c_void_p]
        _free = fn
    _free(ptr)


def fspath(path: "os.PathLike[str] | str | bytes") -> bytes:
    """A path argument as the bytes the C library takes."""
    return os.fsencode(path)


def dirfd_of(dir_fd: Optional[int]) -> int:
    return AT_FDCWD if dir_fd is None else dir_fd


def as_buffer(data) -> "tuple[object, int]":
    """A bytes-like object as a pointer argument and its length, without a
    copy when the object is bytes or writable."""
    if isinstance(data, bytes):
        return data, len(data)
    view = memoryview(data)
    if not view.contiguous:
        raise BufferError("fsafe: a buffer must be contiguous")
    view = view.cast("B")
    if view.readonly:
        return bytes(view), len(view)
    return (ctypes.c_char * len(view)).from_buffer(view), len(view)
