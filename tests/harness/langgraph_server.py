"""A real `langgraph dev` of this project, for end-to-end tests.

Each server runs in its own temporary working directory (its in-memory state
and the default SQLite journal land there), on a port chosen free at start.
`langgraph dev` silently moves to another port when the chosen one is taken,
so the port is read back from what the server prints, never assumed.
"""

from __future__ import annotations

import atexit
import json
import re
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from tests.harness.server_process import PROJECT_ROOT, ServerProcess, answers_ok

# Graphs, apps, auth handlers and scripts the tests give the servers they start.
HARNESS = Path(__file__).resolve().parent
LANGGRAPH = Path(sys.executable).parent / "langgraph"

_API_LINE = re.compile(r"API:\s*(?:\x1b\[[0-9;]*m)?(http://[^\s\x1b]+)")

# langgraph-api 0.10 and 0.11 warn, with a traceback each, about the docstrings of their
# own routes (no OpenAPI YAML) whenever they build their schema: at start and for
# /openapi.json. langgraph-api 0.16 has none to warn about.
_DOCSTRING_WARNING = re.compile(r"Unable to parse docstring from OpenAPI schema for route (\S+)")

# langgraph-runtime-inmem 0.36 queues a run that a killed process left running
# again when the next one starts, and says so; 0.30 and 0.31 leave such a run running
# for good (nothing executes it, and its thread takes no other run).
_RETRIED_LINE = "Retrying runs left running by a previous process"


def docstring_warnings(log: str) -> list[str]:
    """The routes whose docstring the server warned about in `log`."""
    return _DOCSTRING_WARNING.findall(log)


# What langgraph-api 0.10-0.16 log once the app, the plugin's lifespan included, has started.
_STARTED_LINE = "Application started up in"


def startup_log(log: str) -> str:
    """What a server said while starting: its output up to its start-up line.

    A shared server's output goes on with what other tests' runs do there
    (a run failing in its graph logs a traceback).
    """
    end = log.find(_STARTED_LINE)
    assert end >= 0, "the server's output has no start-up line"
    return log[: log.find("\n", end) + 1 or len(log)]


def foreign_tracebacks(log: str) -> int:
    """How many tracebacks in a server's output are not those of its docstring warnings."""
    return log.count("Traceback") - len(docstring_warnings(log))


def retries_runs_left_running(log: str) -> bool:
    """Whether the server whose startup `log` shows queued the runs a killed process left running."""
    return _RETRIED_LINE in log


def journaled_cancel_reason(reason: str) -> str:
    """What the journal says of a cancel the server gives `reason` for.

    langgraph-api 0.16 keeps the reason in the error it leaves on the run's
    thread; 0.10 and 0.11 keep none there ("An internal error occurred"), and the
    journal says only that the run was cancelled.
    """
    from langgraph_api.errors import UserInterrupt
    from langgraph_api.serde import default

    kept = default(UserInterrupt(reason)).get("message") == reason
    return reason if kept else "the run was cancelled"


def project_config(*, plugin: bool = True, **extra: Any) -> dict[str, Any]:
    """This project's langgraph.json, with absolute paths so it works from any directory."""
    config = json.loads((PROJECT_ROOT / "langgraph.json").read_text())
    config["dependencies"] = [str(PROJECT_ROOT)]
    config["graphs"] = {
        graph_id: str(PROJECT_ROOT / spec[2:]) if spec.startswith("./") else spec
        for graph_id, spec in config["graphs"].items()
    }
    if not plugin:
        config.pop("http", None)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(config.get(key), dict):
            config[key] = {**config[key], **value}
        else:
            config[key] = value
    return config


class LanggraphDevServer(ServerProcess):
    """Starts `langgraph dev` as a child process and stops exactly that process."""

    name = "langgraph dev"
    stop_timeout = 20.0

    def __init__(
        self,
        *,
        plugin: bool = True,
        config: dict[str, Any] | None = None,
        env: dict[str, str] | None = None,
        workdir: Path | None = None,
        n_jobs_per_worker: int = 4,
        startup_timeout: float = 90.0,
        program: list[str] | None = None,
        imports_checkout: bool = True,
    ) -> None:
        if workdir is None:
            # A directory of its own, gone when this process ends (the server may be
            # stopped and started again on it, or its journal read after it stopped).
            workdir = Path(tempfile.mkdtemp(prefix="journal-bridge-dev-"))
            atexit.register(shutil.rmtree, workdir, ignore_errors=True)
        super().__init__(workdir, startup_timeout=startup_timeout, imports_checkout=imports_checkout)
        # What runs `dev`: this environment's `langgraph` CLI, another one, or a
        # launcher that ends in it.
        self.program = program if program is not None else [str(LANGGRAPH)]
        self.config = config if config is not None else project_config(plugin=plugin)
        self.env = env or {}
        self.n_jobs_per_worker = n_jobs_per_worker

    @property
    def store_url(self) -> str:
        return self.env.get(
            "JOURNAL_BRIDGE_STORE_URL", f"sqlite:///{self.workdir / 'journal.db'}"
        )

    def start(self) -> LanggraphDevServer:
        self._launch(
            [*self.program, "dev"],
            self.config,
            ["--no-browser", "--no-reload", "--n-jobs-per-worker", str(self.n_jobs_per_worker)],
            {"JOURNAL_BRIDGE_STORE_URL": self.store_url, **self.env},
        )
        self.url = self._wait_until_ready()
        return self

    def _wait_until_ready(self) -> str:
        url = None

        def ready() -> bool:
            nonlocal url
            if url is None and (match := _API_LINE.search(self.read_log())):
                url = match.group(1).rstrip("/")
            return url is not None and answers_ok(f"{url}/ok")

        self._wait_until(ready)
        assert url is not None
        return url

    def __enter__(self) -> LanggraphDevServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
