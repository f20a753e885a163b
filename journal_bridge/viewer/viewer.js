// The journal viewer. Every piece of journal data reaches the page through
// textContent or attribute setters, never as markup: a message that contains
// HTML shows as text.
"use strict";

(function () {
  const prefix = document.querySelector('meta[name="journal-prefix"]').content;
  // `?limit=N` sets the page size (1-500), e.g. to read a long thread in small steps.
  const PAGE_SIZE = (function () {
    const asked = parseInt(new URLSearchParams(window.location.search).get("limit"), 10);
    return asked >= 1 && asked <= 500 ? asked : 50;
  })();

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

  async function getJSON(path) {
    const response = await fetch(prefix + path, { headers: { Accept: "application/json" } });
    let body = null;
    try { body = await response.json(); } catch (_) { body = null; }
    if (!response.ok) {
      const detail = body && body.detail ? body.detail : response.statusText;
      throw new Error(response.status + ": " + detail);
    }
    return body;
  }

  function formatTime(value) {
    if (!value) return "";
    const date = new Date(value);
    return isNaN(date) ? String(value) : date.toLocaleString();
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
      return content.map(function (block) {
        if (typeof block === "string") return block;
        if (block && block.type === "text" && typeof block.text === "string") return block.text;
        return pretty(block);
      }).join("\n");
    }
    return pretty(content);
  }

  function head(role, item) {
    const row = el("div", "head");
    row.appendChild(el("span", "role", role));
    row.appendChild(el("span", "seq", "#" + item.seq));
    row.appendChild(el("time", "time", formatTime(item.created_at)));
    return row;
  }

  function renderMessage(item) {
    const type = item.type === "human" || item.type === "ai" || item.type === "tool" ? item.type : "other";
    const li = el("li", "item message " + type);
    li.dataset.seq = item.seq;
    li.dataset.type = item.type;
    let role = item.type;
    if (type === "tool" && item.name) role = "tool · " + item.name;
    li.appendChild(head(role, item));
    const text = contentText(item.content);
    if (type === "tool") {
      li.appendChild(el("pre", "result body", text));
    } else if (text) {
      li.appendChild(el("div", "body", text));
    }
    (Array.isArray(item.tool_calls) ? item.tool_calls : []).forEach(function (call) {
      const box = el("div", "tool-call");
      box.appendChild(el("span", "label", "calls "));
      box.appendChild(el("span", "name", call && call.name));
      box.appendChild(el("pre", "args", pretty(call && call.args !== undefined ? call.args : {})));
      li.appendChild(box);
    });
    return li;
  }

  function renderMarker(item) {
    const li = el("li", "item summary-marker");
    li.dataset.seq = item.seq;
    li.dataset.type = item.type;
    li.id = item.id;
    const details = el("details");
    // Earlier summaries a compaction replaced are not conversation: not counted.
    const count = item.condensed_count === undefined ? item.replaced_count : item.condensed_count;
    const label = (count === null || count === undefined ? "Earlier" : count) +
      (count === 1 ? " message condensed" : " messages condensed");
    details.appendChild(el("summary", "marker-label", label));
    details.appendChild(el("div", "summary-text", item.summary || "(no summary recorded)"));
    const parts = [];
    if (item.preserved_count !== null && item.preserved_count !== undefined) {
      parts.push(item.preserved_count + " kept");
    }
    parts.push("at #" + item.seq);
    if (item.created_at) parts.push(formatTime(item.created_at));
    details.appendChild(el("div", "detail", parts.join(" · ")));
    li.appendChild(details);
    return li;
  }

  const RUN_STATUS_LABELS = {
    failed: "Run failed",
    cancelled: "Run cancelled",
    interrupted: "Run paused: waiting for input",
  };

  // A run that did not simply return: failed, cancelled, or paused at an interrupt.
  function renderRunStatus(item) {
    const status = RUN_STATUS_LABELS[item.status] ? item.status : "failed";
    const li = el("li", "item run-status " + status);
    li.dataset.seq = item.seq;
    li.dataset.type = item.type;
    li.dataset.status = status;
    li.id = item.id;
    const row = el("div", "head");
    row.appendChild(el("span", "role", RUN_STATUS_LABELS[status]));
    if (item.error_type && status === "failed") row.appendChild(el("span", "error-type", item.error_type));
    row.appendChild(el("span", "seq", "#" + item.seq));
    row.appendChild(el("time", "time", formatTime(item.created_at)));
    li.appendChild(row);
    if (item.message) li.appendChild(el("div", "body status-message", item.message));
    (Array.isArray(item.interrupts) ? item.interrupts : []).forEach(function (interrupt) {
      li.appendChild(el("pre", "interrupt-value", pretty(interrupt && interrupt.value)));
    });
    return li;
  }

  function renderItem(item) {
    if (item.type === "summary_marker") return renderMarker(item);
    if (item.type === "run_status") return renderRunStatus(item);
    return renderMessage(item);
  }

  async function threadPage() {
    const marker = "/ui/threads/";
    const path = window.location.pathname;
    const threadId = decodeURIComponent(path.slice(path.indexOf(marker) + marker.length));
    document.getElementById("thread-title").textContent = threadId;
    document.title = "Journal: " + threadId;
    const list = document.getElementById("conversation");
    const button = document.getElementById("load-older");
    const base = "/threads/" + encodeURIComponent(threadId) + "/messages?limit=" + PAGE_SIZE;
    let nextBefore = null;

    async function load(olderThan) {
      button.disabled = true;
      try {
        const page = await getJSON(olderThan === null ? base : base + "&before_seq=" + olderThan);
        const fragment = document.createDocumentFragment();
        page.data.forEach(function (item) { fragment.appendChild(renderItem(item)); });
        list.insertBefore(fragment, list.firstChild);
        nextBefore = page.has_more ? page.next_before_seq : null;
        button.hidden = nextBefore === null;
        setStatus(list.children.length ? "" : "No messages in this thread yet.");
      } catch (error) {
        setStatus("Could not load the conversation: " + error.message, true);
      } finally {
        button.disabled = false;
      }
    }

    button.addEventListener("click", function () {
      if (nextBefore !== null) load(nextBefore);
    });
    await load(null);
    const last = list.lastElementChild;
    if (last) last.scrollIntoView({ block: "end" });
  }

  async function indexPage() {
    const list = document.getElementById("threads");
    try {
      const body = await getJSON("/threads?limit=50");
      body.data.forEach(function (thread) {
        const li = el("li");
        const link = el("a", "thread-link", thread.thread_id);
        link.href = prefix + "/ui/threads/" + encodeURIComponent(thread.thread_id);
        li.appendChild(link);
        li.appendChild(el("span", "meta",
          thread.event_count + " records · " + formatTime(thread.updated_at)));
        list.appendChild(li);
      });
      setStatus(body.data.length ? "" : "No journaled threads yet.");
    } catch (error) {
      setStatus("Could not load threads: " + error.message, true);
    }
  }

  const page = document.body.dataset.page;
  if (page === "thread") threadPage();
  else if (page === "index") indexPage();
})();
