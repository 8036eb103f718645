"""Test setup: the package from this source tree, the library named by
FSAFE_LIBRARY (the CTest test sets it to the just-built libfsafe.so)."""

import errno
import os
import subprocess
import sys
import tempfile

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE_ROOT = os.path.dirname(HERE)
sys.path.insert(0, PACKAGE_ROOT)


def child_env() -> dict:
    """The environment for a child Python that imports the same fsafe."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [PACKAGE_ROOT] + [p for p in [env.get("PYTHONPATH")] if p])
    return env


def run_child(code: str, *args: str, **kwargs) -> subprocess.Popen:
    """Start `code` in a child Python with fsafe importable."""
    return subprocess.Popen([sys.executable, "-c", code, *args],
                            env=child_env(), **kwargs)


@pytest.fixture
def readonly_dir():
    """A directory nothing can be created in: a read-only tmpfs for root
    (who ignores permissions), a mode 0555 directory for anyone else."""
    base = tempfile.mkdtemp(prefix="fsafe-py-ro-")
    if os.geteuid() == 0:
        rc = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro", "tmpfs",
                             base], capture_output=True)
        if rc.returncode != 0:
            os.rmdir(base)
            pytest.skip("SKIP: cannot mount a read-only tmpfs: "
                        + rc.stderr.decode(errors="replace").strip())
        try:
            yield base, errno.EROFS
        finally:
            subprocess.run(["umount", base], check=True)
            os.rmdir(base)
    else:
        os.chmod(base, 0o555)
        try:
            yield base, errno.EACCES
        finally:
            os.chmod(base, 0o755)
            os.rmdir(base)
