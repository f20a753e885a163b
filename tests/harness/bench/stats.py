"""The benchmarks' statistics: ratios to `off` pooled over rounds, with bootstrap intervals.

A ratio is taken side by side: a cell's figure over `off`'s for the same
client in the same rounds. Pooled (totals over totals) it moves far less than
a single round's; the intervals say how far, resampling the rounds (and the
sets of servers, when there are several) with replacement.
"""

from __future__ import annotations

import random
import statistics
from types import SimpleNamespace
from typing import Any

from tests.harness.bench.cells import COLLECTIONS, CPU, CPU_BESIDE_COLLECTIONS, Cell

BOTH_FLOORS = ("floor", "floor-twin")
# The position `spread_collections` adds to a cell's rounds (after `Cell.rounds`' own).
CPU_COLLECTIONS_SPREAD = COLLECTIONS + 1


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


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


def soak_figure(sets: list[dict[str, Any]], server: str, what: str, turns_: slice) -> float:
    """`server`'s figure at the turns `turns_`, pooled over `sets`: the median wall
    of every run in those turns, or the mean CPU per run of the turns."""
    if what == "wall":
        return statistics.median([d for one in sets for turn in one["walls"][server][turns_] for d in turn])
    return statistics.mean([c for one in sets for c in one["cpus"][server][turns_]])


def soak_ratio(sets: list[dict[str, Any]], name: str, base: str, what: str, turns_: slice) -> float:
    """`name`'s `soak_figure` over `base`'s."""
    return soak_figure(sets, name, what, turns_) / soak_figure(sets, base, what, turns_)


def spread_collections(cells: list[Cell]) -> list[list[tuple[float, ...]]]:
    """The rounds of one server's cells, each with its CPU less the full collections
    that fell in it plus its share of them all: the server's full collections' CPU
    in the measured rounds, shared by the middle and full collections each round
    made (`COLLECTIONS`).

    A full collection comes in place of every eleventh collection of the middle
    generation (`tests/harness/bench/server_probe`), so it falls in whichever cell's
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
