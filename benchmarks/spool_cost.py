"""What the frame spool costs a server: the bridge benchmark's matrix with the spool off and on.

The servers of `benchmarks/bridge.py` -- `off` (no plugin), `floor`, and the
plugin under `auto` -- plus `auto+frames`, the plugin under `auto` with
`JOURNAL_BRIDGE_FRAME_SPOOL` on, driven side by side in the same interleaved
rounds (`auto` runs with it off). Printed: the bridge benchmark's tables,
then the spool's own figure per client: (`auto+frames` - `auto`) / `off`,
the server CPU the spool adds to a run in units of the run's CPU without the
plugin, pooled over the rounds with the 5-95% interval of the rounds
resampled, its per-round median and spread, and the milliseconds per run.

Run: `python3 tasks.py bench spool_cost [--runs 24] [--rounds 6] [--threads 4] [--instances 1]
[--client KIND ...] [--pace 0]`.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from benchmarks import bridge

ON = "auto+frames"
CAPTURES = ("off", "floor", "auto", ON)


def start_server(capture: str, pace: float, *args: Any, **kwargs: Any):
    """The bridge benchmark's server for `capture`; `auto+frames` is `auto` with the spool on,
    `auto` is `auto` with it off, whatever the default."""
    spool = {"auto": "off", ON: "on"}.get(capture)
    if spool is None:
        return _start_server(capture, pace, *args, **kwargs)
    quiet = bridge.quiet_dev_server

    def with_spool(*, env: dict[str, str], **rest: Any):
        return quiet(env={**env, "JOURNAL_BRIDGE_FRAME_SPOOL": spool}, **rest)

    bridge.quiet_dev_server = with_spool
    try:
        return _start_server("auto", pace, *args, **kwargs)
    finally:
        bridge.quiet_dev_server = quiet


_start_server = bridge.start_server
_print_loop_threads = bridge.print_loop_threads


def print_spool_cost(cells: dict[tuple[str, str], Any], kinds: list[str], captures: tuple[str, ...]) -> None:
    print("the frame spool's cost: (auto+frames - auto) / off, server CPU pooled over all rounds (5%-95% of the "
          "rounds resampled); per round median [min max]; CPU ms per run off / floor / auto / auto+frames")
    header = f"{'client':20}{'pooled':26}{'per round':28}{'ms per run':30}"
    print(header)
    print("-" * len(header))
    for kind in kinds:
        if not all((kind, c) in cells for c in CAPTURES):
            continue
        (_, excess), _, band = bridge.pooled_with_interval(cells, kind, ON, figure=bridge.CPU, floors=("auto",))
        on = bridge.per_round(cells, kind, ON, bridge.CPU)
        off = bridge.per_round(cells, kind, "auto", bridge.CPU)
        spread = bridge.Spread([a - b for a, b in zip(on, off, strict=True)])
        ms = " / ".join(f"{cells[kind, c].cpu_per_run * 1000:.2f}" for c in CAPTURES)
        print(f"{kind:20}{excess:6.3f} ({band[0]:6.3f} {band[1]:6.3f})   {str(spread):28}{ms}")
    print()
    _print_loop_threads(cells, kinds, captures)


async def main(args: argparse.Namespace) -> None:
    bridge.CAPTURES = CAPTURES
    bridge.start_server = start_server
    bridge.print_loop_threads = print_spool_cost
    bridge.print_probe("at the start")
    await bridge.matrix(
        "instant model (server CPU-bound)" if not args.pace else f"model paced at {args.pace * 1000:g} ms per token",
        args.pace, args.runs, args.threads, args.rounds, 0.0,
        clients=tuple(args.client or ("useStream", "values stream", "runs.wait")),
        captures=CAPTURES, instances=args.instances,
    )
    print()
    bridge.print_probe("at the end")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=24, help="runs per cell per round")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--instances", type=int, default=1)
    parser.add_argument("--client", action="append", choices=list(bridge.CLIENTS))
    parser.add_argument("--pace", type=float, default=0.0, help="seconds per streamed token (0: instant)")
    asyncio.run(main(parser.parse_args()))
