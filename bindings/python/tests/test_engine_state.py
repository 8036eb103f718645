"""The engine-state example: three files saved and loaded as one set, also
when the saving process is SIGKILLed at random points."""

import importlib.util
import json
import os
import random
import select
import signal
import warnings

import pytest

from conftest import PACKAGE_ROOT, run_child

EXAMPLE = os.path.join(PACKAGE_ROOT, "examples", "engine_state.py")
_spec = importlib.util.spec_from_file_location("engine_state", EXAMPLE)
engine_state = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(engine_state)


def contents(g):
    """Generation g's three files: sizes differ from one g to the next,
    so a file of another generation, or a cut one, shows."""
    recognizers = b"".join(b'{"id": %d, "g": %d}\n' % (i, g)
                           for i in range(1 + g % 13))
    candidates = b"".join(b'{"c": %d, "pad": "%s"}\n' % (g, b"x" * i)
                          for i in range(50 * (1 + g % 7)))
    manifest = json.dumps({"g": g, "recognizers": 1 + g % 13}).encode()
    return {"manifest.json": manifest, "recognizers.jsonl": recognizers,
            "discovery_candidates.jsonl": candidates}


def test_round_trip_byte_identical(tmp_path, capsys):
    state = engine_state.EngineState(tmp_path / "state")
    assert state.load() is None
    files = contents(5)
    # One as a path to copy, as an engine hands over a file it wrote.
    (tmp_path / "cand").write_bytes(files["discovery_candidates.jsonl"])
    assert state.save({**files,
                       "discovery_candidates.jsonl": tmp_path / "cand"}) == 1
    snap = state.load()
    assert dict(snap) == files
    with pytest.raises(ValueError):
        state.save({"manifest.json": b"{}"})
    # The command line: save three paths, load them into a directory.
    for name, data in contents(6).items():
        (tmp_path / name).write_bytes(data)
    out = tmp_path / "out"
    out.mkdir()
    assert engine_state.main(["x", str(tmp_path / "state"), "save"]
                             + [str(tmp_path / n)
                                for n in engine_state.FILES]) == 0
    assert engine_state.main(["x", str(tmp_path / "state"), "load",
                              str(out)]) == 0
    assert {n: (out / n).read_bytes() for n in engine_state.FILES} == \
        contents(6)
    assert engine_state.main(["x"]) == 2
    assert "saved generation 2" in capsys.readouterr().out


def test_other_revision_warns(tmp_path):
    engine_state.EngineState(tmp_path / "s", "engine/1").save(contents(1))
    with pytest.warns(engine_state.RevisionWarning, match="engine/1"):
        snap = engine_state.EngineState(tmp_path / "s", "engine/2").load()
    assert dict(snap) == contents(1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        engine_state.EngineState(tmp_path / "s", "engine/1").load()


# Saves generation after generation from argv[2] on, saying when started.
SAVER = """
import os, sys
sys.path[:0] = sys.argv[3].split(os.pathsep)
import engine_state, test_engine_state
state = engine_state.EngineState(sys.argv[1])
g = int(sys.argv[2])
print("started", flush=True)
while True:
    state.save(test_engine_state.contents(g))
    g += 1
"""

KILLS = 24


def test_sigkill_while_saving_loads_a_whole_set(tmp_path, capsys):
    rnd = random.Random(21)
    directory = tmp_path / "state"
    state = engine_state.EngineState(directory)
    state.save(contents(0))
    path = os.pathsep.join([os.path.dirname(EXAMPLE),
                            os.path.dirname(os.path.abspath(__file__))])
    seen = {}
    for kill in range(KILLS):
        child = run_child(SAVER, str(directory), str(1000 * (kill + 1)),
                          path, stdout=-1)
        try:
            ready, _, _ = select.select([child.stdout], [], [], 30)
            assert ready and child.stdout.readline() == b"started\n"
            # Bounded: up to 60 ms, then kill wherever the child is.
            select.select([], [], [], rnd.uniform(0, 0.06))
        finally:
            child.kill()
            assert child.wait(timeout=10) == -signal.SIGKILL
            child.stdout.close()
        snap = state.load()
        g = json.loads(snap["manifest.json"])["g"]
        assert dict(snap) == contents(g), f"kill {kill}: a mixed set"
        # A generation number always names the same set.
        assert seen.setdefault(snap.generation, g) == g
    assert len(seen) > 1, "no save finished between the kills"
    trail = list(state.reboots())
    assert any("restart after a crash" in line for line in trail)
    assert engine_state.main(["x", str(directory), "events"]) == 0
    assert "recovered" in capsys.readouterr().out
