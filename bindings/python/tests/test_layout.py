"""The ctypes structs match the C headers, field by field."""

import ctypes
import json
import os
import subprocess

import pytest

from fsafe import _lib


def test_struct_layouts():
    probe = os.environ.get("FSAFE_LAYOUT_PROBE")
    if not probe:
        pytest.skip("SKIP: FSAFE_LAYOUT_PROBE (the built layout program) "
                    "is not set; the CTest test sets it")
    want = json.loads(subprocess.run([probe], check=True, capture_output=True,
                                     text=True).stdout)
    assert want, "the probe printed no struct"
    for name, fields in want.items():
        cls = getattr(_lib, name)
        got = {f: getattr(cls, f).offset for f in fields if f != "sizeof"}
        got["sizeof"] = ctypes.sizeof(cls)
        assert got == fields, name
        # Every C field is declared, none more ("size" is the first).
        declared = [f for f, _ in cls._fields_]
        c_fields = [f for f in fields if f != "sizeof"]
        expected = c_fields if name in ("Error", "StoreEntry",
                                        "CheckpointDamage",
                                        "CheckpointEvent", "InboxEntry",
                                        "IoVec") \
            else ["size"] + c_fields
        assert declared == expected, name
