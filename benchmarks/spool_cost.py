"""What the frame spool costs a server: the bridge benchmark's matrix with the spool off and on.

The servers of `benchmarks/bridge.py` -- `off` (no plugin), `floor`, and the
plugin under `auto` -- plus `auto+frames`, the plugin under `auto` with
`JOURNAL_BRIDGE_FRAME_SPOOL` on, driven side by side in the same interleaved
rounds (`auto` runs with it off). Printed: the bridge benchmark's tables,
then the spool's own figure per client: (`auto+frames` - `auto`) / `off`,
the server CPU the spool adds to a run in units of the run's CPU without the
plugin, pooled over the rounds with the 5-95% interval of the rounds
resampled, its per-round median and spread, and the milliseconds per run.

With `--micro`, no servers: the frames of a conversation with the bundled
agent (in process, as a server streams them with `events`, `values` and
`custom`: useStream's modes under `auto`) are fed to a run's reader as the
middleware feeds them (token callbacks the client did not ask for passed over unparsed), with the spool and without it, and the CPU each run's
frames take on the response path is printed, per turn of the conversation
(a state's frame grows with it).

With `--paired`, the paired benchmark (`benchmarks/paired.py`) in one process
instead: each server the plugin with its spool on (`tests/harness/bench/spool_cost_app.py`),
driving two cells, its runs spooled and its runs not (the paired benchmark's
"floor" cells, which carry `UNSPOOLED_HEADER`); (spooled - unspooled) / off
per round, pooled with its interval over the servers and their rounds.

Run: `python3 tasks.py bench spool_cost [--runs 24] [--rounds 6] [--threads 4] [--instances 1]
[--client KIND ...] [--pace 0] [--micro [--turns 30 --repeats 200]] [--paired --servers 2]`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import orjson

from benchmarks import bridge
from journal_bridge.delivery.frame_spool import FrameSpool, worth_spooling
from journal_bridge.host.sse import Frame, SSEFrames
from journal_bridge.mapping.capture_setting import EVENTS_PATH_MODES, Capture
from journal_bridge.mapping.reader import ClientStream
from tests.harness.bench import servers as bench_servers
from tests.harness.bench.servers import quiet_dev_server
from tests.harness.server_process import PROJECT_ROOT

ON = "auto+frames"
# `spool_cost_app.UNSPOOLED_HEADER` (that module builds the server's app when imported).
UNSPOOLED_HEADER = "x-journal-bridge-bench-unspooled"
CAPTURES = ("off", "floor", "auto", ON)


def start_server(capture: str, pace: float, *args: Any, **kwargs: Any):
    """The bridge benchmark's server for `capture`; `auto+frames` is `auto` with the spool on,
    `auto` is `auto` with it off, whatever the default."""
    spool = {"auto": "off", ON: "on"}.get(capture)
    if spool is None:
        return bench_servers.start_server(capture, pace, *args, **kwargs)

    def with_spool(*, env: dict[str, str], **rest: Any):
        return quiet_dev_server(env={**env, "JOURNAL_BRIDGE_FRAME_SPOOL": spool}, **rest)

    return bench_servers.start_server("auto", pace, *args, launch=with_spool, **kwargs)


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


async def conversation_frames(turns: int) -> list[list[Frame]]:
    """Each turn's frames, as the server streams a run of the bundled agent with `events`,
    `values` and `custom` (the offline model, in process)."""
    from tests.harness.conversation import TURNS
    from tests.unit.test_mapping import _dump, _graph, server_parts

    graph = _graph()
    thread_id = str(uuid.uuid4())
    runs = []
    for turn in range(turns):
        run_id = str(uuid.uuid4())
        config = {"configurable": {"thread_id": thread_id}, "run_id": run_id}
        run_input = {"messages": [{"role": "user", "content": TURNS[turn % len(TURNS)]}]}
        parts = await server_parts(graph, run_input, config, modes=("values", "custom"))
        body = b"event: metadata\ndata: " + orjson.dumps({"run_id": run_id}) + b"\nid: 0\n\n"
        for index, (event, data) in enumerate(parts, 1):
            body += f"event: {event}\ndata: ".encode() + json.dumps(data, default=_dump, separators=(",", ":")).encode()
            body += f"\nid: {index}\n\n".encode()
        frames: list[Frame] = []
        # Token callbacks the client did not ask for are dropped unparsed (`ClientStream.passes_over`).
        passed = ClientStream(Capture("events", EVENTS_PATH_MODES, ())).passes_over
        SSEFrames(lambda frame: frames.append(frame), passed).feed(body, final=True)
        runs.append(frames)
    return runs


async def micro(turns: int, repeats: int) -> None:
    """CPU per run of feeding a run's frames to its reader, with the spool and without."""
    capture = Capture("events", EVENTS_PATH_MODES, ())
    runs = await conversation_frames(turns)
    with tempfile.TemporaryDirectory() as directory:
        spool = FrameSpool(Path(directory) / "frames")
        await spool.open()

        def feed(frames: list[Frame], spooled: bool) -> float:
            began = time.thread_time()
            stream = ClientStream(capture, ("values", "messages-tuple", "custom"))
            reader = (spool.spooled("t", "r", "events", (*capture.modes, "error"), stream) if spooled
                      else stream)
            for frame in frames:
                reader.feed(frame)
            reader.close(complete=True)
            if spooled:
                spool.done("r")
            return time.thread_time() - began

        print(f"the frames of a run fed to its reader (useStream's modes under `auto`), CPU per run in microseconds, "
              f"median of {repeats} (turns: frames, of them spooled, bytes spooled)")
        for turn in sorted({0, 1, turns // 2, turns - 1}):
            frames = runs[turn]
            plain, spooled = [], []
            for _ in range(repeats):
                plain.append(feed(frames, False))
                spooled.append(feed(frames, True))
            modes = frozenset((*capture.modes, "error"))
            kept = [f for f in frames if worth_spooling(f, modes)]
            written = (len(kept), sum(len(f.raw) + len(f.terminator) for f in kept))
            print(f"  turn {turn + 1:3}: {len(frames):4} frames, {written[0]:3} spooled, {written[1]:8} bytes;"
                  f"  without {statistics.median(plain) * 1e6:8.1f}  with {statistics.median(spooled) * 1e6:8.1f}"
                  f"  spool {(statistics.median(spooled) - statistics.median(plain)) * 1e6:8.1f}")
        await spool.close(keep_frames=False)


async def paired_cost(args: argparse.Namespace) -> None:
    """The paired benchmark with the spool's two kinds of runs in one process (see the module docstring)."""
    import secrets

    from benchmarks import paired

    app = PROJECT_ROOT / "tests" / "harness" / "bench" / "spool_cost_app.py"

    def start_paired(capture: str, collections: Any, store: str = "sqlite", probes: tuple = ()) -> Any:
        env = {"JOURNAL_BRIDGE_CAPTURE": capture, "JOURNAL_BRIDGE_RECONCILE_INTERVAL": "0",
               "JOURNAL_BRIDGE_OFFLINE_SECONDS_PER_TOKEN": "0", "JOURNAL_BRIDGE_FRAME_SPOOL": "on",
               **collections.env}
        return quiet_dev_server(env=env, http={"app": f"{app}:app"})

    paired.start_paired = start_paired
    paired.FLOOR_HEADER = UNSPOOLED_HEADER  # the paired "floor" cells: the same server, runs not spooled
    paired.AGAINST_EVENTS = None  # useStream too against itself unspooled
    print("paired: `floor` below is the same server's runs with the spool off; `auto` its runs spooled")
    seed = secrets.token_hex(4)
    for client in args.client or ("values stream", "useStream"):
        await paired.measure(client, "auto", args.servers, args.rounds, args.runs, args.threads, False, seed=seed)


async def main(args: argparse.Namespace) -> None:
    if args.micro:
        await micro(args.turns, args.repeats)
        return
    if args.paired:
        await paired_cost(args)
        return
    bridge.CAPTURES = CAPTURES
    bridge.print_loop_threads = print_spool_cost
    bridge.print_probe("at the start")
    await bridge.matrix(
        "instant model (server CPU-bound)" if not args.pace else f"model paced at {args.pace * 1000:g} ms per token",
        args.pace, args.runs, args.threads, args.rounds, 0.0,
        clients=tuple(args.client or ("useStream", "values stream", "runs.wait")),
        captures=CAPTURES, instances=args.instances, start=start_server,
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
    parser.add_argument("--micro", action="store_true", help="no servers: the spool's CPU per run, in process")
    parser.add_argument("--turns", type=int, default=30)
    parser.add_argument("--paired", action="store_true", help="both kinds of runs on each server, in one process")
    parser.add_argument("--servers", type=int, default=2, help="with --paired: servers, each driving both cells")
    parser.add_argument("--repeats", type=int, default=200)
    asyncio.run(main(parser.parse_args()))
