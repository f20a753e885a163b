"""One verdict on a journal's health, and its counters for Prometheus.

`assess` turns the counters of a delivery queue (and, when there is one, of the
bridge reading runs) into a `status` an operator can act on:

- `unavailable`: the store is not open, its writes are failing, or no record
  has been written for longer than `growing_after` seconds while records wait;
- `degraded`: the backlog grew over the last `growing_after` seconds (the store
  is slower than the runs), records were dropped, or runs could not be read
  (or only in part); runs that failed, were cancelled or paused inside the
  graph were journaled (`runs_errored`, `runs_cancelled`, `runs_interrupted`)
  and change nothing;
- `ok`: none of that.

`reason` says which, in a sentence. The plugin's `/journal/health`, the SDK
tee's `health()` and the follower all report through it; `http_status` is the
code `/journal/health` answers with: 503 when journaling is not keeping up
(store unavailable or backlog growing), 200 otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["OK", "DEGRADED", "UNAVAILABLE", "STATUSES", "assess", "http_status", "prometheus_text"]

OK = "ok"
DEGRADED = "degraded"
UNAVAILABLE = "unavailable"
STATUSES = (OK, DEGRADED, UNAVAILABLE)


def _error(report: Mapping[str, object]) -> str:
    return f": {report['last_error']}" if report.get("last_error") else ""


def assess(report: Mapping[str, Any]) -> dict[str, object]:
    """`{"status", "reason", "backlog_growing"}` for a report of counters.

    Reads `store_open`, `store_failing`, `backlog`, `lag_seconds`,
    `stalled_seconds`, `backlog_growing_seconds`, `growing_after`, `dropped`,
    `runs_failed`, `runs_partial` and `last_error`; a missing counter counts as fine.
    """
    backlog = int(report.get("backlog") or 0)
    limit = float(report.get("growing_after") or 0.0)
    stalled = float(report.get("stalled_seconds") or 0.0)
    growing_for = float(report.get("backlog_growing_seconds") or 0.0)
    growing = growing_for > 0 and growing_for >= limit
    status, reason = OK, None
    if not report.get("store_open", True):
        status, reason = UNAVAILABLE, f"the run event store is not open ({backlog} records waiting){_error(report)}"
    elif report.get("store_failing"):
        status, reason = UNAVAILABLE, f"store writes are failing ({backlog} records waiting){_error(report)}"
    elif backlog and stalled > limit:
        status, reason = UNAVAILABLE, f"no record written for {stalled:.0f} s while {backlog} records wait"
    elif growing:
        status = DEGRADED
        reason = (
            f"the backlog has been growing for {growing_for:.0f} s: {backlog} records waiting,"
            f" the oldest for {float(report.get('lag_seconds') or 0.0):.0f} s"
        )
    elif report.get("dropped"):
        status, reason = DEGRADED, f"{report['dropped']} records were dropped{_error(report)}"
    elif report.get("runs_failed"):
        status, reason = DEGRADED, f"{report['runs_failed']} runs could not be read{_error(report)}"
    elif report.get("runs_partial"):
        status, reason = DEGRADED, f"{report['runs_partial']} runs were read in part: their stream ended early"
    return {"status": status, "reason": reason, "backlog_growing": growing}


def http_status(health: Mapping[str, object]) -> int:
    """503 while journaling is not keeping up (store unavailable, backlog growing), else 200."""
    if health.get("status") == UNAVAILABLE or health.get("backlog_growing"):
        return 503
    return 200


# (report key, metric name, type, help)
_METRICS: tuple[tuple[str, str, str, str], ...] = (
    ("enabled", "journal_bridge_enabled", "gauge",
     "1 when the plugin journals runs."),
    ("records_enqueued", "journal_bridge_records_enqueued_total", "counter",
     "Records accepted by the delivery queue."),
    ("records_written", "journal_bridge_records_written_total", "counter",
     "Records written to the run event store (including ones it already held)."),
    ("dropped", "journal_bridge_records_dropped_total", "counter",
     "Records the store refused for a reason retrying does not fix."),
    ("retried", "journal_bridge_store_retries_total", "counter",
     "Store writes that failed and were retried."),
    ("parts_seen", "journal_bridge_stream_parts_total", "counter",
     "Stream parts read from runs."),
    ("malformed", "journal_bridge_malformed_parts_total", "counter",
     "Stream parts that could not be mapped to records."),
    ("runs_observed", "journal_bridge_runs_observed_total", "counter",
     "Runs handed to the bridge."),
    ("runs_read", "journal_bridge_runs_read_total", "counter",
     "Runs this process read (their reader claim was its own)."),
    ("runs_read_elsewhere", "journal_bridge_runs_read_elsewhere_total", "counter",
     "Runs handed to this process that another process was reading."),
    ("runs_read_from_client_joins", "journal_bridge_runs_read_from_client_joins_total", "counter",
     "Created runs read from their client's join instead of a join of the journal's own."),
    ("runs_completed", "journal_bridge_runs_completed_total", "counter",
     "Runs read to their end."),
    ("runs_failed", "journal_bridge_runs_failed_total", "counter",
     "Runs that could not be read."),
    ("runs_errored", "journal_bridge_runs_errored_total", "counter",
     "Runs journaled that failed inside the graph (run.error)."),
    ("runs_cancelled", "journal_bridge_runs_cancelled_total", "counter",
     "Runs journaled that were cancelled (run.error CancelledError)."),
    ("runs_interrupted", "journal_bridge_runs_interrupted_total", "counter",
     "Runs journaled that paused at an interrupt (run.interrupt)."),
    ("frames_released", "journal_bridge_frames_released_total", "counter",
     "Stream frames released once their run was journaled."),
    ("stream_replays", "journal_bridge_stream_replays_total", "counter",
     "Run streams the runtime ended early, replayed from the run's resumable stream."),
    ("streams_repaired", "journal_bridge_streams_repaired_total", "counter",
     "Replayed run streams whose client had not got all of the run's frames."),
    ("backlog", "journal_bridge_backlog_records", "gauge",
     "Records accepted and not yet in the store."),
    ("lag_seconds", "journal_bridge_lag_seconds", "gauge",
     "How long the oldest waiting record has waited."),
    ("backlog_growing_seconds", "journal_bridge_backlog_growing_seconds", "gauge",
     "How long the backlog has been growing (0: it is not)."),
    ("spool_recovered", "journal_bridge_spool_recovered_records", "gauge",
     "Records found in the spool at start, left by an earlier process."),
    ("active_runs", "journal_bridge_active_runs", "gauge",
     "Runs being read now."),
    ("retained_frames", "journal_bridge_retained_frames", "gauge",
     "Stream frames the server still keeps for runs."),
    ("store_open", "journal_bridge_store_open", "gauge",
     "1 when the run event store is open."),
)


def _number(value: Any) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    return repr(float(value))


def prometheus_text(health: Mapping[str, object]) -> str:
    """The counters of a health report in the Prometheus text exposition format (0.0.4)."""
    lines: list[str] = []
    for key, name, kind, help_text in _METRICS:
        value = health.get(key)
        if value is None:
            continue
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}", f"{name} {_number(value)}"]
    if "status" in health:
        name = "journal_bridge_health_status"
        lines += [f"# HELP {name} 1 for the current health status, 0 for the others.", f"# TYPE {name} gauge"]
        lines += [f'{name}{{status="{s}"}} {int(health["status"] == s)}' for s in STATUSES]
    return "\n".join(lines) + "\n"
