"""fsafe: crash-safe file persistence, over the libfsafe C library.

After any crash a reader finds a file's whole old content or its whole new
content; leftovers carry a staging name that is_staging_name() recognises
and sweep() removes. Every failure is an OSError (fsafe.Error) carrying
errno and the failed step. The library is found as libfsafe.so.0 on the
system, or at the path in the FSAFE_LIBRARY environment variable.
"""

from ._checkpoint import Checkpoint, Snapshot
from ._checkpoint import events as checkpoint_events
from ._inbox import Consumer, Inbox, list_inbox
from ._errors import ConflictError, Error, NotDurableError
from ._lock import Lock
from ._spool import Spool, SpoolReader
from ._store import Store
from ._sweep import Cancel, is_staging_name, sweep
from ._write import (AtomicTextWriter, AtomicWriter, open_atomic, token,
                     write_bytes, write_text)
from . import _lib

__all__ = [
    "AtomicTextWriter", "AtomicWriter", "Cancel", "Checkpoint",
    "ConflictError", "Consumer", "Error", "Inbox", "Lock", "NotDurableError",
    "Snapshot", "Spool", "SpoolReader", "Store", "checkpoint_events",
    "is_staging_name", "library_version", "list_inbox", "open_atomic", "sweep",
    "token", "write_bytes", "write_text",
]

__version__ = "0.1.0"


def library_version() -> str:
    """The version of the loaded libfsafe ("MAJOR.MINOR.PATCH")."""
    return _lib.lib().fsafe_version().decode("ascii")
