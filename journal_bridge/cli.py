"""The `journal-bridge` command.

    journal-bridge history THREAD_ID [--store STORE_URL | --url SERVER_URL] [--limit N]
    journal-bridge follow --url SERVER_URL [--store STORE_URL] [--interval S] [--once] [--from-now] [-v]
    journal-bridge backfill --url SERVER_URL [--store STORE_URL] [--thread ID ...]
    journal-bridge --version

Each subcommand registers itself in `build_parser` through an `_add_<name>`
function that sets `handler` on its sub-parser; `main` reads the settings
(`journal_bridge.settings`) and dispatches to it with them.

Every subcommand that talks to a server sends the same credentials:
`--token` (a bearer token), `--header 'Name: value'` (repeatable) and the
`x-api-key` langgraph-sdk sends: an explicit `--header 'x-api-key: ...'`,
else the first of the environment variables `LANGGRAPH_API_KEY`,
`LANGSMITH_API_KEY`, `LANGCHAIN_API_KEY` that is set.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import textwrap
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, TextIO

from journal_bridge.model.errors import JournalBridgeError, RunNotFound
from journal_bridge.model.shapes import JournalHistoryItem, JournalHistoryPage
from journal_bridge.projection.overview import message_text
from journal_bridge.settings import ENV, Settings, SettingsError

if TYPE_CHECKING:
    from langgraph_sdk.client import LangGraphClient

    _Subcommands = argparse._SubParsersAction[argparse.ArgumentParser]

__all__ = ["build_parser", "format_item", "main"]

# A subcommand's runner: its parsed arguments and the settings to the exit status.
_Handler = Callable[[argparse.Namespace, Settings], int]

_PAGE = 500
_INDENT = "    "
_API_KEY_HEADER = "x-api-key"
# Where langgraph-sdk's `get_client` looks for an API key, in this order.
_API_KEY_ENV = ("LANGGRAPH_API_KEY", "LANGSMITH_API_KEY", "LANGCHAIN_API_KEY")
# The settings a command uses: the others (the plugin's) do not stop it.
_SETTINGS = ("store_url", "route_prefix", "max_content_bytes", "spool_dir")


# -- credentials ---------------------------------------------------------------


class _Usage(JournalBridgeError):
    """A malformed argument: reported with exit status 2, like argparse does."""


def _add_credentials(parser: argparse.ArgumentParser, scope: str = "") -> None:
    parser.add_argument("--token", help=f"{scope}bearer token for a server with auth")
    parser.add_argument(
        "--header",
        action="append",
        metavar="'NAME: VALUE'",
        help=(
            f"{scope}extra request header, repeatable; x-api-key defaults to env "
            "LANGGRAPH_API_KEY (else LANGSMITH_API_KEY, LANGCHAIN_API_KEY), as in langgraph-sdk"
        ),
    )


def _credentials(args: argparse.Namespace) -> tuple[dict[str, str], str | None]:
    """The request headers but the API key, and the API key (None: send none)."""
    headers: dict[str, str] = {}
    if args.token:
        headers["Authorization"] = f"Bearer {args.token}"
    api_key = None
    for header in args.header or []:
        name, sep, value = header.partition(":")
        if not sep or not name.strip():
            raise _Usage(f"--header: expected 'Name: value', got {header!r}")
        if name.strip().lower() == _API_KEY_HEADER:
            api_key = value.strip()
        else:
            headers[name.strip()] = value.strip()
    if api_key is None:
        api_key = _api_key_from_env()
    return headers, api_key or None


def _api_key_from_env() -> str | None:
    for name in _API_KEY_ENV:
        if value := os.environ.get(name):
            # langgraph-sdk strips whitespace and quotes around the key the same way.
            return value.strip().strip('"').strip("'")
    return None


# -- history -------------------------------------------------------------------


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False)


def _indented(text: str, width: int) -> list[str]:
    lines: list[str] = []
    for line in text.splitlines() or [""]:
        wrapped = textwrap.wrap(
            line, width=max(width - len(_INDENT), 20), replace_whitespace=False
        )
        lines.extend(_INDENT + part for part in wrapped or [""])
    return lines


def format_item(item: Mapping[str, Any], width: int = 100) -> str:
    """One history item as terminal text: a header line, then the content indented."""
    seq = item.get("seq")
    if item.get("type") == "summary_marker":
        # A server older than `condensed_count` sends only `replaced_count`.
        count = item.get("condensed_count", item.get("replaced_count"))
        noun = "message" if count == 1 else "messages"
        label = (
            f"{count} {noun} condensed" if count is not None else "messages condensed"
        )
        lines = [f"[{seq}] ── {label} ──"]
        if item.get("summary"):
            lines += _indented(str(item["summary"]), width)
        return "\n".join(lines)
    if item.get("type") == "run_status":
        status = str(item.get("status") or "failed")
        label = f"run {status}"
        if status == "failed" and item.get("error_type"):
            label += f": {item['error_type']}"
        lines = [f"[{seq}] ── {label} ──"]
        if item.get("message"):
            lines += _indented(str(item["message"]), width)
        for interrupt in item.get("interrupts") or []:
            value = interrupt.get("value") if isinstance(interrupt, dict) else interrupt
            lines += _indented(value if isinstance(value, str) else json.dumps(value, default=str), width)
        return "\n".join(lines)
    role = str(item.get("type", "?"))
    if role == "tool" and item.get("name"):
        role = f"tool {item['name']}"
    header = f"[{seq}] {role}"
    if item.get("run_id"):
        # Run ids are time-ordered (uuid7): their tail tells runs apart, their head does not.
        header += f"  (run …{str(item['run_id'])[-8:]})"
    lines = [header]
    # Everything the message held: a block that is not text is printed as JSON.
    text = message_text(item.get("content"), other=_json)
    if text:
        lines += _indented(text, width)
    for call in item.get("tool_calls") or []:
        args = json.dumps(call.get("args", {}), ensure_ascii=False, sort_keys=True)
        lines.append(f"{_INDENT}→ {call.get('name')}({args})")
    return "\n".join(lines)


async def _history_from_store(
    store_url: str, thread_id: str, limit: int | None, settings: Settings, run_id: str | None = None
) -> list[JournalHistoryItem] | None:
    from journal_bridge.projection.history import history_page
    from journal_bridge.store import create_store

    _require_existing_journal(store_url)
    async with create_store(store_url, **settings.store_options) as store:
        if not await store.has_thread(thread_id):
            return None
        try:
            return await _collect(
                lambda before: history_page(
                    store, thread_id, limit=_page_size(limit), before_seq=before, run_id=run_id
                ),
                limit,
            )
        except RunNotFound as exc:
            raise _Failure(str(exc)) from None


async def _history_from_server(
    url: str,
    thread_id: str,
    limit: int | None,
    headers: dict[str, str],
    api_key: str | None,
    prefix: str,
    page_size: int = _PAGE,
    run_id: str | None = None,
) -> list[JournalHistoryItem] | None:
    from langgraph_sdk.errors import APIStatusError, NotFoundError

    from journal_bridge.client import get_journal_client

    # api_key None: the caller's environment was already consulted; send none.
    async with get_journal_client(
        url=url.rstrip("/"), api_key=api_key, headers=headers, timeout=30, prefix=prefix
    ) as journal:
        items: list[JournalHistoryItem] = []
        try:
            if not limit:
                return await journal.history(thread_id, page_size=page_size, run_id=run_id)
            # Only the newest `limit` items: page backwards from the newest one.
            async for page in journal.pages(
                thread_id, page_size=_page_size(limit, page_size), newest_first=True, run_id=run_id
            ):
                items = page["data"] + items
                if len(items) >= limit:
                    break
        except NotFoundError:
            if run_id is not None:
                raise _Failure(f"run {run_id!r} has no record in thread {thread_id!r}") from None
            return None
        except APIStatusError as exc:
            try:
                detail = exc.response.json().get("detail", exc.response.text)
            except ValueError:
                detail = exc.response.text
            raise _Failure(f"{exc.request.url}: {exc.response.status_code} {detail}") from None
        return items[-limit:]


def _require_existing_journal(store_url: str) -> None:
    """A reader never creates a journal: opening a missing SQLite file would."""
    if store_url.split(":", 1)[0].lower() != "sqlite":
        return
    from pathlib import Path

    from journal_bridge.store.sqlite import sqlite_path_from_url

    path = sqlite_path_from_url(store_url)
    if not Path(path).exists():
        raise _Failure(f"no journal at {path}")


class _NotFound(JournalBridgeError):
    pass


class _Failure(JournalBridgeError):
    pass


def _page_size(limit: int | None, page_size: int = _PAGE) -> int:
    return min(limit, page_size) if limit else page_size


async def _collect(
    fetch: Callable[[int | None], Awaitable[JournalHistoryPage]], limit: int | None
) -> list[JournalHistoryItem]:
    """Page backwards from the newest item until `limit` items (or the start)."""
    pages: list[list[JournalHistoryItem]] = []
    total, before = 0, None
    while True:
        page = await fetch(before)
        pages.append(page["data"])
        total += len(page["data"])
        if not page["has_more"] or (limit and total >= limit):
            break
        before = page["next_before_seq"]
    items = [item for data in reversed(pages) for item in data]
    return items[-limit:] if limit else items


def _print_items(items: Iterable[JournalHistoryItem], out: TextIO, as_json: bool) -> None:
    if as_json:
        out.writelines(json.dumps(item, ensure_ascii=False) + "\n" for item in items)
        return
    width = shutil.get_terminal_size((100, 24)).columns
    out.writelines(format_item(item, width) + "\n\n" for item in items)


def _run_history(args: argparse.Namespace, settings: Settings) -> int:
    """print a thread's conversation with compaction markers inline

    Print a thread's journaled conversation in order, with a marker where messages were
    condensed and the summary indented below it. Reads the store directly (--store) or a
    server's journal API (--url).
    """
    if args.url:
        headers, api_key = _credentials(args)
        prefix = args.prefix or settings.route_prefix
        source = args.url
        job = _history_from_server(
            args.url, args.thread_id, args.limit, headers, api_key, prefix, args.page_size, args.run_id
        )
    else:
        source = args.store or settings.journal_url
        job = _history_from_store(source, args.thread_id, args.limit, settings, args.run_id)
    try:
        items = asyncio.run(job)
    except _Failure as exc:
        hint = ""
        if not args.url and not args.store and settings.store_url is None:
            hint = f"; give --store STORE_URL or --url SERVER_URL, or set {ENV['store_url'][0]}"
        print(f"journal-bridge history: {exc}{hint}", file=sys.stderr)
        return 1
    except Exception as exc:  # noqa: BLE001 - any store or network failure: say which and why
        print(f"journal-bridge history: cannot read {source}: {exc}", file=sys.stderr)
        return 1
    if items is None:
        print(
            f"journal-bridge history: thread {args.thread_id!r} is not in the journal",
            file=sys.stderr,
        )
        return 1
    _print_items(items, sys.stdout, args.json)
    return 0


def _positive(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer, got {value!r}") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {number}")
    return number


def _add_command(subparsers: _Subcommands, name: str, handler: _Handler) -> argparse.ArgumentParser:
    """The parser of subcommand `name`, which `main` hands to `handler`.

    The handler's docstring is the subcommand's help: its first line in the list
    of commands, the rest the description (argparse folds its lines)."""
    summary, _, description = (handler.__doc__ or "").partition("\n")
    parser = subparsers.add_parser(name, help=summary.strip(), description=description.strip())
    parser.set_defaults(handler=handler)
    return parser


def _add_server_and_store(parser: argparse.ArgumentParser) -> None:
    """--url (required) and --store: the server a sidecar command reads, the store it writes."""
    parser.add_argument("--url", required=True, metavar="SERVER_URL", help="LangGraph Server URL")
    parser.add_argument("--store", metavar="STORE_URL", help="run event store URL (default as for history)")


def _add_history(subparsers: _Subcommands) -> None:
    parser = _add_command(subparsers, "history", _run_history)
    parser.add_argument("thread_id")
    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        "--store",
        metavar="STORE_URL",
        help=(
            "run event store URL (default: env JOURNAL_BRIDGE_STORE_URL, else sqlite journal.db "
            "in the cwd, which must exist: history never creates a journal)"
        ),
    )
    source.add_argument(
        "--url", metavar="SERVER_URL", help="LangGraph Server URL with the plugin"
    )
    parser.add_argument("--limit", type=_positive, help="show only the newest N items")
    parser.add_argument(
        "--run-id",
        help="the branch that ends with this run (a regenerated or edited turn's other version) "
        "instead of the thread's current one",
    )
    parser.add_argument("--json", action="store_true", help="one JSON item per line")
    _add_credentials(parser, "with --url: ")
    parser.add_argument(
        "--prefix",
        help="with --url: the journal route prefix (default: env JOURNAL_BRIDGE_ROUTE_PREFIX or /journal)",
    )
    parser.add_argument(
        "--page-size",
        type=_positive,
        default=_PAGE,
        help=f"with --url: items per request, at most {_PAGE} (default {_PAGE})",
    )


def _print_summary(summary: object, as_json: bool, lines: Iterable[str]) -> None:
    """A sidecar command's summary: one JSON line with --json, else its `lines` for a reader."""
    if as_json:
        print(json.dumps(summary, ensure_ascii=False))
    else:
        for line in lines:
            print(line)


# -- follow --------------------------------------------------------------------


def _sdk_client(url: str, credentials: tuple[dict[str, str], str | None]) -> LangGraphClient:
    from langgraph_sdk import get_client

    headers, api_key = credentials
    return get_client(url=url, headers=headers or None, api_key=api_key)


def _run_follow(args: argparse.Namespace, settings: Settings) -> int:
    """journal the runs of a server without the plugin (sidecar)

    Poll a LangGraph Server for new runs and journal every run whose stream can be read
    (created with 'events' or 'values' in stream_mode; fully when also
    stream_resumable). Runs it cannot read are reported. The discovery cursor is kept in
    a JSON file, so a restarted follower continues where it stopped.
    """
    import logging
    from pathlib import Path

    from journal_bridge.capture.follower import default_cursor_path, run_follower

    # The follower's own lines by default; every library's (httpx's request lines) with -v.
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(message)s", stream=sys.stderr)
    logging.getLogger("journal_bridge").setLevel(logging.INFO)
    credentials = _credentials(args)
    store_url = args.store or settings.journal_url
    cursor = Path(args.cursor) if args.cursor else default_cursor_path(store_url)
    try:
        summary = run_follower(
            lambda: _sdk_client(args.url, credentials),
            store_url,
            cursor_path=cursor,
            interval=args.interval,
            once=args.once,
            from_now=args.from_now,
            spool_dir=settings.spool_dir,
            store_options=settings.store_options,
        )
    except Exception as exc:  # noqa: BLE001 - say which source failed and why
        print(f"journal-bridge follow: {exc}", file=sys.stderr)
        return 1
    _print_summary(summary, args.json, _follow_lines(summary))
    if summary["poll_errors"]:
        print(f"journal-bridge follow: {summary['poll_errors']} polls failed", file=sys.stderr)
        return 1
    return 0


def _follow_lines(summary: Mapping[str, Any]) -> Iterator[str]:
    """The follower's summary for a reader: its counts, then each run it reported."""
    yield (
        f"runs discovered {summary['runs_discovered']}, journaled {summary['journaled']}, "
        f"live only {summary['live_only']}, unobservable {summary['unobservable']}, "
        f"records written {summary['records_written']}, not yet written {summary['backlog']}"
    )
    for report in summary["reported"]:
        yield f"  {report['outcome']}: run {report['run_id']} (thread {report['thread_id']}): {report['reason']}"
    earlier = summary["live_only"] + summary["unobservable"] - len(summary["reported"])
    if earlier > 0:
        yield f"  ({earlier} earlier reports not listed: their log lines have them)"


def _add_follow(subparsers: _Subcommands) -> None:
    parser = _add_command(subparsers, "follow", _run_follow)
    _add_server_and_store(parser)
    parser.add_argument("--interval", type=float, default=2.0, help="seconds between polls (default 2)")
    parser.add_argument(
        "--once", action="store_true",
        help="poll once, journal what was found, exit (status 1 if the poll failed)",
    )
    parser.add_argument(
        "--from-now", action="store_true",
        help="leave runs created before the follower started alone (default: from the cursor, else all)",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log every library's lines (HTTP requests)")
    parser.add_argument("--cursor", metavar="PATH", help="cursor file (default: next to a SQLite store)")
    _add_credentials(parser)
    parser.add_argument("--json", action="store_true", help="print the final summary as JSON")


# -- backfill ------------------------------------------------------------------


def _run_backfill(args: argparse.Namespace, settings: Settings) -> int:
    """rebuild the journal of threads from the server's checkpoints

    Journal what a thread's checkpoint history shows: every message in order of first
    appearance and a marker at each compaction. Messages and markers already in the
    journal are not written again, so it is safe to repeat.
    """
    from journal_bridge.capture.backfill import backfill
    from journal_bridge.store import create_store

    credentials = _credentials(args)
    store_url = args.store or settings.journal_url

    def progress(index: int, total: int, result: Any) -> None:
        print(
            f"[{index}/{total}] thread {result.thread_id}: {result.status}, "
            f"{result.written} written, {result.already_present} already present"
            + (f", {result.owners_filled} given their owner" if result.owners_filled else ""),
            file=sys.stderr,
        )

    async def job() -> Any:
        async with create_store(store_url, **settings.store_options) as store:
            return await backfill(
                _sdk_client(args.url, credentials), store, args.thread or None,
                since_checkpoint=args.since_checkpoint, on_thread=progress, default_owner=settings.default_owner,
            )

    try:
        summary = asyncio.run(job())
    except Exception as exc:  # noqa: BLE001 - say which source failed and why
        print(f"journal-bridge backfill: {exc}", file=sys.stderr)
        return 1
    report = summary.to_dict()
    _print_summary(report, args.json, _backfill_lines(report))
    failed = [t for t in summary.threads if t.status in ("error", "not_found")]
    return 1 if failed else 0


def _backfill_lines(report: Mapping[str, Any]) -> Iterator[str]:
    """The backfill's summary for a reader: its counts, then each thread not fully recovered."""
    yield (
        f"threads {report['threads']}, records written {report['written']}, "
        f"already present {report['already_present']}, not fully recovered {len(report['incomplete'])}"
    )
    for item in report["incomplete"]:
        yield f"  {item['thread_id']}: {item['status']}: {'; '.join(item['notes'])}"


def _add_backfill(subparsers: _Subcommands) -> None:
    parser = _add_command(subparsers, "backfill", _run_backfill)
    _add_server_and_store(parser)
    parser.add_argument("--thread", action="append", metavar="ID", help="a thread to backfill (default: all)")
    parser.add_argument(
        "--since-checkpoint", metavar="CHECKPOINT_ID",
        help="ignore checkpoints older than this one (as if they had been pruned)",
    )
    _add_credentials(parser)
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")


def _version() -> str:
    from importlib import metadata

    try:
        return metadata.version("journal-bridge")
    except metadata.PackageNotFoundError:  # run from a checkout that is not installed
        from journal_bridge import __version__

        return __version__


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="journal-bridge",
        description="Run journal for LangGraph Server: read and maintain a thread's journal.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    _add_history(subparsers)
    _add_follow(subparsers)
    _add_backfill(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        settings = Settings.from_env(only=_SETTINGS)
    except SettingsError as exc:
        print(f"journal-bridge {args.command}: {exc}", file=sys.stderr)
        return 1
    handler: _Handler = args.handler
    try:
        return handler(args, settings)
    except _Usage as exc:
        print(f"journal-bridge {args.command}: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # The reader went away (`journal-bridge history ... | head`): not an error.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
