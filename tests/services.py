"""PostgreSQL and Redis for the deployment suites: the ones CI started, else local ones.

`JOURNAL_BRIDGE_TEST_POSTGRES_URL` and `JOURNAL_BRIDGE_TEST_REDIS_URL` name
servers that are already running (CI starts them with `.ci/postgres.sh` and
`.ci/redis.sh`). Without them, a throwaway server is started from Debian's
`postgresql` / `redis-server` binaries when they are installed, and stopped
afterwards; without those either, the suite skips (fails in CI) saying which.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from langgraph_server import free_port
from suites import require_or_skip

POSTGRES_URL_ENV = "JOURNAL_BRIDGE_TEST_POSTGRES_URL"
REDIS_URL_ENV = "JOURNAL_BRIDGE_TEST_REDIS_URL"


def _as_postgres_user(cmd: list[str]) -> list[str]:
    # initdb and postgres refuse to run as root: run them as the `postgres` user then.
    if os.geteuid() != 0:
        return cmd
    return ["su", "postgres", "-s", "/bin/sh", "-c", " ".join(f"'{part}'" for part in cmd)]


@contextmanager
def postgres_server() -> Iterator[str]:
    """The URL of a PostgreSQL server for the duration of the block."""
    url = os.environ.get(POSTGRES_URL_ENV)
    if url:
        yield url
        return
    bindirs = sorted(glob.glob("/usr/lib/postgresql/*/bin"))
    if not bindirs:
        require_or_skip(f"set {POSTGRES_URL_ENV} or install Debian's postgresql package")
    bindir = Path(bindirs[-1])
    data = Path(tempfile.mkdtemp(prefix="journal-bridge-pg-"))
    if os.geteuid() == 0:
        shutil.chown(data, "postgres")
    port = free_port()
    subprocess.run(
        _as_postgres_user([str(bindir / "initdb"), "-D", str(data), "-U", "postgres", "-A", "trust"]),
        check=True,
        capture_output=True,
    )
    options = f"-p {port} -k {data} -c listen_addresses=127.0.0.1 -c max_connections=300"
    pg_ctl = str(bindir / "pg_ctl")
    subprocess.run(
        _as_postgres_user([pg_ctl, "-D", str(data), "-o", options, "-l", str(data / "log"), "-w", "start"]),
        check=True,
        capture_output=True,
    )
    try:
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run(_as_postgres_user([pg_ctl, "-D", str(data), "-m", "immediate", "stop"]), capture_output=True)
        shutil.rmtree(data, ignore_errors=True)


@contextmanager
def redis_server() -> Iterator[str]:
    """The URL of a Redis server for the duration of the block."""
    url = os.environ.get(REDIS_URL_ENV)
    if url:
        yield url
        return
    binary = shutil.which("redis-server")
    if binary is None:
        require_or_skip(f"set {REDIS_URL_ENV} or install Debian's redis-server package")
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
