"""The benchmark's view of a server's full garbage collections.

Loaded by every Python process a benchmark server starts (its directory is put
first on `PYTHONPATH`), only when `JOURNAL_BRIDGE_BENCH_GC_DIR` names a
directory. It changes nothing of what the server does: it counts the
process's full (generation 2) collections and the CPU they took, and a thread
of its own writes both to `<dir>/<pid>.json` after each one (a few a minute;
not the collecting thread, which may be the event loop's).

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


def _install(directory: str) -> None:
    path = os.path.join(directory, f"{os.getpid()}.json")
    totals = {"full": 0, "seconds": 0.0}
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
            changed.wait()
            changed.clear()
            try:
                write()
            except OSError:
                pass

    def on_collection(phase: str, info: dict) -> None:
        if info.get("generation") != 2:
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


if _DIR:
    _install(_DIR)
