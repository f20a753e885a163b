// The rows to render: the journal's branch merged with the live messages of useStream.

import {
  isMessageItem,
  isRunStatus,
  isSummaryMarker,
  type JournalBranchPoint,
  type JournalItem,
  type JournalRunStatus,
  type JournalSummaryMarker,
} from "./types.js";

/** What the hook needs of a live message: useStream's `Message` has it. */
export interface LiveMessage {
  id?: string | null | undefined;
  type: string;
}

interface RowPlace {
  /** A stable React key. */
  key: string;
  /** The record's seq, for a row the journal holds; null for a live message it does not hold yet. */
  seq: number | null;
  /** The run that wrote it, for a row the journal holds. */
  runId: string | null;
}

/** A message. */
export interface MessageRow<M> extends RowPlace {
  kind: "message";
  /** useStream's own object when the live state holds the message, else the journal's (same shape). */
  message: M;
  /**
   * The message is in the journal only, not in the state useStream shows: a
   * compaction removed it. useStream knows nothing of it (no
   * `getMessagesMetadata`, no checkpoint), so Regenerate, Edit and the branch
   * switcher cannot act on it: hide them on such rows.
   */
  journalOnly: boolean;
  /** The versions at this fork point, on the first message after one (from the journal). */
  branch: JournalBranchPoint | null;
  /**
   * useStream's branch switcher for this row (`getMessagesMetadata`'s
   * `branch` and `branchOptions`): the message's own, or the one useStream
   * gave a message the rows leave out -- the summary a compaction put into
   * the state, when the run after a fork compacted -- moved to the first live
   * message after its marker. Null when there is nothing to switch.
   */
  streamBranch: StreamBranch | null;
}

/** A branch switcher's state as useStream's `getMessagesMetadata` gives it. */
export interface StreamBranch {
  branch: string;
  branchOptions: string[];
}

/** What useStream's `getMessagesMetadata` answers, as far as branches go. */
export interface BranchMetadata {
  branch?: string | undefined;
  branchOptions?: string[] | undefined;
}

/** "N messages condensed": where a compaction happened. */
export interface MarkerRow extends RowPlace {
  kind: "marker";
  marker: JournalSummaryMarker;
  journalOnly: true;
}

/** A run that failed, was cancelled, or waits at an interrupt. */
export interface StatusRow extends RowPlace {
  kind: "status";
  status: JournalRunStatus;
  journalOnly: true;
}

export type JournalRow<M = LiveMessage> = MessageRow<M> | MarkerRow | StatusRow;

function extras(message: object): Record<string, unknown> {
  const fields = message as { additional_kwargs?: unknown; additionalKwargs?: unknown };
  const found = fields.additional_kwargs ?? fields.additionalKwargs;
  return found && typeof found === "object" ? (found as Record<string, unknown>) : {};
}

/** Whether a live message is the summary a compaction put into the state (its marker stands for it). */
export function isSummaryMessage(message: LiveMessage, summaryIds: ReadonlySet<string> = new Set()): boolean {
  if (message.id && summaryIds.has(message.id)) return true;
  return extras(message).lc_source === "summarization";
}

/** The summary message ids the markers name. */
export function summaryIdsOf(items: readonly JournalItem[]): Set<string> {
  const ids = new Set<string>();
  for (const item of items) {
    if (isSummaryMarker(item) && item.summary_message_id) ids.add(item.summary_message_id);
  }
  return ids;
}

/** Whether a live message is part of the conversation to show: not a removal, not a summary. */
export function isConversation(message: LiveMessage, summaryIds?: ReadonlySet<string>): boolean {
  return message.type !== "remove" && !isSummaryMessage(message, summaryIds);
}

/** The id of the newest conversation message of `live`: what the journal must hold once a run is over. */
export function lastConversationId(live: readonly LiveMessage[]): string | undefined {
  for (let i = live.length - 1; i >= 0; i -= 1) {
    const message = live[i];
    if (message && isConversation(message)) return message.id ?? undefined;
  }
  return undefined;
}

/**
 * What a run did to the live state, watched render by render: the messages
 * that left it, and whether a summary came that the state did not hold when
 * the run started (the run compacted). The state may pass through an empty
 * list on the way to the summary, so the two are not seen together.
 */
export interface RunWatch<M> {
  /** The live messages last seen. */
  live: readonly M[];
  loading: boolean;
  /** Conversation messages that left the live state during the run, oldest first. */
  vanished: readonly M[];
  /** The summary messages the state held when the run started. */
  summariesBefore: ReadonlySet<string>;
  /** A summary came during the run: the messages that left were compacted. */
  compacted: boolean;
}

function summaryIdsIn(live: readonly LiveMessage[]): Set<string> {
  const ids = new Set<string>();
  for (const message of live) if (message.id && isSummaryMessage(message)) ids.add(message.id);
  return ids;
}

/** `watch` brought up to the live state `live` (`loading`: a run streams). */
export function watchRun<M extends LiveMessage>(watch: RunWatch<M> | null, live: readonly M[], loading: boolean): RunWatch<M> {
  if (!watch) return { live, loading, vanished: [], summariesBefore: summaryIdsIn(live), compacted: false };
  let { vanished, summariesBefore, compacted } = watch;
  if (loading && !watch.loading) {
    // A run starts: what happened in the one before is the journal's now.
    vanished = [];
    summariesBefore = summaryIdsIn(watch.live);
    compacted = false;
  }
  if (loading) {
    const now = new Set(live.map((message) => message.id));
    const known = new Set(vanished.map((message) => message.id));
    const left = watch.live.filter(
      (message) => message.id && !now.has(message.id) && !known.has(message.id) && isConversation(message),
    );
    if (left.length) vanished = [...vanished, ...left];
    compacted = compacted || live.some((message) => message.id && isSummaryMessage(message) && !summariesBefore.has(message.id));
  }
  return { live, loading, vanished, summariesBefore, compacted };
}

/**
 * The messages a compaction removed during the run that `items` (the journal
 * read so far) does not hold: those the rows must keep showing. Messages that
 * left for another reason (a regenerate, an edit, a branch switch) are the
 * journal's. While the run streams, every message that left and the journal
 * lacks is kept (the state may be empty for a moment before the summary
 * comes); once it is over, only if it compacted.
 */
export function compactedMessages<M extends LiveMessage>(watch: RunWatch<M>, items: readonly JournalItem[]): M[] {
  if (!watch.vanished.length || (!watch.loading && !watch.compacted)) return [];
  const held = new Set<string>();
  for (const item of items) if (isMessageItem(item) && item.id) held.add(item.id);
  return watch.vanished.filter((message) => message.id && !held.has(message.id));
}

function itemRow<M>(item: JournalItem, live: ReadonlyMap<string, M>, current: ReadonlySet<string>): JournalRow<M> {
  if (isSummaryMarker(item)) {
    return { kind: "marker", key: item.id, marker: item, journalOnly: true, seq: item.seq, runId: item.run_id };
  }
  if (isRunStatus(item)) {
    return { kind: "status", key: item.id, status: item, journalOnly: true, seq: item.seq, runId: item.run_id };
  }
  const id = item.id ?? undefined;
  const liveVersion = id === undefined ? undefined : live.get(id);
  return {
    kind: "message",
    key: id ?? `seq-${item.seq}`,
    // A journal message is a LangChain message dict: the shape useStream's messages have.
    message: liveVersion ?? (item as unknown as M),
    journalOnly: id === undefined || !current.has(id),
    seq: item.seq,
    runId: item.run_id,
    branch: item.branch ?? null,
    streamBranch: null,
  };
}

function liveRow<M extends LiveMessage>(message: M, index: number): MessageRow<M> {
  return {
    kind: "message",
    key: message.id ?? `live-${index}`,
    message,
    journalOnly: false,
    seq: null,
    runId: null,
    branch: null,
    streamBranch: null,
  };
}

/**
 * The conversation to show: the journal's branch (older messages, markers,
 * run statuses) merged with the live messages.
 *
 * `live` is what useStream shows (`stream.messages`); `compacted`, messages a
 * compaction removed from it during the run in progress, which the journal
 * may not hold yet. The live messages decide the conversation from the
 * oldest one the journal holds on: a journal message after it that the live
 * state does not hold lies on another branch (a regenerated answer, an edited
 * question) and is left out, as are markers and statuses of runs that left
 * no message there. Before it, the journal shows what compactions removed.
 * Live messages the journal does not hold yet come at their place; the
 * summary message a compaction put into the state never does (its marker
 * stands where it happened).
 */
export function mergeRows<M extends LiveMessage>(
  items: readonly JournalItem[],
  live: readonly M[],
  compacted: readonly M[] = [],
): JournalRow<M>[] {
  const summaryIds = summaryIdsOf(items);
  const shown = live.filter((message) => isConversation(message, summaryIds));
  const current = new Set<string>();
  for (const message of shown) if (message.id) current.add(message.id);
  const earlier = compacted.filter(
    (message) => message.id && !current.has(message.id) && isConversation(message, summaryIds),
  );
  // The live conversation, oldest first: what compactions took during the run, then the state.
  const liveList: M[] = [...earlier, ...shown];
  const liveById = new Map<string, M>();
  const livePlace = new Map<string, number>();
  liveList.forEach((message, index) => {
    if (message.id && !liveById.has(message.id)) {
      liveById.set(message.id, message);
      livePlace.set(message.id, index);
    }
  });
  const journaled = new Set<string>();
  for (const item of items) if (isMessageItem(item) && item.id) journaled.add(item.id);

  const rows: JournalRow<M>[] = [];
  const anchor = items.findIndex((item) => isMessageItem(item) && item.id !== null && liveById.has(item.id));
  const before = anchor < 0 ? items : items.slice(0, anchor);
  for (const item of before) rows.push(itemRow(item, liveById, current));

  let next = 0; // the first live message not placed yet
  const placeLiveUpTo = (end: number): void => {
    for (; next < end; next += 1) {
      const message = liveList[next];
      if (message && !(message.id && journaled.has(message.id))) rows.push(liveRow(message, next));
    }
  };
  if (anchor >= 0) {
    const tail = items.slice(anchor);
    const keptRuns = new Set<string>();
    for (const item of tail) {
      if (isMessageItem(item) && item.id && liveById.has(item.id)) keptRuns.add(item.run_id);
    }
    const placed = new Set<string>();
    for (const item of tail) {
      if (isMessageItem(item)) {
        const id = item.id;
        if (id === null || !liveById.has(id) || placed.has(id)) continue;
        placed.add(id);
        const at = livePlace.get(id) ?? 0;
        placeLiveUpTo(at);
        next = Math.max(next, at + 1);
        rows.push(itemRow(item, liveById, current));
      } else if (keptRuns.has(item.run_id)) {
        rows.push(itemRow(item, liveById, current));
      }
    }
  }
  placeLiveUpTo(liveList.length);
  return rows;
}

function switchOf(metadata: BranchMetadata | undefined): StreamBranch | null {
  const { branch, branchOptions } = metadata ?? {};
  return branch && branchOptions && branchOptions.length > 1 ? { branch, branchOptions } : null;
}

/**
 * `rows` with useStream's branch switchers (`metadataOf`: the stream's
 * `getMessagesMetadata`) in `streamBranch`. useStream puts a fork's switcher
 * on the first message of the state it first saw after the fork; when the run
 * after the fork compacted, that is the summary message, which the rows leave
 * out. Its switcher goes to the first message of the run that compacted (the
 * edited question, the regenerated answer), found by the summary's marker;
 * without a marker yet, to the first live message after the summary in the
 * state. A message's own switcher stays on it. Rows without a switcher are
 * returned as they were.
 */
export function placeBranchSwitches<M extends LiveMessage>(
  rows: readonly JournalRow<M>[],
  live: readonly M[],
  metadataOf: (message: M, index: number) => BranchMetadata | undefined,
): JournalRow<M>[] {
  const placed = new Map<number, StreamBranch>();
  const rowOf = new Map<string, number>();
  rows.forEach((row, index) => {
    if (row.kind === "message" && !row.journalOnly && row.message.id) rowOf.set(row.message.id, index);
  });
  const orphans: Array<{ message: M; index: number; found: StreamBranch }> = [];
  live.forEach((message, index) => {
    const found = switchOf(metadataOf(message, index));
    if (!found) return;
    const own = message.id ? rowOf.get(message.id) : undefined;
    if (own !== undefined) placed.set(own, found);
    else orphans.push({ message, index, found });
  });
  const free = (at: number | undefined): at is number => at !== undefined && at >= 0 && !placed.has(at);
  for (const { message, index, found } of orphans) {
    const candidates: number[] = [];
    const marker = rows.findIndex((row) => row.kind === "marker" && row.marker.summary_message_id === message.id);
    const run = marker >= 0 ? rows[marker]?.runId : undefined;
    rows.forEach((row, at) => {
      if (row.kind === "message" && !row.journalOnly && run && row.runId === run) candidates.push(at);
    });
    rows.forEach((row, at) => {
      if (marker >= 0 && at > marker && row.kind === "message" && !row.journalOnly) candidates.push(at);
    });
    for (const later of live.slice(index + 1)) {
      const at = later.id ? rowOf.get(later.id) : undefined;
      if (at !== undefined) candidates.push(at);
    }
    const target = candidates.find(free);
    if (target !== undefined) placed.set(target, found);
  }
  if (!placed.size) return rows.slice();
  return rows.map((row, index) => {
    const found = placed.get(index);
    return found && row.kind === "message" ? { ...row, streamBranch: found } : row;
  });
}

/** The message of each message row, in order: the conversation as a list of messages. */
export function rowMessages<M>(rows: readonly JournalRow<M>[]): M[] {
  const messages: M[] = [];
  for (const row of rows) if (row.kind === "message") messages.push(row.message);
  return messages;
}

/** "5 messages condensed". */
export function markerLabel(marker: JournalSummaryMarker): string {
  const count = marker.condensed_count ?? marker.replaced_count ?? 0;
  return `${count} ${count === 1 ? "message" : "messages"} condensed`;
}

/** "Run failed: ToolFailure", "Run cancelled", "Waiting for input". */
export function statusLabel(status: JournalRunStatus): string {
  if (status.status === "interrupted") return "Waiting for input";
  if (status.status === "cancelled") return "Run cancelled";
  return status.error_type ? `Run failed: ${status.error_type}` : "Run failed";
}

/** Whether `items` hold the message `id`. */
export function holdsMessage(items: readonly JournalItem[], id: string): boolean {
  return items.some((item) => isMessageItem(item) && item.id === id);
}
