"""`tasks.py`, the project's entry points: Ctrl-C, concurrent starts, pytest's report.

Each test runs a copy of `tasks.py` in a directory of its own whose `.venv` is
already prepared (it links the real environment's executables), so nothing
here installs anything or touches the project's own `.venv`.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from langgraph_server import _API_LINE, PROJECT_ROOT, foreign_tracebacks, project_config
from server_process import answers_ok, free_port

PYTHON_BIN = Path(sys.executable).parent


def _project_copy(root: Path, *, prepared: bool) -> Path:
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


@pytest.mark.e2e
def test_ctrl_c_on_dev_lets_the_server_stop_and_ends_quietly(tmp_path):
    import json

    root = _project_copy(tmp_path / "project", prepared=True)
    (root / "langgraph.json").write_text(json.dumps(project_config()))
    env = {
        **os.environ,
        "JOURNAL_BRIDGE_STORE_URL": f"sqlite:///{tmp_path / 'journal.db'}",
        "LANGGRAPH_CLI_NO_ANALYTICS": "1",
    }
    dev = subprocess.Popen(
        [sys.executable, str(root / "tasks.py"), "dev", "--port", str(free_port()), "--no-reload"],
        cwd=root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group, as a terminal's foreground job
    )
    try:
        output = []
        for line in dev.stdout:
            output.append(line.decode(errors="replace"))
            if match := _API_LINE.search(output[-1]):
                url = match.group(1).rstrip("/")
                break
        else:
            pytest.fail("".join(output))
        while not answers_ok(f"{url}/ok"):
            time.sleep(0.1)
        os.killpg(dev.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
        output.append(dev.stdout.read().decode(errors="replace"))
        code = dev.wait(timeout=120)
    finally:
        if dev.poll() is None:
            os.killpg(dev.pid, signal.SIGKILL)
            dev.wait()
    text = "".join(output)
    assert code in (0, 130), text[-3000:]
    # The server's own docstring warnings (langgraph-api 0.11) are no shutdown's.
    assert foreign_tracebacks(text) == 0 and "KeyboardInterrupt" not in text, text[-3000:]
    # The server shut down by itself instead of being killed.
    assert "Shutting down" in text


def test_a_second_command_waits_for_the_first_to_prepare_the_venv_then_uses_it(tmp_path):
    root = _project_copy(tmp_path, prepared=False)
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
    assert re.search(r"^SKIPPED \[1\] \S*test_skips\.py:5: no such service here$", result.stdout, re.M)
