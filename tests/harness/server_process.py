"""A LangGraph server run as a child process for end-to-end tests: started, waited for, read and stopped.

The process runs in a session of its own, so stopping it signals that process
group, which holds only the processes started here. Its output goes to a log
file in its working directory, quoted when it exits early or never gets ready.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

# The checkout these tests belong to: its package is the one a server imports,
# whichever checkout the environment's editable install points at.
PROJECT_ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def answers_ok(url: str) -> bool:
    """Whether a GET of `url` answers 200; False while nothing answers there yet."""
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


class ServerProcess:
    """One server process and its log; `name` says which server in errors."""

    name = "server"
    stop_timeout = 20.0

    def __init__(self, workdir: Path, *, startup_timeout: float, imports_checkout: bool = True) -> None:
        self.workdir = workdir
        # The server imports this checkout's package, ahead of any installed copy.
        self.imports_checkout = imports_checkout
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.startup_timeout = startup_timeout
        self.process: subprocess.Popen[bytes] | None = None
        self.url: str | None = None
        self.log_path = self.workdir / "server.log"

    def _launch(
        self,
        program: list[str],
        config: dict[str, Any],
        options: list[str],
        env: dict[str, str],
        *,
        append_log: bool = False,
    ) -> int:
        """Start `program` serving `config` on a free port of 127.0.0.1, `env` over this environment; the port."""
        config_path = self.workdir / "langgraph.json"
        config_path.write_text(json.dumps(config, indent=2))
        port = free_port()
        cmd = [*program, "--config", str(config_path), "--host", "127.0.0.1", "--port", str(port), *options]
        env = {**os.environ, "LANGGRAPH_CLI_NO_ANALYTICS": "1", "LANGSMITH_TRACING": "false", **env}
        if self.imports_checkout:
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [env.get("PYTHONPATH"), str(PROJECT_ROOT)]))
        with open(self.log_path, "ab" if append_log else "wb") as log:
            self.process = subprocess.Popen(
                cmd,
                cwd=self.workdir,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        return port

    def _wait_until(self, ready: Callable[[], bool]) -> None:
        """Poll `ready` until it holds; stop the server and raise with its log if it never does."""
        assert self.process is not None
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.process.returncode}:\n{self.read_log()[-4000:]}")
            if ready():
                return
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"{self.name} did not become ready:\n{self.read_log()[-4000:]}")

    def read_log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def kill(self) -> None:
        """SIGKILL the whole process group: the server dies mid-whatever, as on a crash."""
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        try:
            os.killpg(process.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=self.stop_timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
