"""`tasks.py`, the project's entry points: Ctrl-C and SIGTERM, concurrent starts, pytest's report.

Each test runs a copy of `tasks.py` in a directory of its own whose `.venv` is
already prepared (it links the real environment's executables), so nothing
here installs anything or touches the project's own `.venv`.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys

from tests.harness.langgraph_server import PROJECT_ROOT
from tests.harness.project_copy import project_copy


def test_a_second_command_waits_for_the_first_to_prepare_the_venv_then_uses_it(tmp_path):
    root = project_copy(tmp_path, prepared=False)
    holder = subprocess.Popen(
        [
            sys.executable, "-c",
            "import hashlib, sys, tasks\n"
            "with tasks._venv_lock():\n"
            "    print('holding', flush=True)\n"
            "    sys.stdin.readline()\n"
            "    tasks.BIN.mkdir(parents=True)\n"
            "    wanted = hashlib.sha256((tasks.ROOT / 'pyproject.toml').read_bytes()).hexdigest()\n"
            "    tasks.STAMP.write_text(wanted)\n",
        ],
        cwd=root, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    waiter = None
    try:
        assert holder.stdout.readline() == "holding\n"
        waiter = subprocess.Popen(
            [sys.executable, "-c", "import tasks; tasks.ensure_venv(); print('ready')"],
            cwd=root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
        assert waiter.stdout.readline() == "waiting for another tasks.py to finish preparing .venv ...\n"
        holder.stdin.write("done\n")
        holder.stdin.flush()
        rest = waiter.stdout.read()
        assert waiter.wait(timeout=60) == 0, rest
        assert holder.wait(timeout=60) == 0
    finally:
        for process in (holder, waiter):
            if process is not None and process.poll() is None:
                process.kill()
                process.wait()
    # It found .venv prepared and created and installed nothing itself.
    assert rest == "ready\n"


def test_pytest_reports_why_a_test_was_skipped(tmp_path):
    (tmp_path / "test_skips.py").write_text(
        "import pytest\n\n\ndef test_needs_a_service():\n    pytest.skip('no such service here')\n"
    )
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-c", str(PROJECT_ROOT / "pyproject.toml"),
         "--rootdir", str(tmp_path), "-p", "no:cacheprovider", str(tmp_path / "test_skips.py")],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert result.returncode == 0, result.stdout
    assert re.search(r"^SKIPPED \[1\] \S*test_skips\.py:5: no such service here$", result.stdout, re.MULTILINE)


_STOPPABLE = (
    "import signal, sys, time\n"
    "def stop(signum, frame):\n"
    "    print('stopping', signum, flush=True)\n"
    "    time.sleep(0.3)\n"  # a shutdown that takes a moment: the parent must wait for it
    "    print('stopped', flush=True)\n"
    "    sys.exit(0)\n"
    "signal.signal(signal.SIGTERM, stop)\n"
    "print('child', __import__('os').getpid(), flush=True)\n"
    "time.sleep(60)\n"
)


def test_a_sigterm_to_tasks_py_stops_its_command_and_waits_for_it(tmp_path):
    root = project_copy(tmp_path / "project", prepared=True)
    script = tmp_path / "child.py"
    script.write_text(_STOPPABLE)
    runner = subprocess.Popen(
        [sys.executable, "-c", f"import sys, tasks; sys.exit(tasks._run([sys.executable, {str(script)!r}]))"],
        cwd=root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,  # nothing but the signal below reaches the command
    )
    child_pid = None
    try:
        assert runner.stdout is not None
        assert runner.stdout.readline().startswith("+ ")
        line = runner.stdout.readline()
        assert line.startswith("child "), line
        child_pid = int(line.split()[1])
        runner.send_signal(signal.SIGTERM)  # to tasks.py alone, as `kill PID` does
        rest = runner.communicate(timeout=10)[0]
        assert rest.splitlines() == [f"stopping {int(signal.SIGTERM)}", "stopped"]
        assert runner.returncode == 130
        # The command is gone, not left running without its parent.
        try:
            os.kill(child_pid, 0)
        except ProcessLookupError:
            pass
        else:
            raise AssertionError(f"the command (pid {child_pid}) outlived tasks.py")
    finally:
        if runner.poll() is None:
            runner.kill()
        if child_pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child_pid, signal.SIGKILL)
