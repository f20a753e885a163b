// The hook's result for the components below it: the rows, and one message's row.

import { createContext, useContext, type ReactElement, type ReactNode } from "react";

import type { BranchMetadata, LiveMessage, MessageRow } from "./merge.js";
import type { UseJournalHistoryResult } from "./useJournalHistory.js";

const JournalContext = createContext<UseJournalHistoryResult<LiveMessage> | null>(null);

/** Gives `useJournal` and `useJournalRow` below it what `useJournalHistory` returned. */
export function JournalProvider<M extends LiveMessage>({
  value,
  children,
}: {
  value: UseJournalHistoryResult<M>;
  children?: ReactNode;
}): ReactElement {
  return <JournalContext.Provider value={value as unknown as UseJournalHistoryResult<LiveMessage>}>{children}</JournalContext.Provider>;
}

/** What `useJournalHistory` returned, given by the `JournalProvider` above. */
export function useJournal<M extends LiveMessage = LiveMessage>(): UseJournalHistoryResult<M> {
  const journal = useContext(JournalContext);
  if (!journal) throw new Error("useJournal must be used within a JournalProvider");
  return journal as unknown as UseJournalHistoryResult<M>;
}

export interface JournalRowView<M, Meta> {
  /**
   * `stream.getMessagesMetadata(message)`, with the branch switcher useStream
   * put on a summary the rows leave out (`MessageRow.streamBranch`).
   */
  meta: Meta | undefined;
  /** Only the journal has the message: hide Regenerate and Edit. */
  journalOnly: boolean;
  row: MessageRow<M> | undefined;
}

/**
 * A message component's view of its row: in place of
 * `stream.getMessagesMetadata(message)`, the same metadata (the branch
 * switcher included) and whether only the journal has the message. Without a
 * `JournalProvider` above, the stream's metadata as it is.
 */
export function useJournalRow<M extends LiveMessage, Meta extends BranchMetadata>(
  stream: { getMessagesMetadata(message: M, index?: number): Meta | undefined },
  message: M | undefined,
): JournalRowView<M, Meta> {
  const journal = useContext(JournalContext) as UseJournalHistoryResult<M> | null;
  const own = message ? stream.getMessagesMetadata(message) : undefined;
  const row = message && journal ? journal.rowOf(message) : undefined;
  const moved = row?.streamBranch;
  const meta = moved && !own?.branch ? ({ ...own, ...moved } as Meta) : own;
  return { meta, journalOnly: row?.journalOnly ?? false, row };
}
