// A conversation held through protocol v2 (`client.threads.stream`), printed as
// every event the client received, in order, as JSON.
//
//     node --experimental-websocket v2_turns.mjs SERVER_URL sse|websocket TURN...

import { Client } from "@langchain/langgraph-sdk";

import { EARLY_SUMMARIZATION, sleep } from "./common.mjs";

const CHANNELS = ["values", "updates", "messages", "tools", "lifecycle", "custom", "tasks", "checkpoints"];
const TERMINAL = new Set(["completed", "failed", "interrupted", "cancelled"]);

function isRootEnd(event) {
  const data = event?.params?.data ?? event?.data;
  const namespace = event?.params?.namespace ?? [];
  return event?.method === "lifecycle" && namespace.length === 0 && TERMINAL.has(data?.event ?? data?.status);
}

async function main() {
  const [url, transport, ...turns] = process.argv.slice(2);
  const client = new Client({ apiUrl: url, apiKey: null, callerOptions: { maxRetries: 0 } });
  const assistant = await client.assistants.create({ graphId: "agent", config: EARLY_SUMMARIZATION });
  const { thread_id: threadId } = await client.threads.create();
  const thread = client.threads.stream(threadId, { assistantId: assistant.assistant_id, transport });
  const events = [];
  const errors = [];
  thread.onEvent((event) => events.push(event));
  thread.onError((error) => errors.push(String(error?.message ?? error)));
  const subscription = await thread.subscribe(CHANNELS);
  const drained = (async () => {
    for await (const _ of subscription) {
      // events are recorded by onEvent
    }
  })();
  const runs = [];
  for (const text of turns) {
    const before = events.length;
    const started = await thread.run.start({ input: { messages: [{ role: "user", content: text }] } });
    runs.push(started?.run_id ?? started?.result?.run_id ?? null);
    for (let i = 0; i < 600 && !events.slice(before).some(isRootEnd); i++) await sleep(50);
  }
  await subscription.unsubscribe();
  await thread.close();
  await Promise.race([drained, sleep(2000)]);
  process.stdout.write(JSON.stringify({ thread_id: threadId, runs, events, errors }) + "\n");
}

main().catch((error) => {
  console.error(error?.stack ?? String(error));
  process.exit(1);
});
