"""The benchmarks' figures: the CPU they read, the collections they count and the ratios they pool.

A benchmark that misreads a server's CPU, or divides the wrong rounds, prints
plausible numbers that mean nothing; these pin what its figures are made of.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import psutil
import pytest

from journal_bridge.store import open_store
from tests.harness.bench import cells as bench_cells
from tests.harness.bench import pinning, process_cpu, report, server_threads, servers, stats, store_workload, task_clock
from tests.harness.bench.full_collections import PROBE, Collections, FullCollections, ProbeDirectory
from tests.harness.bench.process_cpu import process_seconds, threads_seconds, tree_seconds
from tests.harness.bench.server_threads import EXECUTOR, LOOP, PROBE as PROBE_THREADS, REMAINDER, SQLITE, ThreadNames
from tests.harness.bench.task_clock import SETTLED, TaskClock, grouped

# A child's function that takes `seconds` of its thread's CPU.
_SPIN = """
import sys, threading, time
def spin(seconds):
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass
"""

_BUSY = _SPIN + """
workers = [threading.Thread(target=spin, args=(0.15,)) for _ in range(2)]
for w in workers: w.start()
for w in workers: w.join()
print("done", flush=True)
time.sleep(30)
"""


def test_the_cpu_read_from_outside_counts_every_thread_including_those_that_ended():
    child = subprocess.Popen([sys.executable, "-c", _BUSY], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "done"
        process = psutil.Process(child.pid)
        seen = process_seconds(process)
        # Two threads spun 0.15 s each and are gone: their time is still the process's.
        assert seen >= 0.29
        times = process.cpu_times()
        assert abs(seen - (times.user + times.system)) < 0.05  # the kernel's tick count, 10 ms a tick
        # Finer than ticks: the clock is not a multiple of 10 ms.
        assert round(seen * 100) != seen * 100
        # A sleeping process's CPU stands still.
        time.sleep(0.05)
        assert tree_seconds(child.pid) - seen < 0.01
    finally:
        child.kill()
        child.wait()


class _Cell:
    def __init__(
        self,
        cpu_per_run: list[float],
        beside_collections: list[float] | None = None,
        walls: list[float] | None = None,
    ) -> None:
        beside = beside_collections if beside_collections is not None else cpu_per_run
        walls = walls if walls is not None else [1.0] * len(cpu_per_run)
        self.rounds = [(wall, cpu, less) for wall, cpu, less in zip(walls, cpu_per_run, beside, strict=True)]


def test_the_pooled_ratio_divides_totals_and_the_excess_is_over_off():
    cells = {
        ("runs.wait", "off"): _Cell([0.020, 0.010]),
        ("runs.wait", "floor"): _Cell([0.024, 0.012]),
        ("runs.wait", "auto"): _Cell([0.027, 0.012]),
    }
    ratio, excess = stats.pooled_ratio(cells, "runs.wait", "auto", [0, 1])
    assert ratio == pytest.approx(0.039 / 0.030)
    assert excess == pytest.approx((0.039 - 0.036) / 0.030)
    # Repeated rounds count as often as drawn (the bootstrap's resampling).
    ratio, excess = stats.pooled_ratio(cells, "runs.wait", "auto", [0, 0])
    assert ratio == pytest.approx(1.35)
    assert excess == pytest.approx(0.15)


def test_over_both_floors_the_excess_is_over_the_mean_of_the_floor_and_its_twin():
    cells = {
        ("runs.wait", "off"): _Cell([0.020, 0.010]),
        ("runs.wait", "floor"): _Cell([0.024, 0.012]),
        ("runs.wait", "floor-twin"): _Cell([0.022, 0.011]),
        ("runs.wait", "auto"): _Cell([0.027, 0.012]),
    }
    ratio, excess = stats.pooled_ratio(cells, "runs.wait", "auto", [0, 1], floors=stats.BOTH_FLOORS)
    assert ratio == pytest.approx(0.039 / 0.030)
    assert excess == pytest.approx((0.039 - (0.036 + 0.033) / 2) / 0.030)
    # Without the twin there is no mean of both to take.
    del cells["runs.wait", "floor-twin"]
    _, excess = stats.pooled_ratio(cells, "runs.wait", "auto", [0, 1], floors=stats.BOTH_FLOORS)
    assert excess != excess  # NaN


def test_the_machine_probe_is_cpu_time_and_grows_with_the_work(monkeypatch):
    monkeypatch.setattr(process_cpu, "_PROBE_STEPS", 200_000)
    short = min(process_cpu.probe_seconds() for _ in range(3))
    monkeypatch.setattr(process_cpu, "_PROBE_STEPS", 2_000_000)
    long = min(process_cpu.probe_seconds() for _ in range(3))
    assert short > 0
    assert 5 < long / short < 20


_MAIN_AND_WORKER = _SPIN + """
worker = threading.Thread(target=spin, args=(0.4,))
worker.start()
spin(0.1)
worker.join()
print("done", flush=True)
sys.stdin.read()
"""


@contextlib.contextmanager
def _python_child(script: str) -> Iterator[subprocess.Popen[str]]:
    """`script` in a Python process of its own, talked to through its stdin and
    stdout; on leaving, its stdin is closed and it is waited for."""
    child = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        yield child
    finally:
        child.stdin.close()
        child.wait(10)


def test_the_event_loop_figure_is_the_main_threads_cpu_alone():
    with _python_child(_MAIN_AND_WORKER) as child:
        assert child.stdout.readline().strip() == "done"
        main = process_cpu.thread_seconds(child.pid, child.pid)
        whole = process_seconds(psutil.Process(child.pid))
    assert main is not None
    # The main thread spun 0.1 s (plus the interpreter's start); the worker's 0.4 s is not in it.
    assert 0.09 < main < 0.3
    assert whole - main > 0.35
    assert process_cpu.thread_seconds(child.pid, child.pid) is None  # gone: no figure, not a stale one


_SLEEPER = """
import sys, threading, time
print("ready", flush=True)
sys.stdin.readline()
napped, forever = threading.Event(), threading.Event()
def naps():
    for _ in range(200):
        time.sleep(0.001)
    napped.set()
    forever.wait()
threading.Thread(target=naps, daemon=True).start()
napped.wait()
print("done", flush=True)
sys.stdin.read()
"""


def test_the_scheduling_counts_add_up_every_live_thread_s_sleeps():
    with _python_child(_SLEEPER) as child:
        assert child.stdout.readline().strip() == "ready"
        before = process_cpu.tree_scheduling(child.pid)
        child.stdin.write("go\n")
        child.stdin.flush()
        assert child.stdout.readline().strip() == "done"
        after = process_cpu.tree_scheduling(child.pid)
    # The worker's 200 naps are 200 sleeps of its own, counted while it lives.
    assert 200 <= (after - before).voluntary < 400
    assert process_cpu.tree_scheduling(child.pid) == process_cpu.Scheduling()  # gone: nothing to read


def test_the_matrix_prints_each_cells_clients_cpu_and_scheduling_per_run(capsys):
    def cell(runs: int, client_cpu: float, sleeps: int, moves: int) -> SimpleNamespace:
        return SimpleNamespace(durations=[0.1] * runs, client_cpu=client_cpu,
                               scheduling=process_cpu.Scheduling(voluntary=sleeps, involuntary=runs, migrations=moves))

    cells = {("useStream", "auto"): cell(20, 0.24, 20_000, 3540), ("useStream", "events"): cell(10, 0.6, 8300, 160),
             ("useStream", "lean"): cell(0, 0.0, 0, 0)}
    report.print_scheduling(cells, ["useStream"], ("events", "auto", "lean"))
    lines = capsys.readouterr().out.splitlines()[1:]
    assert len(lines) == 2  # a cell without runs has no row
    assert lines[0].split() == ["useStream", "events", "clients", "60.00", "ms", "sleeps", "830.0",
                                "preemptions", "1.0", "moves", "16.0"]
    assert lines[1].split() == ["useStream", "auto", "clients", "12.00", "ms", "sleeps", "1000.0",
                                "preemptions", "1.0", "moves", "177.0"]


def test_the_busy_process_spins_only_while_its_block_runs():
    me = psutil.Process()
    before = set(me.children())
    with pinning.busy_process(False):
        assert set(me.children()) == before
    with pinning.busy_process():
        (spinner,) = set(me.children()) - before
        for _ in range(200):  # it spins: its CPU grows while this process sleeps
            time.sleep(0.05)
            times = spinner.cpu_times()
            if times.user + times.system >= 0.05:
                break
        assert times.user + times.system >= 0.05
    assert not spinner.is_running()
    assert set(me.children()) == before


def test_the_figure_beside_full_collections_pools_the_cpu_less_the_collections():
    cells = {
        # Off's second round took a full collection of 0.010 s per run.
        ("k", "off"): _Cell([0.020, 0.030], [0.020, 0.020]),
        ("k", "floor"): _Cell([0.024, 0.024]),
        ("k", "auto"): _Cell([0.026, 0.026]),
    }
    ratio, excess = stats.pooled_ratio(cells, "k", "auto", [0, 1])
    assert (ratio, excess) == pytest.approx((0.052 / 0.050, 0.004 / 0.050))
    ratio, excess = stats.pooled_ratio(cells, "k", "auto", [0, 1], bench_cells.CPU_BESIDE_COLLECTIONS)
    assert (ratio, excess) == pytest.approx((0.052 / 0.040, 0.004 / 0.040))


def test_the_pooled_wall_divides_the_rounds_medians_and_not_the_cpu():
    cells = {
        ("k", "off"): _Cell([0.02] * 3, walls=[2.0, 1.0, 1.0]),
        ("k", "floor"): _Cell([0.02] * 3, walls=[2.0, 1.1, 1.0]),
        # One slow round out of three: its median ratio would say 1.0.
        ("k", "auto"): _Cell([0.02] * 3, walls=[2.0, 1.0, 1.4]),
    }
    ratio, excess = stats.pooled_ratio(cells, "k", "auto", [0, 1, 2], bench_cells.WALL)
    assert (ratio, excess) == pytest.approx((4.4 / 4.0, 0.3 / 4.0))
    (whole, _), ratio_band, _ = stats.pooled_with_interval(cells, "k", "auto", resamples=300, figure=bench_cells.WALL)
    assert whole == pytest.approx(1.1)
    assert ratio_band[0] < whole < ratio_band[1]
    # The CPU of the same cells is even: the figure read is the wall's.
    assert stats.pooled_ratio(cells, "k", "auto", [0, 1, 2])[0] == pytest.approx(1.0)


def test_the_interval_holds_the_pooled_figure_and_widens_with_uneven_rounds():
    even = {
        ("k", "off"): _Cell([0.02] * 8),
        ("k", "floor"): _Cell([0.025] * 8),
        ("k", "auto"): _Cell([0.026] * 8),
    }
    (ratio, excess), ratio_band, excess_band = stats.pooled_with_interval(even, "k", "auto", resamples=200)
    assert ratio_band == pytest.approx((1.3, 1.3))
    assert excess_band == pytest.approx((0.05, 0.05))
    uneven = {
        ("k", "off"): _Cell([0.02] * 8),
        ("k", "floor"): _Cell([0.025] * 8),
        ("k", "auto"): _Cell([0.020, 0.032] * 4),
    }
    (ratio, excess), ratio_band, excess_band = stats.pooled_with_interval(uneven, "k", "auto", resamples=400)
    assert ratio_band[0] <= ratio <= ratio_band[1]
    assert excess_band[0] <= excess <= excess_band[1]
    assert excess_band[1] - excess_band[0] > 0.1


def test_with_sets_of_servers_the_interval_also_moves_with_the_set_drawn():
    # Two sets of servers, four rounds each: steady within a set, apart between them.
    cells = {
        ("k", "off"): _Cell([0.02] * 8),
        ("k", "floor"): _Cell([0.025] * 8),
        ("k", "auto"): _Cell([0.026] * 4 + [0.030] * 4),
    }
    blocks = [range(0, 4), range(4, 8)]
    (ratio, excess), _, by_rounds = stats.pooled_with_interval(cells, "k", "auto", resamples=400)
    (same_ratio, same_excess), _, by_sets = stats.pooled_with_interval(cells, "k", "auto", resamples=400, blocks=blocks)
    assert (same_ratio, same_excess) == pytest.approx((ratio, excess))
    assert excess == pytest.approx(0.15)
    # Drawn by sets, half the draws hold one set twice: its figure (0.05 or 0.25) is an end of the interval.
    assert by_sets == pytest.approx((0.05, 0.25))
    assert by_rounds[1] - by_rounds[0] < by_sets[1] - by_sets[0]
    # One set is no set to draw from: the rounds are drawn as before.
    one = stats.pooled_with_interval(cells, "k", "auto", resamples=400, blocks=[range(0, 8)])
    assert one[2] == pytest.approx(by_rounds)


def _rounds(cpus: list[float]) -> list[tuple[float, float, float]]:
    """A cell's rounds as `Cell.rounds` holds them: (wall, CPU per run, CPU beside collections)."""
    return [(1.0, cpu, cpu) for cpu in cpus]


def test_the_paired_excess_is_each_rounds_difference_in_one_process_over_off():
    off = _rounds([0.020, 0.010, 0.020, 0.010])
    # One server: the journal's rounds 0.002 above its floor's however the machine moves.
    journal, floor = _rounds([0.027, 0.0145, 0.033, 0.016]), _rounds([0.025, 0.0125, 0.031, 0.014])
    assert stats.excess_by_round(journal, floor, off) == pytest.approx([0.1, 0.2, 0.1, 0.2])
    whole, low, high = stats.pooled_interval([(journal, floor)], off, resamples=300)
    # Pooled: (0.008 above) / (0.06 of off).
    assert whole == pytest.approx(0.008 / 0.06)
    assert 0.1 <= low <= whole <= high <= 0.2
    assert high - low > 0.02


def test_full_collections_are_shared_by_the_collections_that_bring_them_on():
    def cell(rounds: list[tuple[float, ...]], during: Collections) -> SimpleNamespace:
        return SimpleNamespace(rounds=rounds, during=during)

    # Two rounds of 10 runs each: the journal's rounds made 12 middle collections and
    # the floor's 8 plus 2 full ones that took 0.2 s in all, both in the floor's rounds.
    journal = cell([(0.1, 0.011, 0.011, 0.6), (0.1, 0.011, 0.011, 0.6)], Collections(middle=12))
    floor = cell([(0.1, 0.030, 0.010, 0.6), (0.1, 0.010, 0.010, 0.4)], Collections(full=2, seconds=0.2, middle=8))
    (mine, theirs) = stats.spread_collections([journal, floor])
    # 0.2 s over the 22 collections, then per run as each round made them.
    share = 0.2 / 22
    assert [r[stats.CPU_COLLECTIONS_SPREAD] for r in mine] == pytest.approx([0.011 + 0.6 * share] * 2)
    assert [r[stats.CPU_COLLECTIONS_SPREAD] for r in theirs] == pytest.approx([0.010 + 0.6 * share, 0.010 + 0.4 * share])
    # The journal made more of the collections that bring full ones on: it pays more of them,
    # though none fell in its rounds; and the CPU spent is the CPU measured.
    assert mine[0][stats.CPU_COLLECTIONS_SPREAD] - theirs[0][stats.CPU_COLLECTIONS_SPREAD] == pytest.approx(0.001)
    total = sum(r[bench_cells.CPU] for c in (journal, floor) for r in c.rounds)
    assert sum(r[stats.CPU_COLLECTIONS_SPREAD] for c in (mine, theirs) for r in c) == pytest.approx(total)
    # The figures `Cell.rounds` holds are kept as they were, in their places.
    assert [r[:4] for r in mine] == journal.rounds
    # Without any collection nothing is shared.
    (alone,) = stats.spread_collections([cell([(0.1, 0.02, 0.02, 0.0)], Collections())])
    assert alone[0][stats.CPU_COLLECTIONS_SPREAD] == 0.02


def test_the_paired_interval_draws_the_servers_and_then_their_rounds():
    off = _rounds([0.02] * 4)
    steady = [
        (_rounds([0.021] * 4), _rounds([0.020] * 4)),  # 0.05 above, every round
        (_rounds([0.025] * 4), _rounds([0.020] * 4)),  # 0.25 above, every round
    ]
    whole, low, high = stats.pooled_interval(steady, off, resamples=400)
    assert whole == pytest.approx(0.15)
    # Drawn by servers, half the draws hold one server twice: its figure is an end.
    assert (low, high) == pytest.approx((0.05, 0.25))
    # One server whose floor and journal move together: no spread at all.
    together = [(_rounds([0.03, 0.05, 0.04, 0.06]), _rounds([0.02, 0.04, 0.03, 0.05]))]
    assert stats.pooled_interval(together, _rounds([0.02] * 4), resamples=200)[1:] == pytest.approx((0.5, 0.5))


def test_against_its_own_reference_each_server_is_measured_over_that_reference():
    # useStream against the same client asking for `events` itself: two servers, one
    # twice as fast as the other, each journal 10% above its own reference.
    fast = (_rounds([0.011, 0.0132, 0.011]), _rounds([0.010, 0.012, 0.010]))
    slow = (_rounds([0.022, 0.0264, 0.022]), _rounds([0.020, 0.024, 0.020]))
    pairs = [fast, slow]
    unused_off = _rounds([1.0] * 3)
    whole, low, high = stats.pooled_interval(pairs, unused_off, resamples=300, bases=[fast[1], slow[1]])
    assert (whole, low, high) == pytest.approx((0.1, 0.1, 0.1))
    # Over a shared `off` the same rounds give another figure: `bases` is what is divided by.
    assert stats.pooled_interval(pairs, unused_off, resamples=50)[0] == pytest.approx(0.0096 / 6.0)
    assert stats.excess_by_round(*slow, slow[1]) == pytest.approx([0.1, 0.1, 0.1])


def test_a_paired_server_journals_to_the_store_asked_for(monkeypatch):
    started: list[dict[str, str]] = []
    monkeypatch.setattr(servers, "quiet_dev_server", lambda *, env, **config: started.append(env) or config)
    probe = FullCollections()
    try:
        config = servers.start_paired("lean", probe, "memory")
        servers.start_paired("auto", probe)
    finally:
        probe.remove()
    memory, sqlite = started
    assert memory["JOURNAL_BRIDGE_STORE_URL"] == "memory://"
    assert memory["JOURNAL_BRIDGE_CAPTURE"] == "lean"
    # Without a store asked for, the harness's SQLite file is the journal's.
    assert "JOURNAL_BRIDGE_STORE_URL" not in sqlite
    assert sqlite["JOURNAL_BRIDGE_CAPTURE"] == "auto"
    assert config["http"]["app"].startswith(str(servers.PAIRED_APP))
    with pytest.raises(KeyError):
        servers.start_paired("auto", probe, "redis")


def _soak_set(walls: dict[str, list[float]], cpus: dict[str, list[float]]) -> dict:
    return {"walls": {n: [[w] for w in ws] for n, ws in walls.items()}, "cpus": cpus}


def test_soak_ratios_pool_the_sets_of_servers_and_read_each_set_alone():
    one = _soak_set({"off": [1.0, 1.0], "auto": [1.1, 1.3]}, {"off": [0.02, 0.02], "auto": [0.022, 0.030]})
    two = _soak_set({"off": [1.0, 1.0], "auto": [1.1, 1.1]}, {"off": [0.02, 0.04], "auto": [0.026, 0.044]})
    last = slice(1, 2)
    assert stats.soak_ratio([one], "auto", "off", "CPU", last) == pytest.approx(1.5)
    assert stats.soak_ratio([two], "auto", "off", "CPU", last) == pytest.approx(1.1)
    # Pooled: the mean CPU per run over both sets' turns, not the mean of the ratios.
    assert stats.soak_ratio([one, two], "auto", "off", "CPU", last) == pytest.approx(0.074 / 0.06)
    # Walls: the median of every run of those turns, over both sets.
    assert stats.soak_ratio([one, two], "auto", "off", "wall", last) == pytest.approx(1.2)
    assert stats.soak_ratio([one, two], "auto", "off", "wall", slice(0, 2)) == pytest.approx(1.1)


_COLLECTING = """
import gc, sys
for line in sys.stdin:
    gc.collect({"full": 2, "middle": 1}.get(line.strip(), 0))
    print("done", flush=True)
"""


@contextlib.contextmanager
def _probed(probe: ProbeDirectory, script: str) -> Iterator[subprocess.Popen[str]]:
    """A Python child running `script` with `probe`'s part of the server probe on;
    killed, and the probe's directory removed, at the end."""
    child = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True, env={**os.environ, **probe.env})
    try:
        assert child.stdin is not None and child.stdout is not None
        yield child
    finally:
        child.kill()
        child.wait()
        probe.remove()


def _probe_module() -> Any:
    """The server probe, loaded here with none of its variables set: it installs nothing."""
    spec = importlib.util.spec_from_file_location("probe_under_test", PROBE / "sitecustomize.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_probe_counts_full_collections_and_middle_ones_apart_and_not_the_youngest():
    probe = FullCollections()
    with _probed(probe, _COLLECTING) as child:
        assert child.stdin is not None and child.stdout is not None

        def ask(what: str) -> None:
            child.stdin.write(what + "\n")
            child.stdin.flush()
            assert child.stdout.readline().strip() == "done"

        def reported(full: int, middle: int) -> None:
            deadline = time.monotonic() + 10
            while (probe.totals().full, probe.totals().middle) != (full, middle):  # written by the probe's own thread
                assert time.monotonic() < deadline, f"the probe reported {probe.totals()}, not {full} and {middle}"
                time.sleep(0.01)

        ask("young")
        time.sleep(0.2)
        seen = probe.totals()
        ask("young")
        time.sleep(0.2)
        assert probe.totals() == seen
        ask("full")
        reported(seen.full + 1, seen.middle)
        ask("full")
        reported(seen.full + 2, seen.middle)
        assert probe.totals().seconds > seen.seconds
        for count in (1, 2, 3):
            ask("middle")
            reported(seen.full + 2, seen.middle + count)


_PROMOTING = """
import gc, sys
kept = []
gc.collect()
for line in sys.stdin:
    count = int(line)
    kept.extend([[i]] for i in range(count))  # containers that outlive the collection
    [[i] for i in range(count)]  # and as many that do not
    gc.collect(1)
    print("done", flush=True)
"""


@pytest.mark.parametrize("promoted", [True, False])
def test_the_probe_counts_what_reaches_the_oldest_generation_when_asked(promoted):
    probe = FullCollections(promoted=promoted)
    with _probed(probe, _PROMOTING) as child:
        assert child.stdin is not None and child.stdout is not None
        for count in (2000, 5000):
            before = probe.totals().promoted
            child.stdin.write(f"{count}\n")
            child.stdin.flush()
            assert child.stdout.readline().strip() == "done"
            time.sleep(0.2)  # written by the probe's own thread
            moved = probe.totals().promoted - before
            if promoted:
                # Each kept list and the list in it; what was freed before the collection is not.
                assert 2 * count <= moved < 2 * count + 500
            else:
                assert moved == 0
    assert probe.totals().full == 0


# Two kinds of task on the event loop (one of them awaiting a coroutine that spins),
# a task on a loop of another thread, and anyio's look at a task's coroutine.
_TASKS = _SPIN + """
import asyncio, inspect
async def inner(seconds):
    spin(seconds)
async def heavy():
    await asyncio.sleep(0)
    await inner(0.3)
async def light():
    spin(0.05)
    return inspect.getcoroutinestate(asyncio.current_task().get_coro())
def elsewhere():
    async def far():
        spin(0.2)
    asyncio.run(far())
async def main():
    other = threading.Thread(target=elsewhere)
    other.start()
    state = await asyncio.create_task(light())
    await asyncio.gather(asyncio.create_task(heavy()), asyncio.create_task(heavy()))
    other.join()
    print(state, isinstance(asyncio.current_task(), asyncio.Task), flush=True)
    time.sleep(30)
asyncio.run(main())
"""


def test_the_task_clock_sums_each_kind_of_task_on_the_loop_thread_with_what_its_steps_awaited():
    clock = TaskClock()
    with _probed(clock, _TASKS) as child:
        assert child.stdout is not None
        # The probe keeps the coroutine's own state readable, as anyio reads it.
        assert child.stdout.readline().split() == ["CORO_RUNNING", "True"]
        time.sleep(SETTLED)
        totals = clock.totals()
        heavy = totals["<string>:heavy"]
        assert 0.6 <= heavy < 0.7  # two tasks, each 0.3 s in the coroutine it awaited
        assert 0.05 <= totals["<string>:light"] < 0.1
        assert not any("far" in kind for kind in totals)  # another thread's loop: not the event loop's
        assert grouped(totals) == pytest.approx({"journal": 0.0, "floor": 0.0, "server": sum(totals.values())})


# A thread started as aiosqlite starts a connection's, one of the default
# executor's, and the main thread, each spinning for a known time; the first two
# stay alive (a thread that exited is no longer listed).
_THREADS = _SPIN + """
import asyncio
def _connection_worker_thread(release):
    spin(0.3)
    release.wait()
async def main():
    release = threading.Event()
    threading.Thread(target=_connection_worker_thread, args=(release,), daemon=True).start()
    await asyncio.get_running_loop().run_in_executor(None, spin, 0.1)
    spin(0.2)
    print("done", flush=True)
    time.sleep(30)
asyncio.run(main())
"""


def test_the_thread_split_puts_each_thread_s_cpu_in_the_group_its_name_says():
    names = ThreadNames()
    with _probed(names, _THREADS) as child:
        assert child.stdout is not None and child.stdout.readline().strip() == "done"
        time.sleep(2 * _probe_module().THREAD_NAMES_SECONDS)  # the names are written by the probe's own thread
        total = process_seconds(psutil.Process(child.pid))
        groups = server_threads.split(child.pid, {}, threads_seconds(child.pid), names.names(child.pid), total)
        assert 0.3 <= groups[SQLITE] < 0.4
        assert 0.1 <= groups[EXECUTOR] < 0.2
        assert 0.2 <= groups[LOOP] < 0.6  # the spin, and the interpreter's start
        assert groups[PROBE_THREADS] < 0.05
        assert abs(groups[REMAINDER]) < 0.01  # every thread is alive: the groups add up to the process


def test_threads_are_grouped_by_name_and_what_no_live_thread_holds_is_the_remainder():
    group = server_threads.thread_group
    assert group("Thread-4 (_connection_worker_thread)") == SQLITE
    assert [group(name) for name in ("uvloop_0", "asyncio_3", "ThreadPoolExecutor-0_1")] == [EXECUTOR] * 3
    assert group("bench-gc-probe") == PROBE_THREADS
    assert group(None) == server_threads.UNNAMED
    assert group("Thread-12") == group("Thread-3") == "Thread"
    names = {11: "Thread-4 (_connection_worker_thread)", 12: "uvloop_1"}
    before = {10: 1.0, 11: 0.5, 12: 0.25}
    after = {10: 1.5, 11: 0.75, 12: 0.25, 13: 0.125}  # 13 started meanwhile, no name yet
    groups = server_threads.split(10, before, after, names, total=1.0)
    assert groups == Counter({LOOP: 0.5, SQLITE: 0.25, EXECUTOR: 0.0, server_threads.UNNAMED: 0.125,
                              REMAINDER: 0.125})


def test_a_kind_of_task_is_named_from_its_package_on_and_grouped_by_it():
    probe = _probe_module()
    # The reader waits for reports at the interval the probe writes them at.
    assert probe.TASK_REPORT_SECONDS == task_clock.TASK_REPORT_SECONDS

    def kind_of(path: str) -> str:
        code = compile("async def run(): pass", path, "exec")
        namespace: dict[str, object] = {}
        exec(code, namespace)
        coro = namespace["run"]()  # type: ignore[operator]
        try:
            return probe._task_kind(coro)
        finally:
            coro.close()

    assert kind_of("/x/.venv/lib/python3.11/site-packages/journal_bridge/delivery/bridge.py") == (
        "journal_bridge/delivery/bridge.py:run")
    assert kind_of("/x/journal_bridge/tests/harness/bench/floor_app.py") == "tests/harness/bench/floor_app.py:run"
    assert kind_of("/x/.venv/lib/python3.11/site-packages/langgraph_api/worker.py") == "langgraph_api/worker.py:run"
    assert kind_of("/usr/lib/python3.11/asyncio/queues.py") == "lib/python3.11/asyncio/queues.py:run"
    assert grouped(Counter({"journal_bridge/delivery/bridge.py:run": 1.0, "tests/harness/bench/floor_app.py:run": 2.0,
                            "langgraph_api/worker.py:run": 4.0})) == {"journal": 1.0, "floor": 2.0, "server": 4.0}


def test_rss_growth_is_the_line_through_every_turn_and_one_odd_reading_barely_moves_it():
    turns = list(range(20))
    steady = [100 + 0.5 * t for t in turns]
    assert stats.rss_slope(steady, turns) == pytest.approx(0.5)
    assert stats.rss_slope(steady, turns[10:]) == pytest.approx(0.5)
    # A collection just before the last reading: the two ends would say 0.26 per turn.
    odd = [*steady[:-1], steady[-1] - 4.5]
    assert (odd[-1] - odd[0]) / 19 == pytest.approx(0.263, abs=0.001)
    assert 0.40 < stats.rss_slope(odd, turns) < 0.5


def test_the_growth_ratios_interval_holds_the_ratio_and_is_narrow_for_steady_growth():
    turns = list(range(30))
    base = [100 + 1.0 * t + (0.3 if t % 3 == 0 else -0.15) for t in turns]
    mine = [120 + 1.1 * t + (0.2 if t % 4 == 0 else -0.05) for t in turns]
    low, high = stats.slope_ratio_interval(mine, base, turns)
    ratio = stats.rss_slope(mine, turns) / stats.rss_slope(base, turns)
    assert low <= ratio <= high
    assert 1.05 < low and high < 1.15
    noisy = [b + (6 if t % 2 else -6) * (t % 5) for t, b in zip(turns, base, strict=True)]
    wide = stats.slope_ratio_interval(mine, noisy, turns)
    assert wide[1] - wide[0] > 2 * (high - low)


def test_a_paired_split_merges_each_kind_of_cell_over_the_servers():
    from collections import Counter
    from types import SimpleNamespace

    def cell(runs: int, cpu: float, loop: float, threads: dict[str, float], tasks: dict[str, float]):
        return SimpleNamespace(durations=[0.01] * runs, cpu=cpu, loop_cpu=loop, clock=None,
                               by_thread=Counter(threads), tasks=Counter(tasks))

    one = cell(10, 0.20, 0.15, {"event loop": 0.15, "SQLite connections": 0.01}, {"journal_bridge/a": 0.02})
    two = cell(30, 0.40, 0.30, {"event loop": 0.30, "executor pool": 0.02}, {"journal_bridge/a": 0.01})
    both = report.merged([one, two])
    assert len(both.durations) == 40
    assert both.cpu_per_run == pytest.approx(0.6 / 40) and both.loop_cpu_per_run == pytest.approx(0.45 / 40)
    assert dict(both.by_thread) == pytest.approx({"event loop": 0.45, "SQLite connections": 0.01, "executor pool": 0.02})
    assert both.tasks["journal_bridge/a"] == pytest.approx(0.03)


async def test_the_run_append_figure_stores_every_run_once_and_clocks_the_writers_thread(tmp_path, monkeypatch):
    monkeypatch.setattr(store_workload, "RUN_APPENDS", 4)
    monkeypatch.setattr(store_workload, "ROUNDS", 2)
    store_path, raw_path = tmp_path / "store.db", tmp_path / "raw.db"
    async with open_store(f"sqlite:///{raw_path}"):
        pass  # the raw driver writes into the store's table shape
    run = store_workload.one_run("t")
    assert [e.event_type for e in (run[0], run[-1])] == ["run.start", "run.end"]
    assert len({e.run_id for e in run}) == 1 and len({e.source_key for e in run}) == len(run)

    figures = await store_workload.sqlite_run_appends(store_path, raw_path)

    assert [name for name, _, _ in figures] == ["store", "raw"]
    for _, thread_ms, process_ms in figures:
        assert 0 < thread_ms <= process_ms + 0.05  # the writer's thread is part of the process
    async with open_store(f"sqlite:///{store_path}") as journal:
        threads = [t for t in await journal.list_threads(limit=100) if t["thread_id"].startswith("run-append-")]
    assert len(threads) == 4 * 2
    assert {t["event_count"] for t in threads} == {len(run)}


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="pinning apart needs two CPUs")
def test_pinning_apart_puts_every_server_thread_on_one_cpu_and_the_clients_on_the_others():
    mine = os.sched_getaffinity(0)
    # A server stand-in with a second thread and a child process started before
    # the pinning, and a third thread after.
    child = subprocess.Popen(
        [sys.executable, "-c", "import subprocess, sys, threading, time\n"
         "threading.Thread(target=time.sleep, args=(30,), daemon=True).start()\n"
         "grandchild = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)'])\n"
         "print('ready', flush=True); sys.stdin.readline()\n"
         "threading.Thread(target=time.sleep, args=(30,), daemon=True).start()\n"
         "print('started', flush=True); time.sleep(30)"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert child.stdout is not None and child.stdin is not None
        assert child.stdout.readline().strip() == "ready"
        split = pinning.CpuSplit()
        said = split.pin([child.pid])
        server_cpu = max(mine)
        assert os.sched_getaffinity(0) == mine - {server_cpu}
        child.stdin.write("go\n")
        child.stdin.flush()
        assert child.stdout.readline().strip() == "started"
        tids = os.listdir(f"/proc/{child.pid}/task")
        assert len(tids) == 3
        (grandchild,) = psutil.Process(child.pid).children()
        tids += [str(thread.id) for thread in grandchild.threads()]
        assert {frozenset(os.sched_getaffinity(int(tid))) for tid in tids} == {frozenset({server_cpu})}
        assert f"CPU {server_cpu}" in said
        # A server started after the pinning (the soak's next set) starts on the
        # clients' CPUs, as the benchmark now runs there; the same split still
        # sends it to the servers' CPU.
        later = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
        try:
            assert os.sched_getaffinity(later.pid) == mine - {server_cpu}
            split.pin([later.pid])
            assert os.sched_getaffinity(later.pid) == {server_cpu}
            assert os.sched_getaffinity(0) == mine - {server_cpu}
        finally:
            later.kill()
            later.wait()
        split.release()
        assert os.sched_getaffinity(0) == mine
    finally:
        os.sched_setaffinity(0, mine)
        for process in psutil.Process(child.pid).children():
            process.kill()
        child.kill()
        child.wait()


def test_pinning_apart_on_one_cpu_says_it_cannot(monkeypatch):
    monkeypatch.setattr(pinning.os, "sched_getaffinity", lambda pid: {0})
    with pytest.raises(SystemExit, match="--pin needs two CPUs; this benchmark may use 1"):
        pinning.CpuSplit()
