"""A copy of the project's entry points in a directory of its own, for tests of `tasks.py`."""

from __future__ import annotations

import fnmatch
import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

from tests.harness.langgraph_server import PROJECT_ROOT

PYTHON_BIN = Path(sys.executable).parent


def project_copy(root: Path, *, prepared: bool) -> Path:
    """`tasks.py` and `pyproject.toml` in `root`; with `prepared`, a `.venv` it accepts as is."""
    root.mkdir(parents=True, exist_ok=True)
    shutil.copy(PROJECT_ROOT / "tasks.py", root / "tasks.py")
    shutil.copy(PROJECT_ROOT / "pyproject.toml", root / "pyproject.toml")
    if prepared:
        bin_dir = root / ".venv" / "bin"
        bin_dir.mkdir(parents=True)
        for name in ("python", "langgraph"):
            (bin_dir / name).symlink_to(PYTHON_BIN / name)
        (root / ".venv" / ".journal-bridge-installed").write_text(
            hashlib.sha256((root / "pyproject.toml").read_bytes()).hexdigest()
        )
    return root


# What a working copy holds beyond its sources: environments, builds, caches,
# journals (the patterns of .gitignore, for a source export that has no git).
_NOT_SOURCE = (".git", ".venv*", "__pycache__", "*.egg-info", "build", "dist", "node_modules",
               "test-artifacts", ".pytest_cache", ".langgraph_api", ".journal-bridge-spool",
               "*.db", "*.db-wal", "*.db-shm", "*.db-claims", "*.follow.json", "*.lock", "*.pyc")


def source_files(root: Path = PROJECT_ROOT) -> list[str]:
    """The project's source files, relative to `root`: what git tracks in a clone, and in a
    source export (an archive: no `.git`) every file that is not a build, cache or environment."""
    if (root / ".git").exists():
        tracked = subprocess.run(["git", "-C", str(root), "ls-files", "-z"], check=True, capture_output=True)
        return [name for name in tracked.stdout.decode().split("\0") if name and (root / name).is_file()]
    found = []
    for path in sorted(root.rglob("*")):
        parts = path.relative_to(root).parts
        if path.is_file() and not any(fnmatch.fnmatch(part, pattern) for part in parts for pattern in _NOT_SOURCE):
            found.append("/".join(parts))
    return found
