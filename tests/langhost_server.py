"""A real distributed LangGraph Server: `langhost serve` of langgraph-runtime-pg.

langgraph-runtime-pg runs stock langgraph-api 0.11.1 on PostgreSQL (threads,
runs, checkpoints, the run queue) and Redis (stream frames, wake-ups,
heartbeats). It pins its own langgraph-api, so it lives in a venv of its own,
`.venv-pg-runtime`, holding this project (editable, with the postgres extra)
and the runtime; it is prepared once and reused while its inputs are unchanged.
Each `LanghostServer` is one server process with its own port and working
directory; several of them on one database form one deployment.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import time
import venv
from pathlib import Path
from typing import Any

import httpx
from langgraph_server import PROJECT_ROOT, free_port, project_config

PG_RUNTIME = ["langgraph-runtime-pg==0.11.1.post1", "langhost==0.11.1.post1"]
PG_RUNTIME_VENV = PROJECT_ROOT / ".venv-pg-runtime"


def ensure_pg_runtime_venv() -> Path:
    """The venv's bin directory, installing into it first when its inputs changed."""
    bin_dir = PG_RUNTIME_VENV / "bin"
    stamp = PG_RUNTIME_VENV / ".journal-bridge-installed"
    wanted = hashlib.sha256(
        (PROJECT_ROOT / "pyproject.toml").read_bytes() + " ".join(PG_RUNTIME).encode()
    ).hexdigest()
    if stamp.exists() and stamp.read_text() == wanted:
        return bin_dir
    if not bin_dir.exists():
        venv.EnvBuilder(with_pip=True).create(PG_RUNTIME_VENV)
    subprocess.run(
        [str(bin_dir / "python"), "-m", "pip", "install", "--quiet", "-e", f"{PROJECT_ROOT}[postgres]", *PG_RUNTIME],
        check=True,
    )
    stamp.write_text(wanted)
    return bin_dir


class LanghostServer:
    """One `langhost serve` process of a deployment; stops exactly the processes it started."""

    def __init__(
        self,
        bin_dir: Path,
        workdir: Path,
        *,
        database_url: str,
        redis_url: str,
        store_url: str,
        n_jobs: int = 2,
        env: dict[str, str] | None = None,
        startup_timeout: float = 120.0,
    ) -> None:
        self.bin_dir = bin_dir
        self.workdir = workdir
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.database_url = database_url
        self.redis_url = redis_url
        self.store_url = store_url
        self.n_jobs = n_jobs
        self.env = env or {}
        self.startup_timeout = startup_timeout
        self.process: subprocess.Popen[bytes] | None = None
        self.url: str | None = None
        self.log_path = workdir / "server.log"

    def start(self, config: dict[str, Any] | None = None) -> LanghostServer:
        config_path = self.workdir / "langgraph.json"
        config_path.write_text(json.dumps(config or project_config(), indent=2))
        port = free_port()
        env = {
            **os.environ,
            "LANGGRAPH_CLI_NO_ANALYTICS": "1",
            "LANGSMITH_TRACING": "false",
            "DATABASE_URI": self.database_url,
            "REDIS_URI": self.redis_url,
            "JOURNAL_BRIDGE_STORE_URL": self.store_url,
            **self.env,
        }
        cmd = [
            str(self.bin_dir / "langhost"),
            "serve",
            "--config",
            str(config_path),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--n-jobs-per-worker",
            str(self.n_jobs),
        ]
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                cmd, cwd=self.workdir, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        self.url = f"http://127.0.0.1:{port}"
        self._wait_until_ready()
        return self

    def _wait_until_ready(self) -> None:
        assert self.process is not None
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"langhost exited with {self.process.returncode}:\n{self.read_log()[-4000:]}")
            try:
                if httpx.get(f"{self.url}/journal/health", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"langhost did not become ready:\n{self.read_log()[-4000:]}")

    def read_log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def executed_run_ids(self) -> set[str]:
        """Runs this process's queue executed to the end (from its log)."""
        import re

        ids = set()
        for line in self.read_log().splitlines():
            if "Background run succeeded" in line:
                match = re.search(r"run_id\S*?=\S*?([0-9a-f]{8}-[0-9a-f-]{27})", line)
                if match:
                    ids.add(match.group(1))
        return ids

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
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
