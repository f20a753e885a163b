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
import subprocess
import venv
from pathlib import Path
from typing import Any

from tests.harness.langgraph_server import PROJECT_ROOT, project_config
from tests.harness.server_process import ServerProcess, answers_ok

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


class LanghostServer(ServerProcess):
    """One `langhost serve` process of a deployment; stops exactly the processes it started."""

    name = "langhost"
    stop_timeout = 30.0

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
        super().__init__(workdir, startup_timeout=startup_timeout)
        self.bin_dir = bin_dir
        self.database_url = database_url
        self.redis_url = redis_url
        self.store_url = store_url
        self.n_jobs = n_jobs
        self.env = env or {}

    def start(self, config: dict[str, Any] | None = None) -> LanghostServer:
        env = {
            "DATABASE_URI": self.database_url,
            "REDIS_URI": self.redis_url,
            "JOURNAL_BRIDGE_STORE_URL": self.store_url,
            **self.env,
        }
        # Started again in the same directory, it keeps the earlier output in its log.
        port = self._launch(
            [str(self.bin_dir / "langhost"), "serve"],
            config or project_config(),
            ["--n-jobs-per-worker", str(self.n_jobs)],
            env,
            append_log=True,
        )
        self.url = f"http://127.0.0.1:{port}"
        # Without the plugin (no `http` app), the server's own `/ok` says it is up.
        ready = "/journal/health" if config is None or "http" in config else "/ok"
        self._wait_until(lambda: answers_ok(f"{self.url}{ready}"))
        return self

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
