"""The benchmarks' servers: `langgraph dev` without file persistence, per capture setting.

`off` is a server without the plugin; `floor` serves `floor_app.py` (the
least a journal read through the SDK costs) in place of the plugin; `auto`,
`lean` and `events` are the plugin with that capture; a paired server serves
`paired_app.py` (the plugin and the floor in one process).
"""

from __future__ import annotations

import random
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import psutil

from tests.harness.bench.full_collections import FullCollections, ProbeDirectory
from tests.harness.bench.process_cpu import tree
from tests.harness.bench.server_threads import ThreadNames
from tests.harness.bench.task_clock import TaskClock
from tests.harness.langgraph_server import LanggraphDevServer, project_config

CAPTURES = ("off", "floor", "auto", "lean", "events", "floor-twin")
# Run only when asked for (`--capture floor-twin`): a second floor server, the same in every way.
ON_REQUEST = ("floor-twin",)
# The `floor` server's app: the plugin's request rewrite and one SDK join per run, nothing more.
FLOOR_APP = Path(__file__).resolve().with_name("floor_app.py")
PAIRED_APP = Path(__file__).resolve().with_name("paired_app.py")



# `langgraph dev` pickles its whole in-memory runtime to disk every 10 s from a
# thread of its own: the same work on every server, growing with what the
# server holds (35 MB after a matrix), landing in some rounds and not in
# others. Sampled on a floor, an `auto` and a `lean` server under the same
# load, it was 5-24% of each one's CPU, the most on whichever server its
# ticks happened to fall on; nothing of the journal is in it. Every benchmark
# server runs without it (`tests/harness/bench/quiet_dev.py`), checked in its log.
QUIET_DEV = Path(__file__).resolve().with_name("quiet_dev.py")
FLUSH_LOOP_LINE = "Starting dev persistence flush loop"


def quiet_dev_server(*, plugin: bool = True, env: dict[str, str], **config: Any) -> LanggraphDevServer:
    """A started `langgraph dev` without file persistence (`config`: more of the
    project's keys); refused if its log shows the flush loop all the same."""
    server = LanggraphDevServer(
        config=project_config(plugin=plugin, **config), env=env, program=[sys.executable, str(QUIET_DEV)]
    ).start()
    if FLUSH_LOOP_LINE in server.read_log():
        server.stop()
        raise RuntimeError("a benchmark server persists its runtime to disk although launched not to")
    return server


def start_server(
    capture: str,
    pace: float,
    collections: FullCollections | None = None,
    clock: TaskClock | None = None,
    thread_names: ThreadNames | None = None,
    *,
    launch: Callable[..., LanggraphDevServer] | None = None,
) -> LanggraphDevServer:
    """The server of a capture setting (`CAPTURES`), with the probes given; `launch`
    starts it (`quiet_dev_server` by default, which a variant may wrap)."""
    launch = launch or quiet_dev_server
    env = {
        "JOURNAL_BRIDGE_OFFLINE_SECONDS_PER_TOKEN": str(pace),
        **(collections.env if collections else {}),
        # Each part of the probe: the same probe directory first on PYTHONPATH.
        **(clock.env if clock else {}),
        **(thread_names.env if thread_names else {}),
    }
    if capture == "off":
        return launch(plugin=False, env=env)
    if capture in ("floor", "floor-twin"):
        return launch(env=env, http={"app": f"{FLOOR_APP}:app"})
    return launch(env={**env, "JOURNAL_BRIDGE_CAPTURE": capture})


def start_order(names: Iterable[str], instance: int) -> list[str]:
    """The order a set of servers starts in: shuffled per set, the same for the
    same set number (in one fixed order, the last started ran cheapest)."""
    order = list(names)
    random.Random(instance).shuffle(order)
    return order


def start_servers(
    pace: float,
    collections: dict[str, FullCollections],
    captures: tuple[str, ...] = CAPTURES,
    clocks: dict[str, TaskClock] | None = None,
    thread_names: dict[str, ThreadNames] | None = None,
    start: Callable[..., LanggraphDevServer] | None = None,
) -> dict[str, LanggraphDevServer]:
    """A server per capture setting, in the order given (`start`: `start_server` by default);
    those started are stopped if one fails to."""
    start = start or start_server
    servers: dict[str, LanggraphDevServer] = {}
    try:
        for capture in captures:
            servers[capture] = start(
                capture, pace, collections[capture], (clocks or {}).get(capture), (thread_names or {}).get(capture)
            )
    except BaseException:
        for server in servers.values():
            server.stop()
        raise
    return servers



# The journal's store on a paired server, as the environment it adds: `sqlite`
# adds nothing, the harness's SQLite file.
STORES: dict[str, dict[str, str]] = {"sqlite": {}, "memory": {"JOURNAL_BRIDGE_STORE_URL": "memory://"}}


def start_paired(capture: str, collections: FullCollections, store: str = "sqlite",
                 probes: tuple[ProbeDirectory, ...] = ()) -> LanggraphDevServer:
    env = {
        **STORES[store],
        "JOURNAL_BRIDGE_CAPTURE": capture,
        "JOURNAL_BRIDGE_RECONCILE_INTERVAL": "0",
        "JOURNAL_BRIDGE_OFFLINE_SECONDS_PER_TOKEN": "0",
        # Each part of the probe: the same probe directory first on PYTHONPATH.
        **collections.env,
        **{key: value for probe in probes for key, value in probe.env.items()},
    }
    return quiet_dev_server(env=env, http={"app": f"{PAIRED_APP}:app"})


def rss_mib(pid: int) -> float:
    total = 0
    for proc in tree(pid):
        try:
            total += proc.memory_info().rss
        except psutil.NoSuchProcess:
            pass
    return total / 2**20
