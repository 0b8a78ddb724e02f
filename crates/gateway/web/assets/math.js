// Math in agent text: `$…$` and `\(…\)` inline, `$$…$$` and `\[…\]` as a display, drawn by KaTeX
// as MathML (the browser lays it out; KaTeX's HTML output would need inline styles, which the
// page's Content-Security-Policy refuses).
//
// A markdown-it plugin finds the formulas and leaves each as a placeholder showing its source;
// KaTeX is imported the first time a message has one, and the placeholders are then replaced in
// place (like highlight.js colours code blocks, see code.js). What KaTeX returns goes through
// DOMPurify with only MathML let through. A formula KaTeX cannot read keeps showing its source.
//
// Money is not math: a `$` opens a formula only when no space follows it, and the next `$` closes
// it only when no space comes before and no digit after it (so "$5 and $10" stays text). Code
// spans and blocks are never looked into, and `\$` is a dollar sign.

import DOMPurify from './vendor/dompurify/purify.es.mjs';

/** Formulas longer than this are left as text: KaTeX's work grows with a formula's size. */
const TEX_MAX = 4000;

const isSpace = (c) => c === ' ' || c === '\t' || c === '\n' || c === '\r';
const isDigit = (c) => c >= '0' && c <= '9';

/** Where the inline formula starting at `pos` ends: [tex, end, display], or null. */
function scanInline(src, pos) {
  if (src.startsWith('\\(', pos)) {
    const close = src.indexOf('\\)', pos + 2);
    const tex = close < 0 ? '' : src.slice(pos + 2, close);
    return tex.trim() ? [tex, close + 2, false] : null;
  }
  if (src[pos] !== '$') return null;
  if (src[pos + 1] === '$') {
    const close = src.indexOf('$$', pos + 2);
    const tex = close < 0 ? '' : src.slice(pos + 2, close);
    return tex.trim() ? [tex, close + 2, true] : null;
  }
  const start = pos + 1;
  if (start >= src.length || isSpace(src[start])) return null;
  // The first unescaped `$` after it must close it, or this `$` is just a dollar sign.
  let at = start;
  while ((at = src.indexOf('$', at)) >= 0 && src[at - 1] === '\\') at += 1;
  if (at < 0 || at === start || isSpace(src[at - 1]) || isDigit(src[at + 1] || '')) return null;
  return [src.slice(start, at), at + 1, false];
}

function mathInline(state, silent) {
  const c = state.src[state.pos];
  if (c !== '$' && c !== '\\') return false;
  const found = scanInline(state.src, state.pos);
  if (!found) return false;
  const [tex, end, display] = found;
  if (tex.length > TEX_MAX || tex.includes('`')) return false;
  if (!silent) {
    const token = state.push('math_inline', 'span', 0);
    token.content = tex;
    token.markup = state.src.slice(state.pos, end);
    token.meta = { display };
  }
  state.pos = end;
  return true;
}

/** `$$` or `\[` opening a line, then lines up to one ending with `$$` or `\]`. */
function mathBlock(state, startLine, endLine, silent) {
  const lineText = (n) => state.src.slice(state.bMarks[n] + state.tShift[n], state.eMarks[n]);
  if (state.sCount[startLine] - state.blkIndent >= 4) return false;
  const first = lineText(startLine);
  const open = first.startsWith('$$') ? '$$' : first.startsWith('\\[') ? '\\[' : null;
  if (!open) return false;
  const close = open === '$$' ? '$$' : '\\]';
  let last = startLine;
  let body;
  const rest = first.slice(2).trimEnd();
  if (rest.endsWith(close)) {
    body = rest.slice(0, -2);
  } else {
    if (rest.includes(close)) return false;
    const lines = [rest];
    for (last = startLine + 1; last < endLine; last++) {
      if (state.sCount[last] < state.blkIndent) return false;
      const text = lineText(last).trimEnd();
      if (text.endsWith(close)) {
        lines.push(text.slice(0, -2));
        break;
      }
      if (!text) return false;
      lines.push(text);
    }
    if (last >= endLine) return false;
    body = lines.join('\n');
  }
  if (!body.trim() || body.length > TEX_MAX) return false;
  if (silent) return true;
  const token = state.push('math_block', 'div', 0);
  token.block = true;
  token.content = body;
  token.markup = state.src.slice(state.bMarks[startLine] + state.tShift[startLine], state.eMarks[last]);
  token.map = [startLine, last + 1];
  state.line = last + 1;
  return true;
}

/** Adds the math rules to a markdown-it instance. */
export function mathPlugin(md) {
  // Before `escape`, which would turn `\(` into `(`.
  md.inline.ruler.before('escape', 'math_inline', mathInline);
  md.block.ruler.before('fence', 'math_block', mathBlock, { alt: ['paragraph', 'reference', 'blockquote', 'list'] });
  const placeholder = (tag, cls, token) => `<${tag} class="${cls}" data-tex="${md.utils.escapeHtml(token.content)}">${md.utils.escapeHtml(token.markup)}</${tag}>`;
  md.renderer.rules.math_inline = (tokens, i) => placeholder('span', tokens[i].meta.display ? 'math math-display' : 'math', tokens[i]);
  md.renderer.rules.math_block = (tokens, i) => `${placeholder('div', 'math math-display', tokens[i])}\n`;
}

/** KaTeX's MathML, and nothing else. */
const PURIFY = {
  USE_PROFILES: { mathMl: true },
  ADD_TAGS: ['span', 'semantics', 'annotation'],
  ADD_ATTR: ['class', 'encoding'],
  FORBID_ATTR: ['href', 'style', 'id'],
  RETURN_DOM_FRAGMENT: true,
};

let katex = null;
let loading = null;

function load() {
  loading ??= import('./vendor/katex/katex.mjs').then((m) => {
    katex = m.default;
    return katex;
  });
  return loading;
}

/** Replaces one placeholder by its formula; a formula KaTeX refuses keeps showing its source. */
function draw(el) {
  const display = el.classList.contains('math-display');
  let html;
  try {
    html = katex.renderToString(el.dataset.tex, {
      output: 'mathml', displayMode: display, throwOnError: true, trust: false, strict: 'ignore', maxExpand: 500, maxSize: 50,
    });
  } catch (e) {
    el.classList.add('math-error');
    el.title = String(e?.message || e).slice(0, 300);
    return;
  }
  const frag = DOMPurify.sanitize(html, PURIFY);
  if (!frag.querySelector('math')) return;
  el.classList.add('math-done');
  el.removeAttribute('data-tex');
  el.replaceChildren(frag);
}

/** Draws every formula placeholder under `root`: now if KaTeX is loaded, else once it is. */
export function typesetMath(root) {
  const found = [...root.querySelectorAll('.math[data-tex]')];
  if (!found.length) return;
  if (katex) {
    found.forEach(draw);
    return;
  }
  load().then(() => found.forEach((el) => el.dataset.tex !== undefined && draw(el))).catch(() => {});
}
