#!/usr/bin/env python3
"""The project's two entry points, using nothing but the Python standard library.

    python3 tasks.py dev    # langgraph dev with the plugin on embedded defaults
    python3 tasks.py test   # the whole test suite
    python3 tasks.py bench  # the benchmarks (store, history, bridge)

Each command first makes sure `.venv` exists and holds this project with its
test extras; it reinstalls only when `pyproject.toml` changed.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
STAMP = VENV / ".journal-bridge-installed"


def _python() -> str:
    return str(BIN / "python")


def ensure_venv() -> None:
    if sys.version_info < (3, 11):
        sys.exit("journal-bridge needs Python 3.11 or newer")
    wanted = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    if STAMP.exists() and STAMP.read_text().strip() == wanted:
        return
    if not BIN.exists():
        print("creating .venv ...", flush=True)
        venv.EnvBuilder(with_pip=True).create(VENV)
    print("installing journal-bridge and its test extras into .venv ...", flush=True)
    subprocess.run(
        [_python(), "-m", "pip", "install", "--quiet", "--upgrade", "pip"], check=True
    )
    subprocess.run(
        [_python(), "-m", "pip", "install", "--quiet", "-e", f"{ROOT}[test]"],
        check=True,
    )
    STAMP.write_text(wanted)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    # The CLI would otherwise report usage over the network; this machine may have none.
    env.setdefault("LANGGRAPH_CLI_NO_ANALYTICS", "1")
    env.setdefault("LANGSMITH_TRACING", "false")
    return env


def dev(args: list[str]) -> int:
    cmd = [str(BIN / "langgraph"), "dev", "--no-browser", *args]
    print("+", " ".join(cmd), flush=True)
    return subprocess.call(cmd, cwd=ROOT, env=_env())


def test(args: list[str]) -> int:
    cmd = [_python(), "-m", "pytest", *args]
    print("+", " ".join(cmd), flush=True)
    code = subprocess.call(cmd, cwd=ROOT, env=_env())
    if code == 5:
        print("pytest collected no tests: treating that as a failure", file=sys.stderr)
        return 1
    return code


def bench(args: list[str]) -> int:
    scripts = args or ["store", "history", "bridge"]
    for name in scripts:
        cmd = [_python(), str(ROOT / "benchmarks" / f"{name}.py")]
        print("+", " ".join(cmd), flush=True)
        code = subprocess.call(cmd, cwd=ROOT, env=_env())
        if code:
            return code
    return 0


COMMANDS = {"dev": dev, "test": test, "bench": bench}


def main() -> int:
    if len(sys.argv) < 2 or sys.argv[1] not in COMMANDS:
        print(__doc__)
        return 2
    ensure_venv()
    return COMMANDS[sys.argv[1]](sys.argv[2:])


if __name__ == "__main__":
    sys.exit(main())
