"""What journaling costs a LangGraph server, per kind of client and per capture setting.

Starts real `langgraph dev` servers of this project side by side -- one without
the plugin (`off`), one with the floor (`floor`, below) and one per capture
setting (`auto`, `lean`, `events`) -- and drives the same scripted workload
against each through the SDK, the cells interleaved round by round (the order
of client kinds and of servers rotated every round) so none gets the quieter
machine.

`floor` is what reading runs through langgraph-sdk costs at the least
(`benchmarks/floor_app.py`, the server's `http.app` in place of the plugin):
the plugin's own request rewrite (`RunObserverMiddleware` with the `lean`
setting: `stream_resumable` plus the `values` and `custom` modes the client
did not ask for, their frames dropped from what it gets) and, for every run,
one `runs.join_stream` from the first frame through the plugin's in-process
SDK client (the reader's join: the capture's modes plus `error`), frames
discarded; the run's retained frames released when the join ends. Nothing
mapped, queued or stored, no outcome read, none of the plugin's other
middleware or routes. A streamed run is joined too, where the plugin reads it
from its client's frames instead: for the streaming clients the floor is a
second reader the plugin does not have. `floor-twin` (only with `--capture
floor-twin`) is a second floor server, started and driven as the first: its
excess over the floor is what two identical servers differ by, the least
difference the matrix can tell from none. With the twin, the pooled tables
also give each setting's excess over the mean of the two floors, a floor
known twice as well.

Client kinds:
- `values stream`: `runs.stream(stream_mode="values")`;
- `useStream`: `runs.stream` with `values`, `messages-tuple`, `custom` (what a
  useStream UI asks for); its reference row `useStream + events` is the same
  client asking for `events` itself on the server without the plugin -- what
  capturing from `events` costs by nature;
- `runs.wait`;
- `create+join`: `runs.create`, then `runs.join_stream` of `values`.

Printed per model (instant: the server's CPU is the bottleneck, every cost
shows; paced like a hosted model), per cell: server CPU-seconds per run and
median wall time per run over all rounds, and per round the cell's figure
divided by `off`'s for the same client in the same round: the median of
those ratios with their spread ([min max] over the rounds), and each
setting's excess over the floor (per round its ratio minus the floor's; median
[min max]). Then the CPU pooled over all rounds -- the cell's CPU-seconds over
`off`'s, and its excess over the floor, (cell - floor) / off -- each with
the 5th-95th percentile of that figure over the rounds resampled with
replacement: a single round swings by tens of percent (the runtime's polling
loops run by the clock, not by the run), the pooled figure far less, and the
interval says how far. With `--instances`, the sets of servers are drawn
first and then the rounds within each: two sets of identical servers differ
by more than rounds of one set do, and an interval over rounds alone would
hide that. The wall time is pooled the same way, from each
round's median: with a paced model a round of a few runs moves by a tenth,
and the median of a few such ratios with it. The CPU of each server's
event-loop thread (its main thread: requests, the runtime's queue, the
journal's reader) per run, its share of the server's, and how many
milliseconds above the floor's a setting puts on that thread and on the
others; with `--tasks`, that thread's CPU split by task (the journal's, the
floor's, the server's own, outside tasks) and the kinds of task most above
the floor's. Server RSS after the workload.

Server CPU is each process's own CPU clock read from outside, to the
nanosecond (`benchmarks/process_cpu.py`). Every server runs with the dev
server's file persistence off (`quiet_dev_server`), the same for all of them. The
matrices count each server's full garbage collections during the measured
rounds, with their CPU (`benchmarks/full_collections.py`): one walks the
in-memory runtime's whole heap, about a tenth of a second landing in
whichever round the collector's threshold falls in, about 0.2 of `off`'s
figure for that round. The pooled CPU is printed twice: as measured, and
less the full collections that came in each round (their count per server
says whether a setting brings more of them). Then, with the instant model, a soak:
a long conversation per thread, the ratio of the run's wall time and server
CPU with the plugin to those without it (and to the client asking for
`events` itself) at its first and last turns, and RSS growth per 100 runs
over the whole soak and over its second half (after a warm-up turn that is
not measured), from the readings at either end and as a line fitted through
the reading after every turn, with the 5-95% interval of the ratio (with
`--instances`, the soak runs on that many sets of servers, pooled, and the
ratios are printed per set instead; with `--soak-resumable` its client asks
for resumable streams, as useStream with `reconnectOnMount` does);
and the lag from a compaction's custom frame reaching a client to its marker
being readable.

Run: `python3 tasks.py bench bridge [--runs 8] [--rounds 5] [--minutes 0] [--threads 4] [--pace 0.02]
[--soak-turns 50] [--soak-threads 8] [--soak-resumable] [--only instant|paced|soak|lag ...] [--client KIND ...]
[--capture auto|lean|events ...] [--warm 0] [--instances 1] [--tasks]` (`--runs` per cell per round; more rounds
than `--rounds` while the next fits in `--minutes` per matrix; `--client` and `--capture` narrow the
matrices, `--warm` runs that many unmeasured runs in each cell's turn before its measured ones,
`--instances` shares the rounds among that many sets of servers started one after the other, and
runs the soak that many times). The
soak's threads each take a turn per round: its first and last five turns are 40 runs per server each
with the default 8 threads (the per-run CPU of a round swings as said above; more runs per window
narrow the ratios). A fixed pure-Python loop's CPU, printed at the start and
the end, says how fast the machine ran: milliseconds per run compare across
runs only at the same speed, ratios taken side by side do.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import random
import signal
import statistics
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any

import httpx
import psutil
from langgraph_sdk.client import LangGraphClient

from benchmarks.compaction_lag import turn_compaction_lags
from benchmarks.full_collections import Collections, FullCollections
from benchmarks.pinning import CpuSplit
from benchmarks.process_cpu import (
    Scheduling,
    probe_seconds,
    thread_seconds,
    threads_seconds,
    tree,
    tree_scheduling,
    tree_seconds,
)
from benchmarks.server_threads import LOOP, ThreadNames, split
from benchmarks.task_clock import JOURNAL, SETTLED, TaskClock, grouped
from journal_bridge.store import open_store
from tests.harness.conversation import (
    EARLY_SUMMARIZATION,
    TURNS,
    human,
    wait_journal_idle,
)
from tests.harness.langgraph_server import LanggraphDevServer, project_config

CAPTURES = ("off", "floor", "auto", "lean", "events", "floor-twin")
# Run only when asked for (`--capture floor-twin`): a second floor server, the same in every way.
ON_REQUEST = ("floor-twin",)
BOTH_FLOORS = ("floor", "floor-twin")
# The `floor` server's app: the plugin's request rewrite and one SDK join per run, nothing more.
FLOOR_APP = Path(__file__).resolve().with_name("floor_app.py")
USE_STREAM = ["values", "messages-tuple", "custom"]

Run = Callable[[Any, str, str, str], Awaitable[None]]


async def _stream(client, thread_id: str, assistant_id: str, text: str, modes, resumable: bool = False) -> None:
    async for _ in client.runs.stream(thread_id, assistant_id, input=human(text), stream_mode=modes,
                                      stream_resumable=resumable):
        pass


async def values_stream(client, thread_id, assistant_id, text) -> None:
    await _stream(client, thread_id, assistant_id, text, "values")


async def use_stream(client, thread_id, assistant_id, text) -> None:
    await _stream(client, thread_id, assistant_id, text, USE_STREAM)


async def use_stream_events(client, thread_id, assistant_id, text) -> None:
    await _stream(client, thread_id, assistant_id, text, [*USE_STREAM, "events"])


async def use_stream_resumable(client, thread_id, assistant_id, text) -> None:
    """useStream with `reconnectOnMount`: its runs are resumable, the server keeps their frames."""
    await _stream(client, thread_id, assistant_id, text, USE_STREAM, resumable=True)


async def use_stream_resumable_events(client, thread_id, assistant_id, text) -> None:
    await _stream(client, thread_id, assistant_id, text, [*USE_STREAM, "events"], resumable=True)


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


def rss_mib(pid: int) -> float:
    total = 0
    for proc in tree(pid):
        try:
            total += proc.memory_info().rss
        except psutil.NoSuchProcess:
            pass
    return total / 2**20


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def control_request(url: str) -> None:
    """What a round's end costs a server without the plugin: one request on a
    new connection, as the journaled cells' wait for their journal makes at
    least one (about 1.6 ms of the server's CPU, a tenth of a millisecond
    per run in a round of 16), so that it is on both sides of a ratio to `off`."""
    async with httpx.AsyncClient(base_url=url, timeout=10) as http:
        (await http.get("/ok")).raise_for_status()


# How long after a full collection its probe's report is surely written.
_REPORTED = 0.05


class Cell:
    """One client kind against one server: durations and CPU of its runs, overall and per round."""

    def __init__(
        self,
        server: LanggraphDevServer,
        run: Run,
        journaled: bool,
        collections: FullCollections | None = None,
        clock: TaskClock | None = None,
        thread_names: ThreadNames | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.server = server
        # Sent with every request of the cell (the paired benchmark's floor cells carry one).
        self.headers = headers
        self.collections = collections
        # The server's thread names, and its CPU seconds during the measured
        # rounds per group of threads (`benchmarks/server_threads.py`).
        self.thread_names = thread_names
        self.by_thread: Counter[str] = Counter()
        # With `--tasks`: the server's task clock, and the CPU seconds of its
        # event loop's tasks during the measured rounds, per kind of task.
        self.clock = clock
        self.tasks: Counter[str] = Counter()
        # The server's full garbage collections during the measured rounds.
        self.during = Collections()
        self.client = sdk_client(server.url, headers)
        self.run = run
        self.journaled = journaled
        self.assistant_id = ""
        self.threads: list[str] = []
        self.durations: list[float] = []
        self.cpu = 0.0
        # The benchmark's own CPU while the cell's runs ran: its clients' (the
        # cells of a round run one after another).
        self.client_cpu = 0.0
        # The server's context switches and CPU migrations during the measured rounds.
        self.scheduling = Scheduling()
        # CPU of the server's main thread, its event loop: where requests are served
        # and the journal's reader maps and queues (NaN where it cannot be read).
        self.loop_cpu = 0.0
        self.turn = 0
        # Per measured round: (median wall s, server CPU s per run, the same
        # without the server's full collections in the round, its middle and
        # full collections per run); see `WALL` and the positions after it.
        self.rounds: list[tuple[float, ...]] = []

    async def serve(self, server: LanggraphDevServer) -> None:
        """Drive `server` from now on: another process of the same setting (`setup` again)."""
        if server is self.server:
            return
        await self.client.aclose()
        self.server = server
        self.client = sdk_client(server.url, self.headers)

    async def setup(self, threads: int) -> None:
        assistant = await self.client.assistants.create("agent", config={"configurable": EARLY_SUMMARIZATION})
        self.assistant_id = assistant["assistant_id"]
        self.threads = [(await self.client.threads.create())["thread_id"] for _ in range(threads)]

    async def round(self, runs: int, *, measured: bool = True) -> None:
        per_thread = [runs // len(self.threads) + (i < runs % len(self.threads)) for i in range(len(self.threads))]
        start = self.turn
        self.turn += max(per_thread)
        tasks_before = await self._task_totals()
        pid = self.server.process.pid
        threads_before = threads_seconds(pid) if self.thread_names else {}
        before = tree_seconds(pid)
        loop_before = _loop_seconds(self.server)
        collected = self.collections.totals() if self.collections else None
        scheduled = tree_scheduling(pid)
        durations: list[float] = []

        async def drive(thread_id: str, count: int) -> None:
            for k in range(count):
                began = time.perf_counter()
                await self.run(self.client, thread_id, self.assistant_id, TURNS[(start + k) % len(TURNS)])
                durations.append(time.perf_counter() - began)

        client_before = time.process_time()
        await asyncio.gather(*(drive(t, n) for t, n in zip(self.threads, per_thread, strict=True)))
        client_cpu = time.process_time() - client_before
        if self.journaled:
            await wait_journal_idle(self.server.url, timeout=300)
        else:
            await control_request(self.server.url)
        cpu = tree_seconds(pid) - before
        scheduling = tree_scheduling(pid) - scheduled
        loop_cpu = _loop_seconds(self.server) - loop_before
        threads_after = threads_seconds(pid) if self.thread_names else {}
        tasks_after = await self._task_totals()
        if not measured:
            return
        if self.thread_names is not None and threads_after:
            self.by_thread.update(split(pid, threads_before, threads_after, self.thread_names.names(pid), cpu))
        if tasks_before is not None and tasks_after is not None:
            self.tasks.update(tasks_after - tasks_before)
        during = Collections()
        if self.collections is not None and collected is not None:
            # A probe writes a collection's report a moment after it ends.
            await asyncio.sleep(_REPORTED)
            during = self.collections.totals() - collected
            self.during += during
        self.durations.extend(durations)
        self.cpu += cpu
        self.client_cpu += client_cpu
        self.scheduling += scheduling
        self.loop_cpu += loop_cpu
        self.rounds.append((
            statistics.median(durations), cpu / len(durations), (cpu - during.seconds) / len(durations),
            (during.middle + during.full) / len(durations),
        ))

    async def _task_totals(self) -> Counter[str] | None:
        """The task clock's sums once what ran before is surely in them (None without one)."""
        if self.clock is None:
            return None
        await asyncio.sleep(SETTLED)
        return self.clock.totals()

    @property
    def wall(self) -> float:
        return statistics.median(self.durations)

    @property
    def cpu_per_run(self) -> float:
        return self.cpu / len(self.durations)

    @property
    def loop_cpu_per_run(self) -> float:
        return self.loop_cpu / len(self.durations)


def _loop_seconds(server: LanggraphDevServer) -> float:
    """CPU seconds so far of the server's event-loop thread (its process's main thread)."""
    pid = server.process.pid
    seconds = thread_seconds(pid, pid)
    return math.nan if seconds is None else seconds


def sdk_client(url: str, headers: dict[str, str] | None = None) -> LangGraphClient:
    """langgraph-sdk's client as `get_client` makes it, except that an idle
    connection is dropped after a second: the server (uvicorn) closes one idle
    for 5 s, and a cell whose client sat out other cells' turns for about that
    long would send its next run on a connection being closed (a `ReadError`)."""
    return LangGraphClient(
        httpx.AsyncClient(
            base_url=url,
            headers=headers,
            transport=httpx.AsyncHTTPTransport(retries=5, limits=httpx.Limits(keepalive_expiry=1.0)),
            timeout=httpx.Timeout(connect=5, read=300, write=300, pool=5),
        )
    )


# `langgraph dev` pickles its whole in-memory runtime to disk every 10 s from a
# thread of its own: the same work on every server, growing with what the
# server holds (35 MB after a matrix), landing in some rounds and not in
# others. Sampled on a floor, an `auto` and a `lean` server under the same
# load, it was 5-24% of each one's CPU, the most on whichever server its
# ticks happened to fall on; nothing of the journal is in it. Every benchmark
# server runs without it (`benchmarks/quiet_dev.py`), checked in its log.
QUIET_DEV = Path(__file__).resolve().with_name("quiet_dev.py")
_FLUSH_LOOP_LINE = "Starting dev persistence flush loop"


def quiet_dev_server(*, plugin: bool = True, env: dict[str, str], **config: Any) -> LanggraphDevServer:
    """A started `langgraph dev` without file persistence (`config`: more of the
    project's keys); refused if its log shows the flush loop all the same."""
    server = LanggraphDevServer(
        config=project_config(plugin=plugin, **config), env=env, program=[sys.executable, str(QUIET_DEV)]
    ).start()
    if _FLUSH_LOOP_LINE in server.read_log():
        server.stop()
        raise RuntimeError("a benchmark server persists its runtime to disk although launched not to")
    return server


def start_server(
    capture: str,
    pace: float,
    collections: FullCollections | None = None,
    clock: TaskClock | None = None,
    thread_names: ThreadNames | None = None,
) -> LanggraphDevServer:
    env = {
        "JOURNAL_BRIDGE_OFFLINE_SECONDS_PER_TOKEN": str(pace),
        **(collections.env if collections else {}),
        # Each part of the probe: the same probe directory first on PYTHONPATH.
        **(clock.env if clock else {}),
        **(thread_names.env if thread_names else {}),
    }
    if capture == "off":
        return quiet_dev_server(plugin=False, env=env)
    if capture in ("floor", "floor-twin"):
        return quiet_dev_server(env=env, http={"app": f"{FLOOR_APP}:app"})
    return quiet_dev_server(env={**env, "JOURNAL_BRIDGE_CAPTURE": capture})


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
) -> dict[str, LanggraphDevServer]:
    servers: dict[str, LanggraphDevServer] = {}
    try:
        for capture in captures:
            servers[capture] = start_server(
                capture, pace, collections[capture], (clocks or {}).get(capture), (thread_names or {}).get(capture)
            )
    except BaseException:
        for server in servers.values():
            server.stop()
        raise
    return servers


def rotated(items: list[Any], by: int) -> list[Any]:
    by %= len(items)
    return items[by:] + items[:by]


class Spread:
    """A per-round figure: its median and its spread (min-max) over the rounds."""

    def __init__(self, values: list[float]) -> None:
        self.values = values
        self.median = statistics.median(values)
        self.low, self.high = min(values), max(values)

    def __str__(self) -> str:
        return f"{self.median:6.3f} [{self.low:6.3f} {self.high:6.3f}]"


def per_round(cells: dict[tuple[str, str], Cell], kind: str, capture: str, index: int) -> list[float]:
    """The cell's per-round ratio to `off` for the same client (index 0: wall, 1: CPU)."""
    base = cells[kind, "off"].rounds
    return [mine[index] / off[index] for mine, off in zip(cells[kind, capture].rounds, base, strict=True)]


# `Cell.rounds` positions of the pooled figures: the round's median wall, the
# server's CPU, and that CPU less the full collections in the round; then the
# collections of the middle and oldest generations in the round (each full
# collection is in place of a middle one), all per run.
WALL, CPU, CPU_BESIDE_COLLECTIONS, COLLECTIONS = 0, 1, 2, 3


def pooled_ratio(
    cells: dict[tuple[str, str], Cell],
    kind: str,
    capture: str,
    rounds: list[int],
    figure: int = CPU,
    floors: tuple[str, ...] = ("floor",),
) -> tuple[float, float]:
    """The cell's `figure` (CPU by default; `WALL`: the rounds' median walls) summed
    over the given rounds (repeats allowed) and divided by `off`'s, and its excess
    over the floor's: (cell - floor) / off, all over the same rounds. With more
    than one of `floors` (the floor and its twin), the floor is their mean."""

    def total(name: str) -> float:
        figures = cells[kind, name].rounds
        return sum(figures[i][figure] for i in rounds)

    off = total("off")
    mine = total(capture) / off
    if not all((kind, name) in cells for name in floors):
        return mine, float("nan")
    return mine, mine - statistics.fmean(total(name) for name in floors) / off


def pooled_with_interval(
    cells: dict[tuple[str, str], Cell],
    kind: str,
    capture: str,
    resamples: int = 2000,
    figure: int = CPU,
    blocks: list[range] | None = None,
    floors: tuple[str, ...] = ("floor",),
) -> tuple[tuple[float, float], tuple[float, float], tuple[float, float]]:
    """`pooled_ratio` over every round, and the 5th-95th percentile of each figure over
    the rounds resampled with replacement (a bootstrap: how far the figure moves
    were the rounds drawn again).

    With `blocks` (the rounds of each set of servers, more than one set), the
    sets are drawn with replacement first, then the rounds within each drawn
    set: a set's rounds share its processes' luck, so the interval also says
    how far the figure moves with other processes, not only with other rounds.
    """
    count = len(cells[kind, "off"].rounds)
    whole = pooled_ratio(cells, kind, capture, list(range(count)), figure, floors)
    draw = random.Random(f"{kind}/{capture}")
    sets = [list(block) for block in blocks or [] if len(block)]

    def rounds() -> list[int]:
        if len(sets) < 2:
            return [draw.randrange(count) for _ in range(count)]
        drawn = [sets[draw.randrange(len(sets))] for _ in sets]
        return [block[draw.randrange(len(block))] for block in drawn for _ in block]

    samples = [pooled_ratio(cells, kind, capture, rounds(), figure, floors) for _ in range(resamples)]
    ratios, excesses = ([sample[index] for sample in samples] for index in (0, 1))
    return whole, (pct(ratios, 0.05), pct(ratios, 0.95)), (pct(excesses, 0.05), pct(excesses, 0.95))


def rss_slope(readings: list[float], turns: list[int]) -> float:
    """MiB per turn: the least-squares line through the readings of these turns."""
    mean_x = statistics.fmean(turns)
    mean_y = statistics.fmean(readings[t] for t in turns)
    spread = sum((t - mean_x) ** 2 for t in turns)
    return sum((t - mean_x) * (readings[t] - mean_y) for t in turns) / spread if spread else 0.0


def slope_ratio_interval(
    readings: list[float], base: list[float], turns: list[int], resamples: int = 2000
) -> tuple[float, float]:
    """The 5th-95th percentile of one server's growth over another's, the turns
    resampled with replacement (the same turns for both)."""
    draw = random.Random("rss")
    ratios = []
    for _ in range(resamples):
        sample = [draw.choice(turns) for _ in turns]
        below = rss_slope(base, sample)
        if below > 0:
            ratios.append(rss_slope(readings, sample) / below)
    if not ratios:
        return float("nan"), float("nan")
    return pct(ratios, 0.05), pct(ratios, 0.95)


def print_loop_threads(cells: dict[tuple[str, str], Cell], kinds: list[str], captures: tuple[str, ...]) -> None:
    """Per cell, the CPU of the server's event-loop thread per run, its share of the
    server's, and its excess over the floor's in milliseconds: whether what a
    setting adds lands on the thread that serves every request, or beside it."""
    print("the server's event-loop thread (its main thread): CPU per run, share of the server's, and ms above "
          "the floor's (the rest of the server's CPU: its other threads, SQLite's among them)")
    for kind, capture, cell in cell_rows(cells, kinds, captures):
        loop = cell.loop_cpu_per_run * 1000
        row = f"  {kind:20}{capture:12}{loop:7.2f} ms  {cell.loop_cpu / cell.cpu:6.1%} of the server's"
        floor = cells.get((kind, "floor"))
        if floor is not None and capture not in ("off", "floor") and floor.durations:
            rest = (cell.cpu_per_run - cell.loop_cpu_per_run) - (floor.cpu_per_run - floor.loop_cpu_per_run)
            above = loop - floor.loop_cpu_per_run * 1000
            row += f"   above the floor: loop {above:+6.2f} ms, rest {rest * 1000:+6.2f} ms"
        print(row)


def room_per_run(cell: Cell) -> tuple[float, float, float, float]:
    """Per measured run of `cell`: its clients' CPU in ms (the benchmark's), and
    its server's threads' sleeps, preemptions and moves to another CPU."""
    runs = len(cell.durations) or 1
    counts = cell.scheduling
    return cell.client_cpu / runs * 1000, counts.voluntary / runs, counts.involuntary / runs, counts.migrations / runs


def print_scheduling(cells: dict[tuple[str, str], Cell], kinds: list[str], captures: tuple[str, ...]) -> None:
    """Per cell and per run, the benchmark's CPU while the cell's runs ran (its
    clients') and the server's threads' sleeps, preemptions and moves to another
    CPU: unpinned, a cell whose clients leave a CPU idle has the server's
    threads woken there, which costs the server CPU the other cells do not pay."""
    print("per run: the cell's clients' CPU (the benchmark's), and the server's threads' sleeps, preemptions "
          "and moves to another CPU")
    for kind, capture, cell in cell_rows(cells, kinds, captures):
        clients, sleeps, preemptions, moves = room_per_run(cell)
        print(f"  {kind:20}{capture:12}clients {clients:6.2f} ms   sleeps {sleeps:7.1f}   "
              f"preemptions {preemptions:6.1f}   moves {moves:6.1f}")


def print_threads(cells: dict[tuple[str, str], Cell], kinds: list[str], captures: tuple[str, ...]) -> None:
    """Per cell, the server's CPU per run split by thread (`benchmarks/server_threads.py`):
    the event loop, the SQLite connections, the executor pool, and the rest by
    name, each with its excess over the floor's in milliseconds."""
    rows = cell_rows(cells, kinds, captures, lambda cell: bool(cell.by_thread))
    if not rows:
        return
    groups: Counter[str] = Counter()
    for _, _, cell in rows:
        groups.update({name: seconds / len(cell.durations) for name, seconds in cell.by_thread.items()})
    order = [LOOP, *(name for name, _ in groups.most_common() if name != LOOP)]
    print("the server's CPU per run by thread, in ms (below each setting: its excess over the floor's)")
    print(f"  {'':32}" + "".join(f"{name[:18]:>20}" for name in order))
    for kind, capture, cell in rows:
        per_run = {name: cell.by_thread[name] / len(cell.durations) * 1000 for name in order}
        print(f"  {kind:20}{capture:12}" + "".join(f"{per_run[name]:20.3f}" for name in order))
        floor = cells.get((kind, "floor"))
        if capture in ("off", "floor") or floor is None or not floor.by_thread:
            continue
        print(f"  {'':20}{'above floor':12}" + "".join(
            f"{per_run[name] - floor.by_thread[name] / len(floor.durations) * 1000:+20.3f}" for name in order))


def cell_rows(
    cells: dict[tuple[str, str], Cell],
    kinds: list[str],
    captures: tuple[str, ...],
    wanted: Callable[[Cell], bool] = lambda cell: True,
) -> list[tuple[str, str, Cell]]:
    """The measured cells (those `wanted` picks), client kind by kind, in the captures' order."""
    return [
        (kind, capture, cell)
        for kind in kinds
        for capture in captures
        if (cell := cells.get((kind, capture))) is not None and cell.durations and wanted(cell)
    ]


def print_tasks(cells: dict[tuple[str, str], Cell], kinds: list[str], captures: tuple[str, ...], top: int = 6) -> None:
    """Per cell, the event-loop thread's CPU per run split by task: the journal's
    tasks, the floor's, the server's own, and what the loop ran outside tasks;
    then the journal's costliest kinds and, for each setting, the kinds of task
    whose CPU per run is the most above the floor's (and, for useStream, above
    that client asking for `events` itself on the server without the plugin)."""
    print("the event loop's tasks (clocked at each step: a clocked server runs slower), CPU per run in ms: "
          "the loop thread, the journal's tasks, the floor's, the server's own, and the loop outside tasks")
    for kind, capture, cell in cell_rows(cells, kinds, captures, lambda cell: cell.clock is not None):
        runs = len(cell.durations)
        groups = grouped(cell.tasks)
        loop = cell.loop_cpu_per_run * 1000
        outside = loop - sum(groups.values()) / runs * 1000
        print(f"  {kind:20}{capture:12}loop {loop:6.2f}   journal {groups['journal'] / runs * 1000:6.3f}   "
              f"floor {groups['floor'] / runs * 1000:6.3f}   server {groups['server'] / runs * 1000:6.2f}   "
              f"outside tasks {outside:5.2f}")
        journal = [(name, seconds) for name, seconds in cell.tasks.most_common() if name.startswith(JOURNAL)]
        for name, seconds in journal[:top]:
            print(f"{'':36}{seconds / runs * 1000:7.3f}  {name}")
        if capture in ("off", "floor"):
            continue
        # The floor, and for useStream the same client asking for `events` itself without the plugin.
        references = (
            ((kind, "floor"), "the floor's"),
            ((f"{kind} + events", "off"), "that client asking for `events` itself, off"),
        )
        for reference, label in references:
            other = cells.get(reference)
            if other is None or not other.durations:
                continue
            above = Counter({
                name: cell.tasks[name] / runs - other.tasks[name] / len(other.durations)
                for name in set(cell.tasks) | set(other.tasks)
            })
            print(f"{'':32}above {label}, by kind of task:")
            for name, seconds in above.most_common(top):
                print(f"{'':36}{seconds * 1000:+7.3f}  {name}")


async def matrix(
    label: str,
    pace: float,
    runs: int,
    threads: int,
    rounds: int,
    minutes: float,
    *,
    clients: tuple[str, ...] = tuple(CLIENTS),
    captures: tuple[str, ...] = CAPTURES,
    warm: int = 0,
    instances: int = 1,
    tasks: bool = False,
    pin: CpuSplit | None = None,
) -> None:
    """Every client kind against every server, the cells interleaved round by round.

    Each round runs `runs` runs per cell, cell after cell, in an order rotated
    every round (client kinds and, within each, the servers), after one
    warm-up round that is not measured; there are `rounds` rounds at least,
    and more while the next one fits in `minutes` (0: no more). A ratio is
    taken per round (the cell against `off` for the same client in the same
    round), so a round on a busier machine moves both sides of it.

    With `instances`, the rounds are shared among that many sets of servers,
    one after the other, each started afresh: two identical servers differ by
    more than the figures this matrix is after, so a figure taken from one
    process per setting is partly that process's luck. The pooled figures are
    printed per set too. Each set starts its servers in a shuffled order: with
    the same order every time, the floor's twin (started last) came out 0.044
    of `off` below the floor, the interval excluding zero; shuffled, -0.006.

    `clients` and `captures` narrow the matrix (`off` and the floor are always
    in it). With `warm`, each cell first runs that many runs unmeasured in its
    turn: the figure of a server serving without pause, not one whose turn
    comes after the other servers' turns have run through the machine's caches.
    With `tasks`, every server's event-loop tasks are clocked
    (`benchmarks/task_clock.py`) and their CPU per run printed by kind. With
    `pin`, every set's servers run on one CPU and the clients on the others
    (`benchmarks/pinning.py`).
    """
    captures = tuple(c for c in CAPTURES if c in ("off", "floor") or c in captures)
    collections = {capture: FullCollections() for capture in captures}
    clocks = {capture: TaskClock() for capture in captures} if tasks else {}
    thread_names = {capture: ThreadNames() for capture in captures}
    cells: dict[tuple[str, str], Cell] = {}
    kinds = list(clients) + (["useStream + events"] if "useStream" in clients else [])
    # The rounds each set of servers ran: a server's figure moves with the
    # process it happens to be (two identical servers differ), so the rounds
    # are spread over `instances` sets of servers, each started afresh.
    blocks: list[range] = []
    done = 0
    began = time.monotonic()
    try:
        instances = max(1, instances)
        for instance in range(instances):
            servers = start_servers(pace, collections, tuple(start_order(captures, instance)), clocks, thread_names)
            try:
                if pin is not None:
                    pinned = pin.pin([server.process.pid for server in servers.values()])
                    if instance == 0:
                        print(f"{label}: {pinned}")
                plan = [(kind, capture, CLIENTS[kind]) for kind in clients for capture in captures]
                if "useStream" in clients:
                    plan.append(("useStream + events", "off", use_stream_events))
                for kind, capture, run in plan:
                    server = servers[capture]
                    if (kind, capture) not in cells:
                        cells[kind, capture] = Cell(
                            server,
                            run,
                            capture != "off",
                            collections[capture],
                            clocks.get(capture),
                            thread_names[capture],
                        )
                    await cells[kind, capture].serve(server)
                for cell in cells.values():
                    await cell.setup(threads)
                for cell in cells.values():
                    await cell.round(threads, measured=False)
                first, block_began = done, time.monotonic()
                # This block's share of the rounds, rounded up; one at least.
                wanted = max(first + 1, -(-rounds * (instance + 1) // instances))
                budget = minutes * 60 * (instance + 1) / instances
                while done < wanted or (
                    minutes and time.monotonic() - began + (time.monotonic() - block_began) / (done - first) < budget
                ):
                    for kind in rotated(kinds, done):
                        for capture in rotated(list(captures), done):
                            if (kind, capture) in cells:
                                if warm:
                                    await cells[kind, capture].round(warm, measured=False)
                                await cells[kind, capture].round(runs)
                    done += 1
                blocks.append(range(first, done))
                rss = {capture: rss_mib(server.process.pid) for capture, server in servers.items()}
                health = {c: httpx.get(f"{s.url}/journal/health").json() for c, s in servers.items() if c != "off"}
            finally:
                for server in servers.values():
                    server.stop()
        elapsed = time.monotonic() - began
    finally:
        for probe in [*collections.values(), *clocks.values(), *thread_names.values()]:
            probe.remove()

    print()
    warmed = f", each turn after {warm} unmeasured runs" if warm else ""
    if len(blocks) > 1:
        warmed += f"; {len(blocks)} sets of servers, started afresh, took " + ", ".join(
            str(len(block)) for block in blocks) + " of them"
    print(f"{label}: {done} interleaved rounds of {runs} runs per cell over {threads} concurrent threads "
          f"({elapsed / 60:.1f} min, after a warm-up round{warmed}), load average now {psutil.getloadavg()[0]:.2f}")
    print("each ratio: median over rounds of the cell's round figure / `off`'s in the same round, [min max] over "
          "rounds; excess: median [min max] of (ratio - floor's ratio) per round")
    header = (f"{'client':20}{'capture':12}{'CPU/run ms':>11}  {'CPU ratio to off':24}{'CPU excess over floor':24}"
              f"{'wall/run s':>11}  {'wall ratio to off':24}{'wall excess over floor':24}")
    print(header)
    print("-" * len(header))
    for kind in kinds:
        for capture in captures:
            cell = cells.get((kind, capture))
            if cell is None:
                continue
            row = f"{kind:20}{capture:12}{cell.cpu_per_run * 1000:11.1f}  "
            columns = []
            for index in (1, 0):
                ratio = per_round(cells, kind, capture, index) if capture != "off" else None
                floor = per_round(cells, kind, "floor", index) if (kind, "floor") in cells else None
                columns.append(f"{str(Spread(ratio)) if ratio else '':24}")
                excess = ([r - f for r, f in zip(ratio, floor, strict=True)]
                          if ratio and floor and capture not in ("off", "floor") else None)
                columns.append(f"{str(Spread(excess)) if excess else '':24}")
            row += "".join(columns[:2]) + f"{cell.wall:11.3f}  " + "".join(columns[2:])
            print(row.rstrip())
    print()

    def per_set(kind: str, capture: str, figure: int, floors: tuple[str, ...]) -> str:
        """The excess over `floors` of each set of servers, when there is more than one."""
        if len(blocks) < 2:
            return ""
        each = [pooled_ratio(cells, kind, capture, list(block), figure, floors)[1] for block in blocks]
        return "    per set of servers: " + " ".join(f"{e:6.3f}" for e in each)

    for figure, title in (
        (CPU, "server CPU over all rounds: the cell's CPU-seconds / `off`'s for the same client (pooled)"),
        (CPU_BESIDE_COLLECTIONS, "the same without each server's full collections in the round (the runtime's "
         "heap walk, below: one lands in about half the cell rounds, a fifth of `off`'s figure for that round)"),
        (WALL, "wall time over all rounds: the sum of the cell's round medians / `off`'s for the same client"),
    ):
        name = "wall" if figure == WALL else "CPU"
        resampled = "the sets of servers and their rounds" if len(blocks) > 1 else "the rounds"
        print(f"{title}, and its excess over the floor ((cell - floor) / off); (5%-95%) of each over {resampled} "
              "resampled")
        header = f"{'client':20}{'capture':12}{name + ' ratio to off':28}{name + ' excess over floor':28}"
        print(header)
        print("-" * len(header))
        for kind in kinds:
            for capture in captures:
                if capture == "off" or (kind, capture) not in cells:
                    continue
                (ratio, excess), ratio_band, excess_band = pooled_with_interval(
                    cells, kind, capture, figure=figure, blocks=blocks)
                row = f"{kind:20}{capture:12}{ratio:6.3f} ({ratio_band[0]:6.3f} {ratio_band[1]:6.3f})       "
                if capture != "floor" and (kind, "floor") in cells:
                    row += f"{excess:6.3f} ({excess_band[0]:6.3f} {excess_band[1]:6.3f})"
                    row += per_set(kind, capture, figure, ("floor",))
                print(row.rstrip())
                if capture not in BOTH_FLOORS and all((kind, name) in cells for name in BOTH_FLOORS):
                    # Two identical floors differ by a few hundredths: their mean is the steadier floor.
                    (_, both), _, band = pooled_with_interval(cells, kind, capture, figure=figure, blocks=blocks,
                                                              floors=BOTH_FLOORS)
                    row = f"{'':32}{'over the mean of both floors':29}{both:6.3f} ({band[0]:6.3f} {band[1]:6.3f})"
                    print(row + per_set(kind, capture, figure, BOTH_FLOORS))
        print()
    print_loop_threads(cells, kinds, captures)
    print_scheduling(cells, kinds, captures)
    print_threads(cells, kinds, captures)
    if tasks:
        print_tasks(cells, kinds, captures)
    print("server RSS after the workload (MiB): " + ", ".join(
        f"{c} {rss[c]:.1f} ({rss[c] / rss['off']:.3f}x off)" for c in captures))
    for capture, report in health.items():
        print(f"  {capture}: {report['records_written']} records, {report['parts_seen']} parts read, "
              f"dropped {report['dropped']}, runs failed {report['runs_failed']}, "
              f"retained frames {report['retained_frames']}")
    print("full garbage collections during the measured rounds, per server: how many, their CPU per run, "
          "and what one took")
    for capture in captures:
        mine = [cell for (_, c), cell in cells.items() if c == capture]
        during = sum((cell.during for cell in mine), Collections())
        runs_measured = sum(len(cell.durations) for cell in mine)
        print(f"  {capture}: {during.full} ({during.seconds / runs_measured * 1000:.2f} ms per run, "
              f"{during.seconds / max(during.full, 1) * 1000:.0f} ms each)")


async def _soak_set(
    turns: int, threads: int, resumable: bool = False, instance: int = 0, pin: CpuSplit | None = None
) -> dict[str, Any]:
    """One set of soak servers, started afresh: per server, each turn's walls and
    CPU per run, and its RSS at the start, half way, the end and after every turn.
    The servers start in an order shuffled per set, as the matrix's do; with
    `pin`, they run on one CPU and the clients on the others."""
    env = {"JOURNAL_BRIDGE_OFFLINE_SECONDS_PER_TOKEN": "0"}
    settings = {
        "off": (False, env),
        "off+events": (False, env),
        "auto": (True, {**env, "JOURNAL_BRIDGE_CAPTURE": "auto"}),
    }
    servers: dict[str, LanggraphDevServer] = {}
    try:
        for name in start_order(settings, instance):
            servers[name] = quiet_dev_server(plugin=settings[name][0], env=settings[name][1])
        pinned = pin.pin([server.process.pid for server in servers.values()]) if pin is not None else ""
        plain, events = (use_stream_resumable, use_stream_resumable_events) if resumable else (use_stream, use_stream_events)
        cells = {
            "off": Cell(servers["off"], plain, False),
            "off+events": Cell(servers["off+events"], events, False),
            "auto": Cell(servers["auto"], plain, True),
        }
        for cell in cells.values():
            await cell.setup(threads)
            # One warm-up turn, not measured: what a server allocates once (its
            # first run of the graph, the journal's store and caches) is not growth.
            await cell.round(threads)
        walls: dict[str, list[list[float]]] = {name: [] for name in cells}
        cpus: dict[str, list[float]] = {name: [] for name in cells}
        rss_start = {name: rss_mib(s.process.pid) for name, s in servers.items()}
        rss_half: dict[str, float] = {}
        # Each server's RSS after every turn: the growth as a line fitted through them all.
        rss_turns: dict[str, list[float]] = {name: [] for name in servers}
        for turn in range(turns):
            if turn == turns // 2:
                rss_half = {name: rss_mib(s.process.pid) for name, s in servers.items()}
            for name, cell in (cells.items() if turn % 2 == 0 else reversed(list(cells.items()))):
                before, cpu_before = len(cell.durations), cell.cpu
                await cell.round(threads)
                walls[name].append(cell.durations[before:])
                cpus[name].append((cell.cpu - cpu_before) / threads)
                rss_turns[name].append(rss_mib(servers[name].process.pid))
        rss_end = {name: rss_mib(s.process.pid) for name, s in servers.items()}
    finally:
        for server in servers.values():
            server.stop()
    return {"walls": walls, "cpus": cpus, "rss_start": rss_start, "rss_half": rss_half, "rss_end": rss_end,
            "rss_turns": rss_turns, "pinned": pinned}


def soak_figure(sets: list[dict[str, Any]], server: str, what: str, turns_: slice) -> float:
    """`server`'s figure at the turns `turns_`, pooled over `sets`: the median wall
    of every run in those turns, or the mean CPU per run of the turns."""
    if what == "wall":
        return statistics.median([d for one in sets for turn in one["walls"][server][turns_] for d in turn])
    return statistics.mean([c for one in sets for c in one["cpus"][server][turns_]])


def soak_ratio(sets: list[dict[str, Any]], name: str, base: str, what: str, turns_: slice) -> float:
    """`name`'s `soak_figure` over `base`'s."""
    return soak_figure(sets, name, what, turns_) / soak_figure(sets, base, what, turns_)


async def soak(
    turns: int, threads: int, instances: int = 1, resumable: bool = False, pin: CpuSplit | None = None
) -> None:
    """Long conversations: does journaling cost grow with the thread?

    Three servers side by side: the useStream client without the plugin
    (`off`), the same client asking for `events` itself without the plugin
    (`off+events`: what capturing from `events` costs by nature, which grows
    with the conversation too), and the useStream client with the plugin
    (`auto`, which captures it from `events`). With `instances`, the soak
    runs on that many sets of servers, one after the other, each started
    afresh: the ratios are pooled over them and printed per set too (one
    server's first turns move by a tenth from one process to the next).
    With `resumable`, the client asks for resumable streams, as useStream
    with `reconnectOnMount` does: the server keeps every frame of its runs.
    With `pin`, the servers run on one CPU and the clients on the others.
    """
    sets = [await _soak_set(turns, threads, resumable, instance, pin) for instance in range(max(1, instances))]
    servers = ("off", "off+events", "auto")
    first, last = slice(0, 5), slice(turns - 5, turns)
    print()
    client = "useStream client with resumable streams" if resumable else "useStream client"
    print(f"soak: {turns} turns in each of {threads} threads after a warm-up turn, {client}, instant model"
          + (f"; {len(sets)} sets of servers, started afresh, pooled" if len(sets) > 1 else "")
          + (f"; {sets[0]['pinned']}" if sets[0]["pinned"] else ""))
    for label, turns_ in (("turns 1-5", first), (f"turns {turns - 4}-{turns}", last)):
        print(f"  {label:12} median wall s / server CPU ms per run: " + ", ".join(
            f"{n} {soak_figure(sets, n, 'wall', turns_):.3f} / {soak_figure(sets, n, 'CPU', turns_) * 1000:.1f}"
            for n in servers))
    for base in ("off", "off+events"):
        for what in ("wall", "CPU"):
            early = soak_ratio(sets, "auto", base, what, first)
            late = soak_ratio(sets, "auto", base, what, last)
            row = (f"  auto/{base} {what}: {early:.3f} at the first turns, {late:.3f} at the last;"
                   f" last/first {late / early:.3f}")
            if len(sets) > 1:
                each = [(soak_ratio([one], "auto", base, what, first), soak_ratio([one], "auto", base, what, last))
                        for one in sets]
                row += "  (per set, first -> last: " + " ".join(f"{a:.3f}->{b:.3f}" for a, b in each) + ")"
            print(row + "   target within 10%")
    # Over the whole soak, and over its second half: what a bounded cache takes
    # (the store's page cache, the journal's per-thread caches) shows in the
    # first half and no more; what keeps growing shows in both.
    for span, start_key, count in (("all turns", "rss_start", turns),
                                   (f"turns {turns // 2 + 1}-{turns}", "rss_half", turns - turns // 2)):
        hundreds = count * threads / 100 * len(sets)
        start = {n: statistics.mean(one[start_key][n] for one in sets) for n in servers}
        end = {n: statistics.mean(one["rss_end"][n] for one in sets) for n in servers}
        growth = {n: sum(one["rss_end"][n] - one[start_key][n] for one in sets) / hundreds for n in servers}
        print(f"  RSS over {span}: " + ", ".join(
            f"{n} {start[n]:.1f} -> {end[n]:.1f} MiB ({growth[n]:.2f} per 100 runs)" for n in servers))
        for base in ("off", "off+events"):
            if growth[base] > 0:
                print(f"    RSS growth auto/{base}: {growth['auto'] / growth[base]:.3f}")
    # Two readings of RSS move with whatever the collector and the allocator
    # did just before them; a line fitted through every turn's reading does not.
    runs_per_turn = threads / 100
    for span, turns_ in (("all turns", range(turns)), (f"turns {turns // 2 + 1}-{turns}", range(turns // 2, turns))):
        slopes = [{n: rss_slope(one["rss_turns"][n], list(turns_)) / runs_per_turn for n in servers} for one in sets]
        slope = {n: statistics.mean(each[n] for each in slopes) for n in servers}
        print(f"  RSS growth per 100 runs fitted over {span}: "
              + ", ".join(f"{n} {slope[n]:.2f}" for n in servers))
        for base in ("off", "off+events"):
            if slope[base] > 0:
                row = f"    auto/{base}: {slope['auto'] / slope[base]:.3f}"
                if len(sets) == 1:
                    low, high = slope_ratio_interval(sets[0]["rss_turns"]["auto"], sets[0]["rss_turns"][base],
                                                     list(turns_))
                    row += f" ({low:.3f} {high:.3f} over the turns resampled)"
                else:
                    row += " (per set " + " ".join(
                        f"{each['auto'] / each[base]:.3f}" if each[base] > 0 else "nan" for each in slopes) + ")"
                print(row + "   target within 1.1")


async def measure_lag(compactions: int) -> None:
    """Seconds from the custom frame reaching the client to the marker row being readable."""
    server = quiet_dev_server(env={"JOURNAL_BRIDGE_CAPTURE": "auto"})
    try:
        for label, modes in (("values+custom client (state capture)", ["values", "custom"]),
                             ("useStream client (events capture)", USE_STREAM)):
            client = sdk_client(server.url)
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


def print_probe(when: str) -> None:
    print(f"machine probe ({when}): a fixed pure-Python loop took {probe_seconds():.2f} s of CPU, "
          f"load average {psutil.getloadavg()[0]:.2f}")


async def main(args: argparse.Namespace) -> None:
    parts = set(args.only or PARTS)
    pin = CpuSplit() if args.pin else None
    print_probe("at the start")
    narrowed = {
        "clients": tuple(args.client or CLIENTS),
        "captures": tuple(args.capture or (c for c in CAPTURES if c not in ON_REQUEST)),
        "warm": args.warm,
        "instances": args.instances,
        "tasks": args.tasks,
        "pin": pin,
    }
    if "instant" in parts:
        await matrix("instant model (server CPU-bound)", 0.0, args.runs, args.threads, args.rounds, args.minutes,
                     **narrowed)
    if "paced" in parts:
        await matrix(f"model paced at {args.pace * 1000:g} ms per token", args.pace, args.runs, args.threads,
                     args.rounds, args.minutes, **narrowed)
    if "soak" in parts:
        await soak(args.soak_turns, args.soak_threads, args.instances, args.soak_resumable, pin)
    if "lag" in parts:
        if pin is not None:
            pin.release()  # the lag is not a comparison of servers: not pinned
        print()
        await measure_lag(args.compactions)
    print()
    print_probe("at the end")


PARTS = ("instant", "paced", "soak", "lag")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=8, help="runs per cell per round")
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds per matrix, at least")
    parser.add_argument("--minutes", type=float, default=0.0,
                        help="more rounds while the next fits in this many minutes per matrix")
    parser.add_argument("--only", action="append", choices=PARTS, help="run only these parts (repeatable)")
    parser.add_argument("--client", action="append", choices=list(CLIENTS),
                        help="the matrices' client kinds (repeatable; all by default)")
    parser.add_argument("--capture", action="append", choices=[c for c in CAPTURES if c not in ("off", "floor")],
                        help="the matrices' capture settings beside off and the floor (repeatable; all but"
                             " floor-twin by default)")
    parser.add_argument("--instances", type=int, default=1,
                        help="sets of servers, each started afresh, that share a matrix's rounds")
    parser.add_argument("--warm", type=int, default=0,
                        help="unmeasured runs per cell in each of its turns, before the measured ones")
    parser.add_argument("--tasks", action="store_true",
                        help="clock every server's event-loop tasks and print their CPU per run by kind")
    parser.add_argument("--pace", type=float, default=0.02, help="seconds per streamed token of the paced model")
    parser.add_argument("--soak-turns", type=int, default=50)
    parser.add_argument("--soak-threads", type=int, default=8)
    parser.add_argument("--soak-resumable", action="store_true",
                        help="the soak's client asks for resumable streams (useStream's reconnectOnMount)")
    parser.add_argument("--compactions", type=int, default=20)
    parser.add_argument("--pin", action="store_true",
                        help="the matrices' and the soak's servers on one CPU, the clients on the others"
                             " (needs two CPUs; see benchmarks/pinning.py)")
    # A stopped benchmark stops the servers it started: SIGTERM unwinds like Ctrl-C.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    asyncio.run(main(parser.parse_args()))
