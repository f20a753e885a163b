// A small, safe Markdown subset rendered as DOM nodes.
//
// Message text is untrusted. It never becomes markup: every piece of it enters
// the page as a text node (textContent), so HTML in a message shows as the
// characters typed -- escaping comes first by construction. On top of that a
// few constructs become elements built here: paragraphs and line breaks,
// headings, bulleted and numbered lists, block quotes, fenced code blocks,
// inline code, bold, italics, and links whose target is http(s) or mailto.
// Any other link (javascript:, data:, relative) stays text.

const SAFE_LINK = /^(https?:\/\/|mailto:)/i;

function el(tag, text) {
  const node = document.createElement(tag);
  if (text !== undefined) node.textContent = text;
  return node;
}

// Inline spans, outermost first. Each pattern's first group is the content.
const INLINE = [
  { re: /`([^`\n]+)`/, make: (m) => el("code", m[1]) },
  { re: /\[([^\]\n]+)\]\(([^()\s]+)\)/, make: link },
  { re: /\*\*([^*\n][^\n]*?)\*\*/, make: (m) => wrap("strong", m[1]) },
  { re: /__([^_\n][^\n]*?)__/, make: (m) => wrap("strong", m[1]) },
  { re: /\*([^*\s][^*\n]*?)\*/, make: (m) => wrap("em", m[1]) },
  { re: /(?<![A-Za-z0-9])_([^_\s][^_\n]*?)_(?![A-Za-z0-9])/, make: (m) => wrap("em", m[1]) },
  { re: /(https?:\/\/[^\s<>()]+[^\s<>().,;:!?'"])/, make: (m) => anchor(m[1], m[1]) },
];

function anchor(href, text) {
  const a = el("a", text);
  a.href = href;
  a.rel = "noopener noreferrer nofollow";
  a.target = "_blank";
  return a;
}

function link(match) {
  const href = match[2];
  if (!SAFE_LINK.test(href)) return document.createTextNode(match[0]);
  return anchor(href, match[1]);
}

function wrap(tag, text) {
  const node = document.createElement(tag);
  appendInline(node, text);
  return node;
}

function appendInline(parent, text) {
  while (text) {
    let best = null;
    for (const rule of INLINE) {
      const match = rule.re.exec(text);
      if (match && (best === null || match.index < best.match.index)) best = { rule, match };
    }
    if (best === null) {
      parent.appendChild(document.createTextNode(text));
      return;
    }
    if (best.match.index > 0) parent.appendChild(document.createTextNode(text.slice(0, best.match.index)));
    parent.appendChild(best.rule.make(best.match));
    text = text.slice(best.match.index + best.match[0].length);
  }
}

function appendLines(parent, lines) {
  lines.forEach((line, i) => {
    if (i > 0) parent.appendChild(document.createElement("br"));
    appendInline(parent, line);
  });
}

const BULLET = /^\s{0,3}[-*+]\s+(.*)$/;
const NUMBERED = /^\s{0,3}\d{1,9}[.)]\s+(.*)$/;
const HEADING = /^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$/;
const QUOTE = /^\s{0,3}>\s?(.*)$/;
const FENCE = /^\s{0,3}(```|~~~)/;

/** `text` as a fragment of safe elements and text nodes. */
export function renderMarkdown(text) {
  const out = document.createDocumentFragment();
  const lines = String(text ?? "").replace(/\r\n?/g, "\n").split("\n");
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (!line.trim()) { i++; continue; }
    const fence = FENCE.exec(line);
    if (fence) {
      const body = [];
      i++;
      while (i < lines.length && !lines[i].trimStart().startsWith(fence[1])) body.push(lines[i++]);
      i++; // the closing fence (or the end)
      const pre = el("pre");
      pre.className = "code";
      pre.appendChild(el("code", body.join("\n")));
      out.appendChild(pre);
      continue;
    }
    const heading = HEADING.exec(line);
    if (heading) {
      // Headings inside a message are small: h4-h6 under the page's own.
      const node = document.createElement("h" + Math.min(6, 3 + heading[1].length));
      appendInline(node, heading[2]);
      out.appendChild(node);
      i++;
      continue;
    }
    if (QUOTE.test(line)) {
      const quoted = [];
      while (i < lines.length && QUOTE.test(lines[i])) quoted.push(QUOTE.exec(lines[i++])[1]);
      const node = document.createElement("blockquote");
      appendLines(node, quoted);
      out.appendChild(node);
      continue;
    }
    const kind = BULLET.test(line) ? [BULLET, "ul"] : NUMBERED.test(line) ? [NUMBERED, "ol"] : null;
    if (kind) {
      const [pattern, tag] = kind;
      const list = document.createElement(tag);
      while (i < lines.length && pattern.test(lines[i])) {
        const item = document.createElement("li");
        appendInline(item, pattern.exec(lines[i++])[1]);
        list.appendChild(item);
      }
      out.appendChild(list);
      continue;
    }
    const para = [];
    while (
      i < lines.length && lines[i].trim() &&
      !FENCE.test(lines[i]) && !HEADING.test(lines[i]) && !QUOTE.test(lines[i]) &&
      !BULLET.test(lines[i]) && !NUMBERED.test(lines[i])
    ) para.push(lines[i++]);
    if (!para.length) para.push(lines[i++]); // never loop on a line no rule takes
    const node = document.createElement("p");
    appendLines(node, para);
    out.appendChild(node);
  }
  return out;
}
