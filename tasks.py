#!/usr/bin/env python3
"""The project's two entry points, using nothing but the Python standard library.

    python3 tasks.py dev    # langgraph dev with the plugin on embedded defaults
    python3 tasks.py test   # the whole test suite (--quick: only the tests that start no server)
    python3 tasks.py bench  # the benchmarks (store, history, bridge; or name one, with its options)

Each command first makes sure `.venv` exists and holds this project with its
test extras; it reinstalls only when `pyproject.toml` changed. With
`JOURNAL_BRIDGE_VERSIONS=oldest` the commands use `.venv-oldest` instead, which
holds the oldest supported LangGraph Server (`constraints/oldest.txt`). Commands started
together take turns at that (a file lock), so the second one waits for the
first to finish `.venv` and then uses it.

Ctrl-C reaches the command's process (the terminal signals the whole process
group): `dev` lets the server shut down and ends with status 130, quietly.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import subprocess
import sys
import venv
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VERSIONS_ENV = "JOURNAL_BRIDGE_VERSIONS"
# Which dependency set a command runs on: the newest the ranges allow, or a
# constraints file's pins in a venv of their own.
VERSION_SETS = {"newest": None, "oldest": "constraints/oldest.txt"}
# The extras each set's venv holds: deepagents 0.7 needs a newer langchain than the oldest set's.
EXTRAS = {"newest": "test,harness-deepagents", "oldest": "test"}
VERSIONS = os.environ.get(VERSIONS_ENV, "newest").strip() or "newest"
if VERSIONS not in VERSION_SETS:
    sys.exit(f"{VERSIONS_ENV} must be one of {', '.join(VERSION_SETS)}, got {VERSIONS!r}")
CONSTRAINTS = ROOT / VERSION_SETS[VERSIONS] if VERSION_SETS[VERSIONS] else None
VENV = ROOT / (".venv" if CONSTRAINTS is None else f".venv-{VERSIONS}")
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
STAMP = VENV / ".journal-bridge-installed"
# Beside .venv, not inside it: it must exist before .venv does.
LOCK = ROOT / f"{VENV.name}.lock"
INTERRUPTED = 130


def _python() -> str:
    return str(BIN / "python")


@contextlib.contextmanager
def _venv_lock() -> Iterator[None]:
    """Hold the lock on preparing .venv; wait (saying so) while another process holds it."""
    try:
        import fcntl
    except ImportError:  # Windows: no flock; commands there must not overlap
        yield
        return
    with open(LOCK, "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"waiting for another tasks.py to finish preparing {VENV.name} ...", flush=True)
            fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _installed(wanted: str) -> bool:
    return STAMP.exists() and STAMP.read_text().strip() == wanted


def ensure_venv() -> None:
    if sys.version_info < (3, 11):
        sys.exit("journal-bridge needs Python 3.11 or newer")
    pinned = CONSTRAINTS.read_bytes() if CONSTRAINTS is not None else b""
    wanted = hashlib.sha256((ROOT / "pyproject.toml").read_bytes() + pinned).hexdigest()
    if _installed(wanted):
        return
    with _venv_lock():
        # Another process may have prepared it while this one waited.
        if not _installed(wanted):
            _prepare_venv(wanted)


def _prepare_venv(wanted: str) -> None:
    if not BIN.exists():
        print(f"creating {VENV.name} ...", flush=True)
        venv.EnvBuilder(with_pip=True).create(VENV)
    print(f"installing journal-bridge and its test extras into {VENV.name} ...", flush=True)
    subprocess.run(
        [_python(), "-m", "pip", "install", "--quiet", "--upgrade", "pip"], check=True
    )
    pins = ["-c", str(CONSTRAINTS)] if CONSTRAINTS is not None else []
    subprocess.run(
        [_python(), "-m", "pip", "install", "--quiet", "-e", f"{ROOT}[{EXTRAS[VERSIONS]}]", *pins],
        check=True,
    )
    STAMP.write_text(wanted)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    # Chosen for this command's venv; a project the tests copy chooses its own.
    env.pop(VERSIONS_ENV, None)
    # The CLI would otherwise report usage over the network; this machine may have none.
    env.setdefault("LANGGRAPH_CLI_NO_ANALYTICS", "1")
    env.setdefault("LANGSMITH_TRACING", "false")
    return env


# Signals that stop this process and are passed on to the command it runs.
_PASSED_ON = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))


def _run(cmd: list[str]) -> int:
    """Run `cmd` in ROOT to its end; its exit status, 130 if it was interrupted.

    A Ctrl-C reaches the child too (same process group), so this process only
    keeps waiting while the child shuts down, as a shell does for its
    foreground job; killing the child instead would cut its shutdown short.
    A SIGTERM or SIGHUP sent to this process alone (a process manager, an
    editor's stop button, `kill PID`) is passed on to the child, then waited
    for the same way: stopping this process never leaves the server running.
    """
    suffix = f"  ({VERSIONS} versions)" if CONSTRAINTS is not None else ""
    print("+", " ".join(cmd) + suffix, flush=True)
    interrupted = False
    with subprocess.Popen(cmd, cwd=ROOT, env=_env()) as child:

        def pass_on(signum: int, _frame: object) -> None:
            nonlocal interrupted
            interrupted = True
            with contextlib.suppress(ProcessLookupError):
                child.send_signal(signum)

        previous = {sig: signal.signal(sig, pass_on) for sig in _PASSED_ON}
        try:
            while True:
                try:
                    code = child.wait()
                    break
                except KeyboardInterrupt:
                    interrupted = True
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
    if code < 0:  # ended by a signal: the shell's convention
        code = 128 - code
    return INTERRUPTED if interrupted else code


def dev(args: list[str]) -> int:
    return _run([str(BIN / "langgraph"), "dev", "--no-browser", *args])


# What `test --quick` runs: every test that starts no server.
QUICK = ["tests/unit"]
# How many processes run test modules side by side: most of a test's time is spent
# waiting on the servers it starts, so two share two cores well.
WORKERS_ENV = "JOURNAL_BRIDGE_TEST_WORKERS"


def _workers() -> list[str]:
    value = os.environ.get(WORKERS_ENV, "").strip() or str(max(2, min(os.cpu_count() or 1, 4)))
    if not value.isdigit():
        sys.exit(f"{WORKERS_ENV} must be a whole number, got {value!r}")
    # Whole modules go to one worker: their shared servers start once.
    return [] if int(value) <= 1 else ["-n", value, "--dist", "loadfile"]


def test(args: list[str]) -> int:
    if "--quick" in args:
        args = [*QUICK, *(arg for arg in args if arg != "--quick")]
    given = any(arg == "-n" or arg.startswith(("-n=", "--numprocesses")) for arg in args)
    code = _run([_python(), "-m", "pytest", *([] if given else _workers()), *args])
    if code == 5:
        print("pytest collected no tests: treating that as a failure", file=sys.stderr)
        return 1
    return code


def bench(args: list[str]) -> int:
    """`bench [NAME ...] [--option ...]`: the named benchmarks (all three by default), each given the options."""
    cut = next((i for i, arg in enumerate(args) if arg.startswith("-")), len(args))
    names, options = args[:cut] or ["store", "history", "bridge"], args[cut:]
    for name in names:
        # As modules from the project root, so they import the test harness as a package.
        code = _run([_python(), "-m", f"benchmarks.{name}", *options])
        if code:
            return code
    return 0


COMMANDS = {"dev": dev, "test": test, "bench": bench}


def main() -> int:
    if len(sys.argv) < 2 or sys.argv[1] not in COMMANDS:
        print(__doc__)
        return 2
    try:
        ensure_venv()
        return COMMANDS[sys.argv[1]](sys.argv[2:])
    except KeyboardInterrupt:
        print(file=sys.stderr)
        return INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
