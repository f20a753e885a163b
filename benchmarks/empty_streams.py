"""Empty streamed runs in a distributed LangGraph Server, with the plugin on and off under the same load.

Two deployments of langgraph-runtime-pg (`langhost serve`, 2 processes each,
both executing the queue) share one PostgreSQL server and one Redis: one
serves this project with the plugin, the other the same project without it.
They take turns: blocks of `--block` streams go to one, then the other, so both
sides see the same load from this machine. Every stream is a `values`-mode run
on a thread, through the next process in turn (so about half of the runs
execute on the process the request did not come through), `--concurrency` at
a time; every other stream uses langgraph-sdk's `client.runs.stream`, the rest
a raw httpx POST /threads/{id}/runs/stream.

A stream is counted
- empty: HTTP 200 and not one byte of body (raw) / not one part (SDK);
- metadata-only: nothing but the `metadata` event;
- an error: any other failure (status, exception, timeout).

Per side it prints streams, empties, metadata-only, errors and the rate of
streams that carried no output (empty + metadata-only) with a 95% Wilson
interval. For every stream that carried no output it reports where the run
executed, the run's status, whether `runs.join_stream` / `runs.join` recover
its output and, with the plugin, whether the journal has the run's `run.end`.

`--ablate PART[,PART...]` measures instead which of the plugin's parts make
the runtime drop streams: for each part a deployment with the plugin, that
part off and the plugin's repair of dropped streams off (so its drops reach
the client and are counted), side by side with the plugin-less deployment,
one part after the other; `none` is the plugin with every part on, `all` every
part below off at once. The parts (`OFF_SWITCHES`), switched off inside the
server by this module's `app` (the plugin's app, built after the switches):
`resumable` (the request rewrite to resumable streams), `modes` (the rewrite's
added stream modes), `join` (the reader's join of a run its client's stream
missed), `claims` (the reader claims), `reconciler` (its passes: runs.list,
runs.get and journal reads), `owners` (the thread-owner lookup) and `writes`
(the journal's writes to the store).

Before the blocks it starts two processes at once on a fresh database, to see
whether the runtime's schema migrations race (`--start-check`).

Needs PostgreSQL and Redis: `JOURNAL_BRIDGE_TEST_POSTGRES_URL` /
`JOURNAL_BRIDGE_TEST_REDIS_URL`, or Debian's packages installed (started here).
Run: `python -m benchmarks.empty_streams [--streams 6000] [--block 100] [--concurrency 6]`,
`python -m benchmarks.empty_streams --ablate all,resumable,join --streams 400`.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import re
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from langgraph_sdk import get_client

TURNS_PER_THREAD = 6
STREAM_TIMEOUT = 120.0
# The server variable naming the parts this module's `app` switches off.
OFF_VARIABLE = "EMPTY_STREAMS_OFF"

# A server imports this module only for `app` (with `OFF_VARIABLE` set): its venv
# holds the plugin, not the test harness the benchmark drives the servers with.
if OFF_VARIABLE not in os.environ:
    from tests.harness.conversation import (
        EARLY_SUMMARIZATION,
        TURNS,
        human,
        wait_journal_idle,
    )
    from tests.harness.langgraph_server import PROJECT_ROOT, project_config
    from tests.harness.langhost_server import LanghostServer, ensure_pg_runtime_venv
    from tests.harness.services import create_database, postgres_server, redis_server


def _off_repair() -> None:
    from journal_bridge.capture.stream_repair import StreamWatch

    StreamWatch.needs_repair = lambda self: False  # type: ignore[method-assign]


def _off_resumable() -> None:
    import dataclasses

    from journal_bridge.capture import run_requests

    plan_one = run_requests._plan_one

    def planned(payload: Any, *args: Any) -> Any:
        asked = isinstance(payload, dict) and payload.get("stream_resumable") is True
        plan = plan_one(payload, *args)
        if plan is not None and plan.forced_resumable and not asked:
            payload.pop("stream_resumable", None)
            plan = dataclasses.replace(plan, forced_resumable=False)
        return plan

    run_requests._plan_one = planned


def _off_modes() -> None:
    from journal_bridge.mapping import capture_setting

    plan = capture_setting.plan_capture

    def planned(client_modes: Any, setting: Any) -> Any:
        capture = plan(client_modes, setting)
        return capture_setting.Capture(capture.path, capture.modes, ())

    capture_setting.plan_capture = planned
    from journal_bridge.capture import run_requests

    run_requests.plan_capture = planned


def _off_join() -> None:
    from journal_bridge.mapping import reader

    async def nothing(stream: Any) -> Any:
        return
        yield

    reader._parts_of = nothing


def _answering(value: Any) -> Any:
    """An async method that does nothing and returns `value`, whatever it is called with."""

    async def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        return value

    return method


def _off_claims() -> None:
    from journal_bridge.delivery.bridge import Bridge

    # Every claim is granted; a release has nothing to give back.
    Bridge.claim, Bridge.release = _answering(True), _answering(None)  # type: ignore[method-assign]


def _off_owners() -> None:
    from journal_bridge.mapping.reader import ThreadOwners

    ThreadOwners.owner_of = _answering(None)  # type: ignore[method-assign]


def _off_writes() -> None:
    from journal_bridge.delivery.queue import DeliveryQueue

    # Records and the single record are dropped.
    DeliveryQueue.write, DeliveryQueue.put = _answering(None), _answering(None)  # type: ignore[method-assign]


# Each part of the plugin: how this module's `app` switches it off in the server,
# and the server's environment with it off (the reconciler has its own setting).
OFF_SWITCHES: dict[str, tuple[Any, dict[str, str]]] = {
    "repair": (_off_repair, {}),
    "resumable": (_off_resumable, {}),
    "modes": (_off_modes, {}),
    "join": (_off_join, {}),
    "claims": (_off_claims, {}),
    "reconciler": (lambda: None, {"JOURNAL_BRIDGE_RECONCILE_INTERVAL": "0"}),
    "owners": (_off_owners, {}),
    "writes": (_off_writes, {}),
}
PARTS = [part for part in OFF_SWITCHES if part != "repair"]


def __getattr__(name: str) -> Any:
    """`app`: the plugin's app, built once the parts `OFF_VARIABLE` names are off (in the server)."""
    if name != "app":
        raise AttributeError(name)
    for part in filter(None, os.environ.get(OFF_VARIABLE, "").split(",")):
        OFF_SWITCHES[part][0]()
    from journal_bridge.server import create_app

    return create_app()


@dataclass
class Stream:
    side: str
    via: str  # "sdk" or "raw"
    entry: int  # the process the request went through
    thread_id: str
    run_id: str | None = None
    status: int | None = None
    nbytes: int = 0
    events: list[str] = field(default_factory=list)
    error: str | None = None
    seconds: float = 0.0

    @property
    def kind(self) -> str:
        if self.error is not None:
            return "error"
        if self.via == "raw" and self.nbytes == 0 or self.via == "sdk" and not self.events:
            return "empty"
        if all(event == "metadata" for event in self.events):
            return "metadata-only"
        return "ok"


class Deployment:
    """One runtime database, a journal database (with the plugin), two processes."""

    def __init__(self, side: str, root: Path, postgres_url: str, redis_url: str, plugin: bool,
                 resumable: bool = False, off: tuple[str, ...] = ()) -> None:
        name = uuid.uuid4().hex[:8]
        self.side = side
        self.plugin = plugin
        # Whether the client itself asks for `stream_resumable` (the plugin asks for it on every run).
        self.resumable = resumable
        self.database_url = create_database(postgres_url, f"empty_{name}")
        self.store_url = create_database(postgres_url, f"empty_journal_{name}")
        env: dict[str, str] = {}
        if off:
            env = {OFF_VARIABLE: ",".join(off), "PYTHONPATH": str(PROJECT_ROOT)}
            for part in off:
                env.update(OFF_SWITCHES[part][1])
        self.servers = [
            LanghostServer(ensure_pg_runtime_venv(), root / f"{name}-{index}", database_url=self.database_url,
                   redis_url=redis_url, store_url=self.store_url, n_jobs=2, env=env)
            for index in range(2)
        ]
        self.config = project_config(plugin=plugin)
        if off:
            self.config["http"] = {**self.config["http"], "app": "benchmarks.empty_streams:app"}
        self.assistant_id: str | None = None

    async def start(self) -> None:
        # One after the other: two processes started together on a fresh
        # database race each other's schema migrations (see `start_together`).
        for server in self.servers:
            await asyncio.to_thread(server.start, self.config)
        client = get_client(url=self.servers[0].url)
        assistant = await client.assistants.create("agent", config={"configurable": EARLY_SUMMARIZATION})
        self.assistant_id = assistant["assistant_id"]

    def stop(self) -> None:
        for server in self.servers:
            server.stop()

    def executor_of(self) -> dict[str, int]:
        where: dict[str, int] = {}
        for index, server in enumerate(self.servers):
            for run_id in server.executed_run_ids():
                where[run_id] = index
        return where


def start_together(root: Path, postgres_url: str, redis_url: str) -> dict[str, Any]:
    """Two processes started at the same moment on a fresh database: which of them come up."""
    name = uuid.uuid4().hex[:8]
    database = create_database(postgres_url, f"empty_race_{name}")
    store = create_database(postgres_url, f"empty_race_journal_{name}")
    servers = [
        LanghostServer(ensure_pg_runtime_venv(), root / f"race-{index}", database_url=database,
                       redis_url=redis_url, store_url=store, n_jobs=2)
        for index in range(2)
    ]
    config = project_config()
    ports = []
    for server in servers:
        ports.append(server._launch([str(server.bin_dir / "langhost"), "serve"], config,
                                    ["--n-jobs-per-worker", "2"],
                                    {"DATABASE_URI": database, "REDIS_URI": redis_url,
                                     "JOURNAL_BRIDGE_STORE_URL": store}))
    outcome: dict[str, Any] = {"up": 0, "exited": [], "restarted_up": 0}
    deadline = time.monotonic() + 120
    pending = set(range(2))
    while pending and time.monotonic() < deadline:
        for index in list(pending):
            server = servers[index]
            assert server.process is not None
            if server.process.poll() is not None:
                pending.discard(index)
                log = re.sub(r"\x1b\[[0-9;]*m", "", server.read_log())
                errors = [line for line in log.splitlines() if re.match(r"^[\w.]+(Error|Violation|Exception): ", line)]
                outcome["exited"].append((index, server.process.returncode, errors[-1:]))
            elif _ok(f"http://127.0.0.1:{ports[index]}/ok"):
                pending.discard(index)
                outcome["up"] += 1
        time.sleep(0.2)
    # The workaround: once one process is up (its migrations done), the others start fine.
    for index, *_ in outcome["exited"]:
        try:
            servers[index].start(config)
            outcome["restarted_up"] += 1
        except RuntimeError as error:
            outcome.setdefault("restart_errors", []).append(str(error)[-500:])
    for server in servers:
        server.stop()
    return outcome


def _ok(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


async def stream_sdk(url: str, record: Stream, assistant_id: str, text: str, resumable: bool) -> None:
    client = get_client(url=url, timeout=STREAM_TIMEOUT)

    def created(meta: Any) -> None:
        record.run_id = str(meta["run_id"])

    async for part in client.runs.stream(record.thread_id, assistant_id, input=human(text), stream_mode="values",
                                         stream_resumable=resumable, on_run_created=created):
        record.events.append(part.event)
    record.status = 200


async def stream_raw(http: httpx.AsyncClient, record: Stream, assistant_id: str, text: str, resumable: bool) -> None:
    body = {"assistant_id": assistant_id, "input": human(text), "stream_mode": "values"}
    if resumable:
        body["stream_resumable"] = True
    async with http.stream("POST", f"/threads/{record.thread_id}/runs/stream", json=body,
                           headers={"Accept": "text/event-stream"}) as response:
        record.status = response.status_code
        location = response.headers.get("content-location", "")
        if "/runs/" in location:
            record.run_id = location.rstrip("/").split("/runs/")[-1].split("/")[0]
        buffer = b""
        async for chunk in response.aiter_bytes():
            record.nbytes += len(chunk)
            buffer += chunk
        if response.status_code != 200:
            record.error = f"HTTP {response.status_code}: {buffer[:200]!r}"
            return
        for line in buffer.replace(b"\r\n", b"\n").split(b"\n"):
            if line.startswith(b"event:"):
                record.events.append(line[6:].strip().decode())


async def run_block(deployment: Deployment, n: int, concurrency: int, offset: int) -> list[Stream]:
    urls = [server.url for server in deployment.servers]
    assert deployment.assistant_id is not None
    streams: list[Stream] = []
    counter = iter(range(n))

    async def worker(w: int) -> None:
        https = [httpx.AsyncClient(base_url=url, timeout=STREAM_TIMEOUT) for url in urls]
        try:
            thread_id, turns = None, 0
            for index in counter:
                entry = (offset + index) % 2
                if thread_id is None or turns == TURNS_PER_THREAD:
                    thread = await get_client(url=urls[entry]).threads.create()
                    thread_id, turns = thread["thread_id"], 0
                via = "sdk" if (offset + index) // 2 % 2 == 0 else "raw"
                record = Stream(deployment.side, via, entry, thread_id)
                text = TURNS[(turns + w) % len(TURNS)]
                turns += 1
                started = time.perf_counter()
                try:
                    if via == "sdk":
                        await asyncio.wait_for(stream_sdk(urls[entry], record, deployment.assistant_id, text,
                                                          deployment.resumable),
                                               STREAM_TIMEOUT)
                    else:
                        await asyncio.wait_for(stream_raw(https[entry], record, deployment.assistant_id, text,
                                                          deployment.resumable),
                                               STREAM_TIMEOUT)
                except Exception as error:  # noqa: BLE001 - every failure is counted, by kind
                    record.error = f"{type(error).__name__}: {error}"[:300]
                record.seconds = time.perf_counter() - started
                streams.append(record)
        finally:
            for http in https:
                await http.aclose()

    await asyncio.gather(*(worker(w) for w in range(concurrency)))
    return streams


async def inspect_silent(deployment: Deployment, record: Stream, executor: dict[str, int]) -> dict[str, Any]:
    """What became of a run whose stream carried no output."""
    found: dict[str, Any] = {"side": deployment.side, "via": record.via, "kind": record.kind,
                             "entry": record.entry, "thread_id": record.thread_id, "run_id": record.run_id,
                             "seconds": round(record.seconds, 2)}
    if record.run_id is None:
        return found
    found["executor"] = executor.get(record.run_id)
    client = get_client(url=deployment.servers[record.entry].url, timeout=60)
    found["run_status"] = (await client.runs.get(record.thread_id, record.run_id))["status"]
    joined = [part.event async for part in client.runs.join_stream(record.thread_id, record.run_id,
                                                                     stream_mode="values")]
    found["join_stream_events"] = joined
    values = await client.runs.join(record.thread_id, record.run_id)
    messages = (values or {}).get("messages", []) if isinstance(values, dict) else []
    found["join_recovers_answer"] = bool(messages) and messages[-1].get("type") == "ai"
    if deployment.plugin:
        async with httpx.AsyncClient(base_url=deployment.servers[record.entry].url, timeout=30) as http:
            response = await http.get(f"/journal/threads/{record.thread_id}/runs/{record.run_id}/events",
                                      params={"limit": 500})
            body = response.json()
            events = body["data"] if isinstance(body, dict) else body
        found["journal_run_end"] = any(event.get("event_type") == "run.end" for event in events)
    return found


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    if n == 0:
        return (float("nan"), float("nan"))
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


def fisher_p(a: int, n: int, b: int, m: int) -> float:
    """Two-sided Fisher's exact p of `a` of `n` against `b` of `m`."""
    total, k = n + m, a + b
    denominator = math.comb(total, k)

    def p(x: int) -> float:
        return math.comb(n, x) * math.comb(m, k - x) / denominator

    observed = p(a)
    return min(1.0, sum(p(x) for x in range(max(0, k - m), min(k, n) + 1) if p(x) <= observed * (1 + 1e-9)))


def silent_count(records: list[Stream]) -> int:
    return sum(1 for r in records if r.kind in ("empty", "metadata-only"))


def rate_cell(records: list[Stream]) -> str:
    k, n = silent_count(records), len(records)
    low, high = wilson(k, n)
    return f"{k:>4} of {n:<5} {k / max(1, n):>6.2%} ({low:.2%} - {high:.2%})"


async def take_turns(sides: dict[str, Deployment], streams: int, block: int, concurrency: int,
                     results: dict[str, list[Stream]], minutes: float | None = None) -> None:
    """`streams` per side, in blocks of `block`, the sides taking turns; no new turn
    after `minutes` (every side then has had as many)."""
    started = time.perf_counter()
    done = 0
    while done < streams and (minutes is None or time.perf_counter() - started < minutes * 60):
        n = min(block, streams - done)
        for name, deployment in sides.items():
            results.setdefault(name, []).extend(await run_block(deployment, n, concurrency, done))
        done += n
        summary = ", ".join(f"{name} {silent_count(results[name])}/{len(results[name])}" for name in sides)
        print(f"[{time.perf_counter() - started:7.1f}s] no output: {summary}", flush=True)


async def report_sides(sides: dict[str, Deployment], results: dict[str, list[Stream]]) -> None:
    """Per side: streams, empties, metadata-only, errors, the no-output rate; then each silent stream."""
    print(f"{'side':>10} | {'streams':>7} | {'empty':>5} | {'meta-only':>9} | {'errors':>6} | "
          f"{'no output':>9} | {'rate':>7} | {'95% interval':>17} | {'cross-process':>13}")
    silent: list[dict[str, Any]] = []
    for name, deployment in sides.items():
        records = results[name]
        executor = deployment.executor_of()
        kinds = [r.kind for r in records]
        empty, meta, errors = kinds.count("empty"), kinds.count("metadata-only"), kinds.count("error")
        cross = sum(1 for r in records if r.run_id in executor and executor[r.run_id] != r.entry)
        low, high = wilson(empty + meta, len(records))
        print(f"{name:>10} | {len(records):>7} | {empty:>5} | {meta:>9} | {errors:>6} | {empty + meta:>9} | "
              f"{(empty + meta) / max(1, len(records)):>7.2%} | {low:>7.2%} - {high:>7.2%} | {cross:>13}")
        for record in records:
            if record.kind in ("empty", "metadata-only"):
                silent.append(await inspect_silent(deployment, record, executor))
            elif record.kind == "error":
                print(f"  {name} error ({record.via}, entry {record.entry}): {record.error}")
    for found in silent:
        print("  no output:", found)


async def compare(root: Path, postgres_url: str, redis_url: str, args: argparse.Namespace) -> None:
    """Without the plugin and with it (repairing dropped streams), side by side."""
    sides = {"plugin-off": Deployment("off", root, postgres_url, redis_url, plugin=False),
             "plugin-on": Deployment("on", root, postgres_url, redis_url, plugin=True)}
    if args.resumable_side:
        sides["off+resum"] = Deployment("offres", root, postgres_url, redis_url, plugin=False, resumable=True)
    results: dict[str, list[Stream]] = {}
    try:
        for deployment in sides.values():
            await deployment.start()
        await take_turns(sides, args.streams, args.block, args.concurrency, results, args.minutes)
        for server in sides["plugin-on"].servers:
            await wait_journal_idle(server.url, timeout=300)
        off, on = results["plugin-off"], results["plugin-on"]
        print(f"\n{len(on)} streams per side, blocks of {args.block}, {args.concurrency} at a time, "
              "sides taking turns\n")
        await report_sides(sides, results)
        print(f"\nempty streams (no output) per {len(on)}, 95% interval:")
        print(f"  without the plugin: {rate_cell(off)}")
        print(f"  with the plugin:    {rate_cell(on)}")
        replays = repaired = 0
        async with httpx.AsyncClient(timeout=30) as http:
            for server in sides["plugin-on"].servers:
                health = (await http.get(f"{server.url}/journal/health")).json()
                replays += health.get("stream_replays", 0)
                repaired += health.get("streams_repaired", 0)
        print(f"  streams the runtime ended early that the plugin replayed: {replays}, "
              f"of which the client had missed frames: {repaired}")
    finally:
        for deployment in sides.values():
            deployment.stop()


async def ablate(root: Path, postgres_url: str, redis_url: str, args: argparse.Namespace) -> None:
    """Each variant of the plugin (repair off) side by side with the plugin-less deployment, in turn."""
    variants = [part.strip() for part in args.ablate.split(",") if part.strip()]
    unknown = [v for v in variants if v not in (*PARTS, "none", "all")]
    if unknown:
        raise SystemExit(f"unknown parts {unknown}: choose from none, all, {', '.join(PARTS)}")
    baseline = Deployment("off", root, postgres_url, redis_url, plugin=False)
    rows: list[tuple[str, list[Stream], list[Stream]]] = []
    try:
        await baseline.start()
        for variant in variants:
            off = ("repair", *(PARTS if variant == "all" else () if variant == "none" else (variant,)))
            deployment = Deployment(variant, root, postgres_url, redis_url, plugin=True, off=off)
            results: dict[str, list[Stream]] = {}
            try:
                await deployment.start()
                print(f"-- off: {', '.join(off)}", flush=True)
                await take_turns({"plugin-off": baseline, variant: deployment}, args.streams, args.block,
                                 args.concurrency, results, args.minutes)
            finally:
                deployment.stop()
            rows.append((variant, results[variant], results["plugin-off"]))
    finally:
        baseline.stop()
    print(f"\nup to {args.streams} streams per side and variant, blocks of {args.block}, {args.concurrency} at a "
          "time; the plugin's repair off on every variant\n")
    print(f"{'plugin, off:':<22} | {'no output, rate (95% interval)':<38} | "
          f"{'plugin-less, same turns':<38} | Fisher p")
    for variant, on, off_side in rows:
        label = {"none": "nothing (all parts on)", "all": "every part below"}.get(variant, variant)
        p = fisher_p(silent_count(on), len(on), silent_count(off_side), len(off_side))
        print(f"{label:<22} | {rate_cell(on):<38} | {rate_cell(off_side):<38} | {p:.3f}")


async def main(args: argparse.Namespace) -> None:
    root = Path(tempfile.mkdtemp(prefix="journal-bridge-empty-"))
    with postgres_server() as postgres_url, redis_server() as redis_url:
        if args.start_check:
            outcome = await asyncio.to_thread(start_together, root, postgres_url, redis_url)
            print(f"two processes started together on a fresh database: {outcome['up']} came up, "
                  f"{len(outcome['exited'])} exited; started again after the first was up: "
                  f"{outcome['restarted_up']} came up")
            for index, code, lines in outcome["exited"]:
                print(f"  process {index} exited with {code}: {lines}")
        if args.ablate:
            await ablate(root, postgres_url, redis_url, args)
        else:
            await compare(root, postgres_url, redis_url, args)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=6000, help="streams per side")
    parser.add_argument("--block", type=int, default=100, help="streams per turn of a side")
    parser.add_argument("--concurrency", type=int, default=6)
    parser.add_argument("--start-check", action="store_true",
                        help="first start two processes at once on a fresh database")
    parser.add_argument("--resumable-side", action="store_true",
                        help="a third side: no plugin, the client asks for stream_resumable as the plugin does")
    parser.add_argument("--minutes", type=float, default=None,
                        help="no new turn after this long: the sides stop at the same count")
    parser.add_argument("--ablate", default="",
                        help=f"measure the plugin with these parts off instead: none, all, {', '.join(PARTS)}")
    asyncio.run(main(parser.parse_args()))
