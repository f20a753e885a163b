"""The journal's cost above the floor, measured in one process: the paired benchmark.

The bridge matrix (`benchmarks/bridge.py`) sets a server with the plugin beside
a floor server: two processes, and two processes differ by their own luck
(where their heaps land, when their full collections come) about as much as
the journal costs. Here each server is both (`benchmarks/paired_app.py`): the
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
servers' work alike in both cells (see `benchmarks/pinning.py`). With
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
import contextlib
import random
import secrets
import signal
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from benchmarks.bridge import (
    CLIENTS,
    COLLECTIONS,
    CPU,
    CPU_BESIDE_COLLECTIONS,
    WALL,
    Cell,
    pct,
    pooled_with_interval,
    print_loop_threads,
    print_probe,
    print_tasks,
    print_threads,
    quiet_dev_server,
    room_per_run,
    start_server,
    use_stream_events,
    use_stream_resumable_events,
)
from benchmarks.floor_app import FLOOR_HEADER, PLAIN_HEADER
from benchmarks.full_collections import FullCollections, ProbeDirectory
from benchmarks.pinning import CpuSplit
from benchmarks.server_threads import ThreadNames
from benchmarks.task_clock import TaskClock
from tests.harness.langgraph_server import LanggraphDevServer

PAIRED_APP = Path(__file__).resolve().with_name("paired_app.py")
# Where `auto` and `lean` read runs as the floor does (see the module docstring).
PAIRED_CLIENTS = ("runs.wait", "create+join", "values stream", "useStream")
# The client measured against itself asking for `events` (see the module docstring).
AGAINST_EVENTS = "useStream"
JOURNAL, FLOOR, TWIN, EVENTS = "journal", "floor", "floor twin", "events itself"
# The position `spread_collections` adds to a cell's rounds (after `Cell.rounds`' own).
CPU_COLLECTIONS_SPREAD = COLLECTIONS + 1


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


@contextlib.contextmanager
def busy_process(on: bool = True) -> Iterator[None]:
    """With `on`, a process spinning on a CPU while the block runs (stopped after it)."""
    if not on:
        yield
        return
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield
    finally:
        spinner.kill()
        spinner.wait()


def spread_collections(cells: list[Cell]) -> list[list[tuple[float, ...]]]:
    """The rounds of one server's cells, each with its CPU less the full collections
    that fell in it plus its share of them all: the server's full collections' CPU
    in the measured rounds, shared by the middle and full collections each round
    made (`COLLECTIONS`).

    A full collection comes in place of every eleventh collection of the middle
    generation (`benchmarks/server_probe`), so it falls in whichever cell's
    round makes that one; the rounds that made the ten before brought it on as
    much. Where it fell is a matter of phase: three or four of them, a tenth of
    a second each, decide which cell seems to cost more. Shared by the
    collections that bring them on, a cell pays for them as often as it makes
    those: a cell that allocates more still pays more."""
    collections = sum(cell.during.middle + cell.during.full for cell in cells)
    per_collection = sum(cell.during.seconds for cell in cells) / collections if collections else 0.0
    return [[(*r, r[CPU_BESIDE_COLLECTIONS] + r[COLLECTIONS] * per_collection) for r in cell.rounds]
            for cell in cells]


def excess_by_round(mine: list[tuple[float, ...]], floor: list[tuple[float, ...]], off: list[tuple[float, ...]],
                    figure: int = CPU) -> list[float]:
    """(cell - floor) / off, round by round: the three cells' rounds in step."""
    return [(m[figure] - f[figure]) / o[figure] for m, f, o in zip(mine, floor, off, strict=True)]


def pooled_interval(pairs: list[tuple[list[tuple[float, ...]], list[tuple[float, ...]]]],
                    off: list[tuple[float, ...]], figure: int = CPU, resamples: int = 2000,
                    seed: str = "paired", bases: list[list[tuple[float, ...]]] | None = None,
                    ) -> tuple[float, float, float]:
    """The pooled excess, (sum of cell - sum of floor) / sum of off over every server
    and round, and its 5th-95th percentile when the servers are drawn again with
    replacement, then the rounds of each: the matrix's `pooled_with_interval`, each
    server's rounds one set, `off`'s rounds beside every server's, or with
    `bases` each server's own (its rounds in step with the pair's)."""
    count = len(off)
    cells = {
        (seed, "off"): SimpleNamespace(rounds=[r for base in bases for r in base] if bases else off * len(pairs)),
        (seed, "floor"): SimpleNamespace(rounds=[r for _, floor in pairs for r in floor]),
        (seed, "cell"): SimpleNamespace(rounds=[r for mine, _ in pairs for r in mine]),
    }
    blocks = [range(i * count, (i + 1) * count) for i in range(len(pairs))]
    (_, whole), _, (low, high) = pooled_with_interval(cells, seed, "cell", resamples, figure, blocks)
    return whole, low, high


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


async def measure(client: str, capture: str, servers: int, rounds: int, runs: int, threads: int, twin: bool,
                  store: str = "sqlite", promoted: bool = False, split: bool = False, seed: str = "0",
                  first_turns: bool = False, twin_resumable: bool = False, pin: CpuSplit | None = None,
                  busy_beside_journal: bool = False) -> None:
    run = CLIENTS[client]
    against_events = client == AGAINST_EVENTS
    # The second kind of cell is the floor, or for useStream that client asking for `events` itself.
    base = EVENTS if against_events else FLOOR
    collections = {"off": FullCollections(),
                   **{f"paired {i}": FullCollections(promoted=promoted) for i in range(servers)}}
    clocks = [TaskClock() for _ in range(servers)] if split else []
    names = [ThreadNames() for _ in range(servers)] if split else []
    started: dict[str, LanggraphDevServer] = {}
    began = time.monotonic()
    try:
        started["off"] = start_server("off", 0.0, collections["off"])
        for i in range(servers):
            probes = (clocks[i], names[i]) if split else ()
            started[f"paired {i}"] = start_paired(capture, collections[f"paired {i}"], store, probes)
        pinned = pin.pin([server.process.pid for server in started.values()]) if pin is not None else ""
        cells: dict[tuple[str, str], Cell] = {("off", "off"): Cell(started["off"], run, False, collections["off"])}
        twin = twin or twin_resumable
        kinds = (JOURNAL, base, TWIN) if twin else (JOURNAL, base)
        twin_name = f"{base} twin" + (", resumable" if twin_resumable and against_events else "")
        for i in range(servers):
            server, probe = started[f"paired {i}"], collections[f"paired {i}"]
            for kind in kinds:
                # The floor's cells carry its header; for useStream they are the client
                # asking for `events` itself, which the plugin forwards untouched.
                runs_as, headers = run, None
                if kind != JOURNAL:
                    runs_as = use_stream_events if against_events else run
                    if kind == TWIN and against_events and twin_resumable:
                        runs_as = use_stream_resumable_events
                    headers = {PLAIN_HEADER if against_events else FLOOR_HEADER: "1"}
                cells[f"paired {i}", kind] = Cell(server, runs_as, True, probe, headers=headers,
                                                  clock=clocks[i] if split else None,
                                                  thread_names=names[i] if split else None)
        for cell in cells.values():
            await cell.setup(threads)
            await cell.round(runs, measured=False)
        order = list(cells)
        for index in range(rounds):
            random.Random(f"{seed}/{index}").shuffle(order)
            if first_turns:
                for key in order:
                    await fresh_threads(cells[key], threads)
            for key in order:
                with busy_process(busy_beside_journal and key[1] == JOURNAL):
                    await cells[key].round(runs)
        (off,) = spread_collections([cells["off", "off"]])
        spread = {}
        for i in range(servers):
            for kind, mine in zip(kinds, spread_collections([cells[f"paired {i}", kind] for kind in kinds])):
                spread[i, kind] = mine
        minutes = (time.monotonic() - began) / 60
        turns = f", new threads every round (turns 1-{-(-runs // threads)} after one)" if first_turns else ""
        print(f"\n{client}, `{capture}` on {servers} paired servers, journal store {store}: {rounds} interleaved"
              f" rounds of {runs} runs per cell over {threads} threads{turns} ({minutes:.1f} min, round order {seed})"
              + (f"; {pinned}" if pinned else "")
              + ("; a busy process beside the journal cell's clients" if busy_beside_journal else ""))
        if against_events:
            print("excess over the same client asking for `events` itself in the same process: (cell - events)"
                  " / events, per run; pooled (5%-95%, servers and their rounds drawn again), and per round:"
                  " median, quartiles, [min max]")
        else:
            print("excess over the floor in the same process: (cell - floor) / off, per run; pooled (5%-95%, servers"
                  " and their rounds drawn again), and per round: median, quartiles, [min max]")
        off_cpu = statistics.mean(r[CPU] for r in off) * 1000
        print(f"  off: {off_cpu:.2f} ms of server CPU per run")
        for i in range(servers):
            for kind in kinds:
                mine = cells[f"paired {i}", kind].rounds
                during = cells[f"paired {i}", kind].during
                print(f"  server {i + 1} {twin_name if kind == TWIN else kind}: {statistics.mean(r[CPU] for r in mine) * 1000:.2f} ms per run,"
                      f" {sum(r[CPU] for r in mine) / sum(r[CPU] for r in off):.3f}x off;"
                      f" {during.full} full collections in its rounds ({during.seconds * 1000:.0f} ms),"
                      f" {statistics.mean(r[COLLECTIONS] for r in mine):.3f} middle and full ones per run"
                      + (f", {during.promoted / len(mine) / runs:.0f} objects promoted per run" if promoted else ""))
                clients, sleeps, preemptions, moves = room_per_run(cells[f"paired {i}", kind])
                print(f"      its clients {clients:.2f} ms of the benchmark's CPU per run; the server's threads per"
                      f" run: {sleeps:.1f} sleeps, {preemptions:.1f} preemptions, {moves:.1f} moves to another CPU")
        against = "`events` itself" if against_events else "the floor"
        report(f"`{capture}` against {against}", [(spread[i, JOURNAL], spread[i, base]) for i in range(servers)], off,
               against_floor=not against_events)
        if twin:
            report(f"{twin_name} against {against}", [(spread[i, TWIN], spread[i, base]) for i in range(servers)], off,
                   against_floor=not against_events)
        if split:
            print_split(client, capture, [[cells[f"paired {i}", kind] for i in range(servers)] for kind in kinds],
                        base)
        for cell in cells.values():
            await cell.client.aclose()
    finally:
        for server in started.values():
            server.stop()
        for probe in [*collections.values(), *clocks, *names]:
            probe.remove()


def merged(cells: list[Cell]) -> SimpleNamespace:
    """One kind of cell over every paired server, as the matrix's printers read a cell."""
    runs = sum(len(cell.durations) for cell in cells)
    cpu, loop_cpu = sum(cell.cpu for cell in cells), sum(cell.loop_cpu for cell in cells)
    return SimpleNamespace(
        durations=[d for cell in cells for d in cell.durations], cpu=cpu, loop_cpu=loop_cpu,
        cpu_per_run=cpu / runs, loop_cpu_per_run=loop_cpu / runs, clock=cells[0].clock,
        by_thread=sum((cell.by_thread for cell in cells), Counter()),
        tasks=sum((cell.tasks for cell in cells), Counter()),
    )


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
    parser.add_argument("--twin", action="store_true",
                        help="a second floor (or reference) cell on every server: floor against floor")
    parser.add_argument("--twin-resumable", action="store_true",
                        help="useStream: the twin (implied) asks for resumable streams, as the journal's runs are made")
    parser.add_argument("--first-turns", action="store_true",
                        help="new threads every round, each with one unmeasured turn: the first turns of conversations")
    parser.add_argument("--promoted", action="store_true",
                        help="count the objects each cell's rounds move into the oldest generation (costs CPU)")
    parser.add_argument("--split", action="store_true",
                        help="split each kind of cell's CPU by thread and by kind of task (a clocked server is slower)")
    parser.add_argument("--pin", action="store_true",
                        help="every server on one CPU, the clients on the others (needs two CPUs; see benchmarks/pinning.py)")
    parser.add_argument("--busy-beside-journal", action="store_true",
                        help="a process spinning on a CPU while the journal's cell runs: unpinned, the room the"
                             " `events` reference's clients take in their own rounds")
    # A stopped benchmark stops the servers it started: SIGTERM unwinds like Ctrl-C.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    asyncio.run(main(parser.parse_args()))
