// Markdown, as DAG authors write it in doc_md, rendered safely: headings, paragraphs, lists, block quotes,
// code, emphasis and http(s) links become DOM elements built with text nodes only. Nothing in the text is
// ever parsed as HTML: a <script> or any other tag is shown as the characters it is.

import { h } from "./dom.js";

/** Nesting deeper than this (lists in quotes in lists ...) is shown as text, so no input can exhaust the stack. */
const MAX_DEPTH = 12;
/** Longer texts are shown as plain text: the renderer stays quick on anything a producer sends. */
const MAX_LENGTH = 200_000;
const ESCAPABLE = /[\\`*_{}[\]()#+\-.!<>|~]/;

const FENCE = /^ {0,3}(`{3,}|~{3,})\s*([^`\s]*)[^`]*$/;
const HEADING = /^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$/;
const RULE = /^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$/;
const QUOTE = /^ {0,3}> ?(.*)$/;
const ITEM = /^( *)([-*+]|\d{1,9}[.)])(?:[ \t]+(.*)|$)/;
const SETEXT = /^ {0,3}(=+|-+)[ \t]*$/;

/** ``url`` if it is an absolute http or https URL, else null (``javascript:``, ``data:``, relative ...). */
export function safeUrl(url) {
  try {
    const parsed = new URL(url);
    return parsed.protocol === "http:" || parsed.protocol === "https:" ? parsed.href : null;
  } catch {
    return null;
  }
}

function isBlank(line) {
  return !line.trim();
}

function indentOf(line) {
  return line.length - line.trimStart().length;
}

/** The lines without the indentation they all share (a ``doc_md`` written inside an indented docstring). */
function dedent(lines) {
  let common = Infinity;
  for (const line of lines) if (!isBlank(line)) common = Math.min(common, indentOf(line));
  if (common === Infinity) common = 0;
  return lines.map((line) => line.slice(Math.min(common, indentOf(line))));
}

function startsBlock(line) {
  return FENCE.test(line) || HEADING.test(line) || RULE.test(line) || QUOTE.test(line) || ITEM.test(line);
}

/** Inline Markdown of ``text`` as nodes: code spans, strong and emphasis, links, backslash escapes. */
function inline(text, depth) {
  const out = [];
  let buffer = "";
  const flush = () => {
    if (buffer) out.push(document.createTextNode(buffer));
    buffer = "";
  };
  const wordChar = (c) => c !== undefined && /[\p{L}\p{N}]/u.test(c);
  let i = 0;
  while (i < text.length) {
    const c = text[i];
    if (c === "\\" && ESCAPABLE.test(text[i + 1] ?? "")) {
      buffer += text[i + 1];
      i += 2;
      continue;
    }
    if (c === "`") {
      let run = 1;
      while (text[i + run] === "`") run++;
      const fence = "`".repeat(run);
      const close = text.indexOf(fence, i + run);
      if (close > i && text[close + run] !== "`") {
        flush();
        out.push(h("code", {}, text.slice(i + run, close).replace(/^ (.*) $/s, "$1")));
        i = close + run;
      } else {
        buffer += fence;
        i += run;
      }
      continue;
    }
    if ((c === "*" || c === "_") && depth < MAX_DEPTH) {
      const strong = text[i + 1] === c;
      const delimiter = strong ? c + c : c;
      const from = i + delimiter.length;
      // "_" inside a word (snake_case names) is a letter, not emphasis.
      const opens = !/\s/.test(text[from] ?? " ") && (c === "*" || !wordChar(text[i - 1]));
      let close = opens ? text.indexOf(delimiter, from + 1) : -1;
      while (close > 0 && (/\s/.test(text[close - 1]) || (c === "_" && wordChar(text[close + delimiter.length])))) {
        close = text.indexOf(delimiter, close + 1);
      }
      if (close > from) {
        flush();
        out.push(h(strong ? "strong" : "em", {}, inline(text.slice(from, close), depth + 1)));
        i = close + delimiter.length;
        continue;
      }
      buffer += delimiter;
      i = from;
      continue;
    }
    if (c === "[" && depth < MAX_DEPTH) {
      const link = /^\[((?:\\.|[^\\\]])*)\]\(\s*<?([^\s<>()]*)>?(?:\s+"[^"]*")?\s*\)/.exec(text.slice(i));
      if (link) {
        flush();
        const href = safeUrl(link[2]);
        const label = inline(link[1], depth + 1);
        out.push(href ? h("a", { href, rel: "noopener noreferrer nofollow", target: "_blank" }, label) : label);
        i += link[0].length;
        continue;
      }
    }
    if (c === "<") {
      const auto = /^<(https?:\/\/[^\s<>]+)>/.exec(text.slice(i));
      const href = auto && safeUrl(auto[1]);
      if (href) {
        flush();
        out.push(h("a", { href, rel: "noopener noreferrer nofollow", target: "_blank" }, auto[1]));
        i += auto[0].length;
        continue;
      }
    }
    buffer += c;
    i++;
  }
  flush();
  return out;
}

/** A paragraph's lines as inline nodes: a line ending in two spaces or a backslash breaks the line. */
function paragraphContent(lines, depth) {
  const out = [];
  lines.forEach((line, n) => {
    const last = n === lines.length - 1;
    const hard = !last && /( {2,}|\\)$/.test(line);
    const text = line.trim().replace(/\\$/, "");
    out.push(...inline(text, depth));
    if (!last) out.push(hard ? h("br") : " ");
  });
  return out;
}

/** A list starting at ``lines[start]``: the element and the index after it. */
function list(lines, start, depth) {
  const first = ITEM.exec(lines[start]);
  const indent = first[1].length;
  const ordered = /\d/.test(first[2]);
  const items = [];
  let i = start;
  while (i < lines.length) {
    const m = ITEM.exec(lines[i]);
    if (!m || m[1].length !== indent || /\d/.test(m[2]) !== ordered) break;
    const contentIndent = indent + m[2].length + 1;
    const body = [m[3] ?? ""];
    i++;
    while (i < lines.length) {
      const line = lines[i];
      if (isBlank(line)) {
        let ahead = i + 1;
        while (ahead < lines.length && isBlank(lines[ahead])) ahead++;
        if (ahead === lines.length || indentOf(lines[ahead]) <= indent) break;
        body.push("");
      } else if (indentOf(line) > indent) {
        body.push(line.slice(Math.min(indentOf(line), contentIndent)));
      } else if (!startsBlock(line) && !isBlank(body[body.length - 1])) {
        body.push(line); // a lazy continuation of the item's paragraph
      } else break;
      i++;
    }
    items.push(body);
    while (i < lines.length && isBlank(lines[i])) {
      const next = ITEM.exec(lines[i + 1] ?? "");
      if (!next || next[1].length !== indent) break;
      i++;
    }
  }
  const start_ = ordered ? Number.parseInt(first[2], 10) : 1;
  const element = h(ordered ? "ol" : "ul", { start: ordered && start_ !== 1 ? start_ : null });
  for (const body of items) {
    const content = blocks(body, depth + 1);
    const only = content.length === 1 && content[0].tagName === "P" ? [...content[0].childNodes] : content;
    element.append(h("li", {}, only));
  }
  return [element, i];
}

/** Block Markdown of ``lines`` as elements. */
function blocks(lines, depth) {
  if (depth > MAX_DEPTH) return [h("p", {}, lines.join("\n"))];
  const out = [];
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (isBlank(line)) {
      i++;
      continue;
    }
    const fence = FENCE.exec(line);
    if (fence) {
      const marker = fence[1];
      const code = [];
      i++;
      while (i < lines.length && !new RegExp(`^ {0,3}${marker[0]}{${marker.length},}\\s*$`).test(lines[i])) {
        code.push(lines[i]);
        i++;
      }
      i++;
      out.push(h("pre", {}, h("code", { "data-language": fence[2] || null }, code.join("\n"))));
      continue;
    }
    const heading = HEADING.exec(line);
    if (heading) {
      // The details panel's title is an h2 and its sections h3: a document's headings go below them.
      const level = Math.min(6, heading[1].length + 2);
      out.push(h(`h${level}`, {}, inline(heading[2] ?? "", depth)));
      i++;
      continue;
    }
    if (RULE.test(line)) {
      out.push(h("hr"));
      i++;
      continue;
    }
    if (QUOTE.test(line)) {
      const quoted = [];
      while (i < lines.length && !isBlank(lines[i])) {
        const m = QUOTE.exec(lines[i]);
        quoted.push(m ? m[1] : lines[i]);
        i++;
      }
      out.push(h("blockquote", {}, blocks(quoted, depth + 1)));
      continue;
    }
    if (ITEM.test(line)) {
      const [element, next] = list(lines, i, depth);
      out.push(element);
      i = next;
      continue;
    }
    const paragraph = [line];
    i++;
    while (i < lines.length && !isBlank(lines[i]) && !startsBlock(lines[i]) && !SETEXT.test(lines[i])) {
      paragraph.push(lines[i]);
      i++;
    }
    const setext = i < lines.length ? SETEXT.exec(lines[i]) : null;
    if (setext) {
      out.push(h(setext[1][0] === "=" ? "h3" : "h4", {}, paragraphContent(paragraph, depth)));
      i++;
    } else out.push(h("p", {}, paragraphContent(paragraph, depth)));
  }
  return out;
}

/**
 * ``text`` rendered as Markdown: an array of elements made of text nodes only (no HTML is ever parsed).
 * Example: ``renderMarkdown("# Orders\n\n- *daily*\n- <script>")`` → ``[<h3>Orders</h3>, <ul>…</ul>]``,
 * the second item reading ``<script>`` as text.
 */
export function renderMarkdown(text) {
  const source = String(text ?? "");
  if (source.length > MAX_LENGTH) return [h("p", { class: "plain" }, source)];
  return blocks(dedent(source.replace(/\r\n?/g, "\n").split("\n")), 0);
}

/** Whether a documentation facet's ``contentType`` is Markdown (absent: Markdown, as DAGs' doc_md is). */
export function isMarkdown(contentType) {
  if (contentType === undefined || contentType === null || contentType === "") return true;
  return /^text\/(x-)?markdown\b/i.test(String(contentType).trim());
}

/**
 * A ``documentation`` facet (job or dataset) as an element: its ``description`` rendered as Markdown when
 * its ``contentType`` is ``text/markdown`` or absent, as plain text otherwise. Null without a description.
 */
export function documentationElement(facet) {
  const description = facet?.description;
  if (typeof description !== "string" || !description) return null;
  if (!isMarkdown(facet.contentType))
    return h("div", { class: "description plain", id: "details-documentation" }, description);
  return h("div", { class: "description markdown", id: "details-documentation" }, renderMarkdown(description));
}
