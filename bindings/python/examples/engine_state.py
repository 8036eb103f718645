#!/usr/bin/env python3
"""An engine's state kept with fsafe.Checkpoint.

The engine persists three files that only make sense together:

    manifest.json                what the engine is and what it has seen
    recognizers.jsonl            one recognizer per line
    discovery_candidates.jsonl   one candidate per line

Saving them one by one, a crash between two writes leaves a manifest that
names recognizers the next start cannot find. A checkpoint saves the three
as one generation: after a crash at any point the engine loads the old set
or the new one, each file byte for byte as it was saved.

    engine_state.py DIR save MANIFEST RECOGNIZERS CANDIDATES
    engine_state.py DIR load OUTDIR
    engine_state.py DIR events
"""

from __future__ import annotations

import os
import sys
import warnings
from typing import Dict, Iterator, Optional

import fsafe

#: The running engine's revision, stored with every save.
REVISION = "engine-state/1"

FILES = ("manifest.json", "recognizers.jsonl", "discovery_candidates.jsonl")


class RevisionWarning(UserWarning):
    """The state was saved by another revision of the engine."""


class EngineState:
    """The three state files of an engine in the checkpoint `directory`."""

    def __init__(self, directory: "os.PathLike[str] | str",
                 revision: str = REVISION) -> None:
        self.directory = directory
        self.revision = revision

    def _open(self) -> fsafe.Checkpoint:
        return fsafe.Checkpoint(self.directory, create=True,
                                revision=self.revision)

    def save(self, files: Dict[str, "bytes | os.PathLike[str] | str"]) -> int:
        """Save the three files (bytes, or paths to copy) as one
        generation; return its number."""
        missing = set(FILES) - set(files)
        if missing or len(files) != len(FILES):
            raise ValueError("engine state: exactly these files: "
                             + ", ".join(FILES))
        with self._open() as cp:
            return cp.save(files)

    def load(self) -> Optional[fsafe.Snapshot]:
        """The saved set, None when nothing was saved yet. Warns
        (RevisionWarning) when another revision saved it."""
        with self._open() as cp:
            try:
                snap = cp.load()
            except FileNotFoundError:
                return None
        if snap.other_revision:
            warnings.warn(f"engine state generation {snap.generation} was "
                          f"saved by {snap.revision!r}, this is "
                          f"{self.revision!r}", RevisionWarning,
                          stacklevel=2)
        return snap

    def reboots(self) -> Iterator[str]:
        """The event trail, one line per event: every start after a crash
        ("recovered") between the saves and loads around it."""
        for ev in fsafe.checkpoint_events(self.directory):
            mark = "  <- restart after a crash" if ev.kind == "recovered" \
                else ""
            yield (f"{ev.time.isoformat(timespec='milliseconds')} "
                   f"pid {ev.pid} {ev.kind} generation {ev.generation}"
                   f"{mark}")


def main(argv: list) -> int:
    command = argv[2] if len(argv) > 2 else ""
    state = EngineState(argv[1]) if command else None
    if command == "save" and len(argv) == 6:
        gen = state.save(dict(zip(FILES, argv[3:6])))
        print(f"saved generation {gen}")
    elif command == "load" and len(argv) == 4:
        snap = state.load()
        if snap is None:
            print("no state saved", file=sys.stderr)
            return 1
        for name in FILES:
            fsafe.write_bytes(os.path.join(argv[3], name), snap[name])
        print(f"loaded generation {snap.generation} ({snap.revision}, "
              f"{snap.time.isoformat(timespec='seconds')})")
    elif command == "events" and len(argv) == 3:
        for line in state.reboots():
            print(line)
    else:
        print("usage:\n" + "\n".join(__doc__.strip().splitlines()[-3:]),
              file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
