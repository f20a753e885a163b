"""journal-bridge-react built and packed, and the useStream test app built on it.

The package (`js/journal-bridge-react`) and the app (`tests/harness/usestream_app`)
each install from their committed package-lock.json with `npm ci`, skipped
while node_modules matches the lock. The package is packed with `npm pack`
(its `prepack` compiles it with tsc under `strict`) and the tarball installed
into the app as an app installs it; the app is bundled by esbuild.
"""

from __future__ import annotations

import fcntl
import hashlib
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.harness.js_onoff import node_problem
from tests.harness.server_process import PROJECT_ROOT

PACKAGE_DIR = PROJECT_ROOT / "js" / "journal-bridge-react"
APP_DIR = Path(__file__).resolve().parent / "usestream_app"
_STAMP = ".journal-bridge-lock-sha256"


def build_problem() -> str | None:
    """Why the package and the app cannot be built here, or None."""
    problem = node_problem()
    if problem is None and shutil.which("npm") is None:
        problem = "npm is not installed"
    return problem


def run(command: list[str], cwd: Path, *, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """Run an npm or node command; a failure raises with its output."""
    result = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False)
    if result.returncode != 0:
        raise RuntimeError(
            f"{' '.join(command)} failed in {cwd} (exit {result.returncode}):\n"
            f"{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
        )
    return result


def npm_ci(directory: Path) -> None:
    """`npm ci` in `directory` unless its node_modules was installed from the same lock;
    processes side by side take turns (a file lock)."""
    lock_hash = hashlib.sha256((directory / "package-lock.json").read_bytes()).hexdigest()
    stamp = directory / "node_modules" / _STAMP
    with open(directory / ".npm-ci.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stamp.is_file() and stamp.read_text().strip() == lock_hash:
            return
        run(["npm", "ci", "--no-audit", "--no-fund"], directory)
        stamp.write_text(lock_hash)


@dataclass(frozen=True)
class Built:
    tarball: Path
    bundle: Path


def build(workdir: Path) -> Built:
    """The package packed into `workdir`, installed into the app, and the app bundled."""
    npm_ci(PACKAGE_DIR)
    packed = run(["npm", "pack", "--silent", "--pack-destination", str(workdir)], PACKAGE_DIR)
    tarball = workdir / packed.stdout.strip().splitlines()[-1]
    npm_ci(APP_DIR)
    with open(APP_DIR / ".npm-ci.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        run(["npm", "install", "--no-save", "--no-audit", "--no-fund", str(tarball)], APP_DIR)
        run(["npm", "run", "--silent", "build"], APP_DIR)
    return Built(tarball=tarball, bundle=APP_DIR / "dist" / "app.js")
