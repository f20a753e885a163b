// A conversation held with a real harness graph the way useStream holds it
// (`client.runs.stream` with `messages-tuple` and `values`), printed as JSON:
// the thread, and every message id of every state the client received, in the
// order first seen (summaries a harness keeps in the state left out).
//
//     node harness_turns.mjs SERVER_URL GRAPH TURN...

import { Client } from "@langchain/langgraph-sdk";

const LANGMEM_SUMMARY = "Summary of the conversation so far:";

function isStateSummary(message) {
  if (message?.additional_kwargs?.lc_source === "summarization" || message?.name === "summary") return true;
  return message?.type === "system" && typeof message.content === "string" && message.content.startsWith(LANGMEM_SUMMARY);
}

async function main() {
  const [url, graph, ...turns] = process.argv.slice(2);
  const client = new Client({ apiUrl: url, apiKey: null, callerOptions: { maxRetries: 0 } });
  const { thread_id: threadId } = await client.threads.create();
  const ids = [];
  const seen = new Set();
  let states = 0;
  for (const text of turns) {
    const stream = client.runs.stream(threadId, graph, {
      input: { messages: [{ role: "user", content: text }] },
      streamMode: ["messages-tuple", "values"],
    });
    for await (const part of stream) {
      if (part.event === "error") throw new Error(`the run failed: ${JSON.stringify(part.data)}`);
      if (part.event !== "values") continue;
      states += 1;
      for (const message of part.data?.messages ?? []) {
        if (!message?.id || isStateSummary(message) || !["human", "ai", "tool"].includes(message.type)) continue;
        if (!seen.has(message.id)) {
          seen.add(message.id);
          ids.push(message.id);
        }
      }
    }
  }
  process.stdout.write(JSON.stringify({ thread_id: threadId, ids, states }));
}

main().catch((error) => {
  process.stderr.write(String(error?.stack ?? error));
  process.exit(1);
});
