"""`langgraph dev` without the in-memory runtime's file persistence: the benchmark's servers.

    python tests/harness/bench/quiet_dev.py dev --config langgraph.json ...

`langgraph dev` pickles its whole in-memory runtime to disk every 10 s from
a thread of its own. `LANGGRAPH_DISABLE_FILE_PERSISTENCE` cannot turn that
off from outside: the CLI sets the variable itself before the runtime reads
it, from a `disable_persistence` project key that its config validation does
not pass on. This launcher sets the flag in the runtime's persistence module
(`langgraph_runtime_inmem._persistence`, private, the same in every supported
version), then runs the CLI with the same arguments; everything else about
the server is as `langgraph dev` makes it.
"""

from __future__ import annotations

import sys

from langgraph_runtime_inmem import _persistence


def main() -> None:
    # The module reads the flag once, at import; the runtime registers its
    # stores for flushing only while it is false.
    _persistence.DISABLE_FILE_PERSISTENCE = True
    from langgraph_cli.cli import cli

    sys.argv[0] = "langgraph"
    cli()


if __name__ == "__main__":
    main()
