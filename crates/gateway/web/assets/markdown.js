// Safe Markdown for agent text: markdown-it (CommonMark plus tables, strikethrough and bare-URL
// links) renders the HTML, DOMPurify sanitizes it, and the result is a DocumentFragment.
//
// Agent text never becomes markup: markdown-it runs with `html: false`, so raw HTML is shown as
// the characters it is, and DOMPurify removes anything else that is not plain formatting. Only
// http(s) and mailto links are made clickable; images (`![alt](url)`) are never fetched from the
// URL an agent wrote but shown as links to it (the gateway's own media reach the page as
// attachments, not as Markdown images). Task-list items (`- [x]`) get a check mark. Formulas
// (`$…$`, `$$…$$`, `\(…\)`, `\[…\]`) are drawn as MathML by math.js, ```mermaid blocks as images
// by diagram.js.

import DOMPurify from './vendor/dompurify/purify.es.mjs';
import MarkdownIt from './vendor/markdown-it/markdown-it.min.mjs';
import { frameCodeBlocks } from './code.js';
import { drawDiagrams } from './diagram.js';
import { mathPlugin, typesetMath } from './math.js';

const SAFE_URL = /^(?:https?:|mailto:)/i;

/** Whether `url` may become a link. */
export function safeUrl(url) {
  return SAFE_URL.test(String(url).trim());
}

const md = new MarkdownIt({
  html: false,
  linkify: true,
  breaks: true,
  typographer: false,
});
md.validateLink = safeUrl;
md.use(mathPlugin);

// Headings start at h3: the page's own come first (h1 the chat's name, h2 "Messages").
md.renderer.rules.heading_open = (tokens, i) => `<h${level(tokens[i])} class="md-h">`;
md.renderer.rules.heading_close = (tokens, i) => `</h${level(tokens[i])}>`;
function level(token) {
  return Math.min(6, Number(token.tag.slice(1)) + 2);
}

// An image is a link to its source, labelled with its alt text.
md.renderer.rules.image = (tokens, i, options, env, self) => {
  const t = tokens[i];
  const src = t.attrGet('src') || '';
  const alt = self.renderInlineAsText(t.children || [], options, env) || src;
  return `<a class="md-image" href="${md.utils.escapeHtml(src)}">${md.utils.escapeHtml(alt)}</a>`;
};

// Table alignment as a class: the page's Content-Security-Policy refuses inline styles.
md.core.ruler.push('align_class', (state) => {
  for (const t of state.tokens) {
    const style = (t.type === 'th_open' || t.type === 'td_open') && t.attrGet('style');
    if (!style) continue;
    t.attrs = t.attrs.filter(([k]) => k !== 'style');
    t.attrJoin('class', `align-${style.replace('text-align:', '')}`);
  }
});

// A ```mermaid block is marked for diagram.js once its closing fence has arrived (a streaming
// answer's unclosed block runs to the end of the text so far).
md.core.ruler.push('diagram_fence', (state) => {
  let lines = null;
  for (const t of state.tokens) {
    if (t.type !== 'fence' || !t.map || t.info.trim().split(/\s+/)[0].toLowerCase() !== 'mermaid') continue;
    lines ??= state.src.split('\n');
    const close = /^ {0,3}(`{3,}|~{3,})\s*$/.exec(lines[t.map[1] - 1] || '');
    if (t.map[1] - 1 > t.map[0] && close && close[1][0] === t.markup[0] && close[1].length >= t.markup.length) {
      t.attrSet('data-diagram', '');
    }
  }
});

const PURIFY = {
  ALLOWED_TAGS: ['a', 'blockquote', 'br', 'code', 'del', 'div', 'em', 'h3', 'h4', 'h5', 'h6', 'hr', 'li', 'ol', 'p', 'pre', 's',
    'span', 'strong', 'table', 'tbody', 'td', 'th', 'thead', 'tr', 'ul'],
  ALLOWED_ATTR: ['class', 'href', 'start'],
  ALLOWED_URI_REGEXP: SAFE_URL,
  RETURN_DOM_FRAGMENT: true,
};

/**
 * Texts longer than this many characters are shown as plain text: parsing some shapes of
 * Markdown (thousands of unclosed `[`) grows faster than their length, and a runaway agent may
 * write up to the gateway's bound of a turn (512 KiB).
 */
export const FORMAT_MAX = 128 * 1024;

/** Renders Markdown text to a sanitized DocumentFragment (plain text above [FORMAT_MAX]). */
export function markdown(text) {
  const source = String(text ?? '');
  if (source.length > FORMAT_MAX) return plainText(source);
  const frag = DOMPurify.sanitize(md.render(source), PURIFY);
  for (const a of frag.querySelectorAll('a')) {
    if (!safeUrl(a.getAttribute('href') || '')) {
      a.replaceWith(...a.childNodes);
      continue;
    }
    a.target = '_blank';
    a.rel = 'noopener noreferrer nofollow';
  }
  for (const table of frag.querySelectorAll('table')) {
    // A box that scrolls sideways on a narrow screen: reachable and scrollable by keyboard.
    const wrap = document.createElement('div');
    wrap.className = 'md-table';
    wrap.tabIndex = 0;
    wrap.setAttribute('role', 'region');
    wrap.setAttribute('aria-label', 'Table');
    table.replaceWith(wrap);
    wrap.append(table);
  }
  markTasks(frag);
  frameCodeBlocks(frag);
  drawDiagrams(frag);
  typesetMath(frag);
  return frag;
}

/** A text too long to format, as it is, with a note saying so. */
function plainText(source) {
  const frag = document.createDocumentFragment();
  const note = document.createElement('p');
  note.className = 'md-note';
  note.textContent = 'Shown as plain text: too long to format.';
  const body = document.createElement('div');
  body.className = 'md-plain';
  body.textContent = source;
  frag.append(note, body);
  return frag;
}

/** `[ ] ` / `[x] ` at the start of a list item becomes ☐ / ☑. */
function markTasks(root) {
  for (const li of root.querySelectorAll('li')) {
    const first = li.firstElementChild?.tagName === 'P' ? li.firstElementChild.firstChild : li.firstChild;
    const m = first?.nodeType === 3 && /^\[( |x|X)\] /.exec(first.data);
    if (!m) continue;
    first.data = `${m[1] === ' ' ? '☐' : '☑'} ${first.data.slice(4)}`;
    li.classList.add('task');
  }
}
