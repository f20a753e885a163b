// useJournalHistory: the journal's history of the thread useStream shows, merged with the live stream.

import { useCallback, useEffect, useMemo, useRef, useState } from "react";

import { JournalClient, type HeaderValue, type JournalClientOptions } from "./client.js";
import {
  compactedMessages,
  lastConversationId,
  mergeRows,
  placeBranchSwitches,
  rowMessages,
  type BranchMetadata,
  type JournalRow,
  type LiveMessage,
  type MessageRow,
  type RunWatch,
  watchRun,
} from "./merge.js";
import { followBranch } from "./sync.js";
import type { JournalItem, JournalSummaryMarker } from "./types.js";

/**
 * What the hook reads of `useStream`'s result. `history` is read only when
 * the stream has it (`fetchStateHistory`); `client` only when the options
 * name no server.
 */
export interface StreamLike<M extends LiveMessage> {
  readonly messages: readonly M[];
  readonly isLoading: boolean;
  readonly isThreadLoading?: boolean;
  readonly history?: ReadonlyArray<{ readonly checkpoint?: { readonly checkpoint_id?: string | null } | null }>;
  readonly client?: unknown;
  getMessagesMetadata?(message: M, index?: number): BranchMetadata | undefined;
}

export interface UseJournalHistoryOptions extends JournalClientOptions {
  /** The thread useStream shows: the `threadId` given to it (null before a new thread's first run). */
  threadId: string | null | undefined;
  /** A client of the journal; without it one is made from the options, or from `stream.client`. */
  client?: JournalClient;
  /** How long to wait, once a run is over, for the journal to hold its last message (default 15000 ms). */
  pollTimeoutMs?: number;
}

/**
 * `idle`: no thread, or nothing said on it yet; `loading`: reading, or
 * waiting for the journal to hold the last message shown; `ready`: it holds
 * it; `lagging`: it did not within `pollTimeoutMs` (the rows show the live
 * messages it lacks); `error`: the journal answered an error (`error`).
 */
export type JournalHistoryStatus = "idle" | "loading" | "ready" | "lagging" | "error";

export interface UseJournalHistoryResult<M> {
  /** The rows to render, oldest first. */
  rows: JournalRow<M>[];
  /** The messages of the rows, in order: read these where a component would read `stream.messages` to lay out the conversation. */
  messages: M[];
  /** The markers among the rows. */
  markers: JournalSummaryMarker[];
  status: JournalHistoryStatus;
  error: Error | null;
  /** The row of a message (by id), if it has one. */
  rowOf: (message: { id?: string | null | undefined }) => MessageRow<M> | undefined;
  /** Read the journal again. */
  refresh: () => void;
}

interface Held {
  threadId: string | null;
  /** The checkpoint the items were read as of (undefined: the current branch). */
  head: string | undefined;
  /** The message the journal was to hold. */
  until: string | undefined;
  /** The `refresh()` count the read answered. */
  tick: number;
  items: JournalItem[];
  status: JournalHistoryStatus;
  error: Error | null;
}

const NOTHING: Held = { threadId: null, head: undefined, until: undefined, tick: 0, items: [], status: "idle", error: null };
const NO_MESSAGES: readonly never[] = [];

/** The server and headers of the SDK client useStream made (its `apiUrl` and default headers, API key included). */
function connectionOf(client: unknown): { apiUrl?: string; headers?: Record<string, HeaderValue> } {
  const threads = (client as { threads?: { apiUrl?: unknown; defaultHeaders?: unknown } } | null | undefined)?.threads;
  const apiUrl = typeof threads?.apiUrl === "string" ? threads.apiUrl : undefined;
  const headers =
    threads?.defaultHeaders && typeof threads.defaultHeaders === "object"
      ? (threads.defaultHeaders as Record<string, HeaderValue>)
      : undefined;
  return { apiUrl, headers };
}

function sameMessages(a: readonly unknown[], b: readonly unknown[]): boolean {
  return a === b || (a.length === b.length && a.every((message, index) => message === b[index]));
}

/** The checkpoint at the end of the branch useStream shows, when it fetches the thread's history. */
function shownHead<M extends LiveMessage>(stream: StreamLike<M>): string | undefined {
  try {
    const history = stream.history;
    return history?.[history.length - 1]?.checkpoint?.checkpoint_id ?? undefined;
  } catch {
    // useStream without `fetchStateHistory` has no history: the current branch is shown.
    return undefined;
  }
}

/**
 * The history of the thread `stream` (useStream's result) shows: the
 * journal's branch -- what compactions removed, with a marker where each
 * happened -- merged with the live messages.
 *
 * It follows the thread (`options.threadId`), the branch shown (with
 * `fetchStateHistory`, the branch of `stream.history`), and the end of each
 * run: once `stream.isLoading` is over it reads the journal until it holds
 * the last message shown, for at most `pollTimeoutMs`. While a run streams,
 * its messages come from the stream; those a compaction removes during the
 * run stay. The server and headers are those of the options, else of
 * `stream.client` (the `apiUrl`, `apiKey` and `defaultHeaders` useStream was
 * given).
 */
export function useJournalHistory<M extends LiveMessage>(
  stream: StreamLike<M>,
  options: UseJournalHistoryOptions,
): UseJournalHistoryResult<M> {
  const threadId = options.threadId ?? null;
  const timeoutMs = options.pollTimeoutMs ?? 15000;
  const live = stream.messages;
  const isLoading = stream.isLoading;
  // What the run in progress did to the live state: the messages a compaction removed stay
  // shown until the journal holds them. Watched while rendering (React renders again at
  // once, so no frame shows them gone).
  const [watched, setWatched] = useState<{ threadId: string | null; watch: RunWatch<M> }>(() => ({
    threadId,
    watch: watchRun<M>(null, live.length ? live : NO_MESSAGES, isLoading),
  }));
  // The live messages as one array while they stay the same messages: useStream gives a
  // new empty array on every render while the state has none, and a stream object an app
  // derives may give a new array each time.
  const liveMessages: readonly M[] = sameMessages(watched.watch.live, live) ? watched.watch.live : live;
  const isThreadLoading = stream.isThreadLoading ?? false;
  const head = shownHead(stream);
  const until = lastConversationId(liveMessages);

  const fromStream = options.apiUrl === undefined ? connectionOf(stream.client) : {};
  const apiUrl = options.apiUrl ?? fromStream.apiUrl;
  const headers = { ...fromStream.headers, ...options.defaultHeaders };
  // The client changes with what it talks to, not with each render's option objects:
  // a `client` or `fetch` written inline must not restart the reads on every render.
  const given = options.client;
  const connection = JSON.stringify(
    given ? [given.apiUrl, given.headers, given.prefix] : [apiUrl, headers, options.apiKey ?? null, options.prefix ?? null],
  );
  const latestFetch = useRef(options.fetch);
  useEffect(() => {
    latestFetch.current = options.fetch;
  });
  const client = useMemo(() => {
    // `given` is this render's: the one whose connection changed.
    if (given) return given;
    const [url, defaultHeaders, apiKey, prefix] = JSON.parse(connection) as [
      string | undefined,
      Record<string, HeaderValue>,
      string | null,
      string | null,
    ];
    const fetcher: typeof fetch = (input, init) => (latestFetch.current ?? globalThis.fetch)(input, init);
    return new JournalClient({ apiUrl: url, defaultHeaders, apiKey, prefix: prefix ?? undefined, fetch: fetcher });
    // eslint-disable-next-line react-hooks/exhaustive-deps -- keyed by what the client talks to
  }, [connection]);

  const [held, setHeld] = useState<Held>(NOTHING);
  const heldRef = useRef<Held>(NOTHING);
  const commit = useCallback((next: Held) => {
    heldRef.current = next;
    setHeld(next);
  }, []);
  const [tick, setTick] = useState(0);
  const refresh = useCallback(() => setTick((count) => count + 1), []);

  let watch = watched.watch;
  if (watched.threadId !== threadId || watch.live !== liveMessages || watch.loading !== isLoading) {
    watch = watchRun(watched.threadId === threadId ? watch : null, liveMessages, isLoading);
    setWatched({ threadId, watch });
  }
  const forgetCompacted = useCallback(
    () =>
      setWatched((current) =>
        current.watch.vanished.length ? { ...current, watch: { ...current.watch, vanished: NO_MESSAGES } } : current,
      ),
    [],
  );

  useEffect(() => {
    if (!threadId || isLoading || isThreadLoading) return;
    const current = heldRef.current;
    const sameThread = current.threadId === threadId;
    if (until === undefined) {
      // Nothing said on the thread yet (or a new one): nothing to read.
      if (!sameThread || current.items.length || current.status !== "idle") {
        commit({ ...NOTHING, threadId, head, tick });
      }
      return;
    }
    if (sameThread && current.status === "ready" && current.head === head && current.until === until && current.tick === tick) {
      return;
    }
    const controller = new AbortController();
    const base = sameThread ? current.items : null;
    commit({ threadId, head, until, tick, items: base ?? [], status: "loading", error: null });
    void followBranch(client, threadId, head, base, until, {
      timeoutMs,
      signal: controller.signal,
      onStep: (step) => {
        const status: JournalHistoryStatus = step.holds ? "ready" : "loading";
        commit({ threadId, head, until, tick, items: step.items, status, error: step.error });
        if (step.holds) forgetCompacted();
      },
    }).then((holds) => {
      if (holds || controller.signal.aborted) return;
      const last = heldRef.current;
      commit({ ...last, status: last.error ? "error" : "lagging" });
    });
    return () => controller.abort();
  }, [client, threadId, head, until, tick, isLoading, isThreadLoading, timeoutMs, commit, forgetCompacted]);

  const items = held.threadId === threadId ? held.items : NO_MESSAGES;
  const compacted = useMemo(() => compactedMessages(watch, items), [watch, items]);
  const merged = useMemo(() => mergeRows(items, liveMessages, compacted), [items, liveMessages, compacted]);
  const messages = useMemo(() => rowMessages(merged), [merged]);
  const markers = useMemo(
    () => merged.flatMap((row) => (row.kind === "marker" ? [row.marker] : [])),
    [merged],
  );
  // useStream's branch metadata follows its history, which this hook does not see change.
  const rows = stream.getMessagesMetadata
    ? placeBranchSwitches(merged, liveMessages, (message, index) => stream.getMessagesMetadata?.(message, index))
    : merged;
  const byId = new Map<string, MessageRow<M>>();
  for (const row of rows) if (row.kind === "message" && row.message.id) byId.set(row.message.id, row);
  const rowOf = (message: { id?: string | null | undefined }) => (message.id ? byId.get(message.id) : undefined);
  const mine = held.threadId === threadId;
  // Between a run's end and the effect that reads the journal, what was read is not yet behind.
  const behind = mine && until !== undefined && !isLoading && (held.until !== until || held.head !== head);
  return {
    rows,
    rowOf,
    messages,
    markers,
    status: threadId === null ? "idle" : mine && !behind ? held.status : "loading",
    error: mine ? held.error : null,
    refresh,
  };
}
