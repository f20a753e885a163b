// A chat UI's thread operations through the JavaScript SDK, as useStream sends
// them: turns streamed with its stream modes, then a regenerate and an edit
// (`submit(values, { checkpoint })`: a run from an earlier checkpoint).
// Prints the thread id and the runs as JSON.
//
//     node branches.mjs SERVER_URL TURN...

import { Client } from "@langchain/langgraph-sdk";

import { EARLY_SUMMARIZATION } from "./common.mjs";

const STREAM_MODE = ["values", "messages-tuple", "updates", "custom"];

async function submit(client, threadId, assistantId, input, checkpoint) {
  let runId = null;
  const stream = client.runs.stream(threadId, assistantId, {
    input,
    streamMode: STREAM_MODE,
    streamResumable: true,
    ...(checkpoint ? { checkpoint } : {}),
  });
  for await (const part of stream) {
    if (part.event === "metadata") runId = part.data.run_id;
  }
  return runId;
}

// The checkpoint a message first appears in, on the current branch, and its parent.
async function firstSeen(client, threadId, matches) {
  const history = await client.threads.getHistory(threadId, { limit: 1000 });
  const byId = new Map(history.map((state) => [state.checkpoint.checkpoint_id, state]));
  const chain = [];
  let head = (await client.threads.getState(threadId)).checkpoint.checkpoint_id;
  while (head) {
    const state = byId.get(head);
    chain.unshift(state);
    head = state.parent_checkpoint?.checkpoint_id;
  }
  const state = chain.find((s) => (s.values.messages ?? []).some(matches));
  // As useStream sends it: the checkpoint without its thread id.
  const { thread_id: _, ...parent } = state.parent_checkpoint;
  return { state, parent };
}

async function main() {
  const [url, ...turns] = process.argv.slice(2);
  const client = new Client({ apiUrl: url, apiKey: null, callerOptions: { maxRetries: 0 } });
  const assistant = await client.assistants.create({ graphId: "agent", config: EARLY_SUMMARIZATION });
  const assistantId = assistant.assistant_id;
  const { thread_id: threadId } = await client.threads.create();
  const runs = [];
  for (const text of turns) {
    runs.push(await submit(client, threadId, assistantId, { messages: [{ type: "human", content: text }] }));
  }
  // Regenerate the last answer: no input, from the checkpoint before it.
  const messages = (await client.threads.getState(threadId)).values.messages;
  const answer = messages[messages.length - 1];
  const regenerateFrom = (await firstSeen(client, threadId, (m) => m.id === answer.id)).parent;
  runs.push(await submit(client, threadId, assistantId, null, regenerateFrom));
  // Edit the second question (compacted away by now): a new one, from the checkpoint before it.
  const editFrom = (await firstSeen(client, threadId, (m) => m.type === "human" && m.content === turns[1])).parent;
  const edited = { messages: [{ type: "human", content: "the second question, edited" }] };
  runs.push(await submit(client, threadId, assistantId, edited, editFrom));
  process.stdout.write(JSON.stringify({ thread_id: threadId, runs }) + "\n");
}

main().catch((error) => {
  console.error(error?.stack ?? String(error));
  process.exit(1);
});
