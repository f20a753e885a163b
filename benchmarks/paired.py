"""The journal's cost above the floor, measured in one process: the paired benchmark.

The bridge matrix (`benchmarks/bridge.py`) sets a server with the plugin beside
a floor server: two processes, and two processes differ by their own luck
(where their heaps land, when their full collections come) about as much as
the journal costs. Here each server is both (`tests/harness/bench/paired_app.py`): the
plugin, with the floor's reader for the requests that carry its header. One
server then drives two cells, the journal's and the floor's, in the same
interleaved rounds, and the journal's excess is the difference between them
in each round, divided by the CPU per run of a server without the plugin
(`off`) in the same round. The reconciler is off on the paired servers (it
would read the floor's runs); its cost is not in the figure.

Clients: those whose run the journal reads the way the floor does, where the
capture settings `auto` and `lean` take the same path (the journal's own join
of a `runs.wait` run; the client's join of a created run; a values stream).
And `useStream` (`values`, `messages-tuple`, `custom`: a client that streams
tokens), which `auto` captures from `events`: its reference is not the floor's
join but the same client asking for `events` itself, which the plugin
forwards untouched (`PLAIN_HEADER`). Printed for it: the journal's CPU over
that reference's, less one, in the same rounds of the same process. With
`--first-turns` every round starts new threads, each with one turn that is not
measured (as the matrix's soak starts), so the rounds measure the first turns
of conversations: where the journal's fixed cost per run weighs most.

Printed: the excess per round and per server (median, min, max), and pooled
over every server and round, (journal CPU - floor CPU) / off CPU, with its
5-95% interval with the servers drawn again and then their rounds; the same
without the rounds' full collections; the same with the full collections
shared by the collections that bring them on (`spread_collections`); how
many full collections came in each cell's rounds; and per cell, its clients'
CPU (the benchmark's own while the cell's runs ran) and how often the server's
threads slept, were preempted and moved to another CPU per run: on a machine
the clients share with the servers, a cell whose clients work less leaves the
servers a CPU to spread over. The cells' order in each
round is drawn from `--seed` (random unless given, and printed). With
`--twin`, a second floor cell on every server gives the method's own zero:
floor against floor; with `--twin-resumable` (useStream) the twin asks for
resumable streams, as the plugin makes the journal's runs: what the runtime
keeping their frames costs, beside the journal's excess. With `--pin` every
server's threads share one CPU and the benchmark (the clients) the others:
the event loop then stays on its CPU and seldom sleeps (about 20 voluntary
switches of the loop's thread per late-turn useStream run, against 100 to 235
unpinned), no server thread changes CPU (unpinned, useStream's `auto` cell
makes about 177 such changes per run, its `events` reference 16: that
client's own parsing keeps the other CPU busy), and the figure is the
servers' work alike in both cells (see `tests/harness/bench/pinning.py`). With
`--busy-beside-journal`, unpinned, a process spins on a CPU while the
journal's cell runs, as the `events` reference's parsing does in its own:
both cells then leave the servers the same room, and the figure is their
work alike without pinning. With `--store memory` the journal
writes to the in-memory store instead of the embedded SQLite file: the
difference between the two figures is what storing on SQLite costs.

    python3 tasks.py bench paired --client runs.wait --servers 2 --rounds 12 --runs 24
    python3 tasks.py bench paired --client useStream --first-turns --servers 2 --rounds 12 --runs 20
"""

from __future__ import annotations

import argparse
import asyncio
import random
import secrets
import signal
import statistics
import time
from typing import Any

from tests.harness.bench.cells import (
    COLLECTIONS,
    CPU,
    CPU_BESIDE_COLLECTIONS,
    WALL,
    Cell,
)
from tests.harness.bench.clients import (
    CLIENTS,
    Run,
    use_stream_events,
    use_stream_resumable_events,
)
from tests.harness.bench.floor_app import FLOOR_HEADER, PLAIN_HEADER
from tests.harness.bench.full_collections import FullCollections
from tests.harness.bench.pinning import CpuSplit, busy_process
from tests.harness.bench.report import (
    merged,
    print_loop_threads,
    print_probe,
    print_tasks,
    print_threads,
    room_per_run,
)
from tests.harness.bench.server_threads import ThreadNames
from tests.harness.bench.servers import STORES, start_paired, start_server
from tests.harness.bench.stats import (
    CPU_COLLECTIONS_SPREAD,
    excess_by_round,
    pct,
    pooled_interval,
    spread_collections,
)
from tests.harness.bench.task_clock import TaskClock
from tests.harness.langgraph_server import LanggraphDevServer

# Where `auto` and `lean` read runs as the floor does (see the module docstring).
PAIRED_CLIENTS = ("runs.wait", "create+join", "values stream", "useStream")
# The client measured against itself asking for `events` (see the module docstring).
AGAINST_EVENTS = "useStream"
JOURNAL, FLOOR, TWIN, EVENTS = "journal", "floor", "floor twin", "events itself"
Rounds = list[tuple[float, ...]]


def _spread(values: list[float]) -> str:
    return (f"median {statistics.median(values):6.3f}  quartiles {pct(values, 0.25):6.3f} {pct(values, 0.75):6.3f}"
            f"  [{min(values):6.3f} {max(values):6.3f}]")


def report(name: str, pairs: list[tuple[list[tuple[float, ...]], list[tuple[float, ...]]]],
           off: list[tuple[float, ...]], against_floor: bool = True) -> None:
    """The excess of each pair's cell over its floor, pooled and per round: over
    `off`'s figure, or (`against_floor` False) over the floor's own, each server's
    (the cell's ratio to its reference, less one)."""
    bases = None if against_floor else [floor for _, floor in pairs]
    for figure, label in ((CPU, "CPU"), (CPU_BESIDE_COLLECTIONS, "CPU without full collections"),
                          (CPU_COLLECTIONS_SPREAD, "CPU, full collections shared by the collections bringing them on"),
                          (WALL, "wall (round medians)")):
        whole, low, high = pooled_interval(pairs, off, figure, seed=f"{name}/{figure}", bases=bases)
        per_server = [excess_by_round(mine, floor, floor if bases else off, figure) for mine, floor in pairs]
        rounds = [x for server in per_server for x in server]
        print(f"  {name}, {label}: pooled {whole:6.3f} ({low:6.3f} {high:6.3f})  per round {_spread(rounds)}")
        if figure == CPU:
            for index, server in enumerate(per_server):
                print(f"      server {index + 1}: per round {_spread(server)}")


async def fresh_threads(cell: Cell, threads: int) -> None:
    """New threads for `cell`, each given one turn that is not measured."""
    cell.threads = [(await cell.client.threads.create())["thread_id"] for _ in range(threads)]
    cell.turn = 0
    await cell.round(threads, measured=False)


class Paired:
    """One client's paired servers beside a server without the plugin, their cells and their rounds."""

    def __init__(self, client: str, capture: str, servers: int, store: str, *, twin: bool, twin_resumable: bool,
                 promoted: bool, split: bool) -> None:
        self.client, self.capture, self.servers, self.store = client, capture, servers, store
        self.against_events = client == AGAINST_EVENTS
        # The second kind of cell is the floor, or for useStream that client asking for `events` itself.
        self.base = EVENTS if self.against_events else FLOOR
        self.twin = twin or twin_resumable
        self.twin_resumable = twin_resumable
        self.kinds = (JOURNAL, self.base, TWIN) if self.twin else (JOURNAL, self.base)
        self.twin_name = f"{self.base} twin" + (", resumable" if twin_resumable and self.against_events else "")
        self.promoted, self.split = promoted, split
        self.collections = {"off": FullCollections(),
                            **{f"paired {i}": FullCollections(promoted=promoted) for i in range(servers)}}
        self.clocks = [TaskClock() for _ in range(servers)] if split else []
        self.names = [ThreadNames() for _ in range(servers)] if split else []
        self.started: dict[str, LanggraphDevServer] = {}
        self.cells: dict[tuple[str, str], Cell] = {}

    def start(self, pin: CpuSplit | None) -> str:
        """The server without the plugin and the paired ones; with `pin`, what pinning them did."""
        self.started["off"] = start_server("off", 0.0, self.collections["off"])
        for i in range(self.servers):
            probes = (self.clocks[i], self.names[i]) if self.split else ()
            self.started[f"paired {i}"] = start_paired(self.capture, self.collections[f"paired {i}"], self.store,
                                                       probes)
        return pin.pin([server.process.pid for server in self.started.values()]) if pin is not None else ""

    def make_cells(self) -> None:
        run = CLIENTS[self.client]
        self.cells["off", "off"] = Cell(self.started["off"], run, False, self.collections["off"])
        for i in range(self.servers):
            for kind in self.kinds:
                runs_as, headers = self._runs_as(kind, run)
                self.cells[f"paired {i}", kind] = Cell(
                    self.started[f"paired {i}"], runs_as, True, self.collections[f"paired {i}"], headers=headers,
                    clock=self.clocks[i] if self.split else None, thread_names=self.names[i] if self.split else None)

    def _runs_as(self, kind: str, run: Run) -> tuple[Run, dict[str, str] | None]:
        """How a kind of cell sends its runs: the floor's cells carry its header; for
        useStream they are the client asking for `events` itself, which the plugin
        forwards untouched."""
        if kind == JOURNAL:
            return run, None
        runs_as = use_stream_events if self.against_events else run
        if kind == TWIN and self.against_events and self.twin_resumable:
            runs_as = use_stream_resumable_events
        return runs_as, {PLAIN_HEADER if self.against_events else FLOOR_HEADER: "1"}

    async def run_rounds(self, rounds: int, runs: int, threads: int, seed: str, first_turns: bool,
                         busy_beside_journal: bool) -> None:
        for cell in self.cells.values():
            await cell.setup(threads)
            await cell.round(runs, measured=False)
        order = list(self.cells)
        for index in range(rounds):
            random.Random(f"{seed}/{index}").shuffle(order)
            if first_turns:
                for key in order:
                    await fresh_threads(self.cells[key], threads)
            for key in order:
                with busy_process(busy_beside_journal and key[1] == JOURNAL):
                    await self.cells[key].round(runs)

    def print_cells(self, off: Rounds, runs: int) -> None:
        """Each paired cell's CPU per run, its full collections, its clients' CPU and its server's scheduling."""
        print(f"  off: {statistics.mean(r[CPU] for r in off) * 1000:.2f} ms of server CPU per run")
        for i in range(self.servers):
            for kind in self.kinds:
                cell = self.cells[f"paired {i}", kind]
                mine, during = cell.rounds, cell.during
                print(f"  server {i + 1} {self.twin_name if kind == TWIN else kind}: "
                      f"{statistics.mean(r[CPU] for r in mine) * 1000:.2f} ms per run,"
                      f" {sum(r[CPU] for r in mine) / sum(r[CPU] for r in off):.3f}x off;"
                      f" {during.full} full collections in its rounds ({during.seconds * 1000:.0f} ms),"
                      f" {statistics.mean(r[COLLECTIONS] for r in mine):.3f} middle and full ones per run"
                      + (f", {during.promoted / len(mine) / runs:.0f} objects promoted per run"
                         if self.promoted else ""))
                clients, sleeps, preemptions, moves = room_per_run(cell)
                print(f"      its clients {clients:.2f} ms of the benchmark's CPU per run; the server's threads per"
                      f" run: {sleeps:.1f} sleeps, {preemptions:.1f} preemptions, {moves:.1f} moves to another CPU")

    def report(self, off: Rounds) -> None:
        spread = {}
        for i in range(self.servers):
            each = spread_collections([self.cells[f"paired {i}", kind] for kind in self.kinds])
            for kind, mine in zip(self.kinds, each, strict=True):
                spread[i, kind] = mine
        against = "`events` itself" if self.against_events else "the floor"
        names = [(f"`{self.capture}`", JOURNAL)] + ([(self.twin_name, TWIN)] if self.twin else [])
        for name, kind in names:
            report(f"{name} against {against}", [(spread[i, kind], spread[i, self.base]) for i in range(self.servers)],
                   off, against_floor=not self.against_events)
        if self.split:
            print_split(self.client, self.capture,
                        [[self.cells[f"paired {i}", kind] for i in range(self.servers)] for kind in self.kinds],
                        self.base)

    async def close(self) -> None:
        for cell in self.cells.values():
            await cell.client.aclose()

    def stop(self) -> None:
        for server in self.started.values():
            server.stop()
        for probe in [*self.collections.values(), *self.clocks, *self.names]:
            probe.remove()


async def measure(client: str, capture: str, servers: int, rounds: int, runs: int, threads: int, twin: bool,
                  store: str = "sqlite", promoted: bool = False, split: bool = False, seed: str = "0",
                  first_turns: bool = False, twin_resumable: bool = False, pin: CpuSplit | None = None,
                  busy_beside_journal: bool = False) -> None:
    paired = Paired(client, capture, servers, store, twin=twin, twin_resumable=twin_resumable, promoted=promoted,
                    split=split)
    began = time.monotonic()
    try:
        pinned = paired.start(pin)
        paired.make_cells()
        await paired.run_rounds(rounds, runs, threads, seed, first_turns, busy_beside_journal)
        (off,) = spread_collections([paired.cells["off", "off"]])
        minutes = (time.monotonic() - began) / 60
        turns = f", new threads every round (turns 1-{-(-runs // threads)} after one)" if first_turns else ""
        print(f"\n{client}, `{capture}` on {servers} paired servers, journal store {store}: {rounds} interleaved"
              f" rounds of {runs} runs per cell over {threads} threads{turns} ({minutes:.1f} min, round order {seed})"
              + (f"; {pinned}" if pinned else "")
              + ("; a busy process beside the journal cell's clients" if busy_beside_journal else ""))
        if paired.against_events:
            print("excess over the same client asking for `events` itself in the same process: (cell - events)"
                  " / events, per run; pooled (5%-95%, servers and their rounds drawn again), and per round:"
                  " median, quartiles, [min max]")
        else:
            print("excess over the floor in the same process: (cell - floor) / off, per run; pooled (5%-95%, servers"
                  " and their rounds drawn again), and per round: median, quartiles, [min max]")
        paired.print_cells(off, runs)
        paired.report(off)
        await paired.close()
    finally:
        paired.stop()


def print_split(client: str, capture: str, kinds: list[list[Cell]], base: str = FLOOR) -> None:
    """The journal's and the floor's (or reference's) cells over every server, split
    by thread and by kind of task, the journal's beside the floor's (a twin as a
    setting of its own)."""
    names = [capture, base, f"{base} twin"]
    view: dict[tuple[str, str], Any] = {(client, name): merged(cells) for name, cells in zip(names, kinds)}
    order = (base, capture, f"{base} twin")
    print()
    print_loop_threads(view, [client], order)
    print_threads(view, [client], order)
    print_tasks(view, [client], order, top=10)


# The on/off options, each with its --help line, in the order --help lists them.
SWITCHES = {
    "--twin": "a second floor (or reference) cell on every server: floor against floor",
    "--twin-resumable": "useStream: the twin (implied) asks for resumable streams, as the journal's runs are made",
    "--first-turns": "new threads every round, each with one unmeasured turn: the first turns of conversations",
    "--promoted": "count the objects each cell's rounds move into the oldest generation (costs CPU)",
    "--split": "split each kind of cell's CPU by thread and by kind of task (a clocked server is slower)",
    "--pin": "every server on one CPU, the clients on the others (needs two CPUs; see tests/harness/bench/pinning.py)",
    "--busy-beside-journal": "a process spinning on a CPU while the journal's cell runs: unpinned, the room the"
                             " `events` reference's clients take in their own rounds",
}


async def main(args: argparse.Namespace) -> None:
    # One split for every client's servers: once pinned, the benchmark itself runs on one CPU fewer.
    pin = CpuSplit() if args.pin else None
    print_probe("at the start")
    for client in args.client or ["runs.wait"]:
        await measure(client, args.capture, args.servers, args.rounds, args.runs, args.threads, args.twin, args.store,
                      args.promoted, args.split, args.seed, args.first_turns, args.twin_resumable, pin,
                      args.busy_beside_journal)
    print()
    print_probe("at the end")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--client", action="append", choices=PAIRED_CLIENTS,
                        help="the client kinds (repeatable; runs.wait by default)")
    parser.add_argument("--capture", choices=["auto", "lean"], default="auto")
    parser.add_argument("--store", choices=list(STORES), default="sqlite",
                        help="the journal's store on the paired servers")
    parser.add_argument("--servers", type=int, default=2, help="paired servers, each driving both cells")
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--runs", type=int, default=24, help="runs per cell per round")
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--seed", default=secrets.token_hex(4),
                        help="orders the cells in each round (random by default; printed, to run the same order again)")
    for flag, meaning in SWITCHES.items():
        parser.add_argument(flag, action="store_true", help=meaning)
    # A stopped benchmark stops the servers it started: SIGTERM unwinds like Ctrl-C.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    asyncio.run(main(parser.parse_args()))
