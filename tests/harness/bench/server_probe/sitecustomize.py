"""The benchmark's view of a server from inside: its full garbage collections,
the CPU of its event loop's tasks, and the names of its threads.

Loaded by every Python process a benchmark server starts (its directory is put
first on `PYTHONPATH`). Each part is on only when its variable names a
directory:

- `JOURNAL_BRIDGE_BENCH_GC_DIR`: it changes nothing of what the server does: it
  counts the process's full (generation 2) collections and the CPU they took,
  and its collections of the middle generation (generation 1), and a thread of
  its own writes them to `<dir>/<pid>.json` once they change, at most every
  `REPORT_SECONDS` (not the collecting thread, which may be the event loop's).
  The interpreter collects the oldest generation in place of every
  (threshold + 1)th collection of the middle one once enough has been moved
  there; on a dev server that second condition always holds by then, so full
  collections come at a fixed count of middle ones: 10 between two, the 11th
  is the full one.
  With `JOURNAL_BRIDGE_BENCH_GC_PROMOTED=1` it also counts the objects each
  collection of the middle generation moves into the oldest one (the young
  generations' sizes when it starts less what it frees): the other condition
  of a full collection is that a quarter of the oldest generation's size has
  been moved there since the last. Counting them lists the young generations
  at each such collection: a little CPU, the same in every cell of a process;
- `JOURNAL_BRIDGE_BENCH_TASKS_DIR`: every asyncio task made on the main thread
  (the event loop's) is a `ClockedTask`, whose coroutine is clocked at each of
  its steps with the thread's CPU clock; the CPU is summed per kind of task
  (the coroutine's file, from its package on, and qualified name), and a thread
  of its own writes the sums to `<dir>/<pid>-tasks.json` every
  `TASK_REPORT_SECONDS`. A step's CPU includes whatever that step ran: the
  coroutines it awaits, the garbage collections it triggered. What the loop
  runs outside tasks (transports, callbacks, timers) is the loop thread's CPU
  less the tasks'. The clock costs each step two reads of it: a clocked
  server is slower, and only compared with others clocked alike. `asyncio.Task`
  is replaced before the server imports its event loop (uvloop keeps the
  class it finds at its import); tasks made by Python 3.12's eager task
  factory, which keeps the original class, are not clocked.
- `JOURNAL_BRIDGE_BENCH_THREADS_DIR`: it changes nothing of what the server
  does: a thread of its own writes the process's threads, their kernel ids
  and names (`{native_id: name}`, `threading.enumerate()`), to
  `<dir>/<pid>-threads.json` every `THREAD_NAMES_SECONDS` when they changed.
  The kernel counts every thread's CPU (`/proc`) but names them all after the
  process; these names tell the journal's SQLite connection threads from the
  executor's and the server's own.

A full collection walks the whole heap -- the in-memory runtime's checkpoints
above all -- and costs a dev server about a tenth of a second, in whichever
round the collector's threshold happens to fall (`benchmarks.bridge` prints
how many came per server, and their CPU per run).
"""

import gc
import json
import os
import threading
import time

_DIR = os.environ.get("JOURNAL_BRIDGE_BENCH_GC_DIR")
_TASKS_DIR = os.environ.get("JOURNAL_BRIDGE_BENCH_TASKS_DIR")
_THREADS_DIR = os.environ.get("JOURNAL_BRIDGE_BENCH_THREADS_DIR")
_PROMOTED = os.environ.get("JOURNAL_BRIDGE_BENCH_GC_PROMOTED") == "1"
TASK_REPORT_SECONDS = 0.02
THREAD_NAMES_SECONDS = 0.5
REPORT_SECONDS = 0.02


def _install(directory: str) -> None:
    path = os.path.join(directory, f"{os.getpid()}.json")
    totals = {"full": 0, "seconds": 0.0, "middle": 0, "promoted": 0}
    # Collections never overlap (the interpreter runs one at a time, whichever
    # thread triggers it): one start time is enough.
    began: list[float] = []
    changed = threading.Event()

    def write() -> None:
        tmp = f"{path}.tmp"
        with open(tmp, "w") as out:
            json.dump(dict(totals), out)
        os.replace(tmp, path)

    def writer() -> None:
        while True:
            # Middle collections come several times a second under load: what
            # changed meanwhile is written together.
            changed.wait()
            time.sleep(REPORT_SECONDS)
            changed.clear()
            try:
                write()
            except OSError:
                pass

    young: list[int] = []

    def on_collection(phase: str, info: dict) -> None:
        generation = info.get("generation")
        if generation == 1:
            # A collection runs to its end once started: its stop follows this start.
            if phase == "start" and _PROMOTED:
                young[:] = [len(gc.get_objects(0)) + len(gc.get_objects(1))]
            elif phase == "stop":
                totals["middle"] += 1
                if young:
                    totals["promoted"] += young.pop() - info.get("collected", 0)
                changed.set()
            return
        if generation != 2:
            return
        if phase == "start":
            began[:] = [time.thread_time()]
            return
        if not began:
            return
        totals["full"] += 1
        totals["seconds"] += time.thread_time() - began.pop()
        changed.set()

    gc.callbacks.append(on_collection)
    write()
    threading.Thread(target=writer, name="bench-gc-probe", daemon=True).start()


def _task_kind(coro: object) -> str:
    code = getattr(coro, "cr_code", None)
    if code is None:
        return type(coro).__qualname__
    path = code.co_filename.replace(os.sep, "/")
    # From the package on (the last of these in the path): the same kind in every
    # server, wherever the project or its dependencies are installed.
    at = max(path.rfind(anchor) for anchor in ("/site-packages/", "/journal_bridge/", "/tests/harness/", "/lib/python"))
    if at >= 0:
        path = path[at + 1 :].removeprefix("site-packages/")
    return f"{path}:{getattr(coro, '__qualname__', code.co_name)}"


def _install_task_clock(directory: str) -> None:
    import asyncio
    import collections.abc

    path = os.path.join(directory, f"{os.getpid()}-tasks.json")
    main = threading.main_thread().ident
    clock = time.thread_time_ns
    totals: dict[str, list[int]] = {}  # kind -> [steps, CPU ns]

    class Clocked(collections.abc.Coroutine):
        """A task's coroutine, clocked at each step; everything else is the coroutine's."""

        __slots__ = ("_coro", "_sums")

        def __init__(self, coro: object, kind: str) -> None:
            self._coro = coro
            self._sums = totals.setdefault(kind, [0, 0])

        def send(self, value: object) -> object:
            began = clock()
            try:
                return self._coro.send(value)
            finally:
                self._count(began)

        def throw(self, *exc: object) -> object:
            began = clock()
            try:
                return self._coro.throw(*exc)
            finally:
                self._count(began)

        def close(self) -> None:
            self._coro.close()

        def __await__(self):
            return self._coro.__await__()

        def __getattr__(self, name: str) -> object:
            return getattr(self._coro, name)  # cr_frame, cr_running...: what inspect and anyio read

        def _count(self, began: int) -> None:
            sums = self._sums
            sums[0] += 1
            sums[1] += clock() - began

    original = asyncio.Task

    class ClockedTask(original):  # type: ignore[misc, valid-type]
        def __init__(self, coro: object, *args: object, **kwargs: object) -> None:
            if threading.get_ident() == main and asyncio.iscoroutine(coro) and not isinstance(coro, Clocked):
                coro = Clocked(coro, _task_kind(coro))
            super().__init__(coro, *args, **kwargs)

    asyncio.Task = asyncio.tasks.Task = ClockedTask  # type: ignore[misc]

    def writer() -> None:
        written = None
        while True:
            time.sleep(TASK_REPORT_SECONDS)
            report = json.dumps(totals)  # one C call: no step lands halfway through it
            if report == written:
                continue
            tmp = f"{path}.tmp"
            try:
                with open(tmp, "w") as out:
                    out.write(report)
                os.replace(tmp, path)
            except OSError:
                continue
            written = report

    threading.Thread(target=writer, name="bench-task-clock", daemon=True).start()


def _install_thread_names(directory: str) -> None:
    path = os.path.join(directory, f"{os.getpid()}-threads.json")

    def writer() -> None:
        written = None
        while True:
            names = {str(thread.native_id): thread.name for thread in threading.enumerate() if thread.native_id}
            report = json.dumps(names, sort_keys=True)
            if report != written:
                tmp = f"{path}.tmp"
                try:
                    with open(tmp, "w") as out:
                        out.write(report)
                    os.replace(tmp, path)
                    written = report
                except OSError:
                    pass
            time.sleep(THREAD_NAMES_SECONDS)

    threading.Thread(target=writer, name="bench-thread-names", daemon=True).start()


if _DIR:
    _install(_DIR)
if _TASKS_DIR:
    _install_task_clock(_TASKS_DIR)
if _THREADS_DIR:
    _install_thread_names(_THREADS_DIR)
