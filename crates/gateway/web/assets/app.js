// Iris Web: the browser client. It speaks the Iris v1 protocol over /ws of the gateway that
// served it; everything it shows comes from frames (history pages, live and replayed events).
// Agent text is rendered with markdown.js, which builds DOM nodes and never parses HTML.

import { Connection } from './conn.js';
import { Media } from './media.js';
import { closeStalePickers, initPickers, onPicker } from './pickers.js';
import {
  $, app, currentLane, defaultChannel, laneOf, laneTitle, resetLane, store,
} from './state.js';
import {
  ask, closePopups, confirmDialog, popupMenu, request, toast,
} from './ui.js';
import {
  initTranscript, loadHistory, onBusy, onCommentary, onDeleted, onReceipt, onStatus, onStreamFrame, onTool, renderTitle,
  sendReceipt, sendReceipts, showLane, upsertMessage,
} from './transcript.js';
import {
  defaultDeviceName, formatBytes, formatTime, h, laneKey, matchCommands, randomId, snippetParts,
} from './util.js';
import { dropSubscription, ensureSubscription, subscriptionPayload, webPushAvailable } from './webpush.js';

// ----- start ---------------------------------------------------------------------------------

function deviceId() {
  let id = store.getItem('iris.device_id');
  if (!id) {
    id = randomId('web_');
    store.setItem('iris.device_id', id);
  }
  return id;
}

function tokenFromFragment() {
  const params = new URLSearchParams(location.hash.replace(/^#/, ''));
  const token = params.get('token');
  if (token !== null) {
    // The token must not linger in the address bar or the history.
    history.replaceState(null, '', location.pathname + location.search);
  }
  return token;
}

/** A notification click opens the client at `#chat_id=…&thread_id=…` (see sw.js). */
function laneFromFragment() {
  const params = new URLSearchParams(location.hash.replace(/^#/, ''));
  const chatId = params.get('chat_id');
  if (!chatId) return;
  store.setItem('iris.lane', JSON.stringify({ chat_id: chatId, thread_id: params.get('thread_id') || null }));
  if (!params.has('token')) history.replaceState(null, '', location.pathname + location.search);
}

function boot() {
  laneFromFragment();
  const fromFragment = tokenFromFragment();
  if (fromFragment) {
    if (store.getItem('iris.token') !== fromFragment) store.removeItem('iris.cursor');
    store.setItem('iris.token', fromFragment);
  }
  const token = store.getItem('iris.token');
  if (!token) showSignin('');
  else start(token);
}

function showSignin(message) {
  $('app').hidden = true;
  $('signin').hidden = false;
  $('signin-error').textContent = message || '';
  $('signin-name').value = store.getItem('iris.device_name') || defaultDeviceName();
  $('signin-token').focus();
}

$('signin-form').addEventListener('submit', (ev) => {
  ev.preventDefault();
  const token = $('signin-token').value.trim();
  if (!token) return;
  const name = $('signin-name').value.trim();
  if (name) store.setItem('iris.device_name', name);
  if (store.getItem('iris.token') !== token) store.removeItem('iris.cursor');
  store.setItem('iris.token', token);
  $('signin-token').value = '';
  start(token);
});

function start(token) {
  $('signin').hidden = true;
  $('app').hidden = false;
  const saved = JSON.parse(store.getItem('iris.lane') || 'null');
  app.current = saved && saved.chat_id ? saved : { chat_id: 'default', thread_id: null };
  app.conn = new Connection({
    url: `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}${location.pathname.replace(/[^/]*$/, '')}ws`,
    token,
    deviceId: deviceId(),
    deviceName: store.getItem('iris.device_name') || defaultDeviceName(),
    storage: store,
    onFrame,
    onState,
    onHello,
    onSynced,
  });
  app.media = new Media(app.conn);
  showLane(app.current.chat_id, app.current.thread_id);
  app.conn.start();
}

function signOut() {
  if (app.conn) app.conn.stop();
  store.removeItem('iris.token');
  store.removeItem('iris.cursor');
  location.reload();
}

// ----- connection state --------------------------------------------------------------------

function onHello(ack) {
  setDirectory(ack.channels || []);
  if (!app.channels.has(app.current.thread_id || app.current.chat_id)) {
    showLane(defaultChannel().chat_id, null);
  }
  app.toastBudget = 3;
  app.webpushKey = (ack.server_caps && ack.server_caps.webpush_key) || null;
}

function onSynced(done) {
  if (!app.catalogLoaded) loadCatalog();
  refreshWebPush();
  const lane = currentLane();
  if (done.gap || !lane.historyLoaded) {
    if (done.gap) for (const l of app.lanes.values()) resetLane(l);
    loadHistory(currentLane());
  }
  sendReceipts(currentLane());
}

let bannerTimer = null;

function onState(state) {
  const banner = $('banner');
  const label = $('conn-state');
  clearInterval(bannerTimer);
  banner.className = 'banner';
  banner.replaceChildren();
  document.body.dataset.conn = state.name;
  switch (state.name) {
    case 'online':
      banner.hidden = true;
      label.textContent = 'Connected';
      break;
    case 'connecting':
    case 'syncing':
      label.textContent = state.name === 'syncing' ? 'Syncing…' : 'Connecting…';
      banner.hidden = true;
      break;
    case 'restarting':
      banner.hidden = false;
      banner.classList.add('warn', 'restarting');
      banner.append(h('strong', {}, 'Gateway restarting'), ' — reconnecting when it is back…');
      label.textContent = 'Gateway restarting';
      break;
    case 'offline': {
      banner.hidden = false;
      banner.classList.add('warn', 'offline');
      const text = h('span', {});
      const tick = () => {
        const s = Math.max(0, Math.ceil((state.retryAt - Date.now()) / 1000));
        text.textContent = s > 0 ? `Connection lost. Reconnecting in ${s} s…` : 'Connection lost. Reconnecting…';
      };
      tick();
      bannerTimer = setInterval(tick, 500);
      banner.append(text, h('button', { type: 'button', class: 'link', onclick: () => app.conn.connectNow() }, 'Retry now'));
      label.textContent = 'Offline';
      break;
    }
    case 'replaced':
      banner.hidden = false;
      banner.classList.add('warn');
      banner.append('Iris is open in another tab or window. ', h('button', { type: 'button', class: 'link', onclick: () => app.conn.connectNow() }, 'Use here'));
      label.textContent = 'Paused';
      break;
    case 'auth':
      app.conn.stop();
      showSignin(state.message === 'this device was revoked'
        ? 'This browser was removed from the gateway. Ask its owner to pair it again.'
        : `The gateway refused the token (${state.message}).`);
      if (state.message === 'this device was revoked') store.removeItem('iris.token');
      break;
    case 'unsupported':
      banner.hidden = false;
      banner.classList.add('error');
      banner.textContent = `This gateway cannot be used: ${state.message}`;
      break;
    default:
      break;
  }
  updateComposer();
}

// ----- channels ----------------------------------------------------------------------------

function setDirectory(list) {
  app.channels = new Map(list.map((c) => [c.chat_id, c]));
  renderSidebar();
  renderTitle();
}

function renderSidebar() {
  const ul = $('channels');
  ul.replaceChildren();
  const all = [...app.channels.values()];
  const tops = all.filter((c) => c.kind !== 'thread');
  tops.sort((a, b) => (b.kind === 'default') - (a.kind === 'default'));
  for (const c of tops) {
    const li = channelRow(c, c.chat_id, null);
    const threads = all.filter((t) => t.kind === 'thread' && t.parent_chat_id === c.chat_id);
    if (threads.length) {
      const sub = h('ul', { class: 'threads' });
      for (const t of threads) sub.append(channelRow(t, c.chat_id, t.chat_id));
      li.append(sub);
    }
    ul.append(li);
  }
}

function channelRow(c, chatId, threadId) {
  const lane = app.lanes.get(laneKey(chatId, threadId));
  const current = app.current && app.current.chat_id === chatId && (app.current.thread_id || null) === threadId;
  const open = h(
    'button',
    { type: 'button', class: 'chan', 'aria-current': current ? 'page' : false, onclick: () => { showLane(chatId, threadId); closeSidebar(); } },
    h('span', { class: 'chan-icon', 'aria-hidden': 'true' }, threadId ? '🧵' : '#'),
    h('span', { class: 'chan-name' }, c.name),
    c.is_default ? h('span', { class: 'chan-default', title: 'Default channel' }, 'default') : null,
    lane && lane.unread ? h('span', { class: 'unread', 'aria-label': `${lane.unread} unread` }, String(lane.unread)) : null,
  );
  const more = h('button', { type: 'button', class: 'icon chan-more', 'aria-label': `Actions for ${c.name}`, 'aria-haspopup': 'menu', onclick: (ev) => channelMenu(ev, c, chatId, threadId) }, '⋯');
  return h('li', { dataset: { chat: c.chat_id } }, h('div', { class: 'chan-row' }, open, more));
}

function channelMenu(ev, c, chatId, threadId) {
  ev.stopPropagation();
  const items = [];
  if (!threadId) items.push(['New thread', () => createChannel(chatId)]);
  items.push(['Rename', () => renameChannel(c)]);
  if (!threadId && !c.is_default) items.push(['Set as default', () => request('channel.set_default', {}, { chat_id: c.chat_id })]);
  if (c.chat_id !== 'default' && !c.is_default) items.push(['Delete', () => deleteChannel(c)]);
  popupMenu(ev.currentTarget, items);
}

async function createChannel(parent) {
  const name = await ask(parent ? 'New thread' : 'New channel', 'Name', '');
  if (!name) return;
  const payload = parent ? { name, kind: 'thread', parent_chat_id: parent } : { name, kind: 'channel' };
  const res = await request('channel.create', payload);
  if (res) showLane(parent || res.payload.chat_id, parent ? res.payload.chat_id : null);
}

async function renameChannel(c) {
  const name = await ask('Rename', 'Name', c.name);
  if (name && name !== c.name) request('channel.rename', { name }, { chat_id: c.chat_id });
}

async function deleteChannel(c) {
  const ok = await confirmDialog(`Delete “${c.name}”?`, 'Its messages and threads are deleted on every device. This cannot be undone.', 'Delete');
  if (ok) request('channel.delete', {}, { chat_id: c.chat_id });
}

function onChannelFrame(frame) {
  const p = frame.payload;
  switch (frame.type) {
    case 'channel.list':
      setDirectory(p.channels || []);
      break;
    case 'channel.created':
      app.channels.set(p.chat_id, { chat_id: p.chat_id, name: p.name, kind: p.kind, parent_chat_id: p.parent_chat_id || null, is_default: false });
      renderSidebar();
      break;
    case 'channel.renamed': {
      const c = app.channels.get(p.chat_id);
      if (c) c.name = p.name;
      renderSidebar();
      renderTitle();
      break;
    }
    case 'channel.deleted': {
      const gone = new Set([p.chat_id, ...(p.thread_ids || [])]);
      for (const id of gone) app.channels.delete(id);
      for (const [key, lane] of app.lanes) {
        if (gone.has(lane.chat_id) || (lane.thread_id && gone.has(lane.thread_id))) app.lanes.delete(key);
      }
      if (gone.has(app.current.chat_id) || (app.current.thread_id && gone.has(app.current.thread_id))) {
        showLane(defaultChannel().chat_id, null);
      }
      renderSidebar();
      break;
    }
    default:
      break;
  }
}

// ----- notifications and status -------------------------------------------------------------

function onNotification(frame) {
  const p = frame.payload;
  // A long offline gap replays many notifications: show only the first few.
  if (frame.replayed && app.toastBudget-- <= 0) return;
  toast(p.body || '', 'note', p.title);
  if (document.hidden && 'Notification' in window && Notification.permission === 'granted') {
    try {
      new Notification(p.title || 'Iris', { body: p.body || '', tag: `iris-${frame.cursor}` });
    } catch {
      // Some browsers only allow notifications from a service worker.
    }
  }
}

// Web Push (notifications while no Iris tab is connected): on only after the user turns it on
// in the menu. Each connection re-sends the subscription, so the gateway learns of a renewed
// one, and a subscription made with a replaced gateway key is made again.
async function refreshWebPush() {
  if (store.getItem('iris.webpush') !== 'on' || !webPushAvailable(window, app.webpushKey)) return;
  try {
    if (Notification.permission !== 'granted') {
      // Revoked in the browser's settings: stop asking the gateway to push here.
      store.setItem('iris.webpush', 'off');
      await app.conn.request('fcm.register', { webpush: null });
      return;
    }
    const sub = await ensureSubscription(app.webpushKey);
    await app.conn.request('fcm.register', { webpush: subscriptionPayload(sub) });
  } catch (e) {
    console.warn('web push unavailable', e);
  }
}

async function toggleNotifications() {
  if (!('Notification' in window)) {
    toast('This browser cannot show notifications.');
    return;
  }
  if (store.getItem('iris.webpush') === 'on') {
    store.setItem('iris.webpush', 'off');
    try {
      await dropSubscription();
      await app.conn.request('fcm.register', { webpush: null });
    } catch (e) {
      console.warn('web push', e);
    }
    toast('Notifications are off while Iris is closed.');
    return;
  }
  const permission = await Notification.requestPermission();
  if (permission !== 'granted') {
    toast('Notifications stay off.');
    return;
  }
  if (!webPushAvailable(window, app.webpushKey)) {
    toast('Notifications are on while Iris is open in a tab.');
    return;
  }
  try {
    const sub = await ensureSubscription(app.webpushKey);
    await app.conn.request('fcm.register', { webpush: subscriptionPayload(sub) });
    store.setItem('iris.webpush', 'on');
    toast('Notifications are on, also while Iris is closed.');
  } catch (e) {
    toast(`Notifications are on while Iris is open in a tab; push is unavailable here (${e.message || e}).`);
  }
}

// A click on a pushed notification while a tab is open shows its chat in that tab.
if ('serviceWorker' in navigator) {
  navigator.serviceWorker.addEventListener('message', (ev) => {
    const d = ev.data || {};
    if (d.type === 'iris.open' && d.chat_id && app.conn) showLane(d.chat_id, d.thread_id || null);
  });
}

// ----- frames ------------------------------------------------------------------------------

function onFrame(frame) {
  switch (frame.type) {
    case 'message': {
      const lane = laneOf(frame);
      upsertMessage(lane, frame.payload, frame);
      // Model and choice pickers are answered with a system message in their lane.
      if (frame.payload.role === 'system') closeStalePickers(lane, ['picker.model', 'picker.choice']);
      if (frame.payload.role !== 'user' && !document.hidden && lane === currentLane() && frame.payload.role === 'assistant') sendReceipt(lane, frame.payload.message_id);
      break;
    }
    case 'message.start':
    case 'message.update':
    case 'message.stop':
      onStreamFrame(frame);
      break;
    case 'message.deleted':
      onDeleted(frame);
      break;
    case 'commentary':
      onCommentary(frame);
      break;
    case 'tool.start':
    case 'tool.progress':
    case 'tool.end':
      onTool(frame);
      break;
    case 'agent.busy':
    case 'agent.idle':
      onBusy(frame);
      break;
    case 'channel.list':
    case 'channel.created':
    case 'channel.renamed':
    case 'channel.deleted':
      onChannelFrame(frame);
      break;
    case 'notification':
      onNotification(frame);
      break;
    case 'read.receipt':
      onReceipt(frame);
      break;
    case 'status':
      onStatus(frame);
      break;
    case 'error':
      if (frame.id === undefined) toast(frame.payload.message, 'error');
      break;
    default:
      if (frame.type.startsWith('picker.')) onPicker(frame);
      break;
  }
}

// ----- composer ----------------------------------------------------------------------------

const input = $('composer-input');

function updateComposer() {
  const lane = app.current ? currentLane() : null;
  const busy = lane && lane.busy;
  const send = $('send');
  send.textContent = busy ? 'Queue' : 'Send';
  send.setAttribute('aria-label', busy ? 'Send after the current answer' : 'Send');
  const uploading = app.attachments.some((a) => !a.ref && !a.error);
  send.disabled = uploading;
}

function autosize() {
  input.style.height = 'auto';
  input.style.height = `${Math.min(input.scrollHeight, 200)}px`;
}

input.addEventListener('input', () => {
  autosize();
  updateDrawer();
});

input.addEventListener('keydown', (ev) => {
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
      hideDrawer();
      return;
    }
  }
  if (ev.key === 'Enter' && !ev.shiftKey && !ev.isComposing) {
    ev.preventDefault();
    $('composer').requestSubmit();
  }
});

$('composer').addEventListener('submit', (ev) => {
  ev.preventDefault();
  sendMessage();
});

async function sendMessage() {
  const text = input.value.trim();
  const ready = app.attachments.filter((a) => a.ref);
  if (!text && !ready.length) return;
  if (app.attachments.some((a) => !a.ref && !a.error)) return;
  const lane = currentLane();
  const auto = $('auto-thread').getAttribute('aria-pressed') === 'true';
  const payload = { text };
  if (ready.length) payload.media_refs = ready.map((a) => a.ref);
  if (auto && !lane.thread_id && text && !text.startsWith('/')) payload.auto_thread = true;
  input.value = '';
  autosize();
  hideDrawer();
  const sentAttachments = app.attachments;
  app.attachments = [];
  renderTray();
  try {
    const echo = await app.conn.request('message.send', payload, lane);
    if (payload.auto_thread) {
      $('auto-thread').setAttribute('aria-pressed', 'false');
      if (echo.thread_id) showLane(echo.chat_id, echo.thread_id);
    }
  } catch (e) {
    input.value = text;
    autosize();
    app.attachments = sentAttachments;
    renderTray();
    toast(e.code === 'disconnected' ? 'Not connected: your message was kept. Send it again when the connection is back.' : `Not sent: ${e.message}`, 'error');
  }
}

$('stop').addEventListener('click', () => request('agent.stop', {}, currentLane()));

$('steer').addEventListener('click', async () => {
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
});

$('auto-thread').addEventListener('click', (ev) => {
  const b = ev.currentTarget;
  b.setAttribute('aria-pressed', String(b.getAttribute('aria-pressed') !== 'true'));
});

// ----- slash-command drawer ----------------------------------------------------------------

async function loadCatalog() {
  try {
    const res = await app.conn.request('commands.catalog', {});
    app.catalog = res.payload.commands || [];
    app.catalogLoaded = true;
  } catch {
    app.catalogLoaded = false;
  }
}

function updateDrawer(showAll = false) {
  const text = input.value;
  const m = /^(\/\S*)$/.exec(text);
  if (!showAll && !m) {
    hideDrawer();
    return;
  }
  if (!app.catalogLoaded && app.conn && app.conn.online) loadCatalog().then(() => updateDrawer(showAll));
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
  input.setAttribute('aria-expanded', 'true');
  input.setAttribute('aria-controls', 'drawer');
  input.setAttribute('aria-activedescendant', 'cmd-0');
}

function hideDrawer() {
  $('drawer').hidden = true;
  input.setAttribute('aria-expanded', 'false');
  input.removeAttribute('aria-activedescendant');
}

function pickCommand(name) {
  input.value = `${name} `;
  hideDrawer();
  autosize();
  input.focus();
}

$('commands').addEventListener('click', () => {
  if (!$('drawer').hidden) hideDrawer();
  else {
    if (!input.value) input.value = '/';
    updateDrawer(true);
    input.focus();
  }
});

// ----- attachments -------------------------------------------------------------------------

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

function addAttachment(file) {
  const a = { file, progress: 0, ref: null, error: null, url: /^image\//.test(file.type) ? URL.createObjectURL(file) : null };
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
    const state = a.error ? h('span', { class: 'error' }, 'failed') : a.ref ? h('span', { class: 'ok', 'aria-label': 'uploaded' }, '✓') : a.bar;
    return h('li', { class: 'attachment', dataset: { state: a.error ? 'error' : a.ref ? 'done' : 'uploading' } },
      a.url ? h('img', { src: a.url, alt: '' }) : h('span', { class: 'file-icon', 'aria-hidden': 'true' }, '📄'),
      h('span', { class: 'att-name' }, a.file.name), h('span', { class: 'att-size' }, formatBytes(a.file.size)), state,
      h('button', { type: 'button', class: 'icon', 'aria-label': `Remove ${a.file.name}`, onclick: () => { app.attachments = app.attachments.filter((x) => x !== a); renderTray(); updateComposer(); } }, '✕'));
  }));
}

// ----- search ------------------------------------------------------------------------------

$('open-search').addEventListener('click', () => {
  const panel = $('search');
  panel.hidden = !panel.hidden;
  if (!panel.hidden) $('search-input').focus();
});

$('close-search').addEventListener('click', () => { $('search').hidden = true; });

$('search-form').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  const query = $('search-input').value.trim();
  if (!query) return;
  const scope = $('search-scope').value;
  const payload = { query, scope };
  const lane = currentLane();
  const res = await request('search', payload, scope === 'chat' ? lane : {});
  const ol = $('search-results');
  if (!res) return;
  const hits = res.payload.hits || [];
  if (!hits.length) {
    ol.replaceChildren(h('li', { class: 'empty' }, `No messages match “${query}”.`));
    return;
  }
  ol.replaceChildren(...hits.map((hit) => h('li', {},
    h('button', { type: 'button', class: 'hit', dataset: { id: hit.message_id }, onclick: () => jumpTo(hit) },
      h('span', { class: 'hit-lane' }, laneTitle(hit.chat_id, hit.thread_id), ' · ', formatTime(hit.ts)),
      h('span', { class: 'hit-snippet' }, snippetParts(hit.snippet).map((part) => (part.mark ? h('mark', {}, part.text) : part.text)))))));
});

async function jumpTo(hit) {
  $('search').hidden = true;
  showLane(hit.chat_id, hit.thread_id || null);
  const lane = currentLane();
  if (!lane.historyLoaded) await loadHistory(lane);
  for (let page = 0; !lane.items.has(hit.message_id) && lane.hasMore && page < 40; page++) {
    if (!(await loadHistory(lane, true))) break;
  }
  const el = lane.items.get(hit.message_id);
  if (!el) {
    toast('That message is no longer there.', 'error');
    return;
  }
  el.scrollIntoView({ block: 'center' });
  el.classList.remove('flash');
  void el.offsetWidth;
  el.classList.add('flash');
  el.setAttribute('tabindex', '-1');
  el.focus({ preventScroll: true });
}

// ----- menus and dialogs -------------------------------------------------------------------

document.addEventListener('click', (ev) => {
  if (!ev.target.closest('.popup')) closePopups();
  if (!ev.target.closest('#menu') && ev.target !== $('open-menu')) closeMainMenu();
});

function closeMainMenu() {
  $('menu').hidden = true;
  $('open-menu').setAttribute('aria-expanded', 'false');
}

$('open-menu').addEventListener('click', () => {
  const menu = $('menu');
  menu.hidden = !menu.hidden;
  $('open-menu').setAttribute('aria-expanded', String(!menu.hidden));
  menu.querySelector('[data-action=footer]').setAttribute('aria-checked', String(app.settings.footer));
  menu.querySelector('[data-action=tools]').setAttribute('aria-checked', String(app.settings.tools));
  menu.querySelector('[data-action=notify]').textContent =
    store.getItem('iris.webpush') === 'on' ? 'Turn off notifications' : 'Enable notifications';
  if (!menu.hidden) menu.querySelector('button').focus();
});

$('menu').addEventListener('click', (ev) => {
  const action = ev.target.closest('button') && ev.target.closest('button').dataset.action;
  closeMainMenu();
  switch (action) {
    case 'commands':
      $('commands').click();
      break;
    case 'footer':
      app.settings.footer = !app.settings.footer;
      store.setItem('iris.footer', app.settings.footer ? 'on' : 'off');
      document.body.classList.toggle('no-footer', !app.settings.footer);
      break;
    case 'tools':
      app.settings.tools = !app.settings.tools;
      store.setItem('iris.tools', app.settings.tools ? 'on' : 'off');
      document.body.classList.toggle('no-tools', !app.settings.tools);
      break;
    case 'notify':
      toggleNotifications();
      break;
    case 'signout':
      confirmDialog('Sign out?', 'This browser forgets the token. Your chats stay on the gateway.', 'Sign out').then((ok) => ok && signOut());
      break;
    default:
      break;
  }
});

document.body.classList.toggle('no-footer', !app.settings.footer);
document.body.classList.toggle('no-tools', !app.settings.tools);

// ----- narrow screens: the chat list is a drawer ---------------------------------------------

function closeSidebar() {
  document.body.classList.remove('sidebar-open');
  $('scrim').hidden = true;
  $('open-sidebar').setAttribute('aria-expanded', 'false');
}

$('open-sidebar').addEventListener('click', () => {
  document.body.classList.add('sidebar-open');
  $('scrim').hidden = false;
  $('open-sidebar').setAttribute('aria-expanded', 'true');
  const cur = $('channels').querySelector('[aria-current=page]');
  (cur || $('new-channel')).focus();
});
$('close-sidebar').addEventListener('click', closeSidebar);
$('scrim').addEventListener('click', closeSidebar);
$('new-channel').addEventListener('click', () => createChannel(null));
document.addEventListener('keydown', (ev) => {
  if (ev.key === 'Escape' && document.body.classList.contains('sidebar-open')) closeSidebar();
});

// Opening a pairing link in a tab that already runs the client signs in with its token.
window.addEventListener('hashchange', () => {
  if (new URLSearchParams(location.hash.replace(/^#/, '')).has('token')) location.reload();
});

initTranscript({ renderSidebar, updateComposer, closeStalePickers });
initPickers();
boot();
