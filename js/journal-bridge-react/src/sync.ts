// Reading the branch a UI shows, and following the journal until it holds a message.

import { JournalClient, JournalError } from "./client.js";
import { holdsMessage } from "./merge.js";
import type { JournalItem } from "./types.js";

/** Items asked for when bringing a branch up to date: most turns add far fewer. */
const NEWEST = 100;

/**
 * The branch as of checkpoint `head` (the thread's current branch without
 * one), brought up to date from `held`, what was read of the thread before.
 *
 * When the branch still goes through the newest item of `held` (a turn went
 * on from it, a run that forked from the head), one request for its newest
 * items is enough, whatever `branch` says about a fork there. When it does not
 * (a regenerate, an edit, a branch switch), or nothing was held, the whole
 * branch is read. A thread the journal has nothing of yet is an empty branch.
 */
export async function readBranch(
  client: JournalClient,
  threadId: string,
  head: string | undefined,
  held: readonly JournalItem[] | null,
  signal?: AbortSignal,
): Promise<JournalItem[]> {
  const branch = head ? { checkpointId: head } : {};
  try {
    const last = held?.[held.length - 1];
    if (held && last) {
      const page = await client.page(threadId, { limit: NEWEST, ...branch, signal });
      const at = page.data.findIndex((item) => item.seq === last.seq && item.id === last.id);
      if (at >= 0) return held.concat(page.data.slice(at + 1));
      if (!page.has_more) return page.data;
    }
    return (await client.loadHistory(threadId, { ...branch, signal })).items;
  } catch (error) {
    if (error instanceof JournalError && error.status === 404) return [];
    throw error;
  }
}

/** How long to wait before asking again, after `attempt` answers without the message. */
export function pollDelay(attempt: number): number {
  return Math.min(100 * 2 ** attempt, 1000);
}

export function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    signal.addEventListener("abort", done, { once: true });
    function done(): void {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    }
  });
}

export interface FollowStep {
  items: JournalItem[];
  /** The journal holds the message waited for. */
  holds: boolean;
  /** The last error other than "nothing journaled yet", if the last read failed. */
  error: Error | null;
}

/**
 * Read the branch until it holds message `until` (none: once), at most for
 * `timeoutMs`; each read is handed to `onStep`. Returns whether it came to
 * hold it; stops quietly when `signal` aborts.
 */
export async function followBranch(
  client: JournalClient,
  threadId: string,
  head: string | undefined,
  held: readonly JournalItem[] | null,
  until: string | undefined,
  options: { timeoutMs: number; signal: AbortSignal; onStep: (step: FollowStep) => void },
): Promise<boolean> {
  const deadline = Date.now() + options.timeoutMs;
  let base = held;
  for (let attempt = 0; ; attempt += 1) {
    let step: FollowStep;
    try {
      const items = await readBranch(client, threadId, head, base, options.signal);
      step = { items, holds: until === undefined || holdsMessage(items, until), error: null };
    } catch (error) {
      if (options.signal.aborted) return false;
      step = { items: base ? base.slice() : [], holds: false, error: error instanceof Error ? error : new Error(String(error)) };
    }
    if (options.signal.aborted) return false;
    base = step.items;
    options.onStep(step);
    if (step.holds || Date.now() >= deadline) return step.holds;
    await sleep(pollDelay(attempt), options.signal);
    if (options.signal.aborted) return false;
  }
}
