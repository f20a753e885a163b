// The rows that are not messages: a compaction's marker and a run's status.

import type { ReactElement } from "react";

import { markerLabel, statusLabel, type JournalRow } from "./merge.js";
import type { JournalRunStatus, JournalSummaryMarker } from "./types.js";

export interface SummaryMarkerProps {
  marker: JournalSummaryMarker;
  className?: string;
}

/** "N messages condensed", the summary behind it (a native toggle: `<details>`). */
export function SummaryMarker({ marker, className = "journal-summary-marker" }: SummaryMarkerProps): ReactElement {
  return (
    <details className={className} data-journal-marker={marker.id}>
      <summary>{markerLabel(marker)}</summary>
      {marker.summary ? <p>{marker.summary}</p> : null}
    </details>
  );
}

export interface RunStatusNoteProps {
  status: JournalRunStatus;
  className?: string;
}

/** "Run failed: ToolFailure", with the error's message; a cancelled or interrupted run says so. */
export function RunStatusNote({ status, className = "journal-run-status" }: RunStatusNoteProps): ReactElement {
  return (
    <p role="note" className={className} data-journal-status={status.status}>
      {statusLabel(status)}
      {status.status === "failed" && status.message ? ` (${status.message})` : null}
    </p>
  );
}

/** A marker or status row as its note; nothing for a message row (the app renders those). */
export function JournalNote<M>({ row }: { row: JournalRow<M> }): ReactElement | null {
  if (row.kind === "marker") return <SummaryMarker marker={row.marker} />;
  if (row.kind === "status") return <RunStatusNote status={row.status} />;
  return null;
}
