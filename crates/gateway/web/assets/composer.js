// The composer at the bottom of the page: the message box (autosize, Enter to send), sending
// (with attachments and the "new thread" toggle, or as the edit rewind.js opened), steering and stopping the agent, the slash
// command drawer with its catalog and keyboard navigation, and the attachment tray (file picker,
// paste, upload progress). `updateComposer` brings the Send button in line with the lane's busy
// state and pending uploads; the transcript and the connection state call it.

import { icon } from './icons.js';
import { keep, newClientId, trySend } from './outbox.js';
import { takeEdit } from './rewind.js';
import { $, app, currentLane } from './state.js';
import { showLane } from './transcript.js';
import { popupMenu, request, toast } from './ui.js';
import { formatBytes, h, isRaster, matchCommands } from './util.js';

const input = $('composer-input');

export function initComposer() {
  input.addEventListener('input', () => {
    autosize();
    updateDrawer();
  });
  input.addEventListener('keydown', onKeydown);
  $('composer').addEventListener('submit', (ev) => {
    ev.preventDefault();
    sendMessage();
  });
  $('stop').addEventListener('click', () => request('agent.stop', {}, currentLane()));
  $('steer').addEventListener('click', steer);
  $('auto-thread').addEventListener('click', toggleAutoThread);
  $('commands').addEventListener('click', toggleCommands);
  $('composer-more').addEventListener('click', (ev) => {
    ev.stopPropagation();
    moreMenu(ev.currentTarget);
  });
  $('attach').addEventListener('click', () => $('file-input').click());
  $('file-input').addEventListener('change', (ev) => {
    for (const file of ev.target.files) addAttachment(file);
    ev.target.value = '';
  });
  document.addEventListener('paste', (ev) => {
    if (app.conn && ev.clipboardData && ev.clipboardData.files.length && document.activeElement === input) {
      for (const file of ev.clipboardData.files) addAttachment(file);
    }
  });
}

export function updateComposer() {
  const lane = app.current ? currentLane() : null;
  const busy = lane && lane.busy;
  const send = $('send');
  send.textContent = busy ? 'Queue' : 'Send';
  send.setAttribute('aria-label', busy ? 'Queue: send after the current answer' : 'Send');
  const uploading = app.attachments.some((a) => !a.ref && !a.error);
  send.disabled = uploading;
}

function toggleAutoThread() {
  const b = $('auto-thread');
  b.setAttribute('aria-pressed', String(b.getAttribute('aria-pressed') !== 'true'));
}

function toggleCommands() {
  if (!$('drawer').hidden) hideDrawer();
  else {
    if (!input.value) input.value = '/';
    updateDrawer(true);
    input.focus();
  }
}

/** Narrow screens: the composer's secondary actions, behind "+" so the message box gets the width. */
function moreMenu(anchor) {
  const thread = $('auto-thread').getAttribute('aria-pressed') === 'true';
  popupMenu(anchor, [
    ['Attach files', () => $('file-input').click()],
    ['Send as a new thread', toggleAutoThread, { checked: thread }],
    ['Slash commands', toggleCommands],
  ]);
}

function autosize() {
  input.style.height = 'auto';
  input.style.height = `${Math.min(input.scrollHeight, 200)}px`;
}

function onKeydown(ev) {
  const drawer = $('drawer');
  if (!drawer.hidden) {
    const opts = [...drawer.querySelectorAll('[role=option]')];
    const at = opts.findIndex((o) => o.getAttribute('aria-selected') === 'true');
    if (ev.key === 'ArrowDown' || ev.key === 'ArrowUp') {
      ev.preventDefault();
      const next = (at + (ev.key === 'ArrowDown' ? 1 : opts.length - 1)) % opts.length;
      opts.forEach((o, i) => o.setAttribute('aria-selected', String(i === next)));
      opts[next].scrollIntoView({ block: 'nearest' });
      input.setAttribute('aria-activedescendant', opts[next].id);
      return;
    }
    // Enter on a fully typed command sends it; otherwise Enter or Tab completes the highlighted one.
    const typed = input.value.trim();
    const complete = app.catalog.some((c) => c.name === typed || (c.aliases || []).includes(typed));
    if ((ev.key === 'Tab' || (ev.key === 'Enter' && !ev.shiftKey && !complete)) && at >= 0) {
      ev.preventDefault();
      pickCommand(opts[at].dataset.name);
      return;
    }
    if (ev.key === 'Escape') {
      // Esc closes the drawer only, not an edit under way (rewind.js).
      ev.stopImmediatePropagation();
      hideDrawer();
      return;
    }
  }
  if (ev.key === 'Enter' && !ev.shiftKey && !ev.isComposing) {
    ev.preventDefault();
    $('composer').requestSubmit();
  }
}

async function sendMessage() {
  const text = input.value.trim();
  const ready = app.attachments.filter((a) => a.ref);
  if (!text && !ready.length) return;
  if (app.attachments.some((a) => !a.ref && !a.error)) return;
  const lane = currentLane();
  const auto = $('auto-thread').getAttribute('aria-pressed') === 'true';
  const payload = { text, client_id: newClientId() };
  const editOf = takeEdit();
  if (editOf) payload.edit_of = editOf;
  if (ready.length) payload.media_refs = ready.map((a) => a.ref);
  if (auto && !lane.thread_id && text && !text.startsWith('/')) payload.auto_thread = true;
  input.value = '';
  autosize();
  hideDrawer();
  const sentAttachments = app.attachments;
  app.attachments = [];
  renderTray();
  // Kept (and shown as sending) until its echo: sent again with its client_id when the
  // connection is back, however the first try ended.
  const entry = keep(lane, payload);
  try {
    const echo = await trySend(entry);
    if (echo && payload.auto_thread) {
      $('auto-thread').setAttribute('aria-pressed', 'false');
      if (echo.thread_id) showLane(echo.chat_id, echo.thread_id);
    }
  } catch (e) {
    input.value = text;
    autosize();
    app.attachments = sentAttachments;
    renderTray();
    toast(`Not sent: ${e.message}`, 'error');
  }
}

async function steer() {
  const text = input.value.trim();
  if (!text) {
    input.placeholder = 'Tell the agent what to do instead, then press Steer';
    input.focus();
    return;
  }
  const res = await request('agent.steer', { text }, currentLane());
  if (res) {
    input.value = '';
    input.placeholder = 'Message';
    autosize();
  }
}

// ----- slash-command drawer ----------------------------------------------------------------

/**
 * Loads the command list of the lane shown (its agent's commands follow the gateway's). Called at
 * sync, when the drawer opens, on a lane switch and when a turn starts or ends: the gateway has no
 * frame that announces an agent's new commands, and an agent announces them when its session
 * starts, i.e. during a turn. `forText`: the text typed when the drawer asked (see `updateDrawer`).
 */
export async function loadCatalog(forText = null) {
  const lane = currentLane();
  try {
    const res = await app.conn.request('commands.catalog', {}, lane);
    if (lane !== currentLane()) return;
    app.catalog = res.payload.commands || [];
    app.catalogLoaded = true;
    // Asked for what is still typed: a command the older list lacked left the drawer closed.
    if (!$('drawer').hidden || (forText !== null && input.value === forText)) {
      updateDrawer(!/^\/\S*$/.test(input.value), false);
    }
  } catch {
    app.catalogLoaded = false;
  }
}

/** Shows the commands matching what is typed (all with `showAll`); `refresh` asks for the list again. */
function updateDrawer(showAll = false, refresh = true) {
  const text = input.value;
  const m = /^(\/\S*)$/.exec(text);
  if (!showAll && !m) {
    hideDrawer();
    return;
  }
  // Opening the drawer asks again: the agent may have announced commands since.
  if (refresh && $('drawer').hidden && app.conn && app.conn.online) loadCatalog(text);
  const list = showAll && !m ? app.catalog : matchCommands(app.catalog, m ? m[1] : '/');
  const drawer = $('drawer');
  if (!list.length) {
    hideDrawer();
    return;
  }
  drawer.replaceChildren(...list.map((c, i) => h('div', {
    role: 'option',
    id: `cmd-${i}`,
    class: 'cmd',
    'aria-selected': String(i === 0),
    dataset: { name: c.name },
    onmousedown: (ev) => ev.preventDefault(),
    onclick: () => pickCommand(c.name),
  }, h('span', { class: 'cmd-name' }, c.name), c.args_hint ? h('span', { class: 'cmd-args' }, ` ${c.args_hint}`) : null,
  h('span', { class: 'cmd-desc' }, c.description), c.aliases && c.aliases.length ? h('span', { class: 'cmd-alias' }, c.aliases.join(' ')) : null)));
  drawer.hidden = false;
  input.setAttribute('aria-controls', 'drawer');
  input.setAttribute('aria-activedescendant', 'cmd-0');
}

function hideDrawer() {
  $('drawer').hidden = true;
  input.removeAttribute('aria-activedescendant');
}

function pickCommand(name) {
  input.value = `${name} `;
  hideDrawer();
  autosize();
  input.focus();
}

// ----- attachments -------------------------------------------------------------------------

function addAttachment(file) {
  // A preview only of a raster image: an object URL of an SVG or HTML file would be active in
  // this page's origin.
  const a = { file, progress: 0, ref: null, error: null, url: isRaster(file.type) ? URL.createObjectURL(file) : null };
  // The echo of our own message shows this copy instead of pulling the bytes back.
  if (a.url) app.localMedia.set(`${file.name}:${file.size}`, a.url);
  app.attachments.push(a);
  renderTray();
  updateComposer();
  app.media.upload(file, (f) => {
    a.progress = f;
    if (a.bar) a.bar.value = Math.round(f * 100);
  }).then((ref) => {
    a.ref = ref;
  }, (e) => {
    a.error = e.message;
    toast(`${file.name}: ${e.message}`, 'error');
  }).finally(() => {
    renderTray();
    updateComposer();
  });
}

function renderTray() {
  const tray = $('tray');
  tray.hidden = app.attachments.length === 0;
  tray.replaceChildren(...app.attachments.map((a) => {
    a.bar = h('progress', { max: 100, value: Math.round(a.progress * 100), 'aria-label': `Uploading ${a.file.name}` });
    const state = a.error ? h('span', { class: 'error' }, 'failed') : a.ref ? h('span', { class: 'ok', 'aria-label': 'uploaded' }, icon('check')) : a.bar;
    return h('li', { class: 'attachment', dataset: { state: a.error ? 'error' : a.ref ? 'done' : 'uploading' } },
      a.url ? h('img', { src: a.url, alt: '' }) : h('span', { class: 'file-icon', 'aria-hidden': 'true' }, icon('file')),
      h('span', { class: 'att-name' }, a.file.name), h('span', { class: 'att-size' }, formatBytes(a.file.size)), state,
      h('button', { type: 'button', class: 'icon', 'aria-label': `Remove ${a.file.name}`, onclick: () => { app.attachments = app.attachments.filter((x) => x !== a); renderTray(); updateComposer(); } }, icon('x')));
  }));
}
