"""What the benchmarks print about their cells: where a server's CPU went, per run.

By thread (the event loop, SQLite's connections, the executor, the rest), by
kind of task on the event loop (the journal's, the floor's, the server's own),
and how the scheduler treated the server's threads while each cell's clients
ran.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from types import SimpleNamespace

import psutil

from tests.harness.bench.cells import Cell
from tests.harness.bench.process_cpu import probe_seconds
from tests.harness.bench.server_threads import LOOP
from tests.harness.bench.task_clock import JOURNAL, grouped


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
    """Per cell, the server's CPU per run split by thread (`tests/harness/bench/server_threads.py`):
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


def print_probe(when: str) -> None:
    print(f"machine probe ({when}): a fixed pure-Python loop took {probe_seconds():.2f} s of CPU, "
          f"load average {psutil.getloadavg()[0]:.2f}")
