// The shapes the journal's routes answer with. The one definition is the
// server's /openapi.json (its `components/schemas`, named in the comments);
// these declarations follow it field for field.

/** One branch from a fork point: read it with `run_id` (`JournalBranchAlternative`). */
export interface JournalBranchAlternative {
  /** The run of the branch's first item. */
  run_id: string | null;
  /** The seq of the branch's first item; null while it has none. */
  seq: number | null;
}

/** `branch` of the first item after a fork: a regenerate, an edit, a fork from a checkpoint (`JournalBranchPoint`). */
export interface JournalBranchPoint {
  /** The checkpoint the branches went on from. */
  checkpoint_id: string | null;
  /** This branch's place among the alternatives, from 1: the "2" of "2 / 3". */
  index: number;
  /** How many alternatives there are. */
  count: number;
  /** The original continuation first, then each fork from the checkpoint, in the order made. */
  alternatives: JournalBranchAlternative[];
}

/** A tool call of an AI message (`JournalToolCall`). */
export interface JournalToolCall {
  name: string;
  args: Record<string, unknown>;
  id?: string | null;
  type?: "tool_call";
}

/** A text or other content block of a message. */
export type JournalContentBlock = { type: string; [field: string]: unknown };

/**
 * A LangChain message dict as the journal recorded it, plus the seq, run and
 * time of its record (`JournalMessageItem`). Fields the writer journaled
 * beyond these are kept.
 */
export interface JournalMessageItem {
  type: "human" | "ai" | "tool";
  /** The message's id. */
  id: string | null;
  seq: number;
  run_id: string;
  created_at: string;
  /** Text, or a list of content blocks. */
  content?: string | JournalContentBlock[];
  name?: string | null;
  additional_kwargs?: Record<string, unknown>;
  response_metadata?: Record<string, unknown>;
  /** ai: the tools it called. */
  tool_calls?: JournalToolCall[];
  invalid_tool_calls?: Record<string, unknown>[];
  /** ai: the tokens the call used. */
  usage_metadata?: Record<string, unknown> | null;
  /** tool: the call it answers. */
  tool_call_id?: string;
  /** tool: how the call went. */
  status?: "success" | "error";
  /** tool: what the tool returned beside its content. */
  artifact?: unknown;
  branch?: JournalBranchPoint;
  [field: string]: unknown;
}

/** What every item other than a message holds. */
interface JournalNonMessageItem {
  /** `summary-marker-{seq}`, `run-status-{seq}`. */
  id: string;
  seq: number;
  run_id: string;
  created_at: string;
  branch?: JournalBranchPoint;
}

/**
 * Where a compaction happened: after the messages it replaced, before the
 * answer that followed (`JournalSummaryMarker`).
 */
export interface JournalSummaryMarker extends JournalNonMessageItem {
  type: "summary_marker";
  /** Messages removed from the state, earlier summaries included. */
  replaced_count: number | null;
  /** Conversation messages removed: the number to show. */
  condensed_count: number | null;
  /** Messages the compaction kept. */
  preserved_count: number | null;
  summary: string | null;
  /** The id of the summary message put into the state. */
  summary_message_id: string | null;
  /** Every message id the compaction removed (empty when its record named none). */
  replaced_message_ids: string[];
  /** The conversation messages among them: the message items the marker stands for. */
  condensed_message_ids: string[];
}

/** What a paused run waits on. */
export interface JournalInterrupt {
  id: string | null;
  /** What `interrupt()` was given. */
  value: unknown;
}

/** A run that did not simply return: failed, cancelled, or paused at an interrupt (`JournalRunStatus`). */
export interface JournalRunStatus extends JournalNonMessageItem {
  type: "run_status";
  status: "failed" | "cancelled" | "interrupted";
  /** The exception's type; CancelledError for a cancelled run. */
  error_type: string | null;
  /** The error message, or the server's reason for a cancel. */
  message: string | null;
  /** What a paused run waits on (empty unless interrupted). */
  interrupts: JournalInterrupt[];
}

/** An item of a thread's history; `type` tells the kinds apart (`JournalHistoryItem`). */
export type JournalItem = JournalMessageItem | JournalSummaryMarker | JournalRunStatus;

/** A page of a branch's history (`JournalHistoryPage`, `JournalMarkersPage`), its items in ascending seq. */
export interface JournalPage<Item = JournalItem> {
  data: Item[];
  /** More items in the paging direction. */
  has_more: boolean;
  /** `before_seq` of the older page; null at the oldest item. */
  next_before_seq: number | null;
  /** `after_seq` of the newer page: the page's newest seq (the cursor given when it is empty). */
  next_after_seq: number | null;
}

/** A recently journaled thread (`JournalThread`). */
export interface JournalThread {
  thread_id: string;
  last_seq: number;
  event_count: number;
  /** The last activity. */
  updated_at: string;
  /** The first human message, shortened. */
  title: string | null;
  /** The assistant of the first journaled run. */
  assistant_id: string | null;
  message_count: number;
  marker_count: number;
}

/** How a run went (`JournalRunSummary`). */
export interface JournalRunSummary {
  run_id: string;
  /** success, error, cancelled, interrupted, running, or unknown. */
  status: string;
  started_at: string | null;
  ended_at: string | null;
  duration_ms: number | null;
  error: string | null;
  error_type: string | null;
  assistant_id: string | null;
}

/** A journal record, for audit (`JournalRunEvent`). */
export interface JournalRunEvent {
  thread_id: string;
  run_id: string;
  seq: number;
  /** llm.human.input, llm.ai.response, run.start, ... */
  event_type: string;
  /** message, middleware, trace, error, outputs, ... */
  category: string;
  content: unknown;
  metadata: Record<string, unknown>;
  created_at: string;
  source_key?: string;
  user_id?: string;
}

/** A page of a run's records (`JournalRunEventsPage`). */
export interface JournalRunEventsPage {
  data: JournalRunEvent[];
  has_more: boolean;
  next_after_seq: number | null;
}

export const MARKER_TYPE = "summary_marker";
export const RUN_STATUS_TYPE = "run_status";

export function isSummaryMarker(item: JournalItem): item is JournalSummaryMarker {
  return item.type === MARKER_TYPE;
}

export function isRunStatus(item: JournalItem): item is JournalRunStatus {
  return item.type === RUN_STATUS_TYPE;
}

export function isMessageItem(item: JournalItem): item is JournalMessageItem {
  return item.type !== MARKER_TYPE && item.type !== RUN_STATUS_TYPE;
}
