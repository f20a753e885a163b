// The rows mergeRows makes of a journal branch and useStream's live messages, in the
// situations a chat UI meets: a compacted state, a run streaming, a regenerate, an
// edit and a branch switch before the journal was read again, a compaction during a run.

import assert from "node:assert/strict";
import { test } from "node:test";

// What the built package exports, as an app imports it.
import * as journal from "../dist/index.js";

let seq = 0;
const at = (run, fields) => ({ ...fields, seq: ++seq, run_id: run, created_at: "2026-01-01T00:00:00Z" });
const human = (id, run) => at(run, { type: "human", id, content: id });
const ai = (id, run) => at(run, { type: "ai", id, content: id });
const marker = (run, condensed, summaryId) =>
  at(run, {
    type: "summary_marker",
    id: `summary-marker-${seq + 1}`,
    replaced_count: condensed,
    condensed_count: condensed,
    preserved_count: 2,
    summary: "what was said",
    summary_message_id: summaryId,
    replaced_message_ids: [],
    condensed_message_ids: [],
  });
const failed = (run) =>
  at(run, { type: "run_status", id: `run-status-${seq + 1}`, status: "failed", error_type: "ToolFailure", message: "no", interrupts: [] });

// What useStream holds: plain message dicts without the journal's fields.
const live = (id, type = "ai") => ({ type, id, content: `${id} (live)` });
const summary = (id) => ({ type: "human", id, content: "summary", additional_kwargs: { lc_source: "summarization" } });

const shape = (rows) =>
  rows.map((row) =>
    row.kind === "message"
      ? `${row.message.id}${row.journalOnly ? "*" : ""}${row.seq === null ? "+" : ""}`
      : row.kind === "marker"
        ? "M"
        : "S",
  );

// A thread compacted once: q1 r1 q2 r2 condensed, the state keeps r2 q3 r3.
function compactedThread() {
  const items = [
    human("q1", "R1"), ai("r1", "R1"), human("q2", "R2"), ai("r2", "R2"),
    human("q3", "R3"), marker("R3", 3, "sum1"), ai("r3", "R3"),
  ];
  return { items, state: [summary("sum1"), live("r2"), live("q3", "human"), live("r3")] };
}

test("the journal alone: every row is journal-only", () => {
  const { items } = compactedThread();
  assert.deepEqual(shape(journal.mergeRows(items, [])), ["q1*", "r1*", "q2*", "r2*", "q3*", "M", "r3*"]);
});

test("a compacted state: the journal's older messages, the marker at its place, the summary never shown", () => {
  const { items, state } = compactedThread();
  const rows = journal.mergeRows(items, state);
  assert.deepEqual(shape(rows), ["q1*", "r1*", "q2*", "r2", "q3", "M", "r3"]);
  // A message the state holds is useStream's own object, with its journal place.
  const r3 = rows.find((row) => row.key === "r3");
  assert.equal(r3.message, state[3]);
  assert.equal(r3.seq, items[6].seq);
  assert.equal(journal.markerLabel(rows[5].marker), "3 messages condensed");
});

test("a run streaming: live messages the journal does not hold yet follow at the end", () => {
  const { items, state } = compactedThread();
  const streaming = [...state, live("q4", "human"), live("r4")];
  assert.deepEqual(shape(journal.mergeRows(items, streaming)), ["q1*", "r1*", "q2*", "r2", "q3", "M", "r3", "q4+", "r4+"]);
});

test("a new thread's first run: no journal yet, the live messages only", () => {
  assert.deepEqual(shape(journal.mergeRows([], [live("q1", "human"), live("r1")])), ["q1+", "r1+"]);
});

test("a regenerate before the journal was read again: the old answer is not shown", () => {
  const items = [human("q1", "R1"), ai("r1", "R1"), human("q2", "R2"), ai("r2-old", "R2")];
  const state = [live("q1", "human"), live("r1"), live("q2", "human"), live("r2-new")];
  assert.deepEqual(shape(journal.mergeRows(items, state)), ["q1", "r1", "q2", "r2-new+"]);
});

test("an edit: the old question, its answer and its run's marker give way to the new question", () => {
  const items = [human("q1", "R1"), ai("r1", "R1"), human("q2", "R2"), marker("R2", 2, "sum"), ai("r2", "R2")];
  const state = [live("q1", "human"), live("r1"), live("q2-edited", "human")];
  assert.deepEqual(shape(journal.mergeRows(items, state)), ["q1", "r1", "q2-edited+"]);
});

test("a branch switch: the state's branch decides, the other branch's answer leaves", () => {
  const items = [human("q1", "R1"), ai("r1", "R1"), human("q2", "R2"), ai("r2-new", "R3")];
  const state = [live("q1", "human"), live("r1"), live("q2", "human"), live("r2-old")];
  assert.deepEqual(shape(journal.mergeRows(items, state)), ["q1", "r1", "q2", "r2-old+"]);
});

test("a run that failed keeps its status after its question", () => {
  const items = [human("q1", "R1"), ai("r1", "R1"), human("q2", "R2"), failed("R2")];
  const rows = journal.mergeRows(items, [live("q1", "human"), live("r1"), live("q2", "human")]);
  assert.deepEqual(shape(rows), ["q1", "r1", "q2", "S"]);
  assert.equal(journal.statusLabel(rows[3].status), "Run failed: ToolFailure");
});

// The live states a run passes through, rendered one after another.
function watched(states, start = states[0]) {
  let watch = journal.watchRun(null, start, false);
  for (const state of states) watch = journal.watchRun(watch, state, true);
  return watch;
}

test("a compaction during the run: what it removed stays, in its place, until the journal holds it", () => {
  const items = [human("q1", "R1"), ai("r1", "R1")];
  const before = [live("q1", "human"), live("r1")];
  const asked = [...before, live("q2", "human"), live("call"), live("tool", "tool")];
  // The state passes through an empty list before the summary comes.
  const after = [summary("sum2"), live("call"), live("tool", "tool")];
  const watch = watched([asked, [], [summary("sum2")], after], before);
  // Already while the state is empty, before the summary came.
  const empty = watched([asked, []], before);
  assert.deepEqual(journal.compactedMessages(empty, items).map((message) => message.id), ["q2", "call", "tool"]);
  const kept = journal.compactedMessages(journal.watchRun(watch, after, false), items);
  assert.deepEqual(kept.map((message) => message.id), ["q2", "call", "tool"]);
  assert.deepEqual(shape(journal.mergeRows(items, after, kept)), ["q1*", "r1*", "q2+", "call+", "tool+"]);
  // Once the journal holds them, they are its rows.
  const journaled = [...items, human("q2", "R2"), ai("call", "R2"), at("R2", { type: "tool", id: "tool", content: "5" }), marker("R2", 3, "sum2")];
  assert.deepEqual(journal.compactedMessages(watch, journaled), []);
  assert.deepEqual(shape(journal.mergeRows(journaled, after, journal.compactedMessages(watch, journaled))), ["q1*", "r1*", "q2*", "call", "tool", "M"]);
});

test("messages that leave without a new summary are no compaction: a regenerate's old answer goes", () => {
  const before = [summary("sum1"), live("q2", "human"), live("r2-old")];
  const watch = watched([[summary("sum1"), live("q2", "human")], [summary("sum1"), live("q2", "human"), live("r2-new")]], before);
  assert.deepEqual(watch.vanished.map((message) => message.id), ["r2-old"]);
  // The journal holds the old answer: it is not kept, not even while the run streams.
  assert.deepEqual(journal.compactedMessages(watch, [human("q2", "R2"), ai("r2-old", "R2")]), []);
  // A message the journal lacks that left without a summary is kept only while the run streams.
  assert.deepEqual(journal.compactedMessages(watch, []).map((message) => message.id), ["r2-old"]);
  assert.deepEqual(journal.compactedMessages(journal.watchRun(watch, watch.live, false), []), []);
});

test("a regenerate that compacts keeps only what the journal does not hold", () => {
  const items = [human("q2", "R2"), ai("r2-old", "R2")];
  const before = [live("q2", "human"), live("r2-old")];
  const watch = watched([[live("q2", "human")], [summary("sum3"), live("r2-new")]], before);
  assert.deepEqual(journal.compactedMessages(watch, items), []);
  // A new run starts the watch anew.
  const next = journal.watchRun(journal.watchRun(watch, [summary("sum3"), live("r2-new")], false), [summary("sum3"), live("r2-new")], true);
  assert.deepEqual([next.vanished, next.compacted], [[], false]);
});

test("the last message to wait for is never the summary", () => {
  assert.equal(journal.lastConversationId([live("r1"), summary("sum")]), "r1");
  assert.equal(journal.lastConversationId([]), undefined);
  assert.deepEqual(journal.rowMessages(journal.mergeRows([], [summary("s")])), []);
});

test("useStream's switcher on a summary the rows leave out moves to the first message of the run that compacted", () => {
  const items = [human("q1", "R1"), ai("r1", "R1"), human("q2-edited", "R3"), marker("R3", 2, "sum"), ai("r2", "R3")];
  const state = [summary("sum"), live("r1"), live("q2-edited", "human"), live("r2")];
  const options = { branch: "b", branchOptions: ["a", "b"] };
  const rows = journal.placeBranchSwitches(journal.mergeRows(items, state), state, (message) => (message.id === "sum" ? options : undefined));
  assert.deepEqual(rows.map((row) => (row.streamBranch ? row.key : null)), [null, null, "q2-edited", null, null]);
  assert.deepEqual(rows[2].streamBranch, options);
  // That message's own switcher (another fork) stays: the summary's goes to the next one of its run.
  const both = journal.placeBranchSwitches(journal.mergeRows(items, state), state, (message) =>
    message.id === "sum" ? options : message.id === "q2-edited" ? { branch: "y", branchOptions: ["x", "y"] } : undefined,
  );
  assert.deepEqual(both.map((row) => row.streamBranch?.branch ?? null), [null, null, "y", null, "b"]);
  // Without its marker yet: the first live message after it in the state.
  const early = journal.placeBranchSwitches(journal.mergeRows(items.slice(0, 3), state), state, (message) => (message.id === "sum" ? options : undefined));
  assert.deepEqual(early.map((row) => (row.streamBranch ? row.key : null)), [null, "r1", null, null]);
});

test("a message's own switcher stays on it; one option is no switcher", () => {
  const state = [live("q1", "human"), live("r1")];
  const rows = journal.placeBranchSwitches(journal.mergeRows([], state), state, (message) =>
    message.id === "r1" ? { branch: "x", branchOptions: ["x", "y"] } : { branch: "z", branchOptions: ["z"] },
  );
  assert.deepEqual(rows.map((row) => row.streamBranch?.branch ?? null), [null, "x"]);
});
