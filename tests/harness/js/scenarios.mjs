// What a real JavaScript client (@langchain/langgraph-sdk, the SDK `useStream`
// is built on) receives from a LangGraph Server, as a JSON transcript.
//
//     node scenarios.mjs SERVER_URL SCENARIO     # one scenario
//     node scenarios.mjs --list                  # the scenario names
//
// The transcript is everything the client saw, in order: every stream part
// (event, data, SSE id when there is one), every object a call returned, the
// status of every HTTP exchange (with the body of an error), and at the end the
// thread's final state and the message ids of each checkpoint of its history.
// Nothing is normalised here, and nothing but SSE comments (heartbeats) left
// out: tests/harness/transcripts.py does that for both clients' suites before
// comparing two transcripts.

import { Client } from "@langchain/langgraph-sdk";

import { EARLY_SUMMARIZATION, sleep } from "./common.mjs";

const TURNS = [
  "hello there",
  "what is 2+3",
  "weather in Paris?",
  "add 40 and 2",
  "what did I ask first",
];

const human = (text) => ({ messages: [{ role: "user", content: text }] });

class Transcript {
  constructor(url) {
    this.url = url;
    this.steps = [];
    this.current = null;
    this.pending = [];
  }

  // fetch that records each exchange under the step in progress.
  fetch = async (input, init) => {
    const response = await fetch(input, init);
    const url = new URL(typeof input === "string" ? input : input.url);
    const exchange = {
      method: (init?.method ?? "GET").toUpperCase(),
      path: url.pathname + url.search,
      status: response.status,
      content_type: response.headers.get("content-type"),
    };
    if (/\/(commands|stream\/events)$/.test(url.pathname) && typeof init?.body === "string") {
      exchange.request = parseOrText(init.body);
    }
    for (const header of ["location", "content-location"]) {
      const value = response.headers.get(header);
      if (value != null) exchange[header] = value;
    }
    const exchanges = this.current?.http ?? this.orphans();
    exchanges.push(exchange);
    if (response.status >= 400) {
      const text = await response.clone().text();
      exchange.body = parseOrText(text);
    } else if (url.pathname.endsWith("/stream/events") && response.body) {
      // Protocol v2 event streams outlive a step: keep their raw frames as they come.
      const [mine, theirs] = response.body.tee();
      exchange.frames = [];
      // The SDK may replace an event stream before anything arrived on it (timing,
      // with or without the plugin): such a stream showed the client nothing, and
      // is marked so (the comparison leaves it out).
      this.pending.push(readFrames(mine, exchange.frames).then((aborted) => {
        if (aborted && !exchange.frames.length) exchange._unseen = true;
      }));
      return new Response(theirs, { status: response.status, statusText: response.statusText, headers: response.headers });
    }
    return response;
  };

  orphans() {
    this.steps.push({ call: "(outside a step)", http: [] });
    return this.steps.at(-1).http;
  }

  async step(call, args, body) {
    const step = { call, args, http: [] };
    this.steps.push(step);
    this.current = step;
    try {
      const outcome = await body(step);
      if (outcome !== undefined) step.result = outcome;
    } catch (error) {
      step.error = describeError(error);
    } finally {
      this.current = null;
    }
    return step;
  }

  async stream(call, args, generator) {
    return this.step(call, args, async (step) => {
      step.parts = [];
      for await (const part of generator()) {
        const recorded = { event: part.event, data: part.data };
        if (part.id !== undefined) recorded.id = part.id;
        step.parts.push(recorded);
      }
    });
  }
}

// The frames of an SSE body as {event, id, data} (data parsed), comments dropped.
async function readFrames(body, frames) {
  const decoder = new TextDecoder();
  let buffer = "";
  const flush = (block) => {
    const frame = {};
    for (const line of block.split(/\r\n|\n|\r/)) {
      if (!line || line.startsWith(":")) continue;
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
      frame[field] = field === "data" ? parseOrText(value) : value;
    }
    if (Object.keys(frame).length) frames.push(frame);
  };
  try {
    for await (const chunk of body) {
      buffer += decoder.decode(chunk, { stream: true });
      let end;
      while ((end = buffer.search(/\r\n\r\n|\n\n|\r\r/)) >= 0) {
        const separator = buffer.slice(end).match(/^(\r\n\r\n|\n\n|\r\r)/)[0];
        flush(buffer.slice(0, end));
        buffer = buffer.slice(end + separator.length);
      }
    }
  } catch (error) {
    if (error?.name === "AbortError" && !frames.length && !buffer.trim()) return true;
    frames.push({ "(read error)": String(error?.name ?? error) });
  }
  if (buffer.trim()) flush(buffer);
  return false;
}

function parseOrText(text) {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

function describeError(error) {
  const described = { name: error?.constructor?.name ?? typeof error, message: String(error?.message ?? error) };
  if (error?.status !== undefined) described.status = error.status;
  if (error?.cause !== undefined) described.cause = String(error.cause?.message ?? error.cause);
  return described;
}

function runIdOf(parts) {
  const metadata = parts.find((part) => part.event === "metadata");
  return metadata?.data?.run_id;
}

// --- building blocks ----------------------------------------------------------

async function earlyAssistant(t, client) {
  const step = await t.step("assistants.create", { graphId: "agent", config: EARLY_SUMMARIZATION }, () =>
    client.assistants.create({ graphId: "agent", config: EARLY_SUMMARIZATION }),
  );
  return step.result.assistant_id;
}

async function newThread(t, client) {
  const step = await t.step("threads.create", {}, () => client.threads.create());
  return step.result.thread_id;
}

async function finalState(t, client, threadId) {
  await t.step("threads.getState", {}, () => client.threads.getState(threadId));
  await t.step("threads.getHistory", { limit: 100 }, async () => {
    const history = await client.threads.getHistory(threadId, { limit: 100 });
    return history.map((checkpoint) => ({
      checkpoint_id: checkpoint.checkpoint?.checkpoint_id,
      parent_checkpoint_id: checkpoint.parent_checkpoint?.checkpoint_id ?? null,
      step: checkpoint.metadata?.step,
      source: checkpoint.metadata?.source,
      next: checkpoint.next,
      message_ids: (checkpoint.values?.messages ?? []).map((message) => message.id),
    }));
  });
}

// Each run read back, the thread's runs listed, and its final state.
async function readRuns(t, client, threadId, runIds) {
  for (const runId of runIds) {
    await t.step("runs.get", {}, () => client.runs.get(threadId, runId));
  }
  await t.step("runs.list", {}, () => client.runs.list(threadId));
  await finalState(t, client, threadId);
}

// A conversation of TURNS through runs.stream with the given payload options.
function streamConversation(payload, afterEachTurn) {
  return async (t, client) => {
    const assistantId = await earlyAssistant(t, client);
    const threadId = await newThread(t, client);
    for (const text of TURNS) {
      const args = { input: human(text), ...payload };
      const step = await t.stream("runs.stream", args, () => client.runs.stream(threadId, assistantId, args));
      if (afterEachTurn) await afterEachTurn(t, client, threadId, runIdOf(step.parts ?? []));
    }
    await finalState(t, client, threadId);
  };
}

// --- scenarios ----------------------------------------------------------------

const USE_STREAM_MODES = ["values", "updates", "messages-tuple", "custom"];

const SCENARIOS = {
  "stream-values": streamConversation({ streamMode: "values" }),
  "stream-updates": streamConversation({ streamMode: "updates" }),
  "stream-messages-tuple": streamConversation({ streamMode: "messages-tuple" }),
  "stream-values-messages-custom": streamConversation({ streamMode: ["values", "messages-tuple", "custom"] }),
  // Exactly what useStream sends with messages and onCustomEvent, without reconnect storage.
  "stream-usestream-submit": streamConversation({
    streamMode: USE_STREAM_MODES,
    onDisconnect: "cancel",
    streamResumable: false,
  }),
  // useStream with reconnectOnMount: resumable, and a rejoin from the start ("-1") after each turn.
  "stream-usestream-resumable-rejoin": streamConversation(
    { streamMode: USE_STREAM_MODES, onDisconnect: "continue", streamResumable: true },
    async (t, client, threadId, runId) => {
      await t.stream("runs.joinStream", { lastEventId: "-1" }, () =>
        client.runs.joinStream(threadId, runId, { lastEventId: "-1" }),
      );
    },
  ),
  "stream-debug": streamConversation({ streamMode: "debug" }),
  "stream-tasks": streamConversation({ streamMode: "tasks" }),
  "stream-custom": streamConversation({ streamMode: "custom" }),
  "stream-subgraphs": streamConversation({ streamMode: ["values", "updates", "custom"], streamSubgraphs: true }),

  async "runs-wait"(t, client) {
    const assistantId = await earlyAssistant(t, client);
    const threadId = await newThread(t, client);
    for (const text of TURNS) {
      await t.step("runs.wait", { input: human(text) }, () => client.runs.wait(threadId, assistantId, { input: human(text) }));
    }
    await finalState(t, client, threadId);
  },

  async "runs-create-join"(t, client) {
    const assistantId = await earlyAssistant(t, client);
    const threadId = await newThread(t, client);
    for (const text of TURNS) {
      const created = await t.step("runs.create", { input: human(text) }, () =>
        client.runs.create(threadId, assistantId, { input: human(text) }),
      );
      await t.step("runs.join", {}, () => client.runs.join(threadId, created.result.run_id));
    }
    await finalState(t, client, threadId);
  },

  // Joined while the run waits to start, so the live stream holds the whole run.
  async "runs-create-joinstream-live"(t, client) {
    const assistantId = await earlyAssistant(t, client);
    const threadId = await newThread(t, client);
    for (const text of TURNS.slice(0, 4)) {
      const args = { input: human(text), afterSeconds: 1 };
      const created = await t.step("runs.create", args, () => client.runs.create(threadId, assistantId, args));
      await t.stream("runs.joinStream", {}, () => client.runs.joinStream(threadId, created.result.run_id));
    }
    await finalState(t, client, threadId);
  },

  // Joined at once naming fewer modes than the run streams: one mode, then a list.
  async "runs-create-joinstream-modes"(t, client) {
    const assistantId = await earlyAssistant(t, client);
    const threadId = await newThread(t, client);
    const joins = [["values", "values"], [["values", "updates"], "updates"], [["values", "messages-tuple"], ["messages-tuple", "values"]]];
    for (const [index, [created, joined]] of joins.entries()) {
      const args = { input: human(TURNS[index]), afterSeconds: 1, streamMode: created };
      const run = await t.step("runs.create", args, () => client.runs.create(threadId, assistantId, args));
      await t.stream("runs.joinStream", { streamMode: joined }, () =>
        client.runs.joinStream(threadId, run.result.run_id, { streamMode: joined }),
      );
    }
    await finalState(t, client, threadId);
  },

  // A resumable background run, replayed after it ended.
  async "runs-create-joinstream-replay"(t, client) {
    const assistantId = await earlyAssistant(t, client);
    const threadId = await newThread(t, client);
    for (const text of TURNS) {
      const args = { input: human(text), streamMode: ["values", "updates"], streamResumable: true };
      const created = await t.step("runs.create", args, () => client.runs.create(threadId, assistantId, args));
      const runId = created.result.run_id;
      await t.step("runs.join", {}, () => client.runs.join(threadId, runId));
      for (const lastEventId of ["0", "-1"]) {
        await t.stream("runs.joinStream", { lastEventId }, () => client.runs.joinStream(threadId, runId, { lastEventId }));
      }
    }
    await finalState(t, client, threadId);
  },

  async "runs-get-list"(t, client) {
    const assistantId = await earlyAssistant(t, client);
    const threadId = await newThread(t, client);
    const runIds = [];
    for (const text of TURNS.slice(0, 3)) {
      const args = { input: human(text), streamMode: "values" };
      const step = await t.stream("runs.stream", args, () => client.runs.stream(threadId, assistantId, args));
      runIds.push(runIdOf(step.parts ?? []));
    }
    await readRuns(t, client, threadId, runIds);
  },

  async "stateless-stream"(t, client) {
    const assistantId = await earlyAssistant(t, client);
    for (const [text, streamMode] of [["add 2 and 3", "values"], ["weather in Paris?", ["values", "messages-tuple", "custom"]]]) {
      const args = { input: human(text), streamMode };
      await t.stream("runs.stream(null)", args, () => client.runs.stream(null, assistantId, args));
    }
  },

  async "runs-create-batch"(t, client) {
    const payloads = [
      { assistantId: "agent", input: human("add 2 and 3") },
      { assistantId: "agent", input: human("weather in Paris?"), streamMode: ["values", "updates"] },
    ];
    await t.step("runs.createBatch", { payloads }, () => client.runs.createBatch(payloads));
  },

  async "invalid-stream-mode"(t, client) {
    const threadId = await newThread(t, client);
    const args = { input: human("hello there"), streamMode: "bogus" };
    await t.stream("runs.stream", args, () => client.runs.stream(threadId, "agent", args));
    await t.step("runs.create", args, () => client.runs.create(threadId, "agent", args));
    await t.step("runs.wait", args, () => client.runs.wait(threadId, "agent", args));
    await t.stream("runs.stream(null)", args, () => client.runs.stream(null, "agent", args));
    await finalState(t, client, threadId);
  },

  // NUL characters in a run's input and metadata: the server stores them replaced
  // (U+FFFD) and echoes them in run objects, streamed values and the state.
  async "nul-thread-runs"(t, client) {
    const assistantId = await earlyAssistant(t, client);
    const threadId = await newThread(t, client);
    const runIds = [];
    const created = await t.step("runs.create", NUL_PAYLOADS[0], () =>
      client.runs.create(threadId, assistantId, NUL_PAYLOADS[0]),
    );
    runIds.push(created.result?.run_id);
    await t.step("runs.join", {}, () => client.runs.join(threadId, created.result.run_id));
    const resumable = await t.step("runs.create", NUL_PAYLOADS[1], () =>
      client.runs.create(threadId, assistantId, NUL_PAYLOADS[1]),
    );
    runIds.push(resumable.result?.run_id);
    await t.step("runs.join", {}, () => client.runs.join(threadId, resumable.result.run_id));
    await t.stream("runs.joinStream", { lastEventId: "-1" }, () =>
      client.runs.joinStream(threadId, resumable.result.run_id, { lastEventId: "-1" }),
    );
    await t.step("runs.wait", NUL_PAYLOADS[2], () => client.runs.wait(threadId, assistantId, NUL_PAYLOADS[2]));
    for (const args of NUL_PAYLOADS.slice(3)) {
      const step = await t.stream("runs.stream", args, () => client.runs.stream(threadId, assistantId, args));
      runIds.push(runIdOf(step.parts ?? []));
    }
    await readRuns(t, client, threadId, runIds);
  },

  async "nul-stateless-runs"(t, client) {
    for (const args of NUL_PAYLOADS.slice(3)) {
      await t.stream("runs.stream(null)", args, () => client.runs.stream(null, "agent", args));
    }
    await t.step("runs.wait(null)", NUL_PAYLOADS[2], () => client.runs.wait(null, "agent", NUL_PAYLOADS[2]));
    for (const args of NUL_PAYLOADS.slice(0, 2)) {
      await t.step("runs.create(null)", args, () => client.runs.create(null, "agent", args));
    }
    const payloads = NUL_PAYLOADS.slice(0, 3).map((args) => ({ assistantId: "agent", ...args }));
    await t.step("runs.createBatch", { payloads }, () => client.runs.createBatch(payloads));
  },

  // Protocol v2: POST /threads/{id}/commands and the thread's SSE event stream,
  // subscribed to every channel so the transcript holds every event of each run.
  async "threads-stream-v2"(t, client) {
    const assistantId = await earlyAssistant(t, client);
    const threadId = await newThread(t, client);
    const thread = client.threads.stream(threadId, { assistantId, fetch: t.fetch });
    const events = [];
    thread.onEvent((event) => events.push(event));
    const errors = [];
    thread.onError((error) => errors.push(describeError(error)));
    let subscription;
    await t.step("thread.subscribe", { channels: V2_CHANNELS }, async () => {
      subscription = await thread.subscribe(V2_CHANNELS);
    });
    const drained = (async () => {
      for await (const _ of subscription ?? []) {
        // The raw frames are recorded by the fetch of the event stream.
      }
    })();
    for (const text of TURNS.slice(0, 4)) {
      await t.step("thread.run.start", { input: human(text) }, async (step) => {
        const before = events.length;
        step.started = await thread.run.start({ input: human(text) });
        step.terminal = await waitForTerminalLifecycle(events, before);
        step.events = events.slice(before);
        step.output = await thread.output;
      });
    }
    await t.step("thread.close", {}, async () => {
      await subscription?.unsubscribe();
      await thread.close();
      await drained;
    });
    if (errors.length) t.steps.push({ call: "thread.onError", errors });
    await finalState(t, client, threadId);
  },
};

// Runs whose input content and metadata hold NUL characters, in the ways a client starts one.
const NUL_METADATA = { note: "\u0000", "key\u0000": ["a\u0000b"] };
const nulInput = (text) => human(`${text}\u0000 and\u0000`);
const NUL_PAYLOADS = [
  { input: nulInput("hello there"), metadata: NUL_METADATA },
  { input: nulInput("what is 2+3"), metadata: NUL_METADATA, streamMode: ["values", "updates"], streamResumable: true },
  { input: nulInput("weather in Paris?"), metadata: NUL_METADATA },
  { input: nulInput("add 40 and 2"), metadata: NUL_METADATA, streamMode: ["values", "messages-tuple", "custom"] },
  { input: human("what did I ask first"), metadata: NUL_METADATA, streamMode: "updates" },
];

const V2_CHANNELS = ["values", "updates", "messages", "tools", "lifecycle", "custom", "tasks", "checkpoints"];

// The v2 stream ends a run with a root lifecycle event; wait for it (bounded).
async function waitForTerminalLifecycle(events, from) {
  const terminal = new Set(["completed", "failed", "interrupted", "cancelled"]);
  for (let i = 0; i < 200; i++) {
    const done = events.slice(from).some((event) => {
      const data = event?.params?.data ?? event?.data;
      const namespace = event?.params?.namespace ?? [];
      return event?.method === "lifecycle" && namespace.length === 0 && terminal.has(data?.event ?? data?.status);
    });
    if (done) return true;
    await sleep(50);
  }
  return false;
}

async function main() {
  const [url, name] = process.argv.slice(2);
  if (url === "--list") {
    console.log(Object.keys(SCENARIOS).join("\n"));
    return;
  }
  const scenario = SCENARIOS[name];
  if (!url || !scenario) {
    console.error(`usage: node scenarios.mjs SERVER_URL (${Object.keys(SCENARIOS).join(" | ")})`);
    process.exit(2);
  }
  const t = new Transcript(url);
  const client = new Client({ apiUrl: url, apiKey: null, callerOptions: { maxRetries: 0, fetch: t.fetch } });
  await scenario(t, client);
  await Promise.race([Promise.all(t.pending), sleep(2000)]);
  process.stdout.write(JSON.stringify({ scenario: name, steps: t.steps }, null, 1) + "\n");
}

main().catch((error) => {
  console.error(error?.stack ?? String(error));
  process.exit(1);
});
