// Iris Web: the browser client. It speaks the Iris v1 protocol over /ws of the gateway that
// served it; everything it shows comes from frames (history pages, live and replayed events).
// Agent text is rendered with markdown.js, which builds DOM nodes and never parses HTML.

import { Connection, RequestError } from './conn.js';
import { markdown } from './markdown.js';
import { Media } from './media.js';
import {
  $, app, currentLane, defaultChannel, findMessage, laneOf, laneTitle, resetLane, store,
} from './state.js';
import {
  ask, closePopups, confirmDialog, popupMenu, request, toast,
} from './ui.js';
import {
  defaultDeviceName, formatBytes, formatTime, h, laneKey, matchCommands, randomId, runtimeFooter, snippetParts,
} from './util.js';
import { dropSubscription, ensureSubscription, subscriptionPayload, webPushAvailable } from './webpush.js';

const BUSY_TEXT = {
  processing: 'Thinking…',
  tool: 'Running a tool…',
  waiting_input: 'Waiting for your answer…',
  cron: 'Running a scheduled job…',
};

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

// ----- lanes -------------------------------------------------------------------------------

function showLane(chatId, threadId) {
  app.current = { chat_id: chatId, thread_id: threadId || null };
  store.setItem('iris.lane', JSON.stringify(app.current));
  const lane = currentLane();
  lane.unread = 0;
  $('log').replaceChildren(lane.el);
  renderTitle();
  renderSidebar();
  renderBusy();
  if (!lane.historyLoaded && app.conn && app.conn.state.name === 'online') loadHistory(lane);
  scrollToEnd(true);
  sendReceipts(lane);
}

function renderTitle() {
  if (!app.current) return;
  const title = laneTitle(app.current.chat_id, app.current.thread_id);
  $('lane-title').textContent = title;
  document.title = `${title} · Iris`;
}

function loadHistory(lane, older = false) {
  if (lane.loading) return lane.loading;
  if (older && !lane.hasMore) return Promise.resolve(false);
  const payload = { limit: 50 };
  if (older) payload.before_message_id = lane.oldest;
  const scroller = $('scroller');
  const fromBottom = scroller.scrollHeight - scroller.scrollTop;
  lane.loading = request('history', payload, lane, { quiet: older })
    .then((res) => {
      if (!res) return false;
      const { messages, has_more: hasMore, oldest_message_id: oldest } = res.payload;
      const first = older || !lane.historyLoaded ? lane.el.firstChild : null;
      const frag = document.createDocumentFragment();
      for (const m of messages) {
        if (lane.items.has(m.message_id)) continue;
        const el = messageEl(lane, m);
        lane.items.set(m.message_id, el);
        frag.append(el);
      }
      lane.el.insertBefore(frag, first);
      if (!lane.historyLoaded || older) {
        lane.hasMore = hasMore;
        lane.oldest = oldest || lane.oldest;
      }
      lane.historyLoaded = true;
      if (lane === currentLane()) {
        if (older) scroller.scrollTop = scroller.scrollHeight - fromBottom;
        else scrollToEnd(true);
      }
      return true;
    })
    .finally(() => {
      lane.loading = null;
    });
  return lane.loading;
}

// Scroll-up pagination: a sentinel above the messages loads the previous page when it shows.
new IntersectionObserver((entries) => {
  if (entries.some((e) => e.isIntersecting) && app.current && app.conn && app.conn.state.name === 'online') {
    const lane = currentLane();
    if (lane.historyLoaded && lane.hasMore) loadHistory(lane, true);
  }
}, { root: $('scroller'), rootMargin: '200px 0px 0px 0px' }).observe($('older'));

function nearBottom() {
  const s = $('scroller');
  return s.scrollHeight - s.scrollTop - s.clientHeight < 120;
}

function scrollToEnd(force) {
  const s = $('scroller');
  if (force || nearBottom()) requestAnimationFrame(() => { s.scrollTop = s.scrollHeight; });
}

// ----- messages ----------------------------------------------------------------------------

function messageEl(lane, m, opts = {}) {
  const el = h('article', {
    class: `msg role-${m.role}${opts.streaming ? ' streaming' : ''}`,
    dataset: { id: m.message_id, role: m.role },
    'aria-label': `${roleLabel(m.role)} message`,
  });
  fillMessage(el, lane, m, opts);
  return el;
}

function roleLabel(role) {
  return { user: 'Your', assistant: 'Agent', system: 'System', cron: 'Scheduled' }[role] || role;
}

function fillMessage(el, lane, m, opts = {}) {
  const parts = [];
  if (m.reasoning) {
    parts.push(h('details', { class: 'reasoning' }, h('summary', {}, 'Reasoning'), h('div', { class: 'md' }, markdown(m.reasoning))));
  }
  const body = h('div', { class: 'md body' });
  if (m.text) body.append(markdown(m.text));
  else if (opts.streaming) body.append(h('span', { class: 'dots', 'aria-label': 'Typing' }, h('i'), h('i'), h('i')));
  parts.push(body);
  if (m.media && m.media.length) parts.push(mediaList(m.media));
  const meta = h('div', { class: 'meta' });
  if (m.ts) meta.append(h('time', { datetime: new Date(m.ts).toISOString() }, formatTime(m.ts)));
  if (m.role === 'assistant' && m.runtime && app.settings.footer) meta.append(h('span', { class: 'runtime' }, runtimeFooter(m.runtime)));
  if (m.role === 'user') meta.append(h('span', { class: 'ticks', 'aria-label': el.dataset.read ? 'Read' : 'Delivered' }, el.dataset.read ? '✓✓' : '✓'));
  if (!opts.streaming) {
    meta.append(h('button', { type: 'button', class: 'icon msg-more', 'aria-label': 'Message actions', onclick: (ev) => messageMenu(ev, lane, el) }, '⋯'));
  }
  parts.push(meta);
  el.replaceChildren(...parts);
  el.dataset.text = m.text || '';
}

function upsertMessage(lane, m, frame) {
  const existing = lane.items.get(m.message_id) || findMessage(m.message_id);
  if (existing) {
    existing.classList.remove('streaming');
    fillMessage(existing, lane, m);
    return existing;
  }
  const el = messageEl(lane, m);
  lane.append(m.message_id, el);
  noteActivity(lane, frame);
  return el;
}

function noteActivity(lane, frame) {
  if (lane === currentLane()) {
    scrollToEnd(frame && frame.id !== undefined);
  } else if (frame && ['message', 'message.stop'].includes(frame.type)) {
    lane.unread++;
    renderSidebar();
  }
}

function onStreamFrame(frame) {
  const lane = laneOf(frame);
  const p = frame.payload;
  switch (frame.type) {
    case 'message.start': {
      if (lane.items.has(p.message_id)) break;
      lane.stream = p.message_id;
      const el = messageEl(lane, { message_id: p.message_id, role: p.role || 'assistant', text: '' }, { streaming: true });
      lane.el.append(el);
      lane.items.set(p.message_id, el);
      noteActivity(lane, frame);
      break;
    }
    case 'message.update': {
      const el = lane.items.get(p.message_id);
      if (!el || !el.classList.contains('streaming')) break;
      // Each update carries the whole text so far: replace, never append.
      fillMessage(el, lane, { message_id: p.message_id, role: el.dataset.role, text: p.text }, { streaming: true });
      el.hidden = false;
      scrollToEnd(false);
      break;
    }
    case 'message.stop': {
      if (lane.stream === p.message_id) lane.stream = null;
      const m = {
        message_id: p.message_id, role: 'assistant', text: p.final_text, reasoning: p.reasoning, runtime: p.runtime,
        media: p.media, ts: Date.now(), model: p.model,
      };
      const el = lane.items.get(p.message_id);
      if (el) {
        el.classList.remove('streaming');
        fillMessage(el, lane, m);
        // Keep the answer below the turn's commentary and tool cards.
        lane.el.append(el);
      } else {
        upsertMessage(lane, m, frame);
      }
      noteActivity(lane, frame);
      if (!document.hidden && lane === currentLane()) sendReceipt(lane, p.message_id);
      break;
    }
    default:
      break;
  }
}

function messageMenu(ev, lane, el) {
  ev.stopPropagation();
  const items = [];
  if (el.dataset.text) items.push(['Copy text', () => navigator.clipboard && navigator.clipboard.writeText(el.dataset.text)]);
  items.push(['Delete', async () => {
    const ok = await confirmDialog('Delete this message?', 'It is deleted on every device and cannot be recovered.', 'Delete');
    if (ok) request('message.delete', { message_ids: [el.dataset.id] }, lane);
  }]);
  popupMenu(ev.currentTarget, items);
}

function onDeleted(frame) {
  for (const id of frame.payload.message_ids || []) {
    for (const lane of app.lanes.values()) {
      const el = lane.items.get(id);
      if (el) {
        el.remove();
        lane.items.delete(id);
      }
    }
  }
}

function onReceipt(frame) {
  const el = findMessage(frame.payload.message_id);
  if (!el || el.dataset.role !== 'user') return;
  el.dataset.read = '1';
  const ticks = el.querySelector('.ticks');
  if (ticks) {
    ticks.textContent = '✓✓';
    ticks.setAttribute('aria-label', 'Read');
  }
}

function sendReceipt(lane, messageId) {
  if (app.receiptsSent.has(messageId) || !app.conn.online) return;
  app.receiptsSent.add(messageId);
  try {
    app.conn.sendFrame({ type: 'read.receipt', chat_id: lane.chat_id, thread_id: lane.thread_id, payload: { message_id: messageId, chat_id: lane.chat_id } });
  } catch {
    app.receiptsSent.delete(messageId);
  }
}

function sendReceipts(lane) {
  if (document.hidden || !app.conn || !app.conn.online) return;
  const last = [...lane.el.querySelectorAll('.msg.role-assistant:not(.streaming)')].pop();
  if (last) sendReceipt(lane, last.dataset.id);
}

document.addEventListener('visibilitychange', () => app.current && sendReceipts(currentLane()));

// ----- commentary and tools ----------------------------------------------------------------

function onCommentary(frame) {
  const lane = laneOf(frame);
  const p = frame.payload;
  const existing = lane.items.get(p.message_id);
  const body = h('div', { class: 'md' }, markdown(p.text));
  if (existing) {
    existing.replaceChildren(body);
    return;
  }
  lane.append(p.message_id, h('div', { class: 'commentary', dataset: { id: p.message_id } }, body));
  noteActivity(lane, frame);
}

function onBusy(frame) {
  const lane = laneOf(frame);
  if (frame.type === 'agent.busy') {
    if (!lane.turnOpen) {
      lane.turn++;
      lane.turnOpen = true;
    }
    lane.busy = frame.payload.reason || 'processing';
    // An approval or question answered on another device: the lane goes on without it.
    if (lane.busy !== 'waiting_input') closeStalePickers(lane, ['picker.approval', 'picker.clarify', 'picker.confirm']);
  } else {
    lane.busy = null;
    lane.turnOpen = false;
    lane.stream = null;
    for (const el of lane.el.querySelectorAll('.msg.streaming')) {
      if (!el.dataset.text) el.remove();
      else el.classList.remove('streaming');
    }
    closeStalePickers(lane, ['picker.approval', 'picker.clarify', 'picker.confirm']);
  }
  if (lane === currentLane()) renderBusy();
}

function toolKey(lane, index) {
  return `tool:${lane.turn}:${index}`;
}

function onTool(frame) {
  const lane = laneOf(frame);
  const p = frame.payload;
  const key = toolKey(lane, p.index);
  let card = lane.items.get(key);
  if (frame.type === 'tool.start' || !card) {
    if (card && frame.type === 'tool.start') return;
    card = h('details', { class: 'tool running', dataset: { id: key, tool: p.name } });
    card.summary = h('summary', {});
    card.body = h('div', { class: 'tool-body' });
    card.append(card.summary, card.body);
    card.data = { name: p.name, emoji: p.emoji, preview: p.preview, args: p.args };
    lane.append(key, card);
    noteActivity(lane, frame);
  }
  const d = card.data;
  if (frame.type === 'tool.progress') d.note = p.note;
  if (frame.type === 'tool.end') {
    d.ok = p.ok;
    d.duration = p.duration;
    d.output = p.output_preview;
    card.classList.remove('running');
    card.classList.add(p.ok ? 'ok' : 'failed');
  }
  const state = d.ok === undefined ? h('span', { class: 'tool-state', 'aria-label': 'running' }, '⏳')
    : h('span', { class: 'tool-state', 'aria-label': d.ok ? 'succeeded' : 'failed' }, d.ok ? '✓' : '✗');
  card.summary.replaceChildren(...[
    h('span', { class: 'tool-emoji', 'aria-hidden': 'true' }, d.emoji || '🔧'),
    h('span', { class: 'tool-name' }, d.name),
    d.preview ? h('code', { class: 'tool-preview' }, d.preview) : null,
    Number.isFinite(d.duration) ? h('span', { class: 'tool-dur' }, `${d.duration.toFixed(1)} s`) : null,
    state,
  ].filter(Boolean));
  const body = [];
  if (d.args !== undefined && d.args !== null && app.settings.tools) body.push(h('div', { class: 'tool-label' }, 'Arguments'), h('pre', {}, JSON.stringify(d.args, null, 2)));
  if (d.note && d.ok === undefined) body.push(h('div', { class: 'tool-note' }, d.note));
  if (d.output) body.push(h('div', { class: 'tool-label' }, 'Output'), h('pre', {}, d.output));
  card.body.replaceChildren(...body);
}

function renderBusy() {
  const lane = currentLane();
  $('busy').hidden = !lane.busy;
  if (lane.busy) $('busy-text').textContent = BUSY_TEXT[lane.busy] || 'Working…';
  updateComposer();
}

// ----- pickers -----------------------------------------------------------------------------

function onPicker(frame) {
  const p = frame.payload;
  if (app.pickers.has(p.picker_id)) return;
  const lane = laneOf(frame);
  const entry = { frame, lane, state: 'open' };
  // A newer model or choice picker in the same lane replaces an older unanswered one.
  if (frame.type === 'picker.model' || frame.type === 'picker.choice') closeStalePickers(lane, [frame.type]);
  app.pickers.set(p.picker_id, entry);
  const label = { 'picker.approval': 'Approval requested', 'picker.clarify': 'Question', 'picker.model': 'Choose a model', 'picker.choice': p.title || 'Choose', 'picker.confirm': 'Please confirm' }[frame.type] || 'Choose';
  entry.card = h('div', { class: 'picker-card', dataset: { id: p.picker_id, kind: frame.type } },
    h('span', { class: 'picker-card-label' }, label, p.title && frame.type !== 'picker.choice' ? `: ${p.title}` : ''),
    h('button', { type: 'button', class: 'secondary', onclick: () => showPicker(p.picker_id) }, 'Answer'));
  lane.append(`picker:${p.picker_id}`, entry.card);
  noteActivity(lane, frame);
  if (!app.pickerShown) showPicker(p.picker_id);
}

function closeStalePickers(lane, types) {
  for (const [id, entry] of app.pickers) {
    if (entry.lane === lane && !entry.answering && types.includes(entry.frame.type)) settlePicker(id, 'answered elsewhere');
  }
}

function settlePicker(id, how) {
  const entry = app.pickers.get(id);
  if (!entry) return;
  app.pickers.delete(id);
  if (entry.card) {
    entry.card.classList.add('done');
    const btn = entry.card.querySelector('button');
    if (btn) btn.remove();
    entry.card.append(h('span', { class: 'picker-card-state' }, `— ${how}`));
  }
  if (app.pickerShown === id) {
    app.pickerShown = null;
    $('picker').close();
    const next = [...app.pickers.keys()][0];
    if (next) showPicker(next);
  }
}

async function answerPicker(id, value, label) {
  const entry = app.pickers.get(id);
  if (!entry) return;
  const dialog = $('picker');
  for (const b of dialog.querySelectorAll('button, input')) b.disabled = true;
  entry.answering = true;
  try {
    await app.conn.request('picker.select', { picker_id: id, value });
    settlePicker(id, `you chose ${label || value}`);
  } catch (e) {
    if (e instanceof RequestError && e.code === 'not_found') settlePicker(id, 'already answered or expired');
    else {
      entry.answering = false;
      toast(`Could not answer: ${e.message}`, 'error');
      for (const b of dialog.querySelectorAll('button, input')) b.disabled = false;
    }
  }
}

function showPicker(id) {
  const entry = app.pickers.get(id);
  if (!entry) return;
  const { frame, lane } = entry;
  const p = frame.payload;
  const dialog = $('picker');
  app.pickerShown = id;
  const choiceButtons = (choices) => h('div', { class: 'choices' }, choices.map((c) => h('button', {
    type: 'button',
    class: c.is_current ? 'choice current' : 'choice',
    'aria-current': c.is_current ? 'true' : false,
    dataset: { value: c.value },
    onclick: () => answerPicker(id, c.value, c.label),
  }, c.label, c.is_current ? ' (current)' : '')));
  const content = [
    h('div', { class: 'picker-lane' }, laneTitle(lane.chat_id, lane.thread_id)),
  ];
  switch (frame.type) {
    case 'picker.approval':
      content.push(h('h2', { id: 'picker-title' }, p.title || 'Allow this?'));
      if (p.preview) content.push(h('pre', { class: 'preview' }, p.preview));
      content.push(choiceButtons(p.choices || []));
      break;
    case 'picker.clarify': {
      content.push(h('h2', { id: 'picker-title' }, p.title || 'The agent asks'));
      if (p.choices && p.choices.length) content.push(choiceButtons(p.choices));
      const input = h('input', { type: 'text', 'aria-label': 'Your answer', placeholder: 'Or type an answer' });
      content.push(h('form', { class: 'free', onsubmit: (ev) => { ev.preventDefault(); if (input.value.trim()) answerPicker(id, input.value.trim()); } },
        input, h('button', { type: 'submit', class: 'primary' }, 'Answer')));
      break;
    }
    case 'picker.model': {
      content.push(h('h2', { id: 'picker-title' }, 'Choose a model'));
      for (const prov of p.providers || []) {
        content.push(h('fieldset', { class: 'provider' }, h('legend', {}, prov.label || prov.id),
          choiceButtons((prov.models || []).map((m) => ({ value: m.id, label: m.label || m.id, is_current: m.id === p.current_model })))));
      }
      break;
    }
    case 'picker.confirm':
      content.push(h('h2', { id: 'picker-title' }, p.title || 'Confirm'));
      if (p.body) content.push(h('p', {}, p.body));
      content.push(choiceButtons([{ value: 'yes', label: 'Yes' }, { value: 'no', label: 'No' }]));
      break;
    default:
      content.push(h('h2', { id: 'picker-title' }, p.title || 'Choose'));
      content.push(choiceButtons(p.choices || []));
      break;
  }
  content.push(h('div', { class: 'dialog-actions' }, h('button', { type: 'button', class: 'secondary', onclick: () => { app.pickerShown = null; dialog.close(); } }, 'Later')));
  dialog.replaceChildren(...content);
  if (!dialog.open) dialog.showModal();
}

$('picker').addEventListener('cancel', () => { app.pickerShown = null; });

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

function onStatus(frame) {
  if (frame.payload.state === 'restarting') {
    const lane = currentLane();
    lane.append(null, h('div', { class: 'notice' }, 'Gateway restarting…'));
    scrollToEnd(true);
  }
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

function mediaList(list) {
  const box = h('div', { class: 'media' });
  for (const m of list) {
    const local = app.localMedia.get(`${m.filename}:${m.size}`);
    if (local && !app.media.urls.has(m.media_id)) app.media.remember(m.media_id, local);
    if (m.kind === 'image' && m.size <= 20 * 1024 * 1024) {
      const img = h('img', { alt: m.filename || 'image', class: 'inline-image', loading: 'lazy' });
      const bar = h('progress', { max: 100, value: 0, 'aria-label': `Loading ${m.filename}` });
      const fig = h('figure', { class: 'image loading', dataset: { media: m.media_id } }, img, bar);
      app.media.url(m, (f) => { bar.value = Math.round(f * 100); }).then((url) => {
        img.src = url;
        fig.classList.remove('loading');
        bar.remove();
        scrollToEnd(false);
      }, (e) => {
        fig.classList.remove('loading');
        bar.replaceWith(h('span', { class: 'error' }, `Image unavailable: ${e.message}`));
      });
      box.append(fig);
    } else {
      const bar = h('progress', { max: 100, value: 0, hidden: true, 'aria-label': `Downloading ${m.filename}` });
      const btn = h('button', { type: 'button', class: 'secondary' }, 'Download');
      btn.addEventListener('click', () => {
        btn.disabled = true;
        bar.hidden = false;
        app.media.url(m, (f) => { bar.value = Math.round(f * 100); }).then((url) => {
          bar.hidden = true;
          btn.disabled = false;
          const a = h('a', { href: url, download: m.filename || 'download' });
          document.body.append(a);
          a.click();
          a.remove();
        }, (e) => {
          bar.hidden = true;
          btn.disabled = false;
          toast(`${m.filename}: ${e.message}`, 'error');
        });
      });
      box.append(h('div', { class: 'file-chip', dataset: { media: m.media_id } },
        h('span', { class: 'file-icon', 'aria-hidden': 'true' }, '📄'), h('span', { class: 'att-name' }, m.filename || m.media_id),
        h('span', { class: 'att-size' }, formatBytes(m.size)), bar, btn));
    }
  }
  return box;
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

boot();
