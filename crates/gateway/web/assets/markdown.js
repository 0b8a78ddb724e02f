// Safe Markdown for agent text: the parser builds a small tree of plain objects and the renderer
// turns it into DOM nodes with createElement/textContent only. Agent text never becomes markup:
// raw HTML is shown as the characters it is, and only http(s)/mailto links are made clickable.
//
// Supported: paragraphs (single newlines kept), ATX headings, fenced and indented code blocks,
// block quotes, bullet/numbered/task lists (nested by indentation), horizontal rules, pipe
// tables, and inline code, **bold**, *italic*/_italic_, ~~strike~~, [links](url) and bare URLs.

/** Parses Markdown text into block nodes: `{t, ...}` objects (see `render`). */
export function parse(text) {
  const lines = String(text ?? '').replace(/\r\n?/g, '\n').split('\n');
  return blocks(lines, 0);
}

const FENCE = /^ {0,3}(`{3,}|~{3,})\s*([^`\s]*)[^`]*$/;
const HEADING = /^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$/;
const RULE = /^ {0,3}([-*_])(\s*\1){2,}\s*$/;
const QUOTE = /^ {0,3}>\s?(.*)$/;
const BULLET = /^(\s*)([-*+])\s+(.*)$/;
const ORDERED = /^(\s*)(\d{1,9})[.)]\s+(.*)$/;
const TABLE_SEP = /^\s*\|?\s*:?-{1,}:?\s*(\|\s*:?-{1,}:?\s*)*\|?\s*$/;

function blocks(lines, depth) {
  const out = [];
  let i = 0;
  let para = [];
  const flush = () => {
    if (para.length) out.push({ t: 'p', c: inline(para.join('\n')) });
    para = [];
  };
  while (i < lines.length) {
    const line = lines[i];
    let m;
    if (!line.trim()) {
      flush();
      i++;
    } else if ((m = FENCE.exec(line))) {
      flush();
      const close = m[1];
      const body = [];
      i++;
      while (i < lines.length && !lines[i].trimStart().startsWith(close)) body.push(lines[i++]);
      i++; // the closing fence (or the end)
      out.push({ t: 'pre', lang: m[2] || '', v: body.join('\n') });
    } else if ((m = HEADING.exec(line))) {
      flush();
      out.push({ t: 'h', level: m[1].length, c: inline(m[2]) });
      i++;
    } else if (RULE.test(line) && !para.length) {
      out.push({ t: 'hr' });
      i++;
    } else if (QUOTE.test(line)) {
      flush();
      const body = [];
      while (i < lines.length && (m = QUOTE.exec(lines[i]))) {
        body.push(m[1]);
        i++;
      }
      out.push({ t: 'quote', c: depth < 8 ? blocks(body, depth + 1) : [{ t: 'p', c: inline(body.join('\n')) }] });
    } else if (BULLET.test(line) || ORDERED.test(line)) {
      flush();
      const r = list(lines, i, depth);
      out.push(r.node);
      i = r.next;
    } else if (line.includes('|') && i + 1 < lines.length && TABLE_SEP.test(lines[i + 1]) && lines[i + 1].includes('-')) {
      flush();
      const r = table(lines, i);
      out.push(r.node);
      i = r.next;
    } else if (/^( {4}|\t)/.test(line) && !para.length) {
      const body = [];
      while (i < lines.length && (/^( {4}|\t)/.test(lines[i]) || !lines[i].trim())) body.push(lines[i++].replace(/^( {4}|\t)/, ''));
      while (body.length && !body[body.length - 1].trim()) body.pop();
      out.push({ t: 'pre', lang: '', v: body.join('\n') });
    } else {
      para.push(line);
      i++;
    }
  }
  flush();
  return out;
}

function list(lines, start, depth) {
  const first = BULLET.exec(lines[start]) || ORDERED.exec(lines[start]);
  const ordered = !BULLET.test(lines[start]);
  const indent = first[1].length;
  const node = { t: ordered ? 'ol' : 'ul', start: ordered ? Number(first[2]) : 1, items: [] };
  let i = start;
  while (i < lines.length) {
    const line = lines[i];
    const m = (ordered ? ORDERED : BULLET).exec(line);
    if (m && m[1].length === indent) {
      let text = m[3];
      let check = null;
      const task = /^\[([ xX])\]\s+(.*)$/.exec(text);
      if (task) {
        check = task[1] !== ' ';
        text = task[2];
      }
      const body = [text];
      i++;
      // Continuation lines and nested lists belong to the item while they are indented deeper.
      while (i < lines.length && lines[i].trim() && (lines[i].length - lines[i].trimStart().length) > indent) {
        body.push(lines[i].slice(Math.min(indent + 2, lines[i].length - lines[i].trimStart().length)));
        i++;
      }
      const children = depth < 8 ? blocks(body, depth + 1) : [{ t: 'p', c: inline(body.join('\n')) }];
      // A single paragraph item renders inline (a "tight" list).
      const c = children.length && children[0].t === 'p' ? [...children[0].c, ...children.slice(1)] : children;
      node.items.push({ check, c });
    } else if (!line.trim() && i + 1 < lines.length && (ordered ? ORDERED : BULLET).test(lines[i + 1])) {
      i++;
    } else {
      break;
    }
  }
  return { node, next: i };
}

function cells(line) {
  let s = line.trim();
  if (s.startsWith('|')) s = s.slice(1);
  if (s.endsWith('|') && !s.endsWith('\\|')) s = s.slice(0, -1);
  return s.split(/(?<!\\)\|/).map((c) => c.trim().replace(/\\\|/g, '|'));
}

function table(lines, start) {
  const head = cells(lines[start]);
  const align = cells(lines[start + 1]).map((c) => (c.startsWith(':') && c.endsWith(':') ? 'center' : c.endsWith(':') ? 'right' : ''));
  const rows = [];
  let i = start + 2;
  while (i < lines.length && lines[i].trim() && lines[i].includes('|')) rows.push(cells(lines[i++]));
  const width = head.length;
  const fit = (r) => Array.from({ length: width }, (_, k) => inline(r[k] ?? ''));
  return { node: { t: 'table', align, head: fit(head), rows: rows.map(fit) }, next: i };
}

const SAFE_URL = /^(https?:\/\/|mailto:)[^\s<>"]+$/i;

/** Whether a link target may become a clickable link. */
export function safeUrl(url) {
  return SAFE_URL.test(url);
}

/** Parses inline Markdown into `{t:'text'|'code'|'b'|'i'|'s'|'a'|'br', ...}` nodes. */
export function inline(text, depth = 0) {
  const out = [];
  let buf = '';
  const push = (node) => {
    if (buf) out.push({ t: 'text', v: buf });
    buf = '';
    out.push(node);
  };
  let i = 0;
  while (i < text.length) {
    const ch = text[i];
    const rest = text.slice(i);
    let m;
    if (ch === '\\' && i + 1 < text.length && /[\\`*_{}[\]()#+\-.!|~<>]/.test(text[i + 1])) {
      buf += text[i + 1];
      i += 2;
    } else if (ch === '\n') {
      push({ t: 'br' });
      i++;
    } else if (ch === '`' && (m = /^(`+)([\s\S]*?[^`])\1(?!`)/.exec(rest))) {
      push({ t: 'code', v: m[2].replace(/^ (.*) $/, '$1') });
      i += m[0].length;
    } else if (depth < 6 && (m = /^(\*\*|__)(?=\S)([\s\S]*?\S)\1/.exec(rest))) {
      push({ t: 'b', c: inline(m[2], depth + 1) });
      i += m[0].length;
    } else if (depth < 6 && (m = /^~~(?=\S)([\s\S]*?\S)~~/.exec(rest))) {
      push({ t: 's', c: inline(m[1], depth + 1) });
      i += m[0].length;
    } else if (depth < 6 && (m = /^\*(?=[^\s*])([\s\S]*?[^\s*])\*(?!\*)/.exec(rest))) {
      push({ t: 'i', c: inline(m[1], depth + 1) });
      i += m[0].length;
    } else if (depth < 6 && /[^\p{L}\p{N}]|^$/u.test(text[i - 1] ?? '') && (m = /^_(?=\S)([\s\S]*?\S)_(?![\p{L}\p{N}])/u.exec(rest))) {
      push({ t: 'i', c: inline(m[1], depth + 1) });
      i += m[0].length;
    } else if (depth < 6 && ch === '[' && (m = /^\[([^\]\n]+)\]\(\s*<?([^\s)>]+)>?(?:\s+"[^"]*")?\s*\)/.exec(rest))) {
      if (safeUrl(m[2])) push({ t: 'a', href: m[2], c: inline(m[1], depth + 1) });
      else buf += m[0];
      i += m[0].length;
    } else if ((ch === 'h' || ch === 'H') && /[\s(]|^$/.test(text[i - 1] ?? '') && (m = /^https?:\/\/[^\s<>"]+/i.exec(rest))) {
      // Trailing punctuation is not part of a bare URL.
      let url = m[0];
      while (/[.,;:!?'")\]]$/.test(url) && !(url.endsWith(')') && url.split('(').length > url.split(')').length - 1)) url = url.slice(0, -1);
      push({ t: 'a', href: url, c: [{ t: 'text', v: url }] });
      i += url.length;
    } else {
      buf += ch;
      i++;
    }
  }
  if (buf) out.push({ t: 'text', v: buf });
  return out;
}

/** Renders parsed nodes into a DocumentFragment of `doc`. */
export function render(nodes, doc = document) {
  const frag = doc.createDocumentFragment();
  for (const n of nodes) frag.append(node(n, doc));
  return frag;
}

/** Parses and renders in one go. */
export function markdown(text, doc = document) {
  return render(parse(text), doc);
}

function el(doc, tag, children, cls) {
  const e = doc.createElement(tag);
  if (cls) e.className = cls;
  for (const c of children || []) e.append(node(c, doc));
  return e;
}

function node(n, doc) {
  switch (n.t) {
    case 'text':
      return doc.createTextNode(n.v);
    case 'br':
      return doc.createElement('br');
    case 'code': {
      const e = doc.createElement('code');
      e.textContent = n.v;
      return e;
    }
    case 'b':
      return el(doc, 'strong', n.c);
    case 'i':
      return el(doc, 'em', n.c);
    case 's':
      return el(doc, 'del', n.c);
    case 'a': {
      const e = el(doc, 'a', n.c);
      e.href = n.href;
      e.target = '_blank';
      e.rel = 'noopener noreferrer nofollow';
      return e;
    }
    case 'p':
      return el(doc, 'p', n.c);
    case 'h':
      return el(doc, `h${Math.min(6, n.level + 2)}`, n.c, 'md-h');
    case 'hr':
      return doc.createElement('hr');
    case 'quote':
      return el(doc, 'blockquote', n.c);
    case 'pre': {
      const pre = doc.createElement('pre');
      const code = doc.createElement('code');
      code.textContent = n.v;
      if (n.lang) code.dataset.lang = n.lang;
      pre.append(code);
      return pre;
    }
    case 'ul':
    case 'ol': {
      const e = doc.createElement(n.t);
      if (n.t === 'ol' && n.start !== 1) e.start = n.start;
      for (const item of n.items) {
        const li = el(doc, 'li', item.c);
        if (item.check !== null) {
          li.className = 'task';
          li.prepend(doc.createTextNode(item.check ? '☑ ' : '☐ '));
        }
        e.append(li);
      }
      return e;
    }
    case 'table': {
      const wrap = doc.createElement('div');
      wrap.className = 'md-table';
      const t = doc.createElement('table');
      const thead = doc.createElement('thead');
      const hr = doc.createElement('tr');
      n.head.forEach((c, k) => {
        const th = el(doc, 'th', c);
        if (n.align[k]) th.style.textAlign = n.align[k];
        hr.append(th);
      });
      thead.append(hr);
      const tbody = doc.createElement('tbody');
      for (const r of n.rows) {
        const tr = doc.createElement('tr');
        r.forEach((c, k) => {
          const td = el(doc, 'td', c);
          if (n.align[k]) td.style.textAlign = n.align[k];
          tr.append(td);
        });
        tbody.append(tr);
      }
      t.append(thead, tbody);
      wrap.append(t);
      return wrap;
    }
    default:
      return doc.createTextNode('');
  }
}
