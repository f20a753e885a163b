// A chat app on useStream laid out as agent-chat-ui's: a provider holding the
// stream, message components that read it from context (getMessagesMetadata for
// Regenerate, Edit and the branch switcher, stream.messages for "is this the last
// message"), a new-thread button and the thread id in the URL. The lines marked
// "journal" are what docs/usestream.md adds to such an app.
//
// The server and assistant come from the page's query (?apiUrl=&assistantId=);
// every row carries data attributes the end-to-end test reads.

import { StrictMode, createContext, useContext, useState, type FormEvent, type ReactNode } from "react";
import { createRoot } from "react-dom/client";
import type { Checkpoint, Message } from "@langchain/langgraph-sdk";
import { useStream } from "@langchain/langgraph-sdk/react";
import { JournalNote, JournalProvider, useJournal, useJournalHistory, useJournalRow } from "journal-bridge-react"; // journal

const query = new URLSearchParams(window.location.search);
const apiUrl = query.get("apiUrl") ?? "http://localhost:2024";
const assistantId = query.get("assistantId") ?? "agent";

type State = { messages: Message[] };

/** The thread id in the URL (?threadId=), as agent-chat-ui keeps it. */
function useThreadIdParam(): [string | null, (id: string | null) => void] {
  const [threadId, setState] = useState(() => new URLSearchParams(window.location.search).get("threadId"));
  const setThreadId = (id: string | null) => {
    const url = new URL(window.location.href);
    if (id) url.searchParams.set("threadId", id);
    else url.searchParams.delete("threadId");
    window.history.replaceState(null, "", url);
    setState(id);
  };
  return [threadId, setThreadId];
}

function useChat() {
  const [threadId, setThreadId] = useThreadIdParam();
  const stream = useStream<State>({
    apiUrl,
    assistantId,
    threadId,
    // The branch switcher sees the checkpoints fetched: a turn with a tool call writes 7.
    fetchStateHistory: { limit: 50 },
    defaultHeaders: { "X-Auth-Scheme": "journal-bridge-test" },
    onThreadId: setThreadId,
  });
  const journal = useJournalHistory(stream, { threadId }); // journal
  return { stream, journal, threadId, setThreadId };
}

type Chat = ReturnType<typeof useChat>;
const ChatContext = createContext<Chat | null>(null);

function useChatContext(): Chat {
  const chat = useContext(ChatContext);
  if (!chat) throw new Error("useChatContext must be used within the chat provider");
  return chat;
}

function text(message: Message): string {
  if (typeof message.content === "string") return message.content;
  return message.content.map((block) => ("text" in block && typeof block.text === "string" ? block.text : "")).join("");
}

function BranchSwitcher({ branch, options }: { branch: string | undefined; options: string[] | undefined }) {
  const { stream } = useChatContext();
  if (!branch || !options || options.length < 2) return null;
  const index = options.indexOf(branch);
  return (
    <span className="branches" data-branch={`${index + 1}/${options.length}`}>
      <button className="branch-prev" disabled={index <= 0 || stream.isLoading} onClick={() => stream.setBranch(options[index - 1] ?? branch)}>
        ‹
      </button>
      {index + 1} / {options.length}
      <button
        className="branch-next"
        disabled={index >= options.length - 1 || stream.isLoading}
        onClick={() => stream.setBranch(options[index + 1] ?? branch)}
      >
        ›
      </button>
    </span>
  );
}

function HumanMessage({ message }: { message: Message }) {
  const { stream } = useChatContext();
  const [editing, setEditing] = useState<string | null>(null);
  const { meta, journalOnly } = useJournalRow(stream, message); // journal
  const parentCheckpoint: Checkpoint | null | undefined = meta?.firstSeenState?.parent_checkpoint;
  const submitEdit = (event: FormEvent) => {
    event.preventDefault();
    const edited: Message = { type: "human", content: editing ?? "" };
    setEditing(null);
    stream.submit(
      { messages: [edited] },
      {
        checkpoint: parentCheckpoint,
        streamMode: ["values"],
        optimisticValues: (prev) => {
          const values = meta?.firstSeenState?.values;
          return values ? { ...values, messages: [...(values.messages ?? []), edited] } : prev;
        },
      },
    );
  };
  return (
    <div className="human">
      {editing === null ? <p className="text">{text(message)}</p> : (
        <form className="edit-form" onSubmit={submitEdit}>
          <textarea value={editing} onChange={(event) => setEditing(event.target.value)} />
          <button type="submit">Save</button>
        </form>
      )}
      <BranchSwitcher branch={meta?.branch} options={meta?.branchOptions} />
      {!journalOnly && editing === null && ( // journal
        <button className="edit" disabled={stream.isLoading} onClick={() => setEditing(text(message))}>
          Edit
        </button>
      )}
    </div>
  );
}

function AssistantMessage({ message }: { message: Message }) {
  const { stream } = useChatContext();
  // While a compaction streams, the state may hold no message at all.
  const isLastMessage = stream.messages.at(-1)?.id === message.id; // journal
  const { meta, journalOnly } = useJournalRow(stream, message); // journal
  const parentCheckpoint = meta?.firstSeenState?.parent_checkpoint;
  const regenerate = () => stream.submit(undefined, { checkpoint: parentCheckpoint, streamMode: ["values"] });
  if (message.type === "tool") return <pre className="tool">{text(message)}</pre>;
  const calls = message.type === "ai" ? (message.tool_calls ?? []) : [];
  return (
    <div className="ai" data-last={isLastMessage ? "true" : undefined}>
      {text(message) ? <p className="text">{text(message)}</p> : null}
      {calls.map((call, index) => (
        <code key={call.id ?? index} className="tool-call">
          {call.name}({JSON.stringify(call.args)})
        </code>
      ))}
      <BranchSwitcher branch={meta?.branch} options={meta?.branchOptions} />
      {!journalOnly && ( // journal
        <button className="regenerate" disabled={stream.isLoading} onClick={regenerate}>
          Regenerate
        </button>
      )}
    </div>
  );
}

// What the end-to-end test reads of a row.
function rowAttributes(row: Chat["journal"]["rows"][number]) {
  return { "data-kind": row.kind, "data-key": row.key, "data-journal-only": String(row.journalOnly), "data-seq": row.seq ?? "" };
}

function Thread() {
  const { stream, journal, threadId, setThreadId } = useChatContext();
  const { rows } = useJournal<Message>(); // journal
  const [input, setInput] = useState("");
  const send = (event: FormEvent) => {
    event.preventDefault();
    if (!input.trim() || stream.isLoading) return;
    const message: Message = { id: crypto.randomUUID(), type: "human", content: input };
    stream.submit(
      { messages: [message] },
      {
        streamMode: ["values"],
        optimisticValues: (prev) => ({ ...prev, messages: [...(prev.messages ?? []), message] }),
      },
    );
    setInput("");
  };
  let head = "";
  try {
    head = stream.history.at(-1)?.checkpoint?.checkpoint_id ?? "";
  } catch {
    head = "";
  }
  return (
    <main
      data-thread={threadId ?? ""}
      data-loading={stream.isLoading ? "true" : "false"}
      data-journal={journal.status}
      data-head={head}
    >
      <button className="new-thread" onClick={() => setThreadId(null)}>
        New thread
      </button>
      <ol className="rows">
        {rows.map((row) => { // journal
          if (row.kind !== "message") return <li key={row.key} {...rowAttributes(row)}><JournalNote row={row} /></li>; // journal
          const message = row.message; // journal
          return (
            <li key={message.id ?? row.key} {...rowAttributes(row)} data-type={message.type} data-id={message.id ?? ""}>
              {message.type === "human" ? <HumanMessage message={message} /> : <AssistantMessage message={message} />}
            </li>
          );
        })}
      </ol>
      <form className="composer" onSubmit={send}>
        <textarea value={input} onChange={(event) => setInput(event.target.value)} />
        <button type="submit" disabled={stream.isLoading}>
          Send
        </button>
      </form>
    </main>
  );
}

function ChatProvider({ children }: { children: ReactNode }) {
  const chat = useChat();
  return (
    <ChatContext.Provider value={chat}>
      <JournalProvider value={chat.journal}>{children}</JournalProvider> {/* journal */}
    </ChatContext.Provider>
  );
}

const root = document.getElementById("root");
if (!root) throw new Error("the page has no #root");
createRoot(root).render(
  <StrictMode>
    <ChatProvider>
      <Thread />
    </ChatProvider>
  </StrictMode>,
);
