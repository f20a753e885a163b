"""What journaling costs a LangGraph server, per kind of client and per capture setting.

Starts real `langgraph dev` servers of this project side by side -- one without
the plugin (`off`) and one per capture setting (`auto`, `events`, `lean`) --
and drives the same scripted workload against each through the SDK, the
servers taking turns round by round so none gets the quieter machine.

Client kinds:
- `values stream`: `runs.stream(stream_mode="values")`;
- `useStream`: `runs.stream` with `values`, `messages-tuple`, `custom` (what a
  useStream UI asks for); its reference row `useStream + events` is the same
  client asking for `events` itself on the server without the plugin -- what
  capturing from `events` costs by nature;
- `runs.wait`;
- `create+join`: `runs.create`, then `runs.join_stream` of `values`.

Printed per model (instant: the server's CPU is the bottleneck, every cost
shows; paced like a hosted model): wall time per run (median), server
CPU-seconds per run, server RSS after the workload, each with its ratio to
`off` for the same client (to the `useStream + events` reference for
`useStream` under `auto` and `events`). Then, with the instant model, a soak:
a long conversation per thread, the ratio of the run's wall time and server
CPU with the plugin to those without it (and to the client asking for
`events` itself) at its first and last turns, and RSS growth per 100 runs
(both after a warm-up turn that is not measured);
and the lag from a compaction's custom frame reaching a client to its marker
being readable.

Run: `python3 tasks.py bench bridge [--runs 40] [--threads 4] [--pace 0.02] [--soak-turns 50]`.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import psutil

from benchmarks.compaction_lag import turn_compaction_lags
from langgraph_sdk import get_client

from journal_bridge.store import open_store
from tests.harness.conversation import EARLY_SUMMARIZATION, TURNS, human, wait_journal_idle
from tests.harness.langgraph_server import LanggraphDevServer

CAPTURES = ("off", "auto", "events", "lean")
USE_STREAM = ["values", "messages-tuple", "custom"]

Run = Callable[[Any, str, str, str], Awaitable[None]]


async def _stream(client, thread_id: str, assistant_id: str, text: str, modes) -> None:
    async for _ in client.runs.stream(thread_id, assistant_id, input=human(text), stream_mode=modes):
        pass


async def values_stream(client, thread_id, assistant_id, text) -> None:
    await _stream(client, thread_id, assistant_id, text, "values")


async def use_stream(client, thread_id, assistant_id, text) -> None:
    await _stream(client, thread_id, assistant_id, text, USE_STREAM)


async def use_stream_events(client, thread_id, assistant_id, text) -> None:
    await _stream(client, thread_id, assistant_id, text, [*USE_STREAM, "events"])


async def wait(client, thread_id, assistant_id, text) -> None:
    await client.runs.wait(thread_id, assistant_id, input=human(text))


async def create_join(client, thread_id, assistant_id, text) -> None:
    run = await client.runs.create(thread_id, assistant_id, input=human(text))
    async for _ in client.runs.join_stream(thread_id, run["run_id"], stream_mode="values"):
        pass


CLIENTS: dict[str, Run] = {
    "values stream": values_stream,
    "useStream": use_stream,
    "runs.wait": wait,
    "create+join": create_join,
}


def _tree(pid: int) -> list[psutil.Process]:
    root = psutil.Process(pid)
    return [root, *root.children(recursive=True)]


def cpu_seconds(pid: int) -> float:
    total = 0.0
    for proc in _tree(pid):
        try:
            times = proc.cpu_times()
            total += times.user + times.system
        except psutil.NoSuchProcess:
            pass
    return total


def rss_mib(pid: int) -> float:
    total = 0
    for proc in _tree(pid):
        try:
            total += proc.memory_info().rss
        except psutil.NoSuchProcess:
            pass
    return total / 2**20


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class Cell:
    """One client kind against one server: durations and CPU of its runs."""

    def __init__(self, server: LanggraphDevServer, run: Run, journaled: bool) -> None:
        self.server = server
        self.client = get_client(url=server.url)
        self.run = run
        self.journaled = journaled
        self.assistant_id = ""
        self.threads: list[str] = []
        self.durations: list[float] = []
        self.cpu = 0.0
        self.turn = 0

    async def setup(self, threads: int) -> None:
        assistant = await self.client.assistants.create("agent", config={"configurable": EARLY_SUMMARIZATION})
        self.assistant_id = assistant["assistant_id"]
        self.threads = [(await self.client.threads.create())["thread_id"] for _ in range(threads)]

    async def round(self, runs: int) -> None:
        per_thread = [runs // len(self.threads) + (i < runs % len(self.threads)) for i in range(len(self.threads))]
        start = self.turn
        self.turn += max(per_thread)
        before = cpu_seconds(self.server.process.pid)

        async def drive(thread_id: str, count: int) -> None:
            for k in range(count):
                began = time.perf_counter()
                await self.run(self.client, thread_id, self.assistant_id, TURNS[(start + k) % len(TURNS)])
                self.durations.append(time.perf_counter() - began)

        await asyncio.gather(*(drive(t, n) for t, n in zip(self.threads, per_thread, strict=True)))
        if self.journaled:
            await wait_journal_idle(self.server.url, timeout=300)
        self.cpu += cpu_seconds(self.server.process.pid) - before

    @property
    def wall(self) -> float:
        return statistics.median(self.durations)

    @property
    def cpu_per_run(self) -> float:
        return self.cpu / len(self.durations)


def start_servers(pace: float) -> dict[str, LanggraphDevServer]:
    env = {"JOURNAL_BRIDGE_OFFLINE_SECONDS_PER_TOKEN": str(pace)}
    servers: dict[str, LanggraphDevServer] = {}
    try:
        for capture in CAPTURES:
            if capture == "off":
                servers[capture] = LanggraphDevServer(plugin=False, env=env).start()
            else:
                servers[capture] = LanggraphDevServer(env={**env, "JOURNAL_BRIDGE_CAPTURE": capture}).start()
    except BaseException:
        for server in servers.values():
            server.stop()
        raise
    return servers


async def matrix(label: str, pace: float, runs: int, threads: int, rounds: int) -> None:
    servers = start_servers(pace)
    try:
        cells: dict[tuple[str, str], Cell] = {}
        for kind, run in CLIENTS.items():
            for capture, server in servers.items():
                cells[kind, capture] = Cell(server, run, capture != "off")
        cells["useStream + events", "off"] = Cell(servers["off"], use_stream_events, False)
        for cell in cells.values():
            await cell.setup(threads)
        per_round = [runs // rounds + (i < runs % rounds) for i in range(rounds)]
        order = list(cells.values())
        for i, count in enumerate(per_round):
            for cell in order if i % 2 == 0 else reversed(order):
                await cell.round(count)
        rss = {capture: rss_mib(server.process.pid) for capture, server in servers.items()}
        health = {c: httpx.get(f"{s.url}/journal/health").json() for c, s in servers.items() if c != "off"}
    finally:
        for server in servers.values():
            server.stop()

    print()
    print(f"{label}: {runs} runs per cell over {threads} concurrent threads, {rounds} alternating rounds")
    header = f"{'client':20}{'capture':9}{'wall/run s':>11}{'ratio':>8}{'CPU/run ms':>12}{'ratio':>8}   baseline"
    print(header)
    print("-" * len(header))
    for kind in [*CLIENTS, "useStream + events"]:
        for capture in CAPTURES:
            cell = cells.get((kind, capture))
            if cell is None:
                continue
            if kind == "useStream" and capture in ("auto", "events"):
                base, base_name = cells["useStream + events", "off"], "useStream + events, off"
            else:
                base, base_name = cells[kind, "off"], "off"
            print(
                f"{kind:20}{capture:9}{cell.wall:11.3f}{cell.wall / base.wall:8.3f}"
                f"{cell.cpu_per_run * 1000:12.1f}{cell.cpu_per_run / base.cpu_per_run:8.3f}   {base_name}"
            )
    print("server RSS after the workload (MiB): " + ", ".join(
        f"{c} {rss[c]:.1f} ({rss[c] / rss['off']:.3f}x off)" for c in CAPTURES))
    for capture, report in health.items():
        print(f"  {capture}: {report['records_written']} records, {report['parts_seen']} parts read, "
              f"dropped {report['dropped']}, runs failed {report['runs_failed']}, "
              f"retained frames {report['retained_frames']}")


async def soak(turns: int, threads: int) -> None:
    """Long conversations: does journaling cost grow with the thread?

    Three servers side by side: the useStream client without the plugin
    (`off`), the same client asking for `events` itself without the plugin
    (`off+events`: what capturing from `events` costs by nature, which grows
    with the conversation too), and the useStream client with the plugin
    (`auto`, which captures it from `events`).
    """
    env = {"JOURNAL_BRIDGE_OFFLINE_SECONDS_PER_TOKEN": "0"}
    servers = {
        "off": LanggraphDevServer(plugin=False, env=env).start(),
        "off+events": LanggraphDevServer(plugin=False, env=env).start(),
        "auto": LanggraphDevServer(env={**env, "JOURNAL_BRIDGE_CAPTURE": "auto"}).start(),
    }
    try:
        cells = {
            "off": Cell(servers["off"], use_stream, False),
            "off+events": Cell(servers["off+events"], use_stream_events, False),
            "auto": Cell(servers["auto"], use_stream, True),
        }
        for cell in cells.values():
            await cell.setup(threads)
            # One warm-up turn, not measured: what a server allocates once (its
            # first run of the graph, the journal's store and caches) is not growth.
            await cell.round(threads)
        walls: dict[str, list[list[float]]] = {name: [] for name in cells}
        cpus: dict[str, list[float]] = {name: [] for name in cells}
        rss_start = {name: rss_mib(s.process.pid) for name, s in servers.items()}
        for turn in range(turns):
            for name, cell in (cells.items() if turn % 2 == 0 else reversed(list(cells.items()))):
                before, cpu_before = len(cell.durations), cell.cpu
                await cell.round(threads)
                walls[name].append(cell.durations[before:])
                cpus[name].append((cell.cpu - cpu_before) / threads)
        rss_end = {name: rss_mib(s.process.pid) for name, s in servers.items()}
    finally:
        for server in servers.values():
            server.stop()

    def wall(name: str, turns_: slice) -> float:
        return statistics.median([d for turn in walls[name][turns_] for d in turn])

    def cpu(name: str, turns_: slice) -> float:
        return statistics.mean(cpus[name][turns_])

    first, last = slice(0, 5), slice(turns - 5, turns)
    print()
    print(f"soak: {turns} turns in each of {threads} threads after a warm-up turn, useStream client, instant model")
    for label, turns_ in (("turns 1-5", first), (f"turns {turns - 4}-{turns}", last)):
        print(f"  {label:12} median wall s / server CPU ms per run: "
              + ", ".join(f"{n} {wall(n, turns_):.3f} / {cpu(n, turns_) * 1000:.1f}" for n in cells))
    for base in ("off", "off+events"):
        for what, measure in (("wall", wall), ("CPU", cpu)):
            early = measure("auto", first) / measure(base, first)
            late = measure("auto", last) / measure(base, last)
            print(f"  auto/{base} {what}: {early:.3f} at the first turns, {late:.3f} at the last;"
                  f" last/first {late / early:.3f}   target within 10%")
    hundreds = turns * threads / 100
    growth = {name: (rss_end[name] - rss_start[name]) / hundreds for name in servers}
    for name in servers:
        print(f"  RSS {name}: {rss_start[name]:.1f} -> {rss_end[name]:.1f} MiB, {growth[name]:.2f} MiB per 100 runs")
    for base in ("off", "off+events"):
        if growth[base] > 0:
            print(f"  RSS growth auto/{base}: {growth['auto'] / growth[base]:.3f}")


async def measure_lag(compactions: int) -> None:
    """Seconds from the custom frame reaching the client to the marker row being readable."""
    server = LanggraphDevServer(env={"JOURNAL_BRIDGE_CAPTURE": "auto"}).start()
    try:
        for label, modes in (("values+custom client (state capture)", ["values", "custom"]),
                             ("useStream client (events capture)", USE_STREAM)):
            client = get_client(url=server.url)
            assistant = await client.assistants.create("agent", config={"configurable": EARLY_SUMMARIZATION})
            thread_id = (await client.threads.create())["thread_id"]
            lags: list[float] = []
            async with open_store(server.store_url) as store:
                turn = 0
                while len(lags) < compactions:
                    text = TURNS[turn % len(TURNS)]
                    turn += 1
                    lags.extend(await turn_compaction_lags(client, store, thread_id, assistant["assistant_id"], text,
                                                           modes, poll=0.002))
            print(f"compaction -> marker readable, {label}, {len(lags)} compactions: "
                  f"p50 {pct(lags, .5) * 1000:.1f} ms, p99 {pct(lags, .99) * 1000:.1f} ms")
    finally:
        server.stop()


async def main(args: argparse.Namespace) -> None:
    await matrix("instant model (server CPU-bound)", 0.0, args.runs, args.threads, args.rounds)
    await matrix(f"model paced at {args.pace * 1000:g} ms per token", args.pace, args.runs, args.threads, args.rounds)
    await soak(args.soak_turns, args.soak_threads)
    print()
    await measure_lag(args.compactions)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=40, help="runs per cell")
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--pace", type=float, default=0.02, help="seconds per streamed token of the paced model")
    parser.add_argument("--soak-turns", type=int, default=50)
    parser.add_argument("--soak-threads", type=int, default=4)
    parser.add_argument("--compactions", type=int, default=20)
    # A stopped benchmark stops the servers it started: SIGTERM unwinds like Ctrl-C.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    asyncio.run(main(parser.parse_args()))
