// journal-bridge history for browser apps: an ES module, no build step.
//
//   import { JournalClient, mergeHistory } from "http://server:2024/journal/static/history.js";
//   const journal = new JournalClient({ apiUrl: "http://server:2024" });
//   const { items } = await journal.loadHistory(threadId);     // messages + summary markers
//   const shown = mergeHistory(items, stream.messages);         // + the live conversation
//
// The options follow @langchain/langgraph-sdk's `new Client({ apiUrl, apiKey,
// defaultHeaders })`: the same URL, the API key sent as `x-api-key`, extra
// headers on every request. Items are what `GET /journal/threads/{id}/messages`
// returns: LangChain message dicts plus `seq`, `run_id`, `created_at`, and
// `{type: "summary_marker", ...}` where a compaction happened.
//
// Branches: every read takes `runId` (the branch that ends with that run) or
// `checkpointId` (the branch as of that checkpoint: what useStream's branch
// switcher shows); without either, the thread's current branch. The first item
// after a fork carries `branch: {index, count, alternatives}`.

export const MARKER_TYPE = "summary_marker";
const MAX_PAGE = 500;

export class JournalError extends Error {
  constructor(status, detail, url) {
    super(`${status}: ${detail}`);
    this.name = "JournalError";
    this.status = status;
    this.detail = detail;
    this.url = url;
  }
}

export class JournalClient {
  /**
   * @param {object} [options]
   * @param {string} [options.apiUrl] the server (default: this page's origin)
   * @param {string} [options.apiKey] sent as `x-api-key`
   * @param {Record<string,string>} [options.defaultHeaders] sent with every request
   * @param {string} [options.prefix] where the journal routes live (default `/journal`)
   * @param {typeof fetch} [options.fetch] a fetch implementation (default: the global one)
   */
  constructor(options = {}) {
    const origin = typeof window !== "undefined" ? window.location.origin : "http://localhost:8123";
    this.apiUrl = String(options.apiUrl || origin).replace(/\/+$/, "");
    this.prefix = "/" + String(options.prefix ?? "/journal").replace(/^\/+|\/+$/g, "");
    if (this.prefix === "/") this.prefix = "";
    this.headers = { ...(options.defaultHeaders || {}) };
    if (options.apiKey) this.headers["x-api-key"] = options.apiKey;
    this._fetch = options.fetch || ((...args) => globalThis.fetch(...args));
  }

  async _get(path, params = {}, signal) {
    const url = new URL(this.apiUrl + this.prefix + path);
    for (const [name, value] of Object.entries(params)) {
      if (value === undefined || value === null) continue;
      for (const one of Array.isArray(value) ? value : [value]) url.searchParams.append(name, String(one));
    }
    const response = await this._fetch(url.toString(), {
      headers: { Accept: "application/json", ...this.headers },
      signal,
    });
    let body = null;
    try { body = await response.json(); } catch (_) { body = null; }
    if (!response.ok) {
      throw new JournalError(response.status, (body && body.detail) || response.statusText, url.toString());
    }
    return body;
  }

  _thread(threadId) {
    return "/threads/" + encodeURIComponent(threadId);
  }

  /**
   * One page: `{data, has_more, next_before_seq, next_after_seq}`. Give at most
   * one cursor, and at most one of `runId` and `checkpointId`.
   */
  page(threadId, { limit = 50, beforeSeq, afterSeq, runId, checkpointId, signal } = {}) {
    return this._get(this._thread(threadId) + "/messages",
      { limit, before_seq: beforeSeq, after_seq: afterSeq, run_id: runId, checkpoint_id: checkpointId }, signal);
  }

  /** Every item after `afterSeq` (default: from the start), oldest first, a page at a time. */
  async *iterHistory(threadId, { pageSize = MAX_PAGE, afterSeq = 0, runId, checkpointId, signal } = {}) {
    let cursor = afterSeq;
    for (;;) {
      const page = await this.page(threadId, { limit: pageSize, afterSeq: cursor, runId, checkpointId, signal });
      yield* page.data;
      if (!page.has_more) return;
      cursor = page.next_after_seq;
    }
  }

  /**
   * The whole history: `{items, markers, lastSeq}`. `lastSeq` is the cursor
   * for `poll` (the seq of the newest item; `afterSeq` when nothing came).
   */
  async loadHistory(threadId, { pageSize = MAX_PAGE, afterSeq = 0, runId, checkpointId, signal } = {}) {
    const items = [];
    for await (const item of this.iterHistory(threadId, { pageSize, afterSeq, runId, checkpointId, signal })) {
      items.push(item);
    }
    return {
      items,
      markers: items.filter((item) => item.type === MARKER_TYPE),
      lastSeq: items.length ? items[items.length - 1].seq : afterSeq,
    };
  }

  /** What was journaled after `afterSeq`: the same shape as `loadHistory`. */
  poll(threadId, afterSeq, options = {}) {
    return this.loadHistory(threadId, { ...options, afterSeq });
  }

  /**
   * `history` (what `loadHistory` returned) brought up to date: what was
   * journaled since, or the whole branch again when a fork since replaced
   * items `history` holds (a regenerate or an edit: another version at the
   * fork began at or before `history.lastSeq`). A run that went on from the
   * head -- useStream sends some turns so, and the journal records a fork,
   * `branch` 1/1 -- only adds.
   */
  async refresh(threadId, history, options = {}) {
    const more = await this.poll(threadId, history.lastSeq, options);
    const replaced = more.items.some((item) => item.branch && item.branch.alternatives.some(
      (other) => other.seq !== null && other.seq !== item.seq && other.seq <= history.lastSeq));
    if (replaced) return this.loadHistory(threadId, options);
    const items = history.items.concat(more.items);
    return { items, markers: items.filter((item) => item.type === MARKER_TYPE), lastSeq: more.lastSeq };
  }

  /** The newest `limit` items, then older pages on demand with `page(..., {beforeSeq})`. */
  newest(threadId, { limit = 50, runId, checkpointId, signal } = {}) {
    return this.page(threadId, { limit, runId, checkpointId, signal });
  }

  /** The summary markers only, oldest first. */
  async markers(threadId, { runId, checkpointId, signal } = {}) {
    const found = [];
    let cursor = 0;
    for (;;) {
      const page = await this._get(this._thread(threadId) + "/markers",
        { limit: MAX_PAGE, after_seq: cursor, run_id: runId, checkpoint_id: checkpointId }, signal);
      found.push(...page.data);
      if (!page.has_more) return found;
      cursor = page.next_after_seq;
    }
  }

  /** A run's raw records: `{data, has_more, next_after_seq}`. */
  runEvents(threadId, runId, { eventTypes, afterSeq, limit = MAX_PAGE, signal } = {}) {
    return this._get(this._thread(threadId) + "/runs/" + encodeURIComponent(runId) + "/events",
      { event_types: eventTypes && eventTypes.join(","), after_seq: afterSeq, limit }, signal);
  }

  /** Recently journaled threads with title and counts; `q` searches their messages. */
  async threads({ limit = 50, q, signal } = {}) {
    return (await this._get("/threads", { limit, q }, signal)).data;
  }

  /** Status, start, end, duration and error of each run asked for. */
  async runs(threadId, runIds, { signal } = {}) {
    const body = await this._get(this._thread(threadId) + "/runs", { run_ids: runIds.join(",") }, signal);
    return body.data;
  }
}

function messageType(message) {
  // useStream / the JS SDK give `type`; LangChain JS message classes `_getType()`.
  if (message && typeof message.type === "string") return message.type;
  if (message && typeof message._getType === "function") return message._getType();
  return undefined;
}

/** Whether a live message is the summary a compaction left in the state. */
export function isSummaryMessage(message, summaryIds = new Set()) {
  if (!message) return false;
  if (message.id && summaryIds.has(message.id)) return true;
  const extra = message.additional_kwargs || message.additionalKwargs || {};
  return extra.lc_source === "summarization";
}

/**
 * Every live message seen so far: `previous` with `next` (the latest `values`
 * of the stream) folded in, in order of first appearance; a message seen
 * again (same id) takes its newer form. A compaction during the live run
 * removes messages from the state -- they stay here until the journal, polled
 * after the run, holds them.
 */
export function accumulateMessages(previous, next) {
  const byId = new Map();
  const order = [];
  for (const message of [...previous, ...next]) {
    const key = message && message.id ? message.id : message;
    if (!byId.has(key)) order.push(key);
    byId.set(key, message);
  }
  return order.map((key) => byId.get(key));
}

/**
 * The conversation to show: the journal's items (older messages and the
 * summary markers, oldest first), then the live messages it does not hold yet.
 *
 * A live message the journal already holds (same id) is shown once, from the
 * journal; the summary message a compaction put into the state is left out --
 * its marker stands where it happened. Live messages keep their own order and
 * objects, so an app renders them as before; items from the journal have a
 * `seq`, live-only ones do not.
 */
export function mergeHistory(journalItems, liveMessages = []) {
  const known = new Set();
  const summaryIds = new Set();
  for (const item of journalItems) {
    if (item.type === MARKER_TYPE) {
      if (item.summary_message_id) summaryIds.add(item.summary_message_id);
    } else if (item.id) {
      known.add(item.id);
    }
  }
  const merged = journalItems.slice();
  for (const message of liveMessages) {
    if (isSummaryMessage(message, summaryIds)) continue;
    if (message && message.id && known.has(message.id)) continue;
    if (messageType(message) === "remove") continue;
    merged.push(message);
  }
  return merged;
}
