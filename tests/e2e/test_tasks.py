"""`python3 tasks.py dev` under Ctrl-C: a real `langgraph dev` started through a copy of `tasks.py`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.harness.langgraph_server import _API_LINE, foreign_tracebacks, project_config
from tests.harness.project_copy import project_copy
from tests.harness.server_process import answers_ok, free_port

pytestmark = pytest.mark.e2e


def test_ctrl_c_on_dev_lets_the_server_stop_and_ends_quietly(tmp_path):
    root = project_copy(tmp_path / "project", prepared=True)
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
