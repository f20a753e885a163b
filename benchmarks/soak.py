"""Does journaling cost more as a conversation grows? The soak.

Three servers side by side, with the instant model: the useStream client
without the plugin (`off`), the same client asking for `events` itself without
the plugin (`off+events`: what capturing from `events` costs by nature), and
the useStream client with the plugin (`auto`, which captures it from
`events`). A long conversation per thread, each thread a turn per round, after
a warm-up turn that is not measured. Printed: the ratio of the run's wall time
and server CPU with the plugin to those without it (and to the client asking
for `events` itself) at the first and last turns, and RSS growth per 100 runs
over the whole soak and over its second half, from the readings at either end
and as a line fitted through the reading after every turn, with the 5-95%
interval of the ratio. With `--instances`, the soak runs on that many sets of
servers, pooled, and the ratios are printed per set instead; with
`--soak-resumable` its client asks for resumable streams, as useStream with
`reconnectOnMount` does; with `--pin` the servers run on one CPU and the
clients on the others.

Its first and last five turns are 40 runs per server each with the default 8
threads (the per-run CPU of a round swings by tens of percent; more runs per
window narrow the ratios).

    python3 tasks.py bench soak [--soak-turns 50] [--soak-threads 8] [--soak-resumable] [--instances 1] [--pin]

`python3 tasks.py bench bridge --only soak` runs the same.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import statistics
from typing import Any

from tests.harness.bench.cells import Cell
from tests.harness.bench.clients import (
    use_stream,
    use_stream_events,
    use_stream_resumable,
    use_stream_resumable_events,
)
from tests.harness.bench.pinning import CpuSplit
from tests.harness.bench.report import print_probe
from tests.harness.bench.servers import quiet_dev_server, rss_mib, start_order
from tests.harness.bench.stats import (
    rss_slope,
    slope_ratio_interval,
    soak_figure,
    soak_ratio,
)
from tests.harness.langgraph_server import LanggraphDevServer

SERVERS = ("off", "off+events", "auto")


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


async def soak(
    turns: int, threads: int, instances: int = 1, resumable: bool = False, pin: CpuSplit | None = None
) -> None:
    """Long conversations: does journaling cost grow with the thread? (See the module docstring.)"""
    sets = [await _soak_set(turns, threads, resumable, instance, pin) for instance in range(max(1, instances))]
    print()
    client = "useStream client with resumable streams" if resumable else "useStream client"
    print(f"soak: {turns} turns in each of {threads} threads after a warm-up turn, {client}, instant model"
          + (f"; {len(sets)} sets of servers, started afresh, pooled" if len(sets) > 1 else "")
          + (f"; {sets[0]['pinned']}" if sets[0]["pinned"] else ""))
    print_turn_ratios(sets, turns)
    print_rss_growth(sets, turns, threads)
    print_rss_slopes(sets, turns, threads)


def print_turn_ratios(sets: list[dict[str, Any]], turns: int) -> None:
    """Walls and CPU per run at the first and last turns, and `auto`'s ratios to the two references."""
    first, last = slice(0, 5), slice(turns - 5, turns)
    for label, turns_ in (("turns 1-5", first), (f"turns {turns - 4}-{turns}", last)):
        print(f"  {label:12} median wall s / server CPU ms per run: " + ", ".join(
            f"{n} {soak_figure(sets, n, 'wall', turns_):.3f} / {soak_figure(sets, n, 'CPU', turns_) * 1000:.1f}"
            for n in SERVERS))
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


def print_rss_growth(sets: list[dict[str, Any]], turns: int, threads: int) -> None:
    """RSS growth per 100 runs from the readings at either end, over the whole soak and over its second half."""
    # What a bounded cache takes (the store's page cache, the journal's
    # per-thread caches) shows in the first half and no more; what keeps
    # growing shows in both.
    for span, start_key, count in (("all turns", "rss_start", turns),
                                   (f"turns {turns // 2 + 1}-{turns}", "rss_half", turns - turns // 2)):
        hundreds = count * threads / 100 * len(sets)
        start = {n: statistics.mean(one[start_key][n] for one in sets) for n in SERVERS}
        end = {n: statistics.mean(one["rss_end"][n] for one in sets) for n in SERVERS}
        growth = {n: sum(one["rss_end"][n] - one[start_key][n] for one in sets) / hundreds for n in SERVERS}
        print(f"  RSS over {span}: " + ", ".join(
            f"{n} {start[n]:.1f} -> {end[n]:.1f} MiB ({growth[n]:.2f} per 100 runs)" for n in SERVERS))
        for base in ("off", "off+events"):
            if growth[base] > 0:
                print(f"    RSS growth auto/{base}: {growth['auto'] / growth[base]:.3f}")


def print_rss_slopes(sets: list[dict[str, Any]], turns: int, threads: int) -> None:
    """RSS growth per 100 runs as a line fitted through every turn's reading, with the ratio's interval."""
    # Two readings of RSS move with whatever the collector and the allocator
    # did just before them; a line fitted through every turn's reading does not.
    runs_per_turn = threads / 100
    for span, turns_ in (("all turns", range(turns)), (f"turns {turns // 2 + 1}-{turns}", range(turns // 2, turns))):
        slopes = [{n: rss_slope(one["rss_turns"][n], list(turns_)) / runs_per_turn for n in SERVERS} for one in sets]
        slope = {n: statistics.mean(each[n] for each in slopes) for n in SERVERS}
        print(f"  RSS growth per 100 runs fitted over {span}: "
              + ", ".join(f"{n} {slope[n]:.2f}" for n in SERVERS))
        for base in ("off", "off+events"):
            if slope[base] <= 0:
                continue
            row = f"    auto/{base}: {slope['auto'] / slope[base]:.3f}"
            if len(sets) == 1:
                low, high = slope_ratio_interval(sets[0]["rss_turns"]["auto"], sets[0]["rss_turns"][base],
                                                 list(turns_))
                row += f" ({low:.3f} {high:.3f} over the turns resampled)"
            else:
                row += " (per set " + " ".join(
                    f"{each['auto'] / each[base]:.3f}" if each[base] > 0 else "nan" for each in slopes) + ")"
            print(row + "   target within 1.1")


def add_options(parser: argparse.ArgumentParser) -> None:
    """The soak's own options (`bench bridge` takes them too)."""
    parser.add_argument("--soak-turns", type=int, default=50)
    parser.add_argument("--soak-threads", type=int, default=8)
    parser.add_argument("--soak-resumable", action="store_true",
                        help="the soak's client asks for resumable streams (useStream's reconnectOnMount)")


async def main(args: argparse.Namespace) -> None:
    print_probe("at the start")
    await soak(args.soak_turns, args.soak_threads, args.instances, args.soak_resumable,
               CpuSplit() if args.pin else None)
    print()
    print_probe("at the end")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    add_options(parser)
    parser.add_argument("--instances", type=int, default=1, help="sets of soak servers, each started afresh")
    parser.add_argument("--pin", action="store_true",
                        help="the servers on one CPU, the clients on the others (needs two CPUs)")
    # A stopped benchmark stops the servers it started: SIGTERM unwinds like Ctrl-C.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    asyncio.run(main(parser.parse_args()))
