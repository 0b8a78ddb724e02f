// The chat list: channels with their threads under them, unread counts and the current chat,
// each row's actions (new thread, rename, set as default, delete), the `channel.*` frames that
// keep the directory in step with the gateway, and on narrow screens the drawer the list lives
// in. With more than one agent behind the gateway (`hello.ack.server_caps.agents`) each channel
// shows its agent, a new channel is given one, and a channel's menu moves it to another
// (`channel.set_agent`). Opening a chat goes through the transcript's `showLane`.

import { icon } from './icons.js';
import { $, app, defaultChannel } from './state.js';
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

/** Replaces the directory (hello.ack, `channel.list`). */
export function setDirectory(list) {
  app.channels = new Map(list.map((c) => [c.chat_id, c]));
  renderSidebar();
  renderTitle();
}

export function renderSidebar() {
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
    h('span', { class: 'chan-icon', 'aria-hidden': 'true' }, icon(threadId ? 'thread' : 'hash')),
    h('span', { class: 'chan-name' }, c.name),
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
    const agents = manyAgents() ? app.agents.map((a) => [a, a]) : [];
    const answer = await askForm('New channel', { name: '', options: agents, choice: app.agents[0], choiceLabel: 'Agent' });
    if (!answer) return;
    payload = { name: answer.name, kind: 'channel' };
    if (answer.choice) payload.agent = answer.choice;
  }
  const res = await request('channel.create', payload);
  if (!res) return;
  showLane(parent || res.payload.chat_id, parent ? res.payload.chat_id : null);
  closeSidebar();
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
      app.channels.set(p.chat_id, { chat_id: p.chat_id, name: p.name, kind: p.kind, parent_chat_id: p.parent_chat_id || null, is_default: false, agent: p.agent });
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
