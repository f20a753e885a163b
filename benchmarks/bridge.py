"""What journaling costs a LangGraph server: the plugin on vs off, side by side.

Starts two real `langgraph dev` servers of this project -- one with the plugin,
one without -- and drives the same scripted workload against both through the
SDK, alternating rounds so neither gets the quieter machine. The workload runs
twice: with the offline model answering instantly (the worst case: the
server's CPU is the bottleneck, so every cost of journaling shows in wall
time) and with the model paced like a hosted one (`--pace` seconds per
streamed token). Prints, per workload:

- wall time per run (median, p90), on/off ratio            (target <= 1.15)
- server CPU-seconds per run, on/off ratio
- server RSS after the workload, on/off ratio                (target <= 1.2)

and once:

- stream parts mapped per CPU-second (the mapper alone, and the server's
  extra CPU per part seen by the bridge)
- lag from a `summarization` custom frame reaching a client to its
  `middleware:summarize` row being readable in the store (p50/p99)

Run: `.venv/bin/python benchmarks/bridge.py [--runs 300] [--threads 8] [--pace 0.02]`.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

import httpx
import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from conversation import EARLY_SUMMARIZATION, TURNS, human, wait_journal_idle  # noqa: E402
from langgraph_sdk import get_client  # noqa: E402
from langgraph_server import LanggraphDevServer  # noqa: E402

from journal_bridge.mapping import RunMapper  # noqa: E402
from journal_bridge.store import open_store  # noqa: E402


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


class Target:
    def __init__(self, name: str, server: LanggraphDevServer) -> None:
        self.name = name
        self.server = server
        self.client = get_client(url=server.url)
        self.assistant_id: str | None = None
        self.threads: list[str] = []
        self.turn = 0
        self.durations: list[float] = []
        self.cpu = 0.0

    async def setup(self, threads: int) -> None:
        assistant = await self.client.assistants.create("agent", config={"configurable": EARLY_SUMMARIZATION})
        self.assistant_id = assistant["assistant_id"]
        self.threads = [(await self.client.threads.create())["thread_id"] for _ in range(threads)]

    async def round(self, runs: int) -> None:
        """`runs` runs spread over the threads, the threads running concurrently."""
        per_thread = [runs // len(self.threads) + (i < runs % len(self.threads)) for i in range(len(self.threads))]
        start_turn = self.turn
        self.turn += max(per_thread)
        cpu_before = cpu_seconds(self.server.process.pid)

        async def drive(thread_id: str, count: int) -> None:
            for k in range(count):
                text = TURNS[(start_turn + k) % len(TURNS)]
                began = time.perf_counter()
                async for _ in self.client.runs.stream(thread_id, self.assistant_id, input=human(text),
                                                       stream_mode=["values", "messages-tuple"]):
                    pass
                self.durations.append(time.perf_counter() - began)

        await asyncio.gather(*(drive(t, n) for t, n in zip(self.threads, per_thread)))
        if self.name == "on":
            await wait_journal_idle(self.server.url, timeout=300)
        self.cpu += cpu_seconds(self.server.process.pid) - cpu_before


async def measure_lag(server: LanggraphDevServer, compactions: int) -> list[float]:
    """Seconds from the custom frame reaching the client to the marker row being readable."""
    client = get_client(url=server.url)
    assistant = await client.assistants.create("agent", config={"configurable": EARLY_SUMMARIZATION})
    thread_id = (await client.threads.create())["thread_id"]
    lags: list[float] = []
    async with open_store(server.store_url) as store:
        turn = 0
        while len(lags) < compactions:
            text = TURNS[turn % len(TURNS)]
            turn += 1
            async for part in client.runs.stream(thread_id, assistant["assistant_id"], input=human(text),
                                                 stream_mode=["custom"]):
                if part.event != "custom" or not isinstance(part.data, dict):
                    continue
                seen = time.perf_counter()
                summary_id = part.data.get("summary_message_id")
                while True:
                    markers = await store.list_timeline(thread_id, categories=("middleware",), limit=500)
                    if any(m.content["changes"].get("summary_message_id") == summary_id for m in markers):
                        lags.append(time.perf_counter() - seen)
                        break
                    await asyncio.sleep(0.002)
    return lags


async def mapper_rate(server: LanggraphDevServer) -> tuple[float, int]:
    """Parts per CPU-second for `RunMapper` alone, over the parts of real runs."""
    client = get_client(url=server.url)
    thread_id = (await client.threads.create())["thread_id"]
    parts = []
    for text in TURNS[:6]:
        run = await client.runs.create(thread_id, "agent", input=human(text), stream_mode=["events"], stream_resumable=True)
        await client.runs.join(thread_id, run["run_id"])
        async for part in client.runs.join_stream(thread_id, run["run_id"], stream_mode="events", last_event_id="0"):
            parts.append((run["run_id"], part.event, part.data))
    repeats = max(1, 20_000 // max(1, len(parts)))
    began = time.process_time()
    for _ in range(repeats):
        mappers: dict[str, RunMapper] = {}
        for run_id, event, data in parts:
            mapper = mappers.setdefault(run_id, RunMapper(thread_id, run_id))
            mapper.feed(event, data)
    spent = time.process_time() - began
    return repeats * len(parts) / spent, len(parts)


async def compare(label: str, runs: int, threads: int, rounds: int, pace: float) -> LanggraphDevServer:
    env = {"JOURNAL_BRIDGE_OFFLINE_SECONDS_PER_TOKEN": str(pace)}
    on_server = LanggraphDevServer(plugin=True, env=env).start()
    try:
        with LanggraphDevServer(plugin=False, env=env) as off_server:
            targets = [Target("off", off_server), Target("on", on_server)]
            for target in targets:
                await target.setup(threads)
            rss_start = {t.name: rss_mib(t.server.process.pid) for t in targets}
            per_round = [runs // rounds + (i < runs % rounds) for i in range(rounds)]
            for i, count in enumerate(per_round):
                for target in targets if i % 2 == 0 else reversed(targets):
                    await target.round(count)
            rss_end = {t.name: rss_mib(t.server.process.pid) for t in targets}
    except BaseException:
        on_server.stop()
        raise
    off, on = targets
    med_on, med_off = statistics.median(on.durations), statistics.median(off.durations)
    cpu_on, cpu_off = on.cpu / len(on.durations), off.cpu / len(off.durations)
    print()
    print(f"{label}: {runs} runs per server over {threads} concurrent threads, {rounds} alternating rounds")
    print(f"{'':34}{'plugin off':>14}{'plugin on':>14}{'on/off':>10}")
    print(f"{'wall per run, median (s)':34}{med_off:14.3f}{med_on:14.3f}{med_on / med_off:10.3f}   target <= 1.15")
    print(f"{'wall per run, p90 (s)':34}{pct(off.durations, .9):14.3f}{pct(on.durations, .9):14.3f}"
          f"{pct(on.durations, .9) / pct(off.durations, .9):10.3f}")
    print(f"{'server CPU per run (ms)':34}{cpu_off * 1000:14.1f}{cpu_on * 1000:14.1f}{cpu_on / cpu_off:10.3f}")
    print(f"{'server RSS at start (MiB)':34}{rss_start['off']:14.1f}{rss_start['on']:14.1f}"
          f"{rss_start['on'] / rss_start['off']:10.3f}")
    print(f"{f'server RSS after {runs} runs (MiB)':34}{rss_end['off']:14.1f}{rss_end['on']:14.1f}"
          f"{rss_end['on'] / rss_end['off']:10.3f}   target <= 1.2")
    health = httpx.get(f"{on_server.url}/journal/health").json()
    extra_cpu = max(1e-9, on.cpu - off.cpu)
    print(f"bridge: {health['parts_seen']} stream parts, {health['records_written']} records written, "
          f"dropped {health['dropped']}, retried {health['retried']}, retained frames {health['retained_frames']}; "
          f"{health['parts_seen'] / extra_cpu:,.0f} parts per extra server CPU-second")
    return on_server


async def main(runs: int, threads: int, rounds: int, compactions: int, pace: float) -> None:
    instant = await compare("instant model (server CPU-bound)", runs, threads, rounds, 0.0)
    try:
        print()
        rate, sample = await mapper_rate(instant)
        print(f"parts mapped per CPU-second by RunMapper alone ({sample} real parts): {rate:,.0f}")
        lags = await measure_lag(instant, compactions)
        print(f"custom frame at client -> marker row readable, {len(lags)} compactions: "
              f"p50 {pct(lags, .5) * 1000:.1f} ms, p99 {pct(lags, .99) * 1000:.1f} ms")
    finally:
        instant.stop()
    paced = await compare(f"model paced at {pace * 1000:g} ms per token", runs, threads, rounds, pace)
    paced.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--compactions", type=int, default=30)
    parser.add_argument("--pace", type=float, default=0.02, help="seconds per streamed token of the paced model")
    args = parser.parse_args()
    asyncio.run(main(args.runs, args.threads, args.rounds, args.compactions, args.pace))
