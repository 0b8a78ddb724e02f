// The Files view (menu › Files…), in the `#files` dialog: the chat's agent's working directory,
// read-only (`files.list`, `files.read`, `files.pull`; docs/protocol.md §9). A directory lists
// its entries (folders first; names with control characters shown escaped, as the gateway's
// `label`); a text file opens highlighted by code.js (highlight.js, loaded only then), an image
// inline, and any file downloads. The bytes of images and downloads come as a pull, queued behind
// the page's media pulls (binary frames carry no id); only a raster image the gateway verified
// becomes a blob of its own type, anything else `application/octet-stream`.

import { highlightBlock } from './code.js';
import { icon } from './icons.js';
import { $, app, currentLane } from './state.js';
import { blobType, formatBytes, h } from './util.js';

/** The view's current showing; a late answer for an earlier one is dropped. */
let showing = null;

/**
 * Opens the view on the chat's agent's working directory, or on the file at `path` (relative to
 * it, or absolute inside it, as a tool call names it).
 */
export function showFiles(path = null) {
  const dialog = $('files');
  const view = {
    agent: null,
    crumbs: h('nav', { class: 'files-crumbs', 'aria-label': 'Folder' }),
    body: h('div', { class: 'files-body', 'aria-live': 'polite' }),
  };
  showing = view;
  dialog.replaceChildren(
    h('div', { class: 'settings-head' },
      h('h2', { id: 'files-title' }, 'Files'),
      h('button', { type: 'button', class: 'icon', 'aria-label': 'Close files', onclick: () => dialog.close() }, icon('x'))),
    view.crumbs,
    view.body,
  );
  dialog.onclose = () => {
    if (showing === view) showing = null;
  };
  if (!dialog.open) dialog.showModal();
  if (path) openFile(view, path);
  else openDir(view, '');
}

/** Asks the gateway; resolves with the payload, or shows the refusal in the view. */
async function ask(view, type, payload) {
  const lane = currentLane();
  try {
    const body = view.agent ? { agent: view.agent, ...payload } : payload;
    const res = await app.conn.request(type, body, { chat_id: lane.chat_id, thread_id: lane.thread_id });
    return showing === view ? res.payload : null;
  } catch (e) {
    if (showing === view) view.body.replaceChildren(h('p', { class: 'files-error', role: 'alert' }, e.message || 'Failed.'));
    return null;
  }
}

/** The path links above the view: the agent's directory, then each folder down to `path`. */
function crumbs(view, path, file = false) {
  const parts = path ? path.split('/') : [];
  const links = [h('button', { type: 'button', class: 'link', onclick: () => openDir(view, '') }, view.agent || 'Files')];
  parts.forEach((part, i) => {
    const to = parts.slice(0, i + 1).join('/');
    const last = i === parts.length - 1;
    links.push(h('span', { 'aria-hidden': 'true' }, ' / '));
    links.push(last && file
      ? h('span', { class: 'files-current' }, escapeName(part))
      : h('button', { type: 'button', class: 'link', onclick: () => openDir(view, to) }, escapeName(part)));
  });
  view.crumbs.replaceChildren(...links);
}

/** A name as shown: control characters escaped, as the gateway's `label` does. */
function escapeName(name) {
  // eslint-disable-next-line no-control-regex
  return name.replace(/[\u0000-\u001f\u007f]/g, (c) => (c === '\n' ? '\\n' : `\\u{${c.charCodeAt(0).toString(16)}}`));
}

async function openDir(view, path) {
  const listing = await ask(view, 'files.list', { path });
  if (!listing) return;
  view.agent = listing.agent;
  crumbs(view, listing.path);
  const join = (name) => (listing.path ? `${listing.path}/${name}` : name);
  const items = listing.entries.map((e) => {
    const open = e.kind === 'dir' ? () => openDir(view, join(e.name)) : () => openFile(view, join(e.name));
    const usable = e.kind !== 'other';
    return h('li', { class: `files-entry kind-${e.kind}` },
      h('button', { type: 'button', class: 'files-open', disabled: !usable, onclick: open },
        h('span', { class: 'files-name' }, `${e.label || e.name}${e.kind === 'dir' ? '/' : ''}`),
        h('span', { class: 'files-size' }, e.kind === 'file' ? formatBytes(e.size) : e.kind === 'dir' ? '' : e.kind)));
  });
  const notes = [];
  if (listing.truncated) notes.push(`Showing the first ${listing.entries.length} of ${listing.total} entries.`);
  if (listing.hidden) notes.push(`${listing.hidden} hidden (.git and secret files).`);
  view.body.replaceChildren(
    items.length ? h('ul', { class: 'files-list', 'aria-label': 'Entries' }, items) : h('p', { class: 'settings-hint' }, 'This folder is empty.'),
    notes.length ? h('p', { class: 'settings-hint files-note' }, notes.join(' ')) : '',
  );
}

async function openFile(view, path) {
  const file = await ask(view, 'files.read', { path });
  if (!file) return;
  view.agent = file.agent;
  crumbs(view, file.path, true);
  const name = file.path.split('/').pop();
  const download = h('button', { type: 'button', class: 'secondary', onclick: () => save(view, file, name) }, 'Download');
  const meta = h('p', { class: 'settings-hint' }, `${formatBytes(file.size)} · ${file.mime}`);
  if (file.kind === 'text') {
    const code = h('code', {}, file.text || '');
    const ext = name.includes('.') ? name.split('.').pop() : '';
    highlightBlock(code, ext);
    const cut = file.next_offset ? h('p', { class: 'settings-hint' }, `Showing the first ${formatBytes(file.next_offset - file.offset)}.`) : '';
    view.body.replaceChildren(meta, h('pre', { class: 'files-text' }, code), cut, download);
    return;
  }
  if (file.kind === 'image') {
    const img = h('img', { class: 'files-image', alt: escapeName(name) });
    view.body.replaceChildren(meta, img, download);
    const blob = await pull(file.agent, file.path).catch((e) => {
      view.body.append(h('p', { class: 'files-error', role: 'alert' }, e.message));
      return null;
    });
    if (blob && showing === view) img.src = URL.createObjectURL(blob);
    return;
  }
  view.body.replaceChildren(meta, h('p', { class: 'settings-hint' }, 'This file is not text.'), download);
}

async function save(view, file, name) {
  try {
    const blob = await pull(file.agent, file.path, 'application/octet-stream');
    const url = URL.createObjectURL(blob);
    const a = h('a', { href: url, download: name, hidden: true });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 60000);
  } catch (e) {
    if (showing === view) view.body.append(h('p', { class: 'files-error', role: 'alert' }, e.message));
  }
}

/** A file's bytes as a blob, pulled after the page's other pulls. */
function pull(agent, path, type = null) {
  const media = app.media;
  const run = () => pullNow(agent, path, type);
  const p = media.pulls.then(run, run);
  media.pulls = p.catch(() => {});
  return p;
}

function pullNow(agent, path, type) {
  const conn = app.conn;
  return new Promise((resolve, reject) => {
    let header = null;
    const parts = [];
    const finish = (fn) => {
      conn.binarySink = null;
      fn();
      return true;
    };
    conn.binarySink = (buf) => parts.push(buf);
    conn.stream('files.pull', { agent, path }, (f) => {
      if (f.type === 'files.pull') {
        header = f.payload;
        return false;
      }
      if (f.type === 'media.pull.end') {
        if (!f.payload.ok) return finish(() => reject(new Error('The transfer failed.')));
        return finish(() => resolve(new Blob(parts, { type: type || blobType(header || {}) })));
      }
      if (f.type === 'error') return finish(() => reject(new Error(f.payload.message)));
      return false;
    });
  });
}
