// The journal viewer: the thread index and a thread's conversation.
//
// Journal data reaches the page only through textContent, attribute setters
// and the Markdown renderer (which builds elements around text nodes): a
// message that contains HTML shows as text and never runs.
import { JournalClient, MARKER_TYPE } from "../../static/history.js";
import { renderMarkdown } from "./markdown.js";

const prefix = document.querySelector('meta[name="journal-prefix"]').content;
const params = new URLSearchParams(window.location.search);
const journal = new JournalClient({ apiUrl: window.location.origin, prefix });

function bounded(name, low, high, fallback) {
  const value = parseInt(params.get(name), 10);
  return value >= low && value <= high ? value : fallback;
}
// `?limit=N` sets the page size (1-500); `?poll=MS` how often a thread with a
// run in flight is polled (idle threads: five times less often).
const PAGE_SIZE = bounded("limit", 1, 500, 50);
const POLL_MS = bounded("poll", 100, 60000, 1500);
// `?run_id=` shows the branch that ends with that run (another version of a
// regenerated or edited turn), `?checkpoint_id=` the branch as of a checkpoint.
const BRANCH = params.get("run_id") ? { runId: params.get("run_id") }
  : params.get("checkpoint_id") ? { checkpointId: params.get("checkpoint_id") } : {};

// A run that did not simply return (history item `run_status`).
const RUN_STATUS_TYPE = "run_status";
const RUN_STATUS_LABELS = {
  failed: "Run failed",
  cancelled: "Run cancelled",
  interrupted: "Run paused: waiting for input",
};

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

function setStatus(text, isError) {
  const status = document.getElementById("status");
  status.textContent = text || "";
  status.hidden = !text;
  status.classList.toggle("error", Boolean(isError));
}

function formatTime(value) {
  if (!value) return "";
  const date = new Date(value);
  return isNaN(date) ? String(value) : date.toLocaleString();
}

function formatDuration(ms) {
  if (ms === null || ms === undefined) return "";
  if (ms < 1000) return ms + " ms";
  if (ms < 60000) return (ms / 1000).toFixed(1) + " s";
  return Math.floor(ms / 60000) + " min " + Math.round((ms % 60000) / 1000) + " s";
}

function pretty(value) {
  if (typeof value === "string") return value;
  try { return JSON.stringify(value, null, 2); } catch (_) { return String(value); }
}

// LangChain content is a string or a list of blocks; text blocks read as text.
function contentText(content) {
  if (content === null || content === undefined) return "";
  if (typeof content === "string") return content;
  if (Array.isArray(content)) {
    return content.map((block) => {
      if (typeof block === "string") return block;
      if (block && block.type === "text" && typeof block.text === "string") return block.text;
      return pretty(block);
    }).join("\n");
  }
  return pretty(content);
}

function plural(count, noun) {
  return count + " " + noun + (count === 1 ? "" : "s");
}

// -- thread page ---------------------------------------------------------------

function threadIdFromPath() {
  const marker = "/ui/threads/";
  const path = window.location.pathname;
  return decodeURIComponent(path.slice(path.indexOf(marker) + marker.length));
}

class ThreadView {
  constructor(threadId) {
    this.threadId = threadId;
    this.items = [];            // ascending seq, each once
    this.seqs = new Set();
    this.runs = new Map();      // run_id -> summary
    this.expanded = new Set();  // ids of markers whose condensed messages are shown
    this.openSummaries = new Set();
    this.nextBefore = null;
    this.lastSeq = 0;
    this.list = document.getElementById("conversation");
    this.button = document.getElementById("load-older");
    this.live = document.getElementById("live");
  }

  add(items) {
    const fresh = items.filter((item) => !this.seqs.has(item.seq));
    fresh.forEach((item) => this.seqs.add(item.seq));
    this.items = this.items.concat(fresh).sort((a, b) => a.seq - b.seq);
    if (this.items.length) this.lastSeq = Math.max(this.lastSeq, this.items[this.items.length - 1].seq);
    return fresh;
  }

  // Each message id condensed by a marker -> that marker (the earliest that names it).
  condensedBy() {
    const owner = new Map();
    for (const item of this.items) {
      if (item.type !== MARKER_TYPE) continue;
      const ids = item.condensed_message_ids || item.replaced_message_ids || [];
      for (const id of ids) if (!owner.has(id)) owner.set(id, item);
    }
    return owner;
  }

  async loadRuns(runIds) {
    const wanted = [...new Set(runIds)].filter(Boolean);
    for (let i = 0; i < wanted.length; i += 100) {
      const summaries = await journal.runs(this.threadId, wanted.slice(i, i + 100));
      summaries.forEach((run) => this.runs.set(run.run_id, run));
    }
  }

  runInFlight() {
    for (const run of this.runs.values()) if (run.status === "running") return true;
    return false;
  }

  async loadTitle() {
    const first = await journal.page(this.threadId, { limit: 16, afterSeq: 0, ...BRANCH });
    const human = first.data.find((item) => item.type === "human" && contentText(item.content).trim());
    const title = human ? contentText(human.content).trim().split("\n")[0] : this.threadId;
    document.getElementById("thread-title").textContent = title.length > 120 ? title.slice(0, 119) + "…" : title;
    document.getElementById("thread-id").textContent = this.threadId;
    document.title = "Journal: " + title;
  }

  async loadOlder() {
    this.button.disabled = true;
    try {
      const page = await journal.page(this.threadId, {
        limit: PAGE_SIZE, beforeSeq: this.nextBefore === null ? undefined : this.nextBefore, ...BRANCH,
      });
      const fresh = this.add(page.data);
      this.nextBefore = page.has_more ? page.next_before_seq : null;
      await this.loadRuns(fresh.map((item) => item.run_id));
      return fresh;
    } finally {
      this.button.disabled = false;
    }
  }

  async poll() {
    const { items } = await journal.poll(this.threadId, this.lastSeq, BRANCH);
    if (items.some((item) => item.branch)) {
      // The thread forked (a regenerate, an edit): what is shown is another branch now.
      this.items = [];
      this.seqs = new Set();
      this.nextBefore = null;
      this.lastSeq = 0;
      await this.loadOlder();
      return true;
    }
    const fresh = this.add(items);
    const running = [...this.runs.values()].filter((run) => run.status === "running").map((run) => run.run_id);
    const unknown = fresh.map((item) => item.run_id).filter((id) => id && !this.runs.has(id));
    if (fresh.length || running.length) await this.loadRuns(running.concat(unknown));
    return fresh.length > 0 || running.length > 0;
  }

  schedulePoll() {
    const delay = this.runInFlight() ? POLL_MS : POLL_MS * 5;
    this.live.hidden = !this.runInFlight();
    setTimeout(async () => {
      try {
        const nearBottom = window.innerHeight + window.scrollY >= document.body.scrollHeight - 40;
        if (await this.poll()) {
          this.render();
          if (nearBottom) window.scrollTo(0, document.body.scrollHeight);
        }
      } catch (error) {
        setStatus("Live updates paused: " + error.message, true);
      }
      this.schedulePoll();
    }, delay);
  }

  async showCondensed(marker) {
    const ids = marker.condensed_message_ids || marker.replaced_message_ids || [];
    const have = () => new Set(this.items.map((item) => item.id));
    // The condensed messages may sit on older pages: read back until all are here.
    while (this.nextBefore !== null && ids.some((id) => !have().has(id))) await this.loadOlder();
    this.expanded.add(marker.id);
    this.render();
    const first = this.list.querySelector('.item.condensed[data-marker="' + CSS.escape(marker.id) + '"]');
    if (first) first.scrollIntoView({ block: "start" });
  }

  hideCondensed(marker) {
    this.expanded.delete(marker.id);
    this.render();
    document.getElementById(marker.id).scrollIntoView({ block: "nearest" });
  }

  // "‹ 2 / 3 ›" before the first item after a fork: the other versions from there.
  renderBranchSwitch(item) {
    const fork = item.branch;
    const nav = el("li", "branch-switch");
    nav.dataset.seq = item.seq;
    nav.setAttribute("aria-label", "versions from here");
    const link = (alternative, text, label) => {
      if (!alternative) return el("span", "branch-step disabled", text);
      const a = el("a", "branch-step", text);
      a.href = window.location.pathname + "?run_id=" + encodeURIComponent(alternative.run_id || "");
      a.title = label;
      return a;
    };
    const i = fork.index - 1;
    nav.appendChild(link(fork.alternatives[i - 1], "‹", "the previous version"));
    nav.appendChild(el("span", "branch-position", fork.index + " / " + fork.count));
    nav.appendChild(link(fork.alternatives[i + 1], "›", "the next version"));
    const what = item.type === "human" ? "edited" : "regenerated";
    nav.appendChild(el("span", "branch-what", fork.count > 1 ? what + " from here" : ""));
    return nav;
  }

  renderMessage(item, marker) {
    const known = item.type === "human" || item.type === "ai" || item.type === "tool";
    const type = known ? item.type : "other";
    const li = el("li", "item message " + type);
    li.dataset.seq = item.seq;
    li.dataset.type = item.type;
    if (item.id) li.dataset.messageId = item.id;
    if (marker) {
      li.classList.add("condensed");
      li.dataset.marker = marker.id;
      li.hidden = !this.expanded.has(marker.id);
    }
    const head = el("div", "head");
    let role = item.type === "human" ? "user" : item.type === "ai" ? "assistant" : item.type;
    if (type === "tool" && item.name) role = "tool · " + item.name;
    head.appendChild(el("span", "role", role));
    head.appendChild(el("time", "time", formatTime(item.created_at)));
    if (marker) head.appendChild(el("span", "condensed-tag", "condensed"));
    li.appendChild(head);
    const text = contentText(item.content);
    if (type === "tool") {
      li.appendChild(el("pre", "result body", text));
    } else if (text) {
      const body = el("div", "body markdown");
      body.appendChild(renderMarkdown(text));
      li.appendChild(body);
    }
    (Array.isArray(item.tool_calls) ? item.tool_calls : []).forEach((call) => {
      const box = el("div", "tool-call");
      box.appendChild(el("span", "label", "calls "));
      box.appendChild(el("span", "name", call && call.name));
      box.appendChild(el("pre", "args", pretty(call && call.args !== undefined ? call.args : {})));
      li.appendChild(box);
    });
    return li;
  }

  renderMarker(item) {
    const li = el("li", "item summary-marker");
    li.dataset.seq = item.seq;
    li.dataset.type = item.type;
    li.id = item.id;
    const details = el("details");
    details.open = this.openSummaries.has(item.id);
    details.addEventListener("toggle", () => {
      if (details.open) this.openSummaries.add(item.id); else this.openSummaries.delete(item.id);
    });
    // Earlier summaries a compaction replaced are not conversation: not counted.
    const count = item.condensed_count === undefined ? item.replaced_count : item.condensed_count;
    const label = (count === null || count === undefined ? "Earlier" : count) +
      (count === 1 ? " message condensed" : " messages condensed");
    details.appendChild(el("summary", "marker-label", label));
    const summary = el("div", "summary-text markdown");
    summary.appendChild(renderMarkdown(item.summary || "(no summary recorded)"));
    details.appendChild(summary);
    li.appendChild(details);
    const ids = item.condensed_message_ids || item.replaced_message_ids || [];
    if (ids.length) {
      const shown = this.expanded.has(item.id);
      const toggle = el("button", "show-condensed",
        shown ? "Hide the condensed messages" : "Show the " + plural(ids.length, "condensed message"));
      toggle.type = "button";
      toggle.setAttribute("aria-expanded", String(shown));
      toggle.addEventListener("click", () => (shown ? this.hideCondensed(item) : this.showCondensed(item)));
      li.appendChild(toggle);
    }
    const parts = [];
    if (item.preserved_count !== null && item.preserved_count !== undefined) parts.push(item.preserved_count + " kept");
    if (item.created_at) parts.push(formatTime(item.created_at));
    li.appendChild(el("div", "detail", parts.join(" · ")));
    return li;
  }

  // A run that did not simply return: failed, cancelled, or paused at an interrupt.
  renderRunStatus(item) {
    const status = RUN_STATUS_LABELS[item.status] ? item.status : "failed";
    const li = el("li", "item run-outcome " + status);
    li.dataset.seq = item.seq;
    li.dataset.type = item.type;
    li.dataset.status = status;
    li.id = item.id;
    const row = el("div", "head");
    row.appendChild(el("span", "role", RUN_STATUS_LABELS[status]));
    if (item.error_type && status === "failed") row.appendChild(el("span", "error-type", item.error_type));
    row.appendChild(el("time", "time", formatTime(item.created_at)));
    li.appendChild(row);
    if (item.message) li.appendChild(el("div", "body status-message", item.message));
    (Array.isArray(item.interrupts) ? item.interrupts : []).forEach((interrupt) => {
      li.appendChild(el("pre", "interrupt-value", pretty(interrupt && interrupt.value)));
    });
    return li;
  }

  renderRunHead(runId) {
    const run = this.runs.get(runId) || { run_id: runId, status: "unknown" };
    const head = el("header", "run-head");
    head.appendChild(el("span", "run-label", "Run"));
    if (run.status !== "unknown") head.appendChild(el("span", "run-status status-" + run.status, run.status));
    if (run.started_at) head.appendChild(el("time", "run-time", formatTime(run.started_at)));
    if (run.duration_ms !== null && run.duration_ms !== undefined) {
      head.appendChild(el("span", "run-duration", formatDuration(run.duration_ms)));
    }
    if (runId) {
      const link = el("a", "run-events", "raw events");
      link.href = prefix + "/threads/" + encodeURIComponent(this.threadId) + "/runs/" + encodeURIComponent(runId) + "/events";
      link.title = "run " + runId;
      head.appendChild(link);
    }
    return head;
  }

  // Runs whose every message was condensed fold into one line each stretch,
  // so the marker is not pushed down by a run header per condensed run.
  foldCondensedRuns(fragment) {
    const sections = [...fragment.children];
    for (let i = 0; i < sections.length; i++) {
      if (!sections[i].classList.contains("all-condensed")) continue;
      const stretch = [];
      while (i < sections.length && sections[i].classList.contains("all-condensed")) stretch.push(sections[i++]);
      const messages = stretch.reduce((sum, node) => sum + Number(node.dataset.condensed), 0);
      const marker = this.items.find((item) => item.id === stretch[0].dataset.marker);
      const note = el("button", "condensed-runs",
        plural(stretch.length, "run") + " · " + plural(messages, "message") + " condensed into a summary further down");
      note.type = "button";
      if (marker) note.addEventListener("click", () => this.showCondensed(marker));
      fragment.insertBefore(note, stretch[0]);
    }
  }

  render() {
    const owner = this.condensedBy();
    const fragment = document.createDocumentFragment();
    let section = null;
    let list = null;
    let currentRun;
    // A run whose outcome card (failed, cancelled, paused) is among the items shows its error there only.
    const carded = new Set(this.items.filter((item) => item.type === RUN_STATUS_TYPE).map((item) => item.run_id));
    const finish = () => {
      if (!section) return;
      const rows = list.querySelectorAll(".item");
      const hidden = list.querySelectorAll(".item[hidden]");
      if (rows.length && rows.length === hidden.length) {
        section.classList.add("all-condensed");
        section.hidden = true;
        section.dataset.condensed = String(hidden.length);
        section.dataset.marker = hidden[0].dataset.marker;
      }
    };
    for (const item of this.items) {
      if (section === null || item.run_id !== currentRun) {
        finish();
        currentRun = item.run_id;
        section = el("section", "run");
        if (currentRun) section.dataset.runId = currentRun;
        const run = this.runs.get(currentRun);
        if (run) section.dataset.status = run.status;
        section.appendChild(this.renderRunHead(currentRun));
        const error = run && !carded.has(currentRun) && run.error;
        if (error) {
          const named = !run.error_type || error.startsWith(run.error_type);
          section.appendChild(el("pre", "run-error", (named ? "" : run.error_type + ": ") + error));
        }
        list = el("ol", "items");
        section.appendChild(list);
        fragment.appendChild(section);
      }
      const marker = item.type === MARKER_TYPE ? null : owner.get(item.id) || null;
      if (item.branch && Array.isArray(item.branch.alternatives)) list.appendChild(this.renderBranchSwitch(item));
      if (item.type === MARKER_TYPE) list.appendChild(this.renderMarker(item));
      else if (item.type === RUN_STATUS_TYPE) list.appendChild(this.renderRunStatus(item));
      else list.appendChild(this.renderMessage(item, marker));
    }
    finish();
    this.foldCondensedRuns(fragment);
    this.list.replaceChildren(fragment);
    this.button.hidden = this.nextBefore === null;
    setStatus(this.items.length ? "" : "No messages in this thread yet.");
  }

  showBranchNote() {
    const note = document.getElementById("branch-note");
    note.hidden = false;
    const back = el("a", "", "the thread's current branch");
    back.href = window.location.pathname;
    note.replaceChildren(el("span", "", "Another branch of this thread. Back to "), back);
  }

  async start() {
    this.button.addEventListener("click", async () => {
      if (this.nextBefore === null) return;
      const anchor = this.list.querySelector(".item:not([hidden])");
      const top = anchor ? anchor.getBoundingClientRect().top : 0;
      try {
        await this.loadOlder();
      } catch (error) {
        setStatus("Could not load older messages: " + error.message, true);
        return;
      }
      this.render();
      // Keep what the reader was looking at in place.
      const again = anchor && document.querySelector('.item[data-seq="' + anchor.dataset.seq + '"]');
      if (again) window.scrollBy(0, again.getBoundingClientRect().top - top);
    });
    try {
      await Promise.all([this.loadTitle(), this.loadOlder()]);
    } catch (error) {
      setStatus("Could not load the conversation: " + error.message, true);
      return;
    }
    if (BRANCH.runId || BRANCH.checkpointId) this.showBranchNote();
    this.render();
    window.scrollTo(0, document.body.scrollHeight);
    document.body.dataset.loaded = "true";
    this.schedulePoll();
  }
}

// -- index page ----------------------------------------------------------------

function renderThread(thread) {
  const li = el("li", "thread");
  const link = el("a", "thread-link", thread.title || thread.thread_id);
  link.href = prefix + "/ui/threads/" + encodeURIComponent(thread.thread_id);
  li.appendChild(link);
  const meta = el("div", "meta");
  if (thread.assistant_id) meta.appendChild(el("span", "assistant", thread.assistant_id));
  meta.appendChild(el("span", "counts",
    plural(thread.message_count ?? 0, "message") + " · " + plural(thread.marker_count ?? 0, "marker")));
  meta.appendChild(el("time", "activity", formatTime(thread.updated_at)));
  li.appendChild(meta);
  li.appendChild(el("div", "thread-id", thread.thread_id));
  return li;
}

async function indexPage() {
  const list = document.getElementById("threads");
  const search = document.getElementById("search");
  search.value = params.get("q") || "";
  let asked = 0;
  async function load() {
    const ticket = ++asked;
    const query = search.value.trim();
    try {
      const threads = await journal.threads({ limit: 50, q: query || undefined });
      if (ticket !== asked) return; // a newer search answered first
      list.replaceChildren(...threads.map(renderThread));
      setStatus(threads.length ? "" : query ? "No thread mentions “" + query + "”." : "No journaled threads yet.");
      document.body.dataset.loaded = "true";
    } catch (error) {
      setStatus("Could not load threads: " + error.message, true);
    }
  }
  let timer = null;
  search.addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(() => {
      const url = new URL(window.location.href);
      if (search.value.trim()) url.searchParams.set("q", search.value.trim()); else url.searchParams.delete("q");
      window.history.replaceState(null, "", url);
      load();
    }, 200);
  });
  await load();
}

const page = document.body.dataset.page;
if (page === "thread") new ThreadView(threadIdFromPath()).start();
else if (page === "index") indexPage();
