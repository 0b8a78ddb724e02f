// Markdown made harmless for a downloaded export, by the same rules as the gateway's own export
// (src/admin/archive/harmless.rs): whatever later opens the file (an editor's preview, a static
// site, a Markdown viewer in a browser) must not run or fetch anything a message carries. Read by
// markdown-it (CommonMark, as the gateway reads it with pulldown-cmark), the text keeps its
// formatting, but
// - raw HTML (blocks and inline tags, comments) is escaped and shows as text;
// - a link to a `javascript:`, `vbscript:`, `data:` or `file:` address keeps its text only,
//   followed by `(link removed)`;
// - an image from a remote address (any scheme, or `//host`) becomes a plain link to it (an image
//   of a scheme above, only its description); relative images stay.
// Code spans and code blocks are left as they are: what they hold shows as text already.
//
// markdown-it gives source lines for blocks but no offsets inside a paragraph, so the rules that
// make links, images and inline HTML are wrapped to note where each began and ended in the
// paragraph's text; the paragraph is then rewritten and put back on its lines with the prefixes
// (quote marks, list indentation) those lines had.

import MarkdownIt from './vendor/markdown-it/markdown-it.min.mjs';

const UNSAFE_SCHEMES = ['javascript:', 'vbscript:', 'data:', 'file:'];

/** The parser: CommonMark with raw HTML recognised (to escape it) and every address kept as a link. */
const md = new MarkdownIt('commonmark', { html: true });
md.validateLink = () => true;
for (const name of ['link', 'image', 'autolink', 'html_inline']) {
  const rule = md.inline.ruler.__rules__.find((r) => r.name === name);
  const parse = rule.fn;
  md.inline.ruler.at(name, (state, silent) => {
    const start = state.pos;
    const first = state.tokens.length;
    const ok = parse(state, silent);
    if (ok && !silent) {
      const made = state.tokens.slice(first).find((t) => ['link_open', 'image', 'html_inline'].includes(t.type));
      if (made) made.meta = { ...made.meta, span: [start, state.pos], src: state.src };
    }
    return ok;
  });
}

/** `text` (Markdown) made harmless: see the module's comment. */
export function harmless(text) {
  const source = String(text).replace(/\r\n?/g, '\n');
  const lines = source.split('\n');
  // Rewritten lines by their first line number, applied from the end so numbers stay true.
  const rewrites = [];
  for (const token of md.parse(source, {})) {
    if (!token.map) continue;
    let content = null;
    if (token.type === 'html_block') content = escapeHtml(token.content.replace(/\n$/, ''));
    else if (token.type === 'inline') content = rewriteInline(token);
    if (content !== null) rewrites.push({ map: token.map, before: token.content.replace(/\n$/, ''), after: content });
  }
  for (const { map, before, after } of rewrites.reverse()) {
    const old = before.split('\n');
    const fresh = after.split('\n');
    const out = [];
    for (let k = 0; k < old.length && map[0] + k < map[1]; k++) {
      if (k >= fresh.length) continue;
      const line = lines[map[0] + k];
      const at = old[k] ? line.indexOf(old[k]) : line.length;
      const prefix = at >= 0 ? line.slice(0, at) : '';
      // The last line takes whatever the new text has left (a rewrite only ever joins lines).
      out.push(prefix + (k === old.length - 1 ? fresh.slice(k).join(' ') : fresh[k]));
    }
    lines.splice(map[0], Math.min(old.length, map[1] - map[0]), ...out);
  }
  return lines.join('\n');
}

/** An inline token's text with its unsafe links, remote images and raw HTML replaced, or null when it has none. */
function rewriteInline(inline) {
  const src = inline.content;
  const edits = [];
  const kids = inline.children || [];
  for (let i = 0; i < kids.length; i++) {
    const t = kids[i];
    const span = t.meta && t.meta.src === src ? t.meta.span : null;
    if (!span) continue;
    if (t.type === 'html_inline') {
      edits.push([span, escapeHtml(t.content)]);
    } else if (t.type === 'link_open' && isUnsafe(t.attrGet('href'))) {
      const close = closing(kids, i);
      edits.push([span, replacement(plainText(kids.slice(i + 1, close)), null)]);
      i = close;
    } else if (t.type === 'image' && isRemote(t.attrGet('src'))) {
      const url = t.attrGet('src');
      edits.push([span, replacement(plainText(t.children || []), isUnsafe(url) ? null : url)]);
    }
  }
  if (!edits.length) return null;
  let out = '';
  let at = 0;
  for (const [[start, end], text] of edits) {
    if (start < at) continue;
    out += src.slice(at, start) + text;
    at = end;
  }
  return out + src.slice(at);
}

/** The index of the `link_close` that ends the link opened at `open`. */
function closing(kids, open) {
  let depth = 0;
  for (let j = open; j < kids.length; j++) {
    if (kids[j].type === 'link_open') depth++;
    else if (kids[j].type === 'link_close' && --depth === 0) return j;
  }
  return kids.length - 1;
}

/** The words of a link's or image's description: its text and code, breaks as spaces. */
function plainText(tokens) {
  return tokens.map((t) => {
    if (t.type === 'text' || t.type === 'code_inline') return t.content;
    if (t.type === 'softbreak' || t.type === 'hardbreak') return ' ';
    if (t.type === 'image') return plainText(t.children || []);
    return '';
  }).join('');
}

/** What a removed link or image leaves: its description as text, a remote image's address as a link. */
function replacement(label, link) {
  const shown = escapeMarkdown(label.trim());
  if (link !== null) return `[${shown || 'image'}](<${link.replace(/[<>\n]/g, '')}>)`;
  return shown ? `${shown} (link removed)` : '(link removed)';
}

/** Whether a link's address uses a scheme the export drops (read as browsers read it). */
function isUnsafe(url) {
  // Control characters and spaces are what a browser skips in a scheme.
  // eslint-disable-next-line no-control-regex
  const squeezed = String(url || '').replace(/[\s\u0000-\u001f\u007f-\u009f]/g, '').slice(0, 16).toLowerCase();
  return UNSAFE_SCHEMES.some((s) => squeezed.startsWith(s));
}

/** Whether an image's address is fetched from elsewhere: it has a scheme, or is `//host/…`. */
function isRemote(url) {
  const u = String(url || '').trim();
  if (u.startsWith('//') || u.startsWith('\\\\')) return true;
  const colon = u.indexOf(':');
  return colon > 0 && /^[A-Za-z0-9+.-]+$/.test(u.slice(0, colon));
}

/** HTML as text: `<` and `>` escaped, `&` too so an escape in the source stays visible. */
function escapeHtml(html) {
  return html.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;');
}

/** Text that Markdown shows as it is. */
function escapeMarkdown(text) {
  // eslint-disable-next-line no-control-regex
  return text.replace(/[\\`*_[\]()<>!#|~&]/g, '\\$&').replace(/[\u0000-\u001f\u007f-\u009f]/g, ' ');
}
