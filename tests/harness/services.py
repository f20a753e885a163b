"""PostgreSQL and Redis for the deployment suites: the ones CI started, else local ones.

`JOURNAL_BRIDGE_TEST_POSTGRES_URL` and `JOURNAL_BRIDGE_TEST_REDIS_URL` name
servers that are already running (CI starts them with `.ci/postgres.sh` and
`.ci/redis.sh`). Without them, a throwaway server is started from Debian's
`postgresql` / `redis-server` binaries when they are installed, and stopped
afterwards; without those either, the suite skips (fails in CI) saying which.
`postgres_cluster` always starts a throwaway cluster, which a test may stop
and start again.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

from tests.harness.server_process import free_port
from tests.harness.suites import require_or_skip

POSTGRES_URL_ENV = "JOURNAL_BRIDGE_TEST_POSTGRES_URL"
REDIS_URL_ENV = "JOURNAL_BRIDGE_TEST_REDIS_URL"


def _as_postgres_user(cmd: list[str]) -> list[str]:
    # initdb and postgres refuse to run as root: run them as the `postgres` user then.
    if os.geteuid() != 0:
        return cmd
    return ["su", "postgres", "-s", "/bin/sh", "-c", " ".join(f"'{part}'" for part in cmd)]


class PostgresCluster:
    """A throwaway PostgreSQL cluster of Debian's binaries, on a port of its own.

    `start()` creates it on first use and starts it; `stop()` stops it and a
    later `start()` brings the same cluster (data, port) back, so a test can
    take the database away and return it. `remove()` stops it and deletes it.
    """

    def __init__(self) -> None:
        bindirs = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=_version_key)
        if not bindirs:
            require_or_skip("install Debian's postgresql package (initdb, pg_ctl)")
        self.bindir = Path(bindirs[-1])
        self.data = Path(tempfile.mkdtemp(prefix="journal-bridge-pg-"))
        if os.geteuid() == 0:
            shutil.chown(self.data, "postgres")
        self.port = free_port()
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        self._created = False

    def _pg_ctl(self, *args: str) -> list[str]:
        return _as_postgres_user([str(self.bindir / "pg_ctl"), "-D", str(self.data), *args])

    def start(self) -> str:
        """Start the cluster (creating it the first time); its URL."""
        if not self._created:
            subprocess.run(
                _as_postgres_user(
                    [str(self.bindir / "initdb"), "-D", str(self.data), "-U", "postgres", "-A", "trust"]
                ),
                check=True,
                capture_output=True,
            )
            self._created = True
        options = f"-p {self.port} -k {self.data} -c listen_addresses=127.0.0.1 -c max_connections=300"
        subprocess.run(
            self._pg_ctl("-o", options, "-l", str(self.data / "log"), "-w", "start"),
            check=True,
            capture_output=True,
        )
        return self.url

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (`pg_ctl stop -m mode`); the cluster stays for a later `start()`."""
        subprocess.run(self._pg_ctl("-m", mode, "-w", "stop"), check=True, capture_output=True)

    def remove(self) -> None:
        if self._created:
            subprocess.run(self._pg_ctl("-m", "immediate", "stop"), capture_output=True)
        shutil.rmtree(self.data, ignore_errors=True)


def _version_key(bindir: str) -> tuple[int, ...]:
    version = Path(bindir).parent.name
    return tuple(int(part) for part in version.split(".") if part.isdigit())


@contextmanager
def postgres_cluster() -> Iterator[PostgresCluster]:
    """A started throwaway cluster of this test's own, removed afterwards."""
    cluster = PostgresCluster()
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.remove()


@contextmanager
def _named_or_started(
    url_env: str, installed: Callable[[], bool], package: str, start: Callable[[], AbstractContextManager[str]]
) -> Iterator[str]:
    """The URL `url_env` names, else that of a throwaway server `start` runs from
    Debian's `package` while the block lasts (a skip naming both when not `installed`)."""
    url = os.environ.get(url_env)
    if url:
        yield url
        return
    if not installed():
        require_or_skip(f"set {url_env} or install Debian's {package} package")
    with start() as started:
        yield started


def postgres_server() -> AbstractContextManager[str]:
    """The URL of a PostgreSQL server for the duration of the block."""
    return _named_or_started(
        POSTGRES_URL_ENV, lambda: bool(glob.glob("/usr/lib/postgresql/*/bin")), "postgresql", _postgres_started
    )


@contextmanager
def _postgres_started() -> Iterator[str]:
    with postgres_cluster() as cluster:
        yield cluster.url


def redis_server() -> AbstractContextManager[str]:
    """The URL of a Redis server for the duration of the block."""
    return _named_or_started(
        REDIS_URL_ENV, lambda: shutil.which("redis-server") is not None, "redis-server", _redis_started
    )


@contextmanager
def _redis_started() -> Iterator[str]:
    binary = shutil.which("redis-server")
    assert binary is not None, "checked before starting"
    port = free_port()
    workdir = tempfile.mkdtemp(prefix="journal-bridge-redis-")
    process = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", workdir, "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(200):
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
                    sock.sendall(b"PING\r\n")
                    if sock.recv(16).startswith(b"+PONG"):
                        break
            except OSError:
                time.sleep(0.05)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        process.terminate()
        process.wait(timeout=10)
        shutil.rmtree(workdir, ignore_errors=True)


def create_database(server_url: str, name: str) -> str:
    """Create database `name` on the server of `server_url`; its URL."""
    import psycopg

    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    return server_url.rsplit("/", 1)[0] + f"/{name}"
