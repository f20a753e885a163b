// The client of the journal's routes (GET /journal/...), for browsers and Node 18+.

import type {
  JournalItem,
  JournalPage,
  JournalRunEventsPage,
  JournalRunSummary,
  JournalSummaryMarker,
  JournalThread,
} from "./types.js";

/** A header's value; null and undefined leave the header out, as in the SDK's `defaultHeaders`. */
export type HeaderValue = string | null | undefined;

/**
 * Where the journal is and what to send: the options of `useStream` and of
 * `@langchain/langgraph-sdk`'s `new Client(...)`, so one object can be given
 * to both.
 */
export interface JournalClientOptions {
  /** The server (default: the page's origin). */
  apiUrl?: string;
  /** Sent as `x-api-key`. */
  apiKey?: string | null;
  /** Sent with every request (`X-Auth-Scheme`, `Authorization`, ...). */
  defaultHeaders?: Record<string, HeaderValue>;
  /** Where the journal's routes live (default `/journal`: `JOURNAL_BRIDGE_ROUTE_PREFIX`). */
  prefix?: string;
  /** A fetch implementation (default: the global one). */
  fetch?: typeof fetch;
}

/** Which branch to read: the one ending with a run, or the one as of a checkpoint; neither: the current one. */
export interface BranchOptions {
  runId?: string;
  checkpointId?: string;
}

export interface PageOptions extends BranchOptions {
  /** Items per page, at most 500 (default 50). */
  limit?: number;
  /** The page of items older than this seq. */
  beforeSeq?: number;
  /** The page of items newer than this seq. */
  afterSeq?: number;
  signal?: AbortSignal;
}

export interface HistoryOptions extends BranchOptions {
  /** Items per request (default 500). */
  pageSize?: number;
  /** Only what came after this seq (default: from the start). */
  afterSeq?: number;
  signal?: AbortSignal;
}

/** A whole branch: its items oldest first, and the cursor to poll from. */
export interface JournalHistory {
  items: JournalItem[];
  /** The seq of the newest item; the `afterSeq` given when nothing came. */
  lastSeq: number;
}

/** An error answer of the journal: `status` is its HTTP status, `detail` its sentence. */
export class JournalError extends Error {
  readonly status: number;
  readonly detail: string;
  readonly url: string;

  constructor(status: number, detail: string, url: string) {
    super(`${status}: ${detail}`);
    this.name = "JournalError";
    this.status = status;
    this.detail = detail;
    this.url = url;
  }
}

const MAX_PAGE = 500;

function defaultOrigin(): string {
  const location = (globalThis as { location?: { origin?: string } }).location;
  return location?.origin && location.origin !== "null" ? location.origin : "http://localhost:2024";
}

type Params = Record<string, string | number | undefined>;

export class JournalClient {
  readonly apiUrl: string;
  readonly prefix: string;
  readonly headers: Readonly<Record<string, string>>;
  private readonly fetcher: typeof fetch;

  constructor(options: JournalClientOptions = {}) {
    this.apiUrl = (options.apiUrl || defaultOrigin()).replace(/\/+$/, "");
    const prefix = (options.prefix ?? "/journal").replace(/^\/+|\/+$/g, "");
    this.prefix = prefix ? `/${prefix}` : "";
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(options.defaultHeaders ?? {})) {
      if (typeof value === "string") headers[name] = value;
    }
    if (options.apiKey) headers["x-api-key"] = options.apiKey;
    this.headers = headers;
    const given = options.fetch;
    this.fetcher = given ? (input, init) => given(input, init) : (input, init) => globalThis.fetch(input, init);
  }

  private async get<T>(path: string, params: Params, signal?: AbortSignal): Promise<T> {
    const url = new URL(this.apiUrl + this.prefix + path);
    for (const [name, value] of Object.entries(params)) {
      if (value !== undefined) url.searchParams.append(name, String(value));
    }
    const response = await this.fetcher(url.toString(), {
      headers: { Accept: "application/json", ...this.headers },
      signal,
    });
    let body: unknown = null;
    try {
      body = await response.json();
    } catch {
      body = null;
    }
    if (!response.ok) {
      const detail = (body as { detail?: unknown } | null)?.detail;
      throw new JournalError(response.status, typeof detail === "string" ? detail : response.statusText, url.toString());
    }
    return body as T;
  }

  private thread(threadId: string): string {
    return `/threads/${encodeURIComponent(threadId)}`;
  }

  /** One page of a branch's history. Give at most one cursor and at most one of `runId` and `checkpointId`. */
  page(threadId: string, options: PageOptions = {}): Promise<JournalPage> {
    const { limit = 50, beforeSeq, afterSeq, runId, checkpointId, signal } = options;
    return this.get(
      this.thread(threadId) + "/messages",
      { limit, before_seq: beforeSeq, after_seq: afterSeq, run_id: runId, checkpoint_id: checkpointId },
      signal,
    );
  }

  /** Every item of the branch after `afterSeq`, oldest first, a page at a time. */
  async *iterHistory(threadId: string, options: HistoryOptions = {}): AsyncGenerator<JournalItem> {
    const { pageSize = MAX_PAGE, runId, checkpointId, signal } = options;
    let cursor = options.afterSeq ?? 0;
    for (;;) {
      const page = await this.page(threadId, { limit: pageSize, afterSeq: cursor, runId, checkpointId, signal });
      yield* page.data;
      if (!page.has_more || page.next_after_seq === null) return;
      cursor = page.next_after_seq;
    }
  }

  /** The whole branch (or what came after `afterSeq`). */
  async loadHistory(threadId: string, options: HistoryOptions = {}): Promise<JournalHistory> {
    const items: JournalItem[] = [];
    for await (const item of this.iterHistory(threadId, options)) items.push(item);
    const last = items[items.length - 1];
    return { items, lastSeq: last ? last.seq : (options.afterSeq ?? 0) };
  }

  /** The summary markers of a branch, oldest first. */
  async markers(threadId: string, options: BranchOptions & { signal?: AbortSignal } = {}): Promise<JournalSummaryMarker[]> {
    const found: JournalSummaryMarker[] = [];
    let cursor = 0;
    for (;;) {
      const page = await this.get<JournalPage<JournalSummaryMarker>>(
        this.thread(threadId) + "/markers",
        { limit: MAX_PAGE, after_seq: cursor, run_id: options.runId, checkpoint_id: options.checkpointId },
        options.signal,
      );
      found.push(...page.data);
      if (!page.has_more || page.next_after_seq === null) return found;
      cursor = page.next_after_seq;
    }
  }

  /** A run's raw records, for audit. */
  runEvents(
    threadId: string,
    runId: string,
    options: { eventTypes?: string[]; afterSeq?: number; limit?: number; signal?: AbortSignal } = {},
  ): Promise<JournalRunEventsPage> {
    return this.get(
      `${this.thread(threadId)}/runs/${encodeURIComponent(runId)}/events`,
      { event_types: options.eventTypes?.join(","), after_seq: options.afterSeq, limit: options.limit ?? MAX_PAGE },
      options.signal,
    );
  }

  /** Recently journaled threads; `q` keeps those whose messages contain the text. */
  async threads(options: { limit?: number; q?: string; signal?: AbortSignal } = {}): Promise<JournalThread[]> {
    const body = await this.get<{ data: JournalThread[] }>("/threads", { limit: options.limit ?? 50, q: options.q }, options.signal);
    return body.data;
  }

  /** How each run asked for went (at most 100), in the order asked. */
  async runs(threadId: string, runIds: string[], options: { signal?: AbortSignal } = {}): Promise<JournalRunSummary[]> {
    const body = await this.get<{ data: JournalRunSummary[] }>(
      this.thread(threadId) + "/runs",
      { run_ids: runIds.join(",") },
      options.signal,
    );
    return body.data;
  }
}
