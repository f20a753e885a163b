"""What journaling costs a LangGraph server, per kind of client and per capture setting.

Starts real `langgraph dev` servers of this project side by side -- one without
the plugin (`off`), one with the floor (`floor`, below) and one per capture
setting (`auto`, `lean`, `events`) -- and drives the same scripted workload
against each through the SDK, the cells interleaved round by round (the order
of client kinds and of servers rotated every round) so none gets the quieter
machine.

`floor` is what reading runs through langgraph-sdk costs at the least
(`tests/harness/bench/floor_app.py`, the server's `http.app` in place of the plugin):
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
nanosecond (`tests/harness/bench/process_cpu.py`). Every server runs with the dev
server's file persistence off (`quiet_dev_server`), the same for all of them. The
matrices count each server's full garbage collections during the measured
rounds, with their CPU (`tests/harness/bench/full_collections.py`): one walks the
in-memory runtime's whole heap, about a tenth of a second landing in
whichever round the collector's threshold falls in, about 0.2 of `off`'s
figure for that round. The pooled CPU is printed twice: as measured, and
less the full collections that came in each round (their count per server
says whether a setting brings more of them).

The same command runs two more parts, each a script of its own that can run
alone: the soak (`benchmarks/soak.py`: does the cost grow with a long
conversation?) and the lag from a compaction to its marker
(`benchmarks/lag.py`). `--only` picks parts.

Run: `python3 tasks.py bench bridge [--runs 8] [--rounds 5] [--minutes 0] [--threads 4] [--pace 0.02]
[--soak-turns 50] [--soak-threads 8] [--soak-resumable] [--only instant|paced|soak|lag ...] [--client KIND ...]
[--capture auto|lean|events ...] [--warm 0] [--instances 1] [--tasks] [--pin]` (`--runs` per cell per round;
more rounds than `--rounds` while the next fits in `--minutes` per matrix; `--client` and `--capture`
narrow the matrices, `--warm` runs that many unmeasured runs in each cell's turn before its measured
ones, `--instances` shares the rounds among that many sets of servers started one after the other,
and runs the soak that many times). A fixed pure-Python loop's CPU, printed at the start and
the end, says how fast the machine ran: milliseconds per run compare across
runs only at the same speed, ratios taken side by side do.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import time
from collections.abc import Callable
from typing import Any

import httpx
import psutil

from benchmarks import lag, soak
from tests.harness.bench.cells import CPU, CPU_BESIDE_COLLECTIONS, WALL, Cell
from tests.harness.bench.clients import CLIENTS, use_stream_events
from tests.harness.bench.full_collections import Collections, FullCollections
from tests.harness.bench.pinning import CpuSplit
from tests.harness.bench.report import (
    print_loop_threads,
    print_probe,
    print_scheduling,
    print_tasks,
    print_threads,
)
from tests.harness.bench.server_threads import ThreadNames
from tests.harness.bench.servers import (
    CAPTURES,
    ON_REQUEST,
    rss_mib,
    start_order,
    start_servers,
)
from tests.harness.bench.stats import (
    BOTH_FLOORS,
    Spread,
    per_round,
    pooled_ratio,
    pooled_with_interval,
)
from tests.harness.bench.task_clock import TaskClock
from tests.harness.langgraph_server import LanggraphDevServer

Cells = dict[tuple[str, str], Cell]


# Another script may run this matrix on servers of its own (a setting beside
# `CAPTURES`): it hands `matrix` the function that starts them (`start`), and
# replaces `CAPTURES` or a printer in this module, which the matrix uses as it
# finds them here when it runs.


def rotated(items: list[Any], by: int) -> list[Any]:
    by %= len(items)
    return items[by:] + items[:by]


class Matrix:
    """One matrix: its servers' probes, its cells, and the rounds each set of servers ran (see `matrix`)."""

    def __init__(self, label: str, pace: float, runs: int, threads: int, rounds: int, minutes: float, *,
                 clients: tuple[str, ...], captures: tuple[str, ...], warm: int, instances: int, tasks: bool,
                 pin: CpuSplit | None, start: Callable[..., LanggraphDevServer] | None = None) -> None:
        self.start = start
        self.label, self.pace, self.runs, self.threads = label, pace, runs, threads
        self.rounds, self.minutes, self.warm, self.pin = rounds, minutes, warm, pin
        self.instances = max(1, instances)
        self.clients = clients
        self.captures = tuple(c for c in CAPTURES if c in ("off", "floor") or c in captures)
        self.collections = {capture: FullCollections() for capture in self.captures}
        self.clocks = {capture: TaskClock() for capture in self.captures} if tasks else {}
        self.thread_names = {capture: ThreadNames() for capture in self.captures}
        self.cells: Cells = {}
        self.kinds = list(clients) + (["useStream + events"] if "useStream" in clients else [])
        # The rounds each set of servers ran: a server's figure moves with the
        # process it happens to be (two identical servers differ), so the rounds
        # are spread over `instances` sets of servers, each started afresh.
        self.blocks: list[range] = []
        self.done = 0
        self.began = self.elapsed = 0.0
        self.rss: dict[str, float] = {}
        self.health: dict[str, Any] = {}

    async def run(self) -> None:
        self.began = time.monotonic()
        try:
            for instance in range(self.instances):
                await self.run_set(instance)
            self.elapsed = time.monotonic() - self.began
        finally:
            for probe in [*self.collections.values(), *self.clocks.values(), *self.thread_names.values()]:
                probe.remove()

    async def run_set(self, instance: int) -> None:
        """One set of servers, started afresh in a shuffled order: its share of the rounds."""
        order = tuple(start_order(self.captures, instance))
        servers = start_servers(self.pace, self.collections, order, self.clocks, self.thread_names, self.start)
        try:
            if self.pin is not None:
                pinned = self.pin.pin([server.process.pid for server in servers.values()])
                if instance == 0:
                    print(f"{self.label}: {pinned}")
            await self.prepare(servers)
            first = self.done
            await self.run_rounds(instance)
            self.blocks.append(range(first, self.done))
            self.rss = {capture: rss_mib(server.process.pid) for capture, server in servers.items()}
            self.health = {c: httpx.get(f"{s.url}/journal/health").json() for c, s in servers.items() if c != "off"}
        finally:
            for server in servers.values():
                server.stop()

    async def prepare(self, servers: dict[str, LanggraphDevServer]) -> None:
        """The cells on this set's servers (made on the first set), set up, after one unmeasured round."""
        plan = [(kind, capture, CLIENTS[kind]) for kind in self.clients for capture in self.captures]
        if "useStream" in self.clients:
            plan.append(("useStream + events", "off", use_stream_events))
        for kind, capture, run in plan:
            if (kind, capture) not in self.cells:
                self.cells[kind, capture] = Cell(servers[capture], run, capture != "off", self.collections[capture],
                                                 self.clocks.get(capture), self.thread_names[capture])
            await self.cells[kind, capture].serve(servers[capture])
        for cell in self.cells.values():
            await cell.setup(self.threads)
        for cell in self.cells.values():
            await cell.round(self.threads, measured=False)

    async def run_rounds(self, instance: int) -> None:
        """This set's share of `rounds` (rounded up; one at least), and more while the next fits in `minutes`."""
        first, block_began = self.done, time.monotonic()
        wanted = max(first + 1, -(-self.rounds * (instance + 1) // self.instances))
        budget = self.minutes * 60 * (instance + 1) / self.instances

        def another_fits() -> bool:
            per_round = (time.monotonic() - block_began) / (self.done - first)
            return bool(self.minutes) and time.monotonic() - self.began + per_round < budget

        while self.done < wanted or another_fits():
            await self.run_round()
            self.done += 1

    async def run_round(self) -> None:
        """Every cell's turn, client kinds and servers in an order rotated every round."""
        for kind in rotated(self.kinds, self.done):
            for capture in rotated(list(self.captures), self.done):
                cell = self.cells.get((kind, capture))
                if cell is None:
                    continue
                if self.warm:
                    await cell.round(self.warm, measured=False)
                await cell.round(self.runs)

    def print(self, tasks: bool) -> None:
        print()
        warmed = f", each turn after {self.warm} unmeasured runs" if self.warm else ""
        if len(self.blocks) > 1:
            warmed += f"; {len(self.blocks)} sets of servers, started afresh, took " + ", ".join(
                str(len(block)) for block in self.blocks) + " of them"
        print(f"{self.label}: {self.done} interleaved rounds of {self.runs} runs per cell over {self.threads} "
              f"concurrent threads ({self.elapsed / 60:.1f} min, after a warm-up round{warmed}), load average now "
              f"{psutil.getloadavg()[0]:.2f}")
        print_round_ratios(self.cells, self.kinds, self.captures)
        for figure, title in POOLED:
            print_pooled(self.cells, self.kinds, self.captures, self.blocks, figure, title)
        print_loop_threads(self.cells, self.kinds, self.captures)
        print_scheduling(self.cells, self.kinds, self.captures)
        print_threads(self.cells, self.kinds, self.captures)
        if tasks:
            print_tasks(self.cells, self.kinds, self.captures)
        print_servers(self.cells, self.captures, self.rss, self.health)


def print_round_ratios(cells: Cells, kinds: list[str], captures: tuple[str, ...]) -> None:
    """Per cell: CPU and wall per run, their ratios to `off` round by round, and the excess over the floor's."""
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
            cpu, wall = (_round_columns(cells, kind, capture, index) for index in (CPU, WALL))
            print(f"{kind:20}{capture:12}{cell.cpu_per_run * 1000:11.1f}  {cpu}{cell.wall:11.3f}  {wall}".rstrip())
    print()


def _round_columns(cells: Cells, kind: str, capture: str, index: int) -> str:
    """The ratio to `off` and the excess over the floor, per round, of one figure of a cell (blank where none)."""
    ratio = per_round(cells, kind, capture, index) if capture != "off" else None
    floor = per_round(cells, kind, "floor", index) if (kind, "floor") in cells else None
    excess = ([r - f for r, f in zip(ratio, floor, strict=True)]
              if ratio and floor and capture not in ("off", "floor") else None)
    return f"{str(Spread(ratio)) if ratio else '':24}{str(Spread(excess)) if excess else '':24}"


# The pooled tables: which of `Cell.rounds`' figures, and their title.
POOLED = (
    (CPU, "server CPU over all rounds: the cell's CPU-seconds / `off`'s for the same client (pooled)"),
    (CPU_BESIDE_COLLECTIONS, "the same without each server's full collections in the round (the runtime's "
     "heap walk, below: one lands in about half the cell rounds, a fifth of `off`'s figure for that round)"),
    (WALL, "wall time over all rounds: the sum of the cell's round medians / `off`'s for the same client"),
)


def print_pooled(cells: Cells, kinds: list[str], captures: tuple[str, ...], blocks: list[range], figure: int,
                 title: str) -> None:
    """One figure pooled over every round: each cell's ratio to `off` and excess over the floor, with intervals."""
    name = "wall" if figure == WALL else "CPU"
    resampled = "the sets of servers and their rounds" if len(blocks) > 1 else "the rounds"
    print(f"{title}, and its excess over the floor ((cell - floor) / off); (5%-95%) of each over {resampled} "
          "resampled")
    header = f"{'client':20}{'capture':12}{name + ' ratio to off':28}{name + ' excess over floor':28}"
    print(header)
    print("-" * len(header))
    for kind in kinds:
        for capture in captures:
            if capture != "off" and (kind, capture) in cells:
                _print_pooled_row(cells, kind, capture, blocks, figure)
    print()


def _print_pooled_row(cells: Cells, kind: str, capture: str, blocks: list[range], figure: int) -> None:
    (ratio, excess), ratio_band, excess_band = pooled_with_interval(cells, kind, capture, figure=figure, blocks=blocks)
    row = f"{kind:20}{capture:12}{ratio:6.3f} ({ratio_band[0]:6.3f} {ratio_band[1]:6.3f})       "
    if capture != "floor" and (kind, "floor") in cells:
        row += f"{excess:6.3f} ({excess_band[0]:6.3f} {excess_band[1]:6.3f})"
        row += _per_set(cells, kind, capture, blocks, figure, ("floor",))
    print(row.rstrip())
    if capture not in BOTH_FLOORS and all((kind, name) in cells for name in BOTH_FLOORS):
        # Two identical floors differ by a few hundredths: their mean is the steadier floor.
        (_, both), _, band = pooled_with_interval(cells, kind, capture, figure=figure, blocks=blocks,
                                                  floors=BOTH_FLOORS)
        row = f"{'':32}{'over the mean of both floors':29}{both:6.3f} ({band[0]:6.3f} {band[1]:6.3f})"
        print(row + _per_set(cells, kind, capture, blocks, figure, BOTH_FLOORS))


def _per_set(cells: Cells, kind: str, capture: str, blocks: list[range], figure: int,
             floors: tuple[str, ...]) -> str:
    """The excess over `floors` of each set of servers, when there is more than one."""
    if len(blocks) < 2:
        return ""
    each = [pooled_ratio(cells, kind, capture, list(block), figure, floors)[1] for block in blocks]
    return "    per set of servers: " + " ".join(f"{e:6.3f}" for e in each)


def print_servers(cells: Cells, captures: tuple[str, ...], rss: dict[str, float], health: dict[str, Any]) -> None:
    """Each server's RSS after the workload, its journal's health, and its full collections in the measured rounds."""
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
    start: Callable[..., LanggraphDevServer] | None = None,
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
    (`tests/harness/bench/task_clock.py`) and their CPU per run printed by kind. With
    `pin`, every set's servers run on one CPU and the clients on the others
    (`tests/harness/bench/pinning.py`). `start` starts a server of a capture
    setting (`tests/harness/bench/servers.py`'s `start_server` by default).
    """
    measured = Matrix(label, pace, runs, threads, rounds, minutes, clients=clients, captures=captures, warm=warm,
                      instances=instances, tasks=tasks, pin=pin, start=start)
    await measured.run()
    measured.print(tasks)


PARTS = ("instant", "paced", "soak", "lag")


async def main(args: argparse.Namespace) -> None:
    parts = set(args.only or PARTS)
    pin = CpuSplit() if args.pin else None
    print_probe("at the start")
    narrowed: dict[str, Any] = {
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
        await soak.soak(args.soak_turns, args.soak_threads, args.instances, args.soak_resumable, pin)
    if "lag" in parts:
        if pin is not None:
            pin.release()  # the lag is not a comparison of servers: not pinned
        print()
        await lag.measure_lag(args.compactions)
    print()
    print_probe("at the end")


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
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
    soak.add_options(parser)
    lag.add_options(parser)
    parser.add_argument("--pin", action="store_true",
                        help="the matrices' and the soak's servers on one CPU, the clients on the others"
                             " (needs two CPUs; see tests/harness/bench/pinning.py)")
    return parser


if __name__ == "__main__":
    # A stopped benchmark stops the servers it started: SIGTERM unwinds like Ctrl-C.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    asyncio.run(main(parser().parse_args()))
