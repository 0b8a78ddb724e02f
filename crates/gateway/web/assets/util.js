// Small pure helpers shared by the client modules (no DOM access except in `h`).

/**
 * Builds an element: `h('button', {class: 'x', onclick: f, 'aria-label': 'Send'}, 'text', child)`.
 * Strings become text nodes, never markup.
 */
export function h(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') e.addEventListener(k.slice(2), v);
    else if (k === 'class') e.className = v;
    else if (k === 'dataset') Object.assign(e.dataset, v);
    else if (k in e && typeof v !== 'string') e[k] = v;
    else e.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

/** Frame types the gateway appends to its outbox (docs/protocol.md §3). */
const DURABLE = new Set([
  'message', 'message.start', 'message.stop', 'message.deleted', 'commentary', 'tool.start', 'tool.end',
  'notification', 'channel.list', 'channel.created', 'channel.renamed', 'channel.deleted', 'agent.busy',
  'agent.idle', 'message.state', 'message.transcript', 'media.offer',
]);

/** Whether a received frame is durable, i.e. has a cursor (known or counted). */
export function isDurable(frame) {
  if (frame.type === 'read.receipt') return Boolean(frame.payload && frame.payload.device_id);
  if (frame.type === 'media.pull') return false;
  return DURABLE.has(frame.type) || frame.type.startsWith('picker.');
}

/** The key of a lane: a chat and an optional thread. */
export function laneKey(chatId, threadId) {
  return `${chatId}|${threadId || ''}`;
}

/**
 * Scores how well a typed command prefix matches a name (higher is better, 0 = no match):
 * a prefix beats a substring, which beats the letters in order.
 */
export function fuzzyScore(query, name) {
  const q = query.toLowerCase().replace(/^\//, '');
  const n = name.toLowerCase().replace(/^\//, '');
  if (!q) return 1;
  if (n.startsWith(q)) return 1000 - n.length;
  const at = n.indexOf(q);
  if (at >= 0) return 500 - at;
  let j = 0;
  let gaps = 0;
  for (let i = 0; i < n.length && j < q.length; i++) {
    if (n[i] === q[j]) j++;
    else if (j > 0) gaps++;
  }
  return j === q.length && n[0] === q[0] ? Math.max(1, 200 - gaps) : 0;
}

/** Catalog entries matching a typed `/prefix`, best first. */
export function matchCommands(catalog, typed) {
  const scored = [];
  for (const cmd of catalog) {
    const best = Math.max(fuzzyScore(typed, cmd.name), ...(cmd.aliases || []).map((a) => fuzzyScore(typed, a) - 1));
    if (best > 0) scored.push([best, cmd]);
  }
  scored.sort((a, b) => b[0] - a[0] || a[1].name.localeCompare(b[1].name));
  return scored.map(([, cmd]) => cmd);
}

/** "1.2 MB" */
export function formatBytes(n) {
  if (!Number.isFinite(n)) return '';
  if (n < 1024) return `${n} B`;
  const units = ['KB', 'MB', 'GB', 'TB'];
  let v = n;
  let u = -1;
  do {
    v /= 1024;
    u++;
  } while (v >= 1024 && u < units.length - 1);
  return `${v < 10 ? v.toFixed(1) : Math.round(v)} ${units[u]}`;
}

/** "14:05", or "Mon 14:05" / "3 Mar 14:05" for older times. */
export function formatTime(ts, now = Date.now()) {
  if (!ts) return '';
  const d = new Date(ts);
  const time = d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
  const age = now - ts;
  if (age < 20 * 3600 * 1000 && new Date(now).getDate() === d.getDate()) return time;
  if (age < 6 * 86400 * 1000) return `${d.toLocaleDateString([], { weekday: 'short' })} ${time}`;
  return `${d.toLocaleDateString([], { day: 'numeric', month: 'short' })} ${time}`;
}

/** The runtime footer: "demo:echo · 12% ctx · 1.2 s · $0.0012 · ~/work". */
export function runtimeFooter(rt) {
  if (!rt) return '';
  const parts = [];
  if (rt.model) parts.push(rt.model);
  if (Number.isFinite(rt.context_pct)) parts.push(`${rt.context_pct}% ctx`);
  if (Number.isFinite(rt.latency)) parts.push(`${rt.latency.toFixed(1)} s`);
  if (Number.isFinite(rt.cost)) parts.push(`$${rt.cost < 0.01 ? rt.cost.toFixed(4) : rt.cost.toFixed(2)}`);
  if (rt.cwd) parts.push(rt.cwd);
  return parts.join(' · ');
}

// Raster image types, the only media this page ever shows itself (as <img>). SVG and HTML can
// carry scripts: anything else becomes a blob of no active type and is only ever downloaded.
const RASTER = new Set(['image/png', 'image/jpeg', 'image/gif', 'image/webp', 'image/bmp', 'image/avif',
  'image/heif', 'image/tiff', 'image/jxl', 'image/vnd.microsoft.icon']);

/** Whether a MIME type is a raster image this page may show inline. */
export function isRaster(mime) {
  return RASTER.has(String(mime || '').toLowerCase());
}

/** Whether media the gateway described may be shown inline: an image it verified by its bytes. */
export function showsInline(info) {
  return info.kind === 'image' && isRaster(info.mime);
}

/** The type of the blob made of media bytes: the MIME type only for an inline image. */
export function blobType(info) {
  return showsInline(info) ? String(info.mime).toLowerCase() : 'application/octet-stream';
}

/** The media kind of a MIME type, as the protocol names it. */
export function mediaKind(mime) {
  if (/^image\//.test(mime)) return 'image';
  if (/^video\//.test(mime)) return 'video';
  if (/^audio\//.test(mime)) return 'audio';
  return 'file';
}

/** Splits a search snippet's `[match]` marks into `{text, mark}` parts. */
export function snippetParts(snippet) {
  const parts = [];
  const re = /\[([^\][]*)\]/g;
  let last = 0;
  let m;
  while ((m = re.exec(snippet))) {
    if (m.index > last) parts.push({ text: snippet.slice(last, m.index), mark: false });
    parts.push({ text: m[1], mark: true });
    last = m.index + m[0].length;
  }
  if (last < snippet.length) parts.push({ text: snippet.slice(last), mark: false });
  return parts;
}

/** A random id with a prefix: `web_3f9c…`. */
export function randomId(prefix, bytes = 9) {
  const a = new Uint8Array(bytes);
  crypto.getRandomValues(a);
  return prefix + Array.from(a, (b) => b.toString(16).padStart(2, '0')).join('');
}

/** A readable default device name from the browser: "Chrome on Android". */
export function defaultDeviceName(ua = navigator.userAgent) {
  const browser = /Edg\//.test(ua) ? 'Edge' : /Firefox\//.test(ua) ? 'Firefox' : /Chrome\//.test(ua) ? 'Chrome' : /Safari\//.test(ua) ? 'Safari' : 'Browser';
  const os = /Android/.test(ua) ? 'Android' : /iPhone|iPad/.test(ua) ? 'iOS' : /Mac OS X/.test(ua) ? 'macOS' : /Windows/.test(ua) ? 'Windows' : /Linux/.test(ua) ? 'Linux' : '';
  return `Iris Web (${browser}${os ? ` on ${os}` : ''})`;
}
