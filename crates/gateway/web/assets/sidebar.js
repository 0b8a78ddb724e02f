// The chat list: channels with their threads under them, unread counts and the current chat,
// each row's actions (new thread, rename, set as default, delete), the `channel.*` frames that
// keep the directory in step with the gateway, and on narrow screens the drawer the list lives
// in. With more than one agent behind the gateway (`hello.ack.server_caps.agents`) each channel
// shows its agent, a new channel is given one, and a channel's menu moves it to another
// (`channel.set_agent`). Opening a chat goes through the transcript's `showLane`.
// The list is ordered by recent activity, the default channel too (its badge marks it): a
// channel's place is its newest activity or that of one of its threads, and each row shows a
// line of its newest message. `hello.ack` gives both (`last_activity_at`, `preview`); every
// message that arrives after it moves its chat up (`noteMessage`). "+" makes a chat at once,
// without a name: the gateway names it from its first message (`channel.renamed`).

import { icon } from './icons.js';
import { $, app, defaultChannel } from './state.js';
import { markdown } from './markdown.js';
import { renderTitle, showLane } from './transcript.js';
import { ask, askForm, confirmDialog, popupMenu, request } from './ui.js';
import { h, laneKey } from './util.js';

export function initSidebar() {
  $('open-sidebar').addEventListener('click', () => {
    document.body.classList.add('sidebar-open');
    $('scrim').hidden = false;
    $('open-sidebar').setAttribute('aria-expanded', 'true');
    const cur = $('channels').querySelector('[aria-current=page]');
    (cur || $('new-channel')).focus();
  });
  $('close-sidebar').addEventListener('click', () => closeSidebar(true));
  $('scrim').addEventListener('click', () => closeSidebar(true));
  $('new-channel').addEventListener('click', () => createChannel(null));
  document.addEventListener('keydown', (ev) => {
    if (ev.key === 'Escape' && document.body.classList.contains('sidebar-open') && !document.querySelector('dialog[open], .popup')) closeSidebar(true);
  });
}

/** Narrow screens: the chat list is a drawer; `refocus` gives the focus back to its button. */
function closeSidebar(refocus = false) {
  if (!document.body.classList.contains('sidebar-open')) return;
  document.body.classList.remove('sidebar-open');
  $('scrim').hidden = true;
  $('open-sidebar').setAttribute('aria-expanded', 'false');
  if (refocus) $('open-sidebar').focus();
}

/** Whether chats can have different agents (the gateway has more than one). */
function manyAgents() {
  return app.agents.length > 1;
}

/**
 * Replaces the directory (hello.ack, `channel.list`). A `channel.list` carries no activity or
 * preview (the gateway keeps no message text in the frames it stores): a chat keeps its own.
 */
export function setDirectory(list) {
  const before = app.channels;
  app.channels = new Map(list.map((c) => {
    const had = before.get(c.chat_id);
    const entry = { ...c };
    if (had && c.last_activity_at === undefined) {
      entry.last_activity_at = had.last_activity_at;
      entry.preview = had.preview;
      entry.preview_message_id = had.preview_message_id;
    }
    return [c.chat_id, entry];
  }));
  renderSidebar();
  renderTitle();
}

/** One line of a message as the chat list shows it: plain text, at most 120 characters. */
export function previewOf(text) {
  const source = String(text || '').slice(0, 2000);
  const frag = markdown(source);
  const parts = [];
  const walker = document.createTreeWalker(frag, NodeFilter.SHOW_TEXT | NodeFilter.SHOW_ELEMENT);
  while (walker.nextNode()) {
    const n = walker.currentNode;
    if (n.nodeType === Node.TEXT_NODE) parts.push(n.nodeValue);
    else if (/^(P|LI|H[1-6]|PRE|BLOCKQUOTE|BR|TR|TD|TH|HR|DIV)$/.test(n.nodeName)) parts.push(' ');
  }
  const plain = parts.join(' ').replace(/\s+/g, ' ').trim();
  const chars = [...plain];
  if (!chars.length) return null;
  return chars.length <= 120 ? plain : `${chars.slice(0, 119).join('')}…`;
}

/**
 * A message in a lane (a `message`, or a streamed answer's `message.stop`): its chat moves up
 * and, for the user's and the agent's words, shows them. A replayed frame older than what
 * hello.ack said changes nothing.
 */
export function noteMessage(chatId, threadId, { role, text, ts, message_id: id }, replayed = false) {
  const c = app.channels.get(threadId || chatId);
  if (!c) return;
  const at = Number(ts) || (replayed ? 0 : Date.now());
  if (!at || (c.last_activity_at && at < c.last_activity_at)) return;
  c.last_activity_at = at;
  if (role === 'user' || role === 'assistant') {
    const line = previewOf(text);
    if (line) {
      c.preview = line;
      c.preview_message_id = id || null;
    }
  }
  renderSidebar();
}

/**
 * Messages were deleted (`message.deleted`, after the transcript dropped them): a chat whose
 * preview showed one of them shows the newest user or assistant message left in its lane, when
 * this page has the lane's newest messages, and no preview otherwise; never a deleted text.
 */
export function previewsAfterDeletion(ids) {
  const gone = new Set(ids);
  let changed = false;
  for (const c of app.channels.values()) {
    if (!c.preview_message_id || !gone.has(c.preview_message_id)) continue;
    changed = true;
    c.preview = undefined;
    c.preview_message_id = null;
    const thread = c.kind === 'thread';
    const lane = app.lanes.get(laneKey(thread ? c.parent_chat_id : c.chat_id, thread ? c.chat_id : null));
    if (!lane || !lane.historyLoaded) continue;
    const shown = [...lane.el.querySelectorAll('.msg.role-user, .msg.role-assistant')]
      .reverse()
      .map((el) => ({ id: el.dataset.id, line: previewOf(el.dataset.text) }))
      .find((m) => m.line);
    if (shown) {
      c.preview = shown.line;
      c.preview_message_id = shown.id;
    }
  }
  if (changed) renderSidebar();
}

/** A channel's place in the list: its newest activity or that of one of its threads. */
function activityOf(c, threads) {
  return Math.max(c.last_activity_at || 0, ...threads.map((t) => t.last_activity_at || 0));
}

export function renderSidebar() {
  const ul = $('channels');
  ul.replaceChildren();
  const all = [...app.channels.values()];
  const threadsOf = (id) => all.filter((t) => t.kind === 'thread' && t.parent_chat_id === id)
    .sort((a, b) => (b.last_activity_at || 0) - (a.last_activity_at || 0));
  const tops = all.filter((c) => c.kind !== 'thread')
    .map((c) => ({ c, threads: threadsOf(c.chat_id) }))
    .map((e) => ({ ...e, at: activityOf(e.c, e.threads) }));
  // Newest first; the order the gateway lists them in (creation) breaks ties.
  tops.sort((a, b) => b.at - a.at);
  for (const { c, threads } of tops) {
    const li = channelRow(c, c.chat_id, null);
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
    h('span', { class: 'chan-icon', 'aria-hidden': 'true' }, icon(threadId ? 'thread' : 'hash')),
    h('span', { class: 'chan-text' },
      h('span', { class: 'chan-name' }, c.name),
      c.preview ? h('span', { class: 'chan-preview' }, c.preview) : null),
    c.is_default ? h('span', { class: 'chan-default', title: 'Default channel' }, 'default') : null,
    manyAgents() && c.agent && !threadId ? h('span', { class: 'chan-agent', title: 'Agent' }, c.agent) : null,
    lane && lane.unread ? h('span', { class: 'unread', 'aria-label': `${lane.unread} unread` }, String(lane.unread)) : null,
  );
  const more = h('button', { type: 'button', class: 'icon chan-more', 'aria-label': `Actions for ${c.name}`, 'aria-haspopup': 'menu', onclick: (ev) => channelMenu(ev, c, chatId, threadId) }, icon('ellipsis'));
  return h('li', { dataset: { chat: c.chat_id } }, h('div', { class: 'chan-row' }, open, more));
}

function channelMenu(ev, c, chatId, threadId) {
  ev.stopPropagation();
  const items = [];
  if (!threadId) items.push(['New thread', () => createChannel(chatId)]);
  items.push(['Rename', () => renameChannel(c)]);
  if (!threadId && manyAgents()) items.push([`Agent: ${c.agent || app.agents[0]}…`, () => chooseAgent(c.chat_id)]);
  if (!threadId && !c.is_default) items.push(['Set as default', () => request('channel.set_default', {}, { chat_id: c.chat_id })]);
  if (c.chat_id !== 'default' && !c.is_default) items.push(['Delete', () => deleteChannel(c)]);
  popupMenu(ev.currentTarget, items);
}

async function createChannel(parent) {
  let payload;
  if (parent) {
    const name = await ask('New thread', 'Name', '');
    if (!name) return;
    payload = { name, kind: 'thread', parent_chat_id: parent };
  } else {
    // One tap: a chat without a name, on the default agent (its menu moves it to another);
    // the gateway names it from its first message.
    payload = { kind: 'channel' };
  }
  const res = await request('channel.create', payload);
  if (!res) return;
  showLane(parent || res.payload.chat_id, parent ? res.payload.chat_id : null);
  closeSidebar();
  $('composer-input').focus();
}

/** Moves a channel (and its threads) to another agent; the gateway says so in the channel. */
export async function chooseAgent(chatId) {
  const c = app.channels.get(chatId);
  if (!c || !manyAgents()) return;
  const answer = await askForm(`Agent of “${c.name}”`, { options: app.agents.map((a) => [a, a]), choice: c.agent, choiceLabel: 'Agent' });
  if (answer && answer.choice !== c.agent) request('channel.set_agent', { agent: answer.choice }, { chat_id: chatId });
}

async function renameChannel(c) {
  const name = await ask('Rename', 'Name', c.name);
  if (name && name !== c.name) request('channel.rename', { name }, { chat_id: c.chat_id });
}

async function deleteChannel(c) {
  const ok = await confirmDialog(`Delete “${c.name}”?`, 'Its messages and threads are deleted on every device. This cannot be undone.', 'Delete');
  if (ok) request('channel.delete', {}, { chat_id: c.chat_id });
}

/** `channel.list`, `channel.created`, `channel.renamed` and `channel.deleted`. */
export function onChannelFrame(frame) {
  const p = frame.payload;
  switch (frame.type) {
    case 'channel.list':
      setDirectory(p.channels || []);
      break;
    case 'channel.created':
      if (app.channels.has(p.chat_id)) break;
      app.channels.set(p.chat_id, {
        chat_id: p.chat_id, name: p.name, kind: p.kind, parent_chat_id: p.parent_chat_id || null, is_default: false, agent: p.agent,
        last_activity_at: p.last_activity_at || (frame.replayed ? 0 : Date.now()),
      });
      renderSidebar();
      break;
    case 'channel.renamed': {
      const c = app.channels.get(p.chat_id);
      if (c) c.name = p.name;
      renderSidebar();
      renderTitle();
      break;
    }
    case 'channel.deleted':
      onChannelDeleted(p);
      break;
    default:
      break;
  }
}

/** A channel and its threads are gone: drop their lanes, and leave them if one is shown. */
function onChannelDeleted(p) {
  const gone = new Set([p.chat_id, ...(p.thread_ids || [])]);
  for (const id of gone) app.channels.delete(id);
  for (const [key, lane] of app.lanes) {
    if (gone.has(lane.chat_id) || (lane.thread_id && gone.has(lane.thread_id))) app.lanes.delete(key);
  }
  if (gone.has(app.current.chat_id) || (app.current.thread_id && gone.has(app.current.thread_id))) {
    showLane(defaultChannel().chat_id, null);
  }
  renderSidebar();
}
