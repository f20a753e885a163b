// journal-bridge-react: the journal's history in a useStream app.

export * from "./types.js";
export { JournalClient, JournalError } from "./client.js";
export type { BranchOptions, HeaderValue, HistoryOptions, JournalClientOptions, JournalHistory, PageOptions } from "./client.js";
export {
  compactedMessages,
  holdsMessage,
  isConversation,
  isSummaryMessage,
  lastConversationId,
  markerLabel,
  mergeRows,
  placeBranchSwitches,
  rowMessages,
  statusLabel,
  summaryIdsOf,
  watchRun,
} from "./merge.js";
export type { BranchMetadata, JournalRow, RunWatch, LiveMessage, MarkerRow, MessageRow, StatusRow, StreamBranch } from "./merge.js";
export { followBranch, readBranch } from "./sync.js";
export type { FollowStep } from "./sync.js";
export { useJournalHistory } from "./useJournalHistory.js";
export type {
  JournalHistoryStatus,
  StreamLike,
  UseJournalHistoryOptions,
  UseJournalHistoryResult,
} from "./useJournalHistory.js";
export { JournalNote, RunStatusNote, SummaryMarker } from "./components.js";
export type { RunStatusNoteProps, SummaryMarkerProps } from "./components.js";
export { JournalProvider, useJournal, useJournalRow } from "./context.js";
export type { JournalRowView } from "./context.js";
